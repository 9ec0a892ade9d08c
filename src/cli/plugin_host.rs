//! `mfstream plugin-host`: the child that runs a plugin out of process.

use anyhow::Result;

use super::{PluginHostAction, PluginHostArgs};
use crate::Outcome;

/// Describes a plugin, or serves one query of it on stdin and stdout.
pub(crate) fn plugin_host(args: PluginHostArgs) -> Result<Outcome> {
    match args.action {
        PluginHostAction::Describe { lib } => match mfstream_engine::plugin_host::describe(&lib) {
            Ok(json) => {
                println!("{json}");
                Ok(Outcome::Success)
            }
            Err(reason) => Ok(Outcome::InvalidConfig(reason.to_string())),
        },
        PluginHostAction::Run { lib, engine, .. } => {
            match mfstream_engine::plugin_host::serve(&lib, &engine) {
                Ok(()) => Ok(Outcome::Success),
                Err(reason) => Ok(Outcome::QueryFailed(reason.to_string())),
            }
        }
    }
}

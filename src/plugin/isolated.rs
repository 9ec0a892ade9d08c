//! The host side of `isolation = "process"`: a plugin's engines run as
//! bridge jobs of the `mfstream` binary itself (`mfstream plugin-host run`),
//! so a plugin that crashes fails its query and nothing else.

use std::path::{Path, PathBuf};
use std::process::Command;

use async_trait::async_trait;

use super::load::{PluginError, PluginErrorKind, check_file};
use super::serves;
use crate::bridge::{BridgeEngine, BridgeOptions, Framing};
use crate::engine::{EngineError, EngineInfo, EngineKind, QueryHandle, Source, StreamEngine};
use crate::spec::QuerySpec;

/// The variable naming the `mfstream` binary that hosts isolated plugins;
/// the running executable when unset.
pub const PLUGIN_HOST_VAR: &str = "MFSTREAM_PLUGIN_HOST";

/// An engine of a plugin that runs out of process.
#[derive(Debug)]
pub struct IsolatedEngine {
    bridge: BridgeEngine,
    description: String,
    serves: u32,
    /// Why the engine cannot run queries, as its `ready` said in the child.
    not_ready: Option<String>,
}

#[async_trait]
impl StreamEngine for IsolatedEngine {
    fn name(&self) -> &str {
        self.bridge.name()
    }

    fn describe(&self) -> EngineInfo {
        EngineInfo {
            name: self.bridge.name().to_owned(),
            kind: EngineKind::Plugin,
            ready: self.not_ready.is_none(),
            reason: self.not_ready.clone(),
            description: self.description.clone(),
            serves: serves(self.serves),
        }
    }

    async fn submit(&self, spec: QuerySpec, source: Source) -> Result<QueryHandle, EngineError> {
        if let Some(reason) = &self.not_ready {
            return Err(EngineError::Start {
                engine: self.bridge.name().to_owned(),
                reason: format!("the engine is not ready: {reason}"),
            });
        }
        self.bridge.submit(spec, source).await
    }
}

/// The engines of the plugin at `path`, described by a child running
/// `host` (the `mfstream` binary), each to be run by such a child.
pub(crate) fn describe(path: &Path, host: &Path) -> Result<Vec<IsolatedEngine>, PluginError> {
    check_file(path)?;
    let error = |kind| PluginError {
        path: path.to_owned(),
        line: 0,
        kind,
    };
    let output = Command::new(host)
        .args(["plugin-host", "describe"])
        .arg(path)
        .output()
        .map_err(|e| {
            error(PluginErrorKind::Isolation(format!(
                "cannot run {} to load the plugin out of process: {e} (set {PLUGIN_HOST_VAR} to the mfstream binary)",
                host.display()
            )))
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let said = stderr.trim().trim_start_matches("mfstream: ");
        let text = if said.is_empty() {
            format!(
                "loading the plugin in a child process failed: it {}",
                crate::bridge::describe_exit(output.status)
            )
        } else {
            said.to_owned()
        };
        return Err(error(PluginErrorKind::Child(text)));
    }
    let descriptor: Descriptor = serde_json::from_slice(&output.stdout).map_err(|e| {
        error(PluginErrorKind::Child(format!(
            "the plugin host printed an invalid descriptor: {e}"
        )))
    })?;
    Ok(descriptor
        .engines
        .into_iter()
        .map(|engine| {
            let argv = vec![
                host.display().to_string(),
                "plugin-host".into(),
                "run".into(),
                path.display().to_string(),
                engine.name.clone(),
            ];
            let mut options = BridgeOptions::new(engine.name, argv);
            options.framing = Framing::Json;
            options.description = engine.description.clone();
            IsolatedEngine {
                bridge: BridgeEngine::new(options),
                description: engine.description,
                serves: engine.serves,
                not_ready: engine.not_ready,
            }
        })
        .collect())
}

/// The binary that hosts isolated plugins: `$MFSTREAM_PLUGIN_HOST`, else
/// the running executable.
pub(crate) fn host_binary(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    env(PLUGIN_HOST_VAR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::current_exe().ok())
}

#[derive(serde::Deserialize)]
struct Descriptor {
    engines: Vec<DescribedEngine>,
}

#[derive(serde::Deserialize)]
struct DescribedEngine {
    name: String,
    description: String,
    serves: u32,
    not_ready: Option<String>,
}

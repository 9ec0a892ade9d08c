//! `mfstream engines` and `mfstream check`.

use std::io::Write;

use anyhow::{Context, Result};
use mfstream_registry::config::Config;
use mfstream_registry::{Registry, RegistryError};

use super::{ConfigArgs, EnginesArgs};
use crate::Outcome;

/// Lists every engine with its kind, readiness and why not ready.
pub(crate) fn engines(args: EnginesArgs) -> Result<Outcome> {
    let path = Registry::discover(args.config.config.as_deref());
    let registry = Registry::load(path.as_deref())?;
    let default = registry.default_name();
    let infos = registry.engines();
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &registry.listing())
            .context("cannot write to stdout")?;
        writeln!(out)?;
        return Ok(Outcome::Success);
    }
    let width = infos.iter().map(|i| i.name.len()).max().unwrap_or(4).max(4) + 1;
    writeln!(
        out,
        "{:width$} {:9} {:5} {:29} {:10} DESCRIPTION",
        "NAME", "KIND", "READY", "SERVES", "AGGREGATES"
    )?;
    for info in &infos {
        let name = if info.name == default {
            format!("{}*", info.name)
        } else {
            info.name.clone()
        };
        let ready = if info.ready { "yes" } else { "no" };
        let serves = info.serves.to_string();
        // A plugin engine says which plugin ABI version it speaks.
        let kind = match info.abi_version {
            Some(version) => format!("{} v{version}", info.kind),
            None => info.kind.to_string(),
        };
        writeln!(
            out,
            "{name:width$} {kind:9} {ready:5} {serves:29} {:10} {}",
            info.aggregates_in.as_str(),
            info.description
        )?;
        if let Some(reason) = &info.reason {
            writeln!(out, "{:width$} └ not ready: {reason}", "")?;
        }
    }
    let from = match registry.path() {
        Some(path) => format!("from {}", path.display()),
        None => "no engines.toml: the built-in engines alone".into(),
    };
    // A default named by $MFAPI_STREAM_ENGINE that is no engine is not in
    // the table: say so, rather than mark nothing and leave `run` to fail.
    match registry.get_default() {
        Err(e @ RegistryError::UnknownDefault { .. }) => {
            writeln!(out, "\n! no default engine: {e}")?
        }
        _ => writeln!(out, "\n* default engine ({from})")?,
    }
    Ok(Outcome::Success)
}

/// Validates engines.toml: exit 0 when all is well, else every error, each
/// starting `mfstream: ` as every other error does.
pub(crate) fn check(args: ConfigArgs) -> Result<Outcome> {
    let Some(path) = Registry::discover(args.config.as_deref()) else {
        println!(
            "no engines.toml found (--config, $MFSTREAM_CONFIG, ./engines.toml): the built-in engines alone"
        );
        return Ok(Outcome::Success);
    };
    // A file that cannot be read is a setup error (exit 2), as for `run`
    // and `engines`; a file with problems is what `check` reports (exit 1).
    let config = match Config::from_file(&path) {
        Ok(config) => config,
        Err(e) if e.io_error().is_some() => return Err(e.into()),
        Err(e) => {
            let problems: Vec<String> = e
                .rendered()
                .iter()
                .map(|problem| format!("mfstream: {problem}"))
                .collect();
            return Ok(Outcome::InvalidConfig(problems.join("\n\n")));
        }
    };
    let registry = Registry::from_config(&config);
    let plugin_errors = registry.plugin_errors();
    if !plugin_errors.is_empty() {
        let lines: Vec<String> = plugin_errors
            .iter()
            .map(|error| match error.line {
                Some(line) => format!("mfstream: {}:{line}: {error}", path.display()),
                None => format!("mfstream: {}: {error}", path.display()),
            })
            .collect();
        return Ok(Outcome::InvalidConfig(lines.join("\n")));
    }
    let infos = registry.engines();
    let ready = infos.iter().filter(|i| i.ready).count();
    println!(
        "{}: ok, {} engines, {ready} ready",
        path.display(),
        infos.len()
    );
    for info in infos.iter().filter(|i| !i.ready) {
        println!(
            "  {} is not ready: {}",
            info.name,
            info.reason.as_deref().unwrap_or("")
        );
    }
    Ok(Outcome::Success)
}

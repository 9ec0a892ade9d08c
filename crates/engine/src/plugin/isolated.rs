//! The host side of `isolation = "process"`: a plugin's engines run as
//! bridge jobs of the `mfstream` binary itself (`mfstream plugin-host run`),
//! so a plugin that crashes fails its query and nothing else.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use async_trait::async_trait;

use super::error::{PluginError, PluginErrorKind};
use super::load::check_file;
use crate::bridge::{BridgeEngine, BridgeOptions, Framing};
use crate::{
    AggregatesIn, EngineError, EngineInfo, EngineKind, QueryHandle, Serves, Source, StreamEngine,
};
use mfstream_model::QuerySpec;

/// The variable naming the `mfstream` binary that hosts isolated plugins;
/// the running executable when unset.
pub const PLUGIN_HOST_VAR: &str = "MFSTREAM_PLUGIN_HOST";

/// How long loading an isolated plugin's library may take.
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(30);

/// An engine of a plugin that runs out of process.
#[derive(Debug)]
pub struct IsolatedEngine {
    bridge: BridgeEngine,
    description: String,
    /// What the plugin declared it serves.
    serves: Serves,
    /// Whether it runs position queries (ABI version 3).
    positions: bool,
    /// The plugin's ABI version.
    abi_version: u32,
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
            abi_version: Some(self.abi_version),
            name: self.bridge.name().to_owned(),
            kind: EngineKind::Plugin,
            ready: self.not_ready.is_none(),
            reason: self.not_ready.clone(),
            description: self.description.clone(),
            serves: super::serves::engine_serves(self.serves, self.positions),
            aggregates_in: AggregatesIn::Host,
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
    let error = |kind| PluginError::new(path, kind);
    let output = run_describe(host, path).map_err(error)?;
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
    let descriptor = Described::parse(&output.stdout, host).map_err(error)?;
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
            // The child speaks protocol 2 (error lines) for a plugin that
            // reports its own bad records; for a version-1 plugin, the
            // host's guard keeps them from it, as from a version-1 job.
            options.protocol = if engine.abi_version >= 2 { 2 } else { 1 }.into();
            options.description = engine.description.clone();
            let declared = super::serves::from_abi(engine.serves, engine.abi_version);
            // The child answers position queries in the bridge protocol's
            // position pairing (`child::serve_positions`).
            options.positions = declared.positions;
            IsolatedEngine {
                bridge: BridgeEngine::new(options),
                description: engine.description,
                serves: declared.known,
                positions: declared.positions,
                abi_version: engine.abi_version,
                not_ready: engine.not_ready,
            }
        })
        .collect())
}

/// Runs `host plugin-host describe path`, killing it if it has not ended
/// within [`DESCRIBE_TIMEOUT`] (a library whose initialiser hangs must not
/// hang the registry).
fn run_describe(host: &Path, path: &Path) -> Result<Output, PluginErrorKind> {
    let mut child = Command::new(host)
        .args(["plugin-host", "describe"])
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            PluginErrorKind::Isolation(format!(
                "cannot run {} to load the plugin out of process: {e} (set {PLUGIN_HOST_VAR} to the mfstream binary)",
                host.display()
            ))
        })?;
    // Each pipe is drained on a thread of its own, so that neither can fill
    // up and stall the child; both end when the child (and anything it left
    // holding them) has gone.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            let _ = tx.send(bytes);
        });
        rx
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let Ok(out) = stdout.recv_timeout(DESCRIBE_TIMEOUT) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(PluginErrorKind::Isolation(format!(
            "loading the plugin in a child process did not finish within {} s; it was killed",
            DESCRIBE_TIMEOUT.as_secs()
        )));
    };
    let status = child.wait().map_err(|e| {
        PluginErrorKind::Isolation(format!("waiting for the plugin host failed: {e}"))
    })?;
    let err = stderr.recv_timeout(DESCRIBE_TIMEOUT).unwrap_or_default();
    Ok(Output {
        status,
        stdout: out,
        stderr: err,
    })
}

/// The binary that hosts isolated plugins: `$MFSTREAM_PLUGIN_HOST`, else
/// the running executable if it is `mfstream`.
///
/// Another program using this library (a control plane of its own, a test)
/// cannot serve as the host: run with its arguments it would do whatever
/// that program does, so it is refused at once, naming the variable.
pub(crate) fn host_binary(
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<PathBuf, PluginErrorKind> {
    if let Some(host) = env(PLUGIN_HOST_VAR).filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(host));
    }
    let exe = std::env::current_exe().map_err(|e| {
        PluginErrorKind::Isolation(format!(
            "cannot find the mfstream binary to run the plugin in ({e}): set {PLUGIN_HOST_VAR}"
        ))
    })?;
    if exe.file_name().is_some_and(|name| name == "mfstream") {
        Ok(exe)
    } else {
        Err(PluginErrorKind::Isolation(format!(
            "isolation = \"process\" runs the plugin in a child of the mfstream binary, but this \
             program ({}) is not mfstream: set {PLUGIN_HOST_VAR} to the mfstream binary",
            exe.display()
        )))
    }
}

/// The version of the `describe` exchange; the host refuses another.
pub(crate) const DESCRIBE_PROTOCOL: u32 = 1;

/// What `mfstream plugin-host describe` prints: the plugin's descriptor,
/// as the child loaded and checked it. One type on both sides; the host
/// reads `protocol` before anything else.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Described {
    /// [`DESCRIBE_PROTOCOL`] of the child.
    pub protocol: u32,
    /// The plugin's name.
    pub name: String,
    /// The plugin's version.
    pub version: String,
    /// Its engines.
    pub engines: Vec<DescribedEngine>,
}

/// One engine of a [`Described`] plugin.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct DescribedEngine {
    pub name: String,
    pub description: String,
    /// The `MFS_SERVES_*` bits.
    pub serves: u32,
    /// Why the engine cannot run queries, as its `ready` said in the child.
    pub not_ready: Option<String>,
    /// The plugin's ABI version: from 2 it reports a record with no result
    /// itself; for 1 the host's bridge keeps such records from it.
    #[serde(default = "abi_1")]
    pub abi_version: u32,
}

/// A child that does not say its plugin's ABI version: 1, the safe guess.
fn abi_1() -> u32 {
    1
}

impl Described {
    /// Reads what the child at `host` printed, checking its version first.
    fn parse(stdout: &[u8], host: &Path) -> Result<Described, PluginErrorKind> {
        #[derive(serde::Deserialize)]
        struct Head {
            protocol: Option<u32>,
        }
        let invalid = |e: serde_json::Error| {
            PluginErrorKind::Child(format!(
                "the plugin host {} printed no valid descriptor ({e}): is {PLUGIN_HOST_VAR} the \
                 mfstream binary?",
                host.display()
            ))
        };
        let head: Head = serde_json::from_slice(stdout).map_err(invalid)?;
        match head.protocol {
            Some(DESCRIBE_PROTOCOL) => serde_json::from_slice(stdout).map_err(invalid),
            found => Err(PluginErrorKind::Child(format!(
                "the plugin host {} speaks describe protocol {}, but this mfstream speaks {}: \
                 point {PLUGIN_HOST_VAR} at the mfstream binary of this version",
                host.display(),
                found.map_or_else(|| "0 (unversioned)".to_owned(), |v| v.to_string()),
                DESCRIBE_PROTOCOL
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_reads_a_descriptor_of_its_own_protocol_and_refuses_others_naming_both() {
        let host = Path::new("/bin/mfstream");
        let ok = br#"{"protocol":1,"name":"p","version":"1","engines":[
            {"name":"e","description":"d","serves":1,"not_ready":null}]}"#;
        let described = Described::parse(ok, host).unwrap();
        assert_eq!(described.engines[0].name, "e");

        let old = br#"{"name":"p","version":"1","engines":[]}"#;
        let error = Described::parse(old, host).unwrap_err().to_string();
        assert!(
            error.contains("speaks describe protocol 0 (unversioned), but this mfstream speaks 1"),
            "{error}"
        );
        let error = Described::parse(b"running 0 tests\n", host)
            .unwrap_err()
            .to_string();
        assert!(error.contains("printed no valid descriptor"), "{error}");
    }
}

//! The generic subprocess bridge: every `[[engine]]` of `engines.toml` runs
//! its queries as child processes speaking the bridge line protocol.

use std::time::Duration;

use async_trait::async_trait;

use crate::engine::{EngineError, EngineInfo, EngineKind, QueryHandle, Source, StreamEngine};
use crate::spec::QuerySpec;

/// How records cross the job's stdin and stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Framing {
    /// One number per line each way, answers in order (the seed's contract).
    #[default]
    Value,
    /// One JSON instant per line in, one JSON event per line out.
    Json,
}

/// Restarting a job that dies, with exponential backoff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Restarts allowed per query.
    pub max_restarts: u32,
    /// The wait before the first restart; doubled each time.
    pub backoff: Duration,
    /// The longest wait between restarts.
    pub backoff_max: Duration,
}

/// Everything a bridge engine needs to run a job, resolved from its
/// `engines.toml` entry and the environment.
#[derive(Debug, Clone, PartialEq)]
pub struct BridgeOptions {
    /// The engine's registry name.
    pub name: String,
    /// A line for people.
    pub description: String,
    /// The job's command prefix, split into words.
    pub argv: Vec<String>,
    /// A library path prepended to the job's `LD_LIBRARY_PATH`.
    pub libpath: Option<String>,
    /// How records are framed.
    pub framing: Framing,
    /// How long a stopping job may take to finish before SIGTERM, and again
    /// before SIGKILL.
    pub stop_grace: Duration,
    /// Records sent but not yet answered, at most (`value` framing).
    pub max_in_flight: usize,
    /// Fail the query when the job holds unanswered records this long.
    pub no_progress_timeout: Option<Duration>,
    /// Restart a job that dies; off when `None`.
    pub restart: Option<RestartPolicy>,
    /// Extra environment variables for the job.
    pub env: Vec<(String, String)>,
}

impl BridgeOptions {
    /// Options with the defaults for a job run as `argv`.
    pub fn new(name: impl Into<String>, argv: Vec<String>) -> BridgeOptions {
        BridgeOptions {
            name: name.into(),
            description: String::new(),
            argv,
            libpath: None,
            framing: Framing::Value,
            stop_grace: Duration::from_secs(5),
            max_in_flight: 65_536,
            no_progress_timeout: None,
            restart: None,
            env: Vec::new(),
        }
    }
}

/// An engine that runs each query as a bridge job.
#[derive(Debug)]
pub struct BridgeEngine {
    options: BridgeOptions,
}

impl BridgeEngine {
    /// An engine running jobs with `options`.
    pub fn new(options: BridgeOptions) -> BridgeEngine {
        BridgeEngine { options }
    }

    /// The engine's options.
    pub fn options(&self) -> &BridgeOptions {
        &self.options
    }
}

#[async_trait]
impl StreamEngine for BridgeEngine {
    fn name(&self) -> &str {
        &self.options.name
    }

    fn describe(&self) -> EngineInfo {
        EngineInfo {
            name: self.options.name.clone(),
            kind: EngineKind::Bridge,
            ready: true,
            reason: None,
            description: self.options.description.clone(),
            serves: vec!["transform"],
        }
    }

    async fn submit(&self, _spec: QuerySpec, _source: Source) -> Result<QueryHandle, EngineError> {
        Err(EngineError::Start {
            engine: self.options.name.clone(),
            reason: "not yet built".into(),
        })
    }
}

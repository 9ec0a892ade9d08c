//! A bridge engine's options: each defined once, with its default and its
//! range, and each tunable one carrying where its value came from.
//!
//! `engines.toml` (`mfstream-registry`'s `config`) reads its integer keys
//! through the [`BridgeSetting`]s below (the key, the range it checks, the
//! default when the key is unset) and gives each value its
//! [`Origin`]: the file's line, or the default of the entry. A program
//! that builds [`BridgeOptions`] itself starts from [`BridgeOptions::new`]
//! (the same defaults) and sets what it wants (`options.max_in_flight =
//! 100.into()`, an origin of its own). A failure about a value then says
//! where that value came from.

use std::time::Duration;

use mfstream_model::origin::{Origin, Value};

/// One integer key of an `[[engine]]` entry: its name, the values it
/// takes, and the value when it is unset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BridgeSetting {
    /// The key in `engines.toml`.
    pub key: &'static str,
    /// The least value.
    pub min: u64,
    /// The greatest value.
    pub max: u64,
    /// The value when the key is unset.
    pub default: u64,
}

/// How long a job may leave records waiting, unanswered (`value` framing)
/// or unread (`json`), before the query fails, unless configured otherwise
/// ([`BridgeOptions::NO_PROGRESS_TIMEOUT_MS`]).
///
/// Long enough for a JVM runtime to start with records already waiting
/// (Spark, Flink: seconds to tens of seconds on a busy machine) and for
/// micro-batches and commit intervals (Kafka Streams' 30 s default); short
/// enough that a hung job is a failure with its reason, not a query that
/// stalls forever.
pub const DEFAULT_NO_PROGRESS_TIMEOUT: Duration =
    Duration::from_millis(BridgeOptions::NO_PROGRESS_TIMEOUT_MS.default);

/// How records cross the job's stdin and stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Framing {
    /// One number per line each way, answers in order (the seed's contract).
    #[default]
    Value,
    /// One JSON instant per line in, one JSON event per line out.
    Json,
}

impl Framing {
    /// The framing's name, as `engines.toml` and `MFSTREAM_FRAMING` spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Framing::Value => "value",
            Framing::Json => "json",
        }
    }
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

impl RestartPolicy {
    /// `[engine.restart]`'s `max`: required when the table is there (the
    /// default is only what a bad value is read as, so that the other
    /// checks go on).
    pub const MAX: BridgeSetting = BridgeSetting {
        key: "restart.max",
        min: 1,
        max: 1_000,
        default: 1,
    };
    /// `[engine.restart]`'s `backoff_ms`.
    pub const BACKOFF_MS: BridgeSetting = BridgeSetting {
        key: "restart.backoff_ms",
        min: 1,
        max: 600_000,
        default: 100,
    };
    /// `[engine.restart]`'s `backoff_max_ms`: at least `backoff_ms`.
    pub const BACKOFF_MAX_MS: BridgeSetting = BridgeSetting {
        key: "restart.backoff_max_ms",
        min: 1,
        max: u64::MAX,
        default: 10_000,
    };
}

/// Everything a bridge engine needs to run a job, resolved from its
/// `engines.toml` entry and the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// Whether the job computes windowed aggregates itself (`json` framing
    /// only); otherwise the host aggregates the job's transformed outputs.
    pub aggregates: bool,
    /// Whether the job serves queries on positions (`json` framing only):
    /// it computes each instant's measure, the instant itself, or a
    /// geofence's detections (jobs/README.md, "Positions").
    pub positions: bool,
    /// The protocol version the job speaks: 1 (the default), or 2 (it
    /// answers a record it cannot compute with an error line, as
    /// jobs/README.md says; the host speaks 2 and tells every job so in
    /// `MFSTREAM_PROTOCOL`) ([`BridgeOptions::PROTOCOL`]).
    pub protocol: Value<u32>,
    /// How long a stopping job may take to finish before SIGTERM, and again
    /// before SIGKILL ([`BridgeOptions::STOP_GRACE_MS`]).
    pub stop_grace: Value<Duration>,
    /// Records sent but not yet answered, at most (`value` framing)
    /// ([`BridgeOptions::MAX_IN_FLIGHT`]).
    pub max_in_flight: Value<usize>,
    /// Fail the query when the job leaves records unanswered (`value`
    /// framing) or unread (`json`) this long; two minutes by default, never
    /// when `None` ([`BridgeOptions::NO_PROGRESS_TIMEOUT_MS`]).
    pub no_progress_timeout: Value<Option<Duration>>,
    /// Restart a job that dies; off when `None`.
    pub restart: Option<RestartPolicy>,
    /// Extra environment variables for the job.
    pub env: Vec<(String, String)>,
}

impl BridgeOptions {
    /// `protocol`: the bridge protocol version the job speaks.
    pub const PROTOCOL: BridgeSetting = BridgeSetting {
        key: "protocol",
        min: 1,
        max: 2,
        default: 1,
    };
    /// `stop_grace_ms`: how long a stopping job may take, in milliseconds.
    pub const STOP_GRACE_MS: BridgeSetting = BridgeSetting {
        key: "stop_grace_ms",
        min: 0,
        max: 600_000,
        default: 5_000,
    };
    /// `max_in_flight`: records sent and not yet answered, at most.
    pub const MAX_IN_FLIGHT: BridgeSetting = BridgeSetting {
        key: "max_in_flight",
        min: 1,
        max: 16_777_216,
        default: 65_536,
    };
    /// `no_progress_timeout_ms`: how long a job may leave records waiting
    /// ([`DEFAULT_NO_PROGRESS_TIMEOUT`]).
    pub const NO_PROGRESS_TIMEOUT_MS: BridgeSetting = BridgeSetting {
        key: "no_progress_timeout_ms",
        min: 1,
        max: 86_400_000,
        default: 120_000,
    };

    /// Options with the defaults for a job run as `argv` (each tunable
    /// value's origin [`Origin::Default`]).
    pub fn new(name: impl Into<String>, argv: Vec<String>) -> BridgeOptions {
        BridgeOptions {
            name: name.into(),
            description: String::new(),
            argv,
            libpath: None,
            framing: Framing::Value,
            aggregates: false,
            positions: false,
            protocol: Value::new(BridgeOptions::PROTOCOL.default as u32, Origin::Default),
            stop_grace: Value::new(
                Duration::from_millis(BridgeOptions::STOP_GRACE_MS.default),
                Origin::Default,
            ),
            max_in_flight: Value::new(
                BridgeOptions::MAX_IN_FLIGHT.default as usize,
                Origin::Default,
            ),
            no_progress_timeout: Value::new(Some(DEFAULT_NO_PROGRESS_TIMEOUT), Origin::Default),
            restart: None,
            env: Vec::new(),
        }
    }
}

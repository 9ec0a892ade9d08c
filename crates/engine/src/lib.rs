//! The engine seam of mfstream and the engines it ships.
//!
//! - The seam: the [`StreamEngine`] trait every engine implements, the
//!   [`Source`] a query reads and the [`QueryHandle`] its caller holds
//!   (`submit(spec, source)` starts a query; the handle has its events,
//!   live status and `stop`).
//! - The engines: [`LocalEngine`], built in, runs every query in process;
//!   a [`BridgeEngine`] runs each query as a child process speaking the
//!   bridge's line protocol on stdin and stdout (a Flink, Spark or Beam
//!   job, …); a [`plugin::PluginEngine`] (or [`plugin::IsolatedEngine`])
//!   runs native code behind the C ABI of the `mfstream-plugin` crate.
//!
//! What a query is (its [`QuerySpec`], the [`Instant`]s it reads, the
//! [`Event`]s it gives) is `mfstream-model`'s; which engine has which
//! name, from `engines.toml`, is `mfstream-registry`'s.
//!
//! Instants travel in batches on both sides, so that the cost of crossing a
//! channel is paid once per batch, not once per record. Every channel is
//! bounded: a slow consumer slows the engine, which slows the source.
//!
//! # Where things are
//!
//! Every public item has exactly one path: the root re-exports only from
//! private modules (the seam's `info`, `source`, `progress` and `handle`;
//! `local`; `bridge`), and the public modules ([`plugin`], [`lines`]) only
//! from their own private submodules.
//!
//! ```
//! use mfstream_engine::{LocalEngine, Source, StreamEngine};
//! use mfstream_model::ops::Transform;
//! use mfstream_model::{Instant, QuerySpec, QueryStatus};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let engine = LocalEngine::new();
//! let spec = QuerySpec::transform("speed", Transform::new("mul", Some(2.0)).unwrap());
//! let source = Source::from_instants([Instant::number("2026-01-01T00:00:00Z", 1.5)]);
//! let mut query = engine.submit(spec, source).await.unwrap();
//! let event = query.next().await.unwrap();
//! assert_eq!(event.to_json(), r#"{"datetime":"2026-01-01T00:00:00Z","value":3,"property":"speed","operation":"mul"}"#);
//! assert!(query.next().await.is_none());
//! assert_eq!(query.status(), QueryStatus::Completed);
//! # });
//! ```
//!
//! [`QuerySpec`]: mfstream_model::QuerySpec
//! [`Instant`]: mfstream_model::Instant
//! [`Event`]: mfstream_model::Event

// The modules, public and private. A new module goes in its alphabetical
// place.
mod bridge;
mod handle;
mod info;
pub mod lines;
mod local;
mod plan;
pub mod plugin;
mod positions;
mod progress;
mod source;

use std::fmt;

use async_trait::async_trait;

use mfstream_model::QuerySpec;
use mfstream_model::SpecError;

pub use crate::bridge::{
    BridgeEngine, BridgeOptions, BridgeSetting, DEFAULT_NO_PROGRESS_TIMEOUT, Framing, RestartPolicy,
};
pub use crate::handle::{ConsumerGone, QueryHandle, QueryOutput};
pub use crate::info::{AggregatesIn, EngineInfo, EngineKind, Serves};
pub use crate::local::{LOCAL, LocalEngine};
pub use crate::progress::{Progress, ProgressSnapshot};
pub use crate::source::{Source, SourceClosed, SourceError, SourcePermit, SourceSender};

/// The number of instants a batch carries at most, by convention.
pub const BATCH: usize = 1024;

/// Event batches buffered between a query and its consumer, for every
/// engine: a slow consumer holds an engine back after this many.
pub(crate) const EVENT_BUFFER: usize = 16;

/// A stream engine: runs continuous queries.
#[async_trait]
pub trait StreamEngine: Send + Sync + fmt::Debug {
    /// The engine's registry name.
    fn name(&self) -> &str;

    /// What the engine is and whether it can run queries now.
    fn describe(&self) -> EngineInfo;

    /// Starts a query reading `source`.
    ///
    /// The query is validated first: an invalid or unsupported query is an
    /// error here, not a failed query later.
    async fn submit(&self, spec: QuerySpec, source: Source) -> Result<QueryHandle, EngineError>;
}

/// Whether `name` can name an engine (in `engines.toml`, or exported by a
/// plugin): `[a-z][a-z0-9_-]{0,62}`.
pub fn is_engine_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 63
        && chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// Why a query could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The query is invalid.
    #[error("invalid query: {0}")]
    InvalidQuery(#[from] SpecError),
    /// The engine could not start the query.
    #[error("the {engine} engine could not start the query: {reason}")]
    Start {
        /// The engine.
        engine: String,
        /// Why.
        reason: String,
    },
}

/// The child side of `isolation = "process"`, run by the `mfstream`
/// binary's hidden `plugin-host` command.
///
/// Hidden, not API: the binary is a separate crate, so it can reach these
/// only through a public path, but the protocol between a host and its
/// child is private to one build of the binary (the host runs its own
/// executable), so no one else should call them.
#[doc(hidden)]
pub mod plugin_host {
    pub use crate::plugin::child::{PluginHostError, describe, serve};
}

//! The seam: the [`StreamEngine`] trait every engine implements, the
//! [`Source`] a query reads and the [`QueryHandle`] its caller holds.
//!
//! Instants travel in batches on both sides, so that the cost of crossing a
//! channel is paid once per batch, not once per record. Every channel is
//! bounded: a slow consumer slows the engine, which slows the source.
//!
//! Each concept has its file, re-exported here: `info` (what an engine is
//! and serves), `source` (the instants a query reads), `progress` (a
//! query's record counts) and `handle` (a running query's two ends).

mod handle;
mod info;
mod progress;
mod source;

use std::fmt;

use async_trait::async_trait;

use crate::spec::QuerySpec;
use crate::spec_error::SpecError;

pub use handle::{ConsumerGone, QueryHandle, QueryOutput};
pub use info::{AggregatesIn, EngineInfo, EngineKind, Serves};
pub use progress::{Progress, ProgressSnapshot};
pub use source::{Source, SourceClosed, SourceError, SourcePermit, SourceSender};

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
pub(crate) fn is_engine_name(name: &str) -> bool {
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

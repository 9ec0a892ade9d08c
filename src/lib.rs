//! mfstream is a registry of stream engines for OGC API – Moving Features
//! continuous queries.
//!
//! A continuous query applies a lifted scalar operation (`ln`, `mul 1.852`, …)
//! or a windowed aggregate (`AVG` over a `TUMBLING` window of 10 seconds, …)
//! to a stream of temporal-property instants. The per-record work runs on a
//! *stream engine*: the in-process [`LocalEngine`], or an external runtime
//! (Flink, Spark, Beam, …) reached through a bridge job that speaks a line
//! protocol on stdin and stdout. The roles:
//!
//! - [`StreamEngine`] is the seam: `submit(spec, source)` starts a query and
//!   returns a [`QueryHandle`] with its events, live status and `stop`.
//! - [`Registry`] holds the engines by name: the built-in `local`, one
//!   [`BridgeEngine`] per `[[engine]]` entry of `engines.toml`, so a runtime is
//!   added by configuration, not code, and the [`PluginEngine`]s (or
//!   [`IsolatedEngine`]s) of its `[[plugin]]` libraries, native engines behind
//!   the C ABI of the `mfstream-plugin` crate.
//! - [`Instant`], [`QuerySpec`], [`Event`] and [`QueryStatus`] are the
//!   vocabulary every engine speaks.
//! - [`Windower`] computes an [`Aggregate`] over instants in event time,
//!   for any engine: the `local` engine, or a bridge host aggregating a
//!   job's outputs.
//! - [`Server`] is the control plane (`mfstream serve`): continuous queries
//!   on the registry's engines over HTTP, their results as Server-Sent
//!   Events, in the shape of OGC API – Moving Features Part 4.
//!
//! ```
//! use mfstream::{Instant, QuerySpec, QueryStatus, Registry, Source, Transform};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let registry = Registry::builtin();
//! let engine = registry.get("local").unwrap();
//! let spec = QuerySpec::transform("speed", Transform::new("mul", Some(2.0)).unwrap());
//! let source = Source::from_instants([Instant::number("2026-01-01T00:00:00Z", 1.5)]);
//! let mut query = engine.submit(spec, source).await.unwrap();
//! let event = query.next().await.unwrap();
//! assert_eq!(event.to_json(), r#"{"datetime":"2026-01-01T00:00:00Z","value":3,"property":"speed","operation":"mul"}"#);
//! assert!(query.next().await.is_none());
//! assert_eq!(query.status(), QueryStatus::Completed);
//! # });
//! ```

#![deny(missing_docs)]

mod aggregate;
mod bridge;
mod config;
mod datetime;
mod engine;
mod local;
mod ops;
mod plugin;
mod registry;
mod server;
mod spec;
pub mod store;
mod vocab;
mod window;

pub use crate::aggregate::{Aggregate, Aggregation, TimeUnit, Window};
pub use crate::bridge::{BridgeEngine, BridgeOptions, Framing, RestartPolicy};
pub use crate::config::{Config, ConfigError, ConfigProblem, EngineDef, PluginDef};
pub use crate::engine::{
    AggregatesIn, BATCH, ConsumerGone, EngineError, EngineInfo, EngineKind, Progress,
    ProgressSnapshot, QueryHandle, QueryOutput, Source, SourceClosed, SourceError, SourcePermit,
    SourceSender, StreamEngine, TryBatch,
};
pub use crate::local::{LOCAL, LocalEngine};
pub use crate::ops::{DomainError, Op, OpError, Transform};
pub use crate::plugin::{
    IsolatedEngine, Isolation, PLUGIN_HOST_VAR, PluginEngine, PluginError, PluginErrorKind,
};

/// The child side of `isolation = "process"`, run by the `mfstream`
/// binary's hidden `plugin-host` command.
#[doc(hidden)]
pub mod plugin_host {
    pub use crate::plugin::child::{describe, serve};
}
pub use crate::registry::{ListedEngine, Registry, RegistryError};
pub use crate::server::{ServeError, ServeOptions, Server};
pub use crate::spec::{QueryKind, QuerySpec, Registration, SpecError};
pub use crate::vocab::{
    Event, Instant, InstantEvent, PropertyType, QueryStatus, Value, WindowEvent,
};
pub use crate::window::Windower;

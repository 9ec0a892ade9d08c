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
//!
//! [`PluginEngine`]: plugin::PluginEngine
//! [`IsolatedEngine`]: plugin::IsolatedEngine
//! [`Windower`]: aggregate::Windower
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

// The crate root re-exports what a control plane uses; the modules made
// public group the rest: `engine` for authors of engines (the engine's side
// of a query), `aggregate` for the windower any engine can use, `plugin`,
// `config` and `ops` for their entries, options and errors.
pub mod aggregate;
mod bridge;
mod budget;
mod clock;
pub mod config;
mod datetime;
pub mod engine;
pub mod lines;
mod local;
mod on_error;
pub mod ops;
mod plan;
pub mod plugin;
mod registry;
mod server;
mod spec;
mod spec_error;
pub mod store;
mod vocab;

pub use crate::aggregate::{Aggregate, TimeUnit, Window};
pub use crate::bridge::{BridgeEngine, BridgeOptions, Framing, RestartPolicy};
pub use crate::budget::{
    DEFAULT_MAX_QUERY_STATE, DEFAULT_MAX_TOTAL_QUERY_STATE, StateBudget, StateTotal,
};
pub use crate::clock::{ClockRelease, WallClock};
pub use crate::config::{Config, ConfigError};
pub use crate::engine::{
    AggregatesIn, BATCH, EngineError, EngineInfo, EngineKind, ProgressSnapshot, QueryHandle,
    Serves, Source, SourceClosed, SourceError, SourcePermit, SourceSender, StreamEngine,
};
pub use crate::local::{LOCAL, LocalEngine};
pub use crate::on_error::OnError;
pub use crate::ops::{Op, Transform};
pub use crate::plugin::PLUGIN_HOST_VAR;
pub use crate::registry::{ListedEngine, Registry, RegistryError};
pub use crate::server::{MqttIngest, ServeError, ServeOptions, Server};
pub use crate::spec::{QueryKind, QuerySpec, Registration};
pub use crate::spec_error::SpecError;
pub use crate::vocab::{
    Aggregation, Event, Instant, InstantEvent, PropertyType, QueryStatus, Value, WindowEvent,
};

/// The child side of `isolation = "process"`, run by the `mfstream`
/// binary's hidden `plugin-host` command.
#[doc(hidden)]
pub mod plugin_host {
    pub use crate::plugin::child::{describe, serve};
}

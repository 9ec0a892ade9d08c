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
//! # Where things are
//!
//! Every public item has exactly one path. The root holds what a control
//! plane names to run queries: the [`Registry`] and the engines it ships
//! ([`LocalEngine`], [`BridgeEngine`]), the query vocabulary ([`QuerySpec`],
//! [`Registration`], [`Instant`], [`Value`], [`Event`], [`QueryStatus`] …),
//! the [`Server`], and their errors. Each public module is one concept's
//! API, read qualified (`engine::Source`, `store::Store`):
//!
//! - [`engine`], the seam a control plane drives and an engine author
//!   implements: [`StreamEngine`], [`Source`], [`QueryHandle`], progress
//!   counts, what an engine says of itself;
//! - [`aggregate`], windows and the [`Windower`] any engine can use;
//! - [`ops`], the lifted operations of a transform query;
//! - [`config`], `engines.toml`;
//! - [`plugin`], engines from native plugin libraries;
//! - [`store`], the durable state of `mfstream serve --state`;
//! - [`lines`], the bounded line reader of every line protocol.
//!
//! So the root re-exports only from private modules, and a public module
//! only from its own private submodules (tests/public_api.rs checks
//! both); what nothing outside the crate uses is `pub(crate)` (the
//! `unreachable_pub` lint checks that). The enums a caller matches on and
//! that will grow (errors, [`Value`], [`PropertyType`], [`QueryKind`],
//! [`Event`] …) are `#[non_exhaustive]`: match them with a wildcard arm.
//!
//! [`StreamEngine`]: engine::StreamEngine
//! [`QueryHandle`]: engine::QueryHandle
//! [`Source`]: engine::Source
//! [`PluginEngine`]: plugin::PluginEngine
//! [`IsolatedEngine`]: plugin::IsolatedEngine
//! [`Windower`]: aggregate::Windower
//! [`Aggregate`]: aggregate::Aggregate
//!
//! ```
//! use mfstream::engine::Source;
//! use mfstream::ops::Transform;
//! use mfstream::{Instant, QuerySpec, QueryStatus, Registry};
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
// `pub` means API: an item nothing outside the crate can reach is
// `pub(crate)` (`cargo fix --lib` applies the lint's suggestions), and every
// type in a public signature has a path.
#![warn(unreachable_pub, unnameable_types)]

// The modules, public and private; see "Where things are" above. A new
// module goes in its alphabetical place.
pub mod aggregate;
mod bridge;
mod budget;
mod clock;
mod compute;
pub mod config;
mod datetime;
pub mod engine;
mod geo;
pub mod lines;
mod local;
mod on_error;
pub mod ops;
mod plan;
pub mod plugin;
mod position;
mod registry;
mod server;
mod spec;
mod spec_error;
pub mod store;
mod vocab;

// The root's items: one line per private module, in the modules' order.
// Nothing here may come from a public module: its items have their path
// there already.
pub use crate::bridge::{BridgeEngine, BridgeOptions, Framing, RestartPolicy};
pub use crate::budget::{
    DEFAULT_MAX_QUERY_STATE, DEFAULT_MAX_TOTAL_QUERY_STATE, StateBudget, StateTotal,
};
pub use crate::clock::{ClockRelease, WallClock};
pub use crate::compute::{Compute, ComputePool, CpuLimit, CpuLimitError};
pub use crate::local::{LOCAL, LocalEngine};
pub use crate::on_error::OnError;
pub use crate::position::PositionQuery;
pub use crate::registry::{ListedEngine, Registry, RegistryError};
pub use crate::server::{
    DEFAULT_MAX_DATETIME_AHEAD, KafkaIngest, MqttIngest, ServeError, ServeOptions, Server,
};
pub use crate::spec::{QueryKind, QuerySpec, Registration, RegistrationError};
pub use crate::spec_error::{SpecError, SpecErrorKind};
pub use crate::vocab::{
    Aggregation, DetectEvent, Event, EventKind, Instant, InstantEvent, Point, PropertyType,
    QueryStatus, Value, WindowEvent,
};

// The Rust examples of README and of the book's chapters that have any
// (docs/src) run as doctests (`cargo test --doc`); their other code blocks
// are marked (`sh`, `text`, `toml` …) so that rustdoc skips them.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
#[cfg(doctest)]
#[doc = include_str!("../docs/src/architecture.md")]
struct BookArchitectureDoctests;
#[cfg(doctest)]
#[doc = include_str!("../docs/src/plugins.md")]
struct BookPluginsDoctests;

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

//! The registry of mfstream's stream engines: what a control plane embeds
//! to call `registry.get(name)`.
//!
//! [`Registry`] holds the engines by name: the built-in `local`, one
//! `BridgeEngine` per `[[engine]]` entry of `engines.toml` (so a runtime
//! is added by configuration, not code), and the engines of its
//! `[[plugin]]` libraries. [`config`] reads and checks `engines.toml`.
//!
//! This crate builds on `mfstream-engine` (the seam and the engines) and
//! `mfstream-model` (what a query is), and on the design card's packages:
//! no HTTP server, broker client, database or TLS.
//!
//! # Where things are
//!
//! Every public item has exactly one path: the root re-exports only from
//! the private module `registry`; [`config`] only from its own private
//! submodules.
//!
//! ```
//! use mfstream_engine::Source;
//! use mfstream_model::ops::Transform;
//! use mfstream_model::{Instant, QuerySpec, QueryStatus};
//! use mfstream_registry::Registry;
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

pub mod config;
mod registry;

pub use crate::registry::{ListedEngine, Registry, RegistryError};

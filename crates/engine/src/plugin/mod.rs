//! Plugin engines: native engines from shared libraries named by the
//! `[[plugin]]` entries of `engines.toml`.
//!
//! The ABI (version 3; versions 1 and 2 still load) is defined by the `mfstream-plugin` crate
//! (`plugins/mfstream-plugin`), which plugin authors use too; its `abi`
//! module is the reference, and `mfstream_plugin.h` its C twin. This module
//! is the host's side:
//!
//! - `load` checks a library before trusting it (file, permissions, entry
//!   symbol, ABI version, struct sizes, engine names) and reports each
//!   failure naming the file and the reason (`file` checks the file
//!   itself); `error` holds those reasons, a leaf both of them use;
//! - `serves` turns a descriptor's `MFS_SERVES_*` bits into the typed
//!   [`Serves`](crate::Serves), once, keeping unknown bits apart;
//! - [`PluginEngine`] is one engine of a loaded plugin, a [`StreamEngine`]
//!   like any other. It holds the library (an `Arc`), and so does each of
//!   its queries: a library is never unloaded under running code;
//! - `query` runs each query on a thread of its own, off the async
//!   runtime's workers;
//! - `positions` turns the core's position step into the ABI's
//!   `MfsPositionSpec` (version 3) and checks each position before a
//!   plugin gets it;
//! - with `isolation = "process"`, `isolated` runs each query in a child,
//!   the `mfstream` binary itself as a bridge job (`child` is its side), so
//!   a plugin that crashes fails its query and nothing else.

mod call;
pub(crate) mod child;
mod error;
mod file;
mod isolated;
mod load;
mod positions;
mod query;
mod serves;

use std::sync::Arc;

use async_trait::async_trait;

pub use self::call::CallError;
pub use self::error::{ElfError, PluginError, PluginErrorKind};
pub use self::isolated::{IsolatedEngine, PLUGIN_HOST_VAR};
use self::isolated::{describe as describe_isolated, host_binary};
use self::load::{EngineFns, Library, load};
use crate::plan::{Plan, engine_spec, plan};
use crate::{AggregatesIn, EngineError, EngineInfo, EngineKind, QueryHandle, Source, StreamEngine};
use mfstream_model::QuerySpec;

/// Where a plugin's engines run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Isolation {
    /// In the mfstream process, on a thread per query (the default).
    #[default]
    InProcess,
    /// In a child process per query, so a crash fails one query only.
    Process,
}

/// One engine of a loaded plugin.
#[derive(Debug)]
pub struct PluginEngine {
    library: Arc<Library>,
    fns: EngineFns,
    /// Why the engine cannot run queries, as its `ready` said when loaded.
    not_ready: Option<String>,
}

impl PluginEngine {
    /// The engine, asked once whether it is ready.
    fn new(library: Arc<Library>, fns: EngineFns) -> PluginEngine {
        let not_ready = call::ready(&fns).err().map(|e| e.to_string());
        PluginEngine {
            library,
            fns,
            not_ready,
        }
    }

    /// The library the engine comes from.
    pub fn library_path(&self) -> &std::path::Path {
        &self.library.path
    }
}

#[async_trait]
impl StreamEngine for PluginEngine {
    fn name(&self) -> &str {
        &self.fns.name
    }

    fn describe(&self) -> EngineInfo {
        EngineInfo {
            abi_version: Some(self.fns.abi_version),
            name: self.fns.name.clone(),
            kind: EngineKind::Plugin,
            ready: self.not_ready.is_none(),
            reason: self.not_ready.clone(),
            description: self.fns.description.clone(),
            serves: serves::engine_serves(self.fns.serves, self.fns.positions),
            aggregates_in: AggregatesIn::Host,
        }
    }

    /// Opens the query in the plugin before returning, so that a query the
    /// plugin refuses is an error here, not a failed query.
    async fn submit(&self, spec: QuerySpec, source: Source) -> Result<QueryHandle, EngineError> {
        let name = &self.fns.name;
        if let Some(reason) = &self.not_ready {
            return Err(EngineError::Start {
                engine: name.clone(),
                reason: format!("the engine is not ready: {reason}"),
            });
        }
        let property: Arc<str> = spec.property.as_str().into();
        // The plugin transforms (or computes a position query's step);
        // windows are computed in the host, over the plugin's outputs, as
        // for a bridge engine whose job transforms.
        let (open, operation, windower, guard, check) = match plan(&spec)? {
            Plan::Engine {
                transform,
                windower,
            } => (
                query::Open::Spec(engine_spec(&spec, transform).to_json()),
                transform.op.name(),
                windower,
                // A version-1 plugin fails on a record with no result:
                // under skip, the host keeps such records from it.
                (self.fns.abi_version < 2).then_some(transform),
                None,
            ),
            // Nothing for the plugin to do: the host windows the instants.
            host @ Plan::Host(_) => {
                return Ok(crate::local::submit_as(name, host, &spec, source)?);
            }
            // ABI versions 1 and 2 carry no position, and a version-3
            // engine may not serve them (the registry refuses such a query
            // first, naming those that do).
            Plan::Position { .. } if !self.fns.positions => {
                return Err(crate::plan::unserved(name, &spec).into());
            }
            Plan::Position {
                crs,
                step,
                windower,
            } => (
                query::Open::Positions(Box::new(positions::spec_of(&spec, crs, &step))),
                step.name(),
                windower,
                None,
                Some(positions::Checker::new(crs)),
            ),
        };
        let (handle, output) = QueryHandle::new(&spec.id, name, crate::EVENT_BUFFER);
        let (opened_tx, opened_rx) = tokio::sync::oneshot::channel();
        let start = query::Start {
            library: self.library.clone(),
            fns: self.fns.clone(),
            open,
            property,
            operation: operation.into(),
            windower,
            clock: spec.clock,
            on_error: spec.on_error,
            cpu_limit: spec.compute.limit(),
            guard,
            check,
            source: source.typed(spec.property_type),
            output,
            runtime: tokio::runtime::Handle::current(),
            span: tracing::info_span!("query", engine = %name, id = %spec.id),
        };
        let start_error = |reason: String| EngineError::Start {
            engine: name.clone(),
            reason,
        };
        query::spawn(start, opened_tx)
            .map_err(|e| start_error(format!("cannot start the query's thread: {e}")))?;
        match opened_rx.await {
            Ok(Ok(())) => Ok(handle),
            Ok(Err(reason)) => Err(start_error(reason.to_string())),
            Err(_) => Err(start_error(
                "the query's thread ended before opening it".into(),
            )),
        }
    }
}

/// The engines of the plugin library at `path`: loaded in process, or,
/// with [`Isolation::Process`], described by a child (`mfstream
/// plugin-host`, found through `env`: [`PLUGIN_HOST_VAR`], else the
/// running executable) that then runs each query.
pub fn engines(
    path: &std::path::Path,
    isolation: Isolation,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Arc<dyn StreamEngine>>, PluginError> {
    match isolation {
        Isolation::InProcess => load(path).map(|loaded| {
            let library = loaded.library;
            loaded
                .engines
                .into_iter()
                .map(|fns| {
                    Arc::new(PluginEngine::new(library.clone(), fns)) as Arc<dyn StreamEngine>
                })
                .collect()
        }),
        Isolation::Process => host_binary(env)
            .map_err(|kind| PluginError::new(path, kind))
            .and_then(|host| describe_isolated(path, &host))
            .map(|engines| {
                engines
                    .into_iter()
                    .map(|engine| Arc::new(engine) as Arc<dyn StreamEngine>)
                    .collect()
            }),
    }
}

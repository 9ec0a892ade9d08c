//! The control plane: continuous queries over HTTP and Server-Sent Events,
//! in the shape of OGC API – Moving Features Part 4.
//!
//! The roles:
//!
//! - the routes (`routes`) register, list, get and delete queries on a
//!   temporal property, stream their results, and ingest live instants;
//! - the query table (`table`) holds every query, and each property's
//!   feeds (the live sources its queries read);
//! - ingest (`ingest`) hands a body's instants to every query on the
//!   property, in order, with bounded backpressure;
//! - the sources (`sources`) bring the instants: HTTP ingest, and MQTT and
//!   Kafka (cargo features `mqtt` and `kafka`) on one broker pipeline,
//!   each a plug-in with its options, its run, its status and its
//!   counters;
//! - the fan-out (`fanout`) renders each result once as an SSE frame into
//!   a bounded replay buffer that every subscriber reads at its own pace.
//!
//! - the browser checks (`browser`) answer only requests a page of the
//!   server's own, or of a `--cors-origin`, could make: `Host` names the
//!   server (no DNS rebinding), a foreign `Origin` is refused (no CSRF),
//!   and every answer has its security headers;
//!
//! - the connections (`connections`) are capped in number and in how long a
//!   request head may take; a request's URI, ids and body are bounded
//!   (`request`), and every error, hyper's own included (`parse_errors`),
//!   is JSON.
//!
//! - the API (`api`) answers `GET /api`, the OpenAPI document made from
//!   the same declarations as the routes ([`routes`]);
//!
//! - the metrics (`metrics`) answer `GET /metrics` in the Prometheus text
//!   format, read at the scrape from what the other parts keep;
//!
//! - with a state directory ([`StateOptions::dir`], `--state DIR`), the
//!   durable side (`durable`, `restore`) keeps every registration, result
//!   and ingest in a [`Store`] as its table says, and restores the queries
//!   at start-up.
//!
//! [`Server::bind`] binds the address (loopback by default); [`Server::run`]
//! serves until its shutdown future resolves, then stops every query,
//! ends every stream with its `end` event, and returns within twice the
//! shutdown grace. Every bound is a field of [`ServeOptions`]'s groups
//! (`options`), each value with where it came from, so that a message
//! about it names it as its origin does.

mod api;
mod auth;
mod browser;
mod connections;
mod durable;
mod fanout;
mod inflight;
mod ingest;
mod metrics;
mod options;
mod page;
mod parse_errors;
mod positions;
mod problem;
mod request;
mod restore;
mod routes;
mod sources;
mod table;
mod wire;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use tokio::net::TcpListener;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use mfstream_model::compute::{Compute, ComputePool};
use mfstream_model::origin::Origin;
use mfstream_registry::Registry;

pub use self::ingest::DEFAULT_MAX_DATETIME_AHEAD;
pub use self::options::{Access, ComputeOptions, Limits, ServeOptions, StateOptions, Timing};
#[cfg(feature = "kafka")]
pub use self::sources::kafka::KafkaIngest;
#[cfg(feature = "mqtt")]
pub use self::sources::mqtt::MqttIngest;
use mfstream_store::{Store, StoreError, StoreOptions};

use self::connections::Connections;
use self::table::Table;

/// The largest registration body kept with `--state`: a geometry's bound
/// ([`mfstream_model::geo::MAX_GEOMETRY_BYTES`], 1 MiB) and 64 KiB for the rest of
/// the body (the operation, window, engine, `crs`, `detect`).
pub(crate) const STORED_SPEC_BYTES: usize = mfstream_model::geo::MAX_GEOMETRY_BYTES + 64 * 1024;

/// Why the server could not serve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The address could not be bound. The cause is the `source`, not in
    /// the message, so a chain printed whole (`{:#}`) says it once.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Serving failed (the cause is the `source`).
    #[error("the server failed")]
    Io(#[from] std::io::Error),
    /// The state directory could not be opened or restored from.
    #[error(transparent)]
    State(#[from] StoreError),
    /// The compute threads could not be started.
    #[error("cannot start the compute threads ({option})")]
    Compute {
        /// The option that sets their number, as its origin names it.
        option: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A token was given, but empty: it would protect nothing.
    #[error("the token is empty ({origin}): give a non-empty token, or none")]
    EmptyToken {
        /// Where the token came from.
        origin: Origin,
    },
    /// A token that no `Authorization` header can carry as given.
    #[error(
        "the token {why}: an Authorization header cannot carry it; give a token of visible \
         ASCII characters (letters, digits, -._~+/=)"
    )]
    UnsendableToken {
        /// What is wrong with it (the token itself is not repeated).
        why: String,
    },
    /// A source's option (`--mqtt`, `--mqtt-topic`, `--kafka-group`, …)
    /// that cannot be used: the message names it and the form expected.
    #[error("{message}")]
    Source {
        /// The source (`mqtt`, `kafka`).
        name: &'static str,
        /// What is wrong, naming the option.
        message: String,
    },
    /// A tiles template the page cannot use.
    #[error("{option} {value}: {why}")]
    BadTiles {
        /// The option, as its origin names it.
        option: String,
        /// The template, quoted and cut short.
        value: String,
        /// Why it is refused, and the form expected.
        why: String,
    },
    /// An allowed host or CORS origin that cannot match.
    #[error("{option} {value:?}: {why}")]
    BadBrowserOption {
        /// The option, as its origin names it.
        option: String,
        /// The value given.
        value: String,
        /// Why it is refused, and the form expected.
        why: &'static str,
    },
}

/// What every handler shares.
#[derive(Debug)]
pub(crate) struct App {
    pub(crate) registry: Arc<Registry>,
    pub(crate) options: ServeOptions,
    pub(crate) table: Table,
    /// The state store, with `--state`.
    pub(crate) store: Option<Arc<Store>>,
    /// The address bound, for links when a request has no usable `Host`.
    pub(crate) local_addr: SocketAddr,
    /// The names and origins a browser's requests may carry.
    pub(crate) browsers: browser::Browsers,
    /// The page's map tiles (`--tiles`).
    pub(crate) tiles: Option<page::Tiles>,
    /// The bytes of request bodies in flight (`--max-inflight-bytes`).
    pub(crate) inflight: inflight::InFlight,
    /// The SSE streams open (`--max-streams`).
    pub(crate) streams: connections::Streams,
    /// The state of every query together (`--max-total-query-state`).
    pub(crate) state_total: Arc<mfstream_model::budget::StateTotal>,
    /// The threads that compute queries' records (`--compute-threads`).
    pub(crate) compute: ComputePool,
    /// The connections being served (and counted for `GET /metrics`).
    pub(crate) connections: Arc<Connections>,
    /// Instants accepted and bodies refused per source, and the sources'
    /// own counters (`GET /metrics`).
    pub(crate) ingest_tally: metrics::IngestTally,
    /// The sources of instants: HTTP ingest, and those the options turn on
    /// (`--mqtt`, `--kafka`).
    pub(crate) sources: sources::Sources,
}

impl App {
    /// A new query's state budget: its windows, its waiting instants and
    /// its replay buffer count in one, within the server's total; past it,
    /// the query fails alone.
    pub(crate) fn query_budget(&self) -> Arc<mfstream_model::budget::StateBudget> {
        Arc::new(
            mfstream_model::budget::StateBudget::new(self.options.state.max_query_state.clone())
                .within(self.state_total.clone()),
        )
    }

    /// Where a new query's work runs: the compute pool, within
    /// `--max-query-cpu`.
    pub(crate) fn query_compute(&self) -> Compute {
        self.compute
            .compute()
            .with_limit(self.options.compute.max_query_cpu.clone())
    }
}

/// A bound control plane.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    app: Arc<App>,
}

impl Server {
    /// Binds `options.addr` (port 0 picks a free port). An empty token is
    /// refused (it would silently protect nothing), and so is one that no
    /// `Authorization` header can carry, an `--allowed-host` or
    /// `--cors-origin` entry that cannot match, or a `--tiles` template
    /// the page cannot use.
    pub async fn bind(
        registry: Arc<Registry>,
        options: ServeOptions,
    ) -> Result<Server, ServeError> {
        options.check()?;
        // Checked before the state is opened: a typo costs no restore.
        browser::Browsers::new(&options, options.addr)?;
        let tiles = options
            .access
            .tiles
            .as_deref()
            .map(|template| page::Tiles::parse(template, &options.access.tiles.origin))
            .transpose()?;
        let sources = sources::Sources::configure(&options)?;
        let store = match options.state.dir.as_ref() {
            Some(dir) => {
                let store_options = StoreOptions {
                    ring_events: *options.state.replay,
                    ring_bytes: *options.state.replay_bytes,
                    durability: *options.state.durability,
                    // An ingest is one journal record whatever its size up
                    // to --max-body: a JSON instant takes more than 16
                    // bytes, so a body never holds more.
                    max_batch: StoreOptions::default()
                        .max_batch
                        .max(*options.limits.max_body / 16),
                    // A registration is kept as its body: a position query's
                    // geometry alone may take MAX_GEOMETRY_BYTES (a fence
                    // the server accepts must not be a 503 to record).
                    max_spec_bytes: STORED_SPEC_BYTES,
                    ..StoreOptions::default()
                };
                let dir = dir.clone();
                let store = tokio::task::spawn_blocking(move || Store::open(dir, store_options))
                    .await
                    .map_err(std::io::Error::other)??;
                Some(Arc::new(store))
            }
            None => None,
        };
        let addr = options.addr;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind { addr, source })?;
        let local_addr = listener.local_addr()?;
        let browsers = browser::Browsers::new(&options, local_addr)?;
        let mut ingest_tally = metrics::IngestTally::default();
        let site = sources::Site {
            state: options.state.dir.as_deref(),
            addr: local_addr,
        };
        let sources = sources::Sources::build(sources, site, &mut ingest_tally);
        let inflight = inflight::InFlight::new(options.limits.max_inflight_bytes.clone());
        let streams = connections::Streams::new(options.limits.streams());
        let state_total =
            mfstream_model::budget::StateTotal::new(options.state.max_total_query_state.clone());
        let threads = options
            .compute
            .threads
            .unwrap_or_else(ComputePool::default_threads);
        let compute = ComputePool::new(threads).map_err(|source| ServeError::Compute {
            option: options.compute.threads.name("compute.threads"),
            source,
        })?;
        let app = Arc::new(App {
            compute,
            browsers,
            tiles,
            registry,
            options,
            table: Table::default(),
            store,
            local_addr,
            inflight,
            streams,
            state_total: Arc::new(state_total),
            connections: Arc::default(),
            ingest_tally,
            sources,
        });
        if let Some(store) = &app.store {
            let restored = restore::restore(&app, store).await?;
            tracing::info!(
                running = restored.running,
                ended = restored.ended,
                replaying = restored.replaying,
                dir = %store.dir().display(),
                "state restored"
            );
        }
        Ok(Server { listener, app })
    }

    /// The address bound.
    pub fn local_addr(&self) -> Result<SocketAddr, ServeError> {
        Ok(self.listener.local_addr()?)
    }

    /// What each source says when it is ready, the lines a supervisor (or
    /// a test) waits for: `mqtt subscribed on URL`, which holds again at
    /// every (re)connection once the client is subscribed again, and
    /// `kafka assigned on BROKERS`, at every rebalance that gives this
    /// server partitions. Each line comes with a count that moves each time
    /// it holds again.
    pub fn ready(&self) -> Vec<(String, tokio::sync::watch::Receiver<u64>)> {
        self.app.sources.iter().filter_map(|s| s.ready()).collect()
    }

    /// Serves until `shutdown` resolves; then stops accepting, stops every
    /// query (waiting up to the shutdown grace; a query still running then
    /// has its streams ended anyway), gives the connections up to the grace
    /// again to send their last bytes (every stream its `end` event), closes
    /// those still open, and returns.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let app = self.app;
        let limits = connections::Limits {
            max_connections: *app.options.limits.max_connections,
            header_timeout: *app.options.limits.header_timeout,
        };
        let connections = app.connections.clone();
        let accept = {
            let connections = connections.clone();
            let router = router(app.clone());
            tokio::spawn(async move { connections.accept(self.listener, router, limits).await })
        };
        // The sources from now to the shutdown: stopped first, so that what
        // they did not acknowledge (MQTT) or commit (Kafka) is delivered
        // again at the next start.
        let stop_sources = tokio_util::sync::CancellationToken::new();
        let running: Vec<_> = app
            .sources
            .iter()
            .map(|s| {
                let run = s.clone().run(app.clone(), stop_sources.clone());
                (s.name(), tokio::spawn(run))
            })
            .collect();
        shutdown.await;
        stop_sources.cancel();
        for (name, run) in running {
            if let Err(e) = run.await {
                tracing::warn!("the {name} ingest ended badly: {e}");
            }
        }
        tracing::info!("shutting down: stopping every query");
        connections.drain();
        let grace = *app.options.timing.shutdown_grace;
        app.table.shutdown(grace).await;
        if !connections.wait(grace).await {
            tracing::warn!("some connections were still open {grace:?} after the queries ended");
        }
        connections.close().await;
        if let Err(e) = accept.await {
            tracing::warn!("the accept loop ended badly: {e}");
        }
        if let Some(store) = app.store.clone() {
            drop(app);
            // Every pump has ended: what they queued is committed before
            // the directory is released.
            match Arc::try_unwrap(store) {
                Ok(store) => {
                    if let Err(e) = tokio::task::spawn_blocking(move || store.close()).await {
                        tracing::warn!("the state store did not close cleanly: {e}");
                    }
                }
                Err(_) => tracing::warn!("the state store is still in use at the shutdown"),
            }
        }
        Ok(())
    }
}

/// Every route, each declared with its documentation: `routes!` takes the
/// method and the path from the handler's `#[utoipa::path]`, so a route
/// and its entry in `GET /api` are one declaration. Declare routes here
/// (or in a source's [`sources::Kind`]) only, and only so (a test reads
/// this function and the kinds).
pub(crate) fn routes() -> OpenApiRouter<Arc<App>> {
    let router = OpenApiRouter::new()
        .routes(routes!(page::landing))
        .routes(routes!(api::serve))
        .routes(routes!(page::conformance))
        .routes(routes!(routes::engines))
        .routes(routes!(metrics::serve))
        .routes(routes!(routes::register, routes::list))
        .routes(routes!(routes::get, routes::delete))
        .routes(routes!(routes::stream))
        .routes(routes!(routes::ingest))
        // A feature's positions: the same handlers, keyed by the feature.
        .routes(routes!(routes::register_positions, routes::list_positions))
        .routes(routes!(
            routes::get_positions_query,
            routes::delete_positions_query
        ))
        .routes(routes!(routes::stream_positions))
        .routes(routes!(routes::ingest_positions));
    // Each source's status, `GET /ingest/{name}`, declared by its kind in
    // the same way.
    sources::routes(router)
}

fn router(app: Arc<App>) -> Router {
    let (router, _) = routes().split_for_parts();
    router
        .fallback(routes::fallback)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            auth::require_token,
        ))
        // Before the token: a preflight carries none, and a page that may
        // not call the server learns nothing from a 401.
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            browser::guard,
        ))
        // Outermost: an overlong URI or body is refused before the token
        // is even looked at.
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            request::bound,
        ))
        // Around everything: every answer has its security headers.
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            browser::security_headers,
        ))
        .with_state(app)
}

// README's and the book's Rust examples run as doctests (`cargo test
// --doc`), here, in the top library crate, where every layer is a
// dependency; their other code blocks are marked (`sh`, `text`, `toml` …)
// so that rustdoc skips them.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/architecture.md")]
struct ArchitectureDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/plugins.md")]
struct PluginsDoctests;

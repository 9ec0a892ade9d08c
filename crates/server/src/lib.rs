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
//! - with `--state DIR` ([`ServeOptions::state`]), the durable side
//!   (`durable`, `restore`) keeps every registration, result and ingest in
//!   a [`Store`] as its table says, and restores the queries at start-up.
//!
//! [`Server::bind`] binds the address (loopback by default); [`Server::run`]
//! serves until its shutdown future resolves, then stops every query,
//! ends every stream with its `end` event, and returns within twice the
//! shutdown grace. Every bound is a field of [`ServeOptions`].

mod api;
mod auth;
mod browser;
mod connections;
mod durable;
mod fanout;
mod inflight;
mod ingest;
mod kafka;
mod metrics;
mod mqtt;
mod page;
mod parse_errors;
mod positions;
mod problem;
mod request;
mod restore;
mod routes;
mod table;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use mfstream_model::compute::{Compute, ComputePool, CpuLimit};
use mfstream_registry::Registry;

pub use self::ingest::DEFAULT_MAX_DATETIME_AHEAD;
pub use self::kafka::KafkaIngest;
pub use self::mqtt::MqttIngest;
use mfstream_store::{Durability, Store, StoreError, StoreOptions};

use self::connections::{Connections, Limits};
use self::table::Table;

/// The largest registration body kept with `--state`: a geometry's bound
/// ([`mfstream_model::geo::MAX_GEOMETRY_BYTES`], 1 MiB) and 64 KiB for the rest of
/// the body (the operation, window, engine, `crs`, `detect`).
pub(crate) const STORED_SPEC_BYTES: usize = mfstream_model::geo::MAX_GEOMETRY_BYTES + 64 * 1024;

/// How a server listens and what it bounds.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The address to bind; `127.0.0.1:8080` by default.
    pub addr: SocketAddr,
    /// A bearer token every route but the landing page requires, if set.
    pub token: Option<String>,
    /// The largest request body, in bytes: a larger declared
    /// `Content-Length` is refused at once (413).
    pub max_body: usize,
    /// The most connections open at once; more wait to be accepted.
    pub max_connections: usize,
    /// How long a request head may take to arrive (and a kept-alive
    /// connection may stay idle).
    pub header_timeout: Duration,
    /// How long a request body may take to arrive (408 after).
    pub body_timeout: Duration,
    /// The most queries registered at once.
    pub max_queries: usize,
    /// The most SSE subscribers of one query.
    pub max_subscribers: usize,
    /// The most SSE streams open at once, server-wide (`--max-streams`):
    /// fewer than `max_connections`, so that streams never take every
    /// connection and lock out ingest. `None` (the default): three
    /// quarters of `max_connections`. A stream past it is answered 503.
    pub max_streams: Option<usize>,
    /// The most temporal properties known (registered on or ingested to).
    pub max_properties: usize,
    /// The results each query keeps for late and reconnecting subscribers.
    pub replay: usize,
    /// The most bytes of results each query keeps for them.
    pub replay_bytes: usize,
    /// The most bytes of state one query may hold (`--max-query-state`):
    /// its open windows (with `COUNT_DISTINCT`'s distinct texts), the
    /// instants handed to it and not yet answered and its replay buffer, estimated as
    /// [`StateBudget`](crate::StateBudget) says. A query over it fails
    /// alone, naming the limit; its state is freed. `replay_bytes` counts
    /// in it: keep it well below.
    pub max_query_state: u64,
    /// The most bytes of state every query together may hold
    /// (`--max-total-query-state`): their windows, waiting instants and
    /// ledgers (not their replay buffers). Past it, a query that grows
    /// while holding at least its share (this over the queries) fails,
    /// naming the limit; smaller ones go on.
    pub max_total_query_state: u64,
    /// The threads that compute queries' records (`--compute-threads`),
    /// apart from those that serve requests, run the sources and write
    /// SSE: `None` (the default), one per core.
    pub compute_threads: Option<usize>,
    /// The most CPU one query may spend (`--max-query-cpu`,
    /// `--query-cpu-window`): past it the query fails alone, naming the
    /// option. `None` (the default): unbounded, the queries sharing the
    /// compute threads fairly all the same.
    pub max_query_cpu: Option<CpuLimit>,
    /// The most bytes of request bodies being received or ingested at once,
    /// server-wide (`--max-inflight-bytes`): a body holds its bytes from
    /// its first (its `Content-Length` at once) until its call is done; a
    /// request past it is answered 503 with `Retry-After`.
    pub max_inflight_bytes: usize,
    /// The batches of instants a query's source buffers.
    pub source_buffer: usize,
    /// How long an ingest waits on a full query buffer before a 503.
    pub ingest_wait: Duration,
    /// How far ahead of the server's clock an ingested datetime may be
    /// (`--max-datetime-ahead-ms`; [`DEFAULT_MAX_DATETIME_AHEAD`], a day, by
    /// default): a later one is refused (400 `datetime` over HTTP, a
    /// `badDatetime` message over MQTT and Kafka), so that one instant
    /// stamped in the year 9999 cannot move its property's duplicate mark
    /// past every later one.
    pub max_datetime_ahead: Duration,
    /// How often an idle SSE stream gets a keep-alive comment.
    pub keep_alive: Duration,
    /// How long a shutdown waits for queries to end, and then for
    /// connections to take their last bytes, before closing them.
    pub shutdown_grace: Duration,
    /// The state directory (`--state DIR`): registrations, results and
    /// ingests are kept there and restored at start-up. `None` (the
    /// default): everything is in memory and a restart forgets it.
    pub state: Option<PathBuf>,
    /// How far each commit to the state store is durable (with `state`):
    /// [`Durability::Process`] (the default) survives `kill -9`,
    /// [`Durability::Power`] a power failure too, at one fsync per group
    /// commit.
    pub durability: Durability,
    /// Host names (or addresses) requests may name in `Host` besides the
    /// loopback names and the address a connection arrived on; `*` allows
    /// any (unsafe: a web page can then read the server through DNS
    /// rebinding).
    pub allowed_hosts: Vec<String>,
    /// Web origins (`scheme://host[:port]`) whose pages may call the
    /// server: they get CORS headers, and their state-changing requests are
    /// not refused.
    pub cors_origins: Vec<String>,
    /// Map tiles under the page's map (`--tiles URL`): an `http(s)` URL
    /// template with `{z}`, `{x}` and `{y}`, at most 512 bytes; the page's
    /// Content-Security-Policy then lets it load images from that origin.
    /// `None` (the default): no tiles, and images from the server only.
    pub tiles: Option<String>,
    /// With `state`: the most bytes of the journal one query may keep from
    /// being released (`--max-query-log`): its property's instants logged
    /// after its checkpoint. A query whose checkpoint does not move (on a
    /// bridge or plugin engine, replayed from its registration) would keep
    /// them all; past it the query fails, naming the limit, and the
    /// journal releases them.
    pub max_query_log: u64,
    /// MQTT ingest (`--mqtt URL`): subscribe to a broker and ingest what
    /// its topics carry, as `POST …/ingest` does. `None` (the default): off.
    pub mqtt: Option<MqttIngest>,
    /// Kafka ingest (`--kafka BROKERS`): read the topics of a pattern as a
    /// consumer group and ingest their records, as `POST …/ingest` does.
    /// `None` (the default): off.
    pub kafka: Option<KafkaIngest>,
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            token: None,
            max_body: 4 * 1024 * 1024,
            max_connections: 1024,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_queries: 1024,
            max_subscribers: 64,
            max_streams: None,
            max_properties: 65_536,
            replay: 4096,
            replay_bytes: 4 * 1024 * 1024,
            max_query_state: mfstream_model::budget::DEFAULT_MAX_QUERY_STATE,
            max_total_query_state: mfstream_model::budget::DEFAULT_MAX_TOTAL_QUERY_STATE,
            compute_threads: None,
            max_query_cpu: None,
            max_inflight_bytes: 256 * 1024 * 1024,
            source_buffer: 16,
            ingest_wait: Duration::from_secs(5),
            max_datetime_ahead: DEFAULT_MAX_DATETIME_AHEAD,
            keep_alive: Duration::from_secs(15),
            shutdown_grace: Duration::from_secs(10),
            state: None,
            durability: Durability::Process,
            allowed_hosts: Vec::new(),
            cors_origins: Vec::new(),
            tiles: None,
            max_query_log: 1024 * 1024 * 1024,
            mqtt: None,
            kafka: None,
        }
    }
}

impl ServeOptions {
    /// The most SSE streams open at once: `max_streams`, else three
    /// quarters of `max_connections` (at least one).
    pub fn streams(&self) -> usize {
        self.max_streams
            .unwrap_or(self.max_connections / 4 * 3 + self.max_connections % 4 * 3 / 4)
            .max(1)
    }
}

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
    /// The compute threads (`--compute-threads`) could not be started.
    #[error("cannot start the compute threads (--compute-threads)")]
    Compute(#[source] std::io::Error),
    /// A token was given, but empty: it would protect nothing.
    #[error("the token is empty: give a non-empty --token (or MFSTREAM_TOKEN), or none")]
    EmptyToken,
    /// A token that no `Authorization` header can carry as given.
    #[error(
        "the token {why}: an Authorization header cannot carry it; give a token of visible \
         ASCII characters (letters, digits, -._~+/=)"
    )]
    UnsendableToken {
        /// What is wrong with it (the token itself is not repeated).
        why: String,
    },
    /// An MQTT option (`--mqtt`, `--mqtt-topic`, `--mqtt-ca`, …) that
    /// cannot be used: the message names it and the form expected.
    #[error("{0}")]
    Mqtt(String),
    /// A `--tiles` template the page cannot use.
    #[error("--tiles {value}: {why}")]
    BadTiles {
        /// The template, quoted and cut short.
        value: String,
        /// Why it is refused, and the form expected.
        why: String,
    },
    /// A Kafka option (`--kafka`, `--kafka-topic`, `--kafka-group`, …)
    /// that cannot be used: the message names it and the form expected.
    #[error("{0}")]
    Kafka(String),

    /// An `--allowed-host` or `--cors-origin` entry that cannot match.
    #[error("{option} {value:?}: {why}")]
    BadBrowserOption {
        /// The option.
        option: &'static str,
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
    /// Instants accepted and bodies refused, per source (`GET /metrics`).
    pub(crate) ingest_tally: metrics::IngestTally,
    /// MQTT ingest (`--mqtt`).
    pub(crate) mqtt: Option<Arc<mqtt::Mqtt>>,
    /// Kafka ingest (`--kafka`).
    pub(crate) kafka: Option<Arc<kafka::Kafka>>,
}

impl App {
    /// A new query's state budget: its windows, its waiting instants and
    /// its replay buffer count in one, within the server's total; past it,
    /// the query fails alone.
    pub(crate) fn query_budget(&self) -> Arc<mfstream_model::budget::StateBudget> {
        Arc::new(
            mfstream_model::budget::StateBudget::new(mfstream_model::origin::Value::new(
                self.options.max_query_state,
                mfstream_model::origin::Origin::flag("--max-query-state"),
            ))
            .within(self.state_total.clone()),
        )
    }

    /// Where a new query's work runs: the compute pool, within
    /// `--max-query-cpu`.
    pub(crate) fn query_compute(&self) -> Compute {
        self.compute
            .compute()
            .with_limit(self.options.max_query_cpu.clone())
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
        if let Some(token) = &options.token {
            auth::check_token(token)?;
        }
        // Checked before the state is opened: a typo costs no restore.
        browser::Browsers::new(&options, options.addr)?;
        let tiles = options
            .tiles
            .as_deref()
            .map(page::Tiles::parse)
            .transpose()?;
        if let Some(o) = &options.mqtt {
            mqtt::Mqtt::new(o, options.state.as_deref(), options.addr).map_err(ServeError::Mqtt)?;
        }
        if let Some(o) = &options.kafka {
            kafka::Kafka::new(o, options.state.as_deref(), options.addr)
                .map_err(ServeError::Kafka)?;
        }
        if options.replay_bytes as u64 >= options.max_query_state {
            // Not refused: a server that ran with a large replay buffer
            // still starts; its queries fail when their rings fill.
            tracing::warn!(
                "--replay-bytes ({}) is not less than --max-query-state ({}): a query's replay \
                 buffer counts in its state, so a query may fail once its buffer fills; lower the \
                 first or raise the second",
                options.replay_bytes,
                options.max_query_state
            );
        }
        let store = match &options.state {
            Some(dir) => {
                let store_options = StoreOptions {
                    ring_events: options.replay,
                    ring_bytes: options.replay_bytes,
                    durability: options.durability,
                    // An ingest is one journal record whatever its size up
                    // to --max-body: a JSON instant takes more than 16
                    // bytes, so a body never holds more.
                    max_batch: StoreOptions::default().max_batch.max(options.max_body / 16),
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
        let mqtt = match &options.mqtt {
            Some(o) => Some(Arc::new(
                mqtt::Mqtt::new(o, options.state.as_deref(), local_addr)
                    .map_err(ServeError::Mqtt)?,
            )),
            None => None,
        };
        let kafka = match &options.kafka {
            Some(o) => Some(Arc::new(
                kafka::Kafka::new(o, options.state.as_deref(), local_addr)
                    .map_err(ServeError::Kafka)?,
            )),
            None => None,
        };
        let options_max_inflight = options.max_inflight_bytes;
        if options.max_body > options.max_inflight_bytes {
            tracing::warn!(
                "--max-body ({}) is over --max-inflight-bytes ({}): a body that large is always \
                 answered 503",
                options.max_body,
                options.max_inflight_bytes
            );
        }
        let max_streams = options.streams();
        let max_total_query_state = options.max_total_query_state;
        if max_streams >= options.max_connections {
            tracing::warn!(
                "--max-streams ({max_streams}) is not below --max-connections ({}): open streams \
                 can take every connection and lock out ingest",
                options.max_connections
            );
        }
        let threads = options
            .compute_threads
            .unwrap_or_else(ComputePool::default_threads);
        let compute = ComputePool::new(threads).map_err(ServeError::Compute)?;
        let app = Arc::new(App {
            compute,
            browsers,
            tiles,
            registry,
            options,
            table: Table::default(),
            store,
            local_addr,
            inflight: inflight::InFlight::new(options_max_inflight),
            streams: connections::Streams::new(max_streams),
            state_total: Arc::new(mfstream_model::budget::StateTotal::new(
                mfstream_model::origin::Value::new(
                    max_total_query_state,
                    mfstream_model::origin::Origin::flag("--max-total-query-state"),
                ),
            )),
            connections: Arc::default(),
            ingest_tally: metrics::IngestTally::default(),
            mqtt,
            kafka,
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

    /// With MQTT ingest: the number of subscriptions the broker granted,
    /// which moves at every (re)connection once the client is subscribed
    /// again.
    pub fn mqtt_subscriptions(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.app.mqtt.as_ref().map(|m| m.subscriptions())
    }

    /// With Kafka ingest: its brokers, and the number of rebalances that
    /// gave this server partitions.
    pub fn kafka_assignments(&self) -> Option<(String, tokio::sync::watch::Receiver<u64>)> {
        self.app
            .kafka
            .as_ref()
            .map(|k| (k.brokers().to_owned(), k.assignments()))
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
        let limits = Limits {
            max_connections: app.options.max_connections,
            header_timeout: app.options.header_timeout,
        };
        let connections = app.connections.clone();
        let accept = {
            let connections = connections.clone();
            let router = router(app.clone());
            tokio::spawn(async move { connections.accept(self.listener, router, limits).await })
        };
        // MQTT ingest from now to the shutdown: stopped first, so that what
        // it did not acknowledge is sent again at the next start.
        let stop_mqtt = tokio_util::sync::CancellationToken::new();
        let mqtt = app
            .mqtt
            .clone()
            .map(|m| tokio::spawn(mqtt::run(app.clone(), m, stop_mqtt.clone())));
        // Kafka's too: what it did not commit is read again.
        let kafka = app
            .kafka
            .clone()
            .map(|k| tokio::spawn(kafka::run(app.clone(), k, stop_mqtt.clone())));
        shutdown.await;
        stop_mqtt.cancel();
        if let Some(mqtt) = mqtt
            && let Err(e) = mqtt.await
        {
            tracing::warn!("the MQTT ingest ended badly: {e}");
        }
        if let Some(kafka) = kafka
            && let Err(e) = kafka.await
        {
            tracing::warn!("the Kafka ingest ended badly: {e}");
        }
        tracing::info!("shutting down: stopping every query");
        connections.drain();
        let grace = app.options.shutdown_grace;
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
/// only, and only so (a test reads this function).
pub(crate) fn routes() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new()
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
        .routes(routes!(routes::ingest_positions))
        .routes(routes!(mqtt::status))
        .routes(routes!(kafka::status))
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

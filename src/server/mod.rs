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
//! [`Server::bind`] binds the address (loopback by default); [`Server::run`]
//! serves until its shutdown future resolves, then stops every query,
//! ends every stream with its `end` event, and returns.

mod auth;
mod fanout;
mod ingest;
mod page;
mod problem;
mod routes;
mod table;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use tokio::net::TcpListener;

use crate::registry::Registry;

use self::table::Table;

/// How a server listens and what it bounds.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The address to bind; `127.0.0.1:8080` by default.
    pub addr: SocketAddr,
    /// A bearer token every route but the landing page requires, if set.
    pub token: Option<String>,
    /// The largest request body, in bytes.
    pub max_body: usize,
    /// The most queries registered at once.
    pub max_queries: usize,
    /// The most SSE subscribers of one query.
    pub max_subscribers: usize,
    /// The most temporal properties known (registered on or ingested to).
    pub max_properties: usize,
    /// The results each query keeps for late and reconnecting subscribers.
    pub replay: usize,
    /// The batches of instants a query's source buffers.
    pub source_buffer: usize,
    /// How long an ingest waits on a full query buffer before a 503.
    pub ingest_wait: Duration,
    /// How often an idle SSE stream gets a keep-alive comment.
    pub keep_alive: Duration,
    /// How long a shutdown waits for queries to end.
    pub shutdown_wait: Duration,
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            token: None,
            max_body: 4 * 1024 * 1024,
            max_queries: 1024,
            max_subscribers: 64,
            max_properties: 65_536,
            replay: 4096,
            source_buffer: 16,
            ingest_wait: Duration::from_secs(5),
            keep_alive: Duration::from_secs(15),
            shutdown_wait: Duration::from_secs(30),
        }
    }
}

/// Why the server could not serve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Serving failed.
    #[error("the server failed: {0}")]
    Io(#[from] std::io::Error),
}

/// What every handler shares.
#[derive(Debug)]
pub(crate) struct App {
    pub(crate) registry: Arc<Registry>,
    pub(crate) options: ServeOptions,
    pub(crate) table: Table,
}

/// A bound control plane.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    app: Arc<App>,
}

impl Server {
    /// Binds `options.addr` (port 0 picks a free port).
    pub async fn bind(
        registry: Arc<Registry>,
        options: ServeOptions,
    ) -> Result<Server, ServeError> {
        let addr = options.addr;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind { addr, source })?;
        Ok(Server {
            listener,
            app: Arc::new(App {
                registry,
                options,
                table: Table::default(),
            }),
        })
    }

    /// The address bound.
    pub fn local_addr(&self) -> Result<SocketAddr, ServeError> {
        Ok(self.listener.local_addr()?)
    }

    /// Serves until `shutdown` resolves; then stops accepting, stops every
    /// query gracefully, ends every SSE stream with its `end` event, and
    /// returns once the connections have closed (or after the shutdown
    /// wait).
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let app = self.app.clone();
        let stopping = tokio_util::sync::CancellationToken::new();
        // Small SSE frames go out at once, not held back by Nagle's
        // algorithm waiting for the peer's delayed ACK.
        let listener = self.listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!("cannot set TCP_NODELAY: {e}");
            }
        });
        let serve = axum::serve(listener, router(app.clone()))
            .with_graceful_shutdown(stopping.clone().cancelled_owned());
        let mut serve = std::pin::pin!(serve.into_future());
        tokio::select! {
            result = &mut serve => return Ok(result?),
            () = shutdown => {}
        }
        tracing::info!("shutting down: stopping every query");
        stopping.cancel();
        let wait = app.options.shutdown_wait;
        // The connections are served on while the queries stop, so every
        // stream gets its end event; then clients get the rest of the wait
        // to read it.
        let both = async { tokio::join!(app.table.shutdown(wait), serve).1 };
        match tokio::time::timeout(wait * 2, both).await {
            Ok(result) => Ok(result?),
            Err(_) => {
                tracing::warn!("some connections were still open {wait:?} after the shutdown");
                Ok(())
            }
        }
    }
}

fn router(app: Arc<App>) -> Router {
    const P: &str = "/collections/{cid}/items/{fid}/tproperties/{pname}";
    Router::new()
        .route("/", get(page::landing))
        .route("/conformance", get(page::conformance))
        .route("/engines", get(routes::engines))
        .route(
            &format!("{P}/queries"),
            post(routes::register).get(routes::list),
        )
        .route(
            &format!("{P}/queries/{{qid}}"),
            get(routes::get).delete(routes::delete),
        )
        .route(&format!("{P}/queries/{{qid}}/stream"), get(routes::stream))
        .route(&format!("{P}/ingest"), post(routes::ingest))
        .fallback(routes::fallback)
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            auth::require_token,
        ))
        .layer(DefaultBodyLimit::max(app.options.max_body))
        .with_state(app)
}

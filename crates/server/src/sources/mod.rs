//! The sources of instants, one plug-in point: HTTP ingest (`POST
//! …/ingest`), MQTT (`--mqtt`) and Kafka (`--kafka`).
//!
//! The roles:
//!
//! - a [`Kind`] is what the server knows of a source before its options are
//!   read: its name (the `source` label of the ingest metrics), how it
//!   reads and checks its options (once, before the state is opened: a
//!   typo costs no restore), and its status route (`GET /ingest/{name}`,
//!   which says the source is off when it is). [`KINDS`] lists every kind
//!   this build has (the broker sources are cargo features);
//! - a [`Config`] is a kind's options, checked; once the address is bound
//!   and the state opened, it builds the [`Source`], and registers the
//!   source's counters with the metrics (which name no source);
//! - a [`Source`] runs from the server's start to its shutdown, and says
//!   when it is ready (the line a supervisor waits for). The server holds
//!   them in [`Sources`], HTTP's first; a kind's status route finds its
//!   own by name and type ([`configured`]), and answers its own type.
//!
//! Every source hands its instants to the same ingest path
//! ([`crate::ingest::take`]). The broker sources (MQTT and Kafka) share
//! the rest too, in [`broker`]: the payload forms, topic patterns, grouping
//! by property, the duplicate rule, bad messages by reason, batches, and
//! acknowledgement (MQTT's ack, Kafka's commit) only after the store took
//! the instants.
//!
//! Adding a source (NATS, AMQP): its module here, with its [`Kind`], and
//! its line in [`KINDS`]; its options in [`crate::ServeOptions`] and its
//! flags in the command line.

#[cfg(any(feature = "mqtt", feature = "kafka"))]
pub(crate) mod broker;
pub(crate) mod http;
#[cfg(feature = "kafka")]
pub(crate) mod kafka;
#[cfg(feature = "mqtt")]
pub(crate) mod mqtt;

use std::any::Any;
use std::fmt::Debug;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use utoipa_axum::router::OpenApiRouter;

use crate::metrics::IngestTally;
use crate::problem::Problem;
use crate::{App, ServeError, ServeOptions};

/// Every kind of source this build has, in the order of their metrics.
pub(crate) const KINDS: &[Kind] = &[
    http::KIND,
    #[cfg(feature = "mqtt")]
    mqtt::KIND,
    #[cfg(feature = "kafka")]
    kafka::KIND,
];

/// A kind of source: what the server knows of it before reading its
/// options.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Kind {
    /// Its name: the `source` label of `mfstream_ingest_…`, and the
    /// `{name}` of `GET /ingest/{name}`.
    pub(crate) name: &'static str,
    /// Reads and checks its options: `None` when they leave it off.
    pub(crate) configure: fn(&ServeOptions) -> Configured,
    /// Adds its routes (its status, `GET /ingest/{name}`), each declared
    /// with `routes!` as `crate::routes` says.
    pub(crate) routes: fn(OpenApiRouter<Arc<App>>) -> OpenApiRouter<Arc<App>>,
}

/// Where a server runs: what a source's defaults derive from (MQTT's
/// client id, Kafka's group).
#[cfg_attr(not(any(feature = "mqtt", feature = "kafka")), allow(dead_code))]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Site<'a> {
    /// The state directory (`--state`), opened.
    pub(crate) state: Option<&'a Path>,
    /// The address bound.
    pub(crate) addr: SocketAddr,
}

/// A kind's options, checked, if they turn it on; else why they cannot be
/// used.
pub(crate) type Configured = Result<Option<Box<dyn Config>>, ServeError>;

/// A kind's options, checked.
pub(crate) trait Config: Send + Debug {
    /// The source, its counters registered in `tally`.
    fn build(self: Box<Self>, site: Site<'_>, tally: &mut IngestTally) -> Arc<dyn Source>;
}

/// A source's run: a future that ends once the source has stopped.
pub(crate) type Run = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A source of instants, configured. Its kind's status route finds it by
/// name and type ([`configured`]).
pub(crate) trait Source: Any + Send + Sync + Debug {
    /// Its kind's name.
    fn name(&self) -> &'static str;

    /// Runs the source until `stop` is cancelled (at the shutdown, before
    /// the queries stop): what it did not acknowledge then is delivered
    /// again at the next start. HTTP ingest runs in the routes: its run
    /// ends at once.
    fn run(self: Arc<Self>, app: Arc<App>, stop: CancellationToken) -> Run;

    /// The line a supervisor (or a test) waits for, without `mfstream: `
    /// (`mqtt subscribed on URL`), and a count that moves each time it
    /// holds again (each subscription, each assignment of partitions).
    fn ready(&self) -> Option<(String, watch::Receiver<u64>)> {
        None
    }
}

/// The sources of a server: HTTP ingest, and those its options turn on.
#[derive(Debug)]
pub(crate) struct Sources {
    http: Arc<http::Http>,
    all: Vec<Arc<dyn Source>>,
}

impl Sources {
    /// Reads and checks every kind's options, in [`KINDS`]' order.
    pub(crate) fn configure(options: &ServeOptions) -> Result<Vec<Box<dyn Config>>, ServeError> {
        let mut configs = Vec::new();
        for kind in KINDS {
            if let Some(config) = (kind.configure)(options)? {
                configs.push(config);
            }
        }
        Ok(configs)
    }

    /// Builds the configured sources, each kind's ingest rows and each
    /// source's counters in `tally`.
    pub(crate) fn build(
        configs: Vec<Box<dyn Config>>,
        site: Site<'_>,
        tally: &mut IngestTally,
    ) -> Sources {
        for kind in KINDS {
            tally.counters(kind.name);
        }
        let http = http::Http::new(tally);
        let mut all: Vec<Arc<dyn Source>> = vec![http.clone()];
        all.extend(configs.into_iter().map(|config| config.build(site, tally)));
        Sources { http, all }
    }

    /// HTTP ingest, which the routes count in.
    pub(crate) fn http(&self) -> &http::Http {
        &self.http
    }

    /// The configured source named `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Arc<dyn Source>> {
        self.all.iter().find(|s| s.name() == name)
    }

    /// Every source, HTTP's first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<dyn Source>> {
        self.all.iter()
    }
}

/// Every kind's routes, added to `router`.
pub(crate) fn routes(router: OpenApiRouter<Arc<App>>) -> OpenApiRouter<Arc<App>> {
    KINDS
        .iter()
        .fold(router, |router, kind| (kind.routes)(router))
}

/// The configured source named `name`, a `S`, for its status route
/// (`GET /ingest/{name}`); 404 with `off` (how to turn it on) when the
/// server runs without it.
#[cfg_attr(not(any(feature = "mqtt", feature = "kafka")), allow(dead_code))]
pub(crate) fn configured<'a, S: Source>(
    app: &'a App,
    name: &str,
    off: &str,
) -> Result<&'a S, Problem> {
    app.sources
        .get(name)
        .and_then(|source| (&**source as &dyn Any).downcast_ref::<S>())
        .ok_or_else(|| Problem::not_found(off))
}

//! A server's options, grouped by what they bound, each value carrying
//! where it came from.
//!
//! [`ServeOptions`] holds the address, then one group per concern:
//! [`Access`] (who may call the server), [`Limits`] (requests and
//! connections), [`StateOptions`] (queries' state and the state
//! directory), [`ComputeOptions`] (the compute threads and a query's CPU)
//! and [`Timing`] (waits and graces); the sources have their own
//! (`MqttIngest` and `KafkaIngest`, with the cargo features `mqtt` and
//! `kafka`). Each default is one const next to its option, which
//! `mfstream serve`'s flags show as theirs.
//!
//! Each bounded value is an [`origin::Value`]: `mfstream serve` gives it
//! the flag that set it, a program that embeds the server sets it with
//! `.into()` (the embedding program's) or leaves it at
//! [`ServeOptions::default`]'s. A message about a value names it as its
//! origin does: `--max-query-log` for the command line, "the embedding
//! program's max_query_log" for a program, which has no such flag.
//! [`ServeOptions::check`] checks them together once, when the server
//! binds.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use mfstream_model::compute::CpuLimit;
use mfstream_model::origin::{self, Origin};
use mfstream_store::Durability;

use crate::ServeError;
#[cfg(feature = "kafka")]
use crate::sources::kafka::KafkaIngest;
#[cfg(feature = "mqtt")]
use crate::sources::mqtt::MqttIngest;

/// A value with its origin.
type Value<T> = origin::Value<T>;

/// A default: the library's, until someone sets it.
fn default<T>(value: T) -> Value<T> {
    Value::new(value, Origin::Default)
}

/// How a server listens and what it bounds.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The address to bind; [`ServeOptions::DEFAULT_ADDR`] by default.
    pub addr: SocketAddr,
    /// Who may call the server: a token, the host names and web origins
    /// a browser's requests may carry, the page's map tiles.
    pub access: Access,
    /// The bounds on requests, connections, queries and streams.
    pub limits: Limits,
    /// Queries' state: replay buffers, state budgets, the state directory.
    pub state: StateOptions,
    /// The threads that compute queries' records, and a query's CPU.
    pub compute: ComputeOptions,
    /// Waits and graces.
    pub timing: Timing,
    /// MQTT ingest (`--mqtt URL`): subscribe to a broker and ingest what
    /// its topics carry, as `POST …/ingest` does. `None` (the default): off.
    #[cfg(feature = "mqtt")]
    pub mqtt: Option<MqttIngest>,
    /// Kafka ingest (`--kafka BROKERS`): read the topics of a pattern as a
    /// consumer group and ingest their records, as `POST …/ingest` does.
    /// `None` (the default): off.
    #[cfg(feature = "kafka")]
    pub kafka: Option<KafkaIngest>,
}

impl ServeOptions {
    /// The address bound by default: loopback, port 8080.
    pub const DEFAULT_ADDR: SocketAddr =
        SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8080);
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            addr: ServeOptions::DEFAULT_ADDR,
            access: Access::default(),
            limits: Limits::default(),
            state: StateOptions::default(),
            compute: ComputeOptions::default(),
            timing: Timing::default(),
            #[cfg(feature = "mqtt")]
            mqtt: None,
            #[cfg(feature = "kafka")]
            kafka: None,
        }
    }
}

/// Who may call the server.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// A bearer token every route but the landing page requires, if set.
    pub token: Value<Option<String>>,
    /// Host names (or addresses) requests may name in `Host` besides the
    /// loopback names and the address a connection arrived on; `*` allows
    /// any (unsafe: a web page can then read the server through DNS
    /// rebinding).
    pub allowed_hosts: Value<Vec<String>>,
    /// Web origins (`scheme://host[:port]`) whose pages may call the
    /// server: they get CORS headers, and their state-changing requests are
    /// not refused.
    pub cors_origins: Value<Vec<String>>,
    /// Map tiles under the page's map: an `http(s)` URL template with
    /// `{z}`, `{x}` and `{y}`, at most 512 bytes; the page's
    /// Content-Security-Policy then lets it load images from that origin.
    /// `None` (the default): no tiles, and images from the server only.
    pub tiles: Value<Option<String>>,
}

/// The bounds on requests, connections, queries and streams.
#[derive(Debug, Clone)]
pub struct Limits {
    /// The largest request body, in bytes: a larger declared
    /// `Content-Length` is refused at once (413).
    pub max_body: Value<usize>,
    /// The most connections open at once; more wait to be accepted.
    pub max_connections: Value<usize>,
    /// How long a request head may take to arrive (and a kept-alive
    /// connection may stay idle).
    pub header_timeout: Value<Duration>,
    /// How long a request body may take to arrive (408 after).
    pub body_timeout: Value<Duration>,
    /// The most queries registered at once.
    pub max_queries: Value<usize>,
    /// The most SSE subscribers of one query.
    pub max_subscribers: Value<usize>,
    /// The most SSE streams open at once, server-wide: fewer than
    /// `max_connections`, so that streams never take every connection and
    /// lock out ingest. `None` (the default): three quarters of
    /// `max_connections` ([`Limits::streams`]). A stream past it is
    /// answered 503.
    pub max_streams: Value<Option<usize>>,
    /// The most temporal properties known (registered on or ingested to).
    pub max_properties: Value<usize>,
    /// The most bytes of request bodies being received or ingested at
    /// once, server-wide: a body holds its bytes from its first (its
    /// `Content-Length` at once) until its call is done; a request past it
    /// is answered 503 with `Retry-After`.
    pub max_inflight_bytes: Value<usize>,
    /// The batches of instants a query's source buffers.
    pub source_buffer: usize,
}

impl Limits {
    /// [`Limits::max_body`]'s default: 4 MiB.
    pub const DEFAULT_MAX_BODY: usize = 4 * 1024 * 1024;
    /// [`Limits::max_connections`]'s default.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
    /// [`Limits::header_timeout`]'s default.
    pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
    /// [`Limits::body_timeout`]'s default.
    pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
    /// [`Limits::max_queries`]'s default.
    pub const DEFAULT_MAX_QUERIES: usize = 1024;
    /// [`Limits::max_subscribers`]'s default.
    pub const DEFAULT_MAX_SUBSCRIBERS: usize = 64;
    /// [`Limits::max_properties`]'s default.
    pub const DEFAULT_MAX_PROPERTIES: usize = 65_536;
    /// [`Limits::max_inflight_bytes`]'s default: 256 MiB.
    pub const DEFAULT_MAX_INFLIGHT_BYTES: usize = 256 * 1024 * 1024;
    /// [`Limits::source_buffer`]'s default.
    pub const DEFAULT_SOURCE_BUFFER: usize = 16;

    /// The most SSE streams open at once: `max_streams`, else three
    /// quarters of `max_connections` (at least one).
    pub fn streams(&self) -> usize {
        let connections = *self.max_connections;
        self.max_streams
            .unwrap_or(connections / 4 * 3 + connections % 4 * 3 / 4)
            .max(1)
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_body: default(Limits::DEFAULT_MAX_BODY),
            max_connections: default(Limits::DEFAULT_MAX_CONNECTIONS),
            header_timeout: default(Limits::DEFAULT_HEADER_TIMEOUT),
            body_timeout: default(Limits::DEFAULT_BODY_TIMEOUT),
            max_queries: default(Limits::DEFAULT_MAX_QUERIES),
            max_subscribers: default(Limits::DEFAULT_MAX_SUBSCRIBERS),
            max_streams: default(None),
            max_properties: default(Limits::DEFAULT_MAX_PROPERTIES),
            max_inflight_bytes: default(Limits::DEFAULT_MAX_INFLIGHT_BYTES),
            source_buffer: Limits::DEFAULT_SOURCE_BUFFER,
        }
    }
}

/// Queries' state: what each keeps for subscribers, what each and all may
/// hold, and the directory that keeps it across restarts.
#[derive(Debug, Clone)]
pub struct StateOptions {
    /// The state directory: registrations, results and ingests are kept
    /// there and restored at start-up. `None` (the default): everything is
    /// in memory and a restart forgets it.
    pub dir: Value<Option<PathBuf>>,
    /// How far each commit to the state store is durable (with `dir`):
    /// [`Durability::Process`] (the default) survives `kill -9`,
    /// [`Durability::Power`] a power failure too, at one fsync per group
    /// commit.
    pub durability: Value<Durability>,
    /// The results each query keeps for late and reconnecting subscribers.
    pub replay: Value<usize>,
    /// The most bytes of results each query keeps for them.
    pub replay_bytes: Value<usize>,
    /// The most bytes of state one query may hold: its open windows (with
    /// `COUNT_DISTINCT`'s distinct texts), the instants handed to it and
    /// not yet answered and its replay buffer, estimated as
    /// [`StateBudget`](mfstream_model::budget::StateBudget) says. A query
    /// over it fails alone, naming the limit; its state is freed.
    /// `replay_bytes` counts in it: keep it well below.
    pub max_query_state: Value<u64>,
    /// The most bytes of state every query together may hold: their
    /// windows, waiting instants and ledgers (not their replay buffers).
    /// Past it, a query that grows while holding at least its share (this
    /// over the queries) fails, naming the limit; smaller ones go on.
    pub max_total_query_state: Value<u64>,
    /// With `dir`: the most bytes of the journal one query may keep from
    /// being released: its property's instants logged after its
    /// checkpoint. A query whose checkpoint does not move (on a bridge or
    /// plugin engine, replayed from its registration) would keep them all;
    /// past it the query fails, naming the limit, and the journal releases
    /// them.
    pub max_query_log: Value<u64>,
}

impl StateOptions {
    /// [`StateOptions::replay`]'s default.
    pub const DEFAULT_REPLAY: usize = 4096;
    /// [`StateOptions::replay_bytes`]'s default: 4 MiB.
    pub const DEFAULT_REPLAY_BYTES: usize = 4 * 1024 * 1024;
    /// [`StateOptions::max_query_state`]'s default.
    pub const DEFAULT_MAX_QUERY_STATE: u64 = mfstream_model::budget::DEFAULT_MAX_QUERY_STATE;
    /// [`StateOptions::max_total_query_state`]'s default.
    pub const DEFAULT_MAX_TOTAL_QUERY_STATE: u64 =
        mfstream_model::budget::DEFAULT_MAX_TOTAL_QUERY_STATE;
    /// [`StateOptions::max_query_log`]'s default: 1 GiB.
    pub const DEFAULT_MAX_QUERY_LOG: u64 = 1024 * 1024 * 1024;
}

impl Default for StateOptions {
    fn default() -> StateOptions {
        StateOptions {
            dir: default(None),
            durability: default(Durability::Process),
            replay: default(StateOptions::DEFAULT_REPLAY),
            replay_bytes: default(StateOptions::DEFAULT_REPLAY_BYTES),
            max_query_state: default(StateOptions::DEFAULT_MAX_QUERY_STATE),
            max_total_query_state: default(StateOptions::DEFAULT_MAX_TOTAL_QUERY_STATE),
            max_query_log: default(StateOptions::DEFAULT_MAX_QUERY_LOG),
        }
    }
}

/// The threads that compute queries' records, and the CPU one query may
/// spend.
#[derive(Debug, Clone)]
pub struct ComputeOptions {
    /// The threads, apart from those that serve requests, run the sources
    /// and write SSE: `None` (the default), one per core.
    pub threads: Value<Option<usize>>,
    /// The most CPU one query may spend: past it the query fails alone,
    /// naming the limit as its origin does. `None` (the default):
    /// unbounded, the queries sharing the compute threads fairly all the
    /// same.
    pub max_query_cpu: Option<CpuLimit>,
}

impl ComputeOptions {
    /// The window a [`ComputeOptions::max_query_cpu`] share is measured
    /// over, unless one is given: 10 s.
    pub const DEFAULT_QUERY_CPU_WINDOW: Duration = Duration::from_secs(10);
}

impl Default for ComputeOptions {
    fn default() -> ComputeOptions {
        ComputeOptions {
            threads: default(None),
            max_query_cpu: None,
        }
    }
}

/// Waits and graces.
#[derive(Debug, Clone)]
pub struct Timing {
    /// How long an ingest waits on a full query buffer before a 503.
    pub ingest_wait: Value<Duration>,
    /// How far ahead of the server's clock an ingested datetime may be
    /// ([`DEFAULT_MAX_DATETIME_AHEAD`](crate::DEFAULT_MAX_DATETIME_AHEAD),
    /// a day, by default): a later one is refused (400 `datetime` over
    /// HTTP, a `badDatetime` message over MQTT and Kafka), so that one
    /// instant stamped in the year 9999 cannot move its property's
    /// duplicate mark past every later one.
    pub max_datetime_ahead: Value<Duration>,
    /// How often an idle SSE stream gets a keep-alive comment.
    pub keep_alive: Value<Duration>,
    /// How long a shutdown waits for queries to end, and then for
    /// connections to take their last bytes, before closing them.
    pub shutdown_grace: Value<Duration>,
}

impl Timing {
    /// [`Timing::ingest_wait`]'s default.
    pub const DEFAULT_INGEST_WAIT: Duration = Duration::from_secs(5);
    /// [`Timing::keep_alive`]'s default.
    pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(15);
    /// [`Timing::shutdown_grace`]'s default.
    pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
}

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            ingest_wait: default(Timing::DEFAULT_INGEST_WAIT),
            max_datetime_ahead: default(crate::DEFAULT_MAX_DATETIME_AHEAD),
            keep_alive: default(Timing::DEFAULT_KEEP_ALIVE),
            shutdown_grace: default(Timing::DEFAULT_SHUTDOWN_GRACE),
        }
    }
}

impl ServeOptions {
    /// Checks the options together, once, before anything is opened:
    /// `Err` for a value the server cannot use (a token no header can
    /// carry, a tiles template the page cannot use), each naming the value
    /// as its origin does; and a warning (logged) for each pair that works
    /// against itself.
    pub fn check(&self) -> Result<(), ServeError> {
        if let Some(token) = self.access.token.as_deref() {
            crate::auth::check_token(token, &self.access.token.origin)?;
        }
        let state = &self.state;
        if *state.replay_bytes as u64 >= *state.max_query_state {
            // Not refused: a server that ran with a large replay buffer
            // still starts; its queries fail when their rings fill.
            tracing::warn!(
                "{} ({}) is not less than {} ({}): a query's replay buffer counts in its state, \
                 so a query may fail once its buffer fills; lower the first or raise the second",
                state.replay_bytes.name("replay_bytes"),
                *state.replay_bytes,
                state.max_query_state.name("max_query_state"),
                *state.max_query_state
            );
        }
        let limits = &self.limits;
        if *limits.max_body > *limits.max_inflight_bytes {
            tracing::warn!(
                "{} ({}) is over {} ({}): a body that large is always answered 503",
                limits.max_body.name("max_body"),
                *limits.max_body,
                limits.max_inflight_bytes.name("max_inflight_bytes"),
                *limits.max_inflight_bytes
            );
        }
        let streams = limits.streams();
        if streams >= *limits.max_connections {
            tracing::warn!(
                "{} ({streams}) is not below {} ({}): open streams can take every connection \
                 and lock out ingest",
                limits.max_streams.name("max_streams"),
                limits.max_connections.name("max_connections"),
                *limits.max_connections
            );
        }
        Ok(())
    }
}

//! `mfstream serve`: the control plane, until SIGTERM or SIGINT.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use mfstream_model::compute::CpuLimit;
use mfstream_model::origin::{Origin, Value};
use mfstream_registry::Registry;
use mfstream_server::{
    Access, ComputeOptions, KafkaIngest, Limits, MqttIngest, ServeOptions, Server, StateOptions,
    Timing,
};
use tokio::signal::unix::{SignalKind, signal};

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;

use super::ConfigArgs;
use crate::Outcome;

/// Serves until a signal; then stops every query, ends every stream and
/// exits 0.
pub(crate) fn serve(args: ServeArgs, matches: Option<&ArgMatches>) -> Result<Outcome> {
    let path = Registry::discover(args.config.config.as_deref());
    let registry = Arc::new(Registry::load(path.as_deref())?);
    let options = args.into_options(matches)?;
    raise_open_files_limit(*options.limits.max_connections as u64 + SPARE_FILES);
    if !options.addr.ip().is_loopback() && options.access.token.is_none() {
        tracing::warn!(
            "serving on {} without a token: anyone who reaches it can run queries",
            options.addr
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let mut interrupt = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
        let mut terminate = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
        let hangup = signal(SignalKind::hangup()).context("cannot watch SIGHUP")?;
        let server = Server::bind(registry.clone(), options).await?;
        let addr = server.local_addr()?;
        // The one line a supervisor (or a test) waits for.
        let mut out = std::io::stdout().lock();
        writeln!(out, "mfstream: listening on http://{addr}").context("cannot write to stdout")?;
        out.flush().context("cannot write to stdout")?;
        drop(out);
        tokio::spawn(reload_on_hangup(hangup, registry));
        for (line, count) in server.ready() {
            tokio::spawn(say_ready(line, count));
        }
        let shutdown = async move {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        };
        server.run(shutdown).await?;
        eprintln!("mfstream: stopped");
        Ok(Outcome::Success)
    })
}

/// Prints a source's ready line (`mfstream: mqtt subscribed on URL`,
/// `mfstream: kafka assigned on BROKERS`) each time it holds again (each
/// subscription granted, each assignment of partitions): the line a test or
/// a supervisor waits for.
async fn say_ready(line: String, mut count: tokio::sync::watch::Receiver<u64>) {
    while count.changed().await.is_ok() {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "mfstream: {line}").and_then(|()| out.flush());
    }
}

/// Descriptors beyond the connections: the listener, bridge jobs' pipes,
/// plugin libraries, logs.
const SPARE_FILES: u64 = 256;

/// Raises the soft limit on open files toward `want` (up to the hard
/// limit), so `--max-connections` connections fit beside everything else;
/// warns when the hard limit is lower.
fn raise_open_files_limit(want: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limits into a struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    if limit.rlim_cur >= want {
        return;
    }
    let raised = libc::rlimit {
        rlim_cur: want.min(limit.rlim_max),
        rlim_max: limit.rlim_max,
    };
    // SAFETY: setrlimit reads a struct we own; a soft limit at most the
    // hard one is always allowed.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 || raised.rlim_cur < want {
        tracing::warn!(
            "only {} files may be open (ulimit -n): lower --max-connections, or raise the limit",
            raised.rlim_cur.max(limit.rlim_cur)
        );
    }
}

/// Reloads engines.toml on every SIGHUP: new queries use the new engines,
/// running ones keep theirs. A file with errors leaves the engines as they
/// were. Each outcome is one line on stdout (the errors go to stderr).
async fn reload_on_hangup(mut hangup: tokio::signal::unix::Signal, registry: Arc<Registry>) {
    while hangup.recv().await.is_some() {
        let line = match (registry.path(), registry.reload_from_file()) {
            (None, _) => "mfstream: no engines.toml to reload".to_owned(),
            (Some(path), Ok(())) => format!(
                "mfstream: reloaded {} ({} engines)",
                path.display(),
                registry.engines().len()
            ),
            (Some(path), Err(e)) => {
                eprintln!("{e}");
                format!(
                    "mfstream: cannot reload {}: the engines are unchanged",
                    path.display()
                )
            }
        };
        // A closed stdout (nobody reading the status lines) is no reason to
        // stop reloading.
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    }
}

/// `mfstream serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The address to listen on (port 0 picks a free port).
    #[arg(long, value_name = "ADDR", default_value_t = ServeOptions::DEFAULT_ADDR)]
    pub addr: SocketAddr,
    /// A bearer token every route but the landing page requires: visible
    /// ASCII, no leading or trailing space (else exit 2).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "MFSTREAM_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// The largest request body, in bytes (a larger declared Content-Length
    /// is refused at once with 413). With --state, an ingest up to this size
    /// is one journal record: after a crash all of it is in, or none.
    #[arg(long, value_name = "BYTES", default_value_t = Limits::DEFAULT_MAX_BODY)]
    pub max_body: usize,
    /// The most connections open at once (more wait to be accepted).
    #[arg(long, value_name = "N", default_value_t = Limits::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// How long a request head may take to arrive, and a kept-alive
    /// connection may stay idle.
    #[arg(long, value_name = "MS", default_value_t = Limits::DEFAULT_HEADER_TIMEOUT.as_millis() as u64)]
    pub header_timeout_ms: u64,
    /// How long a request body may take to arrive (408 after).
    #[arg(long, value_name = "MS", default_value_t = Limits::DEFAULT_BODY_TIMEOUT.as_millis() as u64)]
    pub body_timeout_ms: u64,
    /// The most queries registered at once (and so the per-query series
    /// of GET /metrics: 13 each).
    #[arg(long, value_name = "N", default_value_t = Limits::DEFAULT_MAX_QUERIES)]
    pub max_queries: usize,
    /// The most SSE subscribers of one query.
    #[arg(long, value_name = "N", default_value_t = Limits::DEFAULT_MAX_SUBSCRIBERS)]
    pub max_subscribers: usize,
    /// The most SSE streams open at once, server-wide; keep it below
    /// --max-connections so that streams never take every connection and
    /// lock out ingest. Past it a stream is answered 503 with Retry-After.
    /// [default: 3/4 of --max-connections]
    #[arg(long, value_name = "N")]
    pub max_streams: Option<usize>,
    /// The most temporal properties known (registered on or ingested to).
    #[arg(long, value_name = "N", default_value_t = Limits::DEFAULT_MAX_PROPERTIES)]
    pub max_properties: usize,
    /// The results each query keeps for late and reconnecting subscribers.
    #[arg(long, value_name = "N", default_value_t = StateOptions::DEFAULT_REPLAY)]
    pub replay: usize,
    /// The most bytes of results each query keeps for them.
    #[arg(long, value_name = "BYTES", default_value_t = StateOptions::DEFAULT_REPLAY_BYTES)]
    pub replay_bytes: usize,
    /// The most bytes of state one query may hold: its open windows (with
    /// COUNT_DISTINCT's distinct texts), the instants handed to it and not yet answered and its
    /// replay buffer (estimated: a text counts its length plus 64 bytes). A
    /// query over it fails alone, with a reason naming this limit, and its
    /// state is freed (keep --replay-bytes well below it).
    #[arg(long, value_name = "BYTES", default_value_t = StateOptions::DEFAULT_MAX_QUERY_STATE)]
    pub max_query_state: u64,
    /// The most bytes of state every query together may hold (as
    /// --max-query-state counts it, replay buffers aside). Past it, a query
    /// that grows while holding at least its share (this over the number of
    /// queries) fails, with a reason naming this limit; smaller ones go on.
    #[arg(long, value_name = "BYTES", default_value_t = StateOptions::DEFAULT_MAX_TOTAL_QUERY_STATE)]
    pub max_total_query_state: u64,
    /// The threads that compute queries' records (transforms, windows,
    /// position measures and fences, the replay at start-up), apart from
    /// those that serve requests, run MQTT and Kafka and write SSE; the
    /// queries share them fairly, in slices of about half a millisecond.
    /// Default: one per core.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub compute_threads: Option<u16>,
    /// The most CPU one query may spend: this share of one core (0.5: half
    /// a core) over any --query-cpu-window. Past it the query fails alone,
    /// with a reason naming this limit; the replay at start-up is not
    /// counted. Default: none (the queries still share the compute threads
    /// fairly).
    #[arg(long, value_name = "SHARE")]
    pub max_query_cpu: Option<f64>,
    /// The window --max-query-cpu is measured over.
    #[arg(long, value_name = "SECONDS", default_value_t = ComputeOptions::DEFAULT_QUERY_CPU_WINDOW.as_secs(), value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub query_cpu_window: u64,
    /// The most bytes of request bodies being received or ingested at once,
    /// server-wide: a body holds its Content-Length (or its chunks as they
    /// come) until its call is done; past it, 503 with Retry-After.
    #[arg(long, value_name = "BYTES", default_value_t = Limits::DEFAULT_MAX_INFLIGHT_BYTES)]
    pub max_inflight_bytes: usize,
    /// How long an ingest waits on a full query buffer before answering 503
    /// (with --state, only until the ingest is logged, as one record; its
    /// later chunks are then owed to the queries and wait for room).
    #[arg(long, value_name = "MS", default_value_t = Timing::DEFAULT_INGEST_WAIT.as_millis() as u64)]
    pub ingest_wait_ms: u64,
    /// How far ahead of the server's clock an ingested datetime may be:
    /// a later one is refused (400 naming the instant; over MQTT and Kafka a
    /// badDatetime message), so that one instant stamped far in the future
    /// (9999-12-31) cannot close every window up to it or, over MQTT and
    /// Kafka, make every later instant of its property a duplicate.
    /// `mfstream run` has no such bound.
    #[arg(long, value_name = "MS", default_value_t = mfstream_server::DEFAULT_MAX_DATETIME_AHEAD.as_millis() as u64)]
    pub max_datetime_ahead_ms: u64,
    /// How often an idle SSE stream gets a keep-alive comment.
    #[arg(long, value_name = "MS", default_value_t = Timing::DEFAULT_KEEP_ALIVE.as_millis() as u64)]
    pub keep_alive_ms: u64,
    /// On SIGTERM or SIGINT: how long queries get to stop, and then
    /// connections to take their last bytes, before they are closed.
    #[arg(long, value_name = "MS", default_value_t = Timing::DEFAULT_SHUTDOWN_GRACE.as_millis() as u64)]
    pub shutdown_grace_ms: u64,
    /// Keep registrations, results and ingested instants in DIR (created
    /// if missing), and resume the queries found there at start-up.
    /// Without it, everything is in memory and a restart forgets it. One
    /// server per DIR (a second exits, naming the holder's pid); DIR is
    /// made 0700 and its files 0600.
    #[arg(long, value_name = "DIR")]
    pub state: Option<PathBuf>,
    /// How far each write to the --state store is durable (only with
    /// --state).
    #[arg(
        long,
        value_enum,
        value_name = "LEVEL",
        default_value_t = DurabilityArg::Process,
        requires = "state"
    )]
    pub durability: DurabilityArg,
    /// A name requests may give in their Host header, besides localhost,
    /// 127.0.0.1, [::1] and the address a connection arrived on (others get
    /// 403, so a web page cannot read the server through DNS rebinding).
    /// Repeatable; with or without a port. '*' allows any: unsafe.
    #[arg(long, value_name = "NAME")]
    pub allowed_host: Vec<String>,
    /// A web origin (scheme://host[:port]) whose pages may call the server:
    /// it gets CORS answers, and its POST and DELETE requests are taken
    /// (those of any other origin get 403). Repeatable.
    #[arg(long, value_name = "ORIGIN")]
    pub cors_origin: Vec<String>,
    /// Map tiles under the page's map: an http(s) URL template with {z},
    /// {x} and {y} once each (Web Mercator tiles, as OpenStreetMap's), at
    /// most 512 bytes, such as https://tile.example/{z}/{x}/{y}.png. The
    /// page loads its tiles from that origin (its Content-Security-Policy
    /// allows it then, and only then); anyone who can load the page sees
    /// the template, a key in it included. [default: no tiles]
    #[arg(long, value_name = "URL")]
    pub tiles: Option<String>,
    /// Only with --state: the most bytes of the journal one query may keep from
    /// being released (its property's instants logged after its
    /// checkpoint; a query on a bridge or plugin engine replays from its
    /// registration, so it keeps them all). Past it the query fails, with a
    /// reason naming this limit, and the journal releases them.
    #[arg(long, value_name = "BYTES", default_value_t = StateOptions::DEFAULT_MAX_QUERY_LOG)]
    pub max_query_log: u64,
    /// Ingest from an MQTT broker: mqtt://HOST[:PORT] (1883) or
    /// mqtts://HOST[:PORT] (8883, with --mqtt-ca). QoS 1 on a persistent
    /// session; a message is acknowledged once ingested (with --state:
    /// stored). An instant at or before its property's last one from MQTT
    /// is a duplicate (dropped, counted). At most 4096 messages are held
    /// unacknowledged, and --max-inflight-bytes of payload. User and
    /// password come from MFSTREAM_MQTT_USERNAME and MFSTREAM_MQTT_PASSWORD.
    /// Counters and the last bad messages: GET /ingest/mqtt.
    #[arg(long, value_name = "URL")]
    pub mqtt: Option<String>,
    /// The PEM file of the CA that signed the broker's certificate (for
    /// mqtts://).
    #[arg(long, value_name = "FILE", requires = "mqtt")]
    pub mqtt_ca: Option<PathBuf>,
    /// A topic pattern to subscribe to: levels separated by '/', with
    /// {cid}, {fid} and {pname} each once as a whole level (the property's
    /// ids). Repeatable, at most 64; a topic takes the first that matches.
    /// The property name tgsequence is reserved for positions.
    /// [default: mfapi/{cid}/{fid}/{pname}]
    #[arg(long, value_name = "PATTERN", requires = "mqtt")]
    pub mqtt_topic: Vec<String>,
    /// The MQTT client id, which names the broker's persistent session.
    /// [default: mfstream- and a hash of the --state directory (without
    /// --state: of the address bound), the same at every restart]
    #[arg(long, value_name = "ID", requires = "mqtt")]
    pub mqtt_client_id: Option<String>,
    /// Ingest from Kafka: the bootstrap brokers, HOST:PORT[,HOST:PORT…].
    /// The server reads the topics of --kafka-topic as a member of the
    /// consumer group --kafka-group, and commits a record's offset only
    /// once it is ingested (with --state: stored). Records read again
    /// after a restart are recognised: an instant at or before its
    /// property's last one is a duplicate (dropped, counted), so a
    /// property's records must be in one partition. Batches of at most
    /// 1024 records and --max-inflight-bytes; librdkafka pre-fetches at
    /// most --max-inflight-bytes. A new matching topic is read within
    /// about 10 s. Brokers that cannot be reached are logged once per
    /// change; counters, the brokers' reachability and the last bad records:
    /// GET /ingest/kafka.
    #[arg(long, value_name = "BROKERS")]
    pub kafka: Option<String>,
    /// The consumer group, which keeps the committed offsets.
    /// [default: mfstream- and a hash of the --state directory (without
    /// --state: of the address bound), the same at every restart]
    #[arg(long, value_name = "GROUP", requires = "kafka")]
    pub kafka_group: Option<String>,
    /// A topic pattern to read: levels separated by '.', with {cid}, {fid}
    /// and {pname} each once as a whole level (the property's ids, of
    /// letters, digits, '_' and '-'). Repeatable, at most 64; a topic takes
    /// the first that matches. The property name tgsequence is reserved
    /// for positions. [default: mfapi.{cid}.{fid}.{pname}]
    #[arg(long, value_name = "PATTERN", requires = "kafka")]
    pub kafka_topic: Vec<String>,
    /// How long the group waits for a member gone silent (a killed server)
    /// before its partitions go to another member, or to it restarted:
    /// 1000 to 3600000 (the broker may narrow it). Also the longest a
    /// commit is waited for: past it, lastError says so and reading goes
    /// on.
    #[arg(long, value_name = "MS", default_value_t = 10_000, requires = "kafka")]
    pub kafka_session_timeout_ms: u64,
}

/// A value from the command line: `flag` set it, or left it at the
/// default it shows.
fn flag<T>(value: T, flag: &'static str) -> Value<T> {
    Value::new(value, Origin::flag(flag))
}

/// Milliseconds from the command line's `name`.
fn millis(ms: u64, name: &'static str) -> Value<Duration> {
    flag(Duration::from_millis(ms), name)
}

impl ServeArgs {
    /// The server's options, grouped as the library groups them, each
    /// value with the flag that sets it (or, for the token, the variable
    /// when it came from there).
    fn into_options(self, matches: Option<&ArgMatches>) -> Result<ServeOptions> {
        let token_origin = match matches.and_then(|m| m.value_source("token")) {
            Some(ValueSource::EnvVariable) => Origin::env("MFSTREAM_TOKEN"),
            _ => Origin::flag("--token"),
        };
        let access = Access {
            token: Value::new(self.token, token_origin),
            allowed_hosts: flag(self.allowed_host, "--allowed-host"),
            cors_origins: flag(self.cors_origin, "--cors-origin"),
            tiles: flag(self.tiles, "--tiles"),
        };
        let limits = Limits {
            max_body: flag(self.max_body, "--max-body"),
            max_connections: flag(self.max_connections, "--max-connections"),
            header_timeout: millis(self.header_timeout_ms, "--header-timeout-ms"),
            body_timeout: millis(self.body_timeout_ms, "--body-timeout-ms"),
            max_queries: flag(self.max_queries, "--max-queries"),
            max_subscribers: flag(self.max_subscribers, "--max-subscribers"),
            max_streams: flag(self.max_streams, "--max-streams"),
            max_properties: flag(self.max_properties, "--max-properties"),
            max_inflight_bytes: flag(self.max_inflight_bytes, "--max-inflight-bytes"),
            ..Limits::default()
        };
        let state = StateOptions {
            dir: flag(self.state, "--state"),
            durability: flag(self.durability.into(), "--durability"),
            replay: flag(self.replay, "--replay"),
            replay_bytes: flag(self.replay_bytes, "--replay-bytes"),
            max_query_state: flag(self.max_query_state, "--max-query-state"),
            max_total_query_state: flag(self.max_total_query_state, "--max-total-query-state"),
            max_query_log: flag(self.max_query_log, "--max-query-log"),
        };
        let compute = ComputeOptions {
            threads: flag(self.compute_threads.map(usize::from), "--compute-threads"),
            max_query_cpu: self
                .max_query_cpu
                .map(|share| {
                    let share = flag(share, "--max-query-cpu");
                    CpuLimit::new(share, Duration::from_secs(self.query_cpu_window))
                })
                .transpose()
                .context("--max-query-cpu")?,
        };
        let timing = Timing {
            ingest_wait: millis(self.ingest_wait_ms, "--ingest-wait-ms"),
            max_datetime_ahead: millis(self.max_datetime_ahead_ms, "--max-datetime-ahead-ms"),
            keep_alive: millis(self.keep_alive_ms, "--keep-alive-ms"),
            shutdown_grace: millis(self.shutdown_grace_ms, "--shutdown-grace-ms"),
        };
        Ok(ServeOptions {
            addr: self.addr,
            access,
            limits,
            state,
            compute,
            timing,
            mqtt: self.mqtt.map(|url| MqttIngest {
                url,
                ca: self.mqtt_ca,
                topics: self.mqtt_topic,
                client_id: self.mqtt_client_id,
                username: std::env::var("MFSTREAM_MQTT_USERNAME").ok(),
                password: std::env::var("MFSTREAM_MQTT_PASSWORD").ok(),
            }),
            kafka: self.kafka.map(|brokers| KafkaIngest {
                brokers,
                group: self.kafka_group,
                topics: self.kafka_topic,
                session_timeout: Some(Duration::from_millis(self.kafka_session_timeout_ms)),
            }),
        })
    }
}

/// `serve --durability`: what a write to the state store survives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum DurabilityArg {
    /// Survives the process being killed (kill -9, an OOM kill, a panic):
    /// a write is done once the kernel has it.
    Process,
    /// Survives a power failure or a kernel crash too: every write waits for
    /// an fdatasync (shared by the writes waiting), which slows durable
    /// ingest.
    Power,
}

impl From<DurabilityArg> for mfstream_store::Durability {
    fn from(arg: DurabilityArg) -> mfstream_store::Durability {
        match arg {
            DurabilityArg::Process => mfstream_store::Durability::Process,
            DurabilityArg::Power => mfstream_store::Durability::Power,
        }
    }
}

//! The `mfstream` command line: arguments and the subcommands.

mod engines;
mod input;
mod plugin_host;
mod run;
mod serve;
mod state;
mod values;

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

use crate::{EXIT_CODES, ExitStatus, Outcome};

pub use self::engines::{check, engines};
pub use self::plugin_host::plugin_host;
pub use self::run::run;
pub use self::serve::serve;
pub use self::state::state;
use self::values::names;

/// What `mfstream --help` says after the options, before the exit codes.
const EXAMPLES: &str = "\
Examples:
  mfstream engines
  mfstream check --config engines.toml
  mfstream run --op mul --arg 1.852 --property speed examples/speed.ndjson
  mfstream run --property speed \\
    --query '{\"aggregation\":\"AVG\",\"window\":{\"type\":\"TUMBLING\",\"size\":10,\"unit\":\"SECONDS\"}}' \\
    examples/speed.ndjson
  tail -f speeds.ndjson | mfstream run --engine flink --op ln
  mfstream serve --addr 127.0.0.1:8080
  mfstream completions bash > ~/.local/share/bash-completion/completions/mfstream";

/// What `mfstream --help` says after the exit codes.
const ENVIRONMENT: &str = "\
Environment:
  MFSTREAM_CONFIG       the engines.toml when --config is absent (else ./engines.toml)
  MFAPI_STREAM_ENGINE   the engine when --engine is absent (else the file's default, else local)
  MFAPI_<RUNTIME>_CMD   a bridge engine's job command, as its cmd_env names it (MFAPI_FLINK_CMD, ...)
  MFSTREAM_TOKEN        serve: the bearer token, as --token
  MFSTREAM_MQTT_USERNAME, MFSTREAM_MQTT_PASSWORD
                        serve --mqtt: the broker's user and password (never flags)
  NO_COLOR              when set (not empty), the logs have no colour (nor when stderr is no terminal)
  RUST_LOG              what is logged to stderr (default warn)";

/// What `mfstream run --help` says after the options, before the exit codes.
const RUN_EXAMPLES: &str = "\
Examples:
  mfstream run --op mul --arg 1.852 --property speed examples/speed.ndjson
  mfstream run --query '{\"operation\":\"mul\",\"arg\":1.852}' < examples/speed.ndjson
  mfstream run --property speed \\
    --query '{\"aggregation\":\"AVG\",\"window\":{\"type\":\"TUMBLING\",\"size\":10,\"unit\":\"SECONDS\"}}' \\
    examples/speed.ndjson
  mfstream run --engine flink --op ln examples/speed.ndjson | head -3

Operation and aggregation names are read in any case (mul, MUL).";

/// The "Exit status:" section of a `--help`, generated from main.rs's
/// [`EXIT_CODES`]: `meaning` picks what a code means to the command, `None`
/// leaving out a code it never ends with.
fn exit_status(meaning: fn(&ExitStatus) -> Option<&'static str>) -> String {
    let mut text = String::from("Exit status:");
    for status in EXIT_CODES {
        if let Some(meaning) = meaning(status) {
            text.push_str(&format!("\n  {:<4} {meaning}", status.code));
        }
    }
    text
}

fn after_help() -> String {
    let codes = exit_status(|status| Some(status.general));
    format!("{EXAMPLES}\n\n{codes}\n\n{ENVIRONMENT}")
}

fn run_after_help() -> String {
    format!("{RUN_EXAMPLES}\n\n{}", exit_status(|status| status.run))
}

/// A registry of stream engines for OGC API – Moving Features continuous
/// queries.
#[derive(Debug, Parser)]
#[command(
    name = "mfstream",
    version,
    about,
    propagate_version = true,
    after_help = after_help(),
    disable_help_subcommand = true
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
// Parsed once at start-up and matched at once: boxing `serve`'s many flags
// would save nothing that matters.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List every engine with its kind, readiness and why not ready.
    Engines(EnginesArgs),
    /// Validate engines.toml; exit 0 when all is well.
    #[command(after_help = exit_status(|status| status.check))]
    Check(ConfigArgs),
    /// Run one continuous query from a file or stdin to JSON lines on stdout.
    #[command(after_help = run_after_help())]
    Run(RunArgs),
    /// Serve continuous queries over HTTP and Server-Sent Events (OGC API –
    /// Moving Features Part 4) until SIGTERM or SIGINT.
    #[command(after_help = exit_status(|status| status.serve))]
    Serve(ServeArgs),
    /// Check or repair a --state directory's journal (the server refuses
    /// to start on damage that is not the end of an unfinished write).
    State(StateArgs),
    /// Print a completion script for SHELL to stdout.
    ///
    /// `--op` and `--type` complete their values, `--engine` the engines of
    /// the engines.toml found now as `run` finds it.
    #[command(
        after_help = "Example: mfstream completions bash > ~/.local/share/bash-completion/completions/mfstream"
    )]
    Completions {
        /// bash, elvish, fish, powershell or zsh.
        shell: clap_complete::Shell,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Print the help of mfstream, or of COMMAND (as `--help` does).
    // mfstream's own, not clap's built-in one, which refuses `help --help`.
    Help {
        /// The command, e.g. run.
        command: Option<String>,
    },
    /// Host a plugin out of process (`isolation = "process"`); run by
    /// mfstream itself.
    #[command(hide = true)]
    PluginHost(PluginHostArgs),
}

/// Writes the completion script for `shell`. A closed stdout (`| head`)
/// is success, as everywhere.
pub fn completions(shell: clap_complete::Shell, config: ConfigArgs) -> anyhow::Result<Outcome> {
    // `--engine` takes any name (the registry decides), so its completions
    // are the engines known now, put on a copy of the command for the script.
    let registry = mfstream::Registry::load(
        mfstream::Registry::discover(config.config.as_deref()).as_deref(),
    )?;
    let engines: Vec<String> = registry
        .engines()
        .into_iter()
        .map(|info| info.name)
        .collect();
    let full = Cli::command().mut_subcommand("run", |run| {
        run.mut_arg("engine", |arg| {
            arg.value_parser(clap::builder::PossibleValuesParser::new(engines))
        })
    });
    // clap_complete offers hidden subcommands too: the completed command is
    // the real one less `plugin-host`, which only mfstream itself runs.
    let mut visible = clap::Command::new("mfstream")
        .version(env!("CARGO_PKG_VERSION"))
        .propagate_version(true)
        .disable_help_subcommand(true)
        .args(full.get_arguments().cloned())
        .subcommands(full.get_subcommands().filter(|c| !c.is_hide_set()).cloned());
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut visible, "mfstream", &mut script);
    match std::io::stdout().lock().write_all(&script) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(Outcome::Success),
        result => {
            result.context("cannot write to stdout")?;
            Ok(Outcome::Success)
        }
    }
}

/// Prints the help of mfstream, or of its subcommand `command`: what
/// `--help` prints, as clap renders it.
pub fn help(command: Option<&str>) -> anyhow::Result<Outcome> {
    let cli = Cli::command();
    let mut args = vec!["mfstream"];
    if let Some(name) = command {
        if cli
            .get_subcommands()
            .all(|c| c.is_hide_set() || c.get_name() != name)
        {
            let known: Vec<&str> = cli
                .get_subcommands()
                .filter(|c| !c.is_hide_set())
                .map(clap::Command::get_name)
                .collect();
            anyhow::bail!("no command {name:?}: the commands are {}", known.join(", "));
        }
        args.push(name);
    }
    args.push("--help");
    match cli.try_get_matches_from(args) {
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => match e.print() {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(Outcome::Success),
            result => {
                result.context("cannot write to stdout")?;
                Ok(Outcome::Success)
            }
        },
        Err(e) => Err(e.into()),
        Ok(_) => anyhow::bail!("--help printed no help"),
    }
}

/// `mfstream state`.
#[derive(Debug, Args)]
pub struct StateArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: StateAction,
}

/// What `mfstream state` does.
#[derive(Debug, Subcommand)]
pub enum StateAction {
    /// Read every journal segment of DIR, changing nothing, and report the
    /// records that check and every damaged range; exit 0 when nothing is
    /// damaged, 1 otherwise.
    Check {
        /// The state directory (serve's --state).
        dir: PathBuf,
    },
    /// Keep every record that checks, in order, and move each damaged range
    /// aside into SEGMENT.OFFSET.damaged next to its segment; report the
    /// counts. Stop the server first: it takes the directory's lock.
    Repair {
        /// The state directory (serve's --state).
        dir: PathBuf,
    },
}

/// `mfstream plugin-host`.
#[derive(Debug, Args)]
pub struct PluginHostArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: PluginHostAction,
}

/// What `mfstream plugin-host` does.
#[derive(Debug, Subcommand)]
pub enum PluginHostAction {
    /// Load and check LIB, print its descriptor as JSON.
    Describe {
        /// The plugin library.
        lib: PathBuf,
    },
    /// Serve one query of ENGINE of LIB as a json-framing bridge job.
    Run {
        /// The plugin library.
        lib: PathBuf,
        /// The engine.
        engine: String,
        /// The operation and argument the bridge appends (the query is read
        /// from MFSTREAM_QUERY).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        job_args: Vec<String>,
    },
}

/// Where the registry comes from.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// The engines.toml to load (else $MFSTREAM_CONFIG, else ./engines.toml
    /// when present, else the built-in engines alone).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// `mfstream engines`.
#[derive(Debug, Args)]
pub struct EnginesArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Print a JSON array instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `mfstream run`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("what").required(true).args(["query", "op"]))]
pub struct RunArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The engine (else $MFAPI_STREAM_ENGINE, else the config's default,
    /// else local).
    #[arg(long, value_name = "NAME")]
    pub engine: Option<String>,
    /// The query as an OGC API – MF Part 4 registration body, e.g.
    /// '{"operation":"mul","arg":1.852}'.
    #[arg(long, value_name = "JSON", conflicts_with_all = ["op", "arg"])]
    pub query: Option<String>,
    /// A lifted operation; its help lists the catalogue's and the position
    /// operations.
    #[arg(long, value_name = "OP", value_parser = names::<String>(values::operations), hide_possible_values = true, help = values::operations_help())]
    pub op: Option<String>,
    /// The operation's scalar argument; its help names the operations that
    /// take one.
    #[arg(long, value_name = "X", allow_negative_numbers = true, help = values::arg_help())]
    pub arg: Option<f64>,
    /// The temporal property's name, carried in every event: "value" by
    /// default, "tgsequence" for positions.
    #[arg(long, value_name = "NAME")]
    pub property: Option<String>,
    /// The property's type: TReal, TInteger, TText or TBoolean; or
    /// positions, input lines {"datetime","coordinates":[x,y]}: TGeogPoint
    /// (lon/lat in degrees on the WGS84 ellipsoid, metres) or TGeomPoint
    /// (planar: give the query's "crs", e.g. EPSG:3857).
    #[arg(
        long = "type",
        value_name = "TYPE",
        default_value = "TReal",
        value_parser = names::<mfstream::PropertyType>(values::property_types),
        hide_possible_values = true
    )]
    pub property_type: mfstream::PropertyType,
    /// Live input (stdin kept open, a pipe): time windows also close on the
    /// wall clock, once it passes their end plus the query's "grace",
    /// without waiting for a later record. Without it, event time comes
    /// from the records alone (a file).
    #[arg(long)]
    pub live: bool,
    /// The most bytes of state the query may hold: its open windows (with
    /// COUNT_DISTINCT's distinct texts) and the instants read but not yet
    /// taken (estimated: a text counts its length plus 64 bytes). Past it
    /// the query fails (exit 1) with a reason naming this limit.
    #[arg(long, value_name = "BYTES", default_value_t = mfstream::DEFAULT_MAX_QUERY_STATE)]
    pub max_query_state: u64,
    /// What a record with no result does (ln of 0 or less, an exp that
    /// overflows, a SUM that overflows): "skip" drops it, counts it
    /// in the next event's "skipped" and goes on; "fail" fails the query,
    /// naming the record's datetime (exit status 1). Overrides the
    /// query's "onError"; when neither says, skip.
    #[arg(long, value_name = "POLICY", value_parser = ["skip", "fail"])]
    pub on_error: Option<String>,
    /// One JSON instant per line, {"datetime":…,"value":…}; stdin when
    /// absent or "-".
    #[arg(value_name = "INPUT")]
    pub input: Option<PathBuf>,
}

/// `mfstream serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The address to listen on (port 0 picks a free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
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
    #[arg(long, value_name = "BYTES", default_value_t = 4 * 1024 * 1024)]
    pub max_body: usize,
    /// The most connections open at once (more wait to be accepted).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_connections: usize,
    /// How long a request head may take to arrive, and a kept-alive
    /// connection may stay idle.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    pub header_timeout_ms: u64,
    /// How long a request body may take to arrive (408 after).
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub body_timeout_ms: u64,
    /// The most queries registered at once (and so the per-query series
    /// of GET /metrics: 13 each).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_queries: usize,
    /// The most SSE subscribers of one query.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub max_subscribers: usize,
    /// The most SSE streams open at once, server-wide; keep it below
    /// --max-connections so that streams never take every connection and
    /// lock out ingest. Past it a stream is answered 503 with Retry-After.
    /// [default: 3/4 of --max-connections]
    #[arg(long, value_name = "N")]
    pub max_streams: Option<usize>,
    /// The most temporal properties known (registered on or ingested to).
    #[arg(long, value_name = "N", default_value_t = 65_536)]
    pub max_properties: usize,
    /// The results each query keeps for late and reconnecting subscribers.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    pub replay: usize,
    /// The most bytes of results each query keeps for them.
    #[arg(long, value_name = "BYTES", default_value_t = 4 * 1024 * 1024)]
    pub replay_bytes: usize,
    /// The most bytes of state one query may hold: its open windows (with
    /// COUNT_DISTINCT's distinct texts), the instants handed to it and not yet answered and its
    /// replay buffer (estimated: a text counts its length plus 64 bytes). A
    /// query over it fails alone, with a reason naming this limit, and its
    /// state is freed (keep --replay-bytes well below it).
    #[arg(long, value_name = "BYTES", default_value_t = mfstream::DEFAULT_MAX_QUERY_STATE)]
    pub max_query_state: u64,
    /// The most bytes of state every query together may hold (as
    /// --max-query-state counts it, replay buffers aside). Past it, a query
    /// that grows while holding at least its share (this over the number of
    /// queries) fails, with a reason naming this limit; smaller ones go on.
    #[arg(long, value_name = "BYTES", default_value_t = mfstream::DEFAULT_MAX_TOTAL_QUERY_STATE)]
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
    #[arg(long, value_name = "SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub query_cpu_window: u64,
    /// The most bytes of request bodies being received or ingested at once,
    /// server-wide: a body holds its Content-Length (or its chunks as they
    /// come) until its call is done; past it, 503 with Retry-After.
    #[arg(long, value_name = "BYTES", default_value_t = 256 * 1024 * 1024)]
    pub max_inflight_bytes: usize,
    /// How long an ingest waits on a full query buffer before answering 503
    /// (with --state, only until the ingest is logged, as one record; its
    /// later chunks are then owed to the queries and wait for room).
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    pub ingest_wait_ms: u64,
    /// How far ahead of the server's clock an ingested datetime may be:
    /// a later one is refused (400 naming the instant; over MQTT and Kafka a
    /// badDatetime message), so that one instant stamped far in the future
    /// (9999-12-31) cannot close every window up to it or, over MQTT and
    /// Kafka, make every later instant of its property a duplicate.
    /// `mfstream run` has no such bound.
    #[arg(long, value_name = "MS", default_value_t = mfstream::DEFAULT_MAX_DATETIME_AHEAD.as_millis() as u64)]
    pub max_datetime_ahead_ms: u64,
    /// How often an idle SSE stream gets a keep-alive comment.
    #[arg(long, value_name = "MS", default_value_t = 15000)]
    pub keep_alive_ms: u64,
    /// On SIGTERM or SIGINT: how long queries get to stop, and then
    /// connections to take their last bytes, before they are closed.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
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
    #[arg(long, value_name = "BYTES", default_value_t = 1024 * 1024 * 1024)]
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

/// `serve --durability`: what a write to the state store survives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DurabilityArg {
    /// Survives the process being killed (kill -9, an OOM kill, a panic):
    /// a write is done once the kernel has it.
    Process,
    /// Survives a power failure or a kernel crash too: every write waits for
    /// an fdatasync (shared by the writes waiting), which slows durable
    /// ingest.
    Power,
}

impl From<DurabilityArg> for mfstream::store::Durability {
    fn from(arg: DurabilityArg) -> mfstream::store::Durability {
        match arg {
            DurabilityArg::Process => mfstream::store::Durability::Process,
            DurabilityArg::Power => mfstream::store::Durability::Power,
        }
    }
}

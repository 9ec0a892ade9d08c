//! The `mfstream` command line: arguments and the subcommands.

mod engines;
mod input;
mod plugin_host;
mod run;
#[cfg(feature = "serve")]
mod serve;
#[cfg(feature = "serve")]
mod state;
mod values;

use std::io::Write;

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, CommandFactory, Parser, Subcommand};

use crate::{EXIT_CODES, ExitStatus, Outcome};

pub(crate) use self::engines::{check, engines};
pub(crate) use self::plugin_host::plugin_host;
pub(crate) use self::run::run;
#[cfg(feature = "serve")]
pub(crate) use self::serve::{ServeArgs, serve};
#[cfg(feature = "serve")]
pub(crate) use self::state::{StateArgs, state};
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
pub(crate) struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
// Parsed once at start-up and matched at once: boxing `serve`'s many flags
// would save nothing that matters.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
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
    #[cfg(feature = "serve")]
    #[command(after_help = exit_status(|status| status.serve))]
    Serve(ServeArgs),
    /// Check or repair a --state directory's journal (the server refuses
    /// to start on damage that is not the end of an unfinished write).
    #[cfg(feature = "serve")]
    State(StateArgs),
    /// `serve` in a build without the server: says how to get one.
    #[cfg(not(feature = "serve"))]
    #[command(hide = true, disable_help_flag = true)]
    Serve {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        _args: Vec<String>,
    },
    /// `state` in a build without the server: says how to get one.
    #[cfg(not(feature = "serve"))]
    #[command(hide = true, disable_help_flag = true)]
    State {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        _args: Vec<String>,
    },
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
pub(crate) fn completions(
    shell: clap_complete::Shell,
    config: ConfigArgs,
) -> anyhow::Result<Outcome> {
    // `--engine` takes any name (the registry decides), so its completions
    // are the engines known now, put on a copy of the command for the script.
    let registry = mfstream_registry::Registry::load(
        mfstream_registry::Registry::discover(config.config.as_deref()).as_deref(),
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
pub(crate) fn help(command: Option<&str>) -> anyhow::Result<Outcome> {
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

/// `mfstream plugin-host`.
#[derive(Debug, Args)]
pub(crate) struct PluginHostArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: PluginHostAction,
}

/// What `mfstream plugin-host` does.
#[derive(Debug, Subcommand)]
pub(crate) enum PluginHostAction {
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
pub(crate) struct ConfigArgs {
    /// The engines.toml to load (else $MFSTREAM_CONFIG, else ./engines.toml
    /// when present, else the built-in engines alone).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// `mfstream engines`.
#[derive(Debug, Args)]
pub(crate) struct EnginesArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Print a JSON array instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `mfstream run`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("what").required(true).args(["query", "op"]))]
pub(crate) struct RunArgs {
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
        value_parser = names::<mfstream_model::PropertyType>(values::property_types),
        hide_possible_values = true
    )]
    pub property_type: mfstream_model::PropertyType,
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
    #[arg(long, value_name = "BYTES", default_value_t = mfstream_model::budget::DEFAULT_MAX_QUERY_STATE)]
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

//! The `mfstream` command line: arguments and the subcommands.

mod engines;
mod input;
mod plugin_host;
mod run;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub use self::engines::{check, engines};
pub use self::plugin_host::plugin_host;
pub use self::run::run;

/// A registry of stream engines for OGC API – Moving Features continuous
/// queries.
#[derive(Debug, Parser)]
#[command(name = "mfstream", version, about, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List every engine with its kind, readiness and why not ready.
    Engines(EnginesArgs),
    /// Validate engines.toml; exit 0 when all is well.
    Check(ConfigArgs),
    /// Run one continuous query from a file or stdin to JSON lines on stdout.
    Run(RunArgs),
    /// Host a plugin out of process (`isolation = "process"`); run by
    /// mfstream itself.
    #[command(hide = true)]
    PluginHost(PluginHostArgs),
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
    /// A lifted operation: ln, exp, log10, ceil, floor, abs, degrees,
    /// radians, sin, cos, tan, add, sub, mul, div.
    #[arg(long, value_name = "OP", required_unless_present = "query")]
    pub op: Option<String>,
    /// The operation's scalar argument (add, sub, mul, div).
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    pub arg: Option<f64>,
    /// The temporal property's name, carried in every event.
    #[arg(long, value_name = "NAME", default_value = "value")]
    pub property: String,
    /// The property's type: TReal, TInteger, TText or TBoolean.
    #[arg(long = "type", value_name = "TYPE", default_value = "TReal")]
    pub property_type: mfstream::PropertyType,
    /// One JSON instant per line, {"datetime":…,"value":…}; stdin when
    /// absent or "-".
    #[arg(value_name = "INPUT")]
    pub input: Option<PathBuf>,
}

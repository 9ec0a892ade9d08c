//! The `mfstream` command: parses, calls the library, maps the outcome to an
//! exit code.

mod cli;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

use crate::cli::{Cli, Command};

/// How a command ended. Its exit code is one of [`EXIT_CODES`].
#[derive(Debug)]
pub enum Outcome {
    /// All is well (a query completed, or stdout was closed by its reader).
    Success,
    /// The query failed; the reason goes to stderr.
    QueryFailed(String),
    /// engines.toml is invalid; the errors go to stderr.
    InvalidConfig(String),
    /// `state check` found damage; the summary goes to stderr.
    Damaged(String),
    /// Stopped by SIGINT.
    Interrupted,
    /// Stopped by SIGTERM.
    Terminated,
}

impl Outcome {
    fn exit_code(&self) -> u8 {
        match self {
            Outcome::Success => SUCCESS,
            Outcome::QueryFailed(_) | Outcome::InvalidConfig(_) | Outcome::Damaged(_) => FAILED,
            Outcome::Interrupted => INTERRUPTED,
            Outcome::Terminated => TERMINATED,
        }
    }
}

const SUCCESS: u8 = 0;
const FAILED: u8 = 1;
/// Usage and setup errors (bad arguments, unreadable config, unknown engine,
/// an address in use): every `Err` of a command, and clap's own usage
/// errors, which exit 2 as well.
const EXIT_ERROR: u8 = 2;
const INTERRUPTED: u8 = 130;
const TERMINATED: u8 = 143;

/// An exit code and what it means: in general (`mfstream --help`), and to
/// each of `run`, `check` and `serve` (their `--help`; `None`: that command
/// never ends with it).
#[derive(Debug)]
pub struct ExitStatus {
    /// The exit code.
    pub code: u8,
    /// What it means, for `mfstream --help`.
    pub general: &'static str,
    /// What it means after `run`.
    pub run: Option<&'static str>,
    /// What it means after `check`.
    pub check: Option<&'static str>,
    /// What it means after `serve`.
    pub serve: Option<&'static str>,
}

/// Every exit code of mfstream: the one place they are defined, which the
/// `--help` texts are generated from.
pub const EXIT_CODES: &[ExitStatus] = &[
    ExitStatus {
        code: SUCCESS,
        general: "the query completed (or its reader closed stdout); check found no problem; state check found no damage",
        run: Some("the query completed (or its reader closed stdout)"),
        check: Some("engines.toml has no problem and every plugin loads"),
        serve: Some("stopped by SIGTERM or SIGINT, after its queries stopped"),
    },
    ExitStatus {
        code: FAILED,
        general: "the query failed (the reason on stderr); check found problems in engines.toml; state check found damage",
        run: Some("the query failed (the reason on stderr)"),
        check: Some("engines.toml has problems, or a plugin is refused (each on stderr)"),
        serve: None,
    },
    ExitStatus {
        code: EXIT_ERROR,
        general: "bad arguments, an unknown or not-ready engine, or an unreadable engines.toml",
        run: Some(
            "bad arguments, an unknown or not-ready engine, an unreadable input or engines.toml",
        ),
        check: Some("bad arguments, or an unreadable engines.toml"),
        serve: Some(
            "bad arguments, an unreadable engines.toml, or the server cannot start (the address in use, --state held by another server)",
        ),
    },
    ExitStatus {
        code: INTERRUPTED,
        general: "stopped by SIGINT (the query is stopped gracefully first)",
        run: Some("stopped by SIGINT (the query is stopped gracefully first)"),
        check: None,
        serve: None,
    },
    ExitStatus {
        code: TERMINATED,
        general: "stopped by SIGTERM (likewise)",
        run: Some("stopped by SIGTERM (likewise)"),
        check: None,
        serve: None,
    },
];

/// Whether the logs on stderr are coloured: only on a terminal, and never
/// when `NO_COLOR` is set to anything but "" (<https://no-color.org>). A log
/// file or a test's captured stderr gets no escape codes.
fn colour_logs() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn main() -> ExitCode {
    // The matches say where each value came from (the command line, the
    // environment, a default), which `serve` gives its options.
    let matches = Cli::command().get_matches();
    let cli =
        Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.format(&mut Cli::command()).exit());
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(colour_logs())
        .init();
    let result = match cli.command {
        Command::Engines(args) => cli::engines(args),
        Command::Check(args) => cli::check(args),
        Command::Run(args) => cli::run(args),
        Command::Help { command } => cli::help(command.as_deref()),
        Command::PluginHost(args) => cli::plugin_host(args),
        #[cfg(feature = "serve")]
        Command::Serve(args) => cli::serve(args, matches.subcommand_matches("serve")),
        #[cfg(feature = "serve")]
        Command::State(args) => cli::state(args),
        #[cfg(not(feature = "serve"))]
        Command::Serve { .. } | Command::State { .. } => Err(without_server()),
        Command::Completions { shell, config } => cli::completions(shell, config),
    };
    match result {
        Ok(outcome) => {
            match &outcome {
                Outcome::QueryFailed(reason) => eprintln!("mfstream: query failed: {reason}"),
                Outcome::InvalidConfig(errors) => eprintln!("{errors}"),
                Outcome::Damaged(summary) => eprintln!("mfstream: {summary}"),
                Outcome::Interrupted | Outcome::Terminated => eprintln!("mfstream: query stopped"),
                Outcome::Success => {}
            }
            ExitCode::from(outcome.exit_code())
        }
        Err(e) => {
            eprintln!("mfstream: {e:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// What `serve` and `state` say in a build without the server.
#[cfg(not(feature = "serve"))]
fn without_server() -> anyhow::Error {
    anyhow::anyhow!(
        "this mfstream was built without the server (cargo's --no-default-features): `serve` \
         and `state` need the default feature `serve`; build without the flag (cargo install \
         --path . --locked)"
    )
}

// Run by CI as `cargo test -p mfstream --no-default-features --bin mfstream`.
#[cfg(all(test, not(feature = "serve")))]
mod tests {
    use clap::Parser;

    use super::*;

    #[test]
    fn serve_and_state_in_a_build_without_the_server_parse_any_flags_and_say_how_to_get_it() {
        for args in [
            &[
                "mfstream",
                "serve",
                "--addr",
                "127.0.0.1:0",
                "--state",
                "dir",
            ][..],
            &["mfstream", "state", "check", "dir"][..],
        ] {
            let cli = Cli::try_parse_from(args).expect("parsed, whatever the flags");
            assert!(
                matches!(cli.command, Command::Serve { .. } | Command::State { .. }),
                "{args:?}"
            );
        }
        let said = without_server().to_string();
        assert!(said.contains("the default feature `serve`"), "{said}");
        assert!(said.contains("cargo install --path . --locked"), "{said}");
    }
}

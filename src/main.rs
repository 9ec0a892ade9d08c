//! The `mfstream` command: parses, calls the library, maps the outcome to an
//! exit code.

mod cli;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};

/// How a command ended. The exit codes are defined here and nowhere else.
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
            Outcome::Success => 0,
            Outcome::QueryFailed(_) | Outcome::InvalidConfig(_) | Outcome::Damaged(_) => 1,
            Outcome::Interrupted => 130,
            Outcome::Terminated => 143,
        }
    }
}

/// Usage and setup errors (bad arguments, unreadable config, unknown engine).
const EXIT_ERROR: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.command {
        Command::Engines(args) => cli::engines(args),
        Command::Check(args) => cli::check(args),
        Command::Run(args) => cli::run(args),
        Command::PluginHost(args) => cli::plugin_host(args),
        Command::Serve(args) => cli::serve(args),
        Command::State(args) => cli::state(args),
        Command::Completions { shell } => cli::completions(shell),
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

//! `mfstream state check DIR` and `mfstream state repair DIR`: what to run
//! when `mfstream serve --state DIR` refuses a damaged journal.

use anyhow::Result;
use mfstream_store::{check_state, repair_state};

use std::path::PathBuf;

use crate::Outcome;
use clap::{Args, Subcommand};

/// Checks (read-only) or repairs a state directory; prints the report.
/// Exit 0: nothing damaged (after a repair: nothing left damaged); 1:
/// damage found; 2: the directory cannot be read.
pub(crate) fn state(args: StateArgs) -> Result<Outcome> {
    match args.action {
        StateAction::Check { dir } => {
            let report = check_state(&dir)?;
            println!("{report}");
            if !report.damaged() {
                println!("clean");
                return Ok(Outcome::Success);
            }
            let what = if report.lost() {
                format!(
                    "the server refuses to start on it: a segment its journal's manifest lists is \
                     missing, or the manifest is damaged; restore it from a backup, or remove {} \
                     to accept the loss",
                    report.journal.join("MANIFEST").display()
                )
            } else if report.refused() {
                format!(
                    "the server refuses to start on it: run `mfstream state repair {}` \
                     (it keeps every record that checks and moves the damaged bytes aside)",
                    dir.display()
                )
            } else {
                "the server cuts the damaged ends off at start (the remains of writes never \
                 finished)"
                    .to_owned()
            };
            Ok(Outcome::Damaged(format!(
                "state directory {} is damaged: {what}",
                dir.display()
            )))
        }
        StateAction::Repair { dir } => {
            let report = repair_state(&dir)?;
            println!("{report}");
            let after = check_state(&dir)?;
            if after.damaged() {
                return Ok(Outcome::Damaged(format!(
                    "state directory {} is still damaged after the repair:\n{after}",
                    dir.display()
                )));
            }
            let moved = report
                .segments
                .iter()
                .flat_map(|s| &s.damage)
                .filter(|d| d.moved_to.is_some())
                .count();
            println!(
                "repaired: {} records kept, {moved} damaged ranges ({} bytes) moved aside",
                report.records(),
                report.damaged_bytes()
            );
            Ok(Outcome::Success)
        }
    }
}

/// `mfstream state`.
#[derive(Debug, Args)]
pub(crate) struct StateArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: StateAction,
}

/// What `mfstream state` does.
#[derive(Debug, Subcommand)]
pub(crate) enum StateAction {
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

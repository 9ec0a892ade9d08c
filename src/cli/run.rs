//! `mfstream run`: one continuous query from a file or stdin to JSON lines on
//! stdout.

use std::io::{self, IsTerminal, Write};
use std::sync::Arc;
use std::time::{Duration, Instant as Clock};

use anyhow::{Context, Result};
use mfstream_engine::{QueryHandle, Source};
use mfstream_model::budget::StateBudget;
use mfstream_model::origin::{Origin, Value};
use mfstream_model::{QuerySpec, QueryStatus, Registration};
use mfstream_registry::Registry;
use tokio::signal::unix::{SignalKind, signal};

use super::RunArgs;
use super::input;
use crate::Outcome;

/// Source batches buffered between the input thread and the engine.
const SOURCE_BUFFER: usize = 16;

/// Runs the query; the outcome says how it ended.
pub(crate) fn run(args: RunArgs) -> Result<Outcome> {
    let path = Registry::discover(args.config.config.as_deref());
    let registry = Registry::load(path.as_deref())?;
    let budget = Arc::new(StateBudget::new(Value::new(
        args.max_query_state,
        Origin::flag("--max-query-state"),
    )));
    let spec = spec(&args)?.with_budget(budget.clone());
    let engine = match &args.engine {
        Some(name) => registry.get(name)?,
        None => registry.get_default()?,
    };
    registry.check_serves(engine.as_ref(), &spec)?;
    let reader = input::open(args.input.as_deref()).with_context(|| {
        format!(
            "cannot open the input {:?}",
            args.input.as_deref().unwrap_or("-".as_ref())
        )
    })?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let (sender, source) = Source::budgeted(SOURCE_BUFFER, budget);
        let handle = engine.submit(spec, source).await?;
        // The input is read on a thread of its own: a blocking read of stdin
        // must not hold an async worker.
        std::thread::Builder::new()
            .name("mfstream-input".into())
            .spawn(move || input::feed(reader, sender))
            .context("cannot start the input thread")?;
        deliver(handle).await
    })
}

/// The query from `--query` or `--op`/`--arg`.
fn spec(args: &RunArgs) -> Result<QuerySpec> {
    let registration = match &args.query {
        Some(json) => Registration::from_json(json)?,
        None => Registration {
            operation: args.op.clone(),
            arg: args.arg,
            ..Registration::default()
        },
    };
    let property = match &args.property {
        Some(name) => name.as_str(),
        None if args.property_type.is_point() => "tgsequence",
        None => "value",
    };
    let mut spec = registration.into_spec(property, args.property_type)?;
    if let Some(policy) = &args.on_error {
        spec.on_error = policy.parse()?;
    }
    spec.id = "run".into();
    Ok(if args.live { spec.live() } else { spec })
}

/// Writes events to stdout as they come, until the query ends; a signal
/// stops the query gracefully.
async fn deliver(mut handle: QueryHandle) -> Result<Outcome> {
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut stopped_by: Option<Outcome> = None;
    let mut progress = Progress::new();
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    let stdout = io::stdout();
    let mut out = io::BufWriter::with_capacity(64 * 1024, stdout.lock());
    let mut buf = Vec::with_capacity(64 * 1024);
    loop {
        let batch = match handle.try_next_batch() {
            Some(batch) => batch,
            None => {
                // Nothing more is ready: flush, so a live reader sees what came.
                if let Err(e) = out.flush() {
                    return broken_pipe_or(e, handle).await;
                }
                tokio::select! {
                    batch = handle.next_batch() => match batch {
                        Some(batch) => batch,
                        None => break,
                    },
                    _ = interrupt.recv() => { handle.stop(); stopped_by.get_or_insert(Outcome::Interrupted); continue }
                    _ = terminate.recv() => { handle.stop(); stopped_by.get_or_insert(Outcome::Terminated); continue }
                    _ = ticker.tick() => { progress.show(&handle); continue }
                }
            }
        };
        buf.clear();
        for event in &batch {
            event.write_json(&mut buf);
            buf.push(b'\n');
        }
        if let Err(e) = out.write_all(&buf) {
            return broken_pipe_or(e, handle).await;
        }
    }
    if let Err(e) = out.flush() {
        return broken_pipe_or(e, handle).await;
    }
    progress.finish(&handle);
    let restarts = handle.progress().restarts;
    if restarts > 0 {
        eprintln!("mfstream: the engine restarted the query's job {restarts} time(s)");
    }
    let skipped = handle.progress().skipped;
    if skipped > 0 {
        eprintln!(
            "mfstream: skipped {skipped} record(s) or window(s) with no result \
             (--on-error fail to stop at the first)"
        );
    }
    Ok(match handle.status() {
        QueryStatus::Completed => Outcome::Success,
        QueryStatus::Failed { reason } => Outcome::QueryFailed(reason),
        QueryStatus::Stopped | QueryStatus::Running => stopped_by.unwrap_or(Outcome::Interrupted),
    })
}

/// A closed stdout (`| head`) ends the query and counts as success; any other
/// write error is an error.
async fn broken_pipe_or(error: io::Error, handle: QueryHandle) -> Result<Outcome> {
    handle.stop_and_wait().await;
    if error.kind() == io::ErrorKind::BrokenPipe {
        Ok(Outcome::Success)
    } else {
        Err(error).context("cannot write to stdout")
    }
}

/// A progress line on stderr, when stderr is a terminal.
struct Progress {
    enabled: bool,
    started: Clock,
    shown: bool,
}

impl Progress {
    fn new() -> Progress {
        Progress {
            enabled: io::stderr().is_terminal(),
            started: Clock::now(),
            shown: false,
        }
    }

    fn show(&mut self, handle: &QueryHandle) {
        if !self.enabled || self.started.elapsed() < Duration::from_secs(2) {
            return;
        }
        let p = handle.progress();
        let secs = self.started.elapsed().as_secs_f64();
        eprint!(
            "\r\x1b[2K{} in, {} out, {:.0} records/s",
            p.records_in,
            p.records_out,
            p.records_out as f64 / secs
        );
        self.shown = true;
    }

    fn finish(&mut self, handle: &QueryHandle) {
        if self.shown {
            self.show(handle);
            eprintln!();
        }
    }
}

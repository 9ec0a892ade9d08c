//! One plugin query, run on a thread of its own.
//!
//! Plugin code never runs on the async runtime's worker threads: a query's
//! thread calls `open`, `process` and `close`, and waits for the source and
//! the consumer through the runtime's handle (`Handle::block_on`). Events the
//! plugin emits are handed to the consumer from inside the emit callback once
//! a batch is full, so a plugin that emits a lot is slowed by a slow consumer
//! rather than buffered without bound.

use std::sync::Arc;

use tokio::runtime::Handle;

use super::call::{CallError, Collector, NoResult, PositionSpec, State};
use super::load::{EngineFns, Library};
use super::positions::Checker;
use std::cell::RefCell;

use crate::plan;
use crate::{QueryOutput, Source};
use mfstream_model::OnError;
use mfstream_model::aggregate::Windower;
use mfstream_model::clock::WallClock;
use mfstream_model::compute::{self, CpuLimit, CpuWindow};
use mfstream_model::ops::Transform;
use mfstream_model::{Event, Instant, QueryStatus};

/// How a query is opened in the plugin.
pub(crate) enum Open {
    /// `open` with the spec as JSON.
    Spec(String),
    /// `open_positions` (ABI version 3).
    Positions(Box<PositionSpec>),
}

/// A query to start on its own thread.
pub(crate) struct Start {
    pub library: Arc<Library>,
    pub fns: EngineFns,
    pub open: Open,
    pub property: Arc<str>,
    pub operation: Arc<str>,
    /// Windows over the plugin's outputs, for an aggregate query.
    pub windower: Option<Box<Windower>>,
    /// A live query's wall clock, which closes windows on time.
    pub clock: Option<WallClock>,
    /// What a record with no result does.
    pub on_error: OnError,
    /// The query's CPU bound, if any: the query's thread is accounted
    /// after each batch.
    pub cpu_limit: Option<CpuLimit>,
    /// For a version-1 plugin, the transform the host checks each record
    /// against before handing it over (`plan::guard`).
    pub guard: Option<Transform>,
    /// For a position query, the host's checks of each position before
    /// the plugin gets it.
    pub check: Option<Checker>,
    pub source: Source,
    pub output: QueryOutput,
    pub runtime: Handle,
    pub span: tracing::Span,
}

/// Starts the query's thread. `opened` gets the outcome of `open`; after a
/// successful open the thread runs the query to its end.
pub(crate) fn spawn(
    start: Start,
    opened: tokio::sync::oneshot::Sender<Result<(), CallError>>,
) -> std::io::Result<()> {
    let name = format!("mfstream-plugin-{}", start.fns.name);
    std::thread::Builder::new().name(name).spawn(move || {
        let Start {
            library,
            fns,
            open,
            property,
            operation,
            windower,
            clock,
            on_error,
            cpu_limit,
            guard,
            check,
            source,
            output,
            runtime,
            span,
        } = start;
        let _entered = span.enter();
        let positions = matches!(open, Open::Positions(_));
        let opened_state = match &open {
            Open::Spec(spec) => State::open(library, fns, spec),
            Open::Positions(spec) => State::open_positions(library, fns, spec),
        };
        let state = match opened_state {
            Ok(state) => state,
            Err(reason) => {
                let _ = opened.send(Err(reason));
                return;
            }
        };
        if opened.send(Ok(())).is_err() {
            // The submitter has gone: the handle was never returned.
            return;
        }
        let window_failure = RefCell::new(None);
        // Shared by the sink (the plugin's outputs) and the clock's ticks,
        // which never run at once.
        let windower = RefCell::new(windower);
        let mut sink = |events: Vec<Event>| match windower.borrow_mut().as_deref_mut() {
            None => runtime.block_on(output.emit(events)).is_ok(),
            Some(windower) => {
                // What an output carried (records skipped just before it),
                // the next window event after the outputs before it carries:
                // the outputs are windowed in runs, each run's carry set
                // before it, as the `local` engine counts a skipped record.
                let mut runs: Vec<(u64, Vec<Instant>)> = vec![(0, Vec::new())];
                for event in events {
                    let Event::Instant(e) = event else { continue };
                    if e.skipped > 0 && runs.last().is_some_and(|(_, run)| !run.is_empty()) {
                        runs.push((0, Vec::new()));
                    }
                    if let Some((carried, run)) = runs.last_mut() {
                        *carried += e.skipped;
                        run.push(Instant {
                            datetime: e.datetime,
                            value: e.value,
                        });
                    }
                }
                for (carried, run) in runs {
                    output.progress().carry_skipped(carried);
                    match runtime.block_on(plan::window(windower, run, &output)) {
                        Ok(()) => {}
                        Err(QueryStatus::Failed { reason }) => {
                            *window_failure.borrow_mut() = Some(reason);
                            return false;
                        }
                        Err(_) => return false,
                    }
                }
                true
            }
        };
        let no_result = match on_error {
            OnError::Skip => NoResult::Skip,
            OnError::Fail => NoResult::Fail,
        };
        let mut collector = Collector::new(&mut sink, property, operation, no_result);
        collector.positions = positions;
        let clocked = Clocked {
            windower: &windower,
            clock,
        };
        let checks = Checks {
            guard: guard.map(|t| (t, on_error)),
            positions: check,
            on_error,
            cpu: Cpu {
                seen: compute::thread_cpu_nanos(),
                window: cpu_limit.map(|limit| CpuWindow::new(limit, 0)),
            },
        };
        let mut status = run(
            state, source, collector, &clocked, &output, &runtime, checks,
        );
        if let Some(reason) = window_failure.into_inner() {
            status = QueryStatus::Failed { reason };
        }
        // The end of the source closes the windows still open.
        let mut windower = windower.into_inner();
        let status = runtime.block_on(plan::finish(windower.as_deref_mut(), &output, status));
        tracing::debug!(%status, "query ended");
        output.finish(status);
    })?;
    Ok(())
}

/// The host's windows of a live query, with its wall clock.
struct Clocked<'a> {
    windower: &'a RefCell<Option<Box<Windower>>>,
    clock: Option<WallClock>,
}

impl Clocked<'_> {
    fn deadline(&self) -> Option<tokio::time::Instant> {
        plan::deadline(self.windower.borrow().as_deref(), self.clock.as_ref())
    }

    /// Advances the windows to the wall clock. The plugin's outputs for
    /// every batch before were windowed already: a batch is processed and
    /// its events delivered before the next source read.
    fn tick(&self, output: &QueryOutput, runtime: &Handle) -> Result<(), QueryStatus> {
        let mut windower = self.windower.borrow_mut();
        runtime.block_on(plan::tick(
            windower.as_deref_mut(),
            self.clock.as_ref(),
            output,
        ))
    }
}

/// Hands the positions of `batch` the host's checks admit to the plugin,
/// in runs between those they refuse: under `skip` each refused one is
/// counted where it was (the event after it carries it, as on `local`);
/// under `fail` the first ends the batch, and its reason is returned with
/// the outcome of the runs before it.
fn process_positions(
    state: &mut State,
    batch: Vec<Instant>,
    checker: &mut Checker,
    on_error: OnError,
    collector: &mut Collector<'_>,
) -> (Result<(), CallError>, Option<String>) {
    let mut run: Vec<Instant> = Vec::with_capacity(batch.len());
    for instant in batch {
        let Err(reason) = checker.admit(&instant) else {
            run.push(instant);
            continue;
        };
        if !run.is_empty() {
            if let Err(e) = state.process(&run, collector) {
                return (Err(e), None);
            }
            run.clear();
        }
        if on_error == OnError::Fail {
            return (Ok(()), Some(reason.to_string()));
        }
        tracing::debug!(%reason, "position skipped");
        collector.skip_one();
    }
    let result = if run.is_empty() {
        Ok(())
    } else {
        state.process(&run, collector)
    };
    (result, None)
}

/// What the host checks of each batch before the plugin gets it.
struct Checks {
    /// A version-1 plugin's transform (`plan::guard`).
    guard: Option<(Transform, OnError)>,
    /// A position query's positions.
    positions: Option<Checker>,
    on_error: OnError,
    /// The query thread's CPU, accounted after each batch.
    cpu: Cpu,
}

/// The CPU of a plugin query's thread: its own thread, so its CPU clock is
/// the query's.
struct Cpu {
    /// The thread's CPU clock when last accounted.
    seen: u64,
    /// The query's bound, if any.
    window: Option<CpuWindow>,
}

impl Cpu {
    /// Adds the CPU spent since the last call to the query's; the reason
    /// to fail it, when past its bound (`bounded`: not in a replay).
    fn charge(&mut self, output: &QueryOutput, bounded: bool) -> Option<String> {
        let now = compute::thread_cpu_nanos();
        output.progress().add_cpu(now.saturating_sub(self.seen));
        self.seen = now;
        let total = output.progress().cpu_nanos();
        self.window.as_mut()?.charge(total, bounded)
    }
}

fn run(
    mut state: State,
    mut source: Source,
    mut collector: Collector<'_>,
    clocked: &Clocked<'_>,
    output: &QueryOutput,
    runtime: &Handle,
    mut checks: Checks,
) -> QueryStatus {
    let status = loop {
        let deadline = clocked.deadline();
        let next = runtime.block_on(async {
            tokio::select! {
                biased;
                _ = output.stopping() => None,
                batch = source.next_batch() => Some(Some(batch)),
                _ = plan::sleep_until(deadline), if deadline.is_some() => Some(None),
            }
        });
        let batch = match next {
            None => break QueryStatus::Stopped,
            Some(None) => match clocked.tick(output, runtime) {
                Ok(()) => continue,
                Err(status) => break status,
            },
            Some(Some(None)) => break QueryStatus::Completed,
            Some(Some(Some(Err(e)))) => break QueryStatus::Failed { reason: e.0 },
            Some(Some(Some(Ok(batch)))) => batch,
        };
        let mut batch = batch;
        if let Err(status) = clocked.tick(output, runtime) {
            break status;
        }
        if batch.is_empty() {
            // A held clock's release: nothing for the plugin.
            continue;
        }
        output.progress().add_in(batch.len());
        if let Some((transform, on_error)) = &checks.guard {
            plan::guard(transform, *on_error, &mut batch, output.progress());
        }
        // A position that fails the host's checks under `fail` ends the
        // query after the positions before it.
        let (result, refused) = match &mut checks.positions {
            Some(checker) => {
                process_positions(&mut state, batch, checker, checks.on_error, &mut collector)
            }
            None => (state.process(&batch, &mut collector), None),
        };
        output.progress().count_skipped(collector.take_skipped());
        // Results before a failing record are delivered, then the failure.
        collector.deliver();
        if let Err(reason) = result {
            break QueryStatus::Failed {
                reason: reason.to_string(),
            };
        }
        if let Some(reason) = refused {
            break QueryStatus::Failed { reason };
        }
        let held = clocked.clock.as_ref().is_some_and(WallClock::is_held);
        if let Some(reason) = checks.cpu.charge(output, !held) {
            break QueryStatus::Failed { reason };
        }
        if collector.gone {
            break QueryStatus::Stopped;
        }
    };
    // Close flushes what the plugin holds; after a failure, its output is
    // no longer trusted and is discarded.
    if matches!(status, QueryStatus::Failed { .. }) {
        collector.sink = None;
    }
    let closed = state.close(&mut collector);
    collector.deliver();
    match (status, closed) {
        (QueryStatus::Completed, Err(reason)) => QueryStatus::Failed {
            reason: reason.to_string(),
        },
        (status, _) => status,
    }
}

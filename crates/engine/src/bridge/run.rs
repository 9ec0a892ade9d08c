//! The driver of one bridge query: a single task that feeds the job, reads
//! its answers, watches its exit and runs the stop sequence.
//!
//! One task owns everything, so there is no shared state between a feeder
//! and a reader: writes to stdin, reads from stdout, the source, the child's
//! exit and the timers are branches of one `select!` ([`Run::drive`], with
//! a method per branch). A branch only runs when it can make progress, and
//! every buffer is bounded:
//!
//! - the source is read only while fewer than `max_in_flight` records are
//!   unanswered and the write buffer is below [`WRITE_HIGH`];
//! - stdin is written whenever the buffer holds data, so writes are batched
//!   while the source has records ready and flushed as soon as it has none;
//! - stdout is read in chunks, and its events are delivered (waiting for a
//!   slow consumer) before the next chunk is read.
//!
//! [`Driver`] is the query, across restarts of its job; [`Run`] is one job's
//! run, and its [`Run::verdict`] says how that run ended.

use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::ChildStdin;
use tokio::time::{Instant as Clock, Interval, MissedTickBehavior};

use super::framing::{self, JobEvent, OutputError};
use super::job::{Job, JobCommand, describe_exit};
use super::watermark::{Due, Watermarks};
use super::{BridgeOptions, Framing};
use crate::lines::{LineReader, quote};
use crate::plan::sleep_until;
use crate::{QueryOutput, Source, SourceError};
use mfstream_model::OnError;
use mfstream_model::aggregate::Windower;
use mfstream_model::budget::{Part, StateBudget};
use mfstream_model::ops::Transform;
use mfstream_model::{Aggregation, Event, Instant, InstantEvent, QueryStatus, Value, WindowEvent};

mod positions;

pub(crate) use self::positions::PositionAnswers;

/// The write buffer is refilled from the source only below this size.
const WRITE_HIGH: usize = 64 * 1024;
/// How long a full in-flight window may go unanswered before it is reported.
const STALL_REPORT: Duration = Duration::from_secs(10);

/// Why the query is ending, decided before the job has gone.
#[derive(Debug)]
enum Ending {
    Stop,
    Fail(String),
}

/// Where the stop sequence is.
#[derive(Debug, Clone, Copy)]
enum Escalation {
    Term,
    Kill,
}

/// Where the job is in its life, as its run sees it: a stop sequence and a
/// drain deadline exist only in the phase they belong to.
#[derive(Debug, Clone, Copy)]
enum JobPhase {
    /// The job runs; `next` is the stop sequence's next step and when it is
    /// due, once the job is asked to end.
    Running { next: Option<(Clock, Escalation)> },
    /// The job exited with `status`; its stdout is read until it ends, or
    /// until `drain_until` (stragglers of its group may hold it open).
    Exited {
        status: ExitStatus,
        drain_until: Clock,
    },
}

/// How one job run ended.
enum RunEnd {
    /// The query is over with this status.
    Done(QueryStatus),
    /// The job died and may be restarted: the reason, for the status if not.
    Died(String),
}

/// What the job's answers become.
pub(crate) enum Results {
    /// Each answer is the transformed instant.
    Instants {
        /// The operation's name, for the events.
        operation: Arc<str>,
    },
    /// The job transforms; the host windows its answers.
    HostWindows {
        /// The host's windows.
        windower: Box<Windower>,
    },
    /// The job aggregates: each line is a window result.
    JobWindows {
        /// The aggregation, for the events.
        aggregation: Aggregation,
    },
}

/// Turns the job's output lines into events.
struct Answers {
    framing: Framing,
    /// A position query's answers: its lines pair with the records sent.
    positions: Option<PositionAnswers>,
    property: Arc<str>,
    results: Results,
    /// `value` framing or a position query: records sent (or about to be),
    /// not yet answered, in order. Answers pair with their front; a
    /// restarted job is fed them again.
    pending: VecDeque<Instant>,
    /// Events decoded and not yet delivered.
    events: Vec<Event>,
    /// Host windows: the answers decoded and not yet windowed.
    to_window: Vec<Answered>,
    /// Records ended so far (`value` framing, a position query): answered,
    /// with a result or not. An answer carries its record's number, so that
    /// a live query's marks apply between answers exactly (`watermark`
    /// module), a record with no result included.
    ended: u64,
    /// What a record (or window) the job found no result for does.
    on_error: OnError,
    /// Records or windows skipped in the lines read, not yet counted in the
    /// query's progress.
    skipped: u64,
    /// Skipped, to be carried by the next answer (the event right after).
    carry: u64,
    /// Under `onError: fail`, the record the job found no result for: the
    /// query fails with this reason, and no later line is read.
    refused: Option<String>,
    /// A position query: what a restart of its job needs.
    resume: positions::Resume,
}

/// An answer for the host's windows.
struct Answered {
    /// The number of its record among those ended (`Answers::ended`).
    record: u64,
    /// Records skipped just before it.
    skipped: u64,
    instant: Instant,
}

/// What a record in flight to a `value` job is counted as in its query's
/// state budget: an instant and a datetime of the longest length ingest
/// accepts.
const IN_FLIGHT_RECORD: u64 = std::mem::size_of::<Instant>() as u64 + 64;

/// One bridge query.
pub(crate) struct Driver {
    options: Arc<BridgeOptions>,
    job_args: Vec<String>,
    env: Vec<(String, String)>,
    source: Source,
    output: QueryOutput,
    answers: Answers,
    /// The source has ended (or failed).
    source_done: bool,
    /// `value` framing: records read from the source that did not fit in the
    /// in-flight window yet (less than one source batch).
    held: VecDeque<Instant>,
    /// `json` framing: records sent since the job last wrote a line.
    since_output: u64,
    /// A live query's clock, when it has windows to close on time.
    watermarks: Option<Watermarks>,
    ending: Option<Ending>,
    /// The query's state budget, which the records in flight count in.
    budget: Option<Arc<StateBudget>>,
    /// The host's guard (`plan::guard`): for a version-1 job, the transform
    /// whose bad records are never sent under `onError: skip`.
    guard: Option<Transform>,
}

impl Driver {
    pub(crate) fn new(
        options: Arc<BridgeOptions>,
        job_args: Vec<String>,
        env: Vec<(String, String)>,
        property: Arc<str>,
        results: Results,
        source: Source,
        output: QueryOutput,
    ) -> Driver {
        let answers = Answers {
            framing: options.framing,
            positions: None,
            property,
            results,
            pending: VecDeque::new(),
            events: Vec::new(),
            to_window: Vec::new(),
            ended: 0,
            on_error: OnError::Skip,
            skipped: 0,
            carry: 0,
            refused: None,
            resume: positions::Resume::default(),
        };
        Driver {
            options,
            job_args,
            env,
            budget: source.budget(),
            source,
            output,
            answers,
            source_done: false,
            held: VecDeque::new(),
            since_output: 0,
            watermarks: None,
            ending: None,
            guard: None,
        }
    }

    /// The query's error policy, and for a version-1 job the transform the
    /// host checks each record against before sending it (`plan::guard`).
    pub(crate) fn with_on_error(mut self, on_error: OnError, guard: Option<Transform>) -> Driver {
        self.answers.on_error = on_error;
        self.guard = guard;
        self
    }

    /// A position query: the job's lines pair with the records sent, each
    /// record's ended by one line.
    pub(crate) fn with_positions(mut self, positions: Option<PositionAnswers>) -> Driver {
        self.answers.positions = positions;
        self
    }

    /// Whether the job's answers pair with the records sent (`value`
    /// framing, a position query): it owes each record its answer.
    fn paired(&self) -> bool {
        self.options.framing == Framing::Value || self.answers.positions.is_some()
    }

    /// A live query: its windows close on the clock (`watermark` module).
    pub(crate) fn with_watermarks(mut self, watermarks: Option<Watermarks>) -> Driver {
        self.watermarks = watermarks;
        self
    }

    /// Starts a job for this query.
    pub(crate) fn spawn(&self) -> std::io::Result<Job> {
        Job::spawn(&JobCommand {
            argv: &self.options.argv,
            args: &self.job_args,
            env: &self.env,
            libpath: self.options.libpath.as_deref(),
        })
    }

    /// Runs the query to its end on `job` and its restarts.
    pub(crate) async fn run(mut self, mut job: Job) {
        let mut restarts = 0u32;
        let status = loop {
            let reason = match Run::new(&mut self, &mut job).drive().await {
                RunEnd::Done(status) => break status,
                RunEnd::Died(reason) => reason,
            };
            // Only records paired with their answers can be sent again:
            // with `json` framing, a position query's (jobs/README.md,
            // "Restarts").
            let policy = self.options.restart.clone().filter(|_| self.paired());
            let Some(policy) = policy else {
                break QueryStatus::Failed { reason };
            };
            if restarts >= policy.max_restarts {
                break QueryStatus::Failed {
                    reason: format!("{reason} (after {restarts} restarts, the limit)"),
                };
            }
            let backoff = policy
                .backoff
                .saturating_mul(1 << restarts.min(20))
                .min(policy.backoff_max);
            restarts += 1;
            self.output.progress().add_restart();
            tracing::warn!(%reason, restart = restarts, ?backoff, "restarting the job");
            tokio::select! {
                _ = self.output.stopping() => break QueryStatus::Stopped,
                _ = tokio::time::sleep(backoff) => {}
            }
            self.answers.restart_positions();
            job = match self.spawn() {
                Ok(job) => job,
                Err(e) => {
                    break QueryStatus::Failed {
                        reason: format!("{reason}; restarting it failed: {e}"),
                    };
                }
            };
        };
        let status = self.flush_windows(status).await;
        tracing::debug!(%status, "query ended");
        self.output.finish(status);
        drop(job);
    }

    /// At the end of a completed query, the host's open windows (partial).
    async fn flush_windows(&mut self, status: QueryStatus) -> QueryStatus {
        let windower = match &mut self.answers.results {
            Results::HostWindows { windower, .. } => Some(&mut **windower),
            _ => None,
        };
        crate::plan::finish(windower, &self.output, status).await
    }

    /// Delivers the events of the lines read: the job's answers, or for
    /// host windows the window events they close, in bounded chunks
    /// ([`plan::window`](crate::plan::window)).
    async fn deliver(&mut self) -> Result<(), QueryStatus> {
        let events = std::mem::take(&mut self.answers.events);
        let Results::HostWindows { windower, .. } = &mut self.answers.results else {
            return self
                .output
                .emit(events)
                .await
                .map_err(|_| QueryStatus::Stopped);
        };
        let answers = std::mem::take(&mut self.answers.to_window);
        // What an answer carried (records skipped just before it), the
        // next window event after the answers before it carries: the
        // answers are windowed in runs, each run's carry set before it, as
        // the `local` engine counts a skipped record in its windows.
        let mut run = Vec::new();
        let mut carried = 0;
        for answer in answers {
            if answer.skipped > 0 && !run.is_empty() {
                let answers = std::mem::take(&mut run);
                window_run(
                    windower,
                    &mut self.watermarks,
                    &self.output,
                    carried,
                    answers,
                )
                .await?;
                carried = 0;
            }
            carried += answer.skipped;
            run.push((answer.record, answer.instant));
        }
        window_run(windower, &mut self.watermarks, &self.output, carried, run).await?;
        // The marks after the records ended, those with no result too.
        match &mut self.watermarks {
            Some(watermarks) => {
                watermarks
                    .settle(windower, self.answers.ended, &self.output)
                    .await
            }
            None => Ok(()),
        }
    }

    /// The host's windows advanced to the clock (a live query).
    async fn advance_windows(&mut self) -> Result<(), QueryStatus> {
        match (&mut self.answers.results, &mut self.watermarks) {
            (Results::HostWindows { windower, .. }, Some(watermarks)) => {
                watermarks
                    .advance_now(windower, self.answers.ended, &self.output)
                    .await
            }
            _ => Ok(()),
        }
    }

    /// When the clock wakes the query next, if it does.
    fn clock_deadline(&self, last_io: Clock) -> Option<Clock> {
        let windower = match &self.answers.results {
            Results::HostWindows { windower, .. } => Some(&**windower),
            _ => None,
        };
        self.watermarks.as_ref()?.deadline(windower, last_io)
    }

    /// Encodes a batch onto the write buffer, remembering what awaits an
    /// answer. With `value` framing, what does not fit in the in-flight
    /// window is held back until answers make room.
    fn feed(&mut self, mut batch: Vec<Instant>, wbuf: &mut Vec<u8>) {
        let framing = self.options.framing;
        let paired = self.paired();
        if paired {
            let room = self
                .options
                .max_in_flight
                .saturating_sub(self.answers.pending.len());
            if batch.len() > room {
                self.held.extend(batch.drain(room..));
            }
        }
        for instant in &batch {
            framing::encode(framing, instant, wbuf);
        }
        if paired {
            self.answers.pending.extend(batch);
        }
    }

    /// Feeds held-back records as the in-flight window makes room.
    fn feed_held(&mut self, wbuf: &mut Vec<u8>) {
        let room = self
            .options
            .max_in_flight
            .saturating_sub(self.answers.pending.len());
        let take = room.min(self.held.len());
        if take > 0 {
            let batch: Vec<Instant> = self.held.drain(..take).collect();
            self.feed(batch, wbuf);
        }
    }

    /// Whether the job owes answers: a `value` job owes one per record
    /// sent, a position query's job one ending line.
    fn owes_answers(&self) -> bool {
        self.paired() && !self.answers.pending.is_empty()
    }
}

/// One job's run, from its start (or restart) until it has exited and its
/// stdout has ended.
struct Run<'a> {
    driver: &'a mut Driver,
    job: &'a mut Job,
    /// The job's stdin; `None` once closed (end of source, stop, failure).
    stdin: Option<ChildStdin>,
    /// Encoded records; `wbuf[wpos..]` is not written yet.
    wbuf: Vec<u8>,
    wpos: usize,
    /// Bytes written to this job's stdin so far.
    written: u64,
    /// The job's stdout, as lines.
    lines: LineReader,
    stdout_open: bool,
    /// Running (and how far its stop sequence is), or exited.
    phase: JobPhase,
    /// The job was sent SIGTERM because it did not end by itself.
    signalled: bool,
    /// The last sign of progress: an answer, input consumed, or nothing
    /// waiting for the job.
    last_progress: Clock,
    /// Bytes of input the job had consumed at the last check (`json`).
    consumed: u64,
    /// A full in-flight window was logged since the last answer.
    stall_reported: bool,
    tick: Interval,
    /// The last time the job's stdout gave bytes or its stdin took some.
    last_io: Clock,
}

impl<'a> Run<'a> {
    fn new(driver: &'a mut Driver, job: &'a mut Job) -> Run<'a> {
        let every = driver
            .options
            .no_progress_timeout
            .map_or(Duration::from_secs(1), |t| {
                (t / 4).clamp(Duration::from_millis(5), Duration::from_secs(1))
            });
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut wbuf = Vec::with_capacity(WRITE_HIGH * 2);
        // A restarted job is fed the records its predecessor left
        // unanswered; a position query's, after its primer.
        let primer = driver.answers.resume.primer();
        for instant in primer.into_iter().chain(&driver.answers.pending) {
            framing::encode(driver.options.framing, instant, &mut wbuf);
        }
        let mut run = Run {
            stdin: job.stdin.take(),
            driver,
            job,
            wbuf,
            wpos: 0,
            written: 0,
            lines: LineReader::default(),
            stdout_open: true,
            phase: JobPhase::Running { next: None },
            signalled: false,
            last_progress: Clock::now(),
            consumed: 0,
            stall_reported: false,
            tick,
            last_io: Clock::now(),
        };
        if run.driver.ending.is_some() {
            // A restart raced a stop: end at once.
            run.stdin = None;
            run.escalate_at(Clock::now());
        }
        run
    }

    /// Whether the job has not exited yet.
    fn running(&self) -> bool {
        matches!(self.phase, JobPhase::Running { .. })
    }

    /// Schedules SIGTERM at `at`, replacing a step already scheduled, while
    /// the job runs.
    fn escalate_at(&mut self, at: Clock) {
        if let JobPhase::Running { next } = &mut self.phase {
            *next = Some((at, Escalation::Term));
        }
    }

    /// Schedules SIGTERM at `at` unless a step is scheduled already.
    fn escalate_by(&mut self, at: Clock) {
        if let JobPhase::Running { next } = &mut self.phase {
            next.get_or_insert((at, Escalation::Term));
        }
    }

    /// Drives the job until it has exited and its stdout has ended.
    async fn drive(mut self) -> RunEnd {
        while self.running() || self.stdout_open {
            if self.driver.ending.is_none() && self.stdin.is_some() {
                self.driver.feed_held(&mut self.wbuf);
            }
            let want_source = self.wants_source();
            let want_tick = self.wants_tick();
            let want_write = self.stdin.is_some() && self.wpos < self.wbuf.len();
            let clock_at = if self.stdin.is_some() && self.driver.ending.is_none() {
                self.driver.clock_deadline(self.last_io)
            } else {
                None
            };
            let (escalate_at, drain_until) = match self.phase {
                JobPhase::Running { next } => (next.map(|(at, _)| at), None),
                JobPhase::Exited { drain_until, .. } => (None, Some(drain_until)),
            };
            let running = self.running();
            let d = &mut *self.driver;
            let job = &mut *self.job;
            tokio::select! {
                biased;
                _ = d.output.stopping(), if d.ending.is_none() => self.on_stop(),
                read = job.stdout.read(self.lines.spare()), if self.stdout_open => {
                    self.on_stdout(read).await;
                }
                written = write_some(self.stdin.as_mut(), &self.wbuf[self.wpos..]), if want_write => {
                    self.on_written(written);
                }
                batch = d.source.next_batch(), if want_source => self.on_batch(batch),
                status = job.child.wait(), if running => {
                    if let Err(e) = self.on_exit(status) {
                        let reason = format!("waiting for the job failed: {e}");
                        return RunEnd::Done(QueryStatus::Failed { reason });
                    }
                }
                _ = sleep_until(escalate_at), if escalate_at.is_some() => self.on_escalation(),
                _ = sleep_until(drain_until), if drain_until.is_some() && self.stdout_open => {
                    self.stdout_open = false;
                }
                _ = self.tick.tick(), if want_tick => self.on_tick(),
                _ = sleep_until(clock_at), if clock_at.is_some() => self.on_clock().await,
            }
            self.after_step();
        }
        self.verdict().await
    }

    /// Whether the progress checks run: while the job runs and a timeout
    /// is set, or a full in-flight window may need reporting. (No timer
    /// runs for nothing: a paused test clock jumps to the next one.)
    fn wants_tick(&self) -> bool {
        let d = &self.driver;
        self.running()
            && d.ending.is_none()
            && (d.options.no_progress_timeout.is_some()
                || (d.paired() && d.answers.pending.len() >= *d.options.max_in_flight))
    }

    /// Whether to read the source now.
    fn wants_source(&self) -> bool {
        let d = &self.driver;
        !d.source_done
            && d.ending.is_none()
            && self.stdin.is_some()
            && self.wbuf.len() < WRITE_HIGH
            && d.held.is_empty()
            && (!d.paired() || d.answers.pending.len() < *d.options.max_in_flight)
    }

    /// The query is asked to stop: close stdin, then the stop sequence.
    fn on_stop(&mut self) {
        self.driver.ending = Some(Ending::Stop);
        self.stdin = None;
        self.escalate_at(Clock::now() + *self.driver.options.stop_grace);
    }

    /// Bytes from stdout: decode its complete lines and deliver the events.
    async fn on_stdout(&mut self, read: std::io::Result<usize>) {
        let n = match read {
            Ok(0) | Err(_) => {
                self.stdout_open = false;
                return;
            }
            Ok(n) => n,
        };
        self.lines.filled(n);
        // After a failure the job's output is no longer trusted.
        if matches!(self.driver.ending, Some(Ending::Fail(_))) {
            self.lines.discard();
            return;
        }
        self.last_progress = Clock::now();
        self.last_io = Clock::now();
        self.stall_reported = false;
        self.driver.since_output = 0;
        if let Err(reason) = self.take_lines() {
            self.fail(reason.to_string());
        }
        let delivered = self.driver.deliver().await;
        self.delivered(delivered);
    }

    /// After events were delivered: a window that cannot be written fails
    /// the query; a consumer that has gone stops it.
    fn delivered(&mut self, delivered: Result<(), QueryStatus>) {
        let gone = match delivered {
            Ok(()) => false,
            Err(QueryStatus::Failed { reason }) => {
                self.fail(reason);
                false
            }
            Err(_) => true,
        };
        if gone && self.driver.ending.is_none() {
            self.driver.ending = Some(Ending::Stop);
            self.stdin = None;
            self.escalate_at(Clock::now());
        }
    }

    /// The clock's deadline (a live query): a watermark line for a job
    /// that aggregates, or the host's windows advanced once the answers
    /// before it are in (`watermark` module).
    async fn on_clock(&mut self) {
        let unread = self.unread_in_pipe() + (self.wbuf.len() - self.wpos) as u64;
        let consumed = self.written.saturating_sub(self.unread_in_pipe());
        let Some(watermarks) = &mut self.driver.watermarks else {
            return;
        };
        match watermarks.on_deadline(unread, consumed, self.last_io) {
            Due::Nothing => {}
            Due::Write(line) => {
                if self.wpos > 0 {
                    self.wbuf.drain(..self.wpos);
                    self.wpos = 0;
                }
                self.wbuf.extend_from_slice(&line);
            }
            Due::Advance => {
                let delivered = self.driver.advance_windows().await;
                self.delivered(delivered);
            }
        }
    }

    /// Every complete line read, as events.
    fn take_lines(&mut self) -> Result<(), OutputError> {
        let taken = loop {
            match self.lines.next_line() {
                Ok(Some((line_no, line))) => {
                    if let Err(e) = self.driver.answers.take_line(line, line_no) {
                        break Err(e);
                    }
                    if self.driver.answers.refused.is_some() {
                        break Ok(());
                    }
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(OutputError::TooLong(e)),
            }
        };
        let skipped = std::mem::take(&mut self.driver.answers.skipped);
        self.driver.output.progress().count_skipped(skipped);
        if let Some(reason) = self.driver.answers.refused.take() {
            self.fail_gracefully(reason);
        }
        taken
    }

    /// The query fails for a record with no result (`onError: fail`): the
    /// job is well, so it ends as on a stop, its input closed and a grace
    /// period before SIGTERM (time for a JVM to clean up after itself), its
    /// later answers discarded.
    fn fail_gracefully(&mut self, reason: String) {
        if self.driver.ending.is_none() {
            tracing::debug!(%reason, "query failing");
            self.driver.ending = Some(Ending::Fail(reason));
        }
        self.stdin = None;
        self.escalate_by(Clock::now() + *self.driver.options.stop_grace);
    }

    fn on_written(&mut self, written: std::io::Result<usize>) {
        match written {
            Ok(n) => {
                self.last_io = Clock::now();
                self.wpos += n;
                self.written += n as u64;
                if self.wpos == self.wbuf.len() {
                    self.wbuf.clear();
                    self.wpos = 0;
                }
            }
            // The job closed its input: its exit will say why.
            Err(_) => self.stdin = None,
        }
    }

    fn on_batch(&mut self, batch: Option<Result<Vec<Instant>, SourceError>>) {
        match batch {
            None => self.driver.source_done = true,
            Some(Err(e)) => {
                self.driver.source_done = true;
                self.fail(e.to_string());
            }
            Some(Ok(mut batch)) => {
                if !self.driver.owes_answers() && !self.input_waiting() {
                    // The job had nothing to do: the clock starts now.
                    self.last_progress = Clock::now();
                }
                self.driver.output.progress().add_in(batch.len());
                if let Some(transform) = &self.driver.guard {
                    let progress = self.driver.output.progress();
                    crate::plan::guard(
                        transform,
                        self.driver.answers.on_error,
                        &mut batch,
                        progress,
                    );
                }
                self.driver.since_output += batch.len() as u64;
                if self.wpos > 0 {
                    self.wbuf.drain(..self.wpos);
                    self.wpos = 0;
                }
                if let Some(watermarks) = &mut self.driver.watermarks {
                    watermarks.before_batch(&batch, &mut self.wbuf);
                }
                self.driver.feed(batch, &mut self.wbuf);
            }
        }
    }

    /// The job exited: read what is left in the pipe, for a while.
    fn on_exit(&mut self, status: std::io::Result<ExitStatus>) -> std::io::Result<()> {
        let status = status?;
        // Output already in the pipe is read; a straggler that escaped the
        // group is not waited for past the grace.
        let grace = self
            .driver
            .options
            .stop_grace
            .max(Duration::from_millis(100));
        self.phase = JobPhase::Exited {
            status,
            drain_until: Clock::now() + grace,
        };
        // Stragglers of the group could hold stdout open.
        self.job.signal_group(libc::SIGKILL);
        Ok(())
    }

    /// The next step of the stop sequence: SIGTERM, then SIGKILL.
    fn on_escalation(&mut self) {
        let JobPhase::Running { next } = &mut self.phase else {
            return;
        };
        match next {
            Some((_, Escalation::Term)) => {
                self.signalled = true;
                tracing::debug!("grace period over: SIGTERM to the job's process group");
                self.job.signal_group(libc::SIGTERM);
                let at = Clock::now() + *self.driver.options.stop_grace;
                *next = Some((at, Escalation::Kill));
            }
            _ => {
                tracing::debug!("SIGKILL to the job's process group");
                self.job.signal_group(libc::SIGKILL);
                *next = None;
            }
        }
    }

    /// Checks for progress: a job that owes answers or leaves its input
    /// unread for `no_progress_timeout` fails the query; a full in-flight
    /// window is logged.
    fn on_tick(&mut self) {
        // A `value` job progresses by answering; a `json` job may filter or
        // buffer, so reading its input is progress too.
        let owes = self.driver.owes_answers();
        let unread = self.input_waiting();
        // A `json` job whose input has ended owes its last results and its
        // exit (a `value` job that owes nothing is given `stop_grace`).
        let finishing = !self.driver.paired() && self.driver.source_done && self.stdin.is_none();
        let waiting = owes || unread || finishing;
        let consumed = self.written.saturating_sub(self.unread_in_pipe());
        if !waiting || (!owes && consumed > self.consumed) {
            self.last_progress = Clock::now();
        }
        self.consumed = consumed;
        let silent = self.last_progress.elapsed();
        let options = &self.driver.options;
        if let Some(limit) = options
            .no_progress_timeout
            .filter(|l| waiting && silent >= *l)
        {
            let what = if owes {
                format!(
                    "the job answered nothing for {} ms while {} records waited",
                    silent.as_millis(),
                    self.driver.answers.pending.len()
                )
            } else if unread {
                format!(
                    "the job neither read its input nor wrote anything for {} ms while {} records \
                     waited",
                    silent.as_millis(),
                    self.driver.since_output
                )
            } else {
                format!(
                    "the job wrote nothing and did not exit for {} ms after the end of its input",
                    silent.as_millis()
                )
            };
            // The timeout with where it was set: the engine's entry in
            // engines.toml, its default, or the embedding program.
            let reason = format!(
                "no progress: {what} (no_progress_timeout_ms = {}, {})",
                limit.as_millis(),
                options.no_progress_timeout.origin
            );
            self.fail(reason);
        } else if self.driver.paired()
            && self.driver.answers.pending.len() >= *options.max_in_flight
            && silent >= STALL_REPORT
            && !self.stall_reported
        {
            self.stall_reported = true;
            tracing::warn!(
                in_flight = self.driver.answers.pending.len(),
                "the job holds max_in_flight = {} unanswered records ({}) and has answered \
                 nothing for {} s; a job that buffers more records than that before answering \
                 never will: raise {}",
                *options.max_in_flight,
                options.max_in_flight.origin,
                silent.as_secs(),
                options.max_in_flight.name("max_in_flight")
            );
        }
    }

    /// Input the job has not read yet: in the write buffer or in the pipe.
    fn input_waiting(&self) -> bool {
        self.stdin.is_some() && (self.wpos < self.wbuf.len() || self.unread_in_pipe() > 0)
    }

    /// Bytes written to the job's stdin that it has not read yet.
    fn unread_in_pipe(&self) -> u64 {
        let Some(stdin) = &self.stdin else {
            return 0;
        };
        let mut unread: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int through the pointer; the fd is
        // the open stdin pipe we own. On a pipe it counts the bytes in it,
        // from either end.
        let ok = unsafe { libc::ioctl(stdin.as_raw_fd(), libc::FIONREAD, &mut unread) } == 0;
        if ok { unread.max(0) as u64 } else { 0 }
    }

    /// After each branch: close stdin at the end of the source, and give a
    /// `value` job that has answered everything a grace period to exit.
    fn after_step(&mut self) {
        let d = &self.driver;
        if let Some(budget) = &d.budget {
            // An estimate, with no walk: a record in flight holds a number
            // and a datetime of at most 64 bytes (ingest's bound).
            let records = (d.answers.pending.len() + d.held.len()) as u64;
            let unwritten = self.wbuf.len().saturating_sub(self.wpos) as u64;
            budget.set(Part::InFlight, records * IN_FLIGHT_RECORD + unwritten);
        }
        if d.source_done
            && self.stdin.is_some()
            && self.wbuf.len() == self.wpos
            && d.held.is_empty()
        {
            self.stdin = None;
        }
        if d.paired()
            && d.source_done
            && self.stdin.is_none()
            && d.answers.pending.is_empty()
            && d.held.is_empty()
            && d.ending.is_none()
            && matches!(self.phase, JobPhase::Running { next: None })
        {
            let at = Clock::now() + *d.options.stop_grace;
            self.escalate_at(at);
        }
    }

    /// Records a failure (the first one wins) and starts ending the job.
    fn fail(&mut self, reason: String) {
        if self.driver.ending.is_none() {
            tracing::debug!(%reason, "query failing");
            self.driver.ending = Some(Ending::Fail(reason));
        }
        self.stdin = None;
        self.escalate_by(Clock::now());
    }

    /// How the run ended, once the job has exited and its stdout has ended.
    ///
    /// A stop or a failure decided during the run wins. Otherwise the job
    /// ended by itself: killed by us after it would not exit, died (which
    /// a restart policy may retry), or exited 0 — which completes the query
    /// only if it saw the whole source and, with `value` framing, answered
    /// every record.
    async fn verdict(self) -> RunEnd {
        let JobPhase::Exited { status: exit, .. } = self.phase else {
            unreachable!("the loop ends only after the job exited");
        };
        let tail = self.job.stderr_tail().await;
        let with_tail = |text: String| {
            if tail.is_empty() {
                text
            } else {
                format!("{text}; stderr: {tail}")
            }
        };
        let failed = |text: String| {
            RunEnd::Done(QueryStatus::Failed {
                reason: with_tail(text),
            })
        };
        let d = self.driver;
        let how = describe_exit(exit);
        match d.ending.take() {
            Some(Ending::Stop) => RunEnd::Done(QueryStatus::Stopped),
            Some(Ending::Fail(reason)) => RunEnd::Done(QueryStatus::Failed { reason }),
            None if self.signalled => failed(format!(
                "the job answered every record but did not exit within {} ms of the end of its \
                 input (its stop grace, {}); it was terminated",
                d.options.stop_grace.as_millis(),
                d.options.stop_grace.origin
            )),
            None if !exit.success() => RunEnd::Died(with_tail(format!("the job {how}"))),
            None if d.owes_answers() && d.source_done => {
                let unanswered = (d.answers.pending.len() + d.held.len()) as u64;
                let answered = d.output.progress().snapshot().records_in - unanswered;
                failed(format!(
                    "the job {how} after answering {answered} of {} records",
                    answered + unanswered
                ))
            }
            None if !d.source_done => failed(format!("the job {how} before the end of its input")),
            None => RunEnd::Done(QueryStatus::Completed),
        }
    }
}

impl Answers {
    /// One output line of the job, as an event (or a record for the host's
    /// windows).
    fn take_line(&mut self, line: &[u8], line_no: u64) -> Result<(), OutputError> {
        // Protocol 2: a record (or window) the job found no result for. A
        // line that only looks like one is decoded as usual below.
        if self.framing == Framing::Json && framing::is_error(line) {
            if let Ok(error) = framing::decode_error(line) {
                if self.positions.is_some() {
                    // It ends its record, as an answer would (a primer's
                    // is refused: it was measured before).
                    let datetime = error.datetime.clone().unwrap_or_default();
                    self.end_record(datetime, false, line, line_no)?;
                }
                let why = format!("the job found no result: {}", error.error);
                return self.no_result(&error.at(), &why, error.records());
            }
        }
        if let Some(positions) = self.positions {
            return self.take_position_line(positions, line, line_no);
        }
        match (self.framing, &self.results) {
            (Framing::Value, _) => {
                let Some(answer) = framing::decode_value(line) else {
                    return Err(OutputError::NotNumber {
                        line: line_no,
                        text: quote(line),
                    });
                };
                let Some(instant) = self.pending.pop_front() else {
                    return Err(OutputError::Unasked {
                        line: line_no,
                        text: quote(line),
                    });
                };
                self.ended += 1;
                match answer {
                    framing::ValueAnswer::Number(value) if value.is_finite() => {
                        self.answer(instant.datetime, Value::Number(value))
                    }
                    framing::ValueAnswer::Number(_) => self.no_result(
                        &format!("record at {}", instant.datetime),
                        &format!(
                            "job output line {line_no} is not a finite number: {}",
                            quote(line)
                        ),
                        1,
                    ),
                    framing::ValueAnswer::Error(message) => self.no_result(
                        &format!("record at {}", instant.datetime),
                        &format!("the job found no result: {message}"),
                        1,
                    ),
                }
            }
            (Framing::Json, Results::JobWindows { aggregation }) => {
                let window =
                    framing::decode_window(line).map_err(|error| OutputError::NotWindow {
                        line: line_no,
                        error,
                        text: quote(line),
                    })?;
                // The job's own count: a job's number, so added saturating.
                self.skipped = self.skipped.saturating_add(window.skipped);
                let skipped = std::mem::take(&mut self.carry).saturating_add(window.skipped);
                self.events.push(Event::Window(WindowEvent {
                    window_start: window.window_start,
                    window_end: window.window_end,
                    property: self.property.clone(),
                    aggregation: *aggregation,
                    value: window.value,
                    count: window.count,
                    partial: window.partial,
                    late: window.late,
                    skipped,
                }));
                Ok(())
            }
            (Framing::Json, _) => {
                let JobEvent { datetime, value } =
                    framing::decode_json(line).map_err(|error| OutputError::NotEvent {
                        line: line_no,
                        error,
                        text: quote(line),
                    })?;
                self.answer(datetime, value)
            }
        }
    }

    /// A record (or a window of `records`) `at` the job found no result
    /// for: skipped and counted under `onError: skip`, else the query's
    /// failure naming it (`refused`).
    fn no_result(&mut self, at: &str, why: &str, records: u64) -> Result<(), OutputError> {
        match self.on_error {
            OnError::Skip => {
                // `records` may be a job's number (a window's `count`).
                self.skipped = self.skipped.saturating_add(records);
                self.carry = self.carry.saturating_add(records);
                Ok(())
            }
            OnError::Fail => {
                self.refused.get_or_insert_with(|| format!("{at}: {why}"));
                Ok(())
            }
        }
    }

    /// One transformed instant: an event, or a record for the host's windows.
    fn answer(&mut self, datetime: String, value: Value) -> Result<(), OutputError> {
        match &mut self.results {
            // Windowed by `deliver`, which bounds the events held at once.
            Results::HostWindows { .. } => {
                self.to_window.push(Answered {
                    record: self.ended,
                    skipped: std::mem::take(&mut self.carry),
                    instant: Instant { datetime, value },
                });
                Ok(())
            }
            Results::Instants { operation } => {
                self.events.push(Event::Instant(InstantEvent {
                    datetime,
                    value,
                    property: self.property.clone(),
                    operation: operation.clone(),
                    skipped: std::mem::take(&mut self.carry),
                }));
                Ok(())
            }
            // Lines of a job that aggregates are decoded as window results.
            Results::JobWindows { .. } => Err(OutputError::InstantFromAggregatingJob { datetime }),
        }
    }
}

/// Windows a run of answers, the first event it closes carrying `carried`
/// skipped records (counted already), applying a live query's watermarks.
async fn window_run(
    windower: &mut Windower,
    watermarks: &mut Option<Watermarks>,
    output: &QueryOutput,
    carried: u64,
    answers: Vec<(u64, Instant)>,
) -> Result<(), QueryStatus> {
    output.progress().carry_skipped(carried);
    match watermarks {
        Some(watermarks) => watermarks.window(windower, answers, output).await,
        None => crate::plan::window(windower, answers.into_iter().map(|(_, a)| a), output).await,
    }
}

/// Writes some of `buf` to stdin; pending forever when stdin is closed (the
/// branch is disabled then, but its future is still built).
async fn write_some(stdin: Option<&mut ChildStdin>, buf: &[u8]) -> std::io::Result<usize> {
    match stdin {
        Some(stdin) => stdin.write(buf).await,
        None => std::future::pending().await,
    }
}

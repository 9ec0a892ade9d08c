//! The driver of one bridge query: a single task that feeds the job, reads
//! its answers, watches its exit and runs the stop sequence.
//!
//! One task owns everything, so there is no shared state between a feeder
//! and a reader: writes to stdin, reads from stdout, the source, the child's
//! exit and the timers are branches of one `select!`. A branch only runs
//! when it can make progress, and every buffer is bounded:
//!
//! - the source is read only while fewer than `max_in_flight` records are
//!   unanswered and the write buffer is below [`WRITE_HIGH`];
//! - stdin is written whenever the buffer holds data, so writes are batched
//!   while the source has records ready and flushed as soon as it has none;
//! - stdout is read in chunks, and its events are delivered (waiting for a
//!   slow consumer) before the next chunk is read.

use std::collections::VecDeque;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::ChildStdin;
use tokio::time::{Instant as Clock, MissedTickBehavior};

use super::framing::{self, JobEvent};
use super::job::{Job, JobCommand, describe_exit};
use super::{BridgeOptions, Framing};
use crate::aggregate::Windower;
use crate::engine::{QueryOutput, Source};
use crate::vocab::Aggregation;
use crate::vocab::{Event, Instant, InstantEvent, QueryStatus, Value, WindowEvent};

/// The write buffer is refilled from the source only below this size.
const WRITE_HIGH: usize = 64 * 1024;
/// Bytes read from stdout at once.
const READ_CHUNK: usize = 64 * 1024;
/// The longest output line accepted.
const MAX_LINE: usize = 1024 * 1024;
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
        /// The operation's name, for the answers before they are windowed.
        operation: Arc<str>,
        /// The host's windows.
        windower: Box<Windower>,
    },
    /// The job aggregates: each line is a window result.
    JobWindows {
        /// The aggregation, for the events.
        aggregation: Aggregation,
    },
}

/// One bridge query.
pub(crate) struct Driver {
    pub options: Arc<BridgeOptions>,
    pub job_args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub property: Arc<str>,
    pub results: Results,
    pub source: Source,
    pub output: QueryOutput,
    source_done: bool,
    /// `value` framing: records sent (or about to be), not yet answered, in
    /// order. Answers pair with their front; a restarted job is fed them again.
    pending: VecDeque<Instant>,
    /// `value` framing: records read from the source that did not fit in the
    /// in-flight window yet (less than one source batch).
    held: VecDeque<Instant>,
    /// `json` framing: records sent since the job last wrote a line.
    since_output: u64,
    ending: Option<Ending>,
    events: Vec<Event>,
}

impl Driver {
    pub fn new(
        options: Arc<BridgeOptions>,
        job_args: Vec<String>,
        env: Vec<(String, String)>,
        property: Arc<str>,
        results: Results,
        source: Source,
        output: QueryOutput,
    ) -> Driver {
        Driver {
            options,
            job_args,
            env,
            property,
            results,
            source,
            output,
            source_done: false,
            pending: VecDeque::new(),
            held: VecDeque::new(),
            since_output: 0,
            ending: None,
            events: Vec::new(),
        }
    }

    /// Starts a job for this query.
    pub fn spawn(&self) -> std::io::Result<Job> {
        Job::spawn(&JobCommand {
            argv: &self.options.argv,
            args: &self.job_args,
            env: &self.env,
            libpath: self.options.libpath.as_deref(),
        })
    }

    /// Runs the query to its end on `job` and its restarts.
    pub async fn run(mut self, mut job: Job) {
        let mut restarts = 0u32;
        let status = loop {
            let reason = match self.run_job(&mut job).await {
                RunEnd::Done(status) => break status,
                RunEnd::Died(reason) => reason,
            };
            let Some(policy) = self.options.restart.clone() else {
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

    /// Delivers the events of the lines read: the job's answers, or for
    /// host windows the window events they close, in bounded chunks
    /// ([`plan::window`](crate::plan::window)).
    async fn deliver(&mut self) -> Result<(), QueryStatus> {
        let events = std::mem::take(&mut self.events);
        let Results::HostWindows { windower, .. } = &mut self.results else {
            return self
                .output
                .emit(events)
                .await
                .map_err(|_| QueryStatus::Stopped);
        };
        let answers = events.into_iter().filter_map(|event| match event {
            Event::Instant(e) => Some(Instant {
                datetime: e.datetime,
                value: e.value,
            }),
            _ => None,
        });
        crate::plan::window(windower, answers, &self.output).await
    }

    /// At the end of a completed query, the host's open windows (partial).
    async fn flush_windows(&mut self, status: QueryStatus) -> QueryStatus {
        let windower = match &mut self.results {
            Results::HostWindows { windower, .. } => Some(&mut **windower),
            _ => None,
        };
        crate::plan::finish(windower, &self.output, status).await
    }

    /// Drives one job until it has exited and its stdout has ended.
    async fn run_job(&mut self, job: &mut Job) -> RunEnd {
        let framing = self.options.framing;
        let max_in_flight = self.options.max_in_flight;
        let mut stdin = job.stdin.take();
        let mut wbuf: Vec<u8> = Vec::with_capacity(WRITE_HIGH * 2);
        let mut wpos = 0;
        // A restarted job is fed the records its predecessor left unanswered.
        for instant in &self.pending {
            framing::encode(framing, instant, &mut wbuf);
        }
        let mut rbuf = vec![0u8; READ_CHUNK];
        let mut carry: Vec<u8> = Vec::new();
        let mut line_no: u64 = 0;
        let mut stdout_open = true;
        let mut exit: Option<ExitStatus> = None;
        let mut escalation: Option<(Clock, Escalation)> = None;
        let mut signalled = false;
        let mut drain_deadline: Option<Clock> = None;
        let mut last_answer = Clock::now();
        let mut stall_reported = false;
        let tick_every = self
            .options
            .no_progress_timeout
            .map_or(Duration::from_secs(1), |t| {
                (t / 4).clamp(Duration::from_millis(5), Duration::from_secs(1))
            });
        let mut tick = tokio::time::interval(tick_every);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        if self.ending.is_some() {
            // A restart raced a stop: end at once.
            stdin = None;
            escalation = Some((Clock::now(), Escalation::Term));
        }

        while exit.is_none() || stdout_open {
            if self.ending.is_none() && stdin.is_some() {
                self.feed_held(&mut wbuf);
            }
            // A job that aggregates is silent until a window closes: silence
            // is not a stall there.
            let unanswered = match (framing, &self.results) {
                (_, Results::JobWindows { .. }) => false,
                (Framing::Value, _) => !self.pending.is_empty(),
                (Framing::Json, _) => self.since_output > 0,
            };
            let want_source = !self.source_done
                && self.ending.is_none()
                && stdin.is_some()
                && wbuf.len() < WRITE_HIGH
                && self.held.is_empty()
                && (framing == Framing::Json || self.pending.len() < max_in_flight);
            let want_write = stdin.is_some() && wpos < wbuf.len();
            tokio::select! {
                biased;
                _ = self.output.stopping(), if self.ending.is_none() => {
                    self.ending = Some(Ending::Stop);
                    stdin = None;
                    escalation = Some((Clock::now() + self.options.stop_grace, Escalation::Term));
                }
                read = job.stdout.read(&mut rbuf), if stdout_open => match read {
                    Ok(0) | Err(_) => stdout_open = false,
                    // After a failure the job's output is no longer trusted.
                    Ok(_) if matches!(self.ending, Some(Ending::Fail(_))) => {}
                    Ok(n) => {
                        last_answer = Clock::now();
                        stall_reported = false;
                        self.since_output = 0;
                        if let Err(reason) = self.take_lines(&rbuf[..n], &mut carry, &mut line_no) {
                            self.fail(reason, &mut stdin, &mut escalation);
                        }
                        let gone = match self.deliver().await {
                            Ok(()) => false,
                            Err(QueryStatus::Failed { reason }) => {
                                self.fail(reason, &mut stdin, &mut escalation);
                                false
                            }
                            Err(_) => true,
                        };
                        if gone && self.ending.is_none() {
                            self.ending = Some(Ending::Stop);
                            stdin = None;
                            escalation = Some((Clock::now(), Escalation::Term));
                        }
                    }
                },
                written = write_some(stdin.as_mut(), &wbuf[wpos..]), if want_write => match written {
                    Ok(n) => {
                        wpos += n;
                        if wpos == wbuf.len() {
                            wbuf.clear();
                            wpos = 0;
                        }
                    }
                    // The job closed its input: its exit will say why.
                    Err(_) => stdin = None,
                },
                batch = self.source.next_batch(), if want_source => match batch {
                    None => self.source_done = true,
                    Some(Err(e)) => {
                        self.source_done = true;
                        self.fail(e.to_string(), &mut stdin, &mut escalation);
                    }
                    Some(Ok(batch)) => {
                        if self.pending.is_empty() {
                            last_answer = Clock::now();
                        }
                        self.output.progress().add_in(batch.len());
                        self.since_output += batch.len() as u64;
                        if wpos > 0 {
                            wbuf.drain(..wpos);
                            wpos = 0;
                        }
                        self.feed(batch, &mut wbuf);
                    }
                },
                status = job.child.wait(), if exit.is_none() => {
                    let status = match status {
                        Ok(status) => status,
                        Err(e) => {
                            let reason = format!("waiting for the job failed: {e}");
                            return RunEnd::Done(QueryStatus::Failed { reason });
                        }
                    };
                    exit = Some(status);
                    // Output already in the pipe is read; a straggler that
                    // escaped the group is not waited for past the grace.
                    drain_deadline = Some(Clock::now() + self.options.stop_grace.max(Duration::from_millis(100)));
                    // Stragglers of the group could hold stdout open.
                    job.signal_group(libc::SIGKILL);
                }
                _ = sleep_until(escalation.map(|(at, _)| at)), if exit.is_none() && escalation.is_some() => {
                    match escalation {
                        Some((_, Escalation::Term)) => {
                            signalled = true;
                            tracing::debug!("grace period over: SIGTERM to the job's process group");
                            job.signal_group(libc::SIGTERM);
                            escalation = Some((Clock::now() + self.options.stop_grace, Escalation::Kill));
                        }
                        _ => {
                            tracing::debug!("SIGKILL to the job's process group");
                            job.signal_group(libc::SIGKILL);
                            escalation = None;
                        }
                    }
                }
                _ = sleep_until(drain_deadline), if exit.is_some() && stdout_open => stdout_open = false,
                _ = tick.tick(), if exit.is_none() && self.ending.is_none() => {
                    if !unanswered {
                        last_answer = Clock::now();
                    }
                    let silent = last_answer.elapsed();
                    if let Some(limit) = self.options.no_progress_timeout.filter(|l| unanswered && silent >= *l) {
                        let waiting = self.unanswered_count();
                        let reason = format!(
                            "no progress: the job answered nothing for {} ms while {waiting} records waited (no_progress_timeout_ms = {})",
                            silent.as_millis(), limit.as_millis()
                        );
                        self.fail(reason, &mut stdin, &mut escalation);
                    } else if framing == Framing::Value
                        && self.pending.len() >= max_in_flight
                        && silent >= STALL_REPORT
                        && !stall_reported
                    {
                        stall_reported = true;
                        tracing::warn!(
                            in_flight = self.pending.len(),
                            "the job holds max_in_flight = {max_in_flight} unanswered records and has answered nothing for {} s; \
                             a job that buffers more records than that before answering never will: raise max_in_flight",
                            silent.as_secs()
                        );
                    }
                }
            }
            // At the end of the source, close stdin once everything is written.
            if self.source_done && stdin.is_some() && wbuf.len() == wpos && self.held.is_empty() {
                stdin = None;
            }
            // A `value` job that answered everything and saw the end of its
            // input must exit; one that does not is ended after a grace period.
            if framing == Framing::Value
                && self.source_done
                && stdin.is_none()
                && self.pending.is_empty()
                && self.held.is_empty()
                && self.ending.is_none()
                && exit.is_none()
                && escalation.is_none()
            {
                escalation = Some((Clock::now() + self.options.stop_grace, Escalation::Term));
            }
        }

        let exit = exit.expect("the loop ends only after the job exited");
        let tail = job.stderr_tail().await;
        let with_tail = |text: String| {
            if tail.is_empty() {
                text
            } else {
                format!("{text}; stderr: {tail}")
            }
        };
        match self.ending.take() {
            Some(Ending::Stop) => RunEnd::Done(QueryStatus::Stopped),
            Some(Ending::Fail(reason)) => RunEnd::Done(QueryStatus::Failed { reason }),
            None if signalled => RunEnd::Done(QueryStatus::Failed {
                reason: with_tail(format!(
                    "the job answered every record but did not exit within {} ms of the end of its input; it was terminated",
                    self.options.stop_grace.as_millis()
                )),
            }),
            None if !exit.success() => {
                RunEnd::Died(with_tail(format!("the job {}", describe_exit(exit))))
            }
            None if framing == Framing::Value && !self.pending.is_empty() => {
                let unanswered = (self.pending.len() + self.held.len()) as u64;
                let answered = self.output.progress().snapshot().records_in - unanswered;
                let reason = if self.source_done {
                    format!(
                        "the job {} after answering {answered} of {} records",
                        describe_exit(exit),
                        answered + unanswered
                    )
                } else {
                    format!(
                        "the job {} before the end of its input",
                        describe_exit(exit)
                    )
                };
                RunEnd::Done(QueryStatus::Failed {
                    reason: with_tail(reason),
                })
            }
            None if !self.source_done => RunEnd::Done(QueryStatus::Failed {
                reason: with_tail(format!(
                    "the job {} before the end of its input",
                    describe_exit(exit)
                )),
            }),
            None => RunEnd::Done(QueryStatus::Completed),
        }
    }

    /// Encodes a batch onto the write buffer, remembering what awaits an
    /// answer. With `value` framing, what does not fit in the in-flight
    /// window is held back until answers make room.
    fn feed(&mut self, mut batch: Vec<Instant>, wbuf: &mut Vec<u8>) {
        let framing = self.options.framing;
        if framing == Framing::Value {
            let room = self
                .options
                .max_in_flight
                .saturating_sub(self.pending.len());
            if batch.len() > room {
                self.held.extend(batch.drain(room..));
            }
        }
        for instant in &batch {
            framing::encode(framing, instant, wbuf);
        }
        if framing == Framing::Value {
            self.pending.extend(batch);
        }
    }

    /// Feeds held-back records as the in-flight window makes room.
    fn feed_held(&mut self, wbuf: &mut Vec<u8>) {
        let room = self
            .options
            .max_in_flight
            .saturating_sub(self.pending.len());
        let take = room.min(self.held.len());
        if take > 0 {
            let batch: Vec<Instant> = self.held.drain(..take).collect();
            self.feed(batch, wbuf);
        }
    }

    /// Splits a chunk of stdout into lines and turns each into an event.
    fn take_lines(
        &mut self,
        chunk: &[u8],
        carry: &mut Vec<u8>,
        line_no: &mut u64,
    ) -> Result<(), String> {
        let mut rest = chunk;
        while let Some(nl) = memchr::memchr(b'\n', rest) {
            let (line, after) = (&rest[..nl], &rest[nl + 1..]);
            rest = after;
            *line_no += 1;
            if carry.is_empty() {
                self.take_line(line, *line_no)?;
            } else {
                carry.extend_from_slice(line);
                let whole = std::mem::take(carry);
                self.take_line(&whole, *line_no)?;
            }
        }
        carry.extend_from_slice(rest);
        if carry.len() > MAX_LINE {
            return Err(format!(
                "job output line {} is longer than {MAX_LINE} bytes: {}",
                *line_no + 1,
                framing::quote(carry)
            ));
        }
        Ok(())
    }

    fn take_line(&mut self, line: &[u8], line_no: u64) -> Result<(), String> {
        match (self.options.framing, &self.results) {
            (Framing::Value, _) => {
                let Some(value) = framing::decode_value(line) else {
                    return Err(format!(
                        "job output line {line_no} is not a finite number: {}",
                        framing::quote(line)
                    ));
                };
                let Some(instant) = self.pending.pop_front() else {
                    return Err(format!(
                        "job output line {line_no} answers no record: the job wrote more results than it was sent records ({})",
                        framing::quote(line)
                    ));
                };
                self.answer(instant.datetime, Value::Number(value))
            }
            (Framing::Json, Results::JobWindows { aggregation }) => {
                let window = framing::decode_window(line).map_err(|e| {
                    format!(
                        "job output line {line_no} is not a JSON window result ({e}): {}",
                        framing::quote(line)
                    )
                })?;
                self.events.push(Event::Window(WindowEvent {
                    window_start: window.window_start,
                    window_end: window.window_end,
                    property: self.property.clone(),
                    aggregation: *aggregation,
                    value: window.value,
                    count: window.count,
                    partial: window.partial,
                    late: window.late,
                }));
                Ok(())
            }
            (Framing::Json, _) => {
                let JobEvent { datetime, value } = framing::decode_json(line).map_err(|e| {
                    format!(
                        "job output line {line_no} is not a JSON event ({e}): {}",
                        framing::quote(line)
                    )
                })?;
                self.answer(datetime, value)
            }
        }
    }

    /// One transformed instant: an event, or a record for the host's windows.
    fn answer(&mut self, datetime: String, value: Value) -> Result<(), String> {
        match &mut self.results {
            Results::Instants { operation } => {
                self.events.push(Event::Instant(InstantEvent {
                    datetime,
                    value,
                    property: self.property.clone(),
                    operation: operation.clone(),
                }));
                Ok(())
            }
            // Windowed by `deliver`, which bounds the events held at once.
            Results::HostWindows { operation, .. } => {
                self.events.push(Event::Instant(InstantEvent {
                    datetime,
                    value,
                    property: self.property.clone(),
                    operation: operation.clone(),
                }));
                Ok(())
            }
            // Lines of a job that aggregates are decoded as window results.
            Results::JobWindows { .. } => Err(format!(
                "a transformed instant at {datetime} reached a query whose job aggregates"
            )),
        }
    }

    /// Records a failure (the first one wins) and starts ending the job.
    fn fail(
        &mut self,
        reason: String,
        stdin: &mut Option<ChildStdin>,
        escalation: &mut Option<(Clock, Escalation)>,
    ) {
        if self.ending.is_none() {
            tracing::debug!(%reason, "query failing");
            self.ending = Some(Ending::Fail(reason));
        }
        *stdin = None;
        escalation.get_or_insert((Clock::now(), Escalation::Term));
    }

    fn unanswered_count(&self) -> u64 {
        match self.options.framing {
            Framing::Value => self.pending.len() as u64,
            Framing::Json => self.since_output,
        }
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

/// Sleeps until `at`; forever when there is no deadline.
async fn sleep_until(at: Option<Clock>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

//! The seam: the [`StreamEngine`] trait every engine implements, the
//! [`Source`] a query reads and the [`QueryHandle`] its caller holds.
//!
//! Instants travel in batches on both sides, so that the cost of crossing a
//! channel is paid once per batch, not once per record. Every channel is
//! bounded: a slow consumer slows the engine, which slows the source.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use serde::Serialize;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::budget::{Part, StateBudget, instant_bytes};
use crate::clock::ClockRelease;
use crate::spec::QuerySpec;
use crate::spec_error::SpecError;
use crate::vocab::{Event, Instant, PropertyType, QueryStatus};

/// The number of instants a batch carries at most, by convention.
pub const BATCH: usize = 1024;

/// Event batches buffered between a query and its consumer, for every
/// engine: a slow consumer holds an engine back after this many.
pub(crate) const EVENT_BUFFER: usize = 16;

/// A stream engine: runs continuous queries.
#[async_trait]
pub trait StreamEngine: Send + Sync + fmt::Debug {
    /// The engine's registry name.
    fn name(&self) -> &str;

    /// What the engine is and whether it can run queries now.
    fn describe(&self) -> EngineInfo;

    /// Starts a query reading `source`.
    ///
    /// The query is validated first: an invalid or unsupported query is an
    /// error here, not a failed query later.
    async fn submit(&self, spec: QuerySpec, source: Source) -> Result<QueryHandle, EngineError>;
}

/// Whether `name` can name an engine (in `engines.toml`, or exported by a
/// plugin): `[a-z][a-z0-9_-]{0,62}`.
pub(crate) fn is_engine_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 63
        && chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// How an engine is provided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// Compiled into mfstream.
    Builtin,
    /// A subprocess bridge defined in `engines.toml`.
    Bridge,
    /// A `cdylib` plugin.
    Plugin,
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EngineKind::Builtin => "builtin",
            EngineKind::Bridge => "bridge",
            EngineKind::Plugin => "plugin",
        })
    }
}

/// Where an engine computes windowed aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AggregatesIn {
    /// In the mfstream process, on the engine's own task (`local`).
    InProcess,
    /// In the engine's job or plugin: the runtime computes them.
    Job,
    /// In the mfstream host, over the instants or over the transformed
    /// outputs of the engine's job (a bridge engine whose job only
    /// transforms).
    Host,
}

impl AggregatesIn {
    /// The name `mfstream engines` shows.
    pub fn as_str(self) -> &'static str {
        match self {
            AggregatesIn::InProcess => "in-process",
            AggregatesIn::Job => "job",
            AggregatesIn::Host => "host",
        }
    }
}

impl fmt::Display for AggregatesIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kinds of query an engine serves: a set of `transform` and
/// `aggregate`, written `transform,aggregate` (and as a JSON list of those
/// names).
///
/// ```
/// use mfstream::Serves;
///
/// let serves = Serves::TRANSFORM | Serves::AGGREGATE;
/// assert!(serves.contains(Serves::AGGREGATE));
/// assert_eq!(serves.to_string(), "transform,aggregate");
/// assert_eq!(serves, ["transform", "aggregate"]);
/// assert_eq!(Serves::NONE.to_string(), "");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Serves {
    bits: u8,
}

impl Serves {
    /// Nothing: an engine that cannot run queries.
    pub const NONE: Serves = Serves { bits: 0 };
    /// Transforms: a lifted operation applied to each instant.
    pub const TRANSFORM: Serves = Serves { bits: 1 };
    /// Windowed aggregates.
    pub const AGGREGATE: Serves = Serves { bits: 2 };
    /// Every kind, in the order they are written.
    const KINDS: [(Serves, &'static str); 2] = [
        (Serves::TRANSFORM, "transform"),
        (Serves::AGGREGATE, "aggregate"),
    ];

    /// Whether every kind of `other` is served.
    pub fn contains(self, other: Serves) -> bool {
        self.bits & other.bits == other.bits
    }

    /// Whether nothing is served.
    pub fn is_empty(self) -> bool {
        self.bits == 0
    }

    /// The names of the kinds served: `transform`, then `aggregate`.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Serves::KINDS
            .into_iter()
            .filter(move |(kind, _)| self.contains(*kind))
            .map(|(_, name)| name)
    }
}

impl std::ops::BitOr for Serves {
    type Output = Serves;

    fn bitor(self, other: Serves) -> Serves {
        Serves {
            bits: self.bits | other.bits,
        }
    }
}

impl fmt::Display for Serves {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, name) in self.names().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(name)?;
        }
        Ok(())
    }
}

/// A set equals the list of its names, in order.
impl<const N: usize> PartialEq<[&str; N]> for Serves {
    fn eq(&self, names: &[&str; N]) -> bool {
        self.names().eq(names.iter().copied())
    }
}

impl Serialize for Serves {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.names())
    }
}

/// What the registry knows of an engine, as `mfstream engines` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EngineInfo {
    /// The registry name.
    pub name: String,
    /// How it is provided.
    pub kind: EngineKind,
    /// Whether it can run queries now.
    pub ready: bool,
    /// Why it is not ready, when it is not.
    pub reason: Option<String>,
    /// A line for people.
    pub description: String,
    /// The kinds of query it serves (a query may compose the two: a
    /// transform, then an aggregate of its outputs).
    pub serves: Serves,
    /// Where its windowed aggregates are computed.
    pub aggregates_in: AggregatesIn,
}

/// Why a query could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The query is invalid.
    #[error("invalid query: {0}")]
    InvalidQuery(#[from] SpecError),
    /// The engine could not start the query.
    #[error("the {engine} engine could not start the query: {reason}")]
    Start {
        /// The engine.
        engine: String,
        /// Why.
        reason: String,
    },
}

/// A failure of the source a query reads, such as an input line that does
/// not parse. It fails the query with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SourceError(pub String);

type SourceItem = Result<Vec<Instant>, SourceError>;

/// What travels on a live source's channel.
#[derive(Debug)]
enum Item {
    /// A batch, with the bytes it counts in the query's budget.
    Batch(Vec<Instant>, u64),
    Failed(SourceError),
    /// A held clock's release, in order with the batches.
    Release(ClockRelease),
}

/// The instants a query reads, in batches.
///
/// Built with [`Source::channel`] for a live feed or [`Source::from_instants`]
/// for a fixed list. The source ends when every sender is dropped; a sender
/// can also end it with an error ([`SourceSender::fail`]).
#[derive(Debug)]
pub struct Source {
    rx: mpsc::Receiver<Item>,
    /// Whether its numbers must be integers (a `TInteger` property).
    integers: bool,
    /// The failure of a record, once the records before it were delivered.
    failed: Option<SourceError>,
    /// The query's state budget, which the instants waiting in the buffer
    /// count in ([`Source::budgeted`]).
    budget: Option<Arc<StateBudget>>,
}

impl Source {
    /// A live source holding at most `capacity` batches in flight.
    pub fn channel(capacity: usize) -> (SourceSender, Source) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (SourceSender { tx, budget: None }, Source::new(rx))
    }

    /// A live source whose buffered instants count in `budget` (the
    /// query's: [`QuerySpec::with_budget`]) from the moment they are sent
    /// until the query takes them. A batch taken while the query holds more
    /// than its budget ends the source with [`StateBudget::exceeded`]'s
    /// reason, which fails the query.
    ///
    /// [`QuerySpec::with_budget`]: crate::QuerySpec::with_budget
    pub fn budgeted(capacity: usize, budget: Arc<StateBudget>) -> (SourceSender, Source) {
        let (mut tx, mut rx) = Source::channel(capacity);
        tx.budget = Some(budget.clone());
        rx.budget = Some(budget);
        (tx, rx)
    }

    /// A source of a fixed list of instants.
    pub fn from_instants(instants: impl IntoIterator<Item = Instant>) -> Source {
        let mut batches = Vec::new();
        let mut batch = Vec::with_capacity(BATCH);
        for instant in instants {
            batch.push(instant);
            if batch.len() == BATCH {
                batches.push(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)));
            }
        }
        if !batch.is_empty() {
            batches.push(batch);
        }
        let (tx, rx) = mpsc::channel(batches.len().max(1));
        for batch in batches {
            tx.try_send(Item::Batch(batch, 0))
                .expect("the channel was sized to hold every batch");
        }
        Source::new(rx)
    }

    fn new(rx: mpsc::Receiver<Item>) -> Source {
        Source {
            rx,
            integers: false,
            failed: None,
            budget: None,
        }
    }

    /// The source of a property of type `t`: for `TInteger`, a number with
    /// a fraction ends the source with an error naming the record, after
    /// the records before it (every engine fails the query with it).
    pub(crate) fn typed(mut self, t: PropertyType) -> Source {
        self.integers = t == PropertyType::TInteger;
        self
    }

    /// The next batch; `None` once the source has ended. An empty batch
    /// says that the query's held clock was released there
    /// ([`SourceSender::release_clock`]): it applies from now on.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a batch is never lost when this future is dropped.
    pub async fn next_batch(&mut self) -> Option<SourceItem> {
        if let Some(error) = self.failed.take() {
            return Some(Err(error));
        }
        Some(match self.rx.recv().await? {
            Item::Batch(batch, bytes) => {
                if let Some(budget) = &self.budget {
                    // The batch is the engine's now; past the budget (the
                    // batch still counted) the query ends here, before its
                    // state grows further.
                    let over = budget.exceeded();
                    budget.sub(Part::Pending, bytes);
                    if let Some(reason) = over {
                        return Some(Err(SourceError(reason)));
                    }
                }
                self.checked(batch)
            }
            Item::Failed(error) => Err(error),
            Item::Release(release) => {
                release.release();
                Ok(Vec::new())
            }
        })
    }

    /// The state budget of the query reading it ([`Source::budgeted`]), for
    /// an engine to count what it holds of the query's instants in.
    pub(crate) fn budget(&self) -> Option<Arc<StateBudget>> {
        self.budget.clone()
    }

    /// The records of `batch` up to the first that does not fit the
    /// property's type; that one's error comes next.
    fn checked(&mut self, mut batch: Vec<Instant>) -> SourceItem {
        if !self.integers {
            return Ok(batch);
        }
        let Some(at) = batch
            .iter()
            .position(|i| i.value.as_f64().is_some_and(|x| x.fract() != 0.0))
        else {
            return Ok(batch);
        };
        let bad = &batch[at];
        let error = SourceError(format!(
            "record at {} has value {}, but the property is TInteger: it takes integers",
            bad.datetime, bad.value
        ));
        batch.truncate(at);
        if batch.is_empty() {
            return Err(error);
        }
        self.failed = Some(error);
        Ok(batch)
    }
}

/// The feeding end of a live [`Source`].
#[derive(Debug, Clone)]
pub struct SourceSender {
    tx: mpsc::Sender<Item>,
    budget: Option<Arc<StateBudget>>,
}

/// The query reading the source has ended; the batch was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the query reading this source has ended")]
pub struct SourceClosed;

impl SourceSender {
    /// The item carrying `batch`, counted in the budget until taken.
    fn item(&self, batch: Vec<Instant>) -> Item {
        let bytes = charge(self.budget.as_deref(), &batch);
        Item::Batch(batch, bytes)
    }

    /// Sends a batch, waiting while the query's buffer is full.
    pub async fn send_batch(&self, batch: Vec<Instant>) -> Result<(), SourceClosed> {
        if batch.is_empty() {
            return Ok(());
        }
        let item = self.item(batch);
        self.tx.send(item).await.map_err(|_| SourceClosed)
    }

    /// Reserves room for one batch, waiting while the query's buffer is
    /// full. A control plane feeding several queries reserves room in each
    /// before sending to any, so that either all get a batch or none does.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future (or the permit) gives the room back.
    pub async fn reserve(&self) -> Result<SourcePermit<'_>, SourceClosed> {
        let permit = self.tx.reserve().await.map_err(|_| SourceClosed)?;
        Ok(SourcePermit {
            permit,
            budget: self.budget.as_deref(),
        })
    }

    /// Sends one instant.
    pub async fn send(&self, instant: Instant) -> Result<(), SourceClosed> {
        self.send_batch(vec![instant]).await
    }

    /// Sends a batch from a thread outside the async runtime, blocking while
    /// the query's buffer is full.
    ///
    /// # Panics
    ///
    /// When called from within an async runtime (as tokio's `blocking_send`).
    pub fn blocking_send_batch(&self, batch: Vec<Instant>) -> Result<(), SourceClosed> {
        if batch.is_empty() {
            return Ok(());
        }
        let item = self.item(batch);
        self.tx.blocking_send(item).map_err(|_| SourceClosed)
    }

    /// Ends the source with an error from a thread outside the async
    /// runtime.
    pub fn blocking_fail(self, error: SourceError) {
        // If the query has already ended, there is no one left to tell.
        let _ = self.tx.blocking_send(Item::Failed(error));
    }

    /// Ends the source with an error, which fails the query.
    pub async fn fail(self, error: SourceError) {
        // If the query has already ended, there is no one left to tell.
        let _ = self.tx.send(Item::Failed(error)).await;
    }

    /// Releases a held clock ([`WallClock::held`]) in order with the
    /// batches: the query applies its clock once it has taken every batch
    /// sent before this one, and before any sent after. The query reads it
    /// as an empty batch.
    ///
    /// [`WallClock::held`]: crate::WallClock::held
    pub async fn release_clock(&self, release: ClockRelease) -> Result<(), SourceClosed> {
        self.tx
            .send(Item::Release(release))
            .await
            .map_err(|_| SourceClosed)
    }

    /// Waits until the query reading this source has ended.
    pub async fn closed(&self) {
        self.tx.closed().await
    }
}

/// Room for one batch in a query's source buffer, from
/// [`SourceSender::reserve`]: sending on it never waits.
#[derive(Debug)]
pub struct SourcePermit<'a> {
    permit: mpsc::Permit<'a, Item>,
    budget: Option<&'a StateBudget>,
}

/// Counts `batch` in `budget` as pending, returning its bytes (0 without a
/// budget: nothing is walked then).
fn charge(budget: Option<&StateBudget>, batch: &[Instant]) -> u64 {
    let Some(budget) = budget else {
        return 0;
    };
    let bytes = batch.iter().map(instant_bytes).sum();
    budget.add(Part::Pending, bytes);
    bytes
}

impl SourcePermit<'_> {
    /// Sends a batch in the reserved room. An empty batch gives the room
    /// back instead.
    pub fn send_batch(self, batch: Vec<Instant>) {
        if !batch.is_empty() {
            let bytes = charge(self.budget, &batch);
            self.permit.send(Item::Batch(batch, bytes));
        }
    }
}

/// Record counts of a running query.
#[derive(Debug, Default)]
pub struct Progress {
    records_in: AtomicU64,
    records_out: AtomicU64,
    restarts: AtomicU64,
    skipped: AtomicU64,
    /// Skipped and not yet carried by an event: the next batch delivered
    /// carries them ([`QueryOutput::emit`]).
    unreported: AtomicU64,
}

/// Adds `n` to `counter`, stopping at `u64::MAX`: a skipped count can come
/// from a job's own numbers, which must not wrap it.
fn saturating_add(counter: &AtomicU64, n: u64) {
    let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
        Some(v.saturating_add(n))
    });
}

/// A copy of a query's [`Progress`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ProgressSnapshot {
    /// Instants read from the source.
    pub records_in: u64,
    /// Events delivered.
    pub records_out: u64,
    /// Times the engine restarted the query's job.
    pub restarts: u64,
    /// Records (or windows) skipped under `onError: skip`: with no result
    /// in their operation's domain, or no finite one.
    pub skipped: u64,
}

impl Progress {
    /// Counts `n` instants read.
    pub fn add_in(&self, n: usize) {
        self.records_in.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Counts `n` events delivered.
    pub fn add_out(&self, n: usize) {
        self.records_out.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Counts `n` records or windows skipped under `onError: skip`; the
    /// next event delivered carries them in its `skipped`.
    pub fn add_skipped(&self, n: u64) {
        self.count_skipped(n);
        self.carry_skipped(n);
    }

    /// Counts `n` skipped records or windows in the query's total only: an
    /// engine that stamps them on an event itself (the one right after
    /// them) counts them here.
    pub fn count_skipped(&self, n: u64) {
        if n > 0 {
            saturating_add(&self.skipped, n);
        }
    }

    /// Has the next event delivered carry `n` skipped records or windows,
    /// counted already ([`count_skipped`](Progress::count_skipped)): those
    /// an engine's events carried before the host windowed them.
    pub fn carry_skipped(&self, n: u64) {
        if n > 0 {
            saturating_add(&self.unreported, n);
        }
    }

    /// Counts one restart.
    pub fn add_restart(&self) {
        self.restarts.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now.
    pub fn snapshot(&self) -> ProgressSnapshot {
        ProgressSnapshot {
            records_in: self.records_in.load(Ordering::Relaxed),
            records_out: self.records_out.load(Ordering::Relaxed),
            restarts: self.restarts.load(Ordering::Relaxed),
            skipped: self.skipped.load(Ordering::Relaxed),
        }
    }
}

/// The caller's side of a running query: its events, its status, and
/// [`stop`](QueryHandle::stop).
///
/// Dropping the handle stops the query.
#[derive(Debug)]
pub struct QueryHandle {
    id: String,
    engine: String,
    events: mpsc::Receiver<Vec<Event>>,
    pending: std::vec::IntoIter<Event>,
    status: watch::Receiver<QueryStatus>,
    progress: Arc<Progress>,
    stop: CancellationToken,
}

/// The engine's side of a running query: where it delivers events and its
/// final status.
///
/// If it is dropped before [`finish`](QueryOutput::finish) (the engine's task
/// panicked, say), the query fails rather than running forever.
#[derive(Debug)]
pub struct QueryOutput {
    events: Option<mpsc::Sender<Vec<Event>>>,
    status: watch::Sender<QueryStatus>,
    progress: Arc<Progress>,
    stop: CancellationToken,
}

/// The consumer of a query's events has gone; the query should end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerGone;

impl QueryHandle {
    /// A connected handle and output for a query `id` on `engine`, holding up
    /// to `capacity` event batches between them.
    pub fn new(id: &str, engine: &str, capacity: usize) -> (QueryHandle, QueryOutput) {
        let (events_tx, events_rx) = mpsc::channel(capacity.max(1));
        let (status_tx, status_rx) = watch::channel(QueryStatus::Running);
        let progress = Arc::new(Progress::default());
        let stop = CancellationToken::new();
        let handle = QueryHandle {
            id: id.to_owned(),
            engine: engine.to_owned(),
            events: events_rx,
            pending: Vec::new().into_iter(),
            status: status_rx,
            progress: progress.clone(),
            stop: stop.clone(),
        };
        let output = QueryOutput {
            events: Some(events_tx),
            status: status_tx,
            progress,
            stop,
        };
        (handle, output)
    }

    /// The query's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The engine running it.
    pub fn engine(&self) -> &str {
        &self.engine
    }

    /// The next batch of events; `None` once the query has ended and every
    /// event was delivered. The status is final by then.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn next_batch(&mut self) -> Option<Vec<Event>> {
        let rest: Vec<Event> = std::mem::take(&mut self.pending).collect();
        if !rest.is_empty() {
            return Some(rest);
        }
        self.events.recv().await
    }

    /// The next batch of events if one is ready now, without waiting.
    pub fn try_next_batch(&mut self) -> Option<Vec<Event>> {
        let rest: Vec<Event> = std::mem::take(&mut self.pending).collect();
        if !rest.is_empty() {
            return Some(rest);
        }
        self.events.try_recv().ok()
    }

    /// The next event; `None` once the query has ended.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.pending.next() {
                return Some(event);
            }
            self.pending = self.events.recv().await?.into_iter();
        }
    }

    /// The status now.
    pub fn status(&self) -> QueryStatus {
        self.status.borrow().clone()
    }

    /// A receiver that sees every change of status.
    pub fn watch_status(&self) -> watch::Receiver<QueryStatus> {
        self.status.clone()
    }

    /// The record counts now.
    pub fn progress(&self) -> ProgressSnapshot {
        self.progress.snapshot()
    }

    /// The live counters, for a control plane that shows them after it has
    /// handed the handle on.
    pub fn progress_counters(&self) -> Arc<Progress> {
        self.progress.clone()
    }

    /// Asks the query to stop, gracefully: the engine finishes what it can
    /// within its grace period, then ends. Events still arrive until then.
    /// Idempotent.
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Waits for the query to end, discarding events not yet read, and
    /// returns its final status.
    pub async fn wait(mut self) -> QueryStatus {
        self.pending = Vec::new().into_iter();
        while self.events.recv().await.is_some() {}
        let mut status = self.status.clone();
        if let Ok(s) = status.wait_for(QueryStatus::is_terminal).await {
            return s.clone();
        }
        // The output was dropped; its Drop set a final status first.
        self.status()
    }

    /// Stops the query and waits for its final status.
    pub async fn stop_and_wait(self) -> QueryStatus {
        self.stop();
        self.wait().await
    }
}

impl Drop for QueryHandle {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl QueryOutput {
    /// Delivers a batch of events, waiting while the consumer's buffer is full.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a dropped call may lose its batch.
    /// The first event carries the records skipped since the last batch
    /// ([`Progress::add_skipped`]), added to what it carries already.
    pub async fn emit(&self, mut batch: Vec<Event>) -> Result<(), ConsumerGone> {
        if batch.is_empty() {
            return Ok(());
        }
        if self.progress.unreported.load(Ordering::Relaxed) > 0 {
            let n = self.progress.unreported.swap(0, Ordering::Relaxed);
            batch[0].add_skipped(n);
        }
        let n = batch.len();
        let events = self.events.as_ref().ok_or(ConsumerGone)?;
        events.send(batch).await.map_err(|_| ConsumerGone)?;
        self.progress.add_out(n);
        Ok(())
    }

    /// The query's progress counters.
    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    /// Whether a stop was asked for.
    pub fn stop_requested(&self) -> bool {
        self.stop.is_cancelled()
    }

    /// Resolves once a stop is asked for (or the handle is dropped).
    pub fn stopping(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.stop.cancelled()
    }

    /// Ends the query with `status`, after every event was emitted.
    pub fn finish(mut self, status: QueryStatus) {
        self.set_final(status);
    }

    fn set_final(&mut self, status: QueryStatus) {
        debug_assert!(status.is_terminal());
        // The status is set before the events channel closes, so a consumer
        // that sees the end of the events sees the final status too.
        self.status.send_replace(status);
        self.events = None;
    }
}

impl Drop for QueryOutput {
    fn drop(&mut self) {
        if self.events.is_some() {
            self.set_final(QueryStatus::Failed {
                reason: "the engine ended the query without a status (it panicked)".into(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_dropped_output_fails_the_query_instead_of_hanging() {
        let (handle, output) = QueryHandle::new("q", "test", 1);
        drop(output);
        match handle.wait().await {
            QueryStatus::Failed { reason } => assert!(reason.contains("panicked"), "{reason}"),
            other => panic!("expected failed, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn the_final_status_is_visible_once_events_end() {
        let (mut handle, output) = QueryHandle::new("q", "test", 1);
        tokio::spawn(async move {
            let event = Event::Instant(crate::vocab::InstantEvent {
                datetime: "t".into(),
                value: crate::vocab::Value::Number(1.0),
                property: "p".into(),
                operation: "abs".into(),
                skipped: 0,
            });
            output.emit(vec![event]).await.unwrap();
            output.finish(QueryStatus::Completed);
        });
        assert!(handle.next().await.is_some());
        assert!(handle.next().await.is_none());
        assert_eq!(handle.status(), QueryStatus::Completed);
        assert_eq!(handle.progress().records_out, 1);
    }

    #[tokio::test]
    async fn dropping_the_handle_asks_the_engine_to_stop() {
        let (handle, output) = QueryHandle::new("q", "test", 1);
        drop(handle);
        output.stopping().await;
        assert!(output.stop_requested());
    }

    #[tokio::test]
    async fn a_clock_release_reads_as_an_empty_batch_after_the_batches_sent_before_it() {
        let (clock, release) = crate::WallClock::system().held();
        let (sender, mut source) = Source::channel(4);
        sender.send(Instant::number("t", 1.0)).await.unwrap();
        sender.release_clock(release).await.unwrap();
        sender.send(Instant::number("u", 2.0)).await.unwrap();
        assert_eq!(source.next_batch().await.unwrap().unwrap().len(), 1);
        assert!(
            clock.is_held(),
            "held until the batches before it are taken"
        );
        assert!(source.next_batch().await.unwrap().unwrap().is_empty());
        assert!(!clock.is_held());
        assert_eq!(source.next_batch().await.unwrap().unwrap()[0].datetime, "u");
    }

    #[tokio::test]
    async fn instants_waiting_count_in_the_budget_until_taken_and_past_it_fail_the_source() {
        let budget = Arc::new(StateBudget::new(10_000));
        let (sender, mut source) = Source::budgeted(4, budget.clone());
        let text = |n: usize| Instant {
            datetime: "t".into(),
            value: crate::vocab::Value::Text("x".repeat(n)),
        };
        sender.send(text(1000)).await.unwrap();
        let waiting = budget.used();
        assert!(waiting >= 1001, "{waiting}");
        assert_eq!(source.next_batch().await.unwrap().unwrap().len(), 1);
        assert_eq!(budget.used(), 0, "taken: the engine's now");
        sender.send(text(20_000)).await.unwrap();
        let failure = source.next_batch().await.unwrap().unwrap_err();
        assert!(
            failure
                .0
                .starts_with("query state reached --max-query-state"),
            "{failure}"
        );
    }

    #[tokio::test]
    async fn a_fixed_source_yields_its_instants_in_batches_then_ends() {
        let mut source = Source::from_instants((0..2500).map(|i| Instant::number("t", i as f64)));
        let mut seen = Vec::new();
        while let Some(batch) = source.next_batch().await {
            let batch = batch.unwrap();
            assert!(batch.len() <= BATCH);
            seen.extend(batch.into_iter().map(|i| i.value.as_f64().unwrap()));
        }
        assert_eq!(seen, (0..2500).map(|i| i as f64).collect::<Vec<_>>());
    }
}

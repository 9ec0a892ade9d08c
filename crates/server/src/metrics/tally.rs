//! The counters `GET /metrics` needs that nothing else keeps, each kept
//! where its event happens:
//!
//! - [`QueryTally`], in a query's fan-out: records its windows skipped as
//!   late, and its subscribers' lags;
//! - [`EngineTally`], in the query table: per engine, the queries started,
//!   running and failed, and the counts of the queries that ended (their
//!   [`Progress`] goes with them);
//! - [`IngestTally`], in the server: instants accepted and bodies refused
//!   (by reason), per source ([`IngestCounters`]), and each source's own
//!   families ([`SourceMetrics`]), which the sources register: the
//!   metrics name no source.
//!
//! Those on a hot path (a batch of results, an ingest) are relaxed atomics
//! added once per batch or per request; the engine tally takes a lock only
//! when a query starts or ends, and at a scrape.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use mfstream_engine::{Progress, ProgressSnapshot};
use mfstream_model::{Event, QueryStatus};

use crate::problem::Problem;

/// A query's counts that its engine's [`Progress`] does not keep.
#[derive(Debug, Default)]
pub(crate) struct QueryTally {
    late: AtomicU64,
    lagged: AtomicU64,
    missed: AtomicU64,
}

impl QueryTally {
    /// Counts the records a batch of results says were skipped as late.
    pub(crate) fn count_batch(&self, events: &[Event]) {
        let late: u64 = events
            .iter()
            .map(|event| match event {
                Event::Window(window) => window.late,
                _ => 0,
            })
            .sum();
        if late > 0 {
            self.late.fetch_add(late, Ordering::Relaxed);
        }
    }

    /// Counts one `lagged` notice, for `missed` events a subscriber lost.
    pub(crate) fn count_lag(&self, missed: u64) {
        self.lagged.fetch_add(1, Ordering::Relaxed);
        self.missed.fetch_add(missed, Ordering::Relaxed);
    }

    /// Records skipped as late.
    pub(crate) fn late(&self) -> u64 {
        self.late.load(Ordering::Relaxed)
    }

    /// `lagged` notices sent, and the events they said were missed.
    pub(crate) fn lags(&self) -> (u64, u64) {
        (
            self.lagged.load(Ordering::Relaxed),
            self.missed.load(Ordering::Relaxed),
        )
    }
}

/// Per engine: what its queries did, over the server's life.
///
/// A query's own counts ([`Progress`]) go when it is deleted, so the
/// engine's totals are the sum of its running queries' counts and of the
/// last counts of those that ended: both under one lock, so a total never
/// goes back as a query moves from one to the other.
#[derive(Debug, Default)]
pub(crate) struct EngineTally {
    inner: Mutex<Engines>,
}

#[derive(Debug, Default)]
struct Engines {
    next: u64,
    by_name: HashMap<String, EngineCounts>,
}

#[derive(Debug, Default)]
struct EngineCounts {
    running: HashMap<u64, Arc<Progress>>,
    starts: u64,
    failures: u64,
    ended: ProgressSnapshot,
}

/// An engine's totals at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct EngineTotals {
    /// Queries running on it.
    pub(crate) running: u64,
    /// Queries started on it (registered, or resumed at start-up).
    pub(crate) starts: u64,
    /// Queries on it that ended failed.
    pub(crate) failures: u64,
    /// Instants its queries read, events they gave, restarts of their jobs.
    pub(crate) progress: ProgressSnapshot,
}

/// A query running on an engine; its counts move to the engine's ended
/// ones when it is dropped.
#[derive(Debug)]
pub(crate) struct Running {
    tally: Arc<EngineTally>,
    engine: String,
    id: u64,
}

impl EngineTally {
    fn inner(&self) -> MutexGuard<'_, Engines> {
        // Every update is a few additions that cannot panic midway.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A query starts on `engine`, counting in `progress`.
    pub(crate) fn start(self: &Arc<Self>, engine: &str, progress: Arc<Progress>) -> Running {
        let mut inner = self.inner();
        let id = inner.next;
        inner.next += 1;
        let counts = inner.by_name.entry(engine.to_owned()).or_default();
        counts.starts += 1;
        counts.running.insert(id, progress);
        Running {
            tally: self.clone(),
            engine: engine.to_owned(),
            id,
        }
    }

    /// Every engine that ran a query, by name.
    pub(crate) fn totals(&self) -> BTreeMap<String, EngineTotals> {
        let inner = self.inner();
        inner
            .by_name
            .iter()
            .map(|(name, counts)| {
                let mut progress = counts.ended;
                for running in counts.running.values() {
                    add(&mut progress, running.snapshot());
                }
                let totals = EngineTotals {
                    running: counts.running.len() as u64,
                    starts: counts.starts,
                    failures: counts.failures,
                    progress,
                };
                (name.clone(), totals)
            })
            .collect()
    }
}

fn add(to: &mut ProgressSnapshot, more: ProgressSnapshot) {
    to.records_in = to.records_in.saturating_add(more.records_in);
    to.records_out = to.records_out.saturating_add(more.records_out);
    to.restarts = to.restarts.saturating_add(more.restarts);
    to.skipped = to.skipped.saturating_add(more.skipped);
    to.cpu_nanos = to.cpu_nanos.saturating_add(more.cpu_nanos);
}

impl Running {
    /// The query ended with `status`.
    pub(crate) fn end(self, status: &QueryStatus) {
        if matches!(status, QueryStatus::Failed { .. }) {
            let mut inner = self.tally.inner();
            if let Some(counts) = inner.by_name.get_mut(&self.engine) {
                counts.failures += 1;
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut inner = self.tally.inner();
        if let Some(counts) = inner.by_name.get_mut(&self.engine)
            && let Some(progress) = counts.running.remove(&self.id)
        {
            add(&mut counts.ended, progress.snapshot());
        }
    }
}

/// Why a body (or a message) of instants was refused: the label `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// Not a JSON or JSON-lines body (415).
    MediaType,
    /// Over `--max-body`, or a text value over the store's bound (413).
    TooLarge,
    /// The body took longer than `--body-timeout` (408).
    Timeout,
    /// Not JSON instants.
    Body,
    /// A datetime that is not ISO-8601.
    Datetime,
    /// A value that does not fit the property's type.
    Value,
    /// Another invalid field (400), or a valid one that does not fit
    /// (422: a `MovingPoint`'s `crs` not the feature's).
    Invalid,
    /// `--max-inflight-bytes` reached (503).
    InFlight,
    /// A query's buffer stayed full for `--ingest-wait` (503).
    Busy,
    /// The state store could not log it (503).
    Store,
    /// The server is shutting down (503).
    Unavailable,
    /// A topic no topic pattern matches (a broker's message only).
    Topic,
    /// Anything else (an internal failure).
    Other,
}

impl Reason {
    pub(crate) const ALL: [Reason; 13] = [
        Reason::MediaType,
        Reason::TooLarge,
        Reason::Timeout,
        Reason::Body,
        Reason::Datetime,
        Reason::Value,
        Reason::Invalid,
        Reason::InFlight,
        Reason::Busy,
        Reason::Store,
        Reason::Unavailable,
        Reason::Topic,
        Reason::Other,
    ];

    /// The label value.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Reason::MediaType => "media_type",
            Reason::TooLarge => "too_large",
            Reason::Timeout => "timeout",
            Reason::Body => "body",
            Reason::Datetime => "datetime",
            Reason::Value => "value",
            Reason::Invalid => "invalid",
            Reason::InFlight => "inflight",
            Reason::Busy => "busy",
            Reason::Store => "store",
            Reason::Unavailable => "unavailable",
            Reason::Topic => "topic",
            Reason::Other => "other",
        }
    }

    /// The reason of an ingest's error answer.
    pub(crate) fn of(problem: &Problem) -> Reason {
        match (problem.code(), problem.field()) {
            ("UnsupportedMediaType", _) => Reason::MediaType,
            ("PayloadTooLarge", _) => Reason::TooLarge,
            ("RequestTimeout", _) => Reason::Timeout,
            ("InvalidParameterValue", Some("body")) => Reason::Body,
            ("InvalidParameterValue", Some("datetime")) => Reason::Datetime,
            ("InvalidParameterValue", Some("value")) => Reason::Value,
            ("InvalidParameterValue" | "UnprocessableEntity", _) => Reason::Invalid,
            ("TooManyBytesInFlight", _) => Reason::InFlight,
            ("StateStoreUnavailable", _) => Reason::Store,
            ("ServiceUnavailable", _) if problem.accepted().is_some() => Reason::Busy,
            ("ServiceUnavailable", _) => Reason::Unavailable,
            _ => Reason::Other,
        }
    }
}

/// One source's instants accepted and bodies (or messages) refused, by
/// reason: its rows of `mfstream_ingest_instants_total{source}` and
/// `mfstream_ingest_refused_total{source, reason}`.
#[derive(Debug, Default)]
pub(crate) struct IngestCounters {
    accepted: AtomicU64,
    refused: [AtomicU64; Reason::ALL.len()],
}

impl IngestCounters {
    /// Counts `n` instants accepted.
    pub(crate) fn accepted(&self, n: usize) {
        if n > 0 {
            self.accepted.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    /// Counts one body (or message) refused for `reason`.
    pub(crate) fn refused(&self, reason: Reason) {
        self.refused[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an ingest's answer: the instants it accepted (an error may
    /// come after some were), and its reason if it is an error.
    pub(crate) fn answered(&self, answer: Result<usize, &Problem>) {
        match answer {
            Ok(accepted) => self.accepted(accepted),
            Err(problem) => {
                self.accepted(problem.accepted().unwrap_or(0));
                self.refused(Reason::of(problem));
            }
        }
    }

    /// Instants accepted.
    pub(crate) fn accepted_total(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Bodies refused for `reason`.
    pub(crate) fn refused_for(&self, reason: Reason) -> u64 {
        self.refused[reason as usize].load(Ordering::Relaxed)
    }
}

/// What a source counts beyond its instants and refusals: its own
/// families (`mfstream_mqtt_…`, `mfstream_kafka_…`), read at each scrape.
/// A source registers it with the [`IngestTally`]; the metrics know no
/// source by name.
pub(crate) trait SourceMetrics: Send + Sync + std::fmt::Debug {
    /// The families, with their series now.
    fn families(&self) -> Vec<Family>;
}

/// A family of a source's own: a counter (`name` gets its `_total` from
/// the encoder) or a gauge, each series with at most a few fixed labels.
#[derive(Debug, Clone)]
pub(crate) struct Family {
    pub(crate) name: &'static str,
    pub(crate) help: &'static str,
    pub(crate) kind: FamilyKind,
    pub(crate) series: Vec<(Vec<(&'static str, &'static str)>, u64)>,
}

/// A [`Family`]'s type.
#[cfg_attr(not(any(feature = "mqtt", feature = "kafka")), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FamilyKind {
    /// Only goes up.
    Counter,
    /// Goes up and down.
    Gauge,
}

#[cfg_attr(not(any(feature = "mqtt", feature = "kafka")), allow(dead_code))]
impl Family {
    /// A counter of one series without labels.
    pub(crate) fn counter(name: &'static str, help: &'static str, value: u64) -> Family {
        Family::new(name, help, FamilyKind::Counter, vec![(Vec::new(), value)])
    }

    /// A gauge of one series without labels.
    pub(crate) fn gauge(name: &'static str, help: &'static str, value: u64) -> Family {
        Family::new(name, help, FamilyKind::Gauge, vec![(Vec::new(), value)])
    }

    /// A family of `kind` with its `series`.
    pub(crate) fn new(
        name: &'static str,
        help: &'static str,
        kind: FamilyKind,
        series: Vec<(Vec<(&'static str, &'static str)>, u64)>,
    ) -> Family {
        Family {
            name,
            help,
            kind,
            series,
        }
    }
}

/// Every source's [`IngestCounters`], in the order of the sources (each
/// source this build has, configured or not: its rows are zero when it is
/// off), and the [`SourceMetrics`] of those configured.
#[derive(Debug, Default)]
pub(crate) struct IngestTally {
    counters: Vec<(&'static str, Arc<IngestCounters>)>,
    sources: Vec<Arc<dyn SourceMetrics>>,
}

impl IngestTally {
    /// The counters of the source `name`: its rows, made now (after those
    /// of the sources before it) if it had none.
    pub(crate) fn counters(&mut self, name: &'static str) -> Arc<IngestCounters> {
        if let Some((_, counters)) = self.counters.iter().find(|(n, _)| *n == name) {
            return counters.clone();
        }
        let counters = Arc::<IngestCounters>::default();
        self.counters.push((name, counters.clone()));
        counters
    }

    /// Registers a source's own families, read at each scrape after those
    /// registered before.
    #[cfg_attr(not(any(feature = "mqtt", feature = "kafka")), allow(dead_code))]
    pub(crate) fn register(&mut self, source: Arc<dyn SourceMetrics>) {
        self.sources.push(source);
    }

    /// Every source's counters, in order.
    pub(crate) fn rows(&self) -> impl Iterator<Item = (&'static str, &IngestCounters)> {
        self.counters.iter().map(|(name, c)| (*name, &**c))
    }

    /// The registered sources' own families now.
    pub(crate) fn families(&self) -> Vec<Family> {
        self.sources.iter().flat_map(|s| s.families()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use axum::http::StatusCode;

    #[test]
    fn an_engines_totals_keep_the_counts_of_its_queries_that_ended() {
        let tally = Arc::new(EngineTally::default());
        let a = Arc::new(Progress::default());
        let b = Arc::new(Progress::default());
        let running_a = tally.start("flink", a.clone());
        let running_b = tally.start("flink", b.clone());
        a.add_in(3);
        a.add_restart();
        b.add_in(4);
        b.add_out(2);
        let totals = tally.totals()["flink"];
        assert_eq!((totals.running, totals.starts), (2, 2));
        assert_eq!(totals.progress.records_in, 7);
        running_a.end(&QueryStatus::Failed {
            reason: "boom".into(),
        });
        running_b.end(&QueryStatus::Completed);
        // Their progress is gone with them; the totals are not.
        drop((a, b));
        let totals = tally.totals()["flink"];
        assert_eq!((totals.running, totals.starts, totals.failures), (0, 2, 1));
        assert_eq!(totals.progress.records_in, 7);
        assert_eq!(totals.progress.records_out, 2);
        assert_eq!(totals.progress.restarts, 1);
    }

    #[test]
    fn an_error_answer_is_refused_by_its_reason_and_keeps_what_it_accepted() {
        let mut tally = IngestTally::default();
        let http = tally.counters("http");
        let mqtt = tally.counters("mqtt");
        http.answered(Ok(5));
        http.answered(Err(&Problem::invalid("datetime", "instant 1: \"soon\"")));
        http.answered(Err(&Problem::ingest_busy(2, 9, 5)));
        http.answered(Err(&Problem::unprocessable("crs", "not the feature's")));
        mqtt.accepted(3);
        mqtt.refused(Reason::Topic);
        http.answered(Err(&Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            "text/plain".into(),
        )));
        assert_eq!(http.accepted_total(), 7);
        for (reason, n) in [
            (Reason::Datetime, 1),
            (Reason::Busy, 1),
            (Reason::MediaType, 1),
            (Reason::Invalid, 1),
            (Reason::Body, 0),
            (Reason::Unavailable, 0),
            (Reason::Topic, 0),
        ] {
            assert_eq!(http.refused_for(reason), n, "{reason:?}");
        }
        assert_eq!(mqtt.accepted_total(), 3);
        assert_eq!(mqtt.refused_for(Reason::Topic), 1);
        assert_eq!(mqtt.refused_for(Reason::Datetime), 0);
        // One row per source, in order; asking again gives the same.
        let rows: Vec<_> = tally
            .rows()
            .map(|(name, c)| (name, c.accepted_total()))
            .collect();
        assert_eq!(rows, [("http", 7), ("mqtt", 3)]);
        assert_eq!(tally.counters("mqtt").accepted_total(), 3);
    }

    #[test]
    fn every_reason_has_its_own_label() {
        let mut names: Vec<_> = Reason::ALL.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Reason::ALL.len());
        for (i, reason) in Reason::ALL.iter().enumerate() {
            assert_eq!(*reason as usize, i, "ALL is in declaration order");
        }
    }

    #[test]
    fn late_records_are_counted_from_the_window_events_that_carry_them() {
        use mfstream_model::{Aggregation, InstantEvent, Value, WindowEvent};
        let tally = QueryTally::default();
        let instant = Event::Instant(InstantEvent {
            datetime: "t".into(),
            value: Value::Number(1.0),
            property: "p".into(),
            operation: "abs".into(),
            skipped: 0,
        });
        let window = |late| {
            Event::Window(WindowEvent {
                window_start: "a".into(),
                window_end: "b".into(),
                property: "p".into(),
                aggregation: Aggregation::Avg,
                value: Value::Number(1.0),
                count: 1,
                partial: false,
                late,
                skipped: 0,
            })
        };
        tally.count_batch(&[instant.clone(), window(2), window(0), window(3)]);
        tally.count_batch(&[instant]);
        assert_eq!(tally.late(), 5);
        tally.count_lag(4);
        tally.count_lag(1);
        assert_eq!(tally.lags(), (2, 5));
    }
}

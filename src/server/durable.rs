//! The server's durable side (`mfstream serve --state DIR`): how each query
//! moves its checkpoint, and how its results are numbered, stored and only
//! then sent. The store itself, and the exactly-once argument, are in
//! [`crate::store`]; this module is the server's half of that table.
//!
//! # Checkpoints: replay from the oldest open window
//!
//! A checkpoint `(after_seq, last_event_id, None)` says that a *fresh*
//! engine fed the instants after `after_seq` gives as its `k`-th result the
//! event `last_event_id + k`. No engine state is serialised: the checkpoint
//! is kept at an ingest sequence number where nothing is open, and after a
//! restart the engine is fed the logged instants from there; results it had
//! already stored get their old ids again and are dropped
//! ([`EventIds`]). Each query's [`Ledger`] keeps the sequence numbers (and,
//! for a time window, the event times) of the instants fed to it since its
//! checkpoint, and each result moves the checkpoint by the [`Rule`] of the
//! query's kind:
//!
//! - a transform gives one result per instant: the `k`-th result covers
//!   the `k`-th instant fed;
//! - a `COUNT n` window (of the instants or of a transform's outputs)
//!   covers `n` instants;
//! - a `TUMBLING` window `[end − span, end)`: the instants fed before the
//!   first one at or past `end` are in it, or were late (their count is in
//!   its event), so the checkpoint moves to just before that first one,
//!   from which a fresh engine is where the running one was; unless an
//!   instant before `end` was fed after it (out of order, within a `grace`
//!   or late), which a fresh engine might count again: then the checkpoint
//!   stays where it was (still valid, it only replays more) until a later
//!   window;
//! - a `HOPPING` window, whose windows overlap, and a query on a bridge or
//!   plugin engine (whose job or library may filter, or emit several
//!   results per instant) never move theirs: after a restart they are
//!   replayed from their registration. That is exactly
//!   once too, but their instants are kept in the log for as long as they
//!   run.
//!
//! A window closed by the wall clock (`grace`, issue 12 part 1) is not a
//! function of the instants alone: the checkpoint moves past every instant
//! fed before it was emitted, so a restart neither loses nor doubles those.
//! The replay runs on a held clock (`restore`): the instants after the
//! checkpoint fall in their windows by their datetimes, as before the
//! restart, whatever the downtime. But a record the clock had made late
//! (after its window was emitted on time), fed after the checkpoint, falls
//! in its window when replayed: that window is emitted again.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::http::StatusCode;

use crate::aggregate::Window;
use crate::engine::{EngineInfo, EngineKind};
use crate::spec::{QueryKind, QuerySpec};
use bytes::BytesMut;

use crate::store::{Assigned, Checkpoint, EventBatch, EventIds, PropertyPath, Store, StoreError};
use crate::vocab::{Event, Instant};

use super::fanout::Fanout;
use super::problem::Problem;
use super::table::PropertyKey;

/// How a query's results cover the instants fed to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// Each result covers this many instants (a transform: 1; `COUNT n`: n).
    Instants(u64),
    /// Each result is a tumbling window of `span` seconds, epoch-aligned.
    Tumbling { span: i64 },
    /// The checkpoint never moves.
    Never,
}

impl Rule {
    /// The rule of `spec` on an engine described by `info`.
    pub(crate) fn of(spec: &QuerySpec, info: &EngineInfo) -> Rule {
        // Only the in-process engine is known to compute its results with
        // mfstream's own operations and windower, one transform output per
        // instant: a job or a plugin may filter or emit several.
        if info.kind != EngineKind::Builtin {
            return Rule::Never;
        }
        match &spec.kind {
            QueryKind::Transform(_) => Rule::Instants(1),
            QueryKind::Aggregate { aggregate, .. } => match aggregate.window {
                Window::Count { size } => Rule::Instants(size.max(1)),
                Window::Tumbling { size, unit } => {
                    let span = size.saturating_mul(unit.seconds());
                    match i64::try_from(span) {
                        Ok(span) if span > 0 => Rule::Tumbling { span },
                        _ => Rule::Never,
                    }
                }
                _ => Rule::Never,
            },
        }
    }
}

/// What one query was fed since its checkpoint, and where its checkpoint
/// can move: shared by the ingest (which records what it feeds) and the
/// query's pump (which moves the checkpoint as results come).
#[derive(Debug)]
pub(crate) struct Ledger {
    inner: Mutex<LedgerInner>,
}

#[derive(Debug)]
struct LedgerInner {
    rule: Rule,
    /// The instants fed and not yet covered by a result: sequence number
    /// and event time (whole seconds; only a tumbling window reads it).
    fed: VecDeque<(u64, i64)>,
    /// The instants covered so far of the result being counted.
    counted: u64,
    /// The last instant covered by a result.
    covered: u64,
    /// The `after_seq` of the checkpoint last handed out.
    stored: u64,
    /// Whether the results stopped matching the rule (more results than
    /// instants): the checkpoint stays where it is from then on.
    lost: bool,
}

impl Ledger {
    pub(crate) fn new(rule: Rule, after_seq: u64) -> Ledger {
        Ledger {
            inner: Mutex::new(LedgerInner {
                rule,
                fed: VecDeque::new(),
                counted: 0,
                covered: after_seq,
                stored: after_seq,
                lost: false,
            }),
        }
    }

    fn inner(&self) -> MutexGuard<'_, LedgerInner> {
        // Every update is a few pushes and pops: a poisoned lock is usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records instants as fed, each with its sequence number in the log.
    pub(crate) fn fed<'a>(&self, instants: impl Iterator<Item = (u64, &'a Instant)>) {
        let mut inner = self.inner();
        match inner.rule {
            Rule::Never => {}
            Rule::Instants(_) => inner.fed.extend(instants.map(|(seq, _)| (seq, 0))),
            Rule::Tumbling { .. } => inner.fed.extend(instants.map(|(seq, i)| {
                // Every datetime was checked when it was ingested.
                let secs = crate::datetime::parse(&i.datetime).map_or(i64::MIN, |t| t.secs);
                (seq, secs)
            })),
        }
    }

    /// Moves past the instants a batch of results covers.
    pub(crate) fn results(&self, events: &[Event]) {
        let mut inner = self.inner();
        for event in events {
            inner.result(event);
        }
    }

    /// Moves past the instants the next result covers.
    #[cfg(test)]
    pub(crate) fn result(&self, event: &Event) {
        self.inner().result(event);
    }

    /// The checkpoint at the last result, whose id is `last_event_id`, if
    /// it moved since the last one handed out.
    pub(crate) fn checkpoint(&self, last_event_id: u64) -> Option<Checkpoint> {
        let mut inner = self.inner();
        if inner.covered <= inner.stored || inner.counted != 0 {
            return None;
        }
        inner.stored = inner.covered;
        Some(Checkpoint {
            after_seq: inner.covered,
            last_event_id,
            state: None,
        })
    }
}

impl LedgerInner {
    /// Moves past the instants the next result covers.
    fn result(&mut self, event: &Event) {
        if self.lost {
            return;
        }
        match self.rule {
            Rule::Never => {}
            Rule::Instants(n) => {
                while self.counted < n {
                    let Some((seq, _)) = self.fed.pop_front() else {
                        tracing::warn!("a result without its instants: the checkpoint stays");
                        self.lost = true;
                        return;
                    };
                    self.covered = seq;
                    self.counted += 1;
                }
                self.counted = 0;
            }
            Rule::Tumbling { span } => {
                let Event::Window(window) = event else {
                    self.lost = true;
                    return;
                };
                let Some(start) = crate::datetime::parse(&window.window_start) else {
                    self.lost = true;
                    return;
                };
                let end = start.secs.div_euclid(span).saturating_mul(span) + span;
                // The instants before the first at or past the window's end
                // are in it (or were late). If one before the end comes
                // after that first (out of order: within a grace, or late),
                // a fresh engine might count it in a window again: the
                // checkpoint then stays where it is until a later window.
                let open = self.fed.iter().position(|&(_, secs)| secs >= end);
                let clean = match open {
                    None => true,
                    Some(i) => self.fed.iter().skip(i).all(|&(_, secs)| secs >= end),
                };
                if clean {
                    let covered = open.unwrap_or(self.fed.len());
                    if let Some(&(seq, _)) = covered.checked_sub(1).and_then(|i| self.fed.get(i)) {
                        self.covered = seq;
                    }
                    self.fed.drain(..covered);
                }
            }
        }
    }
}

/// A query's results on their way to the store and then the fan-out.
#[derive(Debug)]
pub(crate) struct Keeper {
    pub(crate) store: Arc<Store>,
    pub(crate) ids: EventIds,
    pub(crate) ledger: Arc<Ledger>,
}

/// Whether an error of the store means the query was deleted meanwhile.
pub(crate) fn is_unknown(e: &StoreError) -> bool {
    matches!(e.kind(), crate::store::StoreErrorKind::UnknownQuery(_))
}

impl Keeper {
    /// Numbers a batch of results, drops those stored before a restart,
    /// stores the rest (with the checkpoint they reach), and only then hands
    /// them to the fan-out.
    pub(crate) async fn keep(
        &mut self,
        query: &str,
        batch: &[Event],
        fanout: &Fanout,
    ) -> Result<(), StoreError> {
        self.ledger.results(batch);
        let mut new = None;
        let mut frames = Vec::with_capacity(batch.len());
        let mut buf = BytesMut::with_capacity(batch.len() * 160);
        let mut json = Vec::with_capacity(128);
        for event in batch {
            let Assigned::New(id) = self.ids.assign() else {
                continue;
            };
            json.clear();
            event.write_json(&mut json);
            new.get_or_insert_with(|| EventBatch::new(id))
                .push(event.kind(), &json);
            frames.push(super::fanout::frame(&mut buf, id, event.kind(), &json));
        }
        let Some(new) = new else {
            return Ok(());
        };
        let checkpoint = self.ledger.checkpoint(self.ids.last());
        self.store.append_batch(query, new, checkpoint).await?;
        fanout.push_frames(frames);
        Ok(())
    }
}

/// The store's name for a property.
pub(crate) fn path(key: &PropertyKey) -> PropertyPath {
    PropertyPath {
        collection: key.collection.clone(),
        feature: key.feature.clone(),
        property: key.property.clone(),
    }
}

/// The server's name for a stored property.
pub(crate) fn key(path: &PropertyPath) -> PropertyKey {
    PropertyKey {
        collection: path.collection.clone(),
        feature: path.feature.clone(),
        property: path.property.clone(),
    }
}

/// 503 for a write the state store refused or could not make: nothing of
/// the request was acknowledged.
pub(crate) fn unavailable(what: &str, e: &StoreError) -> Problem {
    Problem::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "StateStoreUnavailable",
        format!("{what}: {e}"),
    )
}

/// A registration being recorded: if the request is dropped before the
/// query is in the table (the client went away while the store was
/// committing), the record is deleted again, so that no query the client
/// never saw starts after a restart.
#[derive(Debug)]
pub(crate) struct Recording {
    store: Arc<Store>,
    id: String,
    armed: bool,
}

impl Recording {
    pub(crate) fn new(store: Arc<Store>, id: String) -> Recording {
        Recording {
            store,
            id,
            armed: true,
        }
    }

    /// The query is in the table: its record stays.
    pub(crate) fn done(mut self) {
        self.armed = false;
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let store = self.store.clone();
        let id = std::mem::take(&mut self.id);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(e) = store.delete(&id).await
                    && !is_unknown(&e)
                {
                    tracing::warn!("cannot forget an abandoned registration: {e}");
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{Aggregation, InstantEvent, Value, WindowEvent};

    fn instant(secs: u64) -> Instant {
        Instant::number(
            format!("2026-01-01T00:{:02}:{:02}Z", secs / 60, secs % 60),
            1.0,
        )
    }

    fn result() -> Event {
        Event::Instant(InstantEvent {
            datetime: "t".into(),
            value: Value::Number(1.0),
            property: "p".into(),
            operation: "abs".into(),
        })
    }

    fn window(start_secs: u64) -> Event {
        Event::Window(WindowEvent {
            window_start: instant(start_secs).datetime,
            window_end: instant(start_secs).datetime,
            property: "p".into(),
            aggregation: Aggregation::Sum,
            value: Value::Number(1.0),
            count: 1,
            partial: false,
            late: 0,
        })
    }

    fn feed(ledger: &Ledger, seqs: &[u64], secs: &[u64]) {
        let instants: Vec<_> = secs.iter().map(|&s| instant(s)).collect();
        ledger.fed(seqs.iter().copied().zip(&instants));
    }

    #[test]
    fn a_transform_checkpoints_after_the_instant_of_each_result() {
        let ledger = Ledger::new(Rule::Instants(1), 10);
        // Sequence numbers of one property have gaps: others share the log.
        feed(&ledger, &[11, 14, 15], &[0, 1, 2]);
        assert_eq!(ledger.checkpoint(0), None, "no result yet");
        ledger.result(&result());
        ledger.result(&result());
        let cp = ledger.checkpoint(2).unwrap();
        assert_eq!((cp.after_seq, cp.last_event_id, cp.state), (14, 2, None));
        assert_eq!(ledger.checkpoint(2), None, "it did not move");
    }

    #[test]
    fn a_count_window_checkpoints_after_its_last_record_only() {
        let ledger = Ledger::new(Rule::Instants(3), 0);
        feed(&ledger, &[1, 2, 3, 4, 5], &[0, 1, 2, 3, 4]);
        ledger.result(&window(0));
        assert_eq!(ledger.checkpoint(1).unwrap().after_seq, 3);
    }

    #[test]
    fn a_tumbling_window_checkpoints_before_the_record_that_closed_it_unless_one_came_out_of_order()
    {
        // 10 s windows: records at 1, 4, 12 (closes [0, 10)), 3 (late), 15.
        let ledger = Ledger::new(Rule::Tumbling { span: 10 }, 0);
        feed(&ledger, &[1, 2, 3, 4, 5], &[1, 4, 12, 3, 15]);
        ledger.result(&window(1));
        // The record at 3 s came after the one at 12 s: replaying from 12 s
        // could count it again, so the checkpoint stays.
        assert_eq!(ledger.checkpoint(1), None);
        // [10, 20) is emitted when 21 s comes: everything before it is
        // below 20 s, so the checkpoint moves to just before it.
        feed(&ledger, &[6], &[21]);
        ledger.result(&window(12));
        assert_eq!(ledger.checkpoint(2).unwrap().after_seq, 5);
        // In order: just before the record that closed the window.
        let ledger = Ledger::new(Rule::Tumbling { span: 10 }, 0);
        feed(&ledger, &[1, 2, 3, 4], &[1, 4, 12, 15]);
        ledger.result(&window(1));
        assert_eq!(ledger.checkpoint(1).unwrap().after_seq, 2);
        // A window closed by the clock, before any record past its end.
        feed(&ledger, &[5], &[18]);
        ledger.result(&window(12));
        assert_eq!(ledger.checkpoint(2).unwrap().after_seq, 5);
    }

    #[test]
    fn results_without_their_instants_freeze_the_checkpoint() {
        let ledger = Ledger::new(Rule::Instants(1), 7);
        ledger.result(&result());
        feed(&ledger, &[8], &[0]);
        ledger.result(&result());
        assert_eq!(ledger.checkpoint(2), None);
    }

    #[test]
    fn hopping_windows_and_engines_of_jobs_never_move_their_checkpoint() {
        let ledger = Ledger::new(Rule::Never, 3);
        feed(&ledger, &[4, 5], &[0, 1]);
        ledger.result(&result());
        assert_eq!(ledger.checkpoint(1), None);
    }
}

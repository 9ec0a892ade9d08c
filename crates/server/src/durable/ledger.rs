//! How a query's results move its checkpoint: the [`Rule`] of its kind
//! and the [`Ledger`] of what it was fed (see the parent module's docs).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use mfstream_engine::{EngineInfo, EngineKind};
use mfstream_model::aggregate::resume::{self, Closed, StateError};
use mfstream_model::aggregate::{Grid, Window};
use mfstream_model::budget::{Part, StateBudget};
use mfstream_model::{Event, Instant};
use mfstream_model::{QueryKind, QuerySpec};
use mfstream_store::Checkpoint;

/// How a query's results cover the instants fed to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// Each result covers this many instants (a transform: 1; `COUNT n`: n).
    Instants(u64),
    /// Each result is a time window on this grid (`TUMBLING`: its hop is
    /// its span).
    Windows(Grid),
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
            // A position's measure needs the feature's earlier positions
            // (the previous one for a speed, all of them for a cumulative
            // length, the side of the fence it was on): replayed from its
            // registration after a restart, never from a checkpoint.
            QueryKind::Position(_) => Rule::Never,
            QueryKind::Aggregate { aggregate, .. } => match aggregate.window {
                Window::Count { size } => Rule::Instants(size.max(1)),
                _ => match aggregate.window.spans().and_then(|(s, h)| Grid::new(s, h)) {
                    Some(grid) => Rule::Windows(grid),
                    None => Rule::Never,
                },
            },
        }
    }

    /// Where a query of this rule resumes, read from its checkpoint's
    /// `state`: the end of its last window emitted, or why the state does
    /// not fit the query.
    pub(crate) fn resume_point(&self, state: Option<&[u8]>) -> Result<Option<i64>, StateError> {
        match (self, state) {
            (_, None) => Ok(None),
            (Rule::Windows(grid), Some(state)) => resume::decode(state, *grid).map(Some),
            (_, Some(_)) => Err(StateError::Unexpected),
        }
    }
}

/// What one query was fed since its checkpoint, and where its checkpoint
/// can move: shared by the ingest (which records what it feeds) and the
/// query's pump (which moves the checkpoint as results come).
#[derive(Debug)]
pub(crate) struct Ledger {
    inner: Mutex<LedgerInner>,
    /// The query's state budget, which what it remembers counts in.
    budget: Option<Arc<StateBudget>>,
}

/// What one instant remembered costs: its sequence number and event time.
const FED_BYTES: u64 = std::mem::size_of::<(u64, i64)>() as u64;

#[derive(Debug)]
struct LedgerInner {
    rule: Rule,
    /// The instants fed and not yet covered by a result: sequence number
    /// and event time (whole seconds; only a time window reads it).
    fed: VecDeque<(u64, i64)>,
    /// The instants covered so far of the result being counted.
    counted: u64,
    /// The last instant covered by a result.
    covered: u64,
    /// The results since the one that reached `covered` (and `resume`): the
    /// checkpoint's event is that many before the last.
    since: u64,
    /// A time window's resume point at `covered`: the end of the window
    /// emitted by that result (or the restored one).
    resume: Option<i64>,
    /// A time window: the end of the last window emitted, or a bound it is
    /// at or past when its records fit several.
    emitted: Option<i64>,
    /// The `after_seq` of the checkpoint last handed out.
    stored: u64,
    /// The records skipped (`onError: skip`) that the results so far
    /// carried, from the restored checkpoint's total on.
    skipped: u64,
    /// That total at the result that reached `covered`: the checkpoint's.
    /// The records a result carries were fed before it, so none of them is
    /// fed again after a restart from its checkpoint (a transform's or a
    /// `COUNT` window's result covers the records it carries).
    skipped_at: u64,
    /// Whether the results stopped matching the rule (more results than
    /// instants): the checkpoint stays where it is from then on.
    lost: bool,
    /// About the bytes of instants logged for it since the journal was
    /// last asked what it keeps for the query (`--max-query-log`).
    unchecked: u64,
}

impl Ledger {
    /// The ledger of a query whose checkpoint is at `after_seq`, with the
    /// resume point `resume` ([`Rule::resume_point`]) and no record skipped
    /// before it.
    pub(crate) fn new(rule: Rule, after_seq: u64, resume: Option<i64>) -> Ledger {
        Ledger::restored(rule, after_seq, resume, 0)
    }

    /// The ledger of a query resumed from a checkpoint whose skipped total
    /// is `skipped`.
    pub(crate) fn restored(
        rule: Rule,
        after_seq: u64,
        resume: Option<i64>,
        skipped: u64,
    ) -> Ledger {
        Ledger {
            inner: Mutex::new(LedgerInner {
                rule,
                fed: VecDeque::new(),
                counted: 0,
                covered: after_seq,
                since: 0,
                resume,
                emitted: resume,
                stored: after_seq,
                skipped,
                skipped_at: skipped,
                lost: false,
                unchecked: 0,
            }),
            budget: None,
        }
    }

    /// The same ledger, what it remembers counted in `budget`.
    pub(crate) fn with_budget(mut self, budget: Arc<StateBudget>) -> Ledger {
        self.budget = Some(budget);
        self
    }

    /// Publishes what it remembers to the budget.
    fn charge(&self, inner: &LedgerInner) {
        if let Some(budget) = &self.budget {
            budget.set(Part::Ledger, inner.fed.len() as u64 * FED_BYTES);
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
            Rule::Windows(_) => inner.fed.extend(instants.map(|(seq, i)| {
                // Every datetime was checked when it was ingested.
                let secs =
                    mfstream_model::datetime::parse(&i.datetime).map_or(i64::MIN, |t| t.secs);
                (seq, secs)
            })),
        }
        self.charge(&inner);
    }

    /// Counts about `bytes` more logged for the query; true (and the count
    /// starts again) once `every` bytes were since the last true.
    pub(crate) fn logged(&self, bytes: u64, every: u64) -> bool {
        let mut inner = self.inner();
        inner.unchecked = inner.unchecked.saturating_add(bytes);
        if inner.unchecked < every {
            return false;
        }
        inner.unchecked = 0;
        true
    }

    /// Moves past the instants a batch of results covers.
    pub(crate) fn results(&self, events: &[Event]) {
        let mut inner = self.inner();
        for event in events {
            inner.result(event);
        }
        self.charge(&inner);
    }

    /// Moves past the instants the next result covers.
    #[cfg(test)]
    pub(crate) fn result(&self, event: &Event) {
        self.inner().result(event);
    }

    /// The checkpoint at the last result that moved it, if it moved since
    /// the last one handed out; the last result's id is `last_event_id`.
    pub(crate) fn checkpoint(&self, last_event_id: u64) -> Option<Checkpoint> {
        let mut inner = self.inner();
        if inner.covered <= inner.stored || inner.counted != 0 {
            return None;
        }
        inner.stored = inner.covered;
        Some(Checkpoint {
            after_seq: inner.covered,
            last_event_id: last_event_id.saturating_sub(inner.since),
            state: inner.resume.map(resume::encode),
            skipped: inner.skipped_at,
        })
    }
}

impl LedgerInner {
    /// Moves past the instants the next result covers.
    fn result(&mut self, event: &Event) {
        self.skipped = self.skipped.saturating_add(event.skipped());
        if self.lost {
            return;
        }
        self.since += 1;
        match self.rule {
            Rule::Never => {}
            Rule::Instants(n) => {
                // A result also covers the records skipped right before it
                // (`onError: skip`), which it carries: on the local engine
                // (the only one with this rule) exactly those.
                let n = n.saturating_add(event.skipped());
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
                self.since = 0;
                self.skipped_at = self.skipped;
            }
            Rule::Windows(grid) => {
                let closed = match event {
                    Event::Window(window) => resume::closed(window, grid, self.emitted),
                    _ => None,
                };
                let end = match closed {
                    Some(Closed::Exactly(end)) => end,
                    // A later window will tell; till then the checkpoint
                    // stays where it was.
                    Some(Closed::AtLeast(end)) => {
                        self.emitted = Some(end);
                        return;
                    }
                    None => {
                        tracing::warn!("a result that is no window: the checkpoint stays");
                        self.lost = true;
                        return;
                    }
                };
                self.emitted = Some(end);
                // The instants before the first at or past the start of the
                // next window are in the windows emitted (or were late). If
                // one older than that start comes after that first (out of
                // order: within a grace, or late), a fresh engine might
                // count it in a window again: the checkpoint then stays
                // where it is until a later window.
                let start = grid.next_start(end);
                let open = self.fed.iter().position(|&(_, secs)| secs >= start);
                let clean = match open {
                    None => true,
                    Some(i) => self.fed.iter().skip(i).all(|&(_, secs)| secs >= start),
                };
                if clean {
                    let covered = open.unwrap_or(self.fed.len());
                    if let Some(&(seq, _)) = covered.checked_sub(1).and_then(|i| self.fed.get(i)) {
                        self.covered = seq;
                    }
                    self.fed.drain(..covered);
                    self.resume = Some(end);
                    self.since = 0;
                    self.skipped_at = self.skipped;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mfstream_model::{Aggregation, InstantEvent, Value, WindowEvent};

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
            skipped: 0,
        })
    }

    /// A window event whose first and last records arrived at these times.
    fn records(first: u64, last: u64) -> Event {
        Event::Window(WindowEvent {
            window_start: instant(first).datetime,
            window_end: instant(last).datetime,
            property: "p".into(),
            aggregation: Aggregation::Sum,
            value: Value::Number(1.0),
            count: 2,
            partial: false,
            late: 0,
            skipped: 0,
        })
    }

    fn window(start_secs: u64) -> Event {
        records(start_secs, start_secs)
    }

    /// The checkpoint state of a window resumed `secs` into 2026.
    fn resumed(secs: i64) -> Option<Vec<u8>> {
        const NEW_YEAR_2026: i64 = 1_767_225_600;
        Some(resume::encode(NEW_YEAR_2026 + secs))
    }

    fn feed(ledger: &Ledger, seqs: &[u64], secs: &[u64]) {
        let instants: Vec<_> = secs.iter().map(|&s| instant(s)).collect();
        ledger.fed(seqs.iter().copied().zip(&instants));
    }

    const fn grid(span: i64, hop: i64) -> Grid {
        match Grid::new(span, hop) {
            Some(grid) => grid,
            None => panic!("the tests' grids hop within their spans"),
        }
    }

    const TUMBLING_10: Rule = Rule::Windows(grid(10, 10));
    /// 10 s windows every 5 s.
    const HOPPING_10_5: Rule = Rule::Windows(grid(10, 5));

    #[test]
    fn what_a_ledger_remembers_counts_in_its_querys_budget() {
        let budget = Arc::new(StateBudget::new(1 << 20));
        let ledger = Ledger::new(Rule::Instants(2), 0, None).with_budget(budget.clone());
        feed(&ledger, &[1, 2, 3], &[0, 1, 2]);
        assert_eq!(budget.used(), 3 * FED_BYTES);
        ledger.results(&[result()]);
        assert_eq!(budget.used(), FED_BYTES, "two covered by the result");
    }

    #[test]
    fn a_transform_checkpoints_after_the_instant_of_each_result() {
        let ledger = Ledger::new(Rule::Instants(1), 10, None);
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
    fn a_result_after_skipped_records_covers_them_too() {
        // ln over 1, -1, 0, 1: the second result carries 2 skipped records.
        let ledger = Ledger::new(Rule::Instants(1), 0, None);
        feed(&ledger, &[1, 2, 3, 4], &[0, 1, 2, 3]);
        ledger.result(&result());
        let mut after = result();
        after.add_skipped(2);
        ledger.result(&after);
        assert_eq!(ledger.checkpoint(2).unwrap().after_seq, 4);
        // A COUNT 2 window after one whose SUM overflowed (its 2 records
        // skipped) covers 4.
        let ledger = Ledger::new(Rule::Instants(2), 0, None);
        feed(&ledger, &[1, 2, 3, 4, 5], &[0, 1, 2, 3, 4]);
        let mut second = window(2);
        second.add_skipped(2);
        ledger.result(&second);
        assert_eq!(ledger.checkpoint(1).unwrap().after_seq, 4);
    }

    #[test]
    fn a_checkpoint_keeps_the_skipped_total_its_results_carried_and_no_later_one() {
        // Restored with 5 skipped; ln over 1, -1, 0, 2, -3: the second
        // result carries 2, the last record is skipped after every result.
        let ledger = Ledger::restored(Rule::Instants(1), 0, None, 5);
        feed(&ledger, &[1, 2, 3, 4, 5], &[0, 1, 2, 3, 4]);
        ledger.result(&result());
        assert_eq!(ledger.checkpoint(1).unwrap().skipped, 5);
        let mut after = result();
        after.add_skipped(2);
        ledger.result(&after);
        let cp = ledger.checkpoint(2).unwrap();
        assert_eq!((cp.after_seq, cp.skipped), (4, 7));
        // A time window: a result that does not move the checkpoint does
        // not move its total either.
        let ledger = Ledger::new(TUMBLING_10, 0, None);
        feed(&ledger, &[1, 2, 3, 4], &[1, 12, 3, 15]);
        let mut first = window(1);
        first.add_skipped(1);
        ledger.result(&first);
        assert_eq!(ledger.checkpoint(1), None, "3 s came after 12 s");
        feed(&ledger, &[5], &[21]);
        let mut second = window(12);
        second.add_skipped(2);
        ledger.result(&second);
        assert_eq!(ledger.checkpoint(2).unwrap().skipped, 3);
    }

    #[test]
    fn a_count_window_checkpoints_after_its_last_record_only() {
        let ledger = Ledger::new(Rule::Instants(3), 0, None);
        feed(&ledger, &[1, 2, 3, 4, 5], &[0, 1, 2, 3, 4]);
        ledger.result(&window(0));
        assert_eq!(ledger.checkpoint(1).unwrap().after_seq, 3);
    }

    #[test]
    fn a_tumbling_window_checkpoints_before_the_record_that_closed_it_unless_one_came_out_of_order()
    {
        // 10 s windows: records at 1, 4, 12 (closes [0, 10)), 3 (late), 15.
        let ledger = Ledger::new(TUMBLING_10, 0, None);
        feed(&ledger, &[1, 2, 3, 4, 5], &[1, 4, 12, 3, 15]);
        ledger.result(&window(1));
        // The record at 3 s came after the one at 12 s: replaying from 12 s
        // could count it again, so the checkpoint stays.
        assert_eq!(ledger.checkpoint(1), None);
        // [10, 20) is emitted when 21 s comes: everything before it is
        // below 20 s, so the checkpoint moves to just before it.
        feed(&ledger, &[6], &[21]);
        ledger.result(&window(12));
        let cp = ledger.checkpoint(2).unwrap();
        assert_eq!((cp.after_seq, cp.state), (5, resumed(20)));
        // In order: just before the record that closed the window.
        let ledger = Ledger::new(TUMBLING_10, 0, None);
        feed(&ledger, &[1, 2, 3, 4], &[1, 4, 12, 15]);
        ledger.result(&window(1));
        assert_eq!(ledger.checkpoint(1).unwrap().after_seq, 2);
        // A window closed by the clock, before any record past its end.
        feed(&ledger, &[5], &[18]);
        ledger.result(&window(12));
        assert_eq!(ledger.checkpoint(2).unwrap().after_seq, 5);
    }

    #[test]
    fn a_checkpoint_names_the_event_of_the_window_that_moved_it_not_a_later_one_of_its_batch() {
        // One batch: [0, 10) (clean, at 12 s), then [10, 20) (at 25 s, but
        // 13 s came after 25 s: not clean).
        let ledger = Ledger::new(TUMBLING_10, 0, None);
        feed(&ledger, &[1, 2, 3, 4, 5], &[1, 12, 25, 13, 30]);
        ledger.results(&[window(1), window(12)]);
        let cp = ledger.checkpoint(2).unwrap();
        // A fresh engine fed from 12 s on gives [10, 20) again: as event 2.
        assert_eq!((cp.after_seq, cp.last_event_id), (1, 1));
        assert_eq!(cp.state, resumed(10));
    }

    #[test]
    fn a_hopping_window_checkpoints_before_the_first_record_of_the_next_window() {
        // 10 s every 5 s, in order: 1, 4, 7 (closes [-5, 5)), 11 (closes
        // [0, 10)), 13, 16 (closes [5, 15)), 22 (closes [10, 20)).
        let ledger = Ledger::new(HOPPING_10_5, 0, None);
        feed(&ledger, &[1, 2, 3, 4, 5, 6, 7], &[1, 4, 7, 11, 13, 16, 22]);
        // Records at 1 and 4 s are in [-5, 5) and [0, 10): not yet known
        // which this is, so the checkpoint stays.
        ledger.result(&records(1, 4));
        assert_eq!(ledger.checkpoint(1), None);
        // 1 and 7 s fit [0, 10) only. The next window starts at 5 s: the
        // instants before 7 s are in no window to come.
        ledger.result(&records(1, 7));
        let cp = ledger.checkpoint(2).unwrap();
        assert_eq!((cp.after_seq, cp.last_event_id), (2, 2));
        assert_eq!(cp.state, resumed(10));
        ledger.result(&records(7, 13));
        let cp = ledger.checkpoint(3).unwrap();
        assert_eq!(
            (cp.after_seq, cp.last_event_id, cp.state),
            (3, 3, resumed(15))
        );
        ledger.result(&records(11, 16));
        let cp = ledger.checkpoint(4).unwrap();
        assert_eq!(
            (cp.after_seq, cp.last_event_id, cp.state),
            (5, 4, resumed(20))
        );
    }

    #[test]
    fn a_hopping_window_with_a_record_out_of_order_within_the_grace_checkpoints_at_a_later_window()
    {
        // 10 s every 5 s, grace 5 s: 1, 12 (closes [-5, 5)), 3 (within the
        // grace: into [0, 10)), 16 (closes [0, 10)), 21, 26 (closes [10, 20)).
        let ledger = Ledger::new(HOPPING_10_5, 0, None);
        feed(&ledger, &[1, 2, 3, 4, 5, 6], &[1, 12, 3, 16, 21, 26]);
        ledger.result(&records(1, 1));
        // [0, 10): the next window starts at 5 s, but 3 s came after 12 s.
        ledger.result(&records(1, 3));
        assert_eq!(ledger.checkpoint(2), None);
        // [5, 15) holds 12 s alone, which is in [10, 20) too.
        ledger.result(&records(12, 12));
        assert_eq!(ledger.checkpoint(3), None);
        // [10, 20): everything from 16 s on is at or past 15 s.
        ledger.result(&records(12, 16));
        let cp = ledger.checkpoint(4).unwrap();
        assert_eq!(
            (cp.after_seq, cp.last_event_id, cp.state),
            (3, 4, resumed(20))
        );
    }

    #[test]
    fn a_hopping_window_closed_by_the_clock_checkpoints_past_every_instant_fed() {
        let ledger = Ledger::new(HOPPING_10_5, 0, None);
        feed(&ledger, &[1, 2], &[1, 4]);
        // The clock closes [-5, 5), then [0, 10): no record comes after.
        ledger.results(&[records(1, 4), records(1, 4)]);
        let cp = ledger.checkpoint(2).unwrap();
        assert_eq!(
            (cp.after_seq, cp.last_event_id, cp.state),
            (2, 2, resumed(10))
        );
    }

    #[test]
    fn a_restored_hopping_window_knows_where_it_resumed() {
        const NEW_YEAR_2026: i64 = 1_767_225_600;
        let ledger = Ledger::new(HOPPING_10_5, 9, Some(NEW_YEAR_2026 + 10));
        // 7 and 12 s are in [5, 15) and [10, 20); after [0, 10), the first.
        feed(&ledger, &[10, 11, 12], &[7, 12, 16]);
        ledger.result(&records(7, 12));
        let cp = ledger.checkpoint(5).unwrap();
        assert_eq!(
            (cp.after_seq, cp.last_event_id, cp.state),
            (10, 5, resumed(15))
        );
    }

    #[test]
    fn the_rule_of_a_time_window_on_the_local_engine_reads_its_resume_point_and_others_refuse_one()
    {
        use mfstream_engine::StreamEngine;
        let local = mfstream_engine::LocalEngine::new().describe();
        let spec = |window: &str| {
            let body = format!(r#"{{"aggregation":"SUM","window":{window}}}"#);
            mfstream_model::Registration::from_json(&body)
                .unwrap()
                .into_spec_on("speed", None)
                .unwrap()
        };
        let hopping =
            spec(r#"{"type":"HOPPING","size":1,"unit":"MINUTES","hop":20,"hopUnit":"SECONDS"}"#);
        let rule = Rule::of(&hopping, &local);
        assert_eq!(rule, Rule::Windows(grid(60, 20)));
        assert_eq!(rule.resume_point(None), Ok(None));
        assert_eq!(rule.resume_point(Some(&resume::encode(40))), Ok(Some(40)));
        let e = rule.resume_point(Some(&resume::encode(50))).unwrap_err();
        assert!(matches!(e, StateError::NotAnEnd { end: 50, .. }), "{e}");
        let count = Rule::of(&spec(r#"{"type":"COUNT","size":3}"#), &local);
        let e = count.resume_point(Some(&resume::encode(40))).unwrap_err();
        assert_eq!(e, StateError::Unexpected);
        assert!(e.to_string().contains("only a time window"), "{e}");
    }

    #[test]
    fn results_without_their_instants_freeze_the_checkpoint() {
        let ledger = Ledger::new(Rule::Instants(1), 7, None);
        ledger.result(&result());
        feed(&ledger, &[8], &[0]);
        ledger.result(&result());
        assert_eq!(ledger.checkpoint(2), None);
    }

    #[test]
    fn engines_of_jobs_never_move_their_checkpoint() {
        let ledger = Ledger::new(Rule::Never, 3, None);
        feed(&ledger, &[4, 5], &[0, 1]);
        ledger.result(&result());
        assert_eq!(ledger.checkpoint(1), None);
    }
}

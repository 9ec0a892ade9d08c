//! The windower: turns a stream of instants into the events of a windowed
//! aggregate. Engine-neutral: the `local` engine feeds it instants, a bridge
//! host feeds it a value-framing job's outputs.
//!
//! # Semantics (the Go tier's)
//!
//! - `COUNT n`: a result every `n` records. Datetimes are carried, not read.
//! - `TUMBLING size unit`: epoch-aligned windows `[end − span, end)`; it is
//!   the `HOPPING` window whose hop is its span.
//! - `HOPPING size unit hop hopUnit`: results at the epoch-aligned multiples
//!   `b` of the hop, each over the records in `[b − span, b)`; windows
//!   without records are not emitted. Records are kept as partial
//!   aggregates in buckets of `gcd(span, hop)` seconds, combined at each
//!   boundary, and evicted once no window still to come holds them.
//! - **The watermark**: event time less the grace (the aggregate's
//!   allowed lateness, 0 by default). Event time is the latest record's
//!   datetime and, for a live query, the wall clock too
//!   ([`Windower::advance`]). A window `[start, end)` is emitted once the
//!   watermark reaches `end`: with grace 0 and no clock, when a record at or
//!   past `end` arrives (the Go tier's rule). [`Windower::deadline`] says when
//!   the clock will close the next window that holds records.
//! - Event time is the instants' datetimes (see [`crate::datetime`] for the
//!   forms accepted); an unparsable one fails the query, naming the record.
//! - `windowStart` and `windowEnd` are the datetimes of the window's first
//!   and last record, in arrival order, verbatim.
//!
//! # Late records
//!
//! A record every window of which ends at or before the watermark (they
//! have been emitted) is skipped and counted in the `late` field of the
//! next event. A record out of order but still inside a window to come is
//! aggregated as usual. So state never grows for late data, and no result
//! already emitted is ever revised.
//!
//! # Aggregates with no finite result
//!
//! A window whose aggregate is not finite (a `SUM` overflowing; an `AVG`
//! of finite values is finite, taken from a scaled sum when its sum is not) is
//! handled as the query's `onError` says ([`Windower::with_on_error`]):
//! under `skip` (the default) the window emits nothing and its records are
//! skipped: the next event carries their number in its `skipped`, as it
//! carries `late`, with the records skipped before the windower
//! ([`Windower::skip`]: a transform with no result); under `fail` the query
//! fails, naming the window's first and last records. The caller counts
//! them in the query's total with [`Windower::take_skipped`].
//!
//! # Bounds
//!
//! A time window keeps at most [`MAX_WINDOW_BUCKETS`] buckets, grace
//! included (`(span + grace) / gcd(span, hop)`; [`Windower::new`] refuses
//! more), and a record falls in at most [`MAX_WINDOWS_PER_RECORD`] windows
//! (`span / hop`), so one push or advance emits at most that many events
//! per record it closes windows of, however far the record is from the
//! one before: boundaries whose windows hold no record are skipped, not
//! computed. Callers deliver the events in bounded chunks (`plan::window`).
//! Combining a window's buckets at a boundary costs a few additions per
//! non-empty bucket; for `COUNT_DISTINCT`, a `HOPPING` window reads an
//! index of its buckets' distinct texts (kept as records come and buckets
//! go) when every bucket held is in the window, else counts the union of
//! their sets through references, without copying them.
//!
//! The bytes the windows hold are kept as records come and windows close
//! ([`Windower::state_bytes`]); with a budget ([`Windower::with_budget`])
//! a record that takes the query over it is an error naming the limit.
//!
//! [`MAX_WINDOW_BUCKETS`]: super::MAX_WINDOW_BUCKETS
//! [`MAX_WINDOWS_PER_RECORD`]: super::MAX_WINDOWS_PER_RECORD
//!
//! # End of source
//!
//! [`Windower::finish`] emits the windows still open as partial events
//! (`"partial": true`) unless the aggregate says `emit_partial: false`:
//! the records of a `COUNT` window not yet full, and for a time window each
//! boundary still to come whose window holds records.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::acc::Acc;
use super::{Aggregate, Grid, Window};
use crate::budget::{ENTRY_OVERHEAD, Part, StateBudget};
use crate::datetime;
use crate::geo::Crs;
use crate::on_error::OnError;
use crate::spec_error::SpecError;
use crate::vocab::{Aggregation, Event, Instant, PropertyType, Value, WindowEvent};

mod error;

pub use self::error::WindowError;

/// Computes a windowed aggregate over instants pushed in arrival order.
///
/// ```
/// use mfstream_model::aggregate::{Aggregate, TimeUnit, Window, Windower};
/// use mfstream_model::{Aggregation, Instant};
///
/// let window = Window::Tumbling { size: 2, unit: TimeUnit::Seconds };
/// let aggregate = Aggregate::new(Aggregation::Avg, window);
/// let mut windower = Windower::new(&aggregate, "speed".into()).unwrap();
/// let mut events = Vec::new();
/// for (second, v) in [(0, 2.0), (1, 4.0), (2, 9.0)] {
///     let instant = Instant::number(format!("2026-01-01T00:00:0{second}Z"), v);
///     windower.push(instant, &mut events).unwrap();
/// }
/// windower.finish(&mut events).unwrap(); // the open window [2 s, 4 s), as partial
/// assert_eq!(
///     events[0].to_json(),
///     r#"{"windowStart":"2026-01-01T00:00:00Z","windowEnd":"2026-01-01T00:00:01Z","property":"speed","aggregation":"AVG","value":3,"count":2}"#
/// );
/// assert!(events[1].to_json().ends_with(r#""value":9,"count":1,"partial":true}"#));
/// ```
#[derive(Debug)]
pub struct Windower {
    emitter: Emitter,
    expect: Expect,
    emit_partial: bool,
    /// Records pushed so far: the arrival number of the next one.
    seq: u64,
    mode: Mode,
    /// The query's state budget, which its windows count in
    /// ([`Windower::with_budget`]).
    budget: Option<Arc<StateBudget>>,
    /// For an aggregate of positions (`EXTENT`, …): their reference system.
    crs: Option<Crs>,
    /// For an aggregate of positions over a `HOPPING` window: the last
    /// position added, whose segment to the next joins their buckets.
    last_position: Option<(i64, crate::geo::Point)>,
}

/// What a bucket costs beyond its heap: its slot in the deque.
const BUCKET_BYTES: u64 = std::mem::size_of::<(i64, Acc)>() as u64;

/// What every event of a windower carries, and the late count it reports.
#[derive(Debug)]
struct Emitter {
    aggregation: Aggregation,
    property: Arc<str>,
    /// Records skipped as late since the last event.
    late: u64,
    /// What a window with no finite aggregate does.
    on_error: OnError,
    /// Records skipped since the last event (before the windower, or in a
    /// window with no finite aggregate): the next event carries them.
    skipped: u64,
    /// Records skipped, not yet taken by [`Windower::take_skipped`].
    untaken: u64,
}

#[derive(Debug)]
enum Mode {
    Count {
        size: u64,
        acc: Acc,
    },
    /// `TUMBLING` is the case `hop == span`: one bucket per window.
    Time(TimeWindows),
}

/// The state of a time window (`TUMBLING` or `HOPPING`).
#[derive(Debug)]
struct TimeWindows {
    /// The window boundaries; its grain is the bucket width.
    grid: Grid,
    /// Allowed lateness, in seconds.
    grace: i64,
    /// Event time less the grace: every window ending at or before it has
    /// been emitted (or held no record). `None` until a record or the
    /// clock has set it.
    watermark: Option<i64>,
    /// The next boundary to emit: the first after the watermark, or
    /// earlier while boundaries up to the watermark are being emitted.
    next: i64,
    /// Non-empty buckets by start (seconds), in time order, each at or
    /// after `next − span`.
    buckets: VecDeque<(i64, Acc)>,
    /// The heap the buckets hold: [`BUCKET_BYTES`] and the `bytes` of each,
    /// and the distinct index's.
    bytes: u64,
    /// `COUNT_DISTINCT`: the distinct texts of every bucket held.
    distinct: Option<Distinct>,
}

/// The distinct texts of every bucket of a `COUNT_DISTINCT` `HOPPING`
/// window, each with the number of buckets holding it: when every bucket held is
/// in the window being emitted (records in order, the usual case), the
/// window's count is this index's size, read at once instead of a union of
/// the buckets' sets per window (a record far ahead may close up to
/// `MAX_WINDOWS_PER_RECORD` windows, each over as many buckets). Kept as
/// records come and buckets go: one look-up per record and per text
/// evicted.
#[derive(Debug, Default)]
struct Distinct {
    buckets: HashMap<String, u32>,
}

impl Distinct {
    /// A bucket took `text` for the first time; the bytes the index grew.
    fn add(&mut self, text: &str) -> u64 {
        match self.buckets.get_mut(text) {
            Some(n) => {
                *n += 1;
                0
            }
            None => {
                self.buckets.insert(text.to_owned(), 1);
                text.len() as u64 + ENTRY_OVERHEAD
            }
        }
    }

    /// A bucket holding `text` went; the bytes the index shrank.
    fn remove(&mut self, text: &str) -> u64 {
        match self.buckets.get_mut(text) {
            Some(n) if *n > 1 => {
                *n -= 1;
                0
            }
            Some(_) => match self.buckets.remove_entry(text) {
                Some((key, _)) => key.capacity() as u64 + ENTRY_OVERHEAD,
                None => 0,
            },
            None => 0,
        }
    }

    /// The distinct texts of the window ending at `boundary`, when every
    /// bucket held is in it.
    fn count_before(&self, boundary: i64, buckets: &VecDeque<(i64, Acc)>) -> Option<usize> {
        buckets
            .back()
            .is_none_or(|(start, _)| *start < boundary)
            .then_some(self.buckets.len())
    }
}

/// The type of value a windower takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Any,
    Number,
    Text,
    Bool,
    Point,
}

impl Windower {
    /// A windower for `aggregate`, its events naming `property`.
    ///
    /// It takes the values the aggregation is defined for (numbers for
    /// `SUM`, texts for `COUNT_DISTINCT`, …; anything for `COUNT`) until
    /// [`with_property_type`](Windower::with_property_type) says more.
    ///
    /// The window is checked first ([`Window::validate`]): in particular a
    /// `HOPPING` window keeps at most [`MAX_WINDOW_BUCKETS`] buckets, which
    /// bounds both the state and the events one record can emit.
    ///
    /// [`MAX_WINDOW_BUCKETS`]: super::MAX_WINDOW_BUCKETS
    pub fn new(aggregate: &Aggregate, property: Arc<str>) -> Result<Windower, SpecError> {
        let expect = match aggregate.aggregation {
            Aggregation::Count => Expect::Any,
            Aggregation::Sum | Aggregation::Avg | Aggregation::Min | Aggregation::Max => {
                Expect::Number
            }
            Aggregation::CountDistinct => Expect::Text,
            Aggregation::Any
            | Aggregation::All
            | Aggregation::CountTrue
            | Aggregation::CountFalse => Expect::Bool,
            Aggregation::Extent
            | Aggregation::Centroid
            | Aggregation::Length
            | Aggregation::AvgSpeed
            | Aggregation::MaxSpeed => Expect::Point,
        };
        aggregate.validate()?;
        let mode = match (&aggregate.window, aggregate.window.grid()) {
            (Window::Count { size }, _) => Mode::Count {
                size: *size,
                acc: Acc::default(),
            },
            (_, grid) => {
                // Only a COUNT window has no grid.
                let grid = grid.unwrap_or(Grid::clamped(1, 1));
                Mode::Time(TimeWindows {
                    grid,
                    // Validated: at most a day.
                    grace: aggregate.grace.min(super::MAX_GRACE) as i64,
                    watermark: None,
                    next: 0,
                    buckets: VecDeque::new(),
                    bytes: 0,
                    // A TUMBLING window is one bucket: its set is its count.
                    distinct: (aggregate.aggregation == Aggregation::CountDistinct
                        && grid.hop() < grid.span())
                    .then(Distinct::default),
                })
            }
        };
        Ok(Windower {
            emitter: Emitter {
                aggregation: aggregate.aggregation,
                property,
                late: 0,
                on_error: OnError::Skip,
                skipped: 0,
                untaken: 0,
            },
            expect,
            emit_partial: aggregate.emit_partial,
            seq: 0,
            mode,
            budget: None,
            crs: None,
            last_position: None,
        })
    }

    /// Counts the windows' state in `budget` (the query's, shared with its
    /// other parts): a record that takes the query over it is an error
    /// naming the limit ([`StateBudget::exceeded`]), which fails the query.
    pub fn with_budget(mut self, budget: Option<Arc<StateBudget>>) -> Windower {
        self.budget = budget;
        self
    }

    /// The same windower without the distinct index of a time window: each
    /// `COUNT_DISTINCT` window is then a union of its buckets' sets (the
    /// reference the index is tested against).
    #[cfg(test)]
    fn without_distinct_index(mut self) -> Windower {
        if let Mode::Time(time) = &mut self.mode {
            time.distinct = None;
        }
        self
    }

    /// The heap the open windows hold, in bytes, as [`StateBudget`]
    /// estimates it (kept as records come and windows close, not walked).
    pub fn state_bytes(&self) -> u64 {
        match &self.mode {
            Mode::Count { acc, .. } => acc.bytes,
            Mode::Time(time) => time.bytes,
        }
    }

    /// Publishes the windows' bytes to the budget; an error when the query
    /// holds more than it allows.
    fn charge(&self) -> Result<(), WindowError> {
        let Some(budget) = &self.budget else {
            return Ok(());
        };
        budget.set(Part::Windows, self.state_bytes());
        match budget.exceeded() {
            Some(reason) => Err(WindowError::OverBudget(reason)),
            None => Ok(()),
        }
    }

    /// Handles a window whose aggregate is not finite as `on_error` says
    /// (skipped by default).
    pub fn with_on_error(mut self, on_error: OnError) -> Windower {
        self.emitter.on_error = on_error;
        self
    }

    /// Counts `n` records skipped before the windower (a transform found
    /// no result for them, `onError: skip`): the next event carries them.
    pub fn skip(&mut self, n: u64) {
        self.emitter.skipped += n;
        self.emitter.untaken += n;
    }

    /// The records skipped since the last call (by [`skip`](Windower::skip),
    /// or in windows with no finite aggregate), for the query's `skipped`
    /// total.
    pub fn take_skipped(&mut self) -> u64 {
        std::mem::take(&mut self.emitter.untaken)
    }

    /// Takes values of type `t` only: numbers for `TReal` and `TInteger`,
    /// texts for `TText`, booleans for `TBoolean`.
    pub fn with_property_type(mut self, t: PropertyType) -> Windower {
        self.expect = match t {
            PropertyType::TReal | PropertyType::TInteger => Expect::Number,
            PropertyType::TText => Expect::Text,
            PropertyType::TBoolean => Expect::Bool,
            PropertyType::TGeogPoint | PropertyType::TGeomPoint => Expect::Point,
        };
        self
    }

    /// Resumes a time window after a restart: every window ending at or
    /// before `end` (a multiple of the hop, in seconds since the epoch) was
    /// emitted before it, so none is emitted again, and a record whose every
    /// window ends by then is late. The watermark starts at `end`, as the
    /// running windower's had passed it. A `COUNT` window is unchanged.
    /// See [`resume`](super::resume) for what to feed it.
    pub fn resumed_after(mut self, end: i64) -> Windower {
        if let Mode::Time(time) = &mut self.mode {
            time.watermark = Some(end);
            time.next = time.grid.end_after(end);
        }
        self
    }

    /// Adds one record; the events of the windows it closes are pushed onto
    /// `out`.
    ///
    /// An error fails the query: the reason names the record (a datetime
    /// that does not parse, a value of the wrong type).
    pub fn push(&mut self, instant: Instant, out: &mut Vec<Event>) -> Result<(), WindowError> {
        self.check_value(&instant)?;
        let seq = self.seq;
        self.seq += 1;
        let aggregation = self.emitter.aggregation;
        let crs = self.crs.unwrap_or(Crs::Geodetic);
        let mut position = None;
        // An aggregate of positions measures them in time.
        let positions = aggregation.of_positions().is_some();
        let secs = match self.mode {
            Mode::Count { .. } if !positions => 0,
            _ => match datetime::parse(&instant.datetime) {
                Some(t) if positions => {
                    let Value::Point(p) = instant.value else {
                        return Err(WindowError::WrongType {
                            datetime: instant.datetime.clone(),
                            value: instant.value.clone(),
                            aggregation,
                            wanted: "positions",
                        });
                    };
                    position = Some((t.micros(), crate::geo::Point::new(p.x, p.y)));
                    t.secs
                }
                Some(t) => t.secs,
                None => {
                    return Err(WindowError::Datetime {
                        datetime: instant.datetime,
                        value: instant.value,
                    });
                }
            },
        };
        let emitter = &mut self.emitter;
        match &mut self.mode {
            Mode::Count { size, acc } => {
                if let Some((t, p)) = position {
                    acc.add_position(crs, t, p, None);
                }
                acc.add(aggregation, seq, instant.datetime, instant.value);
                if acc.count >= *size {
                    out.extend(emitter.event(acc, false)?);
                }
            }
            Mode::Time(time) => {
                // Every window holding the record has been emitted. (The
                // last one ends after `secs`: only an older record can be
                // late, which spares the division for records in order.)
                if time
                    .watermark
                    .is_some_and(|w| secs < w && time.last_end(secs) <= w)
                {
                    emitter.late += 1;
                    return Ok(());
                }
                time.advance(secs - time.grace, emitter, out)?;
                // Most records fall in the newest bucket.
                let start = match time.buckets.back() {
                    Some((start, _)) if (*start..*start + time.grid.grain()).contains(&secs) => {
                        *start
                    }
                    _ => time.grid.bucket(secs),
                };
                let (acc, made) = bucket(&mut time.buckets, start);
                let before = acc.bytes;
                if let (Some(distinct), Value::Text(text)) = (&mut time.distinct, &instant.value)
                    && !acc.has_text(text)
                {
                    time.bytes += distinct.add(text);
                }
                if let Some((t, p)) = position {
                    // A hopping window's buckets join at the segment
                    // between them (a tumbling window is one bucket).
                    let hopping = time.grid.hop() < time.grid.span();
                    let before = self.last_position.filter(|_| hopping);
                    acc.add_position(crs, t, p, before);
                    self.last_position = Some((t, p));
                }
                acc.add(aggregation, seq, instant.datetime, instant.value);
                let grown = acc.bytes;
                time.bytes = time.bytes - before + grown + if made { BUCKET_BYTES } else { 0 };
            }
        }
        self.charge()
    }

    /// Advances event time on the wall clock of a live query: `now` is the
    /// clock in seconds since the epoch; the watermark becomes `now − grace`
    /// (when later than the one the records set), and the events of the
    /// windows ending at or before it are pushed onto `out`, as a record at
    /// that time would have closed them, without adding one. From then on a
    /// record whose every window ends by the watermark is late. A `COUNT`
    /// window ignores the clock.
    ///
    /// An error fails the query: a window that cannot be written.
    pub fn advance(&mut self, now: i64, out: &mut Vec<Event>) -> Result<(), WindowError> {
        match &mut self.mode {
            Mode::Count { .. } => Ok(()),
            Mode::Time(time) => {
                let advanced = time.advance(now - time.grace, &mut self.emitter, out);
                // Windows closed: less to count.
                if let Some(budget) = &self.budget {
                    budget.set(Part::Windows, time.bytes);
                }
                advanced
            }
        }
    }

    /// When the wall clock closes the next window that holds records: in
    /// seconds since the epoch, the window's end plus the grace; `None`
    /// when no window holds records (or for a `COUNT` window). A live query
    /// sleeps until then and calls [`advance`](Windower::advance); records
    /// that arrive meanwhile may move it.
    pub fn deadline(&self) -> Option<i64> {
        match &self.mode {
            Mode::Count { .. } => None,
            Mode::Time(time) => {
                let (front, _) = time.buckets.front()?;
                let first = time.grid.end_after(*front);
                Some(first.max(time.next) + time.grace)
            }
        }
    }

    /// The end of the source: the windows still open are pushed onto `out`
    /// as partial events, unless the aggregate says not to emit them.
    ///
    /// An error fails the query: a window whose `SUM` overflows
    /// cannot be written (the windows before it are in `out`).
    pub fn finish(&mut self, out: &mut Vec<Event>) -> Result<(), WindowError> {
        let emit = self.emit_partial;
        let emitter = &mut self.emitter;
        match &mut self.mode {
            Mode::Count { acc, .. } => {
                let mut open = std::mem::take(acc);
                if emit && open.count > 0 {
                    out.extend(emitter.event(&mut open, true)?);
                }
            }
            Mode::Time(time) => {
                while emit && !time.buckets.is_empty() {
                    let boundary = time.first_boundary();
                    let emitted = time.emit(emitter, boundary, true, out);
                    time.next = boundary + time.grid.hop();
                    time.evict(time.next - time.grid.span());
                    emitted?;
                }
                time.buckets.clear();
                if let Some(distinct) = &mut time.distinct {
                    *distinct = Distinct::default();
                }
                time.bytes = 0;
            }
        }
        if let Some(budget) = &self.budget {
            budget.set(Part::Windows, 0);
        }
        Ok(())
    }

    /// Measures positions in `crs` (for `EXTENT`, `LENGTH`, …).
    pub fn with_crs(mut self, crs: Crs) -> Windower {
        self.crs = Some(crs);
        self
    }

    fn check_value(&self, instant: &Instant) -> Result<(), WindowError> {
        let (ok, wanted) = match (self.expect, &instant.value) {
            (Expect::Any, _)
            | (Expect::Number, Value::Number(_))
            | (Expect::Text, Value::Text(_))
            | (Expect::Bool, Value::Bool(_))
            | (Expect::Point, Value::Point(_)) => (true, ""),
            (Expect::Point, _) => (false, "positions"),
            (Expect::Number, _) => (false, "numbers"),
            (Expect::Text, _) => (false, "texts"),
            (Expect::Bool, _) => (false, "booleans"),
        };
        if ok {
            return Ok(());
        }
        Err(WindowError::WrongType {
            datetime: instant.datetime.clone(),
            value: instant.value.clone(),
            aggregation: self.emitter.aggregation,
            wanted,
        })
    }
}

impl TimeWindows {
    /// The end of the last window holding a record at `secs`.
    fn last_end(&self, secs: i64) -> i64 {
        self.grid.last_end(secs)
    }

    /// The next boundary whose window may hold records: `next`, or, past
    /// boundaries whose windows are empty, the first window of the oldest
    /// bucket.
    fn first_boundary(&self) -> i64 {
        match self.buckets.front() {
            Some((start, _)) => self.next.max(self.grid.end_after(*start)),
            None => self.next,
        }
    }

    /// Moves the watermark to `w` (when later) and emits every window
    /// ending at or before it that holds records. Boundaries whose windows
    /// hold none are skipped, not visited, so the work is bounded by the
    /// buckets, however far `w` moves.
    fn advance(
        &mut self,
        w: i64,
        emitter: &mut Emitter,
        out: &mut Vec<Event>,
    ) -> Result<(), WindowError> {
        if let Some(m) = self.watermark {
            if m >= w {
                return Ok(());
            }
            // `next` is the first boundary after the watermark: short of
            // it, no window closes and only the watermark moves.
            if w < self.next {
                self.watermark = Some(w);
                return Ok(());
            }
        }
        let after = self.grid.end_after(w);
        if self.watermark.is_none() {
            self.next = after;
        }
        self.watermark = Some(w);
        loop {
            if self.buckets.is_empty() {
                self.next = self.next.max(after);
                return Ok(());
            }
            let boundary = self.first_boundary().min(after);
            if boundary > w {
                self.next = boundary;
                return Ok(());
            }
            let emitted = self.emit(emitter, boundary, false, out);
            self.next = boundary + self.grid.hop();
            self.evict(self.next - self.grid.span());
            emitted?;
        }
    }

    /// Emits the window ending at `boundary` (see [`Emitter::emit_boundary`]).
    fn emit(
        &self,
        emitter: &mut Emitter,
        boundary: i64,
        partial: bool,
        out: &mut Vec<Event>,
    ) -> Result<(), WindowError> {
        let distinct = self
            .distinct
            .as_ref()
            .and_then(|d| d.count_before(boundary, &self.buckets));
        emitter.emit_boundary(boundary, &self.buckets, distinct, partial, out)
    }

    /// Drops the buckets that start before `oldest`, and their bytes.
    fn evict(&mut self, oldest: i64) {
        while self
            .buckets
            .front()
            .is_some_and(|(start, _)| *start < oldest)
        {
            if let Some((_, acc)) = self.buckets.pop_front() {
                let mut freed = BUCKET_BYTES + acc.bytes;
                if let Some(distinct) = &mut self.distinct {
                    freed += acc.texts().map(|t| distinct.remove(t)).sum::<u64>();
                }
                self.bytes = self.bytes.saturating_sub(freed);
            }
        }
    }
}

impl Drop for Windower {
    /// A query's windows go with it: its budget no longer counts them.
    fn drop(&mut self) {
        if let Some(budget) = &self.budget {
            budget.set(Part::Windows, 0);
        }
    }
}

impl Emitter {
    /// The event of `acc`'s window, emptying it. When the aggregate
    /// overflows (JSON has no infinity), none under `onError: skip` (the
    /// window is counted as skipped), else an error naming the window.
    fn event(&mut self, acc: &mut Acc, partial: bool) -> Result<Option<Event>, WindowError> {
        let value = acc.value(self.aggregation);
        let count = acc.count;
        let (window_start, window_end) = acc.take_bounds();
        if value.as_f64().is_some_and(|v| !v.is_finite()) {
            if self.on_error == OnError::Skip {
                self.skipped += count;
                self.untaken += count;
                return Ok(None);
            }
            if self.aggregation.of_positions().is_some() {
                return Err(WindowError::NoSegment {
                    aggregation: self.aggregation,
                    window_start,
                    window_end,
                });
            }
            return Err(WindowError::Overflow {
                aggregation: self.aggregation,
                window_start,
                window_end,
            });
        }
        Ok(Some(Event::Window(WindowEvent {
            window_start,
            window_end,
            property: self.property.clone(),
            aggregation: self.aggregation,
            value,
            count,
            partial,
            late: std::mem::take(&mut self.late),
            skipped: std::mem::take(&mut self.skipped),
        })))
    }

    /// Emits the window ending at `boundary` when it holds records: every
    /// bucket before `boundary` is in it (none is older than
    /// `boundary − span`); `distinct`, its distinct texts when known.
    fn emit_boundary(
        &mut self,
        boundary: i64,
        buckets: &VecDeque<(i64, Acc)>,
        distinct: Option<usize>,
        partial: bool,
        out: &mut Vec<Event>,
    ) -> Result<(), WindowError> {
        let mut window = Acc::merge_all_counted(
            buckets
                .iter()
                .take_while(|(start, _)| *start < boundary)
                .map(|(_, acc)| acc),
            distinct,
        );
        if window.count > 0 {
            out.extend(self.event(&mut window, partial)?);
        }
        Ok(())
    }
}

/// The bucket starting at `start`, made if need be (then `true`), keeping
/// time order.
fn bucket(buckets: &mut VecDeque<(i64, Acc)>, start: i64) -> (&mut Acc, bool) {
    let (at, made) = match buckets.back() {
        Some((last, _)) if *last == start => (buckets.len() - 1, false),
        Some((last, _)) if *last < start => {
            buckets.push_back((start, Acc::default()));
            (buckets.len() - 1, true)
        }
        None => {
            buckets.push_back((start, Acc::default()));
            (0, true)
        }
        // A record out of order, still inside a window to come.
        Some(_) => match buckets.binary_search_by_key(&start, |(s, _)| *s) {
            Ok(i) => (i, false),
            Err(i) => {
                buckets.insert(i, (start, Acc::default()));
                (i, true)
            }
        },
    };
    (&mut buckets[at].1, made)
}

#[cfg(test)]
mod tests;

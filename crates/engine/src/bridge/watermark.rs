//! Watermarks of a live bridge query: how the wall clock closes windows
//! without a later record, when records are in flight to a job.
//!
//! The records a job has not answered yet must not be overtaken by the
//! clock: a window closed while an answer that falls in it is still in
//! the pipe would count that answer late. So each kind of query applies
//! the clock in the input's order:
//!
//! - **Host windows, answers paired with records** (`value` framing, and a
//!   position query's job: jobs/README.md, "Positions"): a watermark is a
//!   mark in the input order, "after the n-th record read": one before
//!   each batch read from the source (so records the clock has passed are
//!   late, as on `local`), and one at the deadline of the next window
//!   holding records. A mark applies once the n records before it have
//!   ended (answered, with a result or none: an error line, a `speed` at
//!   the first instant) and their answers are windowed, before the answer
//!   of the next. Exact, however long the job holds an answer.
//! - **Host windows, other `json` jobs** (a transform job that may filter
//!   or emit several lines per input, and isolated plugins): answers cannot
//!   be paired. At the deadline, the watermark applies once the job has read
//!   every byte written to it (the pipe holds none: `FIONREAD`) and has
//!   neither read nor written anything for [`SETTLE`]. A job that holds an
//!   answer longer than that (a micro-batch, an answer that waits for the
//!   next input) may see it counted late.
//! - **Job windows** (`aggregates = true`): the host writes a watermark
//!   line, `{"watermark":"<RFC 3339 UTC>"}`, in the input's order, each time
//!   W = wall clock − grace crosses the next window boundary (an
//!   epoch-aligned multiple of the span for `TUMBLING`, of the hop for
//!   `HOPPING`), never more often: at the deadline while records sent may
//!   still be in a window the job holds open, and before the next batch.
//!
//! A held clock ([`WallClock::held`]: a restored query replaying its log)
//! applies none of this: the records read meanwhile get no mark, and the
//! job no line, so their windows are those of their datetimes alone. Its
//! release reads as an empty batch, before which a `value` job's windows
//! get their mark and an aggregating job its line, at once; the `json`
//! rule applies from the release, once the job has settled.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant as Clock;

use crate::QueryOutput;
use mfstream_model::aggregate::{Aggregate, Grid, Windower};
use mfstream_model::clock::{WallClock, rfc3339_millis};
use mfstream_model::{Instant, QueryStatus};

/// How long a `json` job that transforms must have been quiet (read and
/// written nothing, with nothing left unread) before the clock's watermark
/// is applied to the host's windows.
pub(crate) const SETTLE: Duration = Duration::from_millis(200);

/// A live bridge query's clock.
pub(super) struct Watermarks {
    clock: WallClock,
    kind: Kind,
}

enum Kind {
    /// Host windows over answers paired with records.
    Paired {
        /// Watermarks waiting for answers: (records read before it, the
        /// clock in seconds), in order.
        marks: VecDeque<(u64, i64)>,
        /// Records read from the source.
        read: u64,
    },
    /// Host windows over the lines of a `json` job that does not pair
    /// them.
    Settled {
        /// The deadline passed: the watermark waits for the job to settle.
        due: bool,
        /// Since when the job has been seen neither reading nor writing.
        quiet_from: Clock,
        /// The input it had consumed at the last look.
        consumed: u64,
    },
    /// The job's windows: watermark lines.
    Lines {
        /// The window boundaries (a `TUMBLING` window's hop is its span).
        grid: Grid,
        /// The grace, in seconds.
        grace: i64,
        /// The last boundary W was told to have crossed.
        crossed: i64,
        /// The end of the first window holding a record sent, while W has
        /// not reached it: no line is due before then.
        open_from: Option<i64>,
        /// The end of the last window holding a record sent (seconds).
        open_until: Option<i64>,
    },
}

/// What the driver does at the clock's deadline.
pub(super) enum Due {
    /// Nothing yet.
    Nothing,
    /// Advance the host's windows to the clock now.
    Advance,
    /// Write these bytes (a watermark line) to the job's stdin.
    Write(Vec<u8>),
}

impl Watermarks {
    /// For host windows over the answers of a job, `paired` with its
    /// records or not.
    pub(crate) fn host(clock: WallClock, paired: bool) -> Watermarks {
        let kind = if paired {
            Kind::Paired {
                marks: VecDeque::new(),
                read: 0,
            }
        } else {
            Kind::Settled {
                due: false,
                quiet_from: Clock::now(),
                consumed: 0,
            }
        };
        Watermarks { clock, kind }
    }

    /// For a job that computes `aggregate`'s windows; `None` for a `COUNT`
    /// window, which does not close on time.
    pub(crate) fn job(clock: WallClock, aggregate: &Aggregate) -> Option<Watermarks> {
        let grid = aggregate.window.grid()?;
        let grace = aggregate.grace as i64;
        // A held clock has told the job nothing: its first line, at the
        // release, says where W is then.
        let crossed = if clock.is_held() {
            i64::MIN
        } else {
            grid.end_at_or_before(clock.now_secs() - grace)
        };
        Some(Watermarks {
            clock,
            kind: Kind::Lines {
                grid,
                grace,
                crossed,
                open_from: None,
                open_until: None,
            },
        })
    }

    /// When to wake up next: the deadline of the next window holding
    /// records (host windows: from `windower`), or when a settling job may
    /// have settled; `None` when nothing waits on the clock.
    pub(crate) fn deadline(&self, windower: Option<&Windower>, last_io: Clock) -> Option<Clock> {
        if self.clock.is_held() {
            return None;
        }
        match &self.kind {
            Kind::Paired { marks, .. } if marks.is_empty() => {
                crate::plan::deadline(windower, Some(&self.clock))
            }
            // The last mark has yet to be applied: it is the deadline's.
            Kind::Paired { .. } => None,
            Kind::Settled { due: false, .. } => crate::plan::deadline(windower, Some(&self.clock)),
            Kind::Settled { quiet_from, .. } => Some((*quiet_from).max(last_io) + SETTLE),
            Kind::Lines {
                grid,
                grace,
                crossed,
                open_from,
                open_until,
                ..
            } => {
                let open = open_until.is_some_and(|end| end > *crossed);
                let next = crossed
                    .saturating_add(grid.hop())
                    .max(open_from.unwrap_or(i64::MIN));
                open.then(|| self.clock.instant_at(next + grace))
            }
        }
    }

    /// A batch of `n` records read from the source, before it is encoded:
    /// the mark before it, or the watermark line before it when W has
    /// crossed a boundary since the last one.
    pub(crate) fn before_batch(&mut self, batch: &[Instant], wbuf: &mut Vec<u8>) {
        let now = self.clock.now_secs();
        let held = self.clock.is_held();
        match &mut self.kind {
            Kind::Paired { read, .. } if held => *read += batch.len() as u64,
            Kind::Paired { marks, read, .. } => {
                match marks.back_mut() {
                    Some((at, secs)) if *at == *read => *secs = now,
                    _ => marks.push_back((*read, now)),
                }
                *read += batch.len() as u64;
            }
            Kind::Settled { .. } => {}
            Kind::Lines {
                grid,
                crossed,
                open_from,
                open_until,
                ..
            } => {
                for instant in batch {
                    // A datetime that does not parse fails the job, not this.
                    if let Some(t) = mfstream_model::datetime::parse(&instant.datetime) {
                        // The ends of the first and the last window holding
                        // the record.
                        let (first, last) = (grid.end_after(t.secs), grid.last_end(t.secs));
                        if first > *crossed {
                            *open_from = Some(open_from.map_or(first, |f| f.min(first)));
                        }
                        *open_until = Some(open_until.map_or(last, |e| e.max(last)));
                    }
                }
                self.line_if_crossed(wbuf);
            }
        }
    }

    /// The clock's deadline has come: what to do.
    pub(crate) fn on_deadline(&mut self, unread: u64, consumed: u64, last_io: Clock) -> Due {
        let now = self.clock.now_secs();
        match &mut self.kind {
            Kind::Paired { marks, read, .. } => {
                marks.push_back((*read, now));
                Due::Advance
            }
            Kind::Settled {
                due,
                quiet_from,
                consumed: seen,
            } => {
                if !*due {
                    *due = true;
                    *quiet_from = Clock::now();
                    *seen = consumed;
                    return Due::Nothing;
                }
                if consumed != *seen {
                    *seen = consumed;
                    *quiet_from = Clock::now();
                }
                let quiet = (*quiet_from).max(last_io);
                if unread > 0 || quiet.elapsed() < SETTLE {
                    *quiet_from = Clock::now().max(*quiet_from);
                    return Due::Nothing;
                }
                *due = false;
                Due::Advance
            }
            Kind::Lines { .. } => {
                let mut line = Vec::new();
                self.line_if_crossed(&mut line);
                if line.is_empty() {
                    Due::Nothing
                } else {
                    Due::Write(line)
                }
            }
        }
    }

    /// Appends a watermark line when W has crossed a boundary since the
    /// last one.
    fn line_if_crossed(&mut self, wbuf: &mut Vec<u8>) {
        let Kind::Lines {
            grid,
            grace,
            crossed,
            open_from,
            ..
        } = &mut self.kind
        else {
            return;
        };
        if self.clock.is_held() {
            return;
        }
        let w = self.clock.now_millis() - *grace * 1000;
        let secs = w.div_euclid(1000);
        if secs < crossed.saturating_add(grid.hop()) {
            return;
        }
        *crossed = grid.end_at_or_before(secs);
        *open_from = open_from.filter(|first| *first > *crossed);
        wbuf.extend_from_slice(b"{\"watermark\":\"");
        wbuf.extend_from_slice(rfc3339_millis(w).as_bytes());
        wbuf.extend_from_slice(b"\"}\n");
    }

    /// Windows `answers`, each with the number of its record (paired:
    /// the next ones in order), applying each mark before the answer of
    /// the first record after it.
    pub(crate) async fn window(
        &mut self,
        windower: &mut Windower,
        answers: Vec<(u64, Instant)>,
        output: &QueryOutput,
    ) -> Result<(), QueryStatus> {
        let Kind::Paired { marks, .. } = &mut self.kind else {
            let answers = answers.into_iter().map(|(_, answer)| answer);
            return crate::plan::window(windower, answers, output).await;
        };
        let mut answers = answers.into_iter().peekable();
        while let Some(&(record, _)) = answers.peek() {
            // The marks after fewer records than this one's number.
            while let Some(&(_, secs)) = marks.front().filter(|(at, _)| *at < record) {
                marks.pop_front();
                crate::plan::advance(windower, secs, output).await?;
            }
            // Then the answers up to the next mark.
            let next = marks.front().map_or(u64::MAX, |(at, _)| *at);
            let run = std::iter::from_fn(|| answers.next_if(|(record, _)| *record <= next));
            crate::plan::window(windower, run.map(|(_, answer)| answer), output).await?;
        }
        Ok(())
    }

    /// Paired: applies the marks after at most `ended` records, once
    /// those records have ended and their answers are windowed.
    pub(crate) async fn settle(
        &mut self,
        windower: &mut Windower,
        ended: u64,
        output: &QueryOutput,
    ) -> Result<(), QueryStatus> {
        let Kind::Paired { marks, .. } = &mut self.kind else {
            return Ok(());
        };
        while let Some(&(_, secs)) = marks.front().filter(|(at, _)| *at <= ended) {
            marks.pop_front();
            crate::plan::advance(windower, secs, output).await?;
        }
        Ok(())
    }

    /// Advances the host's windows to the clock now: paired, once the
    /// records before the deadline's mark have ended (`ended` so far);
    /// otherwise the job has settled.
    pub(crate) async fn advance_now(
        &mut self,
        windower: &mut Windower,
        ended: u64,
        output: &QueryOutput,
    ) -> Result<(), QueryStatus> {
        if matches!(self.kind, Kind::Paired { .. }) {
            return self.settle(windower, ended, output).await;
        }
        crate::plan::advance(windower, self.clock.now_secs(), output).await
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use proptest::prelude::{Just, Strategy};

    use mfstream_model::Aggregation;
    use mfstream_model::aggregate::TimeUnit;
    use mfstream_model::aggregate::Window;

    fn clock_at(millis: u64) -> WallClock {
        WallClock::starting_at(UNIX_EPOCH + Duration::from_millis(millis))
    }

    fn tumbling(size: u64, grace: u64) -> Aggregate {
        let window = Window::Tumbling {
            size,
            unit: TimeUnit::Seconds,
        };
        Aggregate::new(Aggregation::Count, window).with_grace(grace)
    }

    proptest::proptest! {
        /// A job's watermarks see a record's windows where the windower
        /// closes them: from the grid's first end after it to its last.
        #[test]
        fn a_records_open_windows_are_the_grids(
            (span, hop) in (1u64..=600).prop_flat_map(|s| (Just(s), s.div_ceil(1000)..=s)),
            t in 1i64..10_000_000,
        ) {
            let window = Window::Hopping {
                size: span,
                unit: TimeUnit::Seconds,
                hop,
                hop_unit: TimeUnit::Seconds,
            };
            let aggregate = Aggregate::new(Aggregation::Count, window);
            let mut marks = Watermarks::job(clock_at(0), &aggregate).expect("a time window");
            let record = Instant::number(rfc3339_millis(t * 1000), 1.0);
            marks.before_batch(&[record], &mut Vec::new());
            let grid = aggregate.window.grid().expect("a time window");
            let Kind::Lines { open_from, open_until, .. } = marks.kind else {
                return Err(proptest::test_runner::TestCaseError::fail("a job's marks are lines"));
            };
            proptest::prop_assert_eq!(open_from, Some(grid.end_after(t)));
            proptest::prop_assert_eq!(open_until, Some(grid.last_end(t)));
        }
    }

    fn text(due: Due) -> String {
        match due {
            Due::Write(line) => String::from_utf8(line).unwrap(),
            Due::Nothing => "nothing".into(),
            Due::Advance => "advance".into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_watermark_line_is_written_once_per_boundary_crossed_never_more_often() {
        let start = Clock::now();
        let mut marks = Watermarks::job(clock_at(10_500), &tumbling(1, 2)).unwrap();
        assert_eq!(marks.deadline(None, start), None, "no record: nothing open");
        let mut wbuf = Vec::new();
        let record = Instant::number("1970-01-01T00:00:10.5Z", 1.0);
        marks.before_batch(std::slice::from_ref(&record), &mut wbuf);
        assert!(wbuf.is_empty(), "W has crossed no boundary yet");
        // [10 s, 11 s) is due at 11 s + 2 s of grace.
        let due = marks.deadline(None, start).unwrap();
        assert_eq!(due - start, Duration::from_millis(2500));
        tokio::time::advance(Duration::from_millis(2500)).await;
        assert_eq!(
            text(marks.on_deadline(0, 0, start)),
            "{\"watermark\":\"1970-01-01T00:00:11.000Z\"}\n"
        );
        assert_eq!(marks.deadline(None, start), None, "nothing open past W");
        // An hour later a batch comes: one line, W now, not one per second.
        tokio::time::advance(Duration::from_secs(3600)).await;
        marks.before_batch(&[record], &mut wbuf);
        assert_eq!(
            String::from_utf8(wbuf).unwrap(),
            "{\"watermark\":\"1970-01-01T01:00:11.000Z\"}\n"
        );
        assert!(
            Watermarks::job(
                clock_at(0),
                &Aggregate::new(Aggregation::Count, Window::Count { size: 2 })
            )
            .is_none()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_clock_writes_no_watermark_line_until_its_release_then_one_at_once() {
        // An hour past the record's window: a restart that outlasted it.
        let (clock, release) = clock_at(3_600_500).held();
        let mut marks = Watermarks::job(clock, &tumbling(1, 2)).unwrap();
        let mut wbuf = Vec::new();
        let record = Instant::number("1970-01-01T00:00:10.5Z", 1.0);
        marks.before_batch(std::slice::from_ref(&record), &mut wbuf);
        assert!(wbuf.is_empty(), "no line while held");
        assert_eq!(marks.deadline(None, Clock::now()), None, "no deadline");
        release.release();
        // The release reads as an empty batch: W now, at once.
        marks.before_batch(&[], &mut wbuf);
        assert_eq!(
            String::from_utf8(wbuf).unwrap(),
            "{\"watermark\":\"1970-01-01T00:59:58.500Z\"}\n"
        );
        assert_eq!(marks.deadline(None, Clock::now()), None, "nothing open");
    }

    #[tokio::test(start_paused = true)]
    async fn a_paired_mark_applies_after_its_records_ended_those_with_no_answer_too() {
        let aggregate = tumbling(1, 0);
        let mut windower = Windower::new(&aggregate, "p".into()).expect("a valid window");
        let (mut handle, output) = crate::QueryHandle::new("q", "test", 16);
        let mut marks = Watermarks::host(clock_at(0), true);
        let r1 = Instant::number("1970-01-01T00:00:00.5Z", 1.0);
        let r2 = Instant::number("1970-01-01T00:00:00.7Z", 2.0);
        let r3 = Instant::number("1970-01-01T00:00:00.9Z", 4.0);
        marks.before_batch(&[r1.clone(), r2], &mut Vec::new());
        // At 1 s, after two records: [0 s, 1 s) closes once both ended.
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(text(marks.on_deadline(0, 0, Clock::now())), "advance");
        marks.before_batch(std::slice::from_ref(&r3), &mut Vec::new());
        // The second record has no answer (an error line, a first speed):
        // the third's answer comes after the mark, so it is late.
        marks
            .window(&mut windower, vec![(1, r1), (3, r3)], &output)
            .await
            .unwrap();
        marks.settle(&mut windower, 3, &output).await.unwrap();
        let window = handle.next().await.expect("the window").to_json();
        assert!(window.ends_with(r#""count":1}"#), "{window}");
        // The late record is counted in the next result.
        let mut rest = Vec::new();
        let r4 = Instant::number("1970-01-01T00:00:01.5Z", 8.0);
        windower.push(r4, &mut rest).unwrap();
        windower.finish(&mut rest).unwrap();
        assert_eq!(rest.len(), 1, "{rest:?}");
        assert!(
            rest[0].to_json().contains(r#""late":1"#),
            "{}",
            rest[0].to_json()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_json_jobs_watermark_waits_until_it_has_read_everything_and_settled() {
        let mut marks = Watermarks::host(clock_at(0), false);
        let start = Clock::now();
        assert_eq!(text(marks.on_deadline(0, 10, start)), "nothing");
        tokio::time::advance(SETTLE).await;
        // Input still in the pipe: not yet.
        assert_eq!(text(marks.on_deadline(5, 10, start)), "nothing");
        tokio::time::advance(SETTLE).await;
        // It read more since: quiet from now.
        assert_eq!(text(marks.on_deadline(0, 15, start)), "nothing");
        tokio::time::advance(SETTLE).await;
        assert_eq!(text(marks.on_deadline(0, 15, start)), "advance");
    }
}

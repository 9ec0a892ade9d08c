//! The partial aggregate of a run of records: what a window (or one bucket
//! of a hopping window) keeps instead of its records.

use std::collections::HashSet;

use crate::budget::ENTRY_OVERHEAD;
use crate::geo::{AggregateValue, Crs, PositionAcc};
use crate::vocab::{Aggregation, Point, Value};

/// The most entries a set of distinct texts keeps its allocation for when
/// its window is emitted: a larger one is freed, so that an emitted window
/// holds nothing its budget does not count.
const KEEP_SET: usize = 1024;

/// `AVG`'s values are also summed times this (a power of two: exact but
/// for values below 2^-958), so that a sum of up to 2^63 finite values
/// stays finite.
const SCALE: f64 = 1.0 / 18_446_744_073_709_551_616.0;

/// Adds `x` to the compensated sum `sum + comp` (Neumaier's).
fn neumaier(sum: &mut f64, comp: &mut f64, x: f64) {
    let t = *sum + x;
    *comp += if sum.abs() >= x.abs() {
        (*sum - t) + x
    } else {
        (x - t) + *sum
    };
    *sum = t;
}

/// The state of one aggregate: constant size, except the set of distinct
/// texts of `COUNT_DISTINCT`, which holds at most the window's records.
#[derive(Debug, Clone)]
pub(super) struct Acc {
    pub count: u64,
    /// The heap it holds, as [`crate::budget`] estimates it: its distinct
    /// texts and its datetimes.
    pub bytes: u64,
    /// Neumaier's compensated sum: `sum + comp` is the sum, correctly
    /// rounded in all but pathological cases (as Python's `math.fsum`).
    sum: f64,
    comp: f64,
    /// The same sum of `AVG`'s values scaled by [`SCALE`]: finite whenever
    /// they are, so that an average of values near `f64::MAX` (finite)
    /// does not overflow through its sum.
    scaled: f64,
    scaled_comp: f64,
    min: f64,
    max: f64,
    trues: u64,
    distinct: HashSet<String>,
    /// The number of distinct texts of merged buckets (their sets are
    /// counted, not copied): `None` for a bucket, whose set says it.
    distinct_merged: Option<usize>,
    /// The first and last record's datetimes, with their arrival numbers so
    /// that merged buckets keep arrival order.
    first: Option<(u64, String)>,
    last: Option<(u64, String)>,
    /// The aggregate of positions (`EXTENT`, `LENGTH`, …): O(1) whatever
    /// the window holds.
    position: Option<Box<PositionAcc>>,
}

impl Default for Acc {
    fn default() -> Acc {
        Acc {
            count: 0,
            bytes: 0,
            sum: 0.0,
            comp: 0.0,
            scaled: 0.0,
            scaled_comp: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            trues: 0,
            distinct: HashSet::new(),
            distinct_merged: None,
            first: None,
            last: None,
            position: None,
        }
    }
}

impl Acc {
    /// Adds the `seq`-th record; its value has the type the aggregation takes.
    #[inline]
    pub(super) fn add(
        &mut self,
        aggregation: Aggregation,
        seq: u64,
        datetime: String,
        value: Value,
    ) {
        match (aggregation, value) {
            (Aggregation::Sum, Value::Number(x)) => self.add_sum(x),
            (Aggregation::Avg, Value::Number(x)) => {
                self.add_sum(x);
                neumaier(&mut self.scaled, &mut self.scaled_comp, x * SCALE);
            }
            (Aggregation::Min, Value::Number(x)) => self.min = self.min.min(x),
            (Aggregation::Max, Value::Number(x)) => self.max = self.max.max(x),
            (Aggregation::CountDistinct, Value::Text(s)) => {
                let cost = s.capacity() as u64 + ENTRY_OVERHEAD;
                if self.distinct.insert(s) {
                    self.bytes += cost;
                }
            }
            (_, Value::Bool(b)) => self.trues += u64::from(b),
            _ => {}
        }
        self.count += 1;
        self.bytes += datetime.capacity() as u64;
        if self.first.is_none() {
            self.first = Some((seq, datetime));
        } else if let Some((_, old)) = self.last.replace((seq, datetime)) {
            self.bytes -= old.capacity() as u64;
        }
    }

    /// Adds a position at `t` (microseconds) to the aggregate of
    /// positions, in `crs`; call before [`Acc::add`] of the same record.
    /// Positions come in increasing time order (the position engine sees
    /// to it). `before` is the position before this one when it may be in
    /// an earlier bucket of the same window (a `HOPPING` window): the
    /// segment joining them is measured once, for the merge.
    pub(super) fn add_position(
        &mut self,
        crs: Crs,
        t: i64,
        p: crate::geo::Point,
        before: Option<(i64, crate::geo::Point)>,
    ) {
        let acc = self.position.get_or_insert_with(|| {
            self.bytes += std::mem::size_of::<PositionAcc>() as u64;
            Box::new(PositionAcc::new(crs))
        });
        acc.push_after(t, p, before);
    }

    fn add_sum(&mut self, x: f64) {
        neumaier(&mut self.sum, &mut self.comp, x);
    }

    /// The state of the records of `accs` together (the buckets of one
    /// window), its first and last datetimes those of the earliest and
    /// latest arrivals. They are cloned once, so combining the buckets at a
    /// boundary costs a few additions each; distinct texts are counted
    /// through references, never copied.
    #[cfg(test)]
    pub(super) fn merge_all<'a>(accs: impl IntoIterator<Item = &'a Acc>) -> Acc {
        Acc::merge_all_counted(accs, None)
    }

    /// [`Acc::merge_all`], with the number of distinct texts of the
    /// buckets together when the caller knows it (then the sets are not
    /// read).
    pub(super) fn merge_all_counted<'a>(
        accs: impl IntoIterator<Item = &'a Acc>,
        distinct: Option<usize>,
    ) -> Acc {
        let mut window = Acc::default();
        let mut first: Option<&(u64, String)> = None;
        let mut last: Option<&(u64, String)> = None;
        let mut sets: Vec<&HashSet<String>> = Vec::new();
        for acc in accs {
            if acc.count == 0 {
                continue;
            }
            window.add_sum(acc.sum);
            window.comp += acc.comp;
            neumaier(&mut window.scaled, &mut window.scaled_comp, acc.scaled);
            window.scaled_comp += acc.scaled_comp;
            window.min = window.min.min(acc.min);
            window.max = window.max.max(acc.max);
            window.trues += acc.trues;
            window.count += acc.count;
            // The buckets come in time order, and so do their positions:
            // each continues the run, joined by the segment between them.
            match (&mut window.position, &acc.position) {
                (Some(run), Some(next)) => run.append(next),
                (run @ None, next) => run.clone_from(next),
                (Some(_), None) => {}
            }
            if distinct.is_none() && !acc.distinct.is_empty() {
                sets.push(&acc.distinct);
            }
            if let Some(f) = &acc.first {
                if first.is_none_or(|x| f.0 < x.0) {
                    first = Some(f);
                }
            }
            if let Some(l) = acc.last.as_ref().or(acc.first.as_ref()) {
                if last.is_none_or(|x| l.0 > x.0) {
                    last = Some(l);
                }
            }
        }
        // One record: it is the first, and there is no other last.
        let last = last.filter(|l| first.is_none_or(|f| f.0 != l.0));
        window.first = first.cloned();
        window.last = last.cloned();
        window.distinct_merged = Some(match sets.as_slice() {
            _ if distinct.is_some() => distinct.unwrap_or(0),
            [] => 0,
            [one] => one.len(),
            many => {
                let largest = many.iter().map(|s| s.len()).max().unwrap_or(0);
                let mut union: HashSet<&str> = HashSet::with_capacity(largest);
                for set in many {
                    union.extend(set.iter().map(String::as_str));
                }
                union.len()
            }
        });
        window
    }

    /// The aggregate's value.
    pub(super) fn value(&self, aggregation: Aggregation) -> Value {
        let n = self.count as f64;
        match aggregation {
            Aggregation::Count => Value::Number(n),
            Aggregation::Sum => Value::Number(self.sum + self.comp),
            Aggregation::Avg => {
                let sum = self.sum + self.comp;
                if sum.is_finite() {
                    Value::Number(sum / n)
                } else {
                    // The sum overflowed; the average of finite values
                    // cannot: take it from the scaled sum.
                    Value::Number((self.scaled + self.scaled_comp) / n / SCALE)
                }
            }
            Aggregation::Min => Value::Number(self.min),
            Aggregation::Max => Value::Number(self.max),
            Aggregation::CountDistinct => {
                Value::Number(self.distinct_merged.unwrap_or(self.distinct.len()) as f64)
            }
            Aggregation::Any => Value::Bool(self.trues > 0),
            Aggregation::All => Value::Bool(self.trues == self.count),
            Aggregation::CountTrue => Value::Number(self.trues as f64),
            Aggregation::CountFalse => Value::Number((self.count - self.trues) as f64),
            positions => {
                let result = match (positions.of_positions(), &self.position) {
                    (Some(what), Some(acc)) => acc.result(what, 0, 0),
                    _ => AggregateValue::None,
                };
                match result {
                    AggregateValue::Number(v) => Value::Number(v),
                    AggregateValue::Point(p) => Value::Point(Point::new(p.x, p.y)),
                    AggregateValue::BBox(b) => Value::BBox(Box::new(b)),
                    // No value (a speed of one position): as an overflow,
                    // the window is skipped, or fails the query.
                    AggregateValue::None => Value::Number(f64::NAN),
                }
            }
        }
    }

    /// Whether `text` is in the set of distinct texts.
    pub(super) fn has_text(&self, text: &str) -> bool {
        self.distinct.contains(text)
    }

    /// The distinct texts.
    pub(super) fn texts(&self) -> impl Iterator<Item = &str> {
        self.distinct.iter().map(String::as_str)
    }

    /// The first and last record's datetimes, emptying the state (a small
    /// set's allocation is kept for the next window).
    pub(super) fn take_bounds(&mut self) -> (String, String) {
        let first = self.first.take().map(|f| f.1).unwrap_or_default();
        let last = match self.last.take() {
            Some((_, last)) => last,
            None => first.clone(),
        };
        let mut distinct = std::mem::take(&mut self.distinct);
        if distinct.capacity() > KEEP_SET {
            distinct = HashSet::new();
        }
        distinct.clear();
        *self = Acc {
            distinct,
            ..Acc::default()
        };
        (first, last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(aggregation: Aggregation, start: u64, values: &[f64]) -> Acc {
        let mut acc = Acc::default();
        for (i, &v) in values.iter().enumerate() {
            let seq = start + i as u64;
            acc.add(aggregation, seq, format!("t{seq}"), Value::Number(v));
        }
        acc
    }

    #[test]
    fn an_avg_of_values_near_f64_max_is_their_average_not_an_overflow() {
        // Their sum overflows; their average is finite and must be given
        // (not skipped as a window with no finite result).
        let a = acc(Aggregation::Avg, 0, &[1.7e308, 1.7e308]);
        assert_eq!(a.value(Aggregation::Avg), Value::Number(1.7e308));
        let a = acc(Aggregation::Avg, 0, &[f64::MAX, f64::MAX, -f64::MAX, 1e308]);
        assert_eq!(
            a.value(Aggregation::Avg),
            Value::Number(f64::MAX / 4.0 + 2.5e307)
        );
        // The buckets of a hopping window, merged.
        let buckets = [
            acc(Aggregation::Avg, 0, &[1e308, 1e308]),
            acc(Aggregation::Avg, 2, &[1e308]),
        ];
        let merged = Acc::merge_all(&buckets);
        assert_eq!(merged.value(Aggregation::Avg), Value::Number(1e308));
        // A SUM that overflows still does.
        let a = acc(Aggregation::Sum, 0, &[1.7e308, 1.7e308]);
        assert!(!a.value(Aggregation::Sum).as_f64().unwrap().is_finite());
    }

    #[test]
    fn compensated_sums_match_exact_rounding() {
        let a = acc(Aggregation::Sum, 0, &[0.1, 0.2, 0.3]);
        assert_eq!(a.value(Aggregation::Sum), Value::Number(0.6));
        let a = acc(Aggregation::Sum, 0, &[1e100, 1.0, -1e100]);
        assert_eq!(a.value(Aggregation::Sum), Value::Number(1.0));
    }

    #[test]
    fn merged_buckets_equal_one_run_and_keep_arrival_order() {
        let buckets = [
            acc(Aggregation::Min, 5, &[4.0, 1.0]),
            acc(Aggregation::Min, 3, &[7.0]),
            Acc::default(),
            acc(Aggregation::Min, 9, &[2.0]),
        ];
        let mut merged = Acc::merge_all(&buckets);
        assert_eq!(merged.count, 4);
        assert_eq!(merged.value(Aggregation::Min), Value::Number(1.0));
        assert_eq!(merged.take_bounds(), ("t3".to_string(), "t9".to_string()));
        assert_eq!(merged.count, 0);
        let sums = [
            acc(Aggregation::Sum, 0, &[1e100, 0.1]),
            acc(Aggregation::Sum, 2, &[-1e100, 0.2]),
        ];
        let sum = Acc::merge_all(&sums).value(Aggregation::Sum);
        assert_eq!(sum, Value::Number(0.1 + 0.2));
    }

    #[test]
    fn distinct_texts_are_counted_in_bytes_once_and_merged_without_copies() {
        let text = |s: &str| Value::Text(s.to_owned());
        let mut a = Acc::default();
        a.add(Aggregation::CountDistinct, 0, "t0".into(), text("abc"));
        let one = a.bytes;
        assert_eq!(one, 3 + ENTRY_OVERHEAD + 2);
        a.add(Aggregation::CountDistinct, 1, "t1".into(), text("abc"));
        assert_eq!(
            a.bytes,
            one + 2,
            "a text seen before costs only its datetime"
        );
        let mut b = Acc::default();
        b.add(Aggregation::CountDistinct, 2, "t2".into(), text("abc"));
        b.add(Aggregation::CountDistinct, 3, "t3".into(), text("de"));
        let merged = Acc::merge_all([&a, &b]);
        assert_eq!(merged.value(Aggregation::CountDistinct), Value::Number(2.0));
        assert!(merged.distinct.is_empty());
        a.take_bounds();
        assert_eq!(a.bytes, 0);
    }

    #[test]
    fn a_one_record_window_starts_and_ends_at_that_record() {
        let mut one = Acc::merge_all([&Acc::default(), &acc(Aggregation::Max, 4, &[1.0])]);
        assert_eq!(one.take_bounds(), ("t4".to_string(), "t4".to_string()));
    }
}

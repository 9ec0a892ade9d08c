use super::*;
use crate::aggregate::Grid;
use crate::aggregate::TimeUnit;
use crate::aggregate::resume::{self, Closed};
use crate::budget::StateBudget;
use crate::on_error::OnError;
use crate::vocab::Aggregation;

fn at(second: i64) -> String {
    let (h, m, s) = (second / 3600, second / 60 % 60, second % 60);
    format!("2026-01-01T{h:02}:{m:02}:{s:02}Z")
}

fn num(second: i64, v: f64) -> Instant {
    Instant::number(at(second), v)
}

fn run(aggregate: &Aggregate, input: Vec<Instant>) -> Vec<WindowEvent> {
    let mut windower = Windower::new(aggregate, "p".into()).unwrap();
    let mut out = Vec::new();
    for instant in input {
        windower.push(instant, &mut out).unwrap();
    }
    windower.finish(&mut out).unwrap();
    out.into_iter()
        .map(|e| match e {
            Event::Window(w) => w,
            other => panic!("expected a window event, got {other:?}"),
        })
        .collect()
}

fn seconds(size: u64) -> Window {
    Window::Tumbling {
        size,
        unit: TimeUnit::Seconds,
    }
}

fn hopping(size: u64, hop: u64) -> Window {
    Window::Hopping {
        size,
        unit: TimeUnit::Seconds,
        hop,
        hop_unit: TimeUnit::Seconds,
    }
}

fn numbers(events: &[WindowEvent]) -> Vec<(f64, u64)> {
    events
        .iter()
        .map(|e| (e.value.as_f64().unwrap(), e.count))
        .collect()
}

#[test]
fn a_count_window_of_three_over_2_4_6_gives_the_go_tier_results() {
    let input = || vec![num(0, 2.0), num(1, 4.0), num(2, 6.0)];
    for (aggregation, want) in [
        (Aggregation::Count, 3.0),
        (Aggregation::Sum, 12.0),
        (Aggregation::Avg, 4.0),
        (Aggregation::Min, 2.0),
        (Aggregation::Max, 6.0),
    ] {
        let events = run(
            &Aggregate::new(aggregation, Window::Count { size: 3 }),
            input(),
        );
        assert_eq!(numbers(&events), [(want, 3)], "{aggregation}");
        assert_eq!(events[0].window_start, at(0));
        assert_eq!(events[0].window_end, at(2));
        assert!(!events[0].partial);
    }
}

#[test]
fn count_distinct_over_a_b_a_gives_2() {
    let text = |s: i64, v: &str| Instant {
        datetime: at(s),
        value: Value::Text(v.into()),
    };
    let events = run(
        &Aggregate::new(Aggregation::CountDistinct, Window::Count { size: 3 }),
        vec![text(0, "a"), text(1, "b"), text(2, "a")],
    );
    assert_eq!(numbers(&events), [(2.0, 3)]);
}

#[test]
fn any_all_count_true_over_t_f_f_give_true_false_1() {
    let input = || {
        [true, false, false]
            .into_iter()
            .enumerate()
            .map(|(i, b)| Instant {
                datetime: at(i as i64),
                value: Value::Bool(b),
            })
            .collect::<Vec<_>>()
    };
    let value = |aggregation| {
        let events = run(
            &Aggregate::new(aggregation, Window::Count { size: 3 }),
            input(),
        );
        events[0].value.clone()
    };
    assert_eq!(value(Aggregation::Any), Value::Bool(true));
    assert_eq!(value(Aggregation::All), Value::Bool(false));
    assert_eq!(value(Aggregation::CountTrue), Value::Number(1.0));
    assert_eq!(value(Aggregation::CountFalse), Value::Number(2.0));
}

#[test]
fn a_hopping_avg_of_3s_hopping_1s_gives_10_15_20_30_then_partials() {
    let input = (0..5).map(|s| num(s, 10.0 * (s + 1) as f64)).collect();
    let events = run(&Aggregate::new(Aggregation::Avg, hopping(3, 1)), input);
    assert_eq!(
        numbers(&events),
        [
            (10.0, 1),
            (15.0, 2),
            (20.0, 3),
            (30.0, 3),
            (40.0, 3),
            (45.0, 2),
            (50.0, 1)
        ]
    );
    let partial: Vec<bool> = events.iter().map(|e| e.partial).collect();
    assert_eq!(partial, [false, false, false, false, true, true, true]);
    assert_eq!(
        (
            events[3].window_start.as_str(),
            events[3].window_end.as_str()
        ),
        (at(1).as_str(), at(3).as_str())
    );
}

#[test]
fn tumbling_windows_align_to_the_epoch_and_skip_empty_spans() {
    let input = vec![num(1, 1.0), num(4, 2.0), num(5, 3.0), num(31, 4.0)];
    let events = run(&Aggregate::new(Aggregation::Sum, seconds(5)), input);
    // [0,5) holds 1 and 4; [5,10) holds 5; [30,35) holds 31 (partial).
    assert_eq!(numbers(&events), [(3.0, 2), (3.0, 1), (4.0, 1)]);
    assert_eq!(events[0].window_start, at(1));
    assert_eq!(events[0].window_end, at(4));
    assert!(events[2].partial && !events[1].partial);
}

#[test]
fn emit_partial_false_drops_the_open_windows_at_the_end() {
    let mut aggregate = Aggregate::new(Aggregation::Count, seconds(5));
    aggregate.emit_partial = false;
    let events = run(&aggregate, vec![num(1, 1.0), num(6, 1.0)]);
    assert_eq!(numbers(&events), [(1.0, 1)]);
    let mut aggregate = Aggregate::new(Aggregation::Count, hopping(3, 1));
    aggregate.emit_partial = false;
    assert!(run(&aggregate, vec![num(0, 1.0)]).is_empty());
}

#[test]
fn late_tumbling_records_are_skipped_and_counted_in_the_next_event() {
    let input = vec![
        num(10, 1.0),
        num(3, 100.0),
        num(11, 2.0),
        num(2, 100.0),
        num(20, 5.0),
    ];
    let events = run(&Aggregate::new(Aggregation::Sum, seconds(5)), input);
    assert_eq!(numbers(&events), [(3.0, 2), (5.0, 1)]);
    assert_eq!(events[0].late, 2);
    assert_eq!(events[1].late, 0);
}

#[test]
fn late_hopping_records_are_skipped_only_when_every_window_holding_them_passed() {
    // Windows of 3 s hopping 1 s. After the boundary at 5 is emitted, a
    // record at 3 still belongs to the windows ending at 6, a record at 1 to none.
    let input = vec![
        num(4, 1.0),
        num(5, 2.0),
        num(3, 10.0),
        num(1, 100.0),
        num(6, 4.0),
    ];
    let events = run(&Aggregate::new(Aggregation::Sum, hopping(3, 1)), input);
    // 5: {4}; 6: {4, 5, 3}; then the partials 7: {4, 5, 6}; 8: {5, 6}; 9: {6}.
    assert_eq!(
        numbers(&events),
        [(1.0, 1), (13.0, 3), (7.0, 3), (6.0, 2), (4.0, 1)]
    );
    assert_eq!(events[1].late, 1);
    assert_eq!(events[1].window_start, at(4), "arrival order");
    assert_eq!(events[1].window_end, at(3), "arrival order");
}

#[test]
fn an_unparsable_datetime_fails_naming_the_record() {
    let mut windower =
        Windower::new(&Aggregate::new(Aggregation::Sum, seconds(1)), "p".into()).unwrap();
    let err = windower
        .push(Instant::number("yesterday", 7.0), &mut Vec::new())
        .unwrap_err();
    assert!(
        matches!(&err, WindowError::Datetime { datetime, .. } if datetime == "yesterday"),
        "{err}"
    );
    let err = err.to_string();
    assert!(
        err.contains("\"yesterday\"") && err.contains("value 7"),
        "{err}"
    );
}

#[test]
fn a_count_window_carries_datetimes_without_reading_them() {
    let events = run(
        &Aggregate::new(Aggregation::Count, Window::Count { size: 2 }),
        vec![Instant::number("a", 1.0), Instant::number("b", 1.0)],
    );
    assert_eq!(
        (
            events[0].window_start.as_str(),
            events[0].window_end.as_str()
        ),
        ("a", "b")
    );
}

#[test]
fn a_value_of_the_wrong_type_fails_naming_the_record() {
    let aggregate = Aggregate::new(Aggregation::Count, Window::Count { size: 2 });
    let mut windower = Windower::new(&aggregate, "p".into())
        .unwrap()
        .with_property_type(PropertyType::TText);
    let err = windower.push(num(0, 1.5), &mut Vec::new()).unwrap_err();
    assert!(
        matches!(
            err,
            WindowError::WrongType {
                wanted: "texts",
                ..
            }
        ),
        "{err}"
    );
    let err = err.to_string();
    assert!(
        err.contains(&at(0)) && err.contains("1.5") && err.contains("texts"),
        "{err}"
    );
    let mut windower =
        Windower::new(&Aggregate::new(Aggregation::Avg, seconds(1)), "p".into()).unwrap();
    let text = Instant {
        datetime: at(0),
        value: Value::Text("fast".into()),
    };
    assert!(
        windower
            .push(text, &mut Vec::new())
            .unwrap_err()
            .to_string()
            .contains("numbers")
    );
}

/// The semantics written the slow, obvious way: every record kept.
fn brute_force_hopping(span: i64, hop: i64, input: &[(i64, f64)]) -> Vec<(f64, u64, u64)> {
    let mut out = Vec::new();
    let mut records: Vec<(i64, f64)> = Vec::new();
    let mut next: Option<i64> = None;
    let mut late = 0;
    let emit = |b: i64, records: &[(i64, f64)], late: &mut u64, out: &mut Vec<(f64, u64, u64)>| {
        let inside: Vec<f64> = records
            .iter()
            .filter(|(t, _)| b - span <= *t && *t < b)
            .map(|r| r.1)
            .collect();
        if !inside.is_empty() {
            let max = inside.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            out.push((max, inside.len() as u64, std::mem::take(late)));
        }
    };
    for &(t, v) in input {
        let b = *next.get_or_insert(t - t.rem_euclid(hop) + hop);
        if (t + span) - (t + span).rem_euclid(hop) < b {
            late += 1;
            continue;
        }
        let mut b = b;
        while b <= t {
            emit(b, &records, &mut late, &mut out);
            b += hop;
            records.retain(|r| r.0 >= b - span);
            if records.is_empty() {
                b = b.max(t - t.rem_euclid(hop) + hop);
            }
        }
        next = Some(b);
        records.push((t, v));
    }
    if let Some(mut b) = next {
        while !records.is_empty() {
            emit(b, &records, &mut late, &mut out);
            b += hop;
            records.retain(|r| r.0 >= b - span);
        }
    }
    out
}

#[test]
fn hopping_buckets_agree_with_keeping_every_record() {
    let mut seed: u64 = 42;
    let mut random = move |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    for (size, hop) in [(3, 1), (3, 2), (6, 4), (5, 5), (7, 3)] {
        let mut t = 100;
        let input: Vec<(i64, f64)> = (0..2000)
            .map(|_| {
                // Mostly forward, sometimes a gap, sometimes back in time.
                t += match random(10) {
                    0 => 20,
                    1 => -(random(12) as i64),
                    _ => random(2) as i64,
                };
                (t, random(1000) as f64)
            })
            .collect();
        let want = brute_force_hopping(size, hop, &input);
        let events = run(
            &Aggregate::new(Aggregation::Max, hopping(size as u64, hop as u64)),
            input.iter().map(|&(t, v)| num(t, v)).collect(),
        );
        let got: Vec<(f64, u64, u64)> = events
            .iter()
            .map(|e| (e.value.as_f64().unwrap(), e.count, e.late))
            .collect();
        assert_eq!(got, want, "size {size} hop {hop}");
    }
}

#[test]
fn an_overflowing_sum_fails_naming_the_window_instead_of_writing_infinity() {
    let aggregate = Aggregate::new(Aggregation::Sum, Window::Count { size: 2 });
    let fail = |w: Windower| w.with_on_error(OnError::Fail);
    let mut windower = fail(Windower::new(&aggregate, "p".into()).unwrap());
    let mut out = Vec::new();
    windower.push(num(0, 1e308), &mut out).unwrap();
    let err = windower.push(num(1, 1e308), &mut out).unwrap_err();
    assert!(
        matches!(
            err,
            WindowError::Overflow {
                aggregation: Aggregation::Sum,
                ..
            }
        ),
        "{err}"
    );
    let err = err.to_string();
    assert!(
        err.contains("SUM") && err.contains(&at(0)) && err.contains("overflows"),
        "{err}"
    );
    windower.push(num(2, f64::MAX), &mut out).unwrap();
    windower.push(num(3, f64::MAX), &mut out).unwrap_err();
    let mut windower = fail(Windower::new(&aggregate, "p".into()).unwrap());
    windower.push(num(0, f64::MAX), &mut out).unwrap();
    windower.push(num(0, f64::MAX), &mut out).unwrap_err();
    windower.push(num(1, f64::MAX), &mut out).unwrap();
    assert!(windower.finish(&mut out).is_ok(), "one record is finite");
    assert_eq!(out.len(), 1);
}

#[test]
fn an_overflowing_window_is_skipped_by_default_and_the_next_window_follows() {
    // TUMBLING 10 s: [0, 10) overflows, [10, 20) and [20, 30) do not.
    let aggregate = Aggregate::new(Aggregation::Sum, seconds(10));
    let mut windower = Windower::new(&aggregate, "p".into()).unwrap();
    let mut out = Vec::new();
    for (t, v) in [
        (1, f64::MAX),
        (2, f64::MAX),
        (11, 4.0),
        (12, 6.0),
        (21, 1.0),
    ] {
        windower.push(num(t, v), &mut out).unwrap();
    }
    windower.skip(3); // three records a transform had no result for
    windower.finish(&mut out).unwrap();
    assert_eq!(
        windower.take_skipped(),
        5,
        "the overflowing window's 2, and 3"
    );
    assert_eq!(windower.take_skipped(), 0, "taken once");
    let got: Vec<(String, f64, u64)> = out
        .iter()
        .map(|e| {
            (
                e.datetime().to_owned(),
                e.value().as_f64().unwrap(),
                e.skipped(),
            )
        })
        .collect();
    // The window after the overflowing one carries its records; the next
    // event after `skip` carries those.
    assert_eq!(got, [(at(12), 10.0, 2), (at(21), 1.0, 3)]);
}

#[test]
fn hopping_state_stays_within_span_over_gcd_buckets() {
    let aggregate = Aggregate::new(Aggregation::Avg, hopping(6, 4));
    let mut windower = Windower::new(&aggregate, "p".into()).unwrap();
    let mut out = Vec::new();
    for i in 0..100_000 {
        windower.push(num(i / 10, 1.0), &mut out).unwrap();
        if let Mode::Time(time) = &windower.mode {
            assert!(
                time.buckets.len() <= 6 / 2 + 1,
                "{} buckets",
                time.buckets.len()
            );
        }
    }
    // Boundaries 4, 8, …, 9996 have closed.
    assert_eq!(out.len(), 9996 / 4);
}

#[test]
fn a_windower_refuses_a_window_over_the_bucket_cap_even_unregistered() {
    // A window built in code skips the registration's checks; the windower
    // still refuses to run it (it would emit 3,153,600,000 events per record).
    let century = Window::Hopping {
        size: 876_000,
        unit: TimeUnit::Hours,
        hop: 1,
        hop_unit: TimeUnit::Seconds,
    };
    let e = Windower::new(&Aggregate::new(Aggregation::Avg, century), "p".into()).unwrap_err();
    assert_eq!(e.field, "window.hop");
    assert!(e.message.contains("at most 10000"), "{e}");
}

/// Seconds since the epoch of `at(second)`.
fn epoch(second: i64) -> i64 {
    1_767_225_600 + second
}

fn windows(out: Vec<Event>) -> Vec<WindowEvent> {
    out.into_iter()
        .map(|e| match e {
            Event::Window(w) => w,
            other => panic!("expected a window event, got {other:?}"),
        })
        .collect()
}

#[test]
fn with_grace_a_tumbling_window_closes_only_once_a_record_passes_its_end_plus_grace() {
    let aggregate = Aggregate::new(Aggregation::Sum, seconds(5)).with_grace(3);
    let mut windower = Windower::new(&aggregate, "p".into()).unwrap();
    let mut out = Vec::new();
    windower.push(num(1, 1.0), &mut out).unwrap();
    windower.push(num(6, 2.0), &mut out).unwrap(); // [0, 5) stays open: 6 − 3 < 5
    windower.push(num(4, 4.0), &mut out).unwrap(); // on time, within the grace
    assert!(out.is_empty());
    windower.push(num(8, 8.0), &mut out).unwrap(); // 8 − 3 = 5 closes [0, 5)
    windower.push(num(3, 100.0), &mut out).unwrap(); // late now
    windower.push(num(13, 16.0), &mut out).unwrap(); // closes [5, 10)
    windower.finish(&mut out).unwrap();
    let events = windows(out);
    assert_eq!(numbers(&events), [(5.0, 2), (10.0, 2), (16.0, 1)]);
    assert_eq!(events[1].late, 1);
    assert!(events[2].partial);
}

#[test]
fn the_clock_closes_a_window_without_a_later_record_and_makes_older_records_late() {
    let aggregate = Aggregate::new(Aggregation::Sum, seconds(5)).with_grace(2);
    let mut windower = Windower::new(&aggregate, "p".into()).unwrap();
    let mut out = Vec::new();
    windower.push(num(1, 1.0), &mut out).unwrap();
    windower.push(num(3, 2.0), &mut out).unwrap();
    assert_eq!(windower.deadline(), Some(epoch(5) + 2));
    windower.advance(epoch(6), &mut out).unwrap(); // 6 − 2 < 5: not yet
    assert!(out.is_empty());
    windower.advance(epoch(7), &mut out).unwrap();
    assert_eq!(numbers(&windows(std::mem::take(&mut out))), [(3.0, 2)]);
    assert_eq!(windower.deadline(), None, "no window holds records");
    windower.push(num(4, 100.0), &mut out).unwrap(); // its window was emitted
    windower.advance(epoch(30), &mut out).unwrap(); // nothing open: nothing to emit
    windower.push(num(20, 7.0), &mut out).unwrap(); // [20, 25) ended by 30 − 2: late
    windower.push(num(26, 9.0), &mut out).unwrap();
    windower.finish(&mut out).unwrap();
    let events = windows(out);
    assert_eq!(numbers(&events), [(9.0, 1)]);
    assert_eq!(events[0].late, 2);
}

#[test]
fn the_clock_closes_each_hopping_boundary_that_holds_records() {
    let aggregate = Aggregate::new(Aggregation::Sum, hopping(3, 1));
    let mut windower = Windower::new(&aggregate, "p".into()).unwrap();
    let mut out = Vec::new();
    windower.push(num(10, 1.0), &mut out).unwrap();
    assert_eq!(windower.deadline(), Some(epoch(11)));
    windower.advance(epoch(1000), &mut out).unwrap();
    assert_eq!(numbers(&windows(out)), [(1.0, 1); 3]);
    assert_eq!(windower.deadline(), None);
}

#[test]
fn a_count_window_ignores_the_clock() {
    let aggregate = Aggregate::new(Aggregation::Sum, Window::Count { size: 2 });
    let mut windower = Windower::new(&aggregate, "p".into()).unwrap();
    let mut out = Vec::new();
    windower.push(num(1, 1.0), &mut out).unwrap();
    windower.advance(epoch(1000), &mut out).unwrap();
    assert_eq!(windower.deadline(), None);
    windower.push(num(0, 2.0), &mut out).unwrap();
    assert_eq!(numbers(&windows(out)), [(3.0, 2)]);
}

/// A record at `second` (plus a fraction that makes every datetime of a
/// session distinct), valued `v`.
fn distinct(second: i64, i: usize, v: f64) -> Instant {
    let at = at(second);
    Instant::number(format!("{}.{i:06}Z", at.trim_end_matches('Z')), v)
}

/// Every event `windower` emits for `input`, then at the end of the source,
/// as JSON, each with the index of the record that closed it (`input.len()`
/// at the end).
fn closed_by(mut windower: Windower, input: &[Instant]) -> Vec<(usize, Event)> {
    let mut events = Vec::new();
    for (i, instant) in input.iter().enumerate() {
        let mut out = Vec::new();
        windower.push(instant.clone(), &mut out).unwrap();
        events.extend(out.into_iter().map(|e| (i, e)));
    }
    let mut out = Vec::new();
    windower.finish(&mut out).unwrap();
    events.extend(out.into_iter().map(|e| (input.len(), e)));
    events
}

#[test]
fn a_windower_resumed_after_an_emitted_window_and_fed_the_tail_gives_the_same_later_windows() {
    let mut seed: u64 = 12;
    let mut random = move |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    // (span, hop, grace): tumbling, hops dividing the span or not, a grace.
    for (span, hop, grace) in [
        (5, 5, 0),
        (10, 5, 0),
        (9, 3, 2),
        (7, 3, 0),
        (12, 1, 4),
        (6, 4, 3),
    ] {
        let aggregate = Aggregate::new(Aggregation::Sum, hopping(span, hop)).with_grace(grace);
        let windower = || Windower::new(&aggregate, "p".into()).unwrap();
        let (span, hop) = (span as i64, hop as i64);
        let grid = Grid::new(span, hop).expect("the test's windows hop within their spans");
        let mut resumed = 0;
        for _session in 0..20 {
            let mut t = 1000;
            let secs: Vec<i64> = (0..150)
                .map(|_| {
                    // Mostly forward, sometimes a gap, sometimes back in
                    // time, sometimes a straggler (late, or within the grace).
                    let back = random(span as u64 + grace + 2) as i64;
                    match random(12) {
                        0 => t += 3 * span,
                        1 => t -= back,
                        2 | 3 => return t - back,
                        _ => t += random(3) as i64,
                    }
                    t
                })
                .collect();
            let input: Vec<Instant> = secs
                .iter()
                .enumerate()
                .map(|(i, &t)| distinct(t, i, random(100) as f64))
                .collect();
            let running = closed_by(windower(), &input);
            // What the server's ledger does: find each window's end from
            // its records and the window before; where it is known and the
            // records since the first the next windows need came in order,
            // a windower resumed there and fed them takes over.
            let mut emitted = None;
            for (j, (i, event)) in running.iter().enumerate() {
                let Event::Window(window) = event else {
                    unreachable!("a windower emits windows")
                };
                if *i == input.len() {
                    break;
                }
                let end = match resume::closed(window, grid, emitted) {
                    Some(Closed::Exactly(end)) => end,
                    Some(Closed::AtLeast(end)) => {
                        emitted = Some(end);
                        continue;
                    }
                    None => panic!("{window:?} fits no window after {emitted:?}"),
                };
                emitted = Some(end);
                let start = grid.next_start(end) - epoch(0);
                let from = secs[..=*i]
                    .iter()
                    .position(|&s| s >= start)
                    .unwrap_or(i + 1);
                if secs[from..=*i].iter().any(|&s| s < start) {
                    continue;
                }
                let tail = closed_by(windower().resumed_after(end), &input[from..]);
                let want: Vec<String> = running[j + 1..].iter().map(|(_, e)| e.to_json()).collect();
                let got: Vec<String> = tail.iter().map(|(_, e)| e.to_json()).collect();
                assert_eq!(
                    got, want,
                    "span {span} hop {hop} grace {grace}: resumed after the window ending at \
                     {end} (event {j}), fed from record {from}"
                );
                resumed += 1;
            }
        }
        assert!(
            resumed > 200,
            "span {span} hop {hop}: only {resumed} resumptions"
        );
    }
}

#[test]
fn a_resumed_windower_never_emits_a_window_ending_by_its_resume_point_and_counts_their_records_late()
 {
    // 10 s every 5 s, resumed after the window ending at 100 s.
    let aggregate = Aggregate::new(Aggregation::Sum, hopping(10, 5));
    let mut windower = Windower::new(&aggregate, "p".into())
        .unwrap()
        .resumed_after(epoch(100));
    let mut out = Vec::new();
    windower.push(num(93, 1.0), &mut out).unwrap(); // in [85, 95) and [90, 100): late
    windower.push(num(97, 2.0), &mut out).unwrap(); // in [90, 100) and [95, 105)
    assert!(out.is_empty());
    assert_eq!(windower.deadline(), Some(epoch(105)));
    windower.push(num(111, 4.0), &mut out).unwrap(); // closes [95, 105) and [100, 110)
    windower.finish(&mut out).unwrap();
    let events = windows(out);
    assert_eq!(numbers(&events), [(2.0, 1), (4.0, 1), (4.0, 1)]);
    assert_eq!(events[0].late, 1);
    assert_eq!(events[0].window_start, at(97));
    assert!(events[1].partial && events[2].partial);
}

#[test]
fn windows_count_their_bytes_as_they_grow_and_close_and_fail_past_the_budget() {
    let text = |second: i64, s: String| Instant {
        datetime: at(second),
        value: Value::Text(s),
    };
    let aggregate = Aggregate::new(Aggregation::CountDistinct, hopping(4, 2));
    let budget = Arc::new(StateBudget::new(100_000));
    let mut windower = Windower::new(&aggregate, "p".into())
        .unwrap()
        .with_budget(Some(budget.clone()));
    let mut out = Vec::new();
    for i in 0..10 {
        windower
            .push(text(0, format!("{i:0>1000}")), &mut out)
            .unwrap();
    }
    // Each text twice: in its bucket's set and in the distinct index.
    let ten = windower.state_bytes();
    assert!((20 * 1064..20 * 1064 + 1000).contains(&ten), "{ten}");
    assert_eq!(budget.used(), ten, "published as it grows");
    // A text seen before adds only its record's datetime.
    windower
        .push(text(1, format!("{:0>1000}", 3)), &mut out)
        .unwrap();
    assert!(windower.state_bytes() < ten + 100);
    // Past both windows holding them, their buckets go, and their bytes.
    windower.push(text(10, "new".into()), &mut out).unwrap();
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(windower.state_bytes() < 1000, "{}", windower.state_bytes());
    // 100 distinct texts of 1 KiB are over 100,000 bytes.
    let failure = (0..100)
        .find_map(|i| {
            windower
                .push(text(11, format!("{i:y>1000}")), &mut out)
                .err()
        })
        .expect("the budget is reached");
    assert!(matches!(failure, WindowError::OverBudget(_)), "{failure}");
    let failure = failure.to_string();
    assert!(
        failure
            .starts_with("query state reached the embedding program's max_query_state (97.7 KiB)"),
        "{failure}"
    );
    drop(windower);
    assert_eq!(budget.used(), 0, "a dropped windower holds nothing");
}

#[test]
fn the_distinct_index_gives_the_windows_a_union_of_the_buckets_gives() {
    // A small generator: the same seed, the same input.
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for round in 0..200 {
        let (span, hop) = [(4, 2), (6, 4), (10, 1), (9, 3), (5, 5)][round % 5];
        let grace = [0, 0, 3][round % 3];
        let aggregate =
            Aggregate::new(Aggregation::CountDistinct, hopping(span, hop)).with_grace(grace);
        let mut indexed = Windower::new(&aggregate, "p".into()).unwrap();
        let mut reference = Windower::new(&aggregate, "p".into())
            .unwrap()
            .without_distinct_index();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let mut t = 0;
        for _ in 0..200 {
            match next(10) {
                // The clock, a little ahead of the records at times.
                0 => {
                    let now = 1_767_225_600 + t + next(4) as i64;
                    indexed.advance(now, &mut a).unwrap();
                    reference.advance(now, &mut b).unwrap();
                }
                step => {
                    // Mostly forward; now and then back, within the grace
                    // or late.
                    t = if step == 1 {
                        (t - next(6) as i64).max(0)
                    } else {
                        t + next(3) as i64
                    };
                    let text = Value::Text(format!("v{}", next(8)));
                    let instant = Instant {
                        datetime: at(t),
                        value: text,
                    };
                    indexed.push(instant.clone(), &mut a).unwrap();
                    reference.push(instant, &mut b).unwrap();
                }
            }
        }
        indexed.finish(&mut a).unwrap();
        reference.finish(&mut b).unwrap();
        assert_eq!(a, b, "round {round}");
        assert!(!a.is_empty());
    }
}

mod grid {
    use proptest::prelude::*;

    use super::*;

    /// Valid `HOPPING` windows (at most 1,000 windows per record) and an
    /// instant within a day of 2026's first second.
    fn window_and_instant() -> impl Strategy<Value = (i64, i64, i64)> {
        (1i64..=600)
            .prop_flat_map(|span| (Just(span), (span + 999) / 1000..=span, 0i64..86_400))
            .prop_map(|(span, hop, t)| (span, hop.max(1), t))
    }

    proptest! {
        /// The windower closes the windows holding a record exactly at the
        /// ends its grid names, one per end, as many as the grid counts;
        /// and the resume path reads each event back as closed at that end.
        #[test]
        fn the_windower_and_the_resume_path_close_windows_at_the_grids_ends(
            (span, hop, t) in window_and_instant()
        ) {
            let grid = Grid::new(span, hop).expect("hop within span by construction");
            let aggregate = Aggregate::new(Aggregation::Count, hopping(span as u64, hop as u64));
            let mut windower = Windower::new(&aggregate, "p".into()).expect("a valid window");
            let mut out = Vec::new();
            windower.push(num(t, 1.0), &mut out).expect("a number");
            prop_assert!(out.is_empty());
            let secs = epoch(t);
            let (first, last) = (grid.end_after(secs), grid.last_end(secs));
            let mut emitted = None;
            let mut end = first;
            while end <= last {
                windower.advance(end - 1, &mut out).expect("counts");
                prop_assert!(out.is_empty(), "a window closed before {end}");
                windower.advance(end, &mut out).expect("counts");
                let events = windows(std::mem::take(&mut out));
                prop_assert_eq!(events.len(), 1, "one window ends at {}", end);
                let read = match resume::closed(&events[0], grid, emitted) {
                    Some(Closed::Exactly(e) | Closed::AtLeast(e)) => e,
                    None => return Err(TestCaseError::fail("no window read back")),
                };
                prop_assert_eq!(read, end);
                emitted = Some(end);
                end += grid.hop();
            }
            windower.advance(last + 10 * span, &mut out).expect("counts");
            prop_assert!(out.is_empty(), "a window after the record's last");
            let count = (last - first) / hop + 1;
            prop_assert!(count == span / hop || count == (span + hop - 1) / hop);
        }
    }
}

/// Positions of a HOPPING window, closed live by the clock with a grace:
/// each window's aggregate is what one accumulator over exactly the
/// window's positions gives (each window measured whole, as TUMBLING),
/// though the windower keeps buckets of `gcd(span, hop)` and joins them.
#[test]
fn a_hopping_window_of_positions_measures_each_window_whole_with_grace_and_clock() {
    use crate::geo::{AggregateValue, PositionAcc, PositionAggregate};
    let base = epoch(0) * 1_000_000;
    // Irregular steps (sub-second to tens of seconds), stops, a long jump.
    let mut track: Vec<(i64, f64, f64)> = Vec::new();
    let (mut us, mut x, mut y, mut seed) = (base + 300_000, 1.0, 50.0, 0x2020_u64);
    for i in 0..160 {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let r = (seed >> 33) as f64 / (1u64 << 31) as f64;
        us += if i == 80 {
            47_000_000
        } else {
            (r * 9e6) as i64 + 1
        };
        if i % 11 != 3 {
            x += r * 0.01 - 0.004;
            y += 0.003 - r * 0.005;
        }
        track.push((us, x, y));
    }
    let (span, hop, grace) = (10i64, 4i64, 3i64);
    for aggregation in [
        Aggregation::Count,
        Aggregation::Extent,
        Aggregation::Centroid,
        Aggregation::Length,
        Aggregation::AvgSpeed,
        Aggregation::MaxSpeed,
    ] {
        let aggregate =
            Aggregate::new(aggregation, hopping(span as u64, hop as u64)).with_grace(grace as u64);
        let mut windower = Windower::new(&aggregate, "p".into())
            .unwrap()
            .with_property_type(PropertyType::TGeogPoint)
            .with_crs(Crs::Geodetic);
        let mut out = Vec::new();
        for &(t, x, y) in &track {
            let value = Value::Point(crate::vocab::Point::new(x, y));
            let datetime = datetime::format_micros(t);
            windower
                .push(Instant { datetime, value }, &mut out)
                .unwrap();
            // The clock at the record's second plus the grace: the windows
            // ending by then close without a later record.
            windower.advance(t / 1_000_000 + grace, &mut out).unwrap();
        }
        windower.finish(&mut out).unwrap();
        let events = windows(out);
        // Each window end, every multiple of the hop, over its positions.
        let (first, last) = (track[0].0 / 1_000_000, track[159].0 / 1_000_000);
        let mut expected = Vec::new();
        let mut end = first - first.rem_euclid(hop) + hop;
        while end - span <= last {
            let inside: Vec<_> = track
                .iter()
                .filter(|(t, _, _)| (end - span..end).contains(&(t / 1_000_000)))
                .collect();
            let mut acc = PositionAcc::new(Crs::Geodetic);
            for &&(t, x, y) in &inside {
                acc.push(t, crate::geo::Point::new(x, y));
            }
            let what = aggregation
                .of_positions()
                .unwrap_or(PositionAggregate::Count);
            let value = match acc.result(what, 0, 0) {
                AggregateValue::Number(v) => Some(vec![v]),
                AggregateValue::Point(p) => Some(vec![p.x, p.y]),
                AggregateValue::BBox(b) => Some(b.to_vec()),
                AggregateValue::None => None,
            };
            if let (Some(value), Some(&&(t0, _, _))) = (value, inside.first()) {
                expected.push((datetime::format_micros(t0), inside.len() as u64, value));
            }
            end += hop;
        }
        assert!(
            expected.len() > 40,
            "{aggregation}: {} windows",
            expected.len()
        );
        assert_eq!(events.len(), expected.len(), "{aggregation}: windows");
        for (e, (start, count, want)) in events.iter().zip(&expected) {
            assert_eq!((&e.window_start, e.count), (start, *count), "{aggregation}");
            let got: Vec<f64> = match &e.value {
                Value::Number(v) => vec![*v],
                Value::Point(p) => vec![p.x, p.y],
                Value::BBox(b) => b.to_vec(),
                other => panic!("{other:?}"),
            };
            for (g, w) in got.iter().zip(want) {
                assert!(
                    (g - w).abs() <= 1e-12 * w.abs(),
                    "{aggregation} at {start}: {g} vs {w}"
                );
            }
        }
    }
}

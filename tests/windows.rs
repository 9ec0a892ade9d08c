//! Windowed aggregation on the `local` engine and through `mfstream run`:
//! the Go tier's conformance expectations, composition with a transform,
//! validation at submit, failures, partial windows and datetimes.

use std::io::Write;
use std::process::{Output, Stdio};

use mfstream_engine::LocalEngine;
use mfstream_engine::{EngineError, Source, StreamEngine};
use mfstream_model::aggregate::{Aggregate, TimeUnit, Window};
use mfstream_model::ops::Transform;
use mfstream_model::{
    Aggregation, Event, Instant, PropertyType, QuerySpec, QueryStatus, Value, WindowEvent,
};

use crate::util::*;

fn at(second: u32) -> String {
    format!("2026-01-01T00:00:{second:02}Z")
}

fn count(size: u64) -> Window {
    Window::Count { size }
}

fn hopping(size: u64, hop: u64) -> Window {
    Window::Hopping {
        size,
        unit: TimeUnit::Seconds,
        hop,
        hop_unit: TimeUnit::Seconds,
    }
}

fn tumbling(size: u64) -> Window {
    Window::Tumbling {
        size,
        unit: TimeUnit::Seconds,
    }
}

/// Runs an aggregate on the local engine; the window events and the status.
async fn run_local(spec: QuerySpec, input: Vec<Instant>) -> (Vec<WindowEvent>, QueryStatus) {
    let handle = LocalEngine::new()
        .submit(spec, Source::from_instants(input))
        .await
        .expect("a valid query starts");
    let (events, status) = collect(handle).await;
    let windows = events
        .into_iter()
        .map(|e| match e {
            Event::Window(w) => w,
            other => panic!("expected a window event, got {other:?}"),
        })
        .collect();
    (windows, status)
}

fn aggregate(t: PropertyType, aggregation: Aggregation, window: Window) -> QuerySpec {
    QuerySpec::aggregate("p", t, None, Aggregate::new(aggregation, window))
}

fn values(events: &[WindowEvent]) -> Vec<(Value, u64)> {
    events.iter().map(|e| (e.value.clone(), e.count)).collect()
}

#[tokio::test]
async fn a_count_window_of_3_over_2_4_6_gives_count_sum_avg_min_max() {
    let input = || {
        [2.0, 4.0, 6.0]
            .into_iter()
            .zip(0..)
            .map(|(v, s)| Instant::number(at(s), v))
            .collect::<Vec<_>>()
    };
    for (aggregation, want) in [
        (Aggregation::Count, 3.0),
        (Aggregation::Sum, 12.0),
        (Aggregation::Avg, 4.0),
        (Aggregation::Min, 2.0),
        (Aggregation::Max, 6.0),
    ] {
        let spec = aggregate(PropertyType::TReal, aggregation, count(3));
        let (events, status) = run_local(spec, input()).await;
        assert_eq!(status, QueryStatus::Completed);
        assert_eq!(values(&events), [(Value::Number(want), 3)], "{aggregation}");
    }
}

#[tokio::test]
async fn count_distinct_over_a_b_a_gives_2() {
    let input = ["a", "b", "a"]
        .into_iter()
        .zip(0..)
        .map(|(v, s)| Instant {
            datetime: at(s),
            value: Value::Text(v.into()),
        })
        .collect();
    let spec = aggregate(PropertyType::TText, Aggregation::CountDistinct, count(3));
    let (events, _) = run_local(spec, input).await;
    assert_eq!(values(&events), [(Value::Number(2.0), 3)]);
}

#[tokio::test]
async fn any_all_count_true_over_t_f_f_give_true_false_1() {
    let input = || {
        [true, false, false]
            .into_iter()
            .zip(0..)
            .map(|(v, s)| Instant {
                datetime: at(s),
                value: Value::Bool(v),
            })
            .collect::<Vec<_>>()
    };
    for (aggregation, want) in [
        (Aggregation::Any, Value::Bool(true)),
        (Aggregation::All, Value::Bool(false)),
        (Aggregation::CountTrue, Value::Number(1.0)),
    ] {
        let spec = aggregate(PropertyType::TBoolean, aggregation, count(3));
        let (events, _) = run_local(spec, input()).await;
        assert_eq!(values(&events), [(want, 3)], "{aggregation}");
    }
}

#[tokio::test]
async fn a_hopping_avg_of_3s_by_1s_over_10_to_50_gives_10_15_20_30_before_the_partials() {
    let input = (0..5)
        .map(|s| Instant::number(at(s), f64::from(10 * (s + 1))))
        .collect();
    let spec = aggregate(PropertyType::TReal, Aggregation::Avg, hopping(3, 1));
    let (events, status) = run_local(spec, input).await;
    assert_eq!(status, QueryStatus::Completed);
    let closed: Vec<(f64, u64)> = events
        .iter()
        .filter(|e| !e.partial)
        .map(|e| (e.value.as_f64().unwrap(), e.count))
        .collect();
    assert_eq!(closed, [(10.0, 1), (15.0, 2), (20.0, 3), (30.0, 3)]);
    let partial: Vec<f64> = events
        .iter()
        .filter(|e| e.partial)
        .map(|e| e.value.as_f64().unwrap())
        .collect();
    assert_eq!(partial, [40.0, 45.0, 50.0]);
}

#[tokio::test]
async fn a_transform_then_an_aggregate_windows_the_transformed_values() {
    let spec = QuerySpec::aggregate(
        "speed",
        PropertyType::TInteger,
        Some(Transform::new("mul", Some(0.5)).unwrap()),
        Aggregate::new(Aggregation::Sum, count(2)),
    );
    // The integers' halves are reals: the aggregate takes what the
    // transform gives.
    let input = (0..4).map(|s| Instant::number(at(s), 3.0)).collect();
    let (events, _) = run_local(spec, input).await;
    assert_eq!(
        values(&events),
        [(Value::Number(3.0), 2), (Value::Number(3.0), 2)]
    );
}

#[tokio::test]
async fn an_invalid_aggregate_is_refused_at_submit_listing_what_is_allowed() {
    let spec = aggregate(PropertyType::TText, Aggregation::Avg, count(3));
    let err = LocalEngine::new()
        .submit(spec, Source::from_instants([]))
        .await
        .unwrap_err();
    assert!(matches!(err, EngineError::InvalidQuery(_)), "{err}");
    assert!(
        err.to_string()
            .contains("TText allows COUNT, COUNT_DISTINCT"),
        "{err}"
    );
    let too_long_hop = aggregate(PropertyType::TReal, Aggregation::Avg, hopping(1, 2));
    let err = LocalEngine::new()
        .submit(too_long_hop, Source::from_instants([]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("window.hop"), "{err}");
}

#[tokio::test]
async fn the_local_engine_says_it_serves_aggregates_and_positions() {
    assert_eq!(
        LocalEngine::new().describe().serves,
        ["transform", "aggregate", "positions"]
    );
}

#[tokio::test]
async fn a_bad_datetime_mid_stream_delivers_the_windows_before_it_then_fails() {
    let mut input: Vec<Instant> = (0..4).map(|s| Instant::number(at(s), 1.0)).collect();
    input.push(Instant::number("2026-01-01 junk", 1.0));
    let spec = aggregate(PropertyType::TReal, Aggregation::Count, tumbling(2));
    let (events, status) = run_local(spec, input).await;
    assert_eq!(
        values(&events),
        [(Value::Number(2.0), 2)],
        "the closed window [0, 2) is delivered, the open one is not flushed"
    );
    let reason = failure(&status);
    assert!(reason.contains("2026-01-01 junk"), "{reason}");
}

#[tokio::test]
async fn the_open_window_is_flushed_as_partial_unless_emit_partial_is_false() {
    let input = || {
        (0..3)
            .map(|s| Instant::number(at(s), 1.0))
            .collect::<Vec<_>>()
    };
    let spec = aggregate(PropertyType::TReal, Aggregation::Count, tumbling(2));
    let (events, _) = run_local(spec.clone(), input()).await;
    let flags: Vec<(u64, bool)> = events.iter().map(|e| (e.count, e.partial)).collect();
    assert_eq!(flags, [(2, false), (1, true)]);
    let mut quiet = spec;
    if let mfstream_model::QueryKind::Aggregate { aggregate, .. } = &mut quiet.kind {
        aggregate.emit_partial = false;
    }
    let (events, status) = run_local(quiet, input()).await;
    assert_eq!(status, QueryStatus::Completed);
    assert_eq!(events.len(), 1);
}

#[tokio::test]
async fn a_stopped_query_does_not_flush_its_open_window() {
    let (sender, source) = Source::channel(1);
    let spec = aggregate(PropertyType::TReal, Aggregation::Count, tumbling(2));
    let mut handle = LocalEngine::new().submit(spec, source).await.unwrap();
    // The third record closes the first window: its event proves the
    // engine has seen every record sent.
    for s in 0..3 {
        sender.send(Instant::number(at(s), 1.0)).await.unwrap();
    }
    assert!(handle.next().await.is_some());
    handle.stop();
    assert!(handle.next().await.is_none());
    assert_eq!(handle.status(), QueryStatus::Stopped);
}

#[tokio::test]
async fn datetimes_in_every_mobilitydb_form_share_one_time_line() {
    let input = [
        "2026-01-01T00:00:00Z",
        "2026-01-01 00:00:01+00",
        "2026-01-01T00:00:02.5 +00",
        "2026-01-01T05:30:03+05:30",
        "2025-12-31T21:00:04-03",
        "2026-01-01T00:00:05",
    ]
    .into_iter()
    .map(|t| Instant::number(t, 1.0))
    .collect();
    let spec = aggregate(PropertyType::TReal, Aggregation::Count, tumbling(3));
    let (events, _) = run_local(spec, input).await;
    assert_eq!(
        values(&events),
        [(Value::Number(3.0), 3), (Value::Number(3.0), 3)]
    );
    assert_eq!(events[1].window_start, "2026-01-01T05:30:03+05:30");
    assert_eq!(events[1].window_end, "2026-01-01T00:00:05");
}

#[tokio::test]
async fn late_records_are_skipped_and_counted_in_the_next_event() {
    let input = vec![
        Instant::number(at(4), 1.0),
        Instant::number(at(1), 100.0),
        Instant::number(at(5), 1.0),
    ];
    let spec = aggregate(PropertyType::TReal, Aggregation::Sum, tumbling(2));
    let (events, _) = run_local(spec, input).await;
    let got: Vec<(f64, u64)> = events
        .iter()
        .map(|e| (e.value.as_f64().unwrap(), e.late))
        .collect();
    assert_eq!(got, [(2.0, 1)]);
}

fn run_cli(name: &str, args: &[&str], input: &str) -> Output {
    let dir = TempDir::new(name);
    let mut child = mfstream_command(dir.path())
        .arg("run")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn lines(output: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn run_computes_a_tumbling_avg_over_a_file() {
    let dir = TempDir::new("windows-file");
    let output = mfstream_command(dir.path())
        .args(["run", "--property", "speed", "--query"])
        .arg(r#"{"aggregation":"AVG","window":{"type":"TUMBLING","size":10,"unit":"SECONDS"}}"#)
        .arg(root().join("examples/speed.ndjson"))
        .output()
        .unwrap();
    assert!(output.status.success());
    let events = lines(&output);
    assert_eq!(events.len(), 2);
    let first = &events[0];
    // The Go tier's key order.
    let raw = String::from_utf8_lossy(&output.stdout);
    let line = raw.lines().next().unwrap();
    let at = |key: &str| line.find(&format!("\"{key}\":")).unwrap();
    let keys = [
        "windowStart",
        "windowEnd",
        "property",
        "aggregation",
        "value",
        "count",
    ];
    assert!(keys.windows(2).all(|k| at(k[0]) < at(k[1])), "{line}");
    assert_eq!(first["windowStart"], "2026-01-01T00:00:00Z");
    assert_eq!(first["windowEnd"], "2026-01-01T00:00:09Z");
    assert_eq!(first["count"], 10);
    assert_eq!(events[1]["partial"], true);
}

#[test]
fn run_windows_text_and_boolean_instants_by_type() {
    let text = "{\"datetime\":\"2026-01-01T00:00:00Z\",\"value\":\"a\"}\n\
                {\"datetime\":\"2026-01-01T00:00:01Z\",\"value\":\"b\"}\n\
                {\"datetime\":\"2026-01-01T00:00:02Z\",\"value\":\"a\"}\n";
    let output = run_cli(
        "windows-text",
        &[
            "--type",
            "TText",
            "--query",
            r#"{"aggregation":"COUNT_DISTINCT","window":{"type":"COUNT","size":3}}"#,
        ],
        text,
    );
    assert!(output.status.success());
    assert_eq!(lines(&output)[0]["value"], 2);
    let booleans = "{\"datetime\":\"2026-01-01T00:00:00Z\",\"value\":true}\n\
                    {\"datetime\":\"2026-01-01T00:00:01Z\",\"value\":false}\n";
    let output = run_cli(
        "windows-bool",
        &[
            "--query",
            r#"{"type":"TBoolean","aggregation":"ALL","window":{"type":"COUNT","size":2}}"#,
        ],
        booleans,
    );
    assert!(output.status.success());
    assert_eq!(lines(&output)[0]["value"], false);
}

#[test]
fn run_refuses_an_aggregation_not_defined_for_the_type_with_exit_2() {
    let output = run_cli(
        "windows-refuse",
        &[
            "--type",
            "TText",
            "--query",
            r#"{"aggregation":"SUM","window":{"type":"COUNT","size":3}}"#,
        ],
        "",
    );
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("aggregation") && stderr.contains("TText allows COUNT, COUNT_DISTINCT"),
        "{stderr}"
    );
}

#[test]
fn run_fails_with_exit_1_naming_an_unparsable_datetime() {
    let input = "{\"datetime\":\"2026-01-01T00:00:00Z\",\"value\":1}\n\
                 {\"datetime\":\"2026-01-01T00:00:01Z\",\"value\":1}\n\
                 {\"datetime\":\"soon\",\"value\":1}\n";
    let output = run_cli(
        "windows-bad-datetime",
        &[
            "--query",
            r#"{"aggregation":"COUNT","window":{"type":"TUMBLING","size":1,"unit":"SECONDS"}}"#,
        ],
        input,
    );
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(lines(&output).len(), 1, "the closed window is delivered");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("\"soon\""), "{stderr}");
}

fn hours_by_hours(size: u64, hop: u64) -> Window {
    Window::Hopping {
        size,
        unit: TimeUnit::Hours,
        hop,
        hop_unit: TimeUnit::Hours,
    }
}

/// Two records a century apart (36,524 days: a little more than 876,000
/// hours), values 1 and 2.
fn a_century_apart() -> Vec<Instant> {
    vec![
        Instant::number("2026-01-01T00:00:00Z", 1.0),
        Instant::number("2126-01-01T00:00:00Z", 2.0),
    ]
}

/// `n` one-record windows of the record at `datetime` with value `v`.
fn one_record_windows(n: usize, datetime: &str, v: f64, partial: bool) -> Vec<String> {
    let partial = if partial { r#","partial":true"# } else { "" };
    let line = format!(
        r#"{{"windowStart":"{datetime}","windowEnd":"{datetime}","property":"p","aggregation":"AVG","value":{v},"count":1{partial}}}"#
    );
    vec![line; n]
}

async fn run_local_json(spec: QuerySpec, input: Vec<Instant>) -> (Vec<String>, QueryStatus) {
    let handle = LocalEngine::new()
        .submit(spec, Source::from_instants(input))
        .await
        .expect("a valid query starts");
    let (events, status) = collect(handle).await;
    (events.iter().map(Event::to_json).collect(), status)
}

#[tokio::test]
async fn a_hopping_window_of_876000_hours_by_1_second_is_refused_naming_the_bucket_cap() {
    // Regression: it was accepted, and two records a century apart made the
    // windower build billions of events in memory.
    let window = Window::Hopping {
        size: 876_000,
        unit: TimeUnit::Hours,
        hop: 1,
        hop_unit: TimeUnit::Seconds,
    };
    let spec = aggregate(PropertyType::TReal, Aggregation::Avg, window);
    let err = LocalEngine::new()
        .submit(spec, Source::from_instants(a_century_apart()))
        .await
        .expect_err("over the cap");
    let EngineError::InvalidQuery(e) = err else {
        panic!("expected an invalid query, got {err:?}");
    };
    assert_eq!(e.field, "window.hop");
    assert!(
        e.message.contains("keeps 3153600000 buckets")
            && e.message.contains(&format!(
                "at most {}",
                mfstream_model::aggregate::MAX_WINDOW_BUCKETS
            )),
        "{e}"
    );
    let registration = mfstream_model::Registration::from_json(
        r#"{"aggregation":"AVG","window":{"type":"HOPPING","size":876000,"unit":"HOURS","hop":1,"hopUnit":"SECONDS"}}"#,
    )
    .unwrap();
    let refused = registration
        .into_spec("p", PropertyType::TReal)
        .unwrap_err();
    assert_eq!(refused, e);
}

#[tokio::test]
async fn a_hopping_window_at_the_windows_per_record_cap_over_records_a_century_apart_emits_each_window_once()
 {
    let cap = mfstream_model::aggregate::MAX_WINDOWS_PER_RECORD as usize;
    let spec = aggregate(
        PropertyType::TReal,
        Aggregation::Avg,
        hopping(mfstream_model::aggregate::MAX_WINDOWS_PER_RECORD, 1),
    );
    let (events, status) = run_local_json(spec, a_century_apart()).await;
    assert_eq!(status, QueryStatus::Completed);
    // Each record is in `cap` windows; the century between holds none and
    // costs nothing.
    let mut want = one_record_windows(cap, "2026-01-01T00:00:00Z", 1.0, false);
    want.extend(one_record_windows(cap, "2126-01-01T00:00:00Z", 2.0, true));
    assert_eq!(events.len(), want.len());
    assert!(events == want, "first differing event: {:?}", {
        let i = events.iter().zip(&want).position(|(a, b)| a != b);
        i.map(|i| (&events[i], &want[i]))
    });
}

#[tokio::test]
async fn a_century_long_hopping_window_over_records_a_century_apart_emits_ten_windows_each() {
    // 876,000 hours hopping by 87,600: every record is in 10 windows.
    let spec = aggregate(
        PropertyType::TReal,
        Aggregation::Avg,
        hours_by_hours(876_000, 87_600),
    );
    let (events, status) = run_local_json(spec, a_century_apart()).await;
    assert_eq!(status, QueryStatus::Completed);
    let mut want = one_record_windows(10, "2026-01-01T00:00:00Z", 1.0, false);
    want.extend(one_record_windows(10, "2126-01-01T00:00:00Z", 2.0, true));
    assert_eq!(events, want);
}

#[tokio::test]
async fn a_tumbling_second_over_records_a_century_apart_emits_two_windows() {
    let spec = aggregate(PropertyType::TReal, Aggregation::Avg, tumbling(1));
    let (events, status) = run_local_json(spec, a_century_apart()).await;
    assert_eq!(status, QueryStatus::Completed);
    let mut want = one_record_windows(1, "2026-01-01T00:00:00Z", 1.0, false);
    want.extend(one_record_windows(1, "2126-01-01T00:00:00Z", 2.0, true));
    assert_eq!(events, want);
}

#[test]
fn run_refuses_a_hopping_window_over_the_bucket_cap_with_exit_2() {
    let dir = TempDir::new("windows-cap");
    let input = dir.join("century.ndjson");
    std::fs::write(
        &input,
        "{\"datetime\":\"2026-01-01T00:00:00Z\",\"value\":1}\n\
         {\"datetime\":\"2126-01-01T00:00:00Z\",\"value\":2}\n",
    )
    .unwrap();
    let output = mfstream_command(dir.path())
        .args(["run", "--query"])
        .arg(r#"{"aggregation":"AVG","window":{"type":"HOPPING","size":876000,"unit":"HOURS","hop":1,"hopUnit":"SECONDS"}}"#)
        .arg(&input)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("window.hop") && stderr.contains("at most 10000"),
        "{stderr}"
    );
}

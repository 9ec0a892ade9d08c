//! `onError`: one bad value costs one result, not the query, on every
//! engine kind; `"fail"` keeps failing the query, naming the record.
//!
//! The checks here are shared: each engine kind's tests (the local engine
//! below, bridge jobs and plugins in their own sections) run the same
//! streams through [`skips_bad_records`] and [`fails_on_the_first`].

use std::f64::consts::E;

use mfstream_engine::LocalEngine;
use mfstream_engine::{Source, StreamEngine};
use mfstream_model::ops::Transform;
use mfstream_model::{Event, Instant, OnError, QuerySpec, QueryStatus, Registration};

use crate::util::*;

fn at(second: u32) -> String {
    format!("2026-01-01T00:00:{second:02}Z")
}

/// A stream for one operation with bad values in the middle, never last
/// (so an event follows every skip and carries it).
pub struct Case {
    pub op: &'static str,
    pub arg: Option<f64>,
    pub values: Vec<f64>,
}

/// ln of -1 and of 0, exp overflowing, div and mul overflowing: each in the
/// middle of good records.
pub fn cases() -> Vec<Case> {
    vec![
        Case {
            op: "ln",
            arg: None,
            values: vec![1.0, -1.0, E, 0.0, 1.0, E * E],
        },
        Case {
            op: "exp",
            arg: None,
            values: vec![0.0, 1000.0, 1.0],
        },
        Case {
            op: "div",
            arg: Some(1e-300),
            values: vec![1.0, 1e10, 2.0],
        },
        Case {
            op: "mul",
            arg: Some(1e300),
            values: vec![1.0, -1e300, 2.0],
        },
    ]
}

impl Case {
    pub fn transform(&self) -> Transform {
        Transform::new(self.op, self.arg).unwrap()
    }

    pub fn spec(&self, on_error: OnError) -> QuerySpec {
        QuerySpec::transform("speed", self.transform()).on_error(on_error)
    }

    pub fn input(&self) -> Vec<Instant> {
        let values = self.values.iter().enumerate();
        values
            .map(|(i, v)| Instant::number(at(i as u32), *v))
            .collect()
    }

    /// The records with a result, and their results, as the catalogue says.
    fn expected(&self) -> Vec<(String, f64)> {
        let t = self.transform();
        let input = self.input().into_iter();
        input
            .filter_map(|i| Some((i.datetime.clone(), t.apply(i.value.as_f64()?).ok()?)))
            .collect()
    }

    /// The first record with no result.
    pub fn first_bad(&self) -> String {
        let t = self.transform();
        let bad = self.values.iter().position(|v| t.apply(*v).is_err());
        at(bad.expect("every case has a bad record") as u32)
    }
}

/// Every event of a query, its final status and its `skipped` count.
pub async fn run(
    engine: &dyn StreamEngine,
    spec: QuerySpec,
    input: Vec<Instant>,
) -> (Vec<Event>, QueryStatus, u64) {
    let mut handle = engine
        .submit(spec, Source::from_instants(input))
        .await
        .expect("the query starts");
    let mut events = Vec::new();
    while let Some(batch) = handle.next_batch().await {
        events.extend(batch);
    }
    (events, handle.status(), handle.progress().skipped)
}

/// Under skip (given, and as the default): every good record's result with
/// its own datetime (no pairing shifted), the query completes, `skipped`
/// counts the bad ones and the events carry the same count. With
/// `precise`, each count rides on the event right after the bad records.
pub async fn skips_bad_records(engine: &dyn StreamEngine, precise: bool) {
    for case in cases() {
        for spec in [case.spec(OnError::Skip), case.spec(OnError::default())] {
            let (events, status, skipped) = run(engine, spec, case.input()).await;
            let name = format!("{} {:?} on {}", case.op, case.arg, engine.name());
            assert_eq!(status, QueryStatus::Completed, "{name}");
            let expected = case.expected();
            let got: Vec<(String, f64)> = events
                .iter()
                .map(|e| (e.datetime().to_owned(), e.value().as_f64().unwrap()))
                .collect();
            assert_eq!(got.len(), expected.len(), "{name}: {got:?}");
            for ((t, y), (want_t, want_y)) in got.iter().zip(&expected) {
                assert_eq!(t, want_t, "{name}");
                assert!((y - want_y).abs() <= 1e-9 * want_y.abs().max(1.0), "{name}");
            }
            let bad = (case.values.len() - expected.len()) as u64;
            assert_eq!(skipped, bad, "{name}: the query's count");
            let carried: u64 = events.iter().map(Event::skipped).sum();
            assert_eq!(carried, bad, "{name}: the events' counts");
            if precise {
                // The event after each run of bad records carries it.
                let t = case.transform();
                let mut owed = 0;
                let mut events = events.iter();
                for v in &case.values {
                    if t.apply(*v).is_err() {
                        owed += 1;
                    } else {
                        let event = events.next().unwrap();
                        assert_eq!(event.skipped(), std::mem::take(&mut owed), "{name}");
                    }
                }
            }
        }
    }
}

/// Under fail: the query fails at the first bad record, with the results
/// before it; with `names_datetime`, the reason names the record's datetime
/// (a version-1 job or plugin fails in its own words instead).
pub async fn fails_on_the_first(engine: &dyn StreamEngine, names_datetime: bool) {
    for case in cases() {
        let (events, status, skipped) = run(engine, case.spec(OnError::Fail), case.input()).await;
        let name = format!("{} {:?} on {}", case.op, case.arg, engine.name());
        let reason = failure(&status);
        if names_datetime {
            assert!(reason.contains(&case.first_bad()), "{name}: {reason}");
        }
        assert_eq!(skipped, 0, "{name}");
        assert!(
            events
                .iter()
                .all(|e| e.datetime() < case.first_bad().as_str()),
            "{name}: nothing after the bad record: {events:?}"
        );
    }
}

#[tokio::test]
async fn local_skips_bad_records_by_default_and_the_next_event_carries_the_count() {
    skips_bad_records(&LocalEngine::new(), true).await;
}

#[tokio::test]
async fn local_fails_at_a_bad_record_under_fail_naming_its_datetime() {
    fails_on_the_first(&LocalEngine::new(), true).await;
}

fn aggregate(body: &str) -> QuerySpec {
    Registration::from_json(body)
        .unwrap()
        .into_spec("speed", mfstream_model::PropertyType::TReal)
        .unwrap()
}

#[tokio::test]
async fn an_overflowing_window_is_skipped_and_counted_or_fails_naming_the_window() {
    // COUNT 2 windows: the first overflows (SUM of two maxima), the second
    // does not.
    let input = vec![
        Instant::number(at(0), f64::MAX),
        Instant::number(at(1), f64::MAX),
        Instant::number(at(2), 1.0),
        Instant::number(at(3), 2.0),
    ];
    let body = r#"{"aggregation":"SUM","window":{"type":"COUNT","size":2}}"#;
    let (events, status, skipped) = run(&LocalEngine::new(), aggregate(body), input.clone()).await;
    assert_eq!(status, QueryStatus::Completed);
    // The overflowing window's two records.
    assert_eq!(skipped, 2);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].value().as_f64(), Some(3.0));
    assert_eq!(events[0].skipped(), 2, "{}", events[0].to_json());
    assert!(events[0].to_json().ends_with(r#""count":2,"skipped":2}"#));
    let fail = r#"{"aggregation":"SUM","window":{"type":"COUNT","size":2},"onError":"fail"}"#;
    let (events, status, _) = run(&LocalEngine::new(), aggregate(fail), input).await;
    assert!(events.is_empty());
    let reason = failure(&status);
    assert!(
        reason.contains(&at(0)) && reason.contains(&at(1)) && reason.contains("overflows"),
        "{reason}"
    );
}

#[tokio::test]
async fn a_record_a_transform_cannot_compute_is_skipped_out_of_its_window() {
    // ln then AVG over COUNT 2: the record at 1 s (ln of -5) has no result;
    // the window holds the records at 0 s and 2 s.
    let body = r#"{"operation":"ln","aggregation":"AVG","window":{"type":"COUNT","size":2}}"#;
    let input = vec![
        Instant::number(at(0), 1.0),
        Instant::number(at(1), -5.0),
        Instant::number(at(2), E * E),
    ];
    let (events, status, skipped) = run(&LocalEngine::new(), aggregate(body), input).await;
    assert_eq!(status, QueryStatus::Completed);
    assert_eq!(skipped, 1);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].value().as_f64(), Some(1.0));
    assert_eq!(events[0].skipped(), 1);
    let json = events[0].to_json();
    assert!(
        json.contains(&format!(r#""windowEnd":"{}""#, at(2))),
        "{json}"
    );
}

/// `mfstream run --op ln` over 1, -1, 1, with `extra` arguments.
fn run_ln(name: &str, extra: &[&str]) -> std::process::Output {
    let dir = TempDir::new(name);
    let input = dir.join("in.ndjson");
    let mut text = Vec::new();
    for (i, v) in [1.0, -1.0, 1.0].iter().enumerate() {
        Instant::number(at(i as u32), *v).write_json(&mut text);
        text.push(b'\n');
    }
    std::fs::write(&input, text).unwrap();
    mfstream_command(dir.path())
        .args(["run", "--op", "ln"])
        .args(extra)
        .arg(&input)
        .output()
        .unwrap()
}

#[test]
fn run_skips_a_bad_record_by_default_and_fails_on_it_with_on_error_fail() {
    let output = run_ln("on-error-run-skip", &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines: Vec<serde_json::Value> = stdout(&output)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let datetimes: Vec<&str> = lines
        .iter()
        .map(|l| l["datetime"].as_str().unwrap())
        .collect();
    assert_eq!(datetimes, [at(0), at(2)]);
    assert_eq!(lines[1]["skipped"], 1);
    assert!(
        stderr(&output).contains("skipped 1 record"),
        "{}",
        stderr(&output)
    );
    let output = run_ln("on-error-run-fail", &["--on-error", "fail"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output).lines().count(), 1);
    assert!(stderr(&output).contains(&at(1)), "{}", stderr(&output));
    // An unknown policy is refused with the usage error.
    let output = run_ln("on-error-run-maybe", &["--on-error", "maybe"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
}

// Bridge jobs.

use mfstream_engine::{BridgeEngine, BridgeOptions, Framing};

/// A job run as `argv` speaking `protocol`: declared so to the host, and
/// for version 1 run as a job that never heard of version 2 would be (the
/// host passes `MFSTREAM_PROTOCOL=2` to every job; `env` overrides it).
fn job_engine(name: &str, argv: Vec<String>, framing: Framing, protocol: u32) -> BridgeEngine {
    let mut argv = argv;
    if protocol == 1 {
        argv.splice(0..0, ["env".to_owned(), "MFSTREAM_PROTOCOL=1".to_owned()]);
    }
    let mut options = BridgeOptions::new(name, argv);
    options.framing = framing;
    options.protocol = protocol.into();
    BridgeEngine::new(options)
}

fn reference(framing: Framing, protocol: u32) -> BridgeEngine {
    let argv = vec!["python3".into(), reference_job()];
    job_engine("reference", argv, framing, protocol)
}

fn native(framing: Framing, protocol: u32) -> BridgeEngine {
    let argv = vec![fastjob().display().to_string()];
    job_engine("fastjob", argv, framing, protocol)
}

#[tokio::test]
async fn reference_jobs_of_protocol_2_report_a_bad_record_in_both_framings() {
    for framing in [Framing::Value, Framing::Json] {
        for engine in [reference(framing, 2), native(framing, 2)] {
            // An error line in the answer's place: the count rides on the
            // answer right after it.
            skips_bad_records(&engine, true).await;
            // The job's error line names no datetime; the host pairs it.
            fails_on_the_first(&engine, true).await;
        }
    }
}

#[tokio::test]
async fn a_version_1_job_is_never_sent_a_bad_record_under_skip_and_fails_in_its_own_words() {
    // echo.sh answers every record it is sent: under skip it never sees the
    // bad ones (the host's guard), so the pairing holds.
    let mut options = sh_options("echo.sh");
    options.protocol = 1.into();
    let echo = BridgeEngine::new(options);
    for case in cases() {
        let (events, status, skipped) = run(&echo, case.spec(OnError::Skip), case.input()).await;
        assert_eq!(status, QueryStatus::Completed, "{}", case.op);
        let t = case.transform();
        let good: Vec<String> = case
            .input()
            .into_iter()
            .filter(|i| t.apply(i.value.as_f64().unwrap()).is_ok())
            .map(|i| i.datetime)
            .collect();
        let got: Vec<&str> = events.iter().map(Event::datetime).collect();
        assert_eq!(got, good, "{}", case.op);
        assert_eq!(
            skipped as usize,
            case.values.len() - good.len(),
            "{}",
            case.op
        );
    }
    // The reference jobs as version 1: the guard under skip; under fail
    // the job meets the record and dies with its message (line number).
    for framing in [Framing::Value, Framing::Json] {
        for engine in [reference(framing, 1), native(framing, 1)] {
            skips_bad_records(&engine, false).await;
            fails_on_the_first(&engine, false).await;
            let case = &cases()[0];
            let fail = case.spec(OnError::Fail);
            let (_, status, _) = run(&engine, fail, case.input()).await;
            let reason = failure(&status);
            assert!(
                reason.contains("line 2: ln is defined for positive values only")
                    && reason.contains("status 2"),
                "{framing:?}: {reason}"
            );
        }
    }
}

#[tokio::test]
async fn a_nan_answer_is_a_record_with_no_result_and_later_answers_keep_their_datetimes() {
    let abs = QuerySpec::transform("speed", Transform::new("abs", None).unwrap());
    let input: Vec<Instant> = [1.0, -2.0, 3.0, -4.0, 5.0]
        .iter()
        .enumerate()
        .map(|(i, v)| Instant::number(at(i as u32), *v))
        .collect();
    let engine = BridgeEngine::new(sh_options("nan_on_negative.sh"));
    let (events, status, skipped) = run(&engine, abs.clone(), input.clone()).await;
    assert_eq!(status, QueryStatus::Completed);
    let got: Vec<(&str, f64)> = events
        .iter()
        .map(|e| (e.datetime(), e.value().as_f64().unwrap()))
        .collect();
    assert_eq!(got, [(at(0).as_str(), 1.0), (&at(2), 3.0), (&at(4), 5.0)]);
    assert_eq!(skipped, 2);
    assert_eq!(events.iter().map(Event::skipped).sum::<u64>(), 2);
    let (events, status, _) = run(&engine, abs.on_error(OnError::Fail), input).await;
    let reason = failure(&status);
    assert!(
        reason.contains(&at(1)) && reason.contains("NaN"),
        "{reason}"
    );
    assert_eq!(events.len(), 1);
}

#[tokio::test]
async fn a_job_that_aggregates_reports_a_bad_record_and_an_overflowing_window() {
    let mut options = BridgeOptions::new("reference", vec!["python3".into(), reference_job()]);
    options.framing = Framing::Json;
    options.aggregates = true;
    options.protocol = 2.into();
    let engine = BridgeEngine::new(options);
    // SUM over COUNT 2 of ln: [0 s, 1 s] overflows? No: ln keeps it small;
    // the record at 2 s (ln of -1) has no result and is left out.
    let body = r#"{"operation":"ln","aggregation":"SUM","window":{"type":"COUNT","size":2}}"#;
    let values = [1.0, E, -1.0, E, E];
    let input: Vec<Instant> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Instant::number(at(i as u32), *v))
        .collect();
    let (events, status, skipped) = run(&engine, aggregate(body), input.clone()).await;
    assert_eq!(status, QueryStatus::Completed);
    assert_eq!(skipped, 1);
    let sums: Vec<f64> = events.iter().map(|e| e.value().as_f64().unwrap()).collect();
    assert_eq!(sums, [1.0, 2.0]);
    let fail = r#"{"operation":"ln","aggregation":"SUM","window":{"type":"COUNT","size":2},"onError":"fail"}"#;
    let (_, status, _) = run(&engine, aggregate(fail), input).await;
    assert!(failure(&status).contains(&at(2)), "{status:?}");
    // A window whose SUM overflows: skipped, or the query fails naming it.
    let body = r#"{"aggregation":"SUM","window":{"type":"COUNT","size":2}}"#;
    let input: Vec<Instant> = [f64::MAX, f64::MAX, 1.0, 2.0]
        .iter()
        .enumerate()
        .map(|(i, v)| Instant::number(at(i as u32), *v))
        .collect();
    let (events, status, skipped) = run(&engine, aggregate(body), input.clone()).await;
    assert_eq!(status, QueryStatus::Completed);
    // The overflowing window's two records, as the job's error line says.
    assert_eq!((events.len(), skipped), (1, 2));
    assert_eq!(events[0].skipped(), 2);
    let fail = r#"{"aggregation":"SUM","window":{"type":"COUNT","size":2},"onError":"fail"}"#;
    let (_, status, _) = run(&engine, aggregate(fail), input).await;
    let reason = failure(&status);
    assert!(
        reason.contains(&format!("the window from {} to {}", at(0), at(1))),
        "{reason}"
    );
}

// Plugins, in process and isolated (out of process).

#[tokio::test]
async fn the_scale_plugin_reports_a_bad_record_in_process_and_isolated() {
    let dir = TempDir::new("on-error-scale");
    let scale = plugin_library("mfstream-plugin-scale");
    let in_process = registry(&dir, &entry(&scale));
    let isolating = isolating_registry(&dir, &isolated(&scale));
    for registry in [in_process, isolating] {
        let engine = registry.get("scale").unwrap();
        skips_bad_records(&*engine, true).await;
        fails_on_the_first(&*engine, true).await;
    }
}

#[tokio::test]
async fn a_c_plugin_of_abi_3_or_2_reports_a_bad_record_and_one_of_abi_1_is_guarded() {
    let dir = TempDir::new("on-error-c");
    let v3 = c_plugin(&dir, "libcscale3.so", &[]);
    // Versions 1 and 2 are built from the frozen source of that release,
    // against its header.
    let v2 = c_plugin_of(&dir, "v2/scale.c", "libcscale2.so", &[]);
    let v1 = c_plugin_of(&dir, "v2/scale.c", "libcscale1.so", &["-DMFS_TEST_ABI_1"]);
    for (library, precise) in [(v3, true), (v2, true), (v1, false)] {
        let in_process = registry(&dir, &entry(&library));
        let isolating = isolating_registry(&dir, &isolated(&library));
        for registry in [in_process, isolating] {
            let engine = registry.get("cscale").unwrap();
            // The host's guard counts a record before the batch goes to a
            // version-1 plugin: the count may ride on an earlier event.
            skips_bad_records(&*engine, precise).await;
            // The version-1 plugin fails the call in its own words, which
            // name the record too.
            fails_on_the_first(&*engine, true).await;
        }
    }
}

#[tokio::test]
async fn a_nan_a_plugin_emits_is_a_record_with_no_result() {
    // The chaos plugin's `nan` engine emits NaN for every record.
    let dir = TempDir::new("on-error-nan");
    let chaos = plugin_library("mfstream-plugin-chaos");
    let in_process = registry(&dir, &entry(&chaos));
    let isolating = isolating_registry(&dir, &isolated(&chaos));
    for registry in [in_process, isolating] {
        let engine = registry.get("nan").unwrap();
        let (events, status, skipped) = run(&*engine, echo_spec(), instants(3)).await;
        assert_eq!(
            (events.len(), status, skipped),
            (0, QueryStatus::Completed, 3)
        );
        let fail = echo_spec().on_error(OnError::Fail);
        let (_, status, _) = run(&*engine, fail, instants(3)).await;
        let reason = failure(&status);
        assert!(
            reason.contains("not a finite number") && reason.contains(&instants(1)[0].datetime),
            "{reason}"
        );
    }
}

#[tokio::test]
async fn under_fail_a_job_that_reports_a_bad_record_is_ended_gracefully_through_its_input() {
    // The job is well: the query fails, and the job gets the end of its
    // input (time to clean up) rather than SIGTERM at once.
    let dir = TempDir::new("on-error-graceful");
    let marker = dir.join("reached-eof");
    let mut options = sh_options("error_line_then_eof.sh");
    options.protocol = 2.into();
    options.stop_grace = std::time::Duration::from_secs(30).into();
    options
        .env
        .push(("MARKER".into(), marker.display().to_string()));
    let abs = QuerySpec::transform("speed", Transform::new("abs", None).unwrap());
    let input: Vec<Instant> = [1.0, -2.0, 3.0]
        .iter()
        .enumerate()
        .map(|(i, v)| Instant::number(at(i as u32), *v))
        .collect();
    let engine = BridgeEngine::new(options);
    let (events, status, _) = run(&engine, abs.on_error(OnError::Fail), input).await;
    let reason = failure(&status);
    assert!(
        reason.contains(&format!(
            "record at {}: the job found no result: negative",
            at(1)
        )),
        "{reason}"
    );
    assert_eq!(events.len(), 1, "the answer before it, not the one after");
    assert!(
        marker.exists(),
        "the job read to the end of its input and exited"
    );
}

#[tokio::test]
async fn a_job_that_claims_huge_skipped_counts_cannot_overflow_the_host() {
    // A job that aggregates, writing two windows that each claim u64::MAX
    // skipped records and an error line for a window of as many.
    let script = r#"
read -r line
echo '{"windowStart":"a","windowEnd":"a","value":1,"count":1,"skipped":18446744073709551615}'
echo '{"windowStart":"a","windowEnd":"b","count":18446744073709551615,"error":"overflow"}'
echo '{"windowStart":"b","windowEnd":"b","value":1,"count":1,"skipped":18446744073709551615}'
cat > /dev/null
"#;
    let dir = TempDir::new("on-error-huge");
    let path = dir.join("huge.sh");
    std::fs::write(&path, script).unwrap();
    let mut options = BridgeOptions::new("huge", vec!["sh".into(), path.display().to_string()]);
    options.framing = Framing::Json;
    options.aggregates = true;
    let body = r#"{"aggregation":"COUNT","window":{"type":"COUNT","size":1}}"#;
    let (events, status, skipped) = run(
        &BridgeEngine::new(options),
        aggregate(body),
        vec![Instant::number(at(0), 1.0)],
    )
    .await;
    assert_eq!(status, QueryStatus::Completed, "{events:?}");
    assert_eq!(events.len(), 2);
    assert_eq!(events[1].skipped(), u64::MAX);
    assert_eq!(skipped, u64::MAX, "the total stops there, it does not wrap");
}

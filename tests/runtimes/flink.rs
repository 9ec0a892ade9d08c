//! Apache Flink (`jobs/flink/`): the DataStream job in a local mini-cluster,
//! in both framings, with windowed aggregates computed by Flink's windows.

use mfstream_engine::Framing;
use mfstream_model::{PropertyType, Registration};
use serde_json::Value as Json;

use super::*;

const VAR: &str = "MFAPI_FLINK_CMD";
const SETUP: &str = "jobs/flink/setup.sh";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs flink: eval \"$(jobs/flink/setup.sh)\""]
async fn flink_gives_the_local_engines_results_for_every_operation() {
    let argv = runtime_command(VAR, SETUP);
    // json framing, as engines.toml ships the engine; value framing is
    // covered by the tests below and the CLI check.
    check_every_operation("flink", &argv, Framing::Json).await;
    check_cli_matches_local("flink", VAR, &std::env::var(VAR).unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs flink: eval \"$(jobs/flink/setup.sh)\""]
async fn flink_fails_a_domain_error_with_the_jobs_message() {
    let argv = runtime_command(VAR, SETUP);
    check_domain_error("flink", &argv, "mfstream-flink", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs flink: eval \"$(jobs/flink/setup.sh)\""]
async fn a_flink_query_stopped_midway_leaves_no_jvm_behind() {
    let argv = runtime_command(VAR, SETUP);
    check_stop_midway("flink", &argv).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs flink: eval \"$(jobs/flink/setup.sh)\""]
async fn flink_windows_give_the_local_engines_aggregates() {
    let argv = runtime_command(VAR, SETUP);
    let numbers = irregular(400, Some(13), |i| {
        Value::Number(((i * 37) % 101) as f64 / 4.0 + 1.0)
    });
    let words = ["a", "b", "a", "c", "b", "d"];
    let text = irregular(200, Some(13), |i| {
        Value::Text(words[i * 7 % words.len()].into())
    });
    let flags = irregular(200, Some(13), |i| Value::Bool(i % 3 == 0));
    let cases = [
        (
            r#"{"aggregation":"SUM","window":{"type":"COUNT","size":7}}"#,
            PropertyType::TReal,
            &numbers,
        ),
        (
            r#"{"aggregation":"AVG","window":{"type":"TUMBLING","size":5,"unit":"SECONDS"}}"#,
            PropertyType::TReal,
            &numbers,
        ),
        (
            r#"{"aggregation":"MAX","window":{"type":"HOPPING","size":10,"unit":"SECONDS","hop":3,"hopUnit":"SECONDS"}}"#,
            PropertyType::TReal,
            &numbers,
        ),
        (
            r#"{"aggregation":"COUNT","window":{"type":"HOPPING","size":1,"unit":"MINUTES","hop":20,"hopUnit":"SECONDS"}}"#,
            PropertyType::TReal,
            &numbers,
        ),
        (
            r#"{"aggregation":"MIN","window":{"type":"TUMBLING","size":5,"unit":"SECONDS"},"emitPartial":false}"#,
            PropertyType::TReal,
            &numbers,
        ),
        (
            r#"{"operation":"mul","arg":1.852,"aggregation":"AVG","window":{"type":"HOPPING","size":6,"unit":"SECONDS","hop":2,"hopUnit":"SECONDS"}}"#,
            PropertyType::TReal,
            &numbers,
        ),
        (
            r#"{"aggregation":"COUNT_DISTINCT","window":{"type":"TUMBLING","size":4,"unit":"SECONDS"}}"#,
            PropertyType::TText,
            &text,
        ),
        (
            r#"{"aggregation":"COUNT_TRUE","window":{"type":"HOPPING","size":6,"unit":"SECONDS","hop":3,"hopUnit":"SECONDS"}}"#,
            PropertyType::TBoolean,
            &flags,
        ),
    ];
    let mut options = BridgeOptions::new("flink", argv);
    options.framing = Framing::Json;
    options.aggregates = true;
    let job = BridgeEngine::new(options);
    let mut late = 0;
    for (body, property_type, input) in cases {
        let mut spec = Registration::from_json(body)
            .unwrap()
            .into_spec("speed", property_type)
            .unwrap();
        spec.id = "q".into();
        let (local, status) = run_query(&LocalEngine::new(), spec.clone(), input.clone()).await;
        assert_eq!(status, QueryStatus::Completed, "local: {body}");
        let (flink, status) = run_query(&job, spec, input.clone()).await;
        assert_eq!(status, QueryStatus::Completed, "flink: {body}");
        let json = |events: &[Event]| -> Vec<Json> {
            events
                .iter()
                .map(|e| serde_json::from_str(&e.to_json()).unwrap())
                .collect()
        };
        let (local, flink) = (json(&local), json(&flink));
        assert!(!local.is_empty(), "{body}: no results");
        assert_eq!(local.len(), flink.len(), "{body}: {local:#?}\n{flink:#?}");
        for (l, f) in local.iter().zip(&flink) {
            assert!(same_json(l, f), "{body}: local {l} but flink {f}");
            late += l.get("late").map_or(0, |n| n.as_u64().unwrap());
        }
    }
    assert!(late > 0, "the input has late records, counted alike");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs flink: eval \"$(jobs/flink/setup.sh)\""]
async fn a_flink_window_that_overflows_is_skipped_by_default_or_fails_naming_it() {
    let argv = runtime_command(VAR, SETUP);
    let mut options = BridgeOptions::new("flink", argv);
    options.framing = Framing::Json;
    options.aggregates = true;
    let job = BridgeEngine::new(options);
    // SUM over COUNT 2: [0, 1] overflows (protocol 2: an error line with
    // its count), [2, 3] does not.
    let input = values(&[f64::MAX, f64::MAX, 1.0, 2.0]);
    let spec = |body: &str| {
        Registration::from_json(body)
            .unwrap()
            .into_spec("speed", PropertyType::TReal)
            .unwrap()
    };
    let body = r#"{"aggregation":"SUM","window":{"type":"COUNT","size":2}}"#;
    let (events, status) = run_query(&job, spec(body), input.clone()).await;
    assert_eq!(status, QueryStatus::Completed, "{events:?}");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].value(), &Value::Number(3.0));
    assert_eq!(events[0].skipped(), 2, "the overflowing window's records");
    let fail = r#"{"aggregation":"SUM","window":{"type":"COUNT","size":2},"onError":"fail"}"#;
    let (events, status) = run_query(&job, spec(fail), input.clone()).await;
    let reason = failure(&status);
    let window = format!(
        "the window from {} to {}",
        input[0].datetime, input[1].datetime
    );
    assert!(
        reason.contains(&window) && reason.contains("overflows"),
        "{reason}"
    );
    assert!(events.is_empty());
}

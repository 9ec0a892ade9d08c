//! Windowed aggregates on bridge engines: computed by a job that aggregates,
//! or by the host over a transforming job's outputs, with the same results
//! as the `local` engine.

use mfstream_engine::{BridgeEngine, BridgeOptions, Framing, LocalEngine};
use mfstream_engine::{Source, StreamEngine};
use mfstream_model::{Event, Instant, PropertyType, QuerySpec, QueryStatus, Registration, Value};
use serde_json::Value as Json;

use crate::util::*;

fn numbers(n: usize) -> Vec<Instant> {
    irregular(n, None, |i| {
        Value::Number(((i * 37) % 101) as f64 / 4.0 + 1.0)
    })
}

fn spec(body: &str, property_type: PropertyType) -> QuerySpec {
    let registration = Registration::from_json(body).expect("a registration body");
    let mut spec = registration
        .into_spec("speed", property_type)
        .expect("a valid query");
    spec.id = "q".into();
    spec
}

/// The reference job as an engine; `aggregates` says whether it is
/// declared to compute windows itself (json framing) or only transforms.
fn reference(framing: Framing, aggregates: bool) -> BridgeEngine {
    let mut options = BridgeOptions::new("reference", vec!["python3".into(), reference_job()]);
    options.framing = framing;
    options.aggregates = aggregates;
    BridgeEngine::new(options)
}

async fn run(engine: &dyn StreamEngine, spec: QuerySpec, input: Vec<Instant>) -> Vec<Json> {
    let handle = engine
        .submit(spec, Source::from_instants(input))
        .await
        .expect("the query starts");
    let (events, status) = collect(handle).await;
    assert_eq!(status, QueryStatus::Completed, "on {}", engine.name());
    events.iter().map(to_json).collect()
}

fn to_json(event: &Event) -> Json {
    serde_json::from_str(&event.to_json()).expect("events are JSON")
}

fn assert_same(local: &[Json], bridge: &[Json], what: &str) {
    assert!(!local.is_empty(), "{what}: no results to compare");
    assert_eq!(local.len(), bridge.len(), "{what}: {local:#?}\n{bridge:#?}");
    for (l, b) in local.iter().zip(bridge) {
        assert!(same_json(l, b), "{what}: local {l} but bridge {b}");
    }
}

/// Queries over every window type and every aggregation family.
const NUMERIC_QUERIES: [&str; 7] = [
    r#"{"aggregation":"SUM","window":{"type":"COUNT","size":7}}"#,
    r#"{"aggregation":"AVG","window":{"type":"TUMBLING","size":5,"unit":"SECONDS"}}"#,
    r#"{"aggregation":"MIN","window":{"type":"TUMBLING","size":1,"unit":"MINUTES"}}"#,
    r#"{"aggregation":"MAX","window":{"type":"HOPPING","size":10,"unit":"SECONDS","hop":3,"hopUnit":"SECONDS"}}"#,
    r#"{"aggregation":"COUNT","window":{"type":"HOPPING","size":1,"unit":"MINUTES","hop":20,"hopUnit":"SECONDS"}}"#,
    r#"{"aggregation":"AVG","window":{"type":"TUMBLING","size":5,"unit":"SECONDS"},"emitPartial":false}"#,
    r#"{"operation":"mul","arg":1.852,"aggregation":"AVG","window":{"type":"HOPPING","size":6,"unit":"SECONDS","hop":2,"hopUnit":"SECONDS"}}"#,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aggregating_job_gives_the_local_engines_results() {
    let input = numbers(400);
    let job = reference(Framing::Json, true);
    for body in NUMERIC_QUERIES {
        let query = spec(body, PropertyType::TReal);
        let local = run(&LocalEngine::new(), query.clone(), input.clone()).await;
        let bridge = run(&job, query, input.clone()).await;
        assert_same(&local, &bridge, body);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_and_boolean_windows_match_on_an_aggregating_job() {
    let words = ["a", "b", "a", "c", "b", "d"];
    let text = irregular(200, None, |i| {
        Value::Text(words[i * 7 % words.len()].into())
    });
    let flags = irregular(200, None, |i| Value::Bool(i % 3 == 0));
    let cases = [
        (
            r#"{"aggregation":"COUNT_DISTINCT","window":{"type":"TUMBLING","size":4,"unit":"SECONDS"}}"#,
            PropertyType::TText,
            &text,
        ),
        (
            r#"{"aggregation":"ANY","window":{"type":"COUNT","size":5}}"#,
            PropertyType::TBoolean,
            &flags,
        ),
        (
            r#"{"aggregation":"ALL","window":{"type":"COUNT","size":2}}"#,
            PropertyType::TBoolean,
            &flags,
        ),
        (
            r#"{"aggregation":"COUNT_TRUE","window":{"type":"HOPPING","size":6,"unit":"SECONDS","hop":3,"hopUnit":"SECONDS"}}"#,
            PropertyType::TBoolean,
            &flags,
        ),
    ];
    let job = reference(Framing::Json, true);
    for (body, property_type, input) in cases {
        let query = spec(body, property_type);
        let local = run(&LocalEngine::new(), query.clone(), input.clone()).await;
        let bridge = run(&job, query, input.clone()).await;
        assert_same(&local, &bridge, body);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transforming_job_composes_with_windows_computed_by_the_host() {
    let input = numbers(300);
    let body = r#"{"operation":"mul","arg":1.852,"aggregation":"MAX","window":{"type":"TUMBLING","size":3,"unit":"SECONDS"}}"#;
    let query = spec(body, PropertyType::TReal);
    let local = run(&LocalEngine::new(), query.clone(), input.clone()).await;
    for (framing, what) in [
        (Framing::Value, "value framing"),
        (Framing::Json, "json framing"),
    ] {
        let bridge = run(&reference(framing, false), query.clone(), input.clone()).await;
        assert_same(&local, &bridge, what);
    }
    let last = local.last().unwrap();
    assert_eq!(
        last["partial"],
        Json::Bool(true),
        "the open window is flushed: {last}"
    );
}

#[tokio::test]
async fn a_pure_aggregate_on_a_transforming_engine_runs_in_the_host_without_a_job() {
    // The command does not exist: no job may be started for this query.
    let options = BridgeOptions::new("nojob", vec!["/nonexistent/mfstream-job".into()]);
    let engine = BridgeEngine::new(options);
    let body = r#"{"aggregation":"COUNT","window":{"type":"COUNT","size":2}}"#;
    let query = spec(body, PropertyType::TReal);
    let local = run(&LocalEngine::new(), query.clone(), numbers(5)).await;
    let handle = engine
        .submit(query, Source::from_instants(numbers(5)))
        .await
        .expect("no job to start");
    assert_eq!(handle.engine(), "nojob");
    let (events, status) = collect(handle).await;
    assert_eq!(status, QueryStatus::Completed);
    let bridge: Vec<Json> = events.iter().map(to_json).collect();
    assert_same(&local, &bridge, "host windows");
    assert_eq!(bridge.len(), 3, "two full windows and a partial one");
}

#[tokio::test]
async fn a_job_writing_something_other_than_window_results_fails_with_the_line() {
    // echo.sh writes each input line back: an instant, not a window result.
    let mut options = sh_options("echo.sh");
    options.framing = Framing::Json;
    options.aggregates = true;
    let body = r#"{"aggregation":"SUM","window":{"type":"COUNT","size":2}}"#;
    let handle = BridgeEngine::new(options)
        .submit(
            spec(body, PropertyType::TReal),
            Source::from_instants(numbers(4)),
        )
        .await
        .unwrap();
    let (_, status) = collect(handle).await;
    let reason = failure(&status);
    assert!(
        reason.contains("line 1 is not a JSON window result") && reason.contains("datetime"),
        "{reason}"
    );
}

#[tokio::test]
async fn an_aggregating_job_gets_aggregate_and_the_query_with_its_window() {
    let dir = TempDir::new("aggregate-args");
    let args_file = dir.join("args");
    let mut options = sh_options("args.sh");
    options.framing = Framing::Json;
    options.aggregates = true;
    options
        .env
        .push(("ARGS_FILE".into(), args_file.display().to_string()));
    let body = r#"{"aggregation":"AVG","window":{"type":"COUNT","size":2}}"#;
    let handle = BridgeEngine::new(options)
        .submit(spec(body, PropertyType::TReal), Source::from_instants([]))
        .await
        .unwrap();
    let (_, status) = collect(handle).await;
    assert_eq!(status, QueryStatus::Completed);
    let args = std::fs::read_to_string(&args_file).unwrap();
    assert_eq!(args, "aggregate\nAVG\n");
}

#[tokio::test]
async fn a_bridge_engine_refuses_an_aggregation_the_property_type_does_not_allow() {
    let mut query = spec(
        r#"{"aggregation":"COUNT","window":{"type":"COUNT","size":2}}"#,
        PropertyType::TText,
    );
    if let mfstream_model::QueryKind::Aggregate { aggregate, .. } = &mut query.kind {
        aggregate.aggregation = mfstream_model::Aggregation::Avg;
    }
    let error = reference(Framing::Json, true)
        .submit(query, Source::from_instants([]))
        .await
        .expect_err("AVG of text is refused");
    let message = error.to_string();
    assert!(message.contains("COUNT_DISTINCT"), "{message}");
}

#[tokio::test]
async fn host_windows_at_the_windows_per_record_cap_over_records_a_century_apart_match_local() {
    // Every output of the job closes up to MAX_WINDOWS_PER_RECORD windows;
    // they are delivered in chunks, and the century between holds none.
    let body = format!(
        r#"{{"operation":"mul","arg":1,"aggregation":"MAX","window":{{"type":"HOPPING","size":{},"unit":"SECONDS","hop":1}}}}"#,
        mfstream_model::aggregate::MAX_WINDOWS_PER_RECORD
    );
    let input = vec![
        Instant::number("2026-01-01T00:00:00Z", 1.0),
        Instant::number("2126-01-01T00:00:00Z", 2.0),
    ];
    let query = spec(&body, PropertyType::TReal);
    let local = run(&LocalEngine::new(), query.clone(), input.clone()).await;
    let bridge = run(&reference(Framing::Value, false), query, input).await;
    assert_eq!(
        local.len(),
        2 * mfstream_model::aggregate::MAX_WINDOWS_PER_RECORD as usize
    );
    assert_same(&local, &bridge, "HOPPING at the cap");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_avg_of_values_near_the_largest_float_is_their_average_on_the_job_as_on_local() {
    // Their sum overflows, their average does not: a result, not a window
    // skipped for having none.
    let input = vec![
        Instant::number("2026-01-01T00:00:00Z", 1.7e308),
        Instant::number("2026-01-01T00:00:01Z", 1.7e308),
    ];
    let query = spec(
        r#"{"aggregation":"AVG","window":{"type":"COUNT","size":2}}"#,
        PropertyType::TReal,
    );
    let local = run(&LocalEngine::new(), query.clone(), input.clone()).await;
    let bridge = run(&reference(Framing::Json, true), query, input).await;
    assert_eq!(local.len(), 1, "{local:?}");
    assert_eq!(local[0]["value"], 1.7e308, "{local:?}");
    assert_same(&local, &bridge, "AVG of 1.7e308 twice");
}

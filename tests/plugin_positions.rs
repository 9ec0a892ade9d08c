//! Position queries on plugin engines (ABI version 3), in process: the
//! host hands a plugin that serves positions the query's step and checked
//! points, takes back numbers, points and detections, and windows them;
//! a plugin that does not serve positions, or panics on one, fails only
//! that query, with a clear error.

use mfstream_engine::{EngineError, Serves};
use mfstream_model::{
    Event, Instant, Point, PropertyType, QuerySpec, QueryStatus, Registration, Value,
};

use crate::util::*;

fn spec(body: &str) -> QuerySpec {
    Registration::from_json(body)
        .unwrap()
        .into_spec("tgsequence", PropertyType::TGeogPoint)
        .unwrap()
}

fn track(n: usize) -> Vec<Instant> {
    (0..n)
        .map(|i| Instant {
            datetime: format!("2026-01-01T00:00:{i:02}Z"),
            value: Value::Point(Point::with_z(
                i as f64 * 0.01,
                45.0,
                (i % 2 == 0).then_some(i as f64),
            )),
        })
        .collect()
}

#[tokio::test]
async fn a_plugin_that_serves_positions_is_listed_so_and_gets_points_and_gives_them_back() {
    let dir = TempDir::new("plugin-positions");
    let chaos = plugin_library("mfstream-plugin-chaos");
    let registry = registry(&dir, &entry(&chaos));
    let listed = registry.engines();
    let serves = |name: &str| listed.iter().find(|i| i.name == name).unwrap().serves;
    assert!(serves("tracker").contains(Serves::POSITIONS));
    assert!(!serves("panicky").contains(Serves::POSITIONS));

    let input = track(5);
    let (events, status) = run_on(
        &registry,
        "tracker",
        spec(r#"{"operation":"position"}"#),
        input.clone(),
    )
    .await;
    assert_eq!(status, QueryStatus::Completed);
    let got: Vec<(String, Value)> = events
        .iter()
        .map(|e| (e.datetime().to_owned(), e.value().clone()))
        .collect();
    let want: Vec<(String, Value)> = input.into_iter().map(|i| (i.datetime, i.value)).collect();
    assert_eq!(got, want, "points, z included, come back as they went");
}

#[tokio::test]
async fn a_detection_at_a_time_no_instant_had_is_written_by_the_host() {
    let dir = TempDir::new("plugin-positions-detect");
    let registry = registry(&dir, &entry(&plugin_library("mfstream-plugin-chaos")));
    let fence = r#"{"geofence":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,0]]]},"detect":["enter"]}"#;
    let (events, status) = run_on(&registry, "tracker", spec(fence), track(2)).await;
    assert_eq!(status, QueryStatus::Completed);
    let Event::Detect(first) = &events[0] else {
        panic!("a detection: {events:?}");
    };
    assert_eq!(first.datetime, "2026-01-01T00:00:00.000001Z");
    assert_eq!(first.detect, "enter");
    assert_eq!(first.value, Value::Point(Point::new(45.0, 0.0)));
    assert_eq!(events.len(), 2);
}

#[tokio::test]
async fn the_host_skips_positions_a_plugin_may_not_have_and_windows_its_measures() {
    let dir = TempDir::new("plugin-positions-check");
    let registry = registry(&dir, &entry(&plugin_library("mfstream-plugin-chaos")));
    let mut input = track(4);
    // Not after the previous one, and a latitude out of range.
    input.insert(2, input[1].clone());
    input.insert(
        3,
        Instant {
            datetime: "2026-01-01T00:00:02.500Z".into(),
            value: Value::Point(Point::new(0.0, 91.0)),
        },
    );
    let (events, status) = run_on(
        &registry,
        "tracker",
        spec(r#"{"operation":"speed","onError":"skip"}"#),
        input.clone(),
    )
    .await;
    assert_eq!(status, QueryStatus::Completed);
    let values: Vec<f64> = events.iter().map(|e| e.value().as_f64().unwrap()).collect();
    assert_eq!(values, [0.0, 0.01, 0.02, 0.03]);
    assert_eq!(events.iter().map(Event::skipped).sum::<u64>(), 2);

    // A numeric aggregate of the plugin's measure: the host's window.
    let (events, status) = run_on(
        &registry,
        "tracker",
        spec(r#"{"operation":"speed","aggregation":"SUM","window":{"type":"COUNT","size":4}}"#),
        track(4),
    )
    .await;
    assert_eq!(status, QueryStatus::Completed);
    let Event::Window(w) = &events[0] else {
        panic!("a window: {events:?}");
    };
    assert!((w.value.as_f64().unwrap() - 0.06).abs() < 1e-12, "{w:?}");

    let fail = spec(r#"{"operation":"speed","onError":"fail"}"#);
    let (_, status) = run_on(&registry, "tracker", fail, input).await;
    let QueryStatus::Failed { reason } = status else {
        panic!("{status:?}");
    };
    assert!(
        reason.contains("is not after the previous position"),
        "{reason}"
    );
}

#[tokio::test]
async fn a_plugin_that_panics_on_a_position_fails_its_query_and_the_host_lives_on() {
    let dir = TempDir::new("plugin-positions-panic");
    let registry = registry(&dir, &entry(&plugin_library("mfstream-plugin-chaos")));
    let mut input = track(3);
    input[2].value = Value::Point(Point::new(13.0, 45.0));
    let (events, status) = run_on(
        &registry,
        "tracker",
        spec(r#"{"operation":"position"}"#),
        input,
    )
    .await;
    assert_eq!(events.len(), 2, "what came before the panic is delivered");
    let QueryStatus::Failed { reason } = status else {
        panic!("{status:?}");
    };
    assert!(
        reason.contains("the plugin panicked: unlucky position at 2026-01-01T00:00:02Z"),
        "{reason}"
    );
    // The host goes on.
    let (events, status) = run_on(
        &registry,
        "tracker",
        spec(r#"{"operation":"position"}"#),
        track(2),
    )
    .await;
    assert_eq!((events.len(), status), (2, QueryStatus::Completed));
}

#[tokio::test]
async fn a_position_query_on_a_plugin_engine_without_positions_is_refused_naming_the_field() {
    let dir = TempDir::new("plugin-positions-unserved");
    let registry = registry(&dir, &entry(&plugin_library("mfstream-plugin-chaos")));
    let engine = registry.get("panicky").unwrap();
    let (_sender, source) = mfstream_engine::Source::channel(1);
    let Err(EngineError::InvalidQuery(e)) = engine
        .submit(spec(r#"{"operation":"speed"}"#), source)
        .await
    else {
        panic!("a position query was accepted");
    };
    assert_eq!(e.field, "engine");
    assert!(
        e.message.contains("does not serve TGeogPoint queries"),
        "{e}"
    );
}

#[tokio::test]
async fn an_isolated_plugin_answers_position_queries_as_in_process() {
    let dir = TempDir::new("plugin-positions-isolated");
    let chaos = plugin_library("mfstream-plugin-chaos");
    let in_process = registry(&dir, &entry(&chaos));
    let isolating = isolating_registry(&dir, &isolated(&chaos));
    let info = isolating
        .engines()
        .into_iter()
        .find(|i| i.name == "tracker");
    assert!(info.unwrap().serves.contains(Serves::POSITIONS));
    let fence = r#"{"geofence":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,0]]]},"detect":["enter"]}"#;
    let mut input = track(5);
    // Not after the previous one: an error line, skipped by the host.
    input.insert(2, input[1].clone());
    for body in [
        r#"{"operation":"position"}"#,
        r#"{"operation":"speed","onError":"skip"}"#,
        // The skipped record counted in the window after the outputs
        // before it, in both.
        r#"{"operation":"speed","aggregation":"SUM","window":{"type":"COUNT","size":2},"onError":"skip"}"#,
        fence,
    ] {
        let here = run_on(&in_process, "tracker", spec(body), input.clone()).await;
        let there = run_on(&isolating, "tracker", spec(body), input.clone()).await;
        assert_eq!(here, there, "{body}");
        assert_eq!(here.1, QueryStatus::Completed, "{body}");
    }
    // A panic fails the query, in the child's words.
    let mut input = track(3);
    input[2].value = Value::Point(Point::new(13.0, 45.0));
    let (_, status) = run_on(
        &isolating,
        "tracker",
        spec(r#"{"operation":"position"}"#),
        input,
    )
    .await;
    let QueryStatus::Failed { reason } = status else {
        panic!("{status:?}");
    };
    assert!(reason.contains("unlucky position"), "{reason}");
}

//! The `local` engine: every operation, order, datetimes, domain errors.

use mfstream_engine::LocalEngine;
use mfstream_engine::{Source, StreamEngine};
use mfstream_model::ops::Transform;
use mfstream_model::{Instant, QuerySpec, QueryStatus, Value};

use crate::util::*;

async fn run_local(
    op: &str,
    arg: Option<f64>,
    input: Vec<Instant>,
) -> (Vec<mfstream_model::Event>, QueryStatus) {
    // Failing at a bad record (`onError: fail`), as these tests check;
    // tests/on_error.rs has the default, skip.
    let spec = QuerySpec::transform("speed", Transform::new(op, arg).unwrap())
        .on_error(mfstream_model::OnError::Fail);
    let handle = LocalEngine::new()
        .submit(spec, Source::from_instants(input))
        .await
        .unwrap();
    collect(handle).await
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[tokio::test]
async fn every_operation_matches_its_reference_value() {
    use std::f64::consts::{E, FRAC_PI_2, FRAC_PI_4, PI};
    let cases: [(&str, Option<f64>, f64, f64); 15] = [
        ("ln", None, E, 1.0),
        ("exp", None, 1.0, E),
        ("log10", None, 1000.0, 3.0),
        ("ceil", None, 1.2, 2.0),
        ("floor", None, -1.2, -2.0),
        ("abs", None, -3.5, 3.5),
        ("degrees", None, PI, 180.0),
        ("radians", None, 180.0, PI),
        ("sin", None, FRAC_PI_2, 1.0),
        ("cos", None, PI, -1.0),
        ("tan", None, FRAC_PI_4, 1.0),
        ("add", Some(2.5), 1.0, 3.5),
        ("sub", Some(2.5), 1.0, -1.5),
        ("mul", Some(1.852), 10.0, 18.52),
        ("div", Some(4.0), 10.0, 2.5),
    ];
    for (op, arg, x, want) in cases {
        let (events, status) =
            run_local(op, arg, vec![Instant::number("2026-01-01T00:00:00Z", x)]).await;
        assert_eq!(status, QueryStatus::Completed, "{op}");
        let got = events[0].value().as_f64().unwrap();
        assert!(close(got, want), "{op}({x}) = {got}, want {want}");
    }
}

#[tokio::test]
async fn datetimes_pass_through_verbatim_and_order_is_kept() {
    let mut input = instants(5_000);
    input[7].datetime = "2026-01-01 00:00:07+00".into();
    let (events, status) = run_local("add", Some(1.0), input.clone()).await;
    assert_eq!(status, QueryStatus::Completed);
    assert_eq!(events.len(), input.len());
    for (event, instant) in events.iter().zip(&input) {
        assert_eq!(event.datetime(), instant.datetime);
        assert_eq!(
            event.value().as_f64(),
            instant.value.as_f64().map(|v| v + 1.0)
        );
    }
}

#[tokio::test]
async fn a_domain_error_fails_the_query_naming_the_record_under_fail() {
    let input = vec![
        Instant::number("2026-01-01T00:00:00Z", 1.0),
        Instant::number("2026-01-01T00:00:01Z", 0.0),
        Instant::number("2026-01-01T00:00:02Z", 5.0),
    ];
    let (events, status) = run_local("ln", None, input).await;
    assert_eq!(
        events.len(),
        1,
        "the result before the bad record is delivered"
    );
    let reason = failure(&status);
    assert!(
        reason.contains("2026-01-01T00:00:01Z") && reason.contains("got 0"),
        "{reason}"
    );
    let (_, status) = run_local("log10", None, vec![Instant::number("t9", -2.0)]).await;
    assert!(failure(&status).contains("got -2"));
}

#[tokio::test]
async fn no_nan_or_infinity_is_ever_emitted_under_fail() {
    let (events, status) = run_local("exp", None, vec![Instant::number("t", 1000.0)]).await;
    assert!(events.is_empty());
    assert!(failure(&status).contains("overflows"));
}

#[tokio::test]
async fn a_text_value_fails_a_transform_naming_the_record() {
    let input = vec![Instant {
        datetime: "t1".into(),
        value: Value::Text("fast".into()),
    }];
    let (_, status) = run_local("abs", None, input).await;
    let reason = failure(&status);
    assert!(
        reason.contains("t1") && reason.contains("\"fast\""),
        "{reason}"
    );
}

#[tokio::test]
async fn stopping_a_local_query_reports_stopped() {
    let (sender, source) = Source::channel(1);
    let spec = QuerySpec::transform("speed", Transform::new("abs", None).unwrap());
    let mut handle = LocalEngine::new().submit(spec, source).await.unwrap();
    sender.send(Instant::number("t", -1.0)).await.unwrap();
    assert_eq!(handle.next().await.unwrap().value(), &Value::Number(1.0));
    assert_eq!(handle.stop_and_wait().await, QueryStatus::Stopped);
    drop(sender);
}

/// Records of a `TInteger` property, the second not an integer.
fn integers_with_a_fraction() -> Vec<Instant> {
    vec![
        Instant::number("2026-01-01T00:00:00Z", 1.0),
        Instant::number("2026-01-01T00:00:01Z", 1.5),
        Instant::number("2026-01-01T00:00:02Z", 2.0),
    ]
}

fn integer_spec(body: &str) -> QuerySpec {
    mfstream_model::Registration::from_json(body)
        .unwrap()
        .into_spec("count", mfstream_model::PropertyType::TInteger)
        .unwrap()
}

const NOT_AN_INTEGER: &str =
    "record at 2026-01-01T00:00:01Z has value 1.5, but the property is TInteger: it takes integers";

#[tokio::test]
async fn an_integer_property_given_1_5_fails_naming_the_record_on_every_engine() {
    let dir = TempDir::new("integers");
    let scale = plugin_library("mfstream-plugin-scale");
    let plugins = registry(&dir, &entry(&scale));
    let isolating = isolating_registry(&TempDir::new("integers-iso"), &isolated(&scale));
    let engines: Vec<(&str, std::sync::Arc<dyn StreamEngine>)> = vec![
        ("local", std::sync::Arc::new(LocalEngine::new())),
        (
            "bridge",
            std::sync::Arc::new(mfstream_engine::BridgeEngine::new(sh_options("echo.sh"))),
        ),
        ("plugin", plugins.get("scale").unwrap()),
        ("isolated plugin", isolating.get("scale").unwrap()),
    ];
    let bodies = [
        r#"{"operation":"mul","arg":1}"#,
        r#"{"aggregation":"SUM","window":{"type":"COUNT","size":5}}"#,
        r#"{"operation":"mul","arg":1,"aggregation":"SUM","window":{"type":"COUNT","size":5}}"#,
    ];
    for (name, engine) in &engines {
        for body in bodies {
            let handle = engine
                .submit(
                    integer_spec(body),
                    Source::from_instants(integers_with_a_fraction()),
                )
                .await
                .unwrap();
            let (_, status) = collect(handle).await;
            let reason = failure(&status);
            assert!(reason.contains(NOT_AN_INTEGER), "{name}, {body}: {reason}");
        }
    }
}

#[test]
fn run_fails_with_exit_1_when_an_integer_property_is_given_1_5() {
    let dir = TempDir::new("integers-run");
    let input = dir.join("in.ndjson");
    let mut text = Vec::new();
    for instant in integers_with_a_fraction() {
        instant.write_json(&mut text);
        text.push(b'\n');
    }
    std::fs::write(&input, text).unwrap();
    let output = mfstream_command(dir.path())
        .args([
            "run",
            "--property",
            "speed",
            "--type",
            "TInteger",
            "--op",
            "mul",
            "--arg",
            "2",
        ])
        .arg(&input)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "{\"datetime\":\"2026-01-01T00:00:00Z\",\"value\":2,\"property\":\"speed\",\"operation\":\"mul\"}\n"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(NOT_AN_INTEGER), "{stderr}");
}

//! Positions on a bridge engine through the server: a registration on a
//! feature's `tgsequence` naming an engine with `positions = true` runs
//! the step in its job, and the events stream as on `local`.

use super::*;

/// The positions of ship s2, in planar metres.
const S: &str = "/collections/ships/items/s2/tgsequence";

#[tokio::test]
async fn a_position_query_on_a_bridge_engine_streams_the_jobs_events() {
    let server = Serve::start("positions-bridge", &[], &[]);
    let mut client = server.client();
    let square = r#"{"type":"Polygon","coordinates":[[[0,0],[10,0],[10,10],[0,10],[0,0]]]}"#;
    let crs = r#""crs":"EPSG:3857","engine":"refpos""#;
    let speed = register(&mut client, S, &format!(r#"{{"operation":"speed",{crs}}}"#)).await;
    let fence = register(
        &mut client,
        S,
        &format!(r#"{{"geofence":{square},"detect":["enter","exit"],{crs}}}"#),
    )
    .await;
    let extent = register(
        &mut client,
        S,
        &format!(r#"{{"aggregation":"EXTENT","window":{{"type":"COUNT","size":2}},{crs}}}"#),
    )
    .await;
    let queries = client.get(&format!("{S}/queries")).await.json();
    assert!(
        queries["queries"]
            .as_array()
            .unwrap()
            .iter()
            .all(|q| q["engine"] == "refpos"),
        "{queries}"
    );
    let mut speeds = server.subscribe(&format!("{speed}/stream"), &[]).await;
    let mut fences = server.subscribe(&format!("{fence}/stream"), &[]).await;
    let mut extents = server.subscribe(&format!("{extent}/stream"), &[]).await;
    let body = [
        r#"{"datetime":"2026-01-01T00:00:00Z","coordinates":[-5,5]}"#,
        r#"{"datetime":"2026-01-01T00:00:10Z","coordinates":[5,5]}"#,
        r#"{"datetime":"2026-01-01T00:00:20Z","coordinates":[15,5]}"#,
    ]
    .join("\n");
    let response = client.post(&format!("{S}/ingest"), &body).await;
    assert_eq!(response.status, 202, "{response:?}");

    // 10 m in 10 s, twice.
    let events = take(&mut speeds, 2).await;
    let first = events[0].json();
    assert_eq!(first["datetime"], "2026-01-01T00:00:10Z");
    assert_eq!(
        (first["operation"].as_str(), first["value"].as_f64()),
        (Some("speed"), Some(1.0))
    );
    // In at x = 0 (5 s), out at x = 10 (15 s): interpolated in the job.
    let detected: Vec<_> = take(&mut fences, 2)
        .await
        .iter()
        .map(SseEvent::json)
        .collect();
    assert_eq!(
        (
            detected[0]["detect"].as_str(),
            detected[0]["datetime"].as_str()
        ),
        (Some("enter"), Some("2026-01-01T00:00:05Z"))
    );
    assert_eq!(detected[0]["coordinates"], serde_json::json!([0, 5]));
    assert_eq!(
        (
            detected[1]["detect"].as_str(),
            detected[1]["datetime"].as_str()
        ),
        (Some("exit"), Some("2026-01-01T00:00:15Z"))
    );
    // The host windows the job's positions.
    let window = take(&mut extents, 1).await[0].json();
    assert_eq!(
        window["value"],
        serde_json::json!([-5, 5, 5, 5]),
        "{window}"
    );
    assert_eq!(window["count"], 2);
}

#[tokio::test]
async fn a_window_of_a_bridge_jobs_positions_closes_on_the_wall_clock() {
    let server = Serve::start("positions-bridge-live", &[], &[]);
    let mut client = server.client();
    let s3 = "/collections/ships/items/s3/tgsequence";
    let extent = register(
        &mut client,
        s3,
        r#"{"aggregation":"EXTENT","window":{"type":"TUMBLING","size":1,"unit":"SECONDS"},"crs":"EPSG:3857","engine":"refpos"}"#,
    )
    .await;
    let mut sse = server.subscribe(&format!("{extent}/stream"), &[]).await;
    let now = std::time::SystemTime::now();
    let later = now + std::time::Duration::from_millis(1);
    let body = format!(
        "{{\"datetime\":\"{}\",\"coordinates\":[4,50]}}\n{{\"datetime\":\"{}\",\"coordinates\":[5,51]}}",
        rfc3339(now),
        rfc3339(later)
    );
    assert_eq!(
        client.post(&format!("{s3}/ingest"), &body).await.status,
        202
    );
    // Nothing more is ingested: the clock closes the window over the
    // job's answers.
    let window = take(&mut sse, 1).await[0].json();
    assert_eq!(window["aggregation"], "EXTENT");
    assert_eq!(
        window["value"],
        serde_json::json!([4, 50, 5, 51]),
        "{window}"
    );
    assert!(window.get("partial").is_none(), "{window}");
}

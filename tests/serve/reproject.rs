//! Reference systems on the server: `position` reprojecting between
//! EPSG:4326 and EPSG:3857 (across a restart with `--state`), and planar
//! positions sent before any query fixed the feature's system.

use super::*;

/// A position at `secs` seconds into 2026.
fn position(secs: u32, x: f64, y: f64) -> String {
    format!(r#"{{"datetime":"2026-01-01T00:00:{secs:02}Z","coordinates":[{x},{y}]}}"#)
}

/// Web Mercator of (10° E, 0°) and of (10° E, 10° N): R·λ and
/// R·ln(tan(π/4 + φ/2)) with R = 6,378,137 m (EPSG method 1024).
const MERCATOR_10_0: [f64; 2] = [1_113_194.907_932_735_7, 0.0];
const MERCATOR_10_10: [f64; 2] = [1_113_194.907_932_735_7, 1_118_889.974_857_959_4];

fn close(event: &SseEvent, want: [f64; 2]) {
    let v = event.json();
    for k in 0..2 {
        let got = v["coordinates"][k].as_f64().unwrap();
        assert!((got - want[k]).abs() < 1e-6, "{v}");
    }
}

#[tokio::test]
async fn a_position_query_in_web_mercator_reprojects_and_survives_a_restart() {
    let feature = "/collections/ships/items/m1/tgsequence";
    let state = TempDir::new("reproject-state");
    let dir = state.path().to_str().unwrap().to_owned();
    let mut server = Serve::start("reproject-state-1", &["--state", &dir], &[]);
    let mut client = server.client();
    // The feature is geodetic (its first query's), the output Web Mercator.
    register(&mut client, feature, r#"{"operation":"speed"}"#).await;
    let query = register(
        &mut client,
        feature,
        r#"{"operation":"position","crs":"EPSG:3857"}"#,
    )
    .await;
    // Another system is 422, naming the pair this server converts.
    let response = client
        .post(
            &format!("{feature}/queries"),
            r#"{"operation":"position","crs":"EPSG:25832"}"#,
        )
        .await;
    assert_eq!(response.status, 422, "{response:?}");
    assert!(
        response.json()["description"]
            .as_str()
            .unwrap()
            .contains("EPSG:4326 ↔ EPSG:3857"),
        "{response:?}"
    );
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let response = client
        .post(&format!("{feature}/ingest"), &position(0, 10.0, 0.0))
        .await;
    assert_eq!(response.status, 202, "{response:?}");
    close(&take(&mut sse, 1).await[0], MERCATOR_10_0);
    drop(sse);
    assert!(server.terminate().success());

    let server = Serve::start("reproject-state-2", &["--state", &dir], &[]);
    let mut client = server.client();
    let link = client.get(&query).await.json();
    assert_eq!(link["status"], "running", "{link}");
    // The page's map draws the output in the system the link names.
    assert_eq!(link["crs"], "EPSG:3857", "{link}");
    let mut sse = server
        .subscribe(&format!("{query}/stream"), &[("Last-Event-ID", "1")])
        .await;
    let response = client
        .post(&format!("{feature}/ingest"), &position(10, 10.0, 10.0))
        .await;
    assert_eq!(response.status, 202, "{response:?}");
    close(&take(&mut sse, 1).await[0], MERCATOR_10_10);
}

#[tokio::test]
async fn planar_positions_sent_before_any_query_are_taken_and_a_planar_query_fits() {
    let server = Serve::start("reproject-planar-first", &[], &[]);
    let mut client = server.client();
    let feature = "/collections/ships/items/p1/tgsequence";
    // No query has said the feature's system: not refused as lon/lat.
    let response = client
        .post(
            &format!("{feature}/ingest"),
            &position(0, 500_000.0, 4_000_000.0),
        )
        .await;
    assert_eq!(response.status, 202, "{response:?}");
    let speed = register(
        &mut client,
        feature,
        r#"{"operation":"speed","crs":"EPSG:3857"}"#,
    )
    .await;
    let mut sse = server.subscribe(&format!("{speed}/stream"), &[]).await;
    let body = format!(
        "{}\n{}",
        position(1, 500_000.0, 4_000_000.0),
        position(2, 500_003.0, 4_000_004.0)
    );
    let response = client.post(&format!("{feature}/ingest"), &body).await;
    assert_eq!(response.status, 202, "{response:?}");
    assert_eq!(take(&mut sse, 1).await[0].json()["value"], 5.0);
    // Not finite is refused whatever the system.
    let response = client
        .post(
            &format!("{feature}/ingest"),
            r#"{"datetime":"2026-01-01T00:00:03Z","coordinates":[1e308,1e309]}"#,
        )
        .await;
    assert_eq!(response.status, 400, "{response:?}");
}

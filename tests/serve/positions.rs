//! A feature's positions on the server (`…/tgsequence/ingest|queries|
//! stream`): ingest, the position operations as SSE, the 400s naming the
//! field, one reference system per feature, and a restart with `--state`.

use super::*;

/// The positions of ship s1.
const S: &str = "/collections/ships/items/s1/tgsequence";

/// A position at `secs` seconds into 2026.
fn position(secs: u32, lon: f64, lat: f64) -> String {
    format!(r#"{{"datetime":"2026-01-01T00:00:{secs:02}Z","coordinates":[{lon},{lat}]}}"#)
}

/// The square lon 0..1, lat 0..1.
const SQUARE: &str = r#"{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1],[0,0]]]}"#;

/// The length of the WGS84 meridian from the equator to 1° N, in metres
/// (GeographicLib: `echo 0 0 1 0 | GeodSolve -i` gives 110574.388557799).
const MERIDIAN_DEGREE: f64 = 110_574.388_557_799;

#[tokio::test]
async fn ingested_positions_stream_speed_position_and_geofence_events() {
    let server = Serve::start("positions-sse", &[], &[]);
    let mut client = server.client();
    let speed = register(&mut client, S, r#"{"operation":"speed"}"#).await;
    assert!(speed.starts_with(&format!("{S}/queries/")), "{speed}");
    let echo = register(&mut client, S, r#"{"operation":"position"}"#).await;
    let fence = register(
        &mut client,
        S,
        &format!(r#"{{"geofence":{SQUARE},"detect":["enter","exit"]}}"#),
    )
    .await;
    let mut speeds = server.subscribe(&format!("{speed}/stream"), &[]).await;
    let mut echoes = server.subscribe(&format!("{echo}/stream"), &[]).await;
    let mut fences = server.subscribe(&format!("{fence}/stream"), &[]).await;

    // Up the meridian by 1° in 10 s, then east across the square.
    let body = [
        position(0, -0.5, 0.0),
        position(10, -0.5, 1.0),
        position(20, 0.5, 1.0),
        position(30, 1.5, 1.0),
    ]
    .join("\n");
    let response = client.post(&format!("{S}/ingest"), &body).await;
    assert_eq!(response.status, 202, "{response:?}");
    assert_eq!(response.json()["accepted"], 4);
    assert_eq!(response.json()["queries"], 3);

    let events = take(&mut speeds, 3).await;
    let first = events[0].json();
    assert_eq!(first["datetime"], "2026-01-01T00:00:10Z");
    assert_eq!(first["property"], "tgsequence");
    assert_eq!(first["operation"], "speed");
    let v = first["value"].as_f64().unwrap();
    assert!(
        (v - MERIDIAN_DEGREE / 10.0).abs() < 1e-6,
        "{v} m/s, not {}",
        MERIDIAN_DEGREE / 10.0
    );

    let echoed = take(&mut echoes, 4).await;
    assert_eq!(
        echoed[1].json(),
        serde_json::json!({"datetime":"2026-01-01T00:00:10Z","coordinates":[-0.5,1],
            "property":"tgsequence","operation":"position"})
    );

    // At lat 1 the ship runs along the square's top edge (its boundary is
    // inside): it enters at lon 0, half way from 10 s to 20 s, and leaves
    // at lon 1, half way from 20 s to 30 s, each crossing interpolated
    // along the segment, not taken at a sample.
    let detected = take(&mut fences, 2).await;
    assert_eq!(detected[0].event, "detect");
    let enter = detected[0].json();
    assert_eq!(enter["detect"], "enter", "{enter}");
    assert_eq!(enter["operation"], "geofence");
    assert_eq!(enter["datetime"], "2026-01-01T00:00:15Z", "{enter}");
    assert_eq!(enter["coordinates"], serde_json::json!([0, 1]), "{enter}");
    let exit = detected[1].json();
    assert_eq!(exit["detect"], "exit", "{exit}");
    assert_eq!(exit["datetime"], "2026-01-01T00:00:25Z", "{exit}");

    // The query's link object names it.
    let link = client.get(&speed).await.json();
    assert_eq!(link["property"], "tgsequence");
    assert_eq!(link["operation"], "speed");
    let listed = client.get(&format!("{S}/queries")).await.json();
    assert_eq!(listed["numberReturned"], 3);
    assert_eq!(client.delete(&echo).await.status, 204);
    assert_eq!(client.get(&echo).await.status, 404);
}

#[tokio::test]
async fn a_moving_point_is_ingested_as_its_instants() {
    let server = Serve::start("positions-moving-point", &[], &[]);
    let mut client = server.client();
    let echo = register(&mut client, S, r#"{"operation":"position"}"#).await;
    let mut sse = server.subscribe(&format!("{echo}/stream"), &[]).await;
    let body = r#"{"type":"MovingPoint","coordinates":[[4.35,50.85],[4.36,50.86,12]],
        "datetimes":["2026-01-01T00:00:00Z","2026-01-01T00:00:10Z"],"interpolation":"Linear"}"#;
    let response = client.post(&format!("{S}/ingest"), body).await;
    assert_eq!(response.status, 202, "{response:?}");
    let events = take(&mut sse, 2).await;
    assert_eq!(
        events[1].json()["coordinates"],
        serde_json::json!([4.36, 50.86, 12])
    );
}

#[tokio::test]
async fn bad_positions_are_400s_naming_the_field_and_nothing_is_delivered() {
    let server = Serve::start("positions-400", &[], &[]);
    let mut client = server.client();
    let echo = register(&mut client, S, r#"{"operation":"position"}"#).await;
    let ingest = format!("{S}/ingest");
    for (body, field, says) in [
        (position(0, 200.0, 0.0), "coordinates", "longitude 200"),
        (position(0, 0.0, -91.0), "coordinates", "latitude -91"),
        (
            r#"{"datetime":"2026-01-01T00:00:00Z","coordinates":[1]}"#.to_owned(),
            "coordinates",
            "instant 1: expected 2 or 3 numbers",
        ),
        (
            format!(
                "{}\n{}",
                position(0, 1.0, 2.0),
                r#"{"datetime":"2026-01-01T00:00:01Z","coordinates":[1,2,3,4]}"#
            ),
            "coordinates",
            "instant 2: expected 2 or 3 numbers",
        ),
        (
            format!("{}\n{}", position(5, 0.0, 0.0), position(5, 0.0, 1.0)),
            "datetime",
            "must increase",
        ),
        (
            r#"{"datetime":"2026-01-01T00:00:00Z","value":1}"#.to_owned(),
            "coordinates",
            "instant 1",
        ),
        (
            r#"{"type":"MovingPoint","coordinates":[[1,2],[3,4]],"datetimes":["2026-01-01T00:00:00Z"]}"#
                .to_owned(),
            "datetimes",
            "1 datetimes for 2 coordinates",
        ),
    ] {
        let response = client.post(&ingest, &body).await;
        assert_eq!(response.status, 400, "{body}: {response:?}");
        let description = response.json()["description"].as_str().unwrap().to_owned();
        assert!(
            description.starts_with(&format!("{field}: ")) && description.contains(says),
            "{body}: {description}"
        );
    }
    // Nothing reached the query.
    assert_eq!(client.get(&echo).await.json()["events"], 0);

    // A bad registration names its field too.
    let response = client
        .post(&format!("{S}/queries"), r#"{"operation":"ln"}"#)
        .await;
    assert_eq!(response.status, 400, "{response:?}");
    assert!(
        response.json()["description"]
            .as_str()
            .unwrap()
            .starts_with("operation: ")
    );
}

#[tokio::test]
async fn a_feature_has_one_reference_system_and_positions_are_not_a_propertys() {
    let server = Serve::start("positions-crs", &[], &[]);
    let mut client = server.client();
    register(&mut client, S, r#"{"operation":"speed"}"#).await;
    // Geodetic by default: a planar query on the same feature is 422.
    let response = client
        .post(
            &format!("{S}/queries"),
            r#"{"operation":"speed","crs":"EPSG:3857"}"#,
        )
        .await;
    assert_eq!(response.status, 422, "{response:?}");
    let description = response.json()["description"].as_str().unwrap().to_owned();
    assert!(
        description.starts_with("crs: ") && description.contains("EPSG:4326"),
        "{description}"
    );
    // Another feature may be planar, and takes any finite coordinates.
    let planar = "/collections/ships/items/s2/tgsequence";
    register(
        &mut client,
        planar,
        r#"{"operation":"speed","crs":"EPSG:3857"}"#,
    )
    .await;
    let response = client
        .post(
            &format!("{planar}/ingest"),
            &position(0, 500_000.0, 4_000_000.0),
        )
        .await;
    assert_eq!(response.status, 202, "{response:?}");

    // A temporal property takes no position, and no position query.
    let response = client
        .post(&format!("{P}/ingest"), &position(0, 1.0, 2.0))
        .await;
    assert_eq!(response.status, 400, "{response:?}");
    assert!(
        response.json()["description"]
            .as_str()
            .unwrap()
            .contains("/collections/ships/items/s1/tgsequence/ingest"),
        "{response:?}"
    );
    let response = client
        .post(
            &format!("{P}/queries"),
            r#"{"operation":"speed","type":"TGeogPoint"}"#,
        )
        .await;
    assert_eq!(response.status, 422, "{response:?}");
}

#[tokio::test]
async fn a_position_query_survives_a_restart_with_its_motion() {
    let state = TempDir::new("positions-state");
    let dir = state.path().to_str().unwrap().to_owned();
    let mut server = Serve::start("positions-state-1", &["--state", &dir], &[]);
    let mut client = server.client();
    let speed = register(&mut client, S, r#"{"operation":"speed"}"#).await;
    let mut sse = server.subscribe(&format!("{speed}/stream"), &[]).await;
    let body = format!("{}\n{}", position(0, 0.0, 0.0), position(10, 0.0, 1.0));
    assert_eq!(client.post(&format!("{S}/ingest"), &body).await.status, 202);
    let before = take(&mut sse, 1).await;
    assert_eq!(before[0].id.as_deref(), Some("1"));
    drop(sse);
    assert!(server.terminate().success());

    let server = Serve::start("positions-state-2", &["--state", &dir], &[]);
    let mut client = server.client();
    let link = client.get(&speed).await.json();
    assert_eq!(link["status"], "running", "{link}");
    assert_eq!(link["operation"], "speed");
    let mut sse = server
        .subscribe(&format!("{speed}/stream"), &[("Last-Event-ID", "1")])
        .await;
    // The next speed is of the segment from the position before the
    // restart: the query's motion was replayed, not started afresh.
    let response = client
        .post(&format!("{S}/ingest"), &position(20, 0.0, 2.0))
        .await;
    assert_eq!(response.status, 202, "{response:?}");
    let after = take(&mut sse, 1).await;
    assert_eq!(after[0].id.as_deref(), Some("2"));
    let event = after[0].json();
    assert_eq!(event["datetime"], "2026-01-01T00:00:20Z");
    let v = event["value"].as_f64().unwrap();
    // 1° to 2° N is a little longer than 0° to 1°.
    assert!(v > MERIDIAN_DEGREE / 10.0 && v < 11_100.0, "{v}");
}

#[tokio::test]
async fn a_position_query_on_an_engine_without_positions_is_422_naming_those_that_serve_them() {
    let server = Serve::start("positions-engine", &[], &[]);
    let mut client = server.client();
    let response = client
        .post(
            &format!("{S}/queries"),
            r#"{"operation":"speed","engine":"echo"}"#,
        )
        .await;
    assert_eq!(response.status, 422, "{response:?}");
    let body = response.json();
    assert_eq!(body["field"], "engine", "{body}");
    let description = body["description"].as_str().unwrap().to_owned();
    assert!(
        description.contains("the echo engine does not serve positions queries")
            && description.contains("engines that do are local, refpos;"),
        "{description}"
    );
    assert_eq!(
        client.get(&format!("{S}/queries")).await.json()["numberReturned"],
        0
    );
}

#[tokio::test]
async fn a_window_of_positions_closes_on_the_wall_clock_with_no_later_position() {
    let server = Serve::start("positions-live", &[], &[]);
    let mut client = server.client();
    let extent = register(
        &mut client,
        S,
        r#"{"aggregation":"EXTENT","window":{"type":"TUMBLING","size":1,"unit":"SECONDS"}}"#,
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
    assert_eq!(client.post(&format!("{S}/ingest"), &body).await.status, 202);
    // Nothing more is ingested: the clock closes the window.
    let events = take(&mut sse, 1).await;
    assert_eq!(events[0].event, "window");
    let window = events[0].json();
    assert_eq!(window["aggregation"], "EXTENT");
    assert_eq!(
        window["value"],
        serde_json::json!([4, 50, 5, 51]),
        "{window}"
    );
    assert!(window.get("partial").is_none(), "{window}");
}

#[tokio::test]
async fn a_geofence_survives_a_restart_knowing_which_side_the_feature_is_on() {
    let state = TempDir::new("positions-fence-state");
    let dir = state.path().to_str().unwrap().to_owned();
    let mut server = Serve::start("positions-fence-state-1", &["--state", &dir], &[]);
    let mut client = server.client();
    let fence = register(
        &mut client,
        S,
        &format!(r#"{{"geofence":{SQUARE},"detect":["enter","exit"]}}"#),
    )
    .await;
    let mut sse = server.subscribe(&format!("{fence}/stream"), &[]).await;
    let body = format!("{}\n{}", position(0, -0.5, 0.5), position(10, 0.5, 0.5));
    assert_eq!(client.post(&format!("{S}/ingest"), &body).await.status, 202);
    let entered = take(&mut sse, 1).await;
    assert_eq!(entered[0].json()["detect"], "enter");
    drop(sse);
    assert!(server.terminate().success());

    let server = Serve::start("positions-fence-state-2", &["--state", &dir], &[]);
    let mut client = server.client();
    // From the start: the stored enter, as it was sent.
    let mut sse = server.subscribe(&format!("{fence}/stream"), &[]).await;
    let replayed = take(&mut sse, 1).await;
    assert_eq!(replayed[0].event, "detect");
    assert_eq!(replayed[0].id.as_deref(), Some("1"));
    assert_eq!(replayed[0].json(), entered[0].json());
    // The feature is inside: leaving is an exit, under the next id.
    let response = client
        .post(&format!("{S}/ingest"), &position(20, 1.5, 0.5))
        .await;
    assert_eq!(response.status, 202, "{response:?}");
    let exited = take(&mut sse, 1).await;
    assert_eq!(exited[0].id.as_deref(), Some("2"));
    let exit = exited[0].json();
    assert_eq!(exit["detect"], "exit", "{exit}");
    assert_eq!(exit["datetime"], "2026-01-01T00:00:15Z", "{exit}");
}

/// A ring of `n` vertices around (0.5, 0.5), closed: its JSON is some
/// 40 bytes a vertex.
fn big_fence(n: usize) -> String {
    let mut ring: Vec<String> = (0..n)
        .map(|i| {
            let a = i as f64 / n as f64 * std::f64::consts::TAU;
            format!("[{},{}]", 0.5 + 0.4 * a.cos(), 0.5 + 0.4 * a.sin())
        })
        .collect();
    ring.push(ring[0].clone());
    format!(
        r#"{{"type":"Polygon","coordinates":[[{}]]}}"#,
        ring.join(",")
    )
}

#[tokio::test]
async fn a_fence_the_server_accepts_is_recorded_with_state_not_a_503() {
    // 9,000 vertices: under the 10,000-vertex and 1 MiB bounds of a
    // geometry, over the 64 KiB a stored registration body had (a 503).
    let fence = big_fence(9_000);
    assert!(fence.len() > 256 * 1024, "{}", fence.len());
    let state = TempDir::new("positions-big-fence");
    let dir = state.path().to_str().unwrap().to_owned();
    let mut server = Serve::start("positions-big-fence-1", &["--state", &dir], &[]);
    let mut client = server.client();
    let query = register(&mut client, S, &format!(r#"{{"geofence":{fence}}}"#)).await;
    assert!(server.terminate().success());
    // And it is read back after a restart.
    let server = Serve::start("positions-big-fence-2", &["--state", &dir], &[]);
    let mut client = server.client();
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let response = client
        .post(&format!("{S}/ingest"), &position(0, 0.5, 0.5))
        .await;
    assert_eq!(response.status, 202, "{response:?}");
    assert_eq!(take(&mut sse, 1).await[0].json()["detect"], "inside");
}

#[tokio::test]
async fn a_detect_kind_named_twice_is_a_400_naming_detect() {
    let server = Serve::start("positions-detect-twice", &[], &[]);
    let mut client = server.client();
    let response = client
        .post(
            &format!("{S}/queries"),
            &format!(r#"{{"geofence":{SQUARE},"detect":["enter","exit","enter"]}}"#),
        )
        .await;
    assert_eq!(response.status, 400, "{response:?}");
    let problem = response.json();
    assert_eq!(problem["field"], "detect", "{problem}");
    assert!(
        problem["description"]
            .as_str()
            .unwrap()
            .contains("\"enter\" is named twice"),
        "{problem}"
    );
}

#[tokio::test]
async fn a_tgeompoint_registration_without_its_crs_is_refused_not_measured_on_the_ellipsoid() {
    let server = Serve::start("positions-geom-no-crs", &[], &[]);
    let mut client = server.client();
    // A feature no query has fixed: the planar system must be named.
    let response = client
        .post(
            &format!("{S}/queries"),
            r#"{"operation":"speed","type":"TGeomPoint"}"#,
        )
        .await;
    assert_eq!(response.status, 400, "{response:?}");
    assert_eq!(response.json()["field"], "crs", "{response:?}");
    // It fixed nothing: the feature is still free to be planar.
    register(
        &mut client,
        "/collections/ships/items/s2/tgsequence",
        r#"{"operation":"speed"}"#,
    )
    .await;
    // A geodetic feature: TGeomPoint disagrees with it.
    let response = client
        .post(
            "/collections/ships/items/s2/tgsequence/queries",
            r#"{"operation":"speed","type":"TGeomPoint"}"#,
        )
        .await;
    assert_eq!(response.status, 422, "{response:?}");
    assert_eq!(response.json()["field"], "type", "{response:?}");
    register(&mut client, S, r#"{"operation":"speed","crs":"EPSG:3857"}"#).await;
    // And on a planar feature, `type` TGeomPoint alone takes its system.
    register(
        &mut client,
        S,
        r#"{"operation":"speed","type":"TGeomPoint"}"#,
    )
    .await;
}

/// A `MovingPoint`'s `crs` on a feature no query has fixed is the system
/// its positions are checked in, and fixes nothing: nothing of an ingest
/// to a feature no query reads is kept, so the first registration fixes
/// the feature, whatever the positions before it said.
#[tokio::test]
async fn a_moving_points_crs_on_a_feature_no_query_has_fixed_checks_its_positions_and_fixes_nothing()
 {
    let server = Serve::start("positions-crs-unfixed", &[], &[]);
    let mut client = server.client();
    let ingest = format!("{S}/ingest");
    let moving = |crs: &str, c: &str| {
        format!(
            r#"{{"type":"MovingPoint","coordinates":[{c}],"datetimes":["2026-01-01T00:00:00Z"],"crs":"{crs}"}}"#
        )
    };
    let response = client
        .post(&ingest, &moving("EPSG:3857", "[500000,4000000]"))
        .await;
    assert_eq!(response.status, 202, "{response:?}");
    assert_eq!(response.json()["queries"], 0);
    // Checked in its own system: lon/lat out of range.
    let response = client.post(&ingest, &moving("EPSG:4326", "[200,0]")).await;
    assert_eq!(response.status, 400, "{response:?}");
    assert!(
        response.json()["description"]
            .as_str()
            .unwrap()
            .contains("longitude 200"),
        "{response:?}"
    );
    // The first registration fixes the feature: geodetic here.
    let speed = register(&mut client, S, r#"{"operation":"speed"}"#).await;
    assert_eq!(client.get(&speed).await.json()["crs"], "EPSG:4326");
    let response = client
        .post(&ingest, &moving("EPSG:3857", "[500000,4000000]"))
        .await;
    assert_eq!(response.status, 422, "{response:?}");
    assert_eq!(response.json()["field"], "crs", "{response:?}");
}

/// A number an error quotes is written briefly: a longitude of 1e308 is
/// `1e+308` in the 400, not 309 digits.
#[tokio::test]
async fn a_longitude_of_1e308_is_quoted_briefly_in_the_400() {
    let server = Serve::start("positions-brief-number", &[], &[]);
    let mut client = server.client();
    register(&mut client, S, r#"{"operation":"speed"}"#).await;
    for (body, says) in [
        (position(0, 1e308, 0.0), "longitude 1e+308 is outside [-180, 180]"),
        (position(0, 0.0, -1e308), "latitude -1e+308 is outside [-90, 90]"),
        (
            r#"{"type":"MovingPoint","coordinates":[[1e308,0]],"datetimes":["2026-01-01T00:00:00Z"]}"#
                .to_owned(),
            "longitude 1e+308 is outside",
        ),
    ] {
        let response = client.post(&format!("{S}/ingest"), &body).await;
        assert_eq!(response.status, 400, "{response:?}");
        let description = response.json()["description"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            description.contains(says) && description.len() < 200,
            "{description}"
        );
    }
}

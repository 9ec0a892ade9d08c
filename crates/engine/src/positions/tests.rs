//! The `local` engine's run of position queries, end to end: registration
//! bodies in, events out.

use mfstream_model::geo::Crs;
use mfstream_model::{
    Instant, Point, PropertyType, QuerySpec, QueryStatus, Registration, RegistrationError,
    SpecError, Value,
};

use crate::{LocalEngine, Source, StreamEngine};

const SQUARE: &str = r#"{"type":"Polygon","coordinates":[[[0,0],[10,0],[10,10],[0,10],[0,0]]]}"#;

fn spec(body: &str, t: PropertyType) -> Result<QuerySpec, SpecError> {
    Registration::from_json(body)?.into_spec("tgsequence", t)
}

fn at(secs: u32, x: f64, y: f64) -> Instant {
    Instant {
        datetime: format!("2026-01-01T00:00:{secs:02}Z"),
        value: Value::Point(Point::new(x, y)),
    }
}

async fn run(body: &str, t: PropertyType, instants: Vec<Instant>) -> (Vec<String>, QueryStatus) {
    let spec = spec(body, t).unwrap();
    let mut handle = LocalEngine::new()
        .submit(spec, Source::from_instants(instants))
        .await
        .unwrap();
    let mut events = Vec::new();
    while let Some(event) = handle.next().await {
        events.push(event.to_json());
    }
    (events, handle.status())
}

#[tokio::test]
async fn planar_speed_azimuth_and_length_follow_the_segments() {
    let path = || {
        vec![
            at(0, 0.0, 0.0),
            at(1, 3.0, 4.0),
            at(3, 3.0, 4.0),
            at(5, 3.0, 14.0),
        ]
    };
    let planar = PropertyType::TGeomPoint;
    let crs = |op: &str| format!(r#"{{"operation":"{op}","crs":"EPSG:3857"}}"#);
    let (speed, status) = run(&crs("speed"), planar, path()).await;
    assert_eq!(status, QueryStatus::Completed);
    // None at the first instant; 5 units in 1 s, a stop, 10 units in 2 s.
    assert_eq!(
        speed,
        [
            r#"{"datetime":"2026-01-01T00:00:01Z","value":5,"property":"tgsequence","operation":"speed"}"#,
            r#"{"datetime":"2026-01-01T00:00:03Z","value":0,"property":"tgsequence","operation":"speed"}"#,
            r#"{"datetime":"2026-01-01T00:00:05Z","value":5,"property":"tgsequence","operation":"speed"}"#,
        ]
    );
    // No azimuth at a stop; due north is 0.
    let (azimuth, _) = run(&crs("azimuth"), planar, path()).await;
    assert_eq!(azimuth.len(), 2, "{azimuth:?}");
    assert!(azimuth[1].contains(r#""value":0,"#), "{azimuth:?}");
    let (length, _) = run(&crs("cumulativeLength"), planar, path()).await;
    let values: Vec<_> = length
        .iter()
        .map(|e| serde_json::from_str::<serde_json::Value>(e).unwrap()["value"].clone())
        .collect();
    assert_eq!(values, [0, 5, 5, 15]);
    // MAX of the speeds over COUNT windows of 2.
    let (max, _) = run(
        r#"{"operation":"speed","crs":"EPSG:3857","aggregation":"MAX","window":{"type":"COUNT","size":2}}"#,
        planar,
        path(),
    )
    .await;
    assert!(
        max[0].contains(r#""aggregation":"MAX","value":5,"count":2"#),
        "{max:?}"
    );
}

#[tokio::test]
async fn position_echoes_the_instant_with_its_z() {
    let mut z = at(1, 4.35, 50.85);
    z.value = Value::Point(Point::with_z(4.35, 50.85, Some(12.0)));
    let (events, _) = run(
        r#"{"operation":"position"}"#,
        PropertyType::TGeogPoint,
        vec![z],
    )
    .await;
    assert_eq!(
        events,
        [
            r#"{"datetime":"2026-01-01T00:00:01Z","coordinates":[4.35,50.85,12],"property":"tgsequence","operation":"position"}"#
        ]
    );
}

#[tokio::test]
async fn a_geofence_emits_enter_and_exit_at_the_interpolated_crossings() {
    let body = format!(r#"{{"geofence":{SQUARE},"detect":["enter","exit"],"crs":"EPSG:3857"}}"#);
    // From x = -5 to 5 in 10 s: enters at x = 0, 5 s in; leaves at x = 10.
    let path = vec![at(0, -5.0, 5.0), at(10, 5.0, 5.0), at(20, 15.0, 5.0)];
    let (events, status) = run(&body, PropertyType::TGeomPoint, path).await;
    assert_eq!(status, QueryStatus::Completed);
    assert_eq!(
        events,
        [
            r#"{"datetime":"2026-01-01T00:00:05Z","coordinates":[0,5],"detect":"enter","property":"tgsequence","operation":"geofence"}"#,
            r#"{"datetime":"2026-01-01T00:00:15Z","coordinates":[10,5],"detect":"exit","property":"tgsequence","operation":"geofence"}"#,
        ]
    );
}

#[tokio::test]
async fn a_position_out_of_range_or_out_of_order_is_skipped_or_fails_the_query() {
    let path = || {
        vec![
            at(0, 0.0, 0.0),
            at(1, 200.0, 0.0),
            at(1, 0.0, 1.0),
            at(2, 0.0, 1.0),
        ]
    };
    let (events, status) = run(
        r#"{"operation":"position"}"#,
        PropertyType::TGeogPoint,
        path(),
    )
    .await;
    assert_eq!(status, QueryStatus::Completed);
    // The second is skipped (counted in the next event); the third is
    // after the first, the last one measured.
    assert_eq!(events.len(), 3, "{events:?}");
    assert!(events[1].ends_with(r#""skipped":1}"#), "{events:?}");
    let (_, failed) = run(
        r#"{"operation":"position","onError":"fail"}"#,
        PropertyType::TGeogPoint,
        path(),
    )
    .await;
    let QueryStatus::Failed { reason } = failed else {
        panic!("{failed:?}")
    };
    assert!(reason.contains("longitude 200"), "{reason}");
    // Not after the previous position.
    let (_, failed) = run(
        r#"{"operation":"position","onError":"fail"}"#,
        PropertyType::TGeogPoint,
        vec![at(1, 0.0, 0.0), at(1, 0.0, 1.0)],
    )
    .await;
    let QueryStatus::Failed { reason } = failed else {
        panic!("{failed:?}")
    };
    assert!(reason.contains("must increase"), "{reason}");
}

#[tokio::test]
async fn aggregates_of_positions_measure_each_window_whole() {
    let path = || {
        vec![
            at(0, 0.0, 0.0),
            at(1, 3.0, 4.0),
            at(3, 3.0, 4.0),
            at(5, 3.0, 14.0),
        ]
    };
    let planar = PropertyType::TGeomPoint;
    let value = |events: &[String]| -> serde_json::Value {
        serde_json::from_str::<serde_json::Value>(&events[0]).unwrap()["value"].clone()
    };
    let window = r#""window":{"type":"COUNT","size":4},"crs":"EPSG:3857""#;
    let of = |name: &str| format!(r#"{{"aggregation":"{name}",{window}}}"#);
    let (extent, status) = run(&of("EXTENT"), planar, path()).await;
    assert_eq!(status, QueryStatus::Completed);
    assert_eq!(
        value(&extent),
        serde_json::json!([0, 0, 3, 14]),
        "{extent:?}"
    );
    assert!(
        extent[0].contains(r#""aggregation":"EXTENT""#),
        "{extent:?}"
    );
    assert_eq!(value(&run(&of("LENGTH"), planar, path()).await.0), 15);
    assert_eq!(value(&run(&of("AVG_SPEED"), planar, path()).await.0), 3);
    assert_eq!(value(&run(&of("MAX_SPEED"), planar, path()).await.0), 5);
    assert_eq!(value(&run(&of("COUNT"), planar, path()).await.0), 4);
    // Time-weighted: x is 1.5 for 1 s, 3 for 4 s; y 2 for 1 s, 4 for 2 s,
    // 9 for 2 s.
    assert_eq!(
        value(&run(&of("CENTROID"), planar, path()).await.0),
        serde_json::json!([2.7, 5.6])
    );
    // Tumbling windows of 2 s: [0, 2) holds 2 positions, [2, 4) one (no
    // speed: skipped, and counted in the next event), [4, 6) one.
    let (speeds, _) = run(
        r#"{"aggregation":"MAX_SPEED","window":{"type":"TUMBLING","size":2,"unit":"SECONDS"},"crs":"EPSG:3857"}"#,
        planar,
        path(),
    )
    .await;
    assert_eq!(speeds.len(), 1, "{speeds:?}");
    assert!(speeds[0].contains(r#""value":5,"count":2"#), "{speeds:?}");
    let (_, failed) = run(
        r#"{"aggregation":"AVG_SPEED","window":{"type":"COUNT","size":1},"crs":"EPSG:3857","onError":"fail"}"#,
        planar,
        path(),
    )
    .await;
    let QueryStatus::Failed { reason } = failed else {
        panic!("{failed:?}")
    };
    assert!(reason.contains("has no AVG_SPEED"), "{reason}");
}

/// Every aggregate of positions takes a HOPPING window (each window
/// measured whole: the segment between two of its buckets counts), and
/// so do a measure's numeric aggregates.
#[tokio::test]
async fn an_aggregate_of_positions_over_a_hopping_window_measures_each_window_whole() {
    let hopping = r#""window":{"type":"HOPPING","size":2,"unit":"SECONDS","hop":1}"#;
    for aggregation in [
        "COUNT",
        "EXTENT",
        "CENTROID",
        "LENGTH",
        "AVG_SPEED",
        "MAX_SPEED",
    ] {
        let body = format!(r#"{{"aggregation":"{aggregation}",{hopping}}}"#);
        assert!(spec(&body, PropertyType::TGeogPoint).is_ok(), "{body}");
    }
    let planar = PropertyType::TGeomPoint;
    let path = vec![at(0, 0.0, 0.0), at(1, 3.0, 4.0), at(2, 6.0, 8.0)];
    let values = |events: &[String]| -> Vec<serde_json::Value> {
        events
            .iter()
            .map(|e| serde_json::from_str::<serde_json::Value>(e).unwrap()["value"].clone())
            .collect()
    };
    // Windows [-1, 1), [0, 2), [1, 3), [2, 4): one bucket a second, so
    // [0, 2) and [1, 3) are two buckets joined by a 5-unit segment.
    let body = format!(r#"{{"aggregation":"LENGTH",{hopping},"crs":"EPSG:3857"}}"#);
    let (events, _) = run(&body, planar, path.clone()).await;
    assert_eq!(values(&events), [0, 5, 5, 0]);
    let body = format!(r#"{{"aggregation":"CENTROID",{hopping},"crs":"EPSG:3857"}}"#);
    let (events, _) = run(&body, planar, path.clone()).await;
    assert_eq!(
        values(&events),
        serde_json::json!([[0, 0], [1.5, 2], [4.5, 6], [6, 8]])
            .as_array()
            .unwrap()[..]
    );
    let body =
        format!(r#"{{"operation":"speed","aggregation":"MAX",{hopping},"crs":"EPSG:3857"}}"#);
    let (events, _) = run(&body, planar, path).await;
    assert_eq!(values(&events), [5, 5, 5]);
    // Position aggregates are for positions only.
    let e = Registration::from_json(&format!(r#"{{"aggregation":"EXTENT",{hopping}}}"#))
        .unwrap()
        .into_spec("p", PropertyType::TReal)
        .unwrap_err();
    assert_eq!(e.field, "aggregation");
}

#[tokio::test]
async fn distance_is_measured_to_the_geometry_zero_inside_a_polygon() {
    let body = format!(r#"{{"operation":"distance","geometry":{SQUARE},"crs":"EPSG:3857"}}"#);
    // Inside; 5 from the corner (10, 10); 3 from the west edge.
    let path = vec![at(0, 5.0, 5.0), at(1, 13.0, 14.0), at(2, -3.0, 5.0)];
    let (events, _) = run(&body, PropertyType::TGeomPoint, path).await;
    let values: Vec<_> = events
        .iter()
        .map(|e| serde_json::from_str::<serde_json::Value>(e).unwrap()["value"].clone())
        .collect();
    assert_eq!(values, [0, 5, 3]);
    // Geodetic, to a point: the WGS84 meridian from the equator to 1° N
    // (GeographicLib: `echo 0 0 1 0 | GeodSolve -i`: 110574.388557799 m).
    let body = r#"{"operation":"distance","geometry":{"type":"Point","coordinates":[0,1]}}"#;
    let (events, _) = run(body, PropertyType::TGeogPoint, vec![at(0, 0.0, 0.0)]).await;
    let v: serde_json::Value = serde_json::from_str(&events[0]).unwrap();
    let d = v["value"].as_f64().unwrap();
    assert!((d - 110_574.388_557_799).abs() < 1e-6, "{d}");
}

/// `position` with a `crs` other than the feature's reprojects (EPSG:4326
/// ↔ EPSG:3857); another pair, or another operation, is 422; the form the
/// store records (`type` the feature's, `crs` the output's) resolves to
/// the same query on a restart.
#[tokio::test]
async fn position_with_another_crs_reprojects_between_4326_and_3857_only() {
    let on = |body: &str, known, crs| {
        Registration::from_json(body)
            .unwrap()
            .into_position_spec("tgsequence", known, crs)
    };
    let geodetic = (Some(PropertyType::TGeogPoint), Some(Crs::Geodetic));
    let mercator = (Some(PropertyType::TGeomPoint), Some(Crs::Planar(3857)));
    let to_3857 = r#"{"operation":"position","crs":"EPSG:3857"}"#;
    let q = on(to_3857, geodetic.0, geodetic.1).unwrap();
    assert_eq!(q.crs(), Some(Crs::Geodetic), "measured in the feature's");
    assert_eq!(q.registered_crs(), Some(Crs::Planar(3857)));
    assert_eq!(q.property_type, PropertyType::TGeogPoint);
    // As the store records it, resolved with no feature known.
    for (body, from, to) in [
        (
            r#"{"operation":"position","crs":"EPSG:3857","type":"TGeogPoint"}"#,
            Crs::Geodetic,
            Crs::Planar(3857),
        ),
        (
            r#"{"operation":"position","crs":"EPSG:4326","type":"TGeomPoint"}"#,
            Crs::Planar(3857),
            Crs::Geodetic,
        ),
    ] {
        let known = Registration::from_json(body).unwrap().property_type;
        let q = on(body, known, None).unwrap_or_else(|e| panic!("{body}: {e:?}"));
        assert_eq!(
            (q.crs(), q.registered_crs()),
            (Some(from), Some(to)),
            "{body}"
        );
    }
    let e = on(
        r#"{"operation":"position","crs":"EPSG:25832"}"#,
        geodetic.0,
        geodetic.1,
    );
    assert!(
        matches!(&e, Err(RegistrationError::Unfit(e)) if e.field == "crs" && e.message.contains("EPSG:4326 ↔ EPSG:3857")),
        "{e:?}"
    );
    let e = on(
        r#"{"operation":"speed","crs":"EPSG:3857"}"#,
        geodetic.0,
        geodetic.1,
    );
    assert!(
        matches!(&e, Err(RegistrationError::Unfit(e)) if e.field == "crs"),
        "{e:?}"
    );
    // A geographic code on another datum: 422, not planar.
    let e = on(r#"{"operation":"speed","crs":"EPSG:4267"}"#, None, None);
    assert!(
        matches!(&e, Err(RegistrationError::Unfit(e)) if e.field == "crs"),
        "{e:?}"
    );
    // ETRS89 is WGS84 here: the same feature, no reprojection.
    let q = on(
        r#"{"operation":"position","crs":"EPSG:4258"}"#,
        geodetic.0,
        geodetic.1,
    )
    .unwrap();
    assert_eq!(q.registered_crs(), Some(Crs::Geodetic));

    // The events: the EPSG example point and back; a pole is skipped.
    let lat = 24.0 + 22.0 / 60.0 + 54.433 / 3600.0;
    let lon = -(100.0 + 20.0 / 60.0);
    let (events, _) = run(
        to_3857,
        PropertyType::TGeogPoint,
        vec![at(0, lon, lat), at(1, 0.0, 90.0), at(2, 0.0, 0.0)],
    )
    .await;
    let coords: Vec<Vec<f64>> = events
        .iter()
        .map(|e| {
            let v: serde_json::Value = serde_json::from_str(e).unwrap();
            v["coordinates"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_f64().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(coords.len(), 2, "{events:?}");
    assert!((coords[0][0] - -11_169_055.58).abs() < 0.005, "{coords:?}");
    assert!((coords[0][1] - 2_800_000.0).abs() < 0.005, "{coords:?}");
    assert_eq!(coords[1], [0.0, 0.0]);
    assert!(events[1].contains(r#""skipped":1"#), "{events:?}");
    let (events, _) = run(
        r#"{"operation":"position","crs":"EPSG:4326","type":"TGeomPoint"}"#,
        mercator.0.unwrap(),
        vec![at(0, -11_169_055.58, 2_800_000.0)],
    )
    .await;
    // The example's metres are rounded to the centimetre: 1e-7° is 1 cm.
    let v: serde_json::Value = serde_json::from_str(&events[0]).unwrap();
    assert!(
        (v["coordinates"][0].as_f64().unwrap() - lon).abs() < 1e-7,
        "{v}"
    );
    assert!(
        (v["coordinates"][1].as_f64().unwrap() - lat).abs() < 1e-7,
        "{v}"
    );
}

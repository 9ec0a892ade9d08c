//! Unit tests of the pure functions. Expected geodesic figures come from
//! GeographicLib's Python package (`geographiclib` 2.1 on PyPI,
//! `Geodesic.WGS84.Inverse`), not from this code; the random comparison
//! with pymeos, GeographicLib and shapely is `oracle`.

use serde_json::json;

use super::*;

mod fence;

use fence::{fence, run};

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-300)
}

#[test]
fn crs_parses_epsg_codes_and_crs84() {
    assert_eq!(Crs::parse("EPSG:4326"), Ok(Crs::Geodetic));
    assert_eq!(Crs::parse("epsg:3857"), Ok(Crs::Planar(3857)));
    assert_eq!(
        Crs::parse("http://www.opengis.net/def/crs/OGC/1.3/CRS84"),
        Ok(Crs::Geodetic)
    );
    assert_eq!(
        Crs::parse("urn:ogc:def:crs:EPSG::25832"),
        Ok(Crs::Planar(25832))
    );
    assert_eq!(Crs::Planar(3857).name(), "EPSG:3857");
    assert_eq!(Crs::Geodetic.name(), "EPSG:4326");
    for bad in ["EPSG:", "EPSG:0", "WGS84", "EPSG:-1", ""] {
        let err = Crs::parse(bad).unwrap_err();
        assert!(err.to_string().contains(&format!("\"{bad}\"")), "{err}");
    }
}

#[test]
fn check_point_refuses_non_finite_and_out_of_range_lon_lat() {
    assert_eq!(check_point(Crs::Geodetic, Point::new(180.0, -90.0)), Ok(()));
    assert_eq!(
        check_point(Crs::Geodetic, Point::new(180.5, 0.0)),
        Err(GeoError::Longitude(180.5))
    );
    assert_eq!(
        check_point(Crs::Geodetic, Point::new(0.0, 91.0)),
        Err(GeoError::Latitude(91.0))
    );
    assert!(matches!(
        check_point(Crs::Planar(3857), Point::new(f64::NAN, 0.0)),
        Err(GeoError::NotFinite(_))
    ));
    // Projected coordinates are not degrees.
    assert_eq!(
        check_point(Crs::Planar(3857), Point::new(1e6, -5e6)),
        Ok(())
    );
}

#[test]
fn geodetic_distance_and_azimuth_match_geographiclib() {
    let (a, b) = (Point::new(13.0, 52.0), Point::new(2.3522, 48.8566));
    assert!(close(
        distance(Crs::Geodetic, a, b),
        832436.7778184647,
        1e-12
    ));
    let az = azimuth(Crs::Geodetic, a, b).expect("distinct points");
    assert!(close(az, 360.0 - 110.62836950620672, 1e-12), "{az}");
    // Across the antimeridian: the short way.
    let (a, b) = (Point::new(179.5, -16.0), Point::new(-179.8, -16.5));
    assert!(close(
        distance(Crs::Geodetic, a, b),
        93064.43235143785,
        1e-12
    ));
    let az = azimuth(Crs::Geodetic, a, b).expect("distinct points");
    assert!(close(az, 126.57732553729019, 1e-12), "{az}");
    assert_eq!(azimuth(Crs::Geodetic, a, a), None);
}

#[test]
fn planar_distance_and_azimuth_are_euclid_clockwise_from_north() {
    let c = Crs::Planar(3857);
    let o = Point::new(0.0, 0.0);
    assert_eq!(distance(c, o, Point::new(3.0, 4.0)), 5.0);
    assert_eq!(azimuth(c, o, Point::new(0.0, 1.0)), Some(0.0));
    assert_eq!(azimuth(c, o, Point::new(1.0, 0.0)), Some(90.0));
    assert_eq!(azimuth(c, o, Point::new(0.0, -1.0)), Some(180.0));
    assert_eq!(azimuth(c, o, Point::new(-1.0, 0.0)), Some(270.0));
    assert_eq!(normalize_degrees(-1e-20), 0.0);
}

#[test]
fn motion_reports_the_segment_ending_at_each_instant() {
    let mut m = Motion::new(Crs::Planar(2056));
    let first = m.push(0, Point::new(0.0, 0.0));
    assert_eq!(
        first,
        Step {
            speed: None,
            azimuth: None,
            cumulative_length: 0.0
        }
    );
    let s = m.push(2_000_000, Point::new(3.0, 4.0));
    assert_eq!((s.speed, s.cumulative_length), (Some(2.5), 5.0));
    // A stop: speed 0, no azimuth (MEOS skips zero-length segments).
    let stop = m.push(3_000_000, Point::new(3.0, 4.0));
    assert_eq!(
        (stop.speed, stop.azimuth, stop.cumulative_length),
        (Some(0.0), None, 5.0)
    );
    // A repeated timestamp (refused upstream): no speed over no time.
    let again = m.push(3_000_000, Point::new(3.0, 5.0));
    assert_eq!(
        (again.speed, again.azimuth, again.cumulative_length),
        (None, Some(0.0), 6.0)
    );
}

#[test]
fn geojson_is_validated_and_bounded() {
    let square =
        json!({"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]]]});
    let g = Geometry::from_geojson(&square).expect("a valid polygon");
    assert_eq!(g.kind(), "Polygon");
    let open = json!({"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1]]]});
    let err = Geometry::from_geojson(&open).unwrap_err().to_string();
    assert!(
        err.contains("geometry.coordinates[0]") && err.contains("not closed"),
        "{err}"
    );
    let short = json!({"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [0, 0]]]});
    let err = Geometry::from_geojson(&short).unwrap_err().to_string();
    assert!(err.contains("at least 4"), "{err}");
    let bad = json!({"type": "LineString", "coordinates": [[0, 0], [1, "x"]]});
    let err = Geometry::from_geojson(&bad).unwrap_err().to_string();
    assert!(err.starts_with("geometry.coordinates[1][1]"), "{err}");
    let err = Geometry::from_geojson(&json!({"type": "GeometryCollection", "geometries": []}))
        .unwrap_err()
        .to_string();
    assert!(err.contains("\"GeometryCollection\""), "{err}");
    let many: Vec<_> = (0..=MAX_GEOMETRY_VERTICES).map(|i| json!([i, 0])).collect();
    let err =
        Geometry::from_geojson(&json!({"type": "MultiPoint", "coordinates": many})).unwrap_err();
    assert!(
        matches!(
            err,
            GeoError::TooLarge {
                what: "vertices",
                ..
            }
        ),
        "{err}"
    );
    let huge =
        json!({"type": "Point", "coordinates": [0, 0], "pad": "x".repeat(MAX_GEOMETRY_BYTES)});
    let err = Geometry::from_geojson(&huge).unwrap_err();
    assert!(
        matches!(err, GeoError::TooLarge { what: "bytes", .. }),
        "{err}"
    );
}

#[test]
fn planar_distance_to_geometries_is_zero_inside_a_polygon_and_outside_its_hole() {
    let c = Crs::Planar(3857);
    let holed = json!({"type": "Polygon", "coordinates": [
        [[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]],
        [[4, 4], [6, 4], [6, 6], [4, 6], [4, 4]]]});
    let g = Geometry::from_geojson(&holed).expect("a valid polygon");
    assert_eq!(g.distance(c, Point::new(1.0, 1.0)), 0.0);
    assert_eq!(g.distance(c, Point::new(5.0, 5.5)), 0.5);
    assert_eq!(g.distance(c, Point::new(13.0, 14.0)), 5.0);
    let line = json!({"type": "LineString", "coordinates": [[0, 0], [10, 0]]});
    let g = Geometry::from_geojson(&line).expect("a valid line");
    assert_eq!(g.distance(c, Point::new(5.0, -2.0)), 2.0);
}

#[test]
fn geodetic_distance_to_a_point_is_the_ellipsoidal_geodesic() {
    let g = Geometry::from_geojson(&json!({"type": "Point", "coordinates": [2.3522, 48.8566]}))
        .expect("a valid point");
    let d = g.distance(Crs::Geodetic, Point::new(13.0, 52.0));
    assert!(close(d, 832436.7778184647, 1e-12), "{d}");
}

#[test]
fn position_acc_aggregates_the_windows_instants() {
    let mut acc = PositionAcc::new(Crs::Planar(3857));
    let (s, e) = (0, 10_000_000);
    assert_eq!(
        acc.result(PositionAggregate::Count, s, e),
        AggregateValue::Number(0.0)
    );
    assert_eq!(
        acc.result(PositionAggregate::Centroid, s, e),
        AggregateValue::None
    );
    acc.push(0, Point::new(0.0, 0.0));
    assert_eq!(
        acc.result(PositionAggregate::Centroid, s, e),
        AggregateValue::Point(Point::new(0.0, 0.0))
    );
    assert_eq!(
        acc.result(PositionAggregate::AvgSpeed, s, e),
        AggregateValue::None
    );
    acc.push(1_000_000, Point::new(4.0, 0.0));
    acc.push(4_000_000, Point::new(4.0, 3.0));
    use AggregateValue::{BBox, Number};
    assert_eq!(acc.result(PositionAggregate::Count, s, e), Number(3.0));
    assert_eq!(
        acc.result(PositionAggregate::Extent, s, e),
        BBox([0.0, 0.0, 4.0, 3.0])
    );
    assert_eq!(acc.result(PositionAggregate::Length, s, e), Number(7.0));
    assert_eq!(
        acc.result(PositionAggregate::AvgSpeed, s, e),
        Number(7.0 / 4.0)
    );
    assert_eq!(acc.result(PositionAggregate::MaxSpeed, s, e), Number(4.0));
    // x: 2 over 1 s then 4 over 3 s; y: 0 over 1 s then 1.5 over 3 s.
    assert_eq!(
        acc.result(PositionAggregate::Centroid, s, e),
        AggregateValue::Point(Point::new((2.0 + 12.0) / 4.0, 4.5 / 4.0))
    );
}

/// Accumulators of consecutive runs, appended, give what one run over all
/// their instants gives: the segments joining the runs (a stop, a fast
/// hop, a geodetic segment) counted once, whether measured when the run
/// began (`push_after`) or at the append.
#[test]
fn appended_runs_equal_one_run_over_their_instants() {
    let geodetic = [
        (0, Point::new(179.9, 10.0)),
        (1_500_000, Point::new(-179.95, 10.01)),
        (2_000_000, Point::new(-179.95, 10.01)),
        (9_000_000, Point::new(-179.0, 11.0)),
        (9_000_001, Point::new(-178.9, 11.2)),
        (20_000_000, Point::new(-178.0, 12.0)),
    ];
    let planar: Vec<(Micros, Point)> = (0..6)
        .map(|i| {
            (
                i * 1_000_000,
                Point::new((i * i) as f64, (7 * i % 5) as f64),
            )
        })
        .collect();
    for (crs, track) in [(Crs::Geodetic, &geodetic[..]), (Crs::Planar(3857), &planar)] {
        let mut whole = PositionAcc::new(crs);
        for &(t, p) in track {
            whole.push(t, p);
        }
        // Every way of cutting the track into three runs.
        for a in 1..track.len() {
            for b in a..track.len() {
                for measured in [true, false] {
                    let mut runs = Vec::new();
                    for (i, run) in [&track[..a], &track[a..b], &track[b..]].iter().enumerate() {
                        let mut acc = PositionAcc::new(crs);
                        let start = [0, a, b][i];
                        let before = (measured && start > 0).then(|| track[start - 1]);
                        for &(t, p) in run.iter() {
                            acc.push_after(t, p, before);
                        }
                        runs.push(acc);
                    }
                    let mut merged = runs[0].clone();
                    merged.append(&runs[1]);
                    merged.append(&runs[2]);
                    let (s, e) = (0, 0);
                    for what in [
                        PositionAggregate::Count,
                        PositionAggregate::Extent,
                        PositionAggregate::Centroid,
                        PositionAggregate::Length,
                        PositionAggregate::AvgSpeed,
                        PositionAggregate::MaxSpeed,
                    ] {
                        let (got, want) = (merged.result(what, s, e), whole.result(what, s, e));
                        let same = match (got, want) {
                            (AggregateValue::Number(g), AggregateValue::Number(w)) => {
                                close(g, w, 1e-14)
                            }
                            (AggregateValue::Point(g), AggregateValue::Point(w)) => {
                                close(g.x, w.x, 1e-14) && close(g.y, w.y, 1e-14)
                            }
                            (g, w) => g == w,
                        };
                        assert!(same, "{crs:?} cut at {a},{b} {what:?}: {got:?} != {want:?}");
                    }
                }
            }
        }
    }
}

#[test]
fn geodetic_polygon_edges_are_great_circles_for_distance_but_straight_for_fences() {
    // The top edge from (0, 60) to (90, 60) is a great circle reaching
    // about 67.8° N at 45° E. Figures from pymeos 1.3
    // (`TGeogPointInst.nearest_approach_distance`).
    let quad =
        json!({"type": "Polygon", "coordinates": [[[0, 0], [90, 0], [90, 60], [0, 60], [0, 0]]]});
    let g = Geometry::from_geojson(&quad).expect("a valid polygon");
    assert_eq!(g.distance(Crs::Geodetic, Point::new(45.0, 61.0)), 0.0);
    let d = g.distance(Crs::Geodetic, Point::new(45.0, 70.0));
    assert!(close(d, 246258.65279223621, 1e-9), "{d}");
    let d = g.distance(Crs::Geodetic, Point::new(-1.0, 30.0));
    assert!(close(d, 96485.05552456818, 1e-9), "{d}");
    // The fence draws the same edge straight in lon/lat: 61° N is outside.
    let fence = Fence::new(g, &[Detect::Inside]).expect("a polygon fence");
    assert!(!fence.covers(Point::new(45.0, 61.0)));
    assert!(fence.covers(Point::new(45.0, 59.0)));
}

#[test]
fn geodetic_distance_near_a_short_edge_keeps_its_digits() {
    // Exact values of the semantics (tests/oracle/edge_oracle.py, in 50
    // digits). The plain cross product of the ends' unit vectors erred by
    // 4e-6 m (4e-7) on the first, a 72 m edge in Manhattan with the
    // position 10 m from it.
    let cases = [
        (
            [[-73.9857, 40.7484], [-73.9849543551864, 40.74871432979316]],
            Point::new(-73.98534433826714, 40.7484469725695),
            10.000053527933158,
        ),
        // A 20 m edge across the antimeridian, 3 m away.
        (
            [[179.99995, 10.0], [-179.99987035506024, 10.000031398864133]],
            Point::new(-179.99995542610492, 9.99998898863052),
            3.000007530553812,
        ),
    ];
    for (line, p, exact) in cases {
        let g = Geometry::from_geojson(&json!({"type": "LineString", "coordinates": line}))
            .expect("a valid line");
        let d = g.distance(Crs::Geodetic, p);
        assert!(close(d, exact, 1e-9), "{d}, exact {exact}");
    }
}
#[test]
fn extreme_timestamps_do_not_panic() {
    let (a, b) = (Point::new(0.0, 0.0), Point::new(20.0, 0.0));
    let mut m = Motion::new(Crs::Planar(3857));
    m.push(Micros::MIN, a);
    let step = m.push(Micros::MAX, b);
    assert!(step.speed.is_some_and(|v| v > 0.0));
    let mut acc = PositionAcc::new(Crs::Planar(3857));
    acc.push(Micros::MIN, a);
    acc.push(Micros::MAX, b);
    let r = acc.result(PositionAggregate::Centroid, Micros::MIN, Micros::MAX);
    assert!(
        matches!(r, AggregateValue::Point(p) if p.x.is_finite()),
        "{r:?}"
    );
    let events = run(
        &fence(&[Detect::Enter]),
        &[(Micros::MIN, -5.0, 5.0), (Micros::MAX, 5.0, 5.0)],
    );
    assert_eq!(events.len(), 1);
}

#[test]
fn an_unknown_crs_is_quoted_cut_short_in_its_error() {
    let huge = format!("EPSG:{}", "9".repeat(100_000));
    let e = Crs::parse(&huge).unwrap_err().to_string();
    assert!(e.len() < 300, "{} bytes", e.len());
    assert!(e.contains("\"EPSG:999") && e.contains("…\""), "{e}");
    // A short one whole; a multi-byte character is not cut in two.
    let e = Crs::parse("EPSG:0").unwrap_err().to_string();
    assert!(e.contains("\"EPSG:0\""), "{e}");
    let e = Crs::parse(&"é".repeat(100)).unwrap_err().to_string();
    assert!(e.contains(&format!("\"{}…\"", "é".repeat(64))), "{e}");
}

/// Web Mercator by EPSG's method 1024, against IOGP Guidance Note 7-2's
/// worked example (EPSG:3857): 24°22'54.433"N, 100°20'00.000"W is
/// E = -11 169 055.58 m, N = 2 800 000.00 m; and back.
#[test]
fn web_mercator_matches_the_epsg_guidance_note_example_and_inverts() {
    let lat = 24.0 + 22.0 / 60.0 + 54.433 / 3600.0;
    let lon = -(100.0 + 20.0 / 60.0);
    let m = reproject(Crs::Geodetic, Crs::Planar(3857), Point::new(lon, lat)).unwrap();
    assert!((m.x - -11_169_055.58).abs() < 0.005, "{m:?}");
    assert!((m.y - 2_800_000.00).abs() < 0.005, "{m:?}");
    let back = reproject(Crs::Planar(3857), Crs::Geodetic, m).unwrap();
    assert!(
        (back.x - lon).abs() < 1e-12 && (back.y - lat).abs() < 1e-12,
        "{back:?}"
    );
    // The projected world's corner: (±180°, ±85.0511…°).
    let corner = reproject(
        Crs::Planar(3857),
        Crs::Geodetic,
        Point::new(20_037_508.342789244, 20_037_508.342789244),
    )
    .unwrap();
    assert!((corner.x - 180.0).abs() < 1e-12, "{corner:?}");
    assert!(
        (corner.y - 85.051_128_779_806_59).abs() < 1e-12,
        "{corner:?}"
    );
    // An easting past the world wraps; a pole has no northing.
    let wrapped = reproject(
        Crs::Planar(3857),
        Crs::Geodetic,
        Point::new(30_000_000.0, 0.0),
    )
    .unwrap();
    assert!((-180.0..=180.0).contains(&wrapped.x), "{wrapped:?}");
    let pole = reproject(Crs::Geodetic, Crs::Planar(3857), Point::new(0.0, 90.0));
    assert_eq!(pole, Err(GeoError::Pole(90.0)));
    // Another pair is refused, naming the supported one.
    let e = reproject(Crs::Geodetic, Crs::Planar(25832), Point::new(0.0, 0.0)).unwrap_err();
    assert!(e.to_string().contains("EPSG:4326 ↔ EPSG:3857"), "{e}");
    assert!(reprojects(Crs::Planar(3857), Crs::Geodetic));
    assert!(!reprojects(Crs::Planar(3857), Crs::Planar(25832)));
}

/// Geographic lon/lat codes are never planar: those on GRS80 are WGS84
/// (their datum's offset ignored), others refused.
#[test]
fn geographic_codes_are_geodetic_on_grs80_and_refused_on_other_datums() {
    for code in [
        "EPSG:4258",
        "EPSG:4269",
        "EPSG:4283",
        "urn:ogc:def:crs:EPSG::7844",
    ] {
        assert_eq!(Crs::parse(code), Ok(Crs::Geodetic), "{code}");
    }
    assert_eq!(Crs::parse("OGC:CRS84"), Ok(Crs::Geodetic));
    for (code, n) in [
        ("EPSG:4267", 4267),
        ("EPSG:4230", 4230),
        ("epsg:4277", 4277),
    ] {
        let e = Crs::parse(code).unwrap_err();
        assert_eq!(e, GeoError::Geographic(n));
        assert!(e.to_string().contains("\"EPSG:4326\""), "{e}");
    }
    // Projected codes stay planar.
    assert_eq!(Crs::parse("EPSG:25832"), Ok(Crs::Planar(25832)));
}

#[test]
fn an_error_quotes_a_coordinate_briefly() {
    let says = |e: GeoError| e.to_string();
    assert!(says(GeoError::Longitude(1e308)).contains("longitude 1e+308 is outside"));
    assert!(says(GeoError::Longitude(200.0)).contains("longitude 200 is outside"));
    assert!(says(GeoError::Latitude(-91.25)).contains("latitude -91.25 is outside"));
    assert!(says(GeoError::Latitude(1e-300)).contains("latitude 1e-300 "));
    assert!(says(GeoError::NotFinite(f64::NAN)).contains("NaN is not a finite number"));
    assert!(says(GeoError::Pole(-90.0)).contains("latitude -90 has no"));
}

//! Every function of `geo` against the oracle script's rows.

use serde_json::Value;

use super::tracks::Track;
use super::{Errors, LENGTH_ABS, speed_abs};
use crate::geo::*;

fn f(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} in {v}"))
}

/// Compares every function with the oracle's rows for one reference system.
pub(super) fn compare(
    crs: Crs,
    tracks: &[(String, Track)],
    geometries: &[Value],
    fence_json: &Value,
    rows: &[Value],
    errors: &mut Errors,
) {
    // Coordinates' absolute bound: 1e-9 degrees, or 1e-9 of the planar extent.
    let coord_abs = if crs.is_geodetic() { 1e-9 } else { 1e-9 * 1e4 };
    let geoms: Vec<Geometry> = geometries
        .iter()
        .map(|g| Geometry::from_geojson(g).expect("valid geometry"))
        .collect();
    let fence = Fence::new(
        Geometry::from_geojson(fence_json).expect("valid fence"),
        &[
            Detect::Enter,
            Detect::Exit,
            Detect::Inside,
            Detect::Outside,
            Detect::Cross,
        ],
    )
    .expect("a multipolygon fence");
    let by_feature = |kind: &str, feature: &str| -> Vec<&Value> {
        rows.iter()
            .filter(|r| r["kind"] == kind && r["feature"] == feature)
            .collect()
    };
    for (name, track) in tracks {
        compare_motion(
            crs,
            name,
            track,
            &by_feature("instant", name),
            &geoms,
            errors,
        );
        compare_fence(
            &fence,
            name,
            track,
            &by_feature("event", name),
            coord_abs,
            errors,
        );
        compare_windows(
            crs,
            name,
            track,
            &by_feature("window", name),
            coord_abs,
            errors,
        );
    }
}

/// Motion, segment geodesics and distances, instant by instant.
fn compare_motion(
    crs: Crs,
    name: &str,
    track: &Track,
    instants: &[&Value],
    geoms: &[Geometry],
    errors: &mut Errors,
) {
    assert_eq!(instants.len(), track.len(), "{name}: the oracle's instants");
    let mut motion = Motion::new(crs);
    for (i, (&(t, p), row)) in track.iter().zip(instants).enumerate() {
        let ctx = format!("{name}[{i}] {p:?}");
        assert_eq!(
            row["t_us"].as_i64(),
            Some(t),
            "{ctx}: the oracle read the datetime back"
        );
        let step = motion.push(t, p);
        errors.opt(
            "speed (pymeos)",
            &ctx,
            step.speed,
            &row["speed"],
            1e-9,
            speed_abs(if i > 0 { t - track[i - 1].0 } else { 0 }),
        );
        errors.angle("azimuth deg (pymeos)", &ctx, step.azimuth, &row["azimuth"]);
        errors.num(
            "cumulativeLength (pymeos)",
            &ctx,
            step.cumulative_length,
            f(row, "cumulativeLength"),
            1e-9,
            LENGTH_ABS,
        );
        if i > 0 {
            let p0 = track[i - 1].1;
            let len = distance(crs, p0, p);
            errors.opt(
                "segment length (GeographicLib)",
                &ctx,
                Some(len),
                &row["geodesic_length"],
                1e-9,
                LENGTH_ABS,
            );
            errors.angle(
                "azimuth deg (GeographicLib)",
                &ctx,
                azimuth(crs, p0, p),
                &row["geodesic_azimuth"],
            );
        }
        for (k, g) in geoms.iter().enumerate() {
            let expected = row["distance"][k]
                .as_f64()
                .expect("a distance per geometry");
            let what = match (crs, g.kind()) {
                (Crs::Geodetic, "Point") => "distance to a point (pymeos)",
                (Crs::Geodetic, _) => "distance to a line/polygon (pymeos)",
                (Crs::Planar(_), _) => "planar distance to a geometry (pymeos)",
            };
            errors.num(
                what,
                &format!("{ctx} to {}", g.kind()),
                g.distance(crs, p),
                expected,
                1e-9,
                LENGTH_ABS,
            );
        }
    }
}

/// Fence events: the same kinds in the same order, times and points.
fn compare_fence(
    fence: &Fence,
    name: &str,
    track: &Track,
    expected: &[&Value],
    coord_abs: f64,
    errors: &mut Errors,
) {
    let mut state = FenceState::default();
    let mut ours = Vec::new();
    for &(t, p) in track {
        fence.step(&mut state, t, p, &mut ours);
    }
    let ours_kinds: Vec<&str> = ours.iter().map(|e| e.detect.name()).collect();
    let expected_kinds: Vec<&str> = expected
        .iter()
        .map(|e| e["detect"].as_str().expect("detect"))
        .collect();
    if ours_kinds != expected_kinds {
        errors.failures.push(format!(
            "fence {name}: ours {ours_kinds:?}, shapely {expected_kinds:?}"
        ));
        return;
    }
    for (e, x) in ours.iter().zip(expected) {
        let ctx = format!("fence {name} {} at {}", e.detect.name(), e.t);
        let xt = x["t_us"].as_i64().expect("t_us");
        *errors.checked.entry("fence event time µs").or_default() += 1;
        *errors.kinds.entry(e.detect.name()).or_default() += 1;
        let m = errors.max.entry("fence event time µs").or_default();
        *m = m.max((e.t - xt).abs() as f64);
        if (e.t - xt).abs() > 1 {
            errors
                .failures
                .push(format!("{ctx}: time {} against shapely's {xt}", e.t));
        }
        errors.num(
            "fence event coordinates",
            &ctx,
            e.point.x,
            x["coordinates"][0].as_f64().expect("x"),
            0.0,
            coord_abs,
        );
        errors.num(
            "fence event coordinates",
            &ctx,
            e.point.y,
            x["coordinates"][1].as_f64().expect("y"),
            0.0,
            coord_abs,
        );
    }
}

/// Each window of `track`: its start, accumulator, first and last
/// instant's times and shortest step (for the speeds' absolute bounds).
type WindowAcc = (Micros, PositionAcc, Micros, Micros, Micros);

fn window_accs(crs: Crs, track: &Track, window: Micros) -> Vec<WindowAcc> {
    let mut accs: Vec<WindowAcc> = Vec::new();
    for &(t, p) in track {
        let start = t.div_euclid(window) * window;
        match accs.last_mut() {
            Some((s, acc, _, last, min_dt)) if *s == start => {
                *min_dt = (*min_dt).min(t - *last);
                *last = t;
                acc.push(t, p);
            }
            _ => {
                let mut acc = PositionAcc::new(crs);
                acc.push(t, p);
                accs.push((start, acc, t, t, Micros::MAX));
            }
        }
    }
    accs
}

/// Window aggregates over 60 s tumbling windows. (Over 80 lines: one
/// check per aggregate, each call spread over eight lines by rustfmt.)
fn compare_windows(
    crs: Crs,
    name: &str,
    track: &Track,
    windows: &[&Value],
    coord_abs: f64,
    errors: &mut Errors,
) {
    let window: Micros = 60_000_000;
    let accs = window_accs(crs, track, window);
    assert_eq!(accs.len(), windows.len(), "{name}: windows");
    for ((start, acc, first, last, min_dt), w) in accs.iter().zip(windows) {
        let ctx = format!("{name} window {start}");
        assert_eq!(w["start_us"].as_i64(), Some(*start), "{ctx}");
        let r = |what| acc.result(what, *start, start + window);
        let num = |v: AggregateValue| match v {
            AggregateValue::Number(n) => Some(n),
            _ => None,
        };
        errors.opt(
            "window COUNT",
            &ctx,
            num(r(PositionAggregate::Count)),
            &w["count"],
            0.0,
            0.0,
        );
        errors.opt(
            "window LENGTH (pymeos)",
            &ctx,
            num(r(PositionAggregate::Length)),
            &w["length"],
            1e-9,
            LENGTH_ABS,
        );
        errors.opt(
            "window AVG_SPEED (pymeos)",
            &ctx,
            num(r(PositionAggregate::AvgSpeed)),
            &w["avg_speed"],
            1e-9,
            speed_abs(last - first),
        );
        errors.opt(
            "window MAX_SPEED (pymeos)",
            &ctx,
            num(r(PositionAggregate::MaxSpeed)),
            &w["max_speed"],
            1e-9,
            speed_abs(*min_dt),
        );
        let AggregateValue::BBox(b) = r(PositionAggregate::Extent) else {
            panic!("{ctx}: an extent")
        };
        for k in 0..4 {
            errors.num(
                "window EXTENT (pymeos)",
                &ctx,
                b[k],
                w["extent"][k].as_f64().expect("extent"),
                0.0,
                coord_abs,
            );
        }
        let AggregateValue::Point(c) = r(PositionAggregate::Centroid) else {
            panic!("{ctx}: a centroid")
        };
        for k in 0..2 {
            let ours = [c.x, c.y][k];
            let exact = w["centroid_exact"][k].as_f64().expect("centroid_exact");
            errors.num(
                "window CENTROID (exact)",
                &ctx,
                ours,
                exact,
                1e-12,
                coord_abs,
            );
            // MEOS's twCentroid mishandles very short stops (a
            // repeated position 1 µs later): it drifts by up to ~1e-8
            // degrees there, so pymeos bounds it loosely.
            let meos = w["centroid"][k].as_f64().expect("centroid");
            errors.num(
                "window CENTROID (pymeos)",
                &ctx,
                ours,
                meos,
                1e-6,
                coord_abs,
            );
        }
    }
}

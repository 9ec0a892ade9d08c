//! The geometric oracle: seeded random trajectories (fence crossings, the
//! antimeridian, high latitudes near both poles, long geodesics, repeated
//! positions and stops, sub-second and microsecond steps; geodetic and
//! planar) through every function of this module, compared with
//! independent implementations by tests/oracle/geo_oracle.py: pymeos
//! (MEOS 1.3) for motion, distances and window aggregates, GeographicLib
//! (Python) for every segment's geodesic, shapely for the fence events.
//!
//! `GEO_ORACLE_SEED=N` draws other trajectories; `GEO_ORACLE_DUMP=DIR` keeps the generated input (one NDJSON file per
//! reference system) to rerun the script by hand.
//!
//! Runs with `MFSTREAM_PYMEOS_PYTHON` set to a Python that has pymeos,
//! shapely and geographiclib: `eval "$(jobs/meos/setup.sh)"`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::*;

/// The absolute bound on a length where relative error is the wrong
/// measure (tiny segments near the poles, where MEOS's C geodesics and
/// GeographicLib's Python differ by nanometres): 1 µm, and for a speed the
/// 1 µm over the segment's duration.
const LENGTH_ABS: f64 = 1e-6;

/// The absolute bound on a speed over `dt` µs: [`LENGTH_ABS`] over it.
fn speed_abs(dt: Micros) -> f64 {
    if dt > 0 {
        LENGTH_ABS / (dt as f64 / 1e6)
    } else {
        0.0
    }
}

/// A small deterministic generator (splitmix64): the seed fixes every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [lo, hi).
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
    fn chance(&mut self, p: f64) -> bool {
        self.range(0.0, 1.0) < p
    }
}

type Track = Vec<(Micros, Point)>;

/// `2026-01-01T00:00:00Z` in µs.
const START: Micros = 1_767_225_600_000_000;

/// An ISO-8601 UTC datetime with microseconds (days to civil date after
/// Howard Hinnant's `civil_from_days`).
fn iso(t: Micros) -> String {
    let (days, us) = (t.div_euclid(86_400_000_000), t.rem_euclid(86_400_000_000));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let s = us / 1_000_000;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:06}Z",
        s / 3600,
        s / 60 % 60,
        s % 60,
        us % 1_000_000
    )
}

/// A time step: mostly seconds, sometimes sub-second or a single µs.
fn dt(rng: &mut Rng) -> Micros {
    match rng.range(0.0, 1.0) {
        r if r < 0.05 => 1,
        r if r < 0.2 => rng.range(1.0, 1e6) as Micros,
        _ => rng.range(1e6, 60e6) as Micros,
    }
}

/// A walk: `step` proposes the next point from the last; 10% of instants
/// repeat the last position (a stop).
fn walk(
    rng: &mut Rng,
    n: usize,
    first: Point,
    mut step: impl FnMut(&mut Rng, Point) -> Point,
) -> Track {
    let mut t = START + rng.range(0.0, 120e6) as Micros;
    let mut p = first;
    let mut track = vec![(t, p)];
    for _ in 1..n {
        t += dt(rng);
        if !rng.chance(0.1) {
            p = step(rng, p);
        }
        track.push((t, p));
    }
    track
}

fn wrap_lon(lon: f64) -> f64 {
    if lon > 180.0 {
        lon - 360.0
    } else if lon < -180.0 {
        lon + 360.0
    } else {
        lon
    }
}

fn geodetic_tracks(rng: &mut Rng) -> Vec<(String, Track)> {
    let mut tracks = Vec::new();
    for k in 0..16 {
        let first = Point::new(rng.range(7.5, 14.0), rng.range(43.0, 47.0));
        let scale = [0.05, 0.3, 1.0][k % 3];
        let track = walk(rng, 60, first, |r, p| {
            Point::new(
                (p.x + r.range(-scale, scale)).clamp(5.0, 16.0),
                (p.y + r.range(-scale, scale)).clamp(41.0, 49.0),
            )
        });
        tracks.push((format!("fence-{k}"), track));
    }
    tracks.extend(chords(rng, Point::new(10.0, 45.0), 1.0, "geodetic"));
    for k in 0..8 {
        let first = Point::new(179.0 + rng.range(0.0, 1.0), rng.range(-60.0, 60.0));
        let track = walk(rng, 50, first, |r, p| {
            Point::new(
                wrap_lon(p.x + r.range(-0.8, 0.8)),
                (p.y + r.range(-0.5, 0.5)).clamp(-70.0, 70.0),
            )
        });
        tracks.push((format!("antimeridian-{k}"), track));
    }
    for k in 0..8 {
        let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
        let first = Point::new(rng.range(-180.0, 180.0), sign * rng.range(85.0, 89.99));
        let track = walk(rng, 50, first, |r, p| {
            Point::new(
                wrap_lon(p.x + r.range(-90.0, 90.0)),
                sign * (p.y.abs() + r.range(-0.5, 0.5)).clamp(84.0, 89.999_999),
            )
        });
        tracks.push((format!("polar-{k}"), track));
    }
    for k in 0..4 {
        let first = Point::new(rng.range(-180.0, 180.0), rng.range(-80.0, 80.0));
        let track = walk(rng, 30, first, |r, _| {
            Point::new(r.range(-180.0, 180.0), r.range(-89.0, 89.0))
        });
        tracks.push((format!("long-{k}"), track));
    }
    tracks
}

/// Walkers jumping between random points of a circle of radius 2.5 `u`
/// around the fence at `c`: their segments pass through it (and its hole)
/// with both ends outside, the `cross` case.
fn chords(rng: &mut Rng, c: Point, u: f64, tag: &str) -> Vec<(String, Track)> {
    (0..6)
        .map(|k| {
            let on_circle = |r: &mut Rng| {
                let a = r.range(0.0, std::f64::consts::TAU);
                Point::new(c.x + 2.5 * u * a.cos(), c.y + 2.5 * u * a.sin())
            };
            let first = on_circle(rng);
            let track = walk(rng, 30, first, |r, _| on_circle(r));
            (format!("chords-{tag}-{k}"), track)
        })
        .collect()
}

fn planar_tracks(rng: &mut Rng) -> Vec<(String, Track)> {
    let mut tracks = chords(rng, Point::new(6000.0, 5000.0), 2000.0, "planar");
    tracks.extend((0..16).map(|k| {
        let first = Point::new(rng.range(2000.0, 12000.0), rng.range(2000.0, 8000.0));
        let scale = [50.0, 400.0, 1500.0][k % 3];
        let track = walk(rng, 60, first, |r, p| {
            Point::new(p.x + r.range(-scale, scale), p.y + r.range(-scale, scale))
        });
        (format!("planar-{k}"), track)
    }));
    tracks
}

/// A star-shaped ring (simple, usually not convex): `n` vertices at sorted
/// angles, radii in [r0, r1), closed.
fn star(rng: &mut Rng, c: Point, r0: f64, r1: f64, n: usize) -> Vec<Value> {
    let mut ring: Vec<Value> = (0..n)
        .map(|i| {
            let a = (i as f64 + rng.range(0.0, 0.8)) / n as f64 * std::f64::consts::TAU;
            let r = rng.range(r0, r1);
            json!([c.x + r * a.cos(), c.y + r * a.sin()])
        })
        .collect();
    ring.push(ring[0].clone());
    ring
}

/// A multipolygon around `c` (size `u`): a star of `spikes` vertices with
/// a star hole, and a second, disjoint star to its east.
fn fence_geojson(rng: &mut Rng, c: Point, u: f64, spikes: usize) -> Value {
    let outer = star(rng, c, 0.5 * u, 1.2 * u, spikes);
    let hole = star(rng, c, 0.1 * u, 0.3 * u, 6);
    let east = star(rng, Point::new(c.x + 2.5 * u, c.y), 0.3 * u, 0.6 * u, 7);
    json!({"type": "MultiPolygon", "coordinates": [[outer, hole], [east]]})
}

fn python() -> Option<PathBuf> {
    std::env::var_os("MFSTREAM_PYMEOS_PYTHON").map(PathBuf::from)
}

/// Runs the oracle script on `tracks` and returns its output rows.
fn oracle(
    python: &Path,
    crs: Crs,
    tracks: &[(String, Track)],
    geometries: &[Value],
    fence: &Value,
    window_s: f64,
) -> Vec<Value> {
    let mut input = String::new();
    for (f, track) in tracks {
        for &(t, p) in track {
            let row = json!({"feature": f, "datetime": iso(t), "coordinates": [p.x, p.y]});
            writeln!(input, "{row}").expect("writing to a String cannot fail");
        }
    }
    if let Some(dump) = std::env::var_os("GEO_ORACLE_DUMP") {
        std::fs::write(
            PathBuf::from(dump).join(crs.name().replace(":", "_")),
            &input,
        )
        .expect("dump");
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/geo_oracle.py");
    let mut cmd = Command::new(python);
    cmd.arg(script)
        .args(["--crs", &crs.name(), "--fence", &fence.to_string()]);
    cmd.args(["--window", &window_s.to_string()]);
    for g in geometries {
        cmd.args(["--geometry", &g.to_string()]);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("MFSTREAM_PYMEOS_PYTHON runs");
    let mut stdin = child.stdin.take().expect("stdin was piped");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("the oracle script runs");
    writer
        .join()
        .expect("the writer thread")
        .expect("the script reads its input");
    assert!(
        out.status.success(),
        "geo_oracle.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("the script prints UTF-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("the script prints JSON lines"))
        .collect()
}

/// The largest errors seen, by what was compared.
#[derive(Default)]
struct Errors {
    max: HashMap<&'static str, f64>,
    checked: HashMap<&'static str, usize>,
    failures: Vec<String>,
    /// Fence events compared, by detect kind.
    kinds: HashMap<&'static str, usize>,
}

impl Errors {
    /// Records `ours` against `expected`: relative error, or absolute
    /// under `abs` (where an absolute bound is the right one).
    fn num(&mut self, what: &'static str, ctx: &str, ours: f64, expected: f64, rel: f64, abs: f64) {
        let diff = (ours - expected).abs();
        let r = if expected == 0.0 {
            diff
        } else {
            diff / expected.abs()
        };
        *self.checked.entry(what).or_default() += 1;
        let m = self.max.entry(what).or_default();
        *m = m.max(r);
        if !(r <= rel || diff <= abs) {
            self.failures.push(format!(
                "{what} {ctx}: ours {ours:?}, expected {expected:?} (rel {r:e})"
            ));
        }
    }

    fn opt(
        &mut self,
        what: &'static str,
        ctx: &str,
        ours: Option<f64>,
        expected: &Value,
        rel: f64,
        abs: f64,
    ) {
        match (ours, expected.as_f64()) {
            (Some(o), Some(e)) => self.num(what, ctx, o, e, rel, abs),
            (None, None) => *self.checked.entry(what).or_default() += 1,
            (o, _) => self
                .failures
                .push(format!("{what} {ctx}: ours {o:?}, expected {expected}")),
        }
    }

    /// Azimuths: an absolute bound in degrees, across the 0/360 seam.
    fn angle(&mut self, what: &'static str, ctx: &str, ours: Option<f64>, expected: &Value) {
        match (ours, expected.as_f64()) {
            (Some(o), Some(e)) => {
                let d = (o - e).abs();
                let d = d.min(360.0 - d);
                *self.checked.entry(what).or_default() += 1;
                let m = self.max.entry(what).or_default();
                *m = m.max(d);
                if d > 1e-9 {
                    self.failures
                        .push(format!("{what} {ctx}: ours {o:?}, expected {e:?}"));
                }
            }
            (None, None) => *self.checked.entry(what).or_default() += 1,
            (o, _) => self
                .failures
                .push(format!("{what} {ctx}: ours {o:?}, expected {expected}")),
        }
    }
}

fn f(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} in {v}"))
}

/// Compares every function with the oracle's rows for one reference system.
fn compare(
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

#[test]
#[ignore = "needs pymeos: eval \"$(jobs/meos/setup.sh)\""]
fn every_geo_result_matches_pymeos_geographiclib_and_shapely_on_random_trajectories() {
    let python =
        python().expect("MFSTREAM_PYMEOS_PYTHON is not set: eval \"$(jobs/meos/setup.sh)\"");
    // GEO_ORACLE_SEED=N reruns with other trajectories (CI uses the fixed one).
    let seed = std::env::var("GEO_ORACLE_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let mut rng = Rng(seed.unwrap_or(0x20_2026));
    let mut errors = Errors::default();
    let mut instants = 0;
    for crs in [Crs::Geodetic, Crs::Planar(3857)] {
        let (tracks, c, u) = match crs {
            Crs::Geodetic => (geodetic_tracks(&mut rng), Point::new(10.0, 45.0), 1.0),
            Crs::Planar(_) => (planar_tracks(&mut rng), Point::new(6000.0, 5000.0), 2000.0),
        };
        // The geodetic fence is jagged (300 vertices: segments cross it
        // many times, through the strip index), the planar one simple.
        let spikes = if crs.is_geodetic() { 300 } else { 12 };
        let fence = fence_geojson(&mut rng, c, u, spikes);
        let line: Vec<Value> = (0..5)
            .map(|_| {
                json!([
                    c.x + rng.range(-2.0 * u, 2.0 * u),
                    c.y + rng.range(-2.0 * u, 2.0 * u)
                ])
            })
            .collect();
        let geometries = vec![
            json!({"type": "Point", "coordinates": [c.x + rng.range(-u, u), c.y + rng.range(-u, u)]}),
            json!({"type": "LineString", "coordinates": line}),
            fence.clone(),
        ];
        let rows = oracle(&python, crs, &tracks, &geometries, &fence, 60.0);
        instants += tracks.iter().map(|(_, t)| t.len()).sum::<usize>();
        compare(crs, &tracks, &geometries, &fence, &rows, &mut errors);
    }
    let mut report: Vec<_> = errors.max.iter().collect();
    report.sort_by_key(|(k, _)| *k);
    eprintln!(
        "geo oracle: {instants} instants; largest error by comparison (relative, or absolute: degrees, µs):"
    );
    for (what, max) in report {
        eprintln!(
            "  {what}: {max:e} over {} values",
            errors.checked.get(what).copied().unwrap_or(0)
        );
    }
    let mut kinds: Vec<_> = errors.kinds.iter().collect();
    kinds.sort();
    eprintln!("  fence events compared by kind: {kinds:?}");
    for kind in ["enter", "exit", "inside", "outside", "cross"] {
        let n = errors.kinds.get(kind).copied().unwrap_or(0);
        assert!(
            n >= 10,
            "the trajectories crossed the fence too little: {n} {kind}"
        );
    }
    assert!(
        errors.failures.is_empty(),
        "{} mismatches:\n{}",
        errors.failures.len(),
        errors.failures.join("\n")
    );
}

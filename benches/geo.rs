//! The position functions of `crates/model/src/geo` on their own (no parsing, no
//! engine): positions per second, and side by side pymeos/shapely on the
//! same trajectory. Figures printed, never asserted.
//!
//! ```text
//! cargo bench --bench geo                 # 2,000,000 positions
//! cargo bench --bench geo -- 500000       # POSITIONS
//! eval "$(jobs/meos/setup.sh)"            # first, for the pymeos column
//! ```
//!
//! One geodetic random walk (seeded) through a 12-vertex polygon fence
//! with a hole, sampled every 1 s. Timed, each the best of three:
//! `Motion::push` (one ellipsoidal geodesic per position: speed, azimuth,
//! cumulative length), `Fence::step` (all five detect kinds; and against a
//! 9,999-vertex star, the size bound, through the strip index), the
//! planar `Motion::push`, `Geometry::distance` to a 3-vertex line and to a
//! 9,999-vertex one (geodetic: every edge measured), and
//! `PositionAcc::push`. Then, with `MFSTREAM_PYMEOS_PYTHON` set,
//! tests/oracle/geo_bench.py times pymeos's `speed()` over the same
//! trajectory (parsed and computed in C) and a vectorised shapely
//! geofence (up to 200,000 positions: pymeos holds the whole sequence).

use std::hint::black_box;
use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::Instant as Clock;

use mfstream_model::geo::{
    Crs, Detect, Fence, FenceState, Geometry, Micros, Motion, Point, PositionAcc,
};
use serde_json::json;

/// splitmix64: the trajectory is the same on every run.
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

const START: Micros = 1_767_225_600_000_000;

/// A walk around (10, 45) that keeps coming back into the fence.
fn trajectory(n: usize) -> Vec<(Micros, Point)> {
    let mut rng = Rng(7);
    let mut p = Point::new(10.0, 45.0);
    (0..n)
        .map(|i| {
            let pull = |v: f64, c: f64| (c - v) * 0.01;
            p = Point::new(
                p.x + (rng.unit() - 0.5) * 0.05 + pull(p.x, 10.0),
                p.y + (rng.unit() - 0.5) * 0.05 + pull(p.y, 45.0),
            );
            (START + i as Micros * 1_000_000, p)
        })
        .collect()
}

fn fence_geojson() -> serde_json::Value {
    let ring = |r: &[f64], c: (f64, f64)| -> Vec<serde_json::Value> {
        let n = r.len();
        let mut v: Vec<_> = (0..=n)
            .map(|i| {
                let a = (i % n) as f64 / n as f64 * std::f64::consts::TAU;
                json!([c.0 + r[i % n] * a.cos(), c.1 + r[i % n] * a.sin()])
            })
            .collect();
        v[n] = v[0].clone();
        v
    };
    let outer = ring(
        &[
            0.5, 0.3, 0.45, 0.35, 0.5, 0.25, 0.4, 0.5, 0.3, 0.45, 0.35, 0.5,
        ],
        (10.0, 45.0),
    );
    let hole = ring(&[0.05, 0.08, 0.06, 0.07], (10.0, 45.0));
    json!({"type": "Polygon", "coordinates": [outer, hole]})
}

/// Runs `f` over the trajectory three times; the best rate in positions/s.
fn rate(name: &str, n: usize, mut f: impl FnMut() -> usize) -> f64 {
    let mut best = f64::INFINITY;
    let mut sink = 0;
    for _ in 0..3 {
        let start = Clock::now();
        sink += f();
        best = best.min(start.elapsed().as_secs_f64());
    }
    black_box(sink);
    let per_s = n as f64 / best;
    println!(
        "{name:<52} {:>8.3} M positions/s {:>10.3} µs each",
        per_s / 1e6,
        1e6 / per_s
    );
    per_s
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let track = trajectory(n);
    let fence_json = fence_geojson();
    let geometry = Geometry::from_geojson(&fence_json).expect("the bench's fence is valid");
    let all = [
        Detect::Enter,
        Detect::Exit,
        Detect::Inside,
        Detect::Outside,
        Detect::Cross,
    ];
    let fence = Fence::new(geometry, &all).expect("a polygon fence");
    let line = Geometry::from_geojson(
        &json!({"type": "LineString", "coordinates": [[9, 44], [10.5, 45.2], [11, 46]]}),
    )
    .expect("the bench's line is valid");
    println!("geo: {n} positions, one geodetic trajectory, 1 s apart");

    rate("Motion::push geodetic (speed, azimuth, length)", n, || {
        let mut m = Motion::new(Crs::Geodetic);
        track
            .iter()
            .map(|&(t, p)| m.push(t, p).speed.is_some() as usize)
            .sum()
    });
    let mut events = 0;
    rate("Fence::step (12 + 4 vertices, all detects)", n, || {
        let (mut state, mut out) = (FenceState::default(), Vec::with_capacity(8));
        events = 0;
        for &(t, p) in &track {
            out.clear();
            fence.step(&mut state, t, p, &mut out);
            events += out.len();
        }
        events
    });
    println!("{:<52} {events} events", "  (fence events per run)");
    // The vertex bound's fence: a 9,999-spike star around the walk.
    let spikes: Vec<serde_json::Value> = (0..=9_998)
        .map(|i| {
            let a = (i % 9_998) as f64 / 9_998.0 * std::f64::consts::TAU;
            let r = if i % 2 == 0 { 0.5 } else { 0.3 };
            json!([10.0 + r * a.cos(), 45.0 + r * a.sin()])
        })
        .collect();
    let big = json!({"type": "Polygon", "coordinates": [spikes]});
    // The star's ring as a line: every position is measured to all its
    // edges (inside the polygon, the distance is 0 at once).
    let star_line = Geometry::from_geojson(&json!({"type": "LineString", "coordinates": spikes}))
        .expect("a valid line");
    let big =
        Fence::new(Geometry::from_geojson(&big).expect("a valid star"), &all).expect("a fence");
    rate("Fence::step (9,999 vertices, all detects)", n, || {
        let (mut state, mut out) = (FenceState::default(), Vec::with_capacity(8));
        let mut events = 0;
        for &(t, p) in &track {
            out.clear();
            big.step(&mut state, t, p, &mut out);
            events += out.len();
        }
        events
    });
    rate("Motion::push planar", n, || {
        let mut m = Motion::new(Crs::Planar(3857));
        track
            .iter()
            .map(|&(t, p)| m.push(t, p).speed.is_some() as usize)
            .sum()
    });
    rate("Geometry::distance geodetic to a 3-vertex line", n, || {
        track
            .iter()
            .map(|&(_, p)| (line.distance(Crs::Geodetic, p) > 0.0) as usize)
            .sum()
    });
    // 9,998 edges a position: a thousandth of the positions.
    let few = &track[..(n / 1000).max(1)];
    rate(
        "Geometry::distance geodetic to a 9,999-vertex line",
        few.len(),
        || {
            few.iter()
                .map(|&(_, p)| (star_line.distance(Crs::Geodetic, p) > 0.0) as usize)
                .sum()
        },
    );
    rate("PositionAcc::push geodetic", n, || {
        let mut acc = PositionAcc::new(Crs::Geodetic);
        track.iter().for_each(|&(t, p)| acc.push(t, p));
        black_box(&acc);
        n
    });
    pymeos(&track[..n.min(200_000)], &fence_json);
}

/// The same trajectory through pymeos and shapely (tests/oracle/geo_bench.py).
fn pymeos(track: &[(Micros, Point)], fence: &serde_json::Value) {
    let Some(python) = std::env::var_os("MFSTREAM_PYMEOS_PYTHON") else {
        println!(
            "pymeos: skipped, MFSTREAM_PYMEOS_PYTHON is not set: eval \"$(jobs/meos/setup.sh)\""
        );
        return;
    };
    let mut input = String::new();
    for &(t, p) in track {
        let (secs, us) = ((t - START) / 1_000_000, (t - START) % 1_000_000);
        let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
        let row = json!({"datetime": format!("2026-01-{:02}T{:02}:{m:02}:{s:02}.{us:06}Z", 1 + h / 24, h % 24), "coordinates": [p.x, p.y]});
        input.push_str(&row.to_string());
        input.push('\n');
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/geo_bench.py");
    let child = Command::new(python)
        .args([script, "--fence", &fence.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return println!("pymeos: could not start MFSTREAM_PYMEOS_PYTHON: {e}"),
    };
    let mut stdin = child.stdin.take().expect("stdin was piped");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output();
    let _ = writer.join();
    let figures = out
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok());
    let Some(f) = figures else {
        return println!("pymeos: tests/oracle/geo_bench.py failed");
    };
    let per_s = |k: &str| f[k].as_f64().unwrap_or(f64::NAN) / 1e6;
    println!("pymeos/shapely on the first {} positions:", f["positions"]);
    println!(
        "{:<48} {:>8.2} M positions/s",
        "  pymeos TGeogPointSeq(\"[…]\").speed()",
        per_s("speed_per_s")
    );
    println!(
        "{:<48} {:>8.2} M positions/s",
        "  shapely contains_xy + segments ∩ boundary",
        per_s("geofence_per_s")
    );
}

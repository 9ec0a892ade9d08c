//! The oracle's seeded random trajectories and fences.

use serde_json::{Value, json};

use crate::geo::{Micros, Point};

/// A small deterministic generator (splitmix64): the seed fixes every run.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [lo, hi).
    pub(super) fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
    fn chance(&mut self, p: f64) -> bool {
        self.range(0.0, 1.0) < p
    }
}

pub(super) type Track = Vec<(Micros, Point)>;

/// `2026-01-01T00:00:00Z` in µs.
const START: Micros = 1_767_225_600_000_000;

/// An ISO-8601 UTC datetime with microseconds.
pub(super) fn iso(t: Micros) -> String {
    let (days, us) = (t.div_euclid(86_400_000_000), t.rem_euclid(86_400_000_000));
    let (y, m, d) = crate::datetime::civil_from_days(days);
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

pub(super) fn geodetic_tracks(rng: &mut Rng) -> Vec<(String, Track)> {
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

pub(super) fn planar_tracks(rng: &mut Rng) -> Vec<(String, Track)> {
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
pub(super) fn fence_geojson(rng: &mut Rng, c: Point, u: f64, spikes: usize) -> Value {
    let outer = star(rng, c, 0.5 * u, 1.2 * u, spikes);
    let hole = star(rng, c, 0.1 * u, 0.3 * u, 6);
    let east = star(rng, Point::new(c.x + 2.5 * u, c.y), 0.3 * u, 0.6 * u, 7);
    json!({"type": "MultiPolygon", "coordinates": [[outer, hole], [east]]})
}

//! Geography distance to lines and polygons, the way PostGIS's liblwgeom
//! (and so MEOS 1.3) computes it for `geography` on the spheroid: edges are
//! great-circle arcs; each line's or ring's nearest point is found on the
//! unit sphere (`edge_distance_to_point`), the answer is the ellipsoidal
//! (GeographicLib) distance from the position to that point, the least over
//! the lines and rings (`ptarray_distance_spheroid`). A point inside a
//! polygon (on the sphere, great-circle edges) is at distance 0.
//!
//! That is a definition, not an approximation of the least ellipsoidal
//! distance to the edge: the sphere's nearest point is not the ellipsoid's,
//! and the distance to it is longer than the least one by up to about 2e-5
//! of itself (measured in extended precision, 100 m from 2 km edges). It is
//! what MEOS answers, and what this computes.
//!
//! Precision: an edge's plane is given by its normal, liblwgeom's
//! `robust_cross_product` (sines of the half-sums and half-differences of
//! the ends' longitudes and latitudes; here the differences are taken in
//! degrees, the longitudes' across the antimeridian too, before they are
//! turned to radians), and a position's height over it is measured from
//! the edge's start. The plain cross product of two nearly equal unit
//! vectors cancels: with it, the distance near edges of 10 m to 5 km erred
//! by up to 0.17 mm (2 % at 1 mm from the edge). What is left is the
//! rounding of unit vectors and GeographicLib's double-precision geodesic
//! (about 2 nm however short the line): the oracle `geo::oracle::edges`
//! (tests/oracle/edge_oracle.py, these semantics in 50 digits) finds this
//! within 1e-9 of the exact value, or 6 nm where that is less (4.5 nm the
//! most seen), pymeos within 8 nm.
//!
//! The normals and the vertices' unit vectors are computed once per
//! geometry ([`Lines`]), by its first geodetic distance: a position then
//! costs no trigonometry per vertex but one arctangent (its angle to the
//! vertex), 3.4 times faster near a 9,999-vertex line than the plain
//! product computed per position (benches/geo.rs).

use super::geometry::array_bytes;
use super::{Point, geodesic_distance};

type V3 = [f64; 3];

fn to_v3(p: Point) -> V3 {
    let (lon, lat) = (p.x.to_radians(), p.y.to_radians());
    [lat.cos() * lon.cos(), lat.cos() * lon.sin(), lat.sin()]
}

fn to_point(v: V3) -> Point {
    // atan2 rather than asin: asin loses digits near the poles.
    Point::new(
        v[1].atan2(v[0]).to_degrees(),
        v[2].atan2(v[0].hypot(v[1])).to_degrees(),
    )
}

fn dot(a: V3, b: V3) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

fn cross(a: V3, b: V3) -> V3 {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

fn normalize(a: V3) -> Option<V3> {
    let n = dot(a, a).sqrt();
    (n > 0.0 && n.is_finite()).then(|| [a[0] / n, a[1] / n, a[2] / n])
}

/// `b - a` in degrees, in [-180, 180], to the precision of the difference
/// itself: across the antimeridian both are moved by 180 (exactly) first.
fn lon_diff(a: f64, b: f64) -> f64 {
    let d = b - a;
    if d > 180.0 {
        (b - 180.0) - (a + 180.0)
    } else if d < -180.0 {
        (b + 180.0) - (a - 180.0)
    } else {
        d
    }
}

/// The normal `a × b` of the great circle through `a` and `b` (lon/lat),
/// as liblwgeom's `robust_cross_product`: from the sines of the half-sum
/// and half-difference of the longitudes and of the difference and sum of
/// the latitudes, each difference taken in degrees before it is turned to
/// radians, so that the normal keeps its relative precision however short
/// the edge.
fn edge_normal(a: Point, b: Point) -> V3 {
    let dlon = lon_diff(a.x, b.x);
    let (sin_s, cos_s) = (a.x + dlon / 2.0).to_radians().sin_cos();
    let (sin_h, cos_h) = (dlon / 2.0).to_radians().sin_cos();
    let sin_dlat = (a.y - b.y).to_radians().sin();
    let sin_slat = (a.y + b.y).to_radians().sin();
    [
        -sin_dlat * sin_s * cos_h - sin_slat * cos_s * sin_h,
        sin_dlat * cos_s * cos_h - sin_slat * sin_s * sin_h,
        a.y.to_radians().cos() * b.y.to_radians().cos() * 2.0 * sin_h * cos_h,
    ]
}

/// The central angle between two unit vectors, stable at all angles.
fn angle(a: V3, b: V3) -> f64 {
    let c = cross(a, b);
    dot(c, c).sqrt().atan2(dot(a, b))
}

/// Lines (or rings) on the unit sphere, ready to measure to: each vertex's
/// unit vector and each edge's unit normal, computed once per geometry
/// (the normal costs eight sines and cosines), not per position.
#[derive(Debug, Clone, Default)]
pub(super) struct Lines {
    lines: Vec<Line>,
}

#[derive(Debug, Clone)]
struct Line {
    /// The vertices' unit vectors.
    vertices: Vec<V3>,
    /// Per edge (vertex i to i + 1), its unit normal; zero for an edge
    /// whose ends are the same point.
    normals: Vec<V3>,
}

impl Lines {
    /// `lines` on the sphere (line strings, or the rings of polygons).
    pub(super) fn new<'a>(lines: impl Iterator<Item = &'a [Point]>) -> Lines {
        Lines {
            lines: lines
                .map(|line| Line {
                    vertices: line.iter().map(|&q| to_v3(q)).collect(),
                    normals: line
                        .windows(2)
                        .map(|e| normalize(edge_normal(e[0], e[1])).unwrap_or([0.0; 3]))
                        .collect(),
                })
                .collect(),
        }
    }

    /// The heap [`Lines::new`] of `lines` holds, counted without building
    /// it.
    pub(super) fn heap_bytes_for<'a>(lines: impl Iterator<Item = &'a [Point]>) -> u64 {
        let mut count = 0;
        let mut bytes = 0;
        for line in lines {
            count += 1;
            bytes +=
                array_bytes::<V3>(line.len()) + array_bytes::<V3>(line.len().saturating_sub(1));
        }
        array_bytes::<Line>(count) + bytes
    }

    /// The geography distance in metres from `p` to the nearest of the
    /// lines: each line's own ellipsoidal distance, then the least, as
    /// PostGIS measures each ring and part.
    pub(super) fn distance(&self, p: Point) -> f64 {
        let pv = to_v3(p);
        self.lines
            .iter()
            .map(|line| line.distance(p, pv))
            .fold(f64::INFINITY, f64::min)
    }
}

impl Line {
    /// The geography distance in metres from `p` (`pv` on the sphere) to
    /// the line (a single point counts as a degenerate edge): its nearest
    /// point found on the sphere, then the ellipsoidal distance to it, as
    /// liblwgeom's `ptarray_distance_spheroid`. Per edge, as its
    /// `edge_distance_to_point`: the projection of `p` on the edge's great
    /// circle when it lies on the edge, else the nearer end; the first of
    /// equals kept, each vertex measured once.
    fn distance(&self, p: Point, pv: V3) -> f64 {
        let Some(&first) = self.vertices.first() else {
            return f64::INFINITY;
        };
        let mut best = (first, angle(pv, first));
        for (ends, &n) in self.vertices.windows(2).zip(&self.normals) {
            let (va, vb) = (ends[0], ends[1]);
            if let Some(k) = projection(pv, va, vb, n) {
                let d = angle(pv, k);
                if d < best.1 {
                    best = (k, d);
                }
            }
            let d = angle(pv, vb);
            if d < best.1 {
                best = (vb, d);
            }
        }
        geodesic_distance(p, to_point(best.0))
    }
}

/// The projection of `p` on the great circle through `va` and `vb` (whose
/// unit normal is `n`, zero when they are the same point), when it lies
/// between them.
fn projection(p: V3, va: V3, vb: V3, n: V3) -> Option<V3> {
    if n == [0.0; 3] {
        return None;
    }
    // p's height over the plane is measured from va (on it): p · n would
    // add n's rounding times va's distance from the origin (about 2 nm).
    let pn = dot([p[0] - va[0], p[1] - va[1], p[2] - va[2]], n);
    let k = normalize([p[0] - pn * n[0], p[1] - pn * n[1], p[2] - pn * n[2]])?;
    // k lies on the arc when it is between va and vb: inside the cone
    // around their bisector (liblwgeom's `edge_point_in_cone`).
    let mid = normalize([va[0] + vb[0], va[1] + vb[1], va[2] + vb[2]])?;
    (dot(k, mid) >= dot(va, mid)).then_some(k)
}

/// Whether `p` is inside (or on) the spherical polygon whose edges are the
/// great-circle arcs of `rings` (exterior first, then holes), by counting
/// the arcs crossed by the meridian arc from `p` to the north pole. A
/// polygon that contains the north pole is not supported (it reads as its
/// complement), as for a fence crossing the poles in lon/lat.
pub(super) fn polygon_covers(rings: &[Vec<Point>], p: Point) -> bool {
    let mut crossings = 0usize;
    for ring in rings {
        crossings += ring
            .windows(2)
            .filter(|e| meridian_crosses(p, e[0], e[1]))
            .count();
    }
    crossings % 2 == 1
}

/// Whether the great-circle arc a→b crosses the meridian arc from `p` north
/// to the pole (half-open at the arc's ends, so a shared vertex counts once).
fn meridian_crosses(p: Point, a: Point, b: Point) -> bool {
    let lon = p.x.to_radians();
    // The meridian's plane, and the side of it each end lies on.
    let m = [-lon.sin(), lon.cos(), 0.0];
    let (va, vb) = (to_v3(a), to_v3(b));
    let (da, db) = (dot(va, m), dot(vb, m));
    if (da > 0.0) == (db > 0.0) {
        return false;
    }
    // Where the arc meets the plane, on the chord a→b: on p's half of the
    // meridian and north of p.
    let s = da / (da - db);
    let x = [
        va[0] + s * (vb[0] - va[0]),
        va[1] + s * (vb[1] - va[1]),
        va[2] + s * (vb[2] - va[2]),
    ];
    let east = [lon.cos(), lon.sin(), 0.0];
    if dot(x, east) <= 0.0 {
        return false;
    }
    x[2].atan2(dot(x, east)) > p.y.to_radians()
}

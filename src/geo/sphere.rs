//! Geography distance to lines and polygons, the way PostGIS's liblwgeom
//! (and so MEOS 1.3) computes it for `geography` on the spheroid: edges are
//! great-circle arcs; each line's or ring's nearest point is found on the
//! unit sphere (`edge_distance_to_point`), the answer is the ellipsoidal
//! (GeographicLib) distance from the position to that point, the least over
//! the lines and rings (`ptarray_distance_spheroid`). A point inside a
//! polygon (on the sphere, great-circle edges) is at distance 0.
//!
//! Locating the nearest point on the sphere rather than the ellipsoid errs
//! by second order only (the distance is stationary there), and it is what
//! MEOS does: the oracle test finds pymeos's values within 4e-12 relative.

use super::{Point, geodesic_distance};

type V3 = [f64; 3];

fn to_v3(p: Point) -> V3 {
    let (lon, lat) = (p.x.to_radians(), p.y.to_radians());
    [lat.cos() * lon.cos(), lat.cos() * lon.sin(), lat.sin()]
}

fn to_point(v: V3) -> Point {
    Point::new(
        v[1].atan2(v[0]).to_degrees(),
        v[2].clamp(-1.0, 1.0).asin().to_degrees(),
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

/// The central angle between two unit vectors, stable at all angles.
fn angle(a: V3, b: V3) -> f64 {
    let c = cross(a, b);
    dot(c, c).sqrt().atan2(dot(a, b))
}

/// The nearest point to `p` on the great-circle arc a→b, and its angle
/// from `p`, as liblwgeom's `edge_distance_to_point`: the projection of
/// `p` on the arc's great circle when it lies on the arc, else the nearer
/// end, ties kept in that order.
fn nearest_on_arc(p: V3, a: V3, b: V3) -> (V3, f64) {
    let mut best = ([0.0; 3], f64::INFINITY);
    if let Some(n) = normalize(cross(a, b)) {
        // p projected on the arc's plane.
        let pn = dot(p, n);
        if let Some(k) = normalize([p[0] - pn * n[0], p[1] - pn * n[1], p[2] - pn * n[2]]) {
            // k lies on the arc when it is between a and b: inside the cone
            // around their bisector (liblwgeom's `edge_point_in_cone`).
            let on_arc = normalize([a[0] + b[0], a[1] + b[1], a[2] + b[2]])
                .is_some_and(|mid| dot(k, mid) >= dot(a, mid));
            if on_arc {
                best = (k, angle(p, k));
            }
        }
    }
    for end in [a, b] {
        let d = angle(p, end);
        if d < best.1 {
            best = (end, d);
        }
    }
    best
}

/// The geography distance in metres from `p` to the polyline `line` (a
/// single point counts as a degenerate edge): its nearest point found on
/// the sphere, then the ellipsoidal distance to it, as liblwgeom's
/// `ptarray_distance_spheroid`.
fn line_distance(p: Point, pv: V3, line: &[Point]) -> f64 {
    let mut vs = line.iter().map(|&q| to_v3(q));
    let Some(mut a) = vs.next() else {
        return f64::INFINITY;
    };
    let mut best = (a, angle(pv, a));
    for b in vs {
        let cand = nearest_on_arc(pv, a, b);
        if cand.1 < best.1 {
            best = cand;
        }
        a = b;
    }
    geodesic_distance(p, to_point(best.0))
}

/// The geography distance in metres from `p` to the nearest of `lines`
/// (the rings of polygons, or line strings): each line's own ellipsoidal
/// distance, then the least, as PostGIS measures each ring and part.
pub(super) fn lines_distance<'a>(p: Point, lines: impl Iterator<Item = &'a [Point]>) -> f64 {
    let pv = to_v3(p);
    lines
        .map(|line| line_distance(p, pv, line))
        .fold(f64::INFINITY, f64::min)
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

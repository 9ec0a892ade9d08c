//! Planar predicates on x/y (or lon/lat taken as a plane, as GeoJSON and
//! Tile38 draw a fence): where a point lies against a ring, where a segment
//! meets an edge, and Euclid's distance to a segment.
//!
//! Hand-written rather than the `geo` crate: the fence needs the parameter
//! along the moving segment of every boundary crossing (to interpolate the
//! crossing's time), which `geo`'s `line_intersection` gives only as a
//! point, and these few predicates run per position on the hot path; `geo`
//! would bring a dozen crates for about sixty lines.

use super::Point;

/// Where a point lies against a closed ring or polygon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Loc {
    Inside,
    Boundary,
    Outside,
}

/// The cross product of `b - a` and `p - a`: positive when `p` is left of
/// the line a→b.
fn orient(a: Point, b: Point, p: Point) -> f64 {
    (b.x - a.x) * (p.y - a.y) - (p.x - a.x) * (b.y - a.y)
}

fn within(v: f64, a: f64, b: f64) -> bool {
    a.min(b) <= v && v <= a.max(b)
}

/// Where `p` lies against the closed ring `ring` (first == last), by the
/// crossing number with exact boundary detection.
pub(super) fn ring_loc(ring: &[Point], p: Point) -> Loc {
    let mut inside = false;
    for e in ring.windows(2) {
        let (a, b) = (e[0], e[1]);
        let o = orient(a, b, p);
        if o == 0.0 && within(p.x, a.x, b.x) && within(p.y, a.y, b.y) {
            return Loc::Boundary;
        }
        // An upward edge counts when p is strictly left of it, a downward
        // one when strictly right: each crossing of the rightward ray once.
        if (a.y <= p.y && p.y < b.y && o > 0.0) || (b.y <= p.y && p.y < a.y && o < 0.0) {
            inside = !inside;
        }
    }
    if inside { Loc::Inside } else { Loc::Outside }
}

/// Where `p` lies against a polygon: its exterior ring, then its holes.
pub(super) fn polygon_loc(rings: &[Vec<Point>], p: Point) -> Loc {
    let Some((exterior, holes)) = rings.split_first() else {
        return Loc::Outside;
    };
    match ring_loc(exterior, p) {
        Loc::Outside => Loc::Outside,
        Loc::Boundary => Loc::Boundary,
        Loc::Inside => {
            for hole in holes {
                match ring_loc(hole, p) {
                    Loc::Inside => return Loc::Outside,
                    Loc::Boundary => return Loc::Boundary,
                    Loc::Outside => {}
                }
            }
            Loc::Inside
        }
    }
}

/// Pushes onto `out` the parameters `s` in [0, 1] along a→b where the
/// segment meets the edge c→d: one for a crossing or touch, the two ends of
/// the overlap for collinear segments.
pub(super) fn segment_hits(a: Point, b: Point, c: Point, d: Point, out: &mut Vec<f64>) {
    let (rx, ry) = (b.x - a.x, b.y - a.y);
    let (qx, qy) = (d.x - c.x, d.y - c.y);
    let (wx, wy) = (c.x - a.x, c.y - a.y);
    let denom = rx * qy - ry * qx;
    if denom != 0.0 {
        let s = (wx * qy - wy * qx) / denom;
        let u = (wx * ry - wy * rx) / denom;
        if (0.0..=1.0).contains(&s) && (0.0..=1.0).contains(&u) {
            out.push(s);
        }
        return;
    }
    // Parallel: they meet only if collinear, along an overlap.
    let rr = rx * rx + ry * ry;
    if wx * ry - wy * rx != 0.0 || rr == 0.0 {
        return;
    }
    let sc = (wx * rx + wy * ry) / rr;
    let sd = ((d.x - a.x) * rx + (d.y - a.y) * ry) / rr;
    let (lo, hi) = (sc.min(sd).max(0.0), sc.max(sd).min(1.0));
    if lo <= hi {
        out.push(lo);
        out.push(hi);
    }
}

/// Euclid's distance from `p` to the segment a→b.
pub(super) fn segment_distance(p: Point, a: Point, b: Point) -> f64 {
    let (rx, ry) = (b.x - a.x, b.y - a.y);
    let rr = rx * rx + ry * ry;
    let s = if rr == 0.0 {
        0.0
    } else {
        (((p.x - a.x) * rx + (p.y - a.y) * ry) / rr).clamp(0.0, 1.0)
    };
    (p.x - (a.x + s * rx)).hypot(p.y - (a.y + s * ry))
}

/// The point at parameter `s` along a→b.
pub(super) fn lerp(a: Point, b: Point, s: f64) -> Point {
    Point::new(a.x + s * (b.x - a.x), a.y + s * (b.y - a.y))
}

/// A polygon's edges indexed by horizontal strips, so that a point or a
/// short segment is tested against the edges near it only: a fence of
/// [`MAX_GEOMETRY_VERTICES`](super::MAX_GEOMETRY_VERTICES) costs about
/// √n edges per position rather than n.
#[derive(Debug, Clone)]
pub(super) struct StripIndex {
    edges: Vec<(Point, Point)>,
    /// The lowest y, and strips per unit of y.
    y0: f64,
    per_y: f64,
    /// Per strip, the edges whose y-range overlaps it.
    strips: Vec<Vec<u32>>,
}

impl StripIndex {
    /// Indexes every edge of `rings` (a polygon's exterior and holes). With
    /// √n strips an edge spans few of them, and at worst (every edge
    /// spanning all) the index holds n·√n entries: 10⁶ at the vertex bound.
    pub(super) fn new(rings: &[Vec<Point>]) -> StripIndex {
        let edges: Vec<(Point, Point)> = rings
            .iter()
            .flat_map(|r| r.windows(2).map(|e| (e[0], e[1])))
            .collect();
        let (lo, hi) = edges
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), e| {
                (lo.min(e.0.y).min(e.1.y), hi.max(e.0.y).max(e.1.y))
            });
        let n = (edges.len() as f64).sqrt().ceil().max(1.0) as usize;
        let per_y = if hi > lo { n as f64 / (hi - lo) } else { 0.0 };
        let mut index = StripIndex {
            edges,
            y0: lo,
            per_y,
            strips: vec![Vec::new(); n],
        };
        for (i, &(a, b)) in index.edges.iter().enumerate() {
            let (s0, s1) = (index.strip(a.y.min(b.y)), index.strip(a.y.max(b.y)));
            for strip in &mut index.strips[s0..=s1] {
                strip.push(i as u32);
            }
        }
        index
    }

    fn strip(&self, y: f64) -> usize {
        let s = ((y - self.y0) * self.per_y).floor();
        // Clamped: y outside the polygon's range maps to the end strips.
        (s.max(0.0) as usize).min(self.strips.len() - 1)
    }

    /// Where `p` lies, by the crossing number over the edges of its strip
    /// (all rings at once: even-odd, as a valid polygon's holes lie inside
    /// its exterior).
    pub(super) fn loc(&self, p: Point) -> Loc {
        let mut inside = false;
        for &i in &self.strips[self.strip(p.y)] {
            let (a, b) = self.edges[i as usize];
            let o = orient(a, b, p);
            if o == 0.0 && within(p.x, a.x, b.x) && within(p.y, a.y, b.y) {
                return Loc::Boundary;
            }
            if (a.y <= p.y && p.y < b.y && o > 0.0) || (b.y <= p.y && p.y < a.y && o < 0.0) {
                inside = !inside;
            }
        }
        if inside { Loc::Inside } else { Loc::Outside }
    }

    /// [`segment_hits`] of a→b against the edges of the strips it spans
    /// (an edge in several strips may be hit more than once: callers sort
    /// and dedup).
    pub(super) fn hits(&self, a: Point, b: Point, out: &mut Vec<f64>) {
        let (s0, s1) = (self.strip(a.y.min(b.y)), self.strip(a.y.max(b.y)));
        let (xlo, xhi) = (a.x.min(b.x), a.x.max(b.x));
        for strip in &self.strips[s0..=s1] {
            for &i in strip {
                let (c, d) = self.edges[i as usize];
                if c.x.max(d.x) < xlo || c.x.min(d.x) > xhi {
                    continue;
                }
                segment_hits(a, b, c, d, out);
            }
        }
    }
}

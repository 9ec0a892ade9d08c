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
use super::geometry::array_bytes;

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

/// Where a moving segment meets a fence's edge: the parameter along the
/// segment, and whether the meeting is a clean crossing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Hit {
    /// The parameter in [0, 1] along the segment.
    pub s: f64,
    /// A transversal crossing of the edge's interior, away from the
    /// segment's ends and the edge's vertices (by [`CLEAN`]): crossing it
    /// flips the side of the edge's polygon (even-odd), unless another
    /// edge is met at the same point (the caller merges those).
    pub clean: bool,
    /// The polygon of the edge, for a fence of several.
    pub polygon: u32,
}

/// How far from a segment's or an edge's ends (as a fraction of it) a
/// crossing must be to be clean: nearer, rounding may have missed the
/// adjacent edge's hit, and the side is read from the polygon instead.
const CLEAN: f64 = 1e-9;

/// Pushes onto `out` where the segment a→b meets the edge c→d of polygon
/// `polygon`: one hit for a crossing or touch, the two ends of the overlap
/// for collinear segments (never clean).
pub(super) fn segment_hits(
    a: Point,
    b: Point,
    c: Point,
    d: Point,
    polygon: u32,
    out: &mut Vec<Hit>,
) {
    let (rx, ry) = (b.x - a.x, b.y - a.y);
    let (qx, qy) = (d.x - c.x, d.y - c.y);
    let (wx, wy) = (c.x - a.x, c.y - a.y);
    let denom = rx * qy - ry * qx;
    if denom != 0.0 {
        let s = (wx * qy - wy * qx) / denom;
        let u = (wx * ry - wy * rx) / denom;
        if (0.0..=1.0).contains(&s) && (0.0..=1.0).contains(&u) {
            let inner = CLEAN..=1.0 - CLEAN;
            let clean = inner.contains(&s) && inner.contains(&u);
            out.push(Hit { s, clean, polygon });
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
        for s in [lo, hi] {
            out.push(Hit {
                s,
                clean: false,
                polygon,
            });
        }
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

/// How a polygon's edges fall into strips: computed before the index is
/// built, to size it exactly (and to count its bytes without building it).
struct Layout {
    edges: usize,
    y0: f64,
    per_y: f64,
    /// The edges each strip holds.
    counts: Vec<usize>,
}

impl Layout {
    fn of(rings: &[Vec<Point>]) -> Layout {
        let edges = || {
            rings
                .iter()
                .flat_map(|r| r.windows(2).map(|e| (e[0], e[1])))
        };
        let (lo, hi) = edges().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), e| {
            (lo.min(e.0.y).min(e.1.y), hi.max(e.0.y).max(e.1.y))
        });
        let count = edges().count();
        let n = (count as f64).sqrt().ceil().max(1.0) as usize;
        let mut layout = Layout {
            edges: count,
            y0: lo,
            per_y: if hi > lo { n as f64 / (hi - lo) } else { 0.0 },
            counts: vec![0; n],
        };
        for (a, b) in edges() {
            let (s0, s1) = layout.span(a, b);
            for c in &mut layout.counts[s0..=s1] {
                *c += 1;
            }
        }
        layout
    }

    fn strip(&self, y: f64) -> usize {
        let s = ((y - self.y0) * self.per_y).floor();
        // Clamped: y outside the polygon's range maps to the end strips.
        (s.max(0.0) as usize).min(self.counts.len() - 1)
    }

    /// The strips the edge a→b spans.
    fn span(&self, a: Point, b: Point) -> (usize, usize) {
        (self.strip(a.y.min(b.y)), self.strip(a.y.max(b.y)))
    }
}

impl StripIndex {
    /// Indexes every edge of `rings` (a polygon's exterior and holes). With
    /// √n strips an edge spans few of them, and at worst (every edge
    /// spanning all) the index holds n·√n entries: 10⁶ at the vertex bound.
    pub(super) fn new(rings: &[Vec<Point>]) -> StripIndex {
        let layout = Layout::of(rings);
        let mut edges = Vec::with_capacity(layout.edges);
        edges.extend(
            rings
                .iter()
                .flat_map(|r| r.windows(2).map(|e| (e[0], e[1]))),
        );
        let mut strips: Vec<Vec<u32>> = layout
            .counts
            .iter()
            .map(|&c| Vec::with_capacity(c))
            .collect();
        for (i, &(a, b)) in edges.iter().enumerate() {
            let (s0, s1) = layout.span(a, b);
            for strip in &mut strips[s0..=s1] {
                strip.push(i as u32);
            }
        }
        StripIndex {
            edges,
            y0: layout.y0,
            per_y: layout.per_y,
            strips,
        }
    }

    /// The heap the index of `rings` holds ([`StripIndex::new`]), counted
    /// without building it: its edges, its strips and their entries.
    pub(super) fn heap_bytes_for(rings: &[Vec<Point>]) -> u64 {
        let layout = Layout::of(rings);
        array_bytes::<(Point, Point)>(layout.edges)
            + array_bytes::<Vec<u32>>(layout.counts.len())
            + layout
                .counts
                .iter()
                .map(|&c| array_bytes::<u32>(c))
                .sum::<u64>()
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
        let strip = &self.strips[self.strip(p.y)];
        visits::count(strip.len());
        let mut inside = false;
        for &i in strip {
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

    /// [`segment_hits`] of a→b against each edge at most once, this being
    /// polygon `polygon`: the edges of the strips it spans (an edge in
    /// several is tested in the lowest of them), or every edge when that
    /// is fewer tests. At most n edge tests, however the edges lie.
    pub(super) fn hits(&self, a: Point, b: Point, polygon: u32, out: &mut Vec<Hit>) {
        let (s0, s1) = (self.strip(a.y.min(b.y)), self.strip(a.y.max(b.y)));
        let (xlo, xhi) = (a.x.min(b.x), a.x.max(b.x));
        let mut test = |c: Point, d: Point| {
            if c.x.max(d.x) < xlo || c.x.min(d.x) > xhi {
                return;
            }
            segment_hits(a, b, c, d, polygon, out);
        };
        let spanned = &self.strips[s0..=s1];
        let entries: usize = spanned.iter().map(Vec::len).sum();
        if entries >= self.edges.len() {
            visits::count(self.edges.len());
            for &(c, d) in &self.edges {
                test(c, d);
            }
            return;
        }
        visits::count(entries);
        for (k, strip) in (s0..).zip(spanned) {
            for &i in strip {
                let (c, d) = self.edges[i as usize];
                // Tested already in the strip below, when spanned too.
                if k > s0 && self.strip(c.y.min(d.y)) < k {
                    continue;
                }
                test(c, d);
            }
        }
    }
}

/// The edge tests of the fence's predicates, counted in tests (per thread:
/// tests run at once) so that a test can bound the work per position
/// without timing it.
pub(super) mod visits {
    #[cfg(test)]
    thread_local! {
        static VISITS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    /// Counts `n` edge tests.
    #[inline]
    pub(in crate::geo) fn count(n: usize) {
        #[cfg(test)]
        VISITS.with(|v| v.set(v.get() + n as u64));
        #[cfg(not(test))]
        let _ = n;
    }

    /// The edge tests counted on this thread since the last call.
    #[cfg(test)]
    pub(in crate::geo) fn take() -> u64 {
        VISITS.with(|v| v.replace(0))
    }
}

//! Geofences with Tile38's detect kinds, the crossings interpolated.
//!
//! As GeoJSON (RFC 7946) and Tile38 draw them, a fence's edges and the
//! segment between two samples are straight lines in lon/lat (x/y), also
//! for geodetic positions; no wrapping at the antimeridian. A point on the
//! boundary is inside (the polygon is closed).
//!
//! What [`Fence::step`] emits, in time order:
//! - the first instant of a feature: `inside` or `outside` only;
//! - each later instant: first the segment from the previous instant. Every
//!   boundary crossing along it is an `enter` or `exit` at the crossing
//!   point, its time interpolated linearly along the segment; except when
//!   both ends are outside: each pass through the fence is then one `cross`,
//!   at the point (and time) where it enters. Then `inside` or `outside` at
//!   the instant.
//!
//! Only the kinds in the fence's detect set are emitted.

use super::geometry::{Geometry, Shape, array_bytes};
use super::planar::{self, Hit, Loc, StripIndex};
use super::{GeoError, Micros, Point};

/// A geofence detect kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Detect {
    /// The position crossed the boundary inwards.
    Enter,
    /// The position crossed the boundary outwards.
    Exit,
    /// The instant is inside (or on the boundary).
    Inside,
    /// The instant is outside.
    Outside,
    /// A segment with both ends outside passed through the fence.
    Cross,
}

impl Detect {
    const ALL: [Detect; 5] = [
        Detect::Enter,
        Detect::Exit,
        Detect::Inside,
        Detect::Outside,
        Detect::Cross,
    ];

    /// The lower-case name, as in events (`"enter"`, …).
    pub fn name(self) -> &'static str {
        match self {
            Detect::Enter => "enter",
            Detect::Exit => "exit",
            Detect::Inside => "inside",
            Detect::Outside => "outside",
            Detect::Cross => "cross",
        }
    }

    /// Reads a name (`"enter"`, `"exit"`, `"inside"`, `"outside"`, `"cross"`).
    pub fn parse(text: &str) -> Result<Detect, GeoError> {
        Self::ALL
            .into_iter()
            .find(|d| d.name() == text)
            .ok_or_else(|| GeoError::Unknown {
                field: "detect",
                input: text.to_string(),
                expected: "\"enter\", \"exit\", \"inside\", \"outside\", \"cross\"",
            })
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A polygon or multipolygon, and the kinds to detect.
#[derive(Debug, Clone)]
pub struct Fence {
    /// Each polygon's edges, indexed.
    polygons: Vec<StripIndex>,
    bbox: [f64; 4],
    detect: u8,
}

/// One feature's state against a fence: its last instant, and whether it
/// was inside.
#[derive(Debug, Clone, Default)]
pub struct FenceState {
    last: Option<(Micros, Point, bool)>,
}

/// A detected event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FenceEvent {
    /// When: the instant's, or the crossing's interpolated time.
    pub t: Micros,
    /// Where: the instant, or the crossing point on the boundary.
    pub point: Point,
    /// What.
    pub detect: Detect,
}

impl Fence {
    /// The bytes the fence of `geometry` holds, boxed as a query keeps it
    /// ([`Fence::new`]): each polygon's edges and strip index, counted
    /// without building them. 0 for a geometry that is no fence.
    pub fn bytes_for(geometry: &Geometry) -> u64 {
        let Shape::Polygons(polygons) = &geometry.shape else {
            return 0;
        };
        array_bytes::<Fence>(1)
            + array_bytes::<StripIndex>(polygons.len())
            + polygons
                .iter()
                .map(|rings| StripIndex::heap_bytes_for(rings))
                .sum::<u64>()
    }

    /// A fence of a Polygon or MultiPolygon, detecting `detect` (not empty).
    pub fn new(geometry: Geometry, detect: &[Detect]) -> Result<Fence, GeoError> {
        if detect.is_empty() {
            return Err(GeoError::NoDetect);
        }
        let kind = geometry.kind();
        let Shape::Polygons(polygons) = geometry.shape else {
            return Err(GeoError::NotAFence(kind));
        };
        Ok(Fence {
            polygons: polygons
                .iter()
                .map(|rings| StripIndex::new(rings))
                .collect(),
            bbox: geometry.bbox,
            detect: detect.iter().fold(0, |m, d| m | d.bit()),
        })
    }

    /// Whether `p` is inside or on the fence.
    pub fn covers(&self, p: Point) -> bool {
        let b = &self.bbox;
        if p.x < b[0] || p.x > b[2] || p.y < b[1] || p.y > b[3] {
            return false;
        }
        self.polygons
            .iter()
            .any(|polygon| polygon.loc(p) != Loc::Outside)
    }

    /// Feeds the instant `(t, p)` of a feature (in increasing time order)
    /// and appends what it detects to `out`.
    pub fn step(&self, state: &mut FenceState, t: Micros, p: Point, out: &mut Vec<FenceEvent>) {
        let inside = self.covers(p);
        if let Some(last) = state.last {
            self.segment(last, (t, p, inside), out);
        }
        state.last = Some((t, p, inside));
        let d = if inside {
            Detect::Inside
        } else {
            Detect::Outside
        };
        self.emit(out, t, p, d);
    }

    fn emit(&self, out: &mut Vec<FenceEvent>, t: Micros, point: Point, detect: Detect) {
        if self.detect & detect.bit() != 0 {
            out.push(FenceEvent { t, point, detect });
        }
    }

    /// The crossings of the segment (t0, p0) → (t1, p1), given the sides
    /// of its ends.
    fn segment(
        &self,
        (t0, p0, inside0): (Micros, Point, bool),
        (t1, p1, inside1): (Micros, Point, bool),
        out: &mut Vec<FenceEvent>,
    ) {
        if self.detect & (Detect::Enter.bit() | Detect::Exit.bit() | Detect::Cross.bit()) == 0 {
            return;
        }
        let b = &self.bbox;
        if p0.x.max(p1.x) < b[0]
            || p0.x.min(p1.x) > b[2]
            || p0.y.max(p1.y) < b[1]
            || p0.y.min(p1.y) > b[3]
        {
            return;
        }
        let mut hits = Vec::new();
        for (k, polygon) in (0..).zip(&self.polygons) {
            polygon.hits(p0, p1, k, &mut hits);
        }
        if hits.is_empty() {
            return;
        }
        hits.sort_by(|a, b| a.s.total_cmp(&b.s));
        // One crossing through a vertex hits both its edges, at parameters
        // that may differ in the last bits: merged (and so not clean), so
        // that touching a vertex from outside is no pass (as shapely's
        // intersection, a point there, is none) and passing through it is
        // one crossing.
        let mut merged: Vec<Hit> = Vec::with_capacity(hits.len());
        for hit in hits {
            match merged.last_mut() {
                Some(last) if (hit.s - last.s).abs() <= 1e-12 => last.clean = false,
                _ => merged.push(hit),
            }
        }
        // The side of each stretch between consecutive hits; a change of
        // side is a crossing at the hit between. Past a clean hit the side
        // of its polygon flips (even-odd); elsewhere (the first stretch,
        // and past a vertex, an overlap or hits merged) each polygon is
        // read at the stretch's middle. So a segment costs its edge tests
        // plus a point-in-polygon per unclear hit, not one per crossing.
        let mut sides = Sides::default();
        let mut side = inside0;
        let an_end_inside = inside0 || inside1;
        let mut from = 0.0;
        let mut at: Option<Hit> = None;
        let ends = merged.iter().map(|h| (h.s, Some(*h)));
        for (to, hit) in ends.chain(std::iter::once((1.0, None))) {
            let next_side = if to > from {
                match at {
                    Some(h) if h.clean && sides.flip(h.polygon) => sides.any(),
                    _ => sides.read(&self.polygons, planar::lerp(p0, p1, (from + to) / 2.0)),
                }
            } else {
                sides.forget();
                side
            };
            if next_side != side {
                self.crossing((t0, p0), (t1, p1), from, next_side, an_end_inside, out);
                side = next_side;
            }
            from = to;
            at = hit;
        }
        if side != inside1 {
            self.crossing((t0, p0), (t1, p1), 1.0, inside1, an_end_inside, out);
        }
    }

    /// One change of side at parameter `s`: an enter or exit, or, along a
    /// segment with both ends outside, a cross at each entry.
    fn crossing(
        &self,
        (t0, p0): (Micros, Point),
        (t1, p1): (Micros, Point),
        s: f64,
        entering: bool,
        an_end_inside: bool,
        out: &mut Vec<FenceEvent>,
    ) {
        let t = t0.saturating_add((s * t1.saturating_sub(t0) as f64).round() as Micros);
        let point = planar::lerp(p0, p1, s);
        if an_end_inside {
            let d = if entering {
                Detect::Enter
            } else {
                Detect::Exit
            };
            self.emit(out, t, point, d);
        } else if entering {
            self.emit(out, t, point, Detect::Cross);
        }
    }
}

/// Which polygons of a fence a stretch of a segment is inside, once read.
#[derive(Debug, Default)]
struct Sides {
    /// Per polygon, when known.
    inside: Option<Vec<bool>>,
}

impl Sides {
    /// Flips polygon `k`'s side (a clean crossing of one of its edges);
    /// `false` when the sides are not known.
    fn flip(&mut self, k: u32) -> bool {
        match self.inside.as_mut().and_then(|v| v.get_mut(k as usize)) {
            Some(side) => {
                *side = !*side;
                true
            }
            None => false,
        }
    }

    /// Whether any polygon holds the stretch.
    fn any(&self) -> bool {
        self.inside.as_ref().is_some_and(|v| v.iter().any(|&b| b))
    }

    /// Reads each polygon's side at `p` (inside or on the boundary).
    fn read(&mut self, polygons: &[StripIndex], p: Point) -> bool {
        let inside = self.inside.get_or_insert_with(Vec::new);
        inside.clear();
        inside.extend(
            polygons
                .iter()
                .map(|polygon| polygon.loc(p) != Loc::Outside),
        );
        inside.iter().any(|&b| b)
    }

    /// The sides are no longer known.
    fn forget(&mut self) {
        self.inside = None;
    }
}

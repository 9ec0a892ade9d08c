//! One window's aggregate over positions, in O(1) memory.
//!
//! The rule for segments: a window's accumulator sees the instants that fall
//! in the window, and the segments between consecutive ones. A segment
//! whose ends fall in two windows counts in neither (its length is not split
//! at the boundary).
//!
//! A `HOPPING` window is a union of buckets, each its own accumulator:
//! [`PositionAcc::append`] joins two consecutive ones exactly as one run
//! over both would be (counts and sums added, boxes widened, and the
//! segment from the first's last instant to the second's first added to the
//! length, the speeds and the centroid's integral). That segment is
//! measured once, when the second bucket's first instant comes
//! ([`PositionAcc::push_after`]), not at every window it is in. That is MEOS applied to the sequence of the window's
//! instants, not normalised (pymeos: `TGeogPointSeq(instant_list=[…],
//! upper_inc=True, normalize=False)`): the instants counted,
//! `.bounding_box()`, `.time_weighted_centroid()`, `.length()`,
//! `.speed().time_weighted_average()` (= length / duration) and
//! `.speed().max_value()`, as tests/oracle/geo_oracle.py computes them.
//! (Normalising merges nearly collinear segments within a tolerance, which
//! moves the centroid and the speeds by up to 1e-8; and MEOS's twCentroid
//! drifts by ~1e-8 degrees around a 1 µs stop: the oracle also checks the
//! centroid in exact rational arithmetic.)

use super::motion::segment_speed;
use super::{Crs, Micros, Point, distance};

/// An aggregate over positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PositionAggregate {
    /// The number of instants. The engines count positions as any value
    /// (`Aggregation::COUNT`); the oracle and the tests read it here.
    #[cfg_attr(not(test), allow(dead_code))]
    Count,
    /// The bounding box `[minx, miny, maxx, maxy]` of the instants, in
    /// coordinates (lon/lat are not wrapped at the antimeridian).
    Extent,
    /// The time-weighted centroid (MEOS `twCentroid`): the time-weighted
    /// average of x and of y along the linear sequence, in coordinates
    /// (lon/lat averaged linearly, as MEOS does for geography too). The
    /// plain average when the window holds one instant.
    Centroid,
    /// The length travelled: metres (geodetic) or units.
    Length,
    /// Length over the time from the first to the last instant; none for a
    /// single instant.
    AvgSpeed,
    /// The fastest segment's speed; none for a single instant.
    MaxSpeed,
}

/// An aggregate's result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AggregateValue {
    /// A count, length or speed.
    Number(f64),
    /// A centroid.
    Point(Point),
    /// An extent, `[minx, miny, maxx, maxy]`.
    BBox([f64; 4]),
    /// No value: an empty window, or a speed over a single instant.
    None,
}

/// One window's state: O(1) whatever the number of instants.
#[derive(Debug, Clone)]
pub struct PositionAcc {
    crs: Crs,
    count: u64,
    first: Option<(Micros, Point)>,
    last: Option<(Micros, Point)>,
    bbox: [f64; 4],
    /// Integrals of x and y over time (trapezoids), in coordinate·µs.
    x_dt: f64,
    y_dt: f64,
    /// Sums of x and y, for a window of one instant (or zero duration).
    x_sum: f64,
    y_sum: f64,
    length: f64,
    max_speed: Option<f64>,
    /// The instant before the first, when there was one (in an earlier
    /// bucket of a hopping window), and the length of the segment from it
    /// to the first: [`PositionAcc::append`] joins with it.
    incoming: Option<((Micros, Point), f64)>,
}

impl PositionAcc {
    /// An empty window.
    pub fn new(crs: Crs) -> PositionAcc {
        PositionAcc {
            crs,
            count: 0,
            first: None,
            last: None,
            bbox: [
                f64::INFINITY,
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::NEG_INFINITY,
            ],
            x_dt: 0.0,
            y_dt: 0.0,
            x_sum: 0.0,
            y_sum: 0.0,
            length: 0.0,
            max_speed: None,
            incoming: None,
        }
    }

    /// [`PositionAcc::push`], with the instant before this one (`before`,
    /// in an earlier bucket) when this is the first: the joining segment is
    /// measured now, for [`PositionAcc::append`].
    pub fn push_after(&mut self, t: Micros, p: Point, before: Option<(Micros, Point)>) {
        if self.first.is_none()
            && let Some((t0, p0)) = before.filter(|(t0, _)| *t0 < t)
        {
            self.incoming = Some(((t0, p0), distance(self.crs, p0, p)));
        }
        self.push(t, p);
    }

    /// Appends `next`, whose instants all follow this one's: the result is
    /// the accumulator of both runs as one, the segment between them
    /// included (its length taken from `next`'s `incoming` when that starts
    /// at this one's last instant, else measured).
    pub fn append(&mut self, next: &PositionAcc) {
        let (Some((t0, p0)), Some((t1, p1))) = (self.last, next.first) else {
            if self.first.is_none() {
                *self = next.clone();
            }
            return;
        };
        let join = match next.incoming {
            Some((from, len)) if from == (t0, p0) => len,
            _ => distance(self.crs, p0, p1),
        };
        let dt = t1.saturating_sub(t0) as f64;
        self.count += next.count;
        self.bbox = [
            self.bbox[0].min(next.bbox[0]),
            self.bbox[1].min(next.bbox[1]),
            self.bbox[2].max(next.bbox[2]),
            self.bbox[3].max(next.bbox[3]),
        ];
        self.x_sum += next.x_sum;
        self.y_sum += next.y_sum;
        self.x_dt += (p0.x + p1.x) / 2.0 * dt + next.x_dt;
        self.y_dt += (p0.y + p1.y) / 2.0 * dt + next.y_dt;
        self.length += join + next.length;
        for v in [segment_speed(join, t0, t1), next.max_speed]
            .into_iter()
            .flatten()
        {
            self.max_speed = Some(self.max_speed.map_or(v, |m| m.max(v)));
        }
        self.last = next.last;
    }

    /// Adds an instant of the window, in increasing time order.
    pub fn push(&mut self, t: Micros, p: Point) {
        self.count += 1;
        self.bbox = [
            self.bbox[0].min(p.x),
            self.bbox[1].min(p.y),
            self.bbox[2].max(p.x),
            self.bbox[3].max(p.y),
        ];
        self.x_sum += p.x;
        self.y_sum += p.y;
        if let Some((t0, p0)) = self.last {
            let dt = t.saturating_sub(t0) as f64;
            self.x_dt += (p0.x + p.x) / 2.0 * dt;
            self.y_dt += (p0.y + p.y) / 2.0 * dt;
            let len = distance(self.crs, p0, p);
            self.length += len;
            if let Some(v) = segment_speed(len, t0, t) {
                self.max_speed = Some(self.max_speed.map_or(v, |m| m.max(v)));
            }
        } else {
            self.first = Some((t, p));
        }
        self.last = Some((t, p));
    }

    /// The aggregate `what` over the instants pushed so far. The window's
    /// bounds do not change it: only its instants count (see the module
    /// docs); they are taken so that a later rule splitting boundary
    /// segments keeps this signature.
    pub fn result(
        &self,
        what: PositionAggregate,
        _window_start: Micros,
        _window_end: Micros,
    ) -> AggregateValue {
        let (Some((t0, _)), Some((t1, _))) = (self.first, self.last) else {
            return match what {
                PositionAggregate::Count => AggregateValue::Number(0.0),
                _ => AggregateValue::None,
            };
        };
        let duration = t1.saturating_sub(t0) as f64;
        match what {
            PositionAggregate::Count => AggregateValue::Number(self.count as f64),
            PositionAggregate::Extent => AggregateValue::BBox(self.bbox),
            PositionAggregate::Centroid if duration > 0.0 => {
                AggregateValue::Point(Point::new(self.x_dt / duration, self.y_dt / duration))
            }
            PositionAggregate::Centroid => {
                let n = self.count as f64;
                AggregateValue::Point(Point::new(self.x_sum / n, self.y_sum / n))
            }
            PositionAggregate::Length => AggregateValue::Number(self.length),
            PositionAggregate::AvgSpeed => match segment_speed(self.length, t0, t1) {
                Some(v) => AggregateValue::Number(v),
                None => AggregateValue::None,
            },
            PositionAggregate::MaxSpeed => match self.max_speed {
                Some(v) => AggregateValue::Number(v),
                None => AggregateValue::None,
            },
        }
    }
}

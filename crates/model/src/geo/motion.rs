//! One feature's motion, instant by instant: MEOS `speed`, `azimuth` and
//! `cumulativeLength` of a linear `tgeogpoint`/`tgeompoint` sequence, each
//! read at the instant that ends a segment.

use super::{Crs, Micros, Point, distance_azimuth};

/// What [`Motion::push`] reports for an instant: the segment from the
/// previous instant to this one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// Length over duration of the segment ending here: m/s (geodetic) or
    /// units/s (planar). `None` at the first instant, and for a segment of
    /// zero or negative duration (ingest refuses those: datetimes must
    /// increase). MEOS's step-interpolated `speed` holds this value from the
    /// segment's start; here it is stamped with the segment's end.
    pub speed: Option<f64>,
    /// The segment's azimuth in degrees clockwise from north, [0, 360).
    /// `None` at the first instant and for a zero-length segment (a stop):
    /// MEOS's `azimuth` skips such segments, leaving a gap.
    pub azimuth: Option<f64>,
    /// The length travelled since the first instant (0 there), metres or
    /// units.
    pub cumulative_length: f64,
}

/// Per-feature motion: feed instants in increasing time order.
#[derive(Debug, Clone)]
pub struct Motion {
    crs: Crs,
    last: Option<(Micros, Point)>,
    length: f64,
}

impl Motion {
    /// A feature with no instant yet.
    pub fn new(crs: Crs) -> Motion {
        Motion {
            crs,
            last: None,
            length: 0.0,
        }
    }

    /// Adds the instant `(t, p)` and reports the segment ending at it.
    pub fn push(&mut self, t: Micros, p: Point) -> Step {
        let Some((t0, p0)) = self.last.replace((t, p)) else {
            return Step {
                speed: None,
                azimuth: None,
                cumulative_length: 0.0,
            };
        };
        let (len, azimuth) = distance_azimuth(self.crs, p0, p);
        self.length += len;
        Step {
            speed: segment_speed(len, t0, t),
            azimuth,
            cumulative_length: self.length,
        }
    }
}

/// Length over duration in seconds; `None` unless time advanced. (The
/// subtractions here and in the callers saturate: no datetime reaches
/// that far, and library code must not panic.)
pub(super) fn segment_speed(len: f64, t0: Micros, t1: Micros) -> Option<f64> {
    (t1 > t0).then(|| len / (t1.saturating_sub(t0) as f64 / 1e6))
}

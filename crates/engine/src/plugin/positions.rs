//! Position queries on a plugin engine (ABI version 3): the core's
//! [`PositionStep`] as the ABI's `MfsPositionSpec`, and the host's checks
//! of each position before the plugin sees it.
//!
//! The host promises a plugin (`abi.rs`, "Positions") points of the
//! query's reference system with strictly increasing times, as the `local`
//! engine checks them: a record that is not one has no result, skipped
//! (and counted) under `onError: skip`, else the query's failure naming it.

use mfstream_plugin::abi::{
    MFS_DETECT_CROSS, MFS_DETECT_ENTER, MFS_DETECT_EXIT, MFS_DETECT_INSIDE, MFS_DETECT_OUTSIDE,
    MFS_STEP_AZIMUTH, MFS_STEP_CUMULATIVE_LENGTH, MFS_STEP_DISTANCE, MFS_STEP_GEOFENCE,
    MFS_STEP_POSITION, MFS_STEP_SPEED,
};

use super::call::PositionSpec;
use crate::plan::engine_position_spec;
use mfstream_model::QuerySpec;
use mfstream_model::datetime;
use mfstream_model::geo::{self, Crs, Detect};
use mfstream_model::position::{Measure, PositionStep};
use mfstream_model::{Instant, Value};

/// The ABI's view of `step` of `spec`, in `crs`.
pub(crate) fn spec_of(spec: &QuerySpec, crs: Crs, step: &PositionStep) -> PositionSpec {
    let (code, geometry, detect) = match step {
        PositionStep::Measure(Measure::Speed) => (MFS_STEP_SPEED, None, 0),
        PositionStep::Measure(Measure::Azimuth) => (MFS_STEP_AZIMUTH, None, 0),
        PositionStep::Measure(Measure::CumulativeLength) => (MFS_STEP_CUMULATIVE_LENGTH, None, 0),
        PositionStep::Measure(Measure::Distance(geometry)) => {
            (MFS_STEP_DISTANCE, Some(geometry), 0)
        }
        PositionStep::Position => (MFS_STEP_POSITION, None, 0),
        PositionStep::Geofence { geometry, detect } => (
            MFS_STEP_GEOFENCE,
            Some(geometry),
            detect.iter().fold(0, |bits, d| bits | detect_bit(*d)),
        ),
    };
    let srid = match crs {
        Crs::Geodetic => 4326,
        Crs::Planar(code) => i32::try_from(code).unwrap_or(i32::MAX),
    };
    PositionSpec {
        step: code,
        detect,
        geodetic: crs.is_geodetic(),
        srid,
        crs: crs.name(),
        geometry: geometry.map(|g| g.to_string()).unwrap_or_default(),
        json: engine_position_spec(spec, crs, step.clone()).to_json(),
    }
}

/// The ABI's bit of a detect kind.
fn detect_bit(d: Detect) -> u32 {
    match d {
        Detect::Enter => MFS_DETECT_ENTER,
        Detect::Exit => MFS_DETECT_EXIT,
        Detect::Inside => MFS_DETECT_INSIDE,
        Detect::Outside => MFS_DETECT_OUTSIDE,
        Detect::Cross => MFS_DETECT_CROSS,
    }
}

/// One feature's positions as the host checks them for a plugin.
#[derive(Debug)]
pub(crate) struct Checker {
    crs: Crs,
    /// The last position's time: the next must be later.
    last: Option<i64>,
}

impl Checker {
    /// A feature with no position yet, in `crs`.
    pub(crate) fn new(crs: Crs) -> Checker {
        Checker { crs, last: None }
    }

    /// Whether the plugin may have `instant` (then the next must be
    /// later), or why not.
    pub(crate) fn admit(&mut self, instant: &Instant) -> Result<(), Refused> {
        let t = self.check(instant)?;
        self.last = Some(t);
        Ok(())
    }

    /// The position's time, or why the plugin may not have it.
    fn check(&self, instant: &Instant) -> Result<i64, Refused> {
        let at = &instant.datetime;
        let Value::Point(point) = &instant.value else {
            return Err(Refused::NotAPosition {
                at: at.clone(),
                value: instant.value.to_string(),
            });
        };
        geo::check_point(self.crs, geo::Point::new(point.x, point.y)).map_err(|error| {
            Refused::Point {
                at: at.clone(),
                error,
            }
        })?;
        let t = datetime::parse(at)
            .ok_or_else(|| Refused::Datetime { at: at.clone() })?
            .micros();
        match self.last {
            Some(last) if t <= last => Err(Refused::NotAfter {
                at: at.clone(),
                last,
            }),
            _ => Ok(t),
        }
    }
}

/// Why a plugin may not have a record of a feature's positions: each names
/// the record by its datetime (`at`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum Refused {
    /// A value that is not a position.
    #[error("record at {at} has the value {value}, but positions have \"coordinates\"")]
    NotAPosition { at: String, value: String },
    /// A point out of the reference system's bounds, or not finite.
    #[error("record at {at}: {error}")]
    Point { at: String, error: geo::GeoError },
    /// A datetime that does not parse.
    #[error("record at {at}: not an ISO-8601 datetime, such as 2026-01-01T00:00:00Z")]
    Datetime { at: String },
    /// A datetime not after the previous position's.
    #[error(
        "record at {at} is not after the previous position ({}): a feature's datetimes \
         must increase",
        datetime::format_micros(*last)
    )]
    NotAfter { at: String, last: i64 },
}

#[cfg(test)]
mod tests {
    use super::*;
    use mfstream_model::Point;

    fn at(datetime: &str, x: f64, y: f64) -> Instant {
        Instant {
            datetime: datetime.into(),
            value: Value::Point(Point::new(x, y)),
        }
    }

    #[test]
    fn positions_a_plugin_may_not_have_are_refused_with_the_reason() {
        let mut checker = Checker::new(Crs::Geodetic);
        let first = at("2026-01-01T00:00:00Z", 1.0, 2.0);
        assert_eq!(checker.admit(&first), Ok(()));
        let again = checker.admit(&first).unwrap_err().to_string();
        assert!(
            again.contains("is not after the previous position"),
            "{again}"
        );
        let far = checker.admit(&at("2026-01-01T00:00:01Z", 200.0, 2.0));
        assert!(far.unwrap_err().to_string().contains("longitude 200"));
        // A refused position leaves the last one as it was.
        assert_eq!(checker.admit(&at("2026-01-01T00:00:01Z", 1.0, 2.0)), Ok(()));
        // A planar system takes any finite coordinates.
        let mut planar = Checker::new(Crs::Planar(32632));
        assert_eq!(
            planar.admit(&at("2026-01-01T00:00:00Z", 500_000.0, 4e6)),
            Ok(())
        );
    }
}

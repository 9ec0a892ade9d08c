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
use crate::datetime;
use crate::engine::Progress;
use crate::geo::{self, Crs, Detect};
use crate::on_error::OnError;
use crate::plan::engine_position_spec;
use crate::position::{Measure, PositionStep};
use crate::spec::QuerySpec;
use crate::vocab::{Instant, Value};

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

    /// Keeps the positions of `batch` the plugin may get. Under `skip` the
    /// others are removed and counted; under `fail` the batch is cut before
    /// the first of them, and its reason returned: the query processes
    /// what is before it, then fails.
    pub(crate) fn filter(
        &mut self,
        batch: &mut Vec<Instant>,
        on_error: OnError,
        progress: &Progress,
    ) -> Result<(), String> {
        let mut failure = None;
        let mut skipped = 0u64;
        let mut kept = 0;
        for i in 0..batch.len() {
            match self.check(&batch[i]) {
                Ok(t) => {
                    self.last = Some(t);
                    batch.swap(kept, i);
                    kept += 1;
                }
                Err(reason) if on_error == OnError::Skip => {
                    tracing::debug!(%reason, "position skipped");
                    skipped += 1;
                }
                Err(reason) => {
                    failure = Some(reason);
                    break;
                }
            }
        }
        batch.truncate(kept);
        progress.add_skipped(skipped);
        failure.map_or(Ok(()), Err)
    }

    /// The position's time, or why the plugin may not have it.
    fn check(&self, instant: &Instant) -> Result<i64, String> {
        let at = &instant.datetime;
        let Value::Point(point) = &instant.value else {
            return Err(format!(
                "record at {at} has the value {}, but positions have \"coordinates\"",
                instant.value
            ));
        };
        geo::check_point(self.crs, geo::Point::new(point.x, point.y))
            .map_err(|error| format!("record at {at}: {error}"))?;
        let t = datetime::parse(at)
            .ok_or_else(|| {
                format!("record at {at}: not an ISO-8601 datetime, such as 2026-01-01T00:00:00Z")
            })?
            .micros();
        match self.last {
            Some(last) if t <= last => Err(format!(
                "record at {at} is not after the previous position ({}): a feature's datetimes \
                 must increase",
                datetime::format_micros(last)
            )),
            _ => Ok(t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Point;

    fn at(datetime: &str, x: f64, y: f64) -> Instant {
        Instant {
            datetime: datetime.into(),
            value: Value::Point(Point::new(x, y)),
        }
    }

    #[test]
    fn positions_a_plugin_may_not_have_are_skipped_and_counted_or_fail_the_query() {
        let batch = || {
            vec![
                at("2026-01-01T00:00:00Z", 1.0, 2.0),
                at("2026-01-01T00:00:00Z", 1.0, 2.0),
                at("2026-01-01T00:00:01Z", 200.0, 2.0),
                at("2026-01-01T00:00:02Z", 1.0, 2.0),
            ]
        };
        let progress = Progress::default();
        let mut skipping = batch();
        Checker::new(Crs::Geodetic)
            .filter(&mut skipping, OnError::Skip, &progress)
            .unwrap();
        let kept: Vec<_> = skipping.iter().map(|i| i.datetime.as_str()).collect();
        assert_eq!(kept, ["2026-01-01T00:00:00Z", "2026-01-01T00:00:02Z"]);
        assert_eq!(progress.snapshot().skipped, 2);

        let mut failing = batch();
        let reason = Checker::new(Crs::Geodetic)
            .filter(&mut failing, OnError::Fail, &Progress::default())
            .unwrap_err();
        assert_eq!(failing.len(), 1);
        assert!(
            reason.contains("is not after the previous position"),
            "{reason}"
        );
        // A planar system takes any finite coordinates.
        let mut planar = vec![at("2026-01-01T00:00:00Z", 500_000.0, 4e6)];
        Checker::new(Crs::Planar(32632))
            .filter(&mut planar, OnError::Fail, &Progress::default())
            .unwrap();
        assert_eq!(planar.len(), 1);
    }
}

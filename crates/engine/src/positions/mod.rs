//! The `local` engine's run of a position query: one feature's positions
//! in time order, through [`geo::Motion`], a [`geo::Fence`] or a
//! [`Windower`].

use std::sync::Arc;

use crate::plan::{self, Pushed, Records};
use crate::{QueryHandle, Source};
use mfstream_model::OnError;
use mfstream_model::QuerySpec;
use mfstream_model::SpecError;
use mfstream_model::aggregate::{Aggregate, WindowError, Windower};
use mfstream_model::clock::WallClock;
use mfstream_model::datetime;
use mfstream_model::geo::{self, Crs, Micros};
use mfstream_model::position::{Measure, PositionQuery, What};
use mfstream_model::{DetectEvent, Event, Instant, InstantEvent, Point, PropertyType, Value};

/// Runs `query` (the kind of `spec`) in process, its handle naming
/// `engine`.
pub(crate) fn submit(
    engine: &str,
    spec: &QuerySpec,
    query: &PositionQuery,
    source: Source,
) -> Result<QueryHandle, SpecError> {
    let work = Work::new(spec, query)?;
    Ok(plan::start(engine, spec, work, source))
}

/// What a query does with each position.
enum Step {
    /// A measure per instant (speed, azimuth, cumulative length) from the
    /// feature's motion.
    Motion(geo::Motion, Measure),
    /// The distance to a geometry.
    Distance(Box<geo::Geometry>),
    /// The instant itself.
    Position,
    /// The instant itself, in another reference system.
    Reproject(Crs),
    /// A geofence's detections.
    Fence(Box<geo::Fence>, geo::FenceState, Vec<geo::FenceEvent>),
    /// The positions themselves, into the windower.
    Windows,
}

struct Work {
    crs: Crs,
    step: Step,
    windower: Option<Box<Windower>>,
    property: Arc<str>,
    operation: Arc<str>,
    clock: Option<WallClock>,
    on_error: OnError,
    /// The last position's time: the next must be later.
    last: Option<Micros>,
    /// Records skipped since the last event (no windower): the next event
    /// carries them.
    carry: u64,
}

impl Work {
    fn new(spec: &QuerySpec, query: &PositionQuery) -> Result<Work, SpecError> {
        let property: Arc<str> = spec.property.as_str().into();
        let windower = |aggregate: &Aggregate, t: PropertyType| -> Result<_, SpecError> {
            let windower = Windower::new(aggregate, property.clone())?
                .with_property_type(t)
                .with_crs(query.crs)
                .with_budget(spec.budget.clone())
                .with_on_error(spec.on_error);
            Ok(Some(Box::new(match spec.resume {
                Some(end) => windower.resumed_after(end),
                None => windower,
            })))
        };
        let (step, windower) = match &query.what {
            What::Measure { measure, aggregate } => {
                let step = match measure {
                    Measure::Distance(geometry) => Step::Distance(Box::new(
                        geo::Geometry::from_geojson(geometry)
                            .map_err(|e| mfstream_model::position::spec_error(e, "geometry"))?,
                    )),
                    other => Step::Motion(geo::Motion::new(query.crs), other.clone()),
                };
                let windower = match aggregate {
                    // A measure's values are numbers.
                    Some(aggregate) => windower(aggregate, PropertyType::TReal)?,
                    None => None,
                };
                (step, windower)
            }
            What::Position => (Step::Position, None),
            What::Reprojected { to } => (Step::Reproject(*to), None),
            What::Geofence { geometry, detect } => {
                let geometry = geo::Geometry::from_geojson(geometry)
                    .map_err(|e| mfstream_model::position::spec_error(e, "geofence"))?;
                let fence = geo::Fence::new(geometry, detect)
                    .map_err(|e| mfstream_model::position::spec_error(e, "geofence"))?;
                (
                    Step::Fence(Box::new(fence), geo::FenceState::default(), Vec::new()),
                    None,
                )
            }
            What::Aggregate(aggregate) => (Step::Windows, windower(aggregate, spec.property_type)?),
        };
        Ok(Work {
            crs: query.crs,
            step,
            windower,
            property,
            operation: query.operation_name().into(),
            clock: spec.clock.clone(),
            on_error: spec.on_error,
            last: None,
            carry: 0,
        })
    }

    /// The position's time and point, or why it cannot be measured.
    fn check(&self, instant: &Instant) -> Result<(Micros, geo::Point), PositionError> {
        let datetime = || instant.datetime.clone();
        let Value::Point(point) = &instant.value else {
            return Err(PositionError::NotPoint {
                datetime: datetime(),
                value: instant.value.clone(),
            });
        };
        let p = geo::Point::new(point.x, point.y);
        geo::check_point(self.crs, p).map_err(|error| PositionError::Point {
            datetime: datetime(),
            error,
        })?;
        let t = datetime::parse(&instant.datetime)
            .ok_or_else(|| PositionError::Datetime(datetime()))?
            .micros();
        if let Some(last) = self.last
            && t <= last
        {
            return Err(PositionError::NotAfter {
                datetime: datetime(),
                previous: datetime::format_micros(last),
            });
        }
        Ok((t, p))
    }
}

impl Records for Work {
    type Error = PositionError;

    /// Processes one position, its events pushed onto `events`; an error
    /// fails the query. A position that cannot be measured (not a point
    /// of the reference system, or not after the previous one) is skipped
    /// under `onError: skip` (the next event counts it), else an error.
    fn push(&mut self, instant: Instant, events: &mut Vec<Event>) -> Result<Pushed, PositionError> {
        let (t, p) = match self.check(&instant) {
            Ok(at) => at,
            Err(reason) if self.on_error == OnError::Skip => {
                tracing::debug!(%reason, "position skipped");
                match &mut self.windower {
                    Some(windower) => windower.skip(1),
                    None => self.carry += 1,
                }
                return Ok(Pushed::Skipped);
            }
            Err(reason) => return Err(reason),
        };
        self.last = Some(t);
        let value = match &mut self.step {
            Step::Motion(motion, measure) => {
                let step = motion.push(t, p);
                match measure {
                    Measure::Speed => step.speed,
                    Measure::Azimuth => step.azimuth,
                    // A distance is `Step::Distance`'s.
                    Measure::CumulativeLength | Measure::Distance(_) => {
                        Some(step.cumulative_length)
                    }
                }
                .map(Value::Number)
            }
            Step::Distance(geometry) => Some(Value::Number(geometry.distance(self.crs, p))),
            Step::Position | Step::Windows => Some(instant.value),
            Step::Reproject(to) => match geo::reproject(self.crs, *to, p) {
                Ok(q) => {
                    // A height is kept, as `position` echoes it.
                    let z = match &instant.value {
                        Value::Point(point) => point.z(),
                        _ => None,
                    };
                    Some(Value::Point(Point::with_z(q.x, q.y, z)))
                }
                Err(error) if self.on_error == OnError::Skip => {
                    tracing::debug!(%error, "position not reprojected: skipped");
                    self.carry += 1;
                    return Ok(Pushed::Skipped);
                }
                Err(error) => {
                    return Err(PositionError::Point {
                        datetime: instant.datetime,
                        error,
                    });
                }
            },
            Step::Fence(fence, state, found) => {
                fence.step(state, t, p, found);
                for e in found.drain(..) {
                    let datetime = if e.t == t {
                        instant.datetime.clone()
                    } else {
                        datetime::format_micros(e.t)
                    };
                    events.push(Event::Detect(DetectEvent {
                        datetime,
                        value: Value::Point(Point::new(e.point.x, e.point.y)),
                        detect: e.detect.name(),
                        property: self.property.clone(),
                        skipped: std::mem::take(&mut self.carry),
                    }));
                }
                None
            }
        };
        let Some(value) = value else {
            return Ok(Pushed::Done);
        };
        let instant = Instant {
            datetime: instant.datetime,
            value,
        };
        match &mut self.windower {
            Some(windower) => {
                windower.push(instant, events)?;
                Ok(Pushed::Done)
            }
            None => {
                events.push(Event::Instant(InstantEvent {
                    datetime: instant.datetime,
                    value: instant.value,
                    property: self.property.clone(),
                    operation: self.operation.clone(),
                    skipped: std::mem::take(&mut self.carry),
                }));
                Ok(Pushed::Done)
            }
        }
    }

    fn windows(&mut self) -> (Option<&mut Windower>, Option<&WallClock>) {
        (self.windower.as_deref_mut(), self.clock.as_ref())
    }
}

/// Why a position has no result: skipped under `onError: skip` (all but
/// a window's failure), else the query's failure.
#[derive(Debug, thiserror::Error)]
enum PositionError {
    /// A value that is not a position.
    #[error("record at {datetime} has the value {value}, but positions have \"coordinates\"")]
    NotPoint { datetime: String, value: Value },
    /// A position outside the reference system (not finite, lon/lat out of range).
    #[error("record at {datetime}: {error}")]
    Point {
        datetime: String,
        error: geo::GeoError,
    },
    /// A datetime that does not parse.
    #[error("record at {0}: not an ISO-8601 datetime, such as 2026-01-01T00:00:00Z")]
    Datetime(String),
    /// A position not after the previous one.
    #[error(
        "record at {datetime} is not after the previous position ({previous}): a feature's \
         datetimes must increase"
    )]
    NotAfter { datetime: String, previous: String },
    /// The window's aggregate failed.
    #[error(transparent)]
    Window(#[from] WindowError),
}

#[cfg(test)]
mod tests;

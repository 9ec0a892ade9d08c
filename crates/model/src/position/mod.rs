//! Queries over a feature's positions (`TGeogPoint`, `TGeomPoint`): what a
//! registration on `…/tgsequence/queries` (or `mfstream run --type
//! TGeogPoint`) asks for.
//!
//! The position operations are the catalogue's entries that apply to
//! positions ([`Kind::Position`]: `speed`, `azimuth`, `cumulativeLength`,
//! `distance`, `position`; their results, domains and the MEOS function
//! each follows are there, and in the book's table generated from it, `docs/src/cli.md`).
//! Validation looks names up in it; [`Measure`] is how the local engine
//! computes the ones that give a number (the geometry is [`crate::geo`]'s).
//! Besides them:
//!
//! | body | events | MEOS |
//! |---|---|---|
//! | `{"geofence":<Polygon or MultiPolygon>,"detect":[…]}` | `{"datetime","coordinates","detect"}` | Tile38 `WITHIN … DETECT` |
//! | `{"aggregation":"EXTENT","window":…}` (`COUNT`, `EXTENT`, `CENTROID`, `LENGTH`, `AVG_SPEED`, `MAX_SPEED`; `COUNT`, `TUMBLING` or `HOPPING` windows) | a window's aggregate of its positions, each window measured whole | `numInstants`, `twCentroid`, `length` |
//! | `{"operation":"speed","aggregation":"MAX","window":…}` | a numeric aggregate (`COUNT`, `SUM`, `AVG`, `MIN`, `MAX`) of a measure | |
//!
//! A body's `crs` (`"EPSG:4326"`, the default, or a projected
//! `"EPSG:NNNN"`) is the feature's reference system: geodetic lon/lat
//! (`TGeogPoint`) or planar (`TGeomPoint`); for `position`, another
//! system than the feature's is the output's ([`What::Reprojected`]:
//! EPSG:4326 ↔ EPSG:3857, on the `local` engine only).
//!
//! # On engines other than `local`
//!
//! The `local` engine runs a position query whole, in process (the `positions` module of `mfstream-engine`).
//! Any other engine that serves positions (`Serves::POSITIONS` in `mfstream-engine`) is split
//! like a numeric query (`plan::Plan::Position`): the engine computes the
//! query's [`PositionStep`], the per-instant part (a [`Measure`], the
//! position itself, or a geofence's detections), and the host windows its
//! outputs when the query aggregates: a position aggregate (`COUNT`,
//! `EXTENT`, …) asks the engine for `position`, a numeric aggregate of a
//! measure asks it for the measure.

use crate::aggregate::{Aggregate, Window, check_allowed, parse_aggregation};
use crate::geo::{self, Crs, Detect, GeoError};
use crate::ops::{Arg, Kind, Op};
use crate::spec::Registration;
use crate::spec_error::{SpecError, SpecErrorKind};
use crate::vocab::PropertyType;

/// A query over a feature's positions (`TGeogPoint`, `TGeomPoint`): a
/// measure per instant (`speed`, `azimuth`, `cumulativeLength`,
/// `distance`), the instant itself (`position`), a geofence's detections,
/// or an aggregate over windows, in the feature's reference system. Opaque:
/// built by [`Registration`] from a body on a feature's `tgsequence`, or
/// with `type` `TGeogPoint`/`TGeomPoint`.
#[derive(Debug, Clone, PartialEq)]
pub struct PositionQuery {
    /// The feature's reference system.
    pub crs: Crs,
    /// What it computes.
    pub what: What,
}

/// What a position query computes.
#[derive(Debug, Clone, PartialEq)]
pub enum What {
    /// A number per instant, or a numeric aggregate of them over windows.
    Measure {
        /// The measure of each instant.
        measure: Measure,
        /// Its aggregate over windows, if any.
        aggregate: Option<Aggregate>,
    },
    /// The instant itself.
    Position,
    /// The instant itself, reprojected from the query's `crs` (the
    /// feature's) to `to` (a pair [`geo::reprojects`]).
    Reprojected {
        /// The output's reference system.
        to: Crs,
    },
    /// A geofence's detections.
    Geofence {
        /// The fence, as GeoJSON (checked: [`geo::Fence::new`] takes it).
        geometry: serde_json::Value,
        /// The crossings it reports.
        detect: Vec<Detect>,
    },
    /// An aggregate of the positions over windows (`COUNT`, `EXTENT`, …).
    Aggregate(Aggregate),
}

/// The per-instant part of a position query: what an engine other than
/// `local` computes for each instant of one feature, in time order, in the
/// query's reference system (`plan::Plan::Position`). The host windows
/// the engine's outputs when the query aggregates.
///
/// What the engine emits for each step (its events' `property` is the
/// spec's, as for numbers):
///
/// | step | events per instant |
/// |---|---|
/// | [`PositionStep::Measure`] | 0 or 1 [`Event::Instant`](crate::vocab::Event::Instant): the instant's `datetime` and a [`Value::Number`](crate::vocab::Value::Number), `operation` the measure's name; none where it is undefined (the first instant's `speed` and `azimuth`, a stop's `azimuth`) |
/// | [`PositionStep::Position`] | 1 [`Event::Instant`](crate::vocab::Event::Instant): the instant itself, a [`Value::Point`](crate::vocab::Value::Point), `operation` `"position"` |
/// | [`PositionStep::Geofence`] | 0..n [`Event::Detect`](crate::vocab::Event::Detect): the point (the instant, or the interpolated crossing) and its datetime, `detect` the kind's name |
///
/// A record that cannot be measured (not a point, outside the reference
/// system, not after the previous one) has no result: the engine reports
/// it as such (a bridge job's error line) and the host applies `onError`.
#[derive(Debug, Clone, PartialEq)]
pub enum PositionStep {
    /// A number per instant.
    Measure(Measure),
    /// The instant itself.
    Position,
    /// A geofence's detections.
    Geofence {
        /// The fence, as GeoJSON (checked: [`geo::Fence::new`] takes it).
        geometry: serde_json::Value,
        /// The kinds detected, each once, not empty.
        detect: Vec<Detect>,
    },
}

impl PositionStep {
    /// The catalogue's name of the step: a measure's operation,
    /// `"position"`, or `"geofence"`.
    pub fn name(&self) -> &'static str {
        match self {
            PositionStep::Measure(measure) => measure.op().name(),
            PositionStep::Position => Op::Position.name(),
            PositionStep::Geofence { .. } => "geofence",
        }
    }

    /// The query computing this step alone.
    pub fn into_what(self) -> What {
        match self {
            PositionStep::Measure(measure) => What::Measure {
                measure,
                aggregate: None,
            },
            PositionStep::Position => What::Position,
            PositionStep::Geofence { geometry, detect } => What::Geofence { geometry, detect },
        }
    }
}

/// A measure of each instant: how the local engine computes the
/// catalogue's position operations that give a number ([`Measure::op`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Measure {
    /// `speed`.
    Speed,
    /// `azimuth`.
    Azimuth,
    /// `cumulativeLength`.
    CumulativeLength,
    /// To a static geometry, as GeoJSON (checked).
    Distance(serde_json::Value),
}

/// The catalogue's position operations as one line, for messages.
fn operations() -> String {
    Op::catalogue_of(Kind::Position)
}

/// Every detect kind, Tile38's default when a fence names none.
const ALL_DETECT: [Detect; 5] = [
    Detect::Enter,
    Detect::Exit,
    Detect::Inside,
    Detect::Outside,
    Detect::Cross,
];

impl PositionQuery {
    /// The name events carry as their `operation` (or `aggregation`).
    pub fn operation_name(&self) -> &'static str {
        match &self.what {
            What::Measure {
                aggregate: Some(a), ..
            }
            | What::Aggregate(a) => a.aggregation.name(),
            What::Measure { measure, .. } => measure.op().name(),
            What::Position | What::Reprojected { .. } => Op::Position.name(),
            What::Geofence { .. } => "geofence",
        }
    }

    /// The window, for a windowed query.
    pub fn aggregate(&self) -> Option<&Aggregate> {
        match &self.what {
            What::Measure { aggregate, .. } => aggregate.as_ref(),
            What::Aggregate(a) => Some(a),
            _ => None,
        }
    }

    /// The per-instant part an engine other than `local` computes, and the
    /// aggregate the host computes over its outputs, if any: a measure (and
    /// a numeric aggregate of it), `position` (and a position aggregate of
    /// it), or a geofence. `None` for a query only the `local` engine runs
    /// (one no [`PositionStep`] describes yet).
    pub fn split(&self) -> Option<(PositionStep, Option<&Aggregate>)> {
        Some(match &self.what {
            What::Measure { measure, aggregate } => {
                (PositionStep::Measure(measure.clone()), aggregate.as_ref())
            }
            What::Position => (PositionStep::Position, None),
            What::Geofence { geometry, detect } => (
                PositionStep::Geofence {
                    geometry: geometry.clone(),
                    detect: detect.clone(),
                },
                None,
            ),
            What::Aggregate(aggregate) => (PositionStep::Position, Some(aggregate)),
            // Reprojection is the `local` engine's alone: no protocol
            // carries the output's reference system yet.
            What::Reprojected { .. } => return None,
        })
    }

    /// The query computing `step` alone, in the reference system `crs`:
    /// what an engine other than `local` is asked to run
    /// (`plan::engine_position_spec`).
    pub fn of_step(crs: Crs, step: PositionStep) -> PositionQuery {
        PositionQuery {
            crs,
            what: step.into_what(),
        }
    }

    /// Writes the query's keys as a registration body has them (`crs`,
    /// `operation` and its `geometry`, or `geofence` and `detect`), but
    /// its window's: the spec's JSON (`QuerySpec::to_json`) that a bridge
    /// job reads.
    pub fn write_json(&self, obj: &mut serde_json::Map<String, serde_json::Value>) {
        obj.insert("crs".into(), self.crs_name().into());
        let Some((step, _)) = self.split() else {
            obj.insert("operation".into(), self.operation_name().into());
            return;
        };
        if matches!(self.what, What::Aggregate(_)) {
            return;
        }
        match step {
            PositionStep::Measure(Measure::Distance(geometry)) => {
                obj.insert("operation".into(), Op::Distance.name().into());
                obj.insert("geometry".into(), geometry);
            }
            PositionStep::Geofence { geometry, detect } => {
                obj.insert("geofence".into(), geometry);
                let names = detect.iter().map(|d| d.name().into()).collect();
                obj.insert("detect".into(), serde_json::Value::Array(names));
            }
            step => {
                obj.insert("operation".into(), step.name().into());
            }
        }
    }

    /// The reference system.
    pub fn crs(&self) -> Crs {
        self.crs
    }

    /// The property type of the feature: `TGeogPoint` when geodetic.
    pub fn property_type(&self) -> PropertyType {
        type_of(self.crs)
    }

    /// The reference system's name, `EPSG:4326` or `EPSG:NNNN`.
    pub fn crs_name(&self) -> String {
        self.crs.name()
    }

    /// The bytes its static geometry holds once the query runs, counted in
    /// its state budget when it is registered
    /// ([`StateBudget::hold_geometry`](crate::budget::StateBudget::hold_geometry)):
    /// the GeoJSON kept for `GET` (a copy of the body's), and what the
    /// `local` engine builds from it (a `distance` target's parts, and
    /// geodetic, its lines on the sphere; a fence's edges and strip
    /// index), estimated from the parsed geometry without building them. The same figure on every engine (a
    /// plugin builds its own in the server's process, and a bridge host
    /// keeps the query's text for its job). 0 without a geometry.
    pub fn geometry_bytes(&self) -> u64 {
        let parsed = |json: &serde_json::Value| geo::Geometry::from_geojson(json).ok();
        match &self.what {
            What::Measure {
                measure: Measure::Distance(json),
                ..
            } => geo::json_heap_bytes(json) + parsed(json).map_or(0, |g| g.bytes_boxed(self.crs)),
            What::Geofence { geometry, .. } => {
                geo::json_heap_bytes(geometry)
                    + parsed(geometry).map_or(0, |g| geo::Fence::bytes_for(&g))
            }
            _ => 0,
        }
    }

    /// The body's field that holds its geometry: `geofence`, or
    /// `geometry` (`distance`'s target).
    pub fn geometry_field(&self) -> &'static str {
        match &self.what {
            What::Geofence { .. } => "geofence",
            _ => "geometry",
        }
    }

    /// The static geometry it measures against, as GeoJSON: a geofence's
    /// fence or `distance`'s target (the page draws it on its map).
    pub fn geometry(&self) -> Option<&serde_json::Value> {
        match &self.what {
            What::Geofence { geometry, .. } => Some(geometry),
            What::Measure {
                measure: Measure::Distance(geometry),
                ..
            } => Some(geometry),
            _ => None,
        }
    }
}

impl Measure {
    /// The catalogue's operation it computes.
    pub fn op(&self) -> Op {
        match self {
            Measure::Speed => Op::Speed,
            Measure::Azimuth => Op::Azimuth,
            Measure::CumulativeLength => Op::CumulativeLength,
            Measure::Distance(_) => Op::Distance,
        }
    }
}

/// `TGeogPoint` for a geodetic reference system, `TGeomPoint` for a planar.
pub fn type_of(crs: Crs) -> PropertyType {
    if crs.is_geodetic() {
        PropertyType::TGeogPoint
    } else {
        PropertyType::TGeomPoint
    }
}

/// A geometry error as the spec's: the field it names, and its text.
pub fn spec_error(e: GeoError, geometry_field: &'static str) -> SpecError {
    let field = match &e {
        GeoError::NotFinite(_)
        | GeoError::Longitude(_)
        | GeoError::Latitude(_)
        | GeoError::Pole(_) => "coordinates",
        GeoError::Crs(_) | GeoError::Geographic(_) | GeoError::Reprojection { .. } => "crs",
        GeoError::NoDetect => "detect",
        GeoError::Unknown { field, .. } => field,
        _ => geometry_field,
    };
    let text = e.to_string();
    // The text names its field first (`crs: …`): said once. A GeoJSON
    // fault keeps its member's path (`geofence.coordinates[0][3]`), under
    // the field's own name.
    let message = match (&e, text.split_once(": ")) {
        (GeoError::GeoJson { path, reason }, _) => match path.strip_prefix("geometry") {
            Some(member) => format!("{geometry_field}{member}: {reason}"),
            None => format!("{path}: {reason}"),
        },
        (_, Some((_, rest))) => rest.to_owned(),
        (_, None) => text,
    };
    let kind = match &e {
        GeoError::Unknown { .. } | GeoError::Crs(_) => SpecErrorKind::Unknown,
        GeoError::TooLarge { .. } | GeoError::Longitude(_) | GeoError::Latitude(_) => {
            SpecErrorKind::OutOfRange
        }
        GeoError::NoDetect => SpecErrorKind::Missing,
        // A system, or a pair of them, this server does not convert: a
        // valid body that does not fit (422).
        GeoError::Geographic(_) | GeoError::Reprojection { .. } => SpecErrorKind::Unfit,
        _ => SpecErrorKind::Malformed,
    };
    SpecError::new(field, kind, message)
}

/// The reference system a body names: its `crs`, else the one its `type`
/// implies (geodetic for `TGeogPoint`); `None` when it says neither.
pub fn crs_of(registration: &Registration) -> Result<Option<Crs>, SpecError> {
    let crs = match &registration.crs {
        Some(text) => Some(Crs::parse(text).map_err(|e| spec_error(e, "crs"))?),
        None => None,
    };
    match (crs, registration.property_type) {
        // A `position` whose `type` is the feature's and `crs` another
        // system: reprojected (checked against the feature).
        (Some(crs), Some(t))
            if t != type_of(crs) && t.is_point() && is_plain_position(registration) =>
        {
            Ok(Some(crs))
        }
        (Some(crs), Some(t)) if t != type_of(crs) => Err(SpecError::new(
            "type",
            SpecErrorKind::Conflict,
            format!(
                "the crs {:?} is {}, not {t}: drop `type` or make them agree",
                crs.name(),
                type_of(crs)
            ),
        )),
        (Some(_), Some(t)) | (None, Some(t)) if !t.is_point() => Err(SpecError::new(
            "type",
            SpecErrorKind::Unfit,
            format!("a feature's positions are TGeogPoint or TGeomPoint, not {t}"),
        )),
        (Some(crs), _) => Ok(Some(crs)),
        (None, Some(PropertyType::TGeogPoint)) => Ok(Some(Crs::Geodetic)),
        (None, _) => Ok(None),
    }
}

/// Whether a registration asks for the positions themselves (`position`,
/// not aggregated): the one operation whose `crs` may differ from the
/// feature's, reprojecting.
pub(crate) fn is_plain_position(registration: &Registration) -> bool {
    registration.aggregation.is_none()
        && registration.geofence.is_none()
        && registration
            .operation
            .as_deref()
            .and_then(Op::from_name)
            .is_some_and(|op| op == Op::Position)
}

/// The fields that only a position query takes, given on a scalar
/// property's registration: the first, for its error.
pub(crate) fn position_only_field(registration: &Registration) -> Option<&'static str> {
    [
        ("geofence", registration.geofence.is_some()),
        ("detect", registration.detect.is_some()),
        ("geometry", registration.geometry.is_some()),
        ("crs", registration.crs.is_some()),
    ]
    .into_iter()
    .find_map(|(field, given)| given.then_some(field))
}

/// What a position registration computes, checked in itself (its `crs` is
/// the caller's: [`crs_of`]).
pub fn what(registration: Registration) -> Result<What, SpecError> {
    let Registration {
        operation,
        arg,
        aggregation,
        window,
        emit_partial,
        grace,
        geofence,
        detect,
        geometry,
        ..
    } = registration;
    if arg.is_some() {
        return Err(SpecError::new(
            "arg",
            SpecErrorKind::Conflict,
            format!("no position operation takes an `arg` ({})", operations()),
        ));
    }
    let aggregate = aggregate_of(aggregation, window, emit_partial, grace)?;
    let takes_geometry = operation
        .as_deref()
        .and_then(Op::from_name)
        .is_some_and(|op| op.entry().arg == Arg::Geometry);
    if geometry.is_some() && !takes_geometry {
        return Err(SpecError::new(
            "geometry",
            SpecErrorKind::Conflict,
            format!("`geometry` goes with the operation {}", with_geometry()),
        ));
    }
    if let Some(fence) = geofence {
        return geofence_what(fence, detect, operation.is_some() || aggregate.is_some());
    }
    if detect.is_some() {
        return Err(SpecError::new(
            "detect",
            SpecErrorKind::Conflict,
            "`detect` goes with a `geofence`",
        ));
    }
    match (operation, aggregate) {
        (Some(op), aggregate) => operation_what(&op, geometry, aggregate),
        (None, Some(aggregate)) => positions_aggregate(aggregate),
        (None, None) => Err(SpecError::new(
            "operation",
            SpecErrorKind::Missing,
            format!(
                "give an `operation` ({}), a `geofence`, or an `aggregation` with a `window`",
                operations()
            ),
        )),
    }
}

/// The window aggregate a body asks for, checked; `None` without one.
fn aggregate_of(
    aggregation: Option<String>,
    window: Option<serde_json::Value>,
    emit_partial: Option<bool>,
    grace: Option<u64>,
) -> Result<Option<Aggregate>, SpecError> {
    let aggregate = match (aggregation, window) {
        (Some(name), Some(window)) => Some(Aggregate {
            aggregation: parse_aggregation(&name)?,
            window: Window::from_json(&window)?,
            emit_partial: emit_partial.unwrap_or(true),
            grace: grace.unwrap_or(0),
        }),
        (Some(_), None) => {
            return Err(SpecError::new(
                "window",
                SpecErrorKind::Missing,
                "an `aggregation` needs a `window`",
            ));
        }
        (None, Some(_)) => {
            return Err(SpecError::new(
                "aggregation",
                SpecErrorKind::Missing,
                "a `window` needs an `aggregation`",
            ));
        }
        (None, None) if emit_partial.is_some() || grace.is_some() => {
            let field = if grace.is_some() {
                "grace"
            } else {
                "emitPartial"
            };
            return Err(SpecError::new(
                field,
                SpecErrorKind::Conflict,
                format!("`{field}` goes with an `aggregation` and a `window`"),
            ));
        }
        (None, None) => None,
    };
    if let Some(aggregate) = &aggregate {
        aggregate.validate()?;
    }
    Ok(aggregate)
}

/// An aggregate of the positions themselves: one defined for positions
/// (or `COUNT`, which counts any value), over any window; each window is
/// measured whole, a `HOPPING` one from its buckets joined exactly.
fn positions_aggregate(aggregate: Aggregate) -> Result<What, SpecError> {
    check_allowed(aggregate.aggregation, PropertyType::TGeogPoint)?;
    Ok(What::Aggregate(aggregate))
}

fn geofence_what(
    fence: serde_json::Value,
    detect: Option<serde_json::Value>,
    more: bool,
) -> Result<What, SpecError> {
    if more {
        return Err(SpecError::new(
            "geofence",
            SpecErrorKind::Conflict,
            "a `geofence` goes alone (with `detect`): no `operation` or `aggregation`",
        ));
    }
    let detect = match detect {
        None => ALL_DETECT.to_vec(),
        Some(serde_json::Value::Array(names)) => names
            .iter()
            .map(|name| match name.as_str() {
                Some(name) => Detect::parse(name).map_err(|e| spec_error(e, "detect")),
                None => Err(SpecError::new(
                    "detect",
                    SpecErrorKind::Unknown,
                    format!("expected names such as \"enter\", got {name}"),
                )),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(other) => {
            return Err(SpecError::new(
                "detect",
                SpecErrorKind::Malformed,
                format!("expected an array such as [\"enter\",\"exit\"], got {other}"),
            ));
        }
    };
    // Each kind at most once: a list of 100,000 "enter"s is no more than
    // one, and kept with `--state` it would be a registration too large to
    // record (a 503 for a client's mistake).
    if let Some((i, twice)) = detect
        .iter()
        .enumerate()
        .find(|(i, d)| detect[..*i].contains(d))
    {
        return Err(SpecError::new(
            "detect",
            SpecErrorKind::Malformed,
            format!(
                "{:?} is named twice (entry {}): name each kind once",
                twice.name(),
                i + 1
            ),
        ));
    }
    let parsed = geo::Geometry::from_geojson(&fence).map_err(|e| spec_error(e, "geofence"))?;
    geo::Fence::new(parsed, &detect).map_err(|e| spec_error(e, "geofence"))?;
    Ok(What::Geofence {
        geometry: fence,
        detect,
    })
}

/// The names of the position operations that take a `geometry`, quoted:
/// `"distance"`.
fn with_geometry() -> String {
    let names: Vec<String> = Op::on(Kind::Position)
        .filter(|op| op.entry().arg == Arg::Geometry)
        .map(|op| format!("{:?}", op.name()))
        .collect();
    names.join(" or ")
}

fn operation_what(
    name: &str,
    geometry: Option<serde_json::Value>,
    aggregate: Option<Aggregate>,
) -> Result<What, SpecError> {
    // The catalogue's position operations, by name in any case.
    let Some(op) = Op::from_name(name).filter(|op| op.applies_to(Kind::Position)) else {
        return Err(SpecError::new(
            "operation",
            SpecErrorKind::Unknown,
            format!(
                "unknown position operation {name:?}: supported are {}",
                operations()
            ),
        ));
    };
    let measure = match op {
        Op::Speed => Measure::Speed,
        Op::Azimuth => Measure::Azimuth,
        Op::CumulativeLength => Measure::CumulativeLength,
        Op::Distance => {
            let Some(geometry) = geometry else {
                return Err(SpecError::new(
                    "geometry",
                    SpecErrorKind::Missing,
                    format!(
                        "the operation {:?} needs a `geometry` (GeoJSON) to measure to",
                        op.name()
                    ),
                ));
            };
            geo::Geometry::from_geojson(&geometry).map_err(|e| spec_error(e, "geometry"))?;
            Measure::Distance(geometry)
        }
        Op::Position if aggregate.is_some() => {
            return Err(SpecError::new(
                "aggregation",
                SpecErrorKind::Conflict,
                "\"position\" is not aggregated: aggregate the positions themselves \
                 (no `operation`), or a measure such as \"speed\"",
            ));
        }
        Op::Position => return Ok(What::Position),
        // A position operation the local engine does not compute yet: the
        // catalogue has it, this match (its computation) not.
        _ => {
            return Err(SpecError::new(
                "operation",
                SpecErrorKind::Unknown,
                format!("the position operation {:?} is not computed yet", op.name()),
            ));
        }
    };
    if let Some(aggregate) = &aggregate {
        // A measure's values are numbers.
        check_allowed(aggregate.aggregation, PropertyType::TReal)?;
    }
    Ok(What::Measure { measure, aggregate })
}

#[cfg(test)]
mod tests;

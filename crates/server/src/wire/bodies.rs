//! The bodies the server is sent, described for `GET /api`: a query's
//! registration, and the instants and positions of an ingest.
//!
//! `mfstream-model` parses them (`Registration::from_json`, the instants'
//! `Deserialize`, and `super::super::positions` for a `MovingPoint`), with
//! the error messages a client reads; these types only describe them, so
//! they are never built. The test that validates the served document
//! validates the bodies it sends against them.

use serde::Serialize;
use utoipa::ToSchema;

use super::events::Scalar;

/// A continuous query's registration (Part 4): a lifted operation, a
/// windowed aggregate, or both (the aggregate over the operation's
/// results).
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Registration {
    /// A lifted operation (`ln`, `exp`, `log10`, `ceil`, `floor`, `abs`,
    /// `degrees`, `radians`, `sin`, `cos`, `tan`, `add`, `sub`, `mul`,
    /// `div`), in any case.
    #[schema(example = "mul")]
    operation: Option<String>,
    /// The operation's argument (`add`, `sub`, `mul`, `div`).
    arg: Option<f64>,
    /// An aggregation (`COUNT`, `SUM`, `AVG`, `MIN`, `MAX`, …), in any case.
    aggregation: Option<String>,
    window: Option<Window>,
    /// Whether the windows still open at the end emit partial results
    /// (true when absent; not null).
    #[serde(rename = "emitPartial")]
    #[schema(nullable = false)]
    emit_partial: Option<bool>,
    /// Allowed lateness of a time window, in whole seconds (0 when absent).
    #[schema(minimum = 0)]
    grace: Option<u64>,
    /// The engine to run on (`GET /engines`); the default engine when
    /// absent.
    engine: Option<String>,
    /// The property's type; fixed by its first registration or ingest.
    #[serde(rename = "type")]
    #[schema(
        value_type = Option<String>,
        pattern = "^(TReal|TInteger|TText|TBoolean|TGeogPoint|TGeomPoint)$"
    )]
    property_type: Option<String>,
    /// What a record with no finite result does: `skip` (the default) or
    /// `fail`.
    #[serde(rename = "onError")]
    #[schema(value_type = Option<String>, pattern = "^(skip|fail)$")]
    on_error: Option<String>,
    /// Positions only: the feature's reference system, `EPSG:NNNN`
    /// (planar); geodetic `EPSG:4326` when absent. For `position`, the
    /// output's: `EPSG:3857` on a geodetic feature (or `EPSG:4326` on an
    /// `EPSG:3857` one) reprojects.
    crs: Option<String>,
    /// Positions only: a GeoJSON Polygon or MultiPolygon to detect
    /// `enter`, `exit`, `inside`, `outside`, `cross` against.
    #[schema(value_type = Option<Object>)]
    geofence: Option<serde_json::Value>,
    /// Positions only, with `geofence`: the detections wanted (every one
    /// when absent).
    #[schema(value_type = Option<Vec<String>>)]
    detect: Option<serde_json::Value>,
    /// Positions only, for `distance`: a static GeoJSON geometry.
    #[schema(value_type = Option<Object>)]
    geometry: Option<serde_json::Value>,
}

/// The window of an aggregation.
#[derive(Serialize, ToSchema)]
pub(crate) struct Window {
    /// `TUMBLING`, `HOPPING`, `SLIDING` or `COUNT`, in any case.
    #[serde(rename = "type")]
    kind: String,
    /// The window's size, in `unit`s (or records for `COUNT`).
    size: f64,
    /// A hopping window's step, in `unit`s.
    slide: Option<f64>,
    /// `MILLISECONDS`, `SECONDS`, `MINUTES`, `HOURS` or `DAYS`.
    unit: Option<String>,
}

/// One instant of a temporal property.
#[derive(Serialize, ToSchema)]
pub(crate) struct Instant {
    /// RFC 3339 (or one of the forms the book's "Datetimes accepted" (`docs/src/windows.md`) lists).
    #[schema(example = "2026-01-01T00:00:00Z")]
    datetime: String,
    /// A number (`TReal`, `TInteger`), a string (`TText`) or a boolean
    /// (`TBoolean`).
    value: Scalar,
}

/// An ingest's body: one instant, or an array of them.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[expect(dead_code, reason = "a description: mfstream-model parses the body")]
pub(crate) enum Instants {
    One(Instant),
    Many(Vec<Instant>),
}

/// One position of a feature.
#[derive(Serialize, ToSchema)]
pub(crate) struct Position {
    #[schema(example = "2026-01-01T00:00:00Z")]
    datetime: String,
    /// `[x, y]` or `[x, y, z]`: lon/lat in degrees for a geodetic feature.
    #[schema(min_items = 2, max_items = 3)]
    coordinates: Vec<f64>,
}

/// An MF-JSON MovingPoint.
#[derive(Serialize, ToSchema)]
pub(crate) struct MovingPoint {
    /// `MovingPoint`.
    #[serde(rename = "type")]
    kind: String,
    coordinates: Vec<Vec<f64>>,
    datetimes: Vec<String>,
    /// `Linear` only.
    interpolation: Option<String>,
    /// The reference system, as MF-JSON gives it.
    #[schema(value_type = Option<Object>)]
    crs: Option<serde_json::Value>,
}

/// A positions ingest's body: one position, an array of them, or a
/// MovingPoint.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[expect(dead_code, reason = "a description: mfstream-model parses the body")]
pub(crate) enum Positions {
    One(Position),
    Many(Vec<Position>),
    Moving(MovingPoint),
}

//! Queries: what a continuous query computes, and the OGC API – MF Part 4
//! registration body that describes one.

use std::sync::Arc;

use serde::Deserialize;

use crate::aggregate::{Aggregate, Window, check_allowed, parse_aggregation};
use crate::budget::StateBudget;
use crate::clock::WallClock;
use crate::compute::Compute;
use crate::on_error::OnError;
use crate::ops::{Kind, Op, OpError, Transform};
use crate::position::{self, PositionQuery};
pub(crate) use crate::spec_error::{SpecError, SpecErrorKind};
use crate::vocab::PropertyType;

/// What a query computes.
#[derive(Debug, Clone, PartialEq)]
// Exhaustive on purpose: every engine and the server match it whole,
// so that a new kind is handled everywhere (the compiler lists where).
pub enum QueryKind {
    /// A lifted scalar operation applied to each instant.
    Transform(Transform),
    /// An aggregate over a window, of the instants or of a transform's
    /// outputs.
    Aggregate {
        /// The transform applied to each instant first, if any.
        transform: Option<Transform>,
        /// The aggregate over the (transformed) values.
        aggregate: Aggregate,
    },
    /// A query over a feature's positions (`TGeogPoint`, `TGeomPoint`):
    /// see [`PositionQuery`]. The `local` engine runs it whole; an engine
    /// that serves positions computes its per-instant part.
    Position(PositionQuery),
}

/// An engine-neutral continuous query.
#[derive(Debug, Clone, PartialEq)]
pub struct QuerySpec {
    /// The query's id, unique within its control plane.
    pub id: String,
    /// The temporal property it reads.
    pub property: String,
    /// The property's type.
    pub property_type: PropertyType,
    /// What it computes.
    pub kind: QueryKind,
    /// What a record with no (finite) result does: skipped (the default) or
    /// the query's failure.
    pub on_error: OnError,
    /// How event time advances: from the records alone (`None`: a file), or,
    /// for a live query, on this wall clock too, so that a time window
    /// closes on time when no later record comes (see [`Aggregate::grace`]);
    /// a held clock applies from its release ([`WallClock::held`]: a replay).
    /// How a query is run, not part of its body: `mfstream serve` runs every
    /// query live, `mfstream run --live` one.
    pub clock: Option<WallClock>,
    /// For a time window resumed after a restart (`mfstream serve
    /// --state`): every window ending at or before this, in seconds since
    /// the epoch, was emitted before it (`aggregate::resume`). How a query
    /// is run, not part of its body: set by the server from a checkpoint.
    pub resume: Option<i64>,
    /// The bytes of state the query may hold ([`QuerySpec::with_budget`]):
    /// none by default. How a query is run, not part of its body.
    pub budget: Option<Arc<StateBudget>>,
    /// Where its in-process work runs, and its CPU bound
    /// ([`QuerySpec::with_compute`]): the caller's runtime, unbounded, by
    /// default. How a query is run, not part of its body.
    pub compute: Compute,
}

impl QuerySpec {
    /// A transform query on a `TReal` property.
    pub fn transform(property: impl Into<String>, transform: Transform) -> QuerySpec {
        QuerySpec {
            id: String::new(),
            property: property.into(),
            property_type: PropertyType::TReal,
            kind: QueryKind::Transform(transform),
            on_error: OnError::Skip,
            clock: None,
            resume: None,
            budget: None,
            compute: Compute::default(),
        }
    }

    /// The same query, its state bounded by `budget`: its windows and the
    /// instants handed to it count in it, and a query over it fails
    /// naming the limit ([`StateBudget::exceeded`]).
    pub fn with_budget(mut self, budget: Arc<StateBudget>) -> QuerySpec {
        self.budget = Some(budget);
        self
    }

    /// The same query, its in-process work run by `compute`: on a
    /// [`ComputePool`](crate::compute::ComputePool), in slices, within its
    /// [`CpuLimit`](crate::compute::CpuLimit) if it has one.
    pub fn with_compute(mut self, compute: Compute) -> QuerySpec {
        self.compute = compute;
        self
    }

    /// The same query with the error policy `on_error`.
    pub fn on_error(mut self, on_error: OnError) -> QuerySpec {
        self.on_error = on_error;
        self
    }

    /// The same query, live on the system's wall clock
    /// ([`clock`](QuerySpec::clock)).
    pub fn live(self) -> QuerySpec {
        self.live_on(WallClock::system())
    }

    /// The same query, live on `clock` (a test's clock, for one).
    pub fn live_on(mut self, clock: WallClock) -> QuerySpec {
        self.clock = Some(clock);
        self
    }

    /// A windowed aggregate on a property of `property_type`, of its
    /// instants or, with a `transform`, of the transform's outputs.
    pub fn aggregate(
        property: impl Into<String>,
        property_type: PropertyType,
        transform: Option<Transform>,
        aggregate: Aggregate,
    ) -> QuerySpec {
        QuerySpec {
            id: String::new(),
            property: property.into(),
            property_type,
            kind: QueryKind::Aggregate {
                transform,
                aggregate,
            },
            on_error: OnError::Skip,
            clock: None,
            resume: None,
            budget: None,
            compute: Compute::default(),
        }
    }

    /// The reference system of a query on positions.
    pub fn crs(&self) -> Option<crate::geo::Crs> {
        match &self.kind {
            QueryKind::Position(q) => Some(q.crs),
            _ => None,
        }
    }

    /// A position query's static geometry: the bytes it holds once the
    /// query runs, counted in its state (`PositionQuery::geometry_bytes`),
    /// and the body's field that holds it; `None` without one.
    pub fn geometry_bytes(&self) -> Option<(u64, &'static str)> {
        match &self.kind {
            QueryKind::Position(q) => match q.geometry_bytes() {
                0 => None,
                bytes => Some((bytes, q.geometry_field())),
            },
            _ => None,
        }
    }

    /// The reference system a query's registration names as its `crs`:
    /// the feature's, or for a `position` that reprojects, its output's.
    pub fn registered_crs(&self) -> Option<crate::geo::Crs> {
        match &self.kind {
            QueryKind::Position(q) => match q.what {
                position::What::Reprojected { to } => Some(to),
                _ => Some(q.crs),
            },
            _ => None,
        }
    }

    /// The name events carry as their `operation` (or `aggregation`).
    pub fn operation_name(&self) -> &str {
        match &self.kind {
            QueryKind::Transform(t) => t.op.name(),
            QueryKind::Aggregate { aggregate, .. } => aggregate.aggregation.name(),
            QueryKind::Position(q) => q.operation_name(),
        }
    }

    /// Checks the query can run: a transform reads numbers; an aggregation
    /// is defined for the type of the values it sees (`TReal` after a
    /// transform, else the property's); window sizes are positive and a
    /// hop is no longer than its window.
    pub fn validate(&self) -> Result<(), SpecError> {
        let transform = match &self.kind {
            QueryKind::Transform(t) => Some(t),
            QueryKind::Aggregate { transform, .. } => transform.as_ref(),
            QueryKind::Position(q) => {
                // Checked as it was parsed; only its type can disagree.
                if self.property_type != q.property_type() {
                    return Err(SpecError::new(
                        "type",
                        SpecErrorKind::Unfit,
                        format!(
                            "a query in {} reads {}, not {}",
                            q.crs_name(),
                            q.property_type(),
                            self.property_type
                        ),
                    ));
                }
                return Ok(());
            }
        };
        if self.property_type.is_point() {
            return Err(SpecError::new(
                "type",
                SpecErrorKind::Unfit,
                format!(
                    "{} positions take position operations ({}), geofences or aggregations",
                    self.property_type,
                    Op::catalogue_of(Kind::Position)
                ),
            ));
        }
        if transform.is_some_and(|t| !t.applies_to(self.property_type)) {
            return Err(SpecError::new(
                "operation",
                SpecErrorKind::Unfit,
                format!(
                    "transforms take numbers, but the property is {}",
                    self.property_type
                ),
            ));
        }
        if let QueryKind::Aggregate { aggregate, .. } = &self.kind {
            check_allowed(aggregate.aggregation, self.value_type())?;
            aggregate.validate()?;
        }
        Ok(())
    }

    /// The type of the values an aggregate sees: `TReal` after a transform,
    /// else the property's.
    pub fn value_type(&self) -> PropertyType {
        match &self.kind {
            QueryKind::Aggregate {
                transform: None, ..
            } => self.property_type,
            _ => PropertyType::TReal,
        }
    }

    /// The spec as the JSON object bridge jobs receive in `MFSTREAM_QUERY`:
    /// `id`, `property`, `type`, then `operation` and `arg` for a transform
    /// (for positions: `crs`, then `operation` and its `geometry`, or
    /// `geofence` and `detect`), then `aggregation`, `window`,
    /// `emitPartial` and `grace` (seconds) for an aggregate, then `onError`
    /// (`skip` or `fail`). Keys as in a registration body, so that
    /// [`from_json`](QuerySpec::from_json) reads it back.
    pub fn to_json(&self) -> String {
        let mut obj = serde_json::Map::new();
        obj.insert("id".into(), self.id.clone().into());
        obj.insert("property".into(), self.property.clone().into());
        obj.insert("type".into(), self.property_type.as_str().into());
        let (transform, aggregate) = match &self.kind {
            QueryKind::Transform(t) => (Some(t), None),
            QueryKind::Aggregate {
                transform,
                aggregate,
            } => (transform.as_ref(), Some(aggregate)),
            QueryKind::Position(q) => {
                q.write_json(&mut obj);
                (None, q.aggregate())
            }
        };
        if let Some(t) = transform {
            obj.insert("operation".into(), t.op.name().into());
            if let Some(arg) = t.arg {
                obj.insert("arg".into(), arg.into());
            }
        }
        if let Some(a) = aggregate {
            obj.insert("aggregation".into(), a.aggregation.name().into());
            obj.insert(
                "window".into(),
                serde_json::to_value(&a.window).unwrap_or_default(),
            );
            obj.insert("emitPartial".into(), a.emit_partial.into());
            obj.insert("grace".into(), a.grace.into());
        }
        obj.insert("onError".into(), self.on_error.name().into());
        serde_json::Value::Object(obj).to_string()
    }

    /// Parses the JSON of [`to_json`](QuerySpec::to_json) back into the
    /// spec, as a job (or an isolated plugin's child) reads `MFSTREAM_QUERY`.
    pub fn from_json(json: &str) -> Result<QuerySpec, SpecError> {
        let mut body: serde_json::Map<String, serde_json::Value> = serde_json::from_str(json)
            .map_err(|e| SpecError::new("body", SpecErrorKind::Malformed, e.to_string()))?;
        let mut text = |key: &'static str| match body.remove(key) {
            Some(serde_json::Value::String(s)) => Ok(s),
            Some(other) => Err(SpecError::new(
                key,
                SpecErrorKind::Malformed,
                format!("expected a string, got {other}"),
            )),
            None => Err(SpecError::new(key, SpecErrorKind::Missing, "missing")),
        };
        let id = text("id")?;
        let property = text("property")?;
        let body = serde_json::Value::Object(body).to_string();
        let mut spec = Registration::from_json(&body)?.into_spec(property, PropertyType::TReal)?;
        spec.id = id;
        Ok(spec)
    }
}

/// A Part 4 registration body: `{"operation":"mul","arg":1.852}`,
/// `{"aggregation":"AVG","window":{"type":"COUNT","size":10}}`, or both (the
/// transform, then the aggregate over its outputs).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registration {
    /// A lifted operation's name.
    pub operation: Option<String>,
    /// The operation's scalar argument.
    pub arg: Option<f64>,
    /// An aggregation's name.
    pub aggregation: Option<String>,
    /// The window of an aggregation.
    pub window: Option<serde_json::Value>,
    /// Whether an aggregate emits the windows still open at the end of the
    /// source as partial results; true when absent.
    #[serde(rename = "emitPartial")]
    pub emit_partial: Option<bool>,
    /// Allowed lateness of a time window, in whole seconds; 0 when absent.
    pub grace: Option<u64>,
    /// The engine to run on; the registry's default when absent.
    pub engine: Option<String>,
    /// The property's type; `TReal` when absent.
    #[serde(rename = "type")]
    pub property_type: Option<PropertyType>,
    /// What a record with no finite result does: `"skip"` (the default) or
    /// `"fail"` ([`OnError`]).
    #[serde(rename = "onError")]
    pub on_error: Option<String>,
    /// Positions: the feature's reference system, `EPSG:4326` (geodetic,
    /// the default) or a projected `EPSG:NNNN`; for `position`, the
    /// output's (`EPSG:4326` ↔ `EPSG:3857` reproject).
    pub crs: Option<String>,
    /// Positions: a geofence, a GeoJSON Polygon or MultiPolygon.
    pub geofence: Option<serde_json::Value>,
    /// Positions: what a geofence detects (`enter`, `exit`, `inside`,
    /// `outside`, `cross`); all when absent.
    pub detect: Option<serde_json::Value>,
    /// Positions: the GeoJSON geometry `distance` measures to.
    pub geometry: Option<serde_json::Value>,
}

impl Registration {
    /// Parses a registration body.
    pub fn from_json(body: &str) -> Result<Registration, SpecError> {
        let value: serde_json::Value = serde_json::from_str(body)
            .map_err(|e| SpecError::new("body", SpecErrorKind::Malformed, e.to_string()))?;
        // A wrong type is named by its field (`arg: expected a number`), not
        // as a body error. `null` is an absent value, except for emitPartial.
        type Is = fn(&serde_json::Value) -> bool;
        let types: [(&str, Is, &str); 9] = [
            (
                "crs",
                |v| v.is_string() || v.is_null(),
                "a string such as \"EPSG:4326\"",
            ),
            ("operation", |v| v.is_string() || v.is_null(), "a string"),
            ("arg", |v| v.is_number() || v.is_null(), "a number"),
            ("aggregation", |v| v.is_string() || v.is_null(), "a string"),
            (
                "emitPartial",
                serde_json::Value::is_boolean,
                "true or false",
            ),
            (
                "grace",
                |v| v.is_u64() || v.is_null(),
                "a non-negative integer number of seconds",
            ),
            ("engine", |v| v.is_string() || v.is_null(), "a string"),
            ("type", |v| v.is_string() || v.is_null(), "a string"),
            (
                "onError",
                |v| v.is_string() || v.is_null(),
                "\"skip\" or \"fail\"",
            ),
        ];
        for (field, is, expected) in types {
            if let Some(v) = value.get(field).filter(|v| !is(v)) {
                return Err(SpecError::new(
                    field,
                    SpecErrorKind::Malformed,
                    format!("expected {expected}, got {v}"),
                ));
            }
        }
        if let Some(name) = value.get("onError").and_then(serde_json::Value::as_str) {
            OnError::from_name(name)?;
        }
        serde_json::from_value(value)
            .map_err(|e| SpecError::new("body", SpecErrorKind::Malformed, e.to_string()))
    }

    /// The body's error policy: `onError`, [`OnError::Skip`] when absent.
    fn policy(&self) -> Result<OnError, SpecError> {
        self.on_error
            .as_deref()
            .map_or(Ok(OnError::Skip), OnError::from_name)
    }

    /// Validates the body into a query on `property`.
    ///
    /// `default_type` is the property's type when the body does not say.
    pub fn into_spec(
        self,
        property: impl Into<String>,
        default_type: PropertyType,
    ) -> Result<QuerySpec, SpecError> {
        let property_type = self.property_type.unwrap_or(default_type);
        if property_type.is_point() || self.crs.is_some() {
            let known = self.property_type.is_none().then_some(default_type);
            return self
                .into_position_spec(&property.into(), known, None)
                .map_err(|e| match e {
                    RegistrationError::Invalid(e) | RegistrationError::Unfit(e) => e,
                });
        }
        let on_error = self.policy()?;
        let spec = QuerySpec {
            id: String::new(),
            property: property.into(),
            property_type,
            kind: self.into_kind()?,
            on_error,
            clock: None,
            resume: None,
            budget: None,
            compute: Compute::default(),
        };
        spec.validate()?;
        Ok(spec)
    }

    /// What the body computes, checked in itself: names, arguments and
    /// windows, not yet against a property's type.
    fn into_kind(self) -> Result<QueryKind, SpecError> {
        if let Some(field) = position::position_only_field(&self) {
            return Err(SpecError::new(
                field,
                SpecErrorKind::Conflict,
                format!(
                    "`{field}` goes with a feature's positions (…/tgsequence, or `type` \
                     TGeogPoint or TGeomPoint)"
                ),
            ));
        }
        let transform = match self.operation {
            Some(op) => Some(Transform::new(&op, self.arg).map_err(|e| {
                let (field, kind) = match e {
                    OpError::Unknown(_) => ("operation", SpecErrorKind::Unknown),
                    OpError::NotOnNumbers(_) => ("operation", SpecErrorKind::Unfit),
                    OpError::MissingArg(_) => ("arg", SpecErrorKind::Missing),
                    OpError::NeedlessArg(_) => ("arg", SpecErrorKind::Conflict),
                    _ => ("arg", SpecErrorKind::OutOfRange),
                };
                SpecError::new(field, kind, e.to_string())
            })?),
            None if self.arg.is_some() => {
                return Err(SpecError::new(
                    "arg",
                    SpecErrorKind::Conflict,
                    "`arg` goes with an `operation`",
                ));
            }
            None => None,
        };
        let aggregate = match (self.aggregation, self.window) {
            (Some(name), Some(window)) => Some(Aggregate {
                aggregation: parse_aggregation(&name)?,
                window: Window::from_json(&window)?,
                emit_partial: self.emit_partial.unwrap_or(true),
                grace: self.grace.unwrap_or(0),
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
            (None, None) if self.emit_partial.is_some() => {
                return Err(SpecError::new(
                    "emitPartial",
                    SpecErrorKind::Conflict,
                    "`emitPartial` goes with an `aggregation` and a `window`",
                ));
            }
            (None, None) if self.grace.is_some() => {
                return Err(SpecError::new(
                    "grace",
                    SpecErrorKind::Conflict,
                    "`grace` goes with an `aggregation` over a TUMBLING or HOPPING `window`",
                ));
            }
            (None, None) => None,
        };
        let kind = match (transform, aggregate) {
            (transform, Some(aggregate)) => QueryKind::Aggregate {
                transform,
                aggregate,
            },
            (Some(transform), None) => QueryKind::Transform(transform),
            (None, None) => {
                return Err(SpecError::new(
                    "operation",
                    SpecErrorKind::Missing,
                    "give an `operation` (a transform), an `aggregation` with a `window`, \
                     or both",
                ));
            }
        };
        if let QueryKind::Aggregate { aggregate, .. } = &kind {
            aggregate.validate()?;
        }
        Ok(kind)
    }
}

/// Why a registration on a property is refused.
///
/// The two are told apart so a control plane can answer them differently
/// (HTTP 400 and 422): a body that is wrong in itself, whatever property it
/// is registered on, and a valid body that does not fit the property's type.
#[derive(Debug, Clone, PartialEq, Eq)]
// Exhaustive on purpose: the server answers each kind with its status.
pub enum RegistrationError {
    /// The body is invalid in itself.
    Invalid(SpecError),
    /// The body is valid but does not fit the property: a `type` other than
    /// the property's, a transform of a non-numeric property, or an
    /// aggregation its values' type does not define.
    Unfit(SpecError),
}

impl std::error::Error for RegistrationError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RegistrationError::Invalid(e) | RegistrationError::Unfit(e) => Some(e),
        }
    }
}

impl std::fmt::Display for RegistrationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegistrationError::Invalid(e) | RegistrationError::Unfit(e) => e.fmt(f),
        }
    }
}

impl Registration {
    /// Validates the body into a query on `property`, whose type is `known`
    /// once fixed (by an earlier registration or ingest): first the body in
    /// itself (`RegistrationError::Invalid`), then against the property
    /// (`RegistrationError::Unfit`). Every check of a registration is
    /// here; a control plane only maps the two to its answers.
    pub fn into_spec_on(
        self,
        property: &str,
        known: Option<PropertyType>,
    ) -> Result<QuerySpec, RegistrationError> {
        let given = self.property_type;
        if given.is_some_and(PropertyType::is_point) || known.is_some_and(PropertyType::is_point) {
            return self.into_position_spec(property, known, None);
        }
        let on_error = self.policy().map_err(RegistrationError::Invalid)?;
        let kind = self.into_kind().map_err(RegistrationError::Invalid)?;
        let property_type = fit(property, given, known, &kind).map_err(RegistrationError::Unfit)?;
        let spec = QuerySpec {
            id: String::new(),
            property: property.to_owned(),
            property_type,
            kind,
            on_error,
            clock: None,
            resume: None,
            budget: None,
            compute: Compute::default(),
        };
        spec.validate().map_err(RegistrationError::Invalid)?;
        Ok(spec)
    }
}

impl Registration {
    /// Validates the body into a query on a feature's positions, whose
    /// type is `known` once fixed and, for a planar one, reference system
    /// `known_crs`: first the body in itself, then against the feature. A
    /// feature has one reference system: a body naming another than the
    /// feature's (geodetic for `TGeogPoint`, `known_crs` for `TGeomPoint`)
    /// does not fit it (`Unfit`: 422). With neither known, the body's
    /// `crs` decides, else geodetic EPSG:4326.
    pub fn into_position_spec(
        self,
        property: &str,
        known: Option<PropertyType>,
        known_crs: Option<crate::geo::Crs>,
    ) -> Result<QuerySpec, RegistrationError> {
        let on_error = self.policy().map_err(RegistrationError::Invalid)?;
        let given = position::crs_of(&self).map_err(|e| match e.field {
            // A `type` that is no position's, or a system this server does
            // not measure in, does not fit the feature.
            "type" => RegistrationError::Unfit(e),
            _ if e.kind == SpecErrorKind::Unfit => RegistrationError::Unfit(e),
            _ => RegistrationError::Invalid(e),
        })?;
        let plain = position::is_plain_position(&self);
        let feature = match (known, known_crs) {
            (_, Some(crs)) => Some(crs),
            (Some(PropertyType::TGeogPoint), None) => Some(crate::geo::Crs::Geodetic),
            // A `position` whose `type` (the feature's positions) is not
            // its `crs`'s (the output's), as the store records one that
            // reprojects: the feature's system is the pair's other end.
            _ => match (self.property_type.or(known), given) {
                (Some(t), Some(to)) if plain && t != position::type_of(to) => {
                    Some(crate::geo::reprojection_source(to))
                }
                _ => None,
            },
        };
        // `position` in another system than the feature's: reprojected,
        // when this server converts the pair.
        let reproject = match (given, feature) {
            (Some(given), Some(feature)) if given != feature && plain => {
                if !crate::geo::reprojects(feature, given) {
                    return Err(RegistrationError::Unfit(SpecError::new(
                        "crs",
                        SpecErrorKind::Unfit,
                        format!(
                            "the positions of {property} are in {}: `position` converts {} \
                             only, not to {}",
                            feature.name(),
                            crate::geo::REPROJECTIONS,
                            given.name()
                        ),
                    )));
                }
                Some(given)
            }
            _ => None,
        };
        let given = if reproject.is_some() { feature } else { given };
        let crs = match (given, feature) {
            (Some(given), Some(feature)) if given != feature => {
                return Err(RegistrationError::Unfit(SpecError::new(
                    "crs",
                    SpecErrorKind::Unfit,
                    format!(
                        "the positions of {property} are in {}, not {}: a feature has one \
                         reference system (register without `crs`, or on another feature)",
                        feature.name(),
                        given.name()
                    ),
                )));
            }
            (Some(crs), _) | (None, Some(crs)) => crs,
            (None, None) if known == Some(PropertyType::TGeomPoint) => {
                return Err(RegistrationError::Unfit(SpecError::new(
                    "crs",
                    SpecErrorKind::Missing,
                    format!("the positions of {property} are planar: name their `crs`"),
                )));
            }
            (None, None) => crate::geo::Crs::Geodetic,
        };
        // `type` TGeomPoint with no `crs` on a feature that is not planar
        // would otherwise measure geodetically (and fix the feature so):
        // the type says planar, so its system must be named.
        if self.property_type == Some(PropertyType::TGeomPoint) && crs == crate::geo::Crs::Geodetic
        {
            return Err(match feature {
                Some(feature) => RegistrationError::Unfit(SpecError::new(
                    "type",
                    SpecErrorKind::Unfit,
                    format!(
                        "the positions of {property} are in {} (TGeogPoint), not TGeomPoint: \
                         drop `type` or register on another feature",
                        feature.name()
                    ),
                )),
                None => RegistrationError::Invalid(SpecError::new(
                    "crs",
                    SpecErrorKind::Missing,
                    "TGeomPoint positions are planar: name their `crs` (\"EPSG:NNNN\"), or \
                     send TGeogPoint for lon/lat",
                )),
            });
        }
        let what = match (
            position::what(self).map_err(RegistrationError::Invalid)?,
            reproject,
        ) {
            (position::What::Position, Some(to)) => position::What::Reprojected { to },
            (what, _) => what,
        };
        let query = PositionQuery { crs, what };
        let spec = QuerySpec {
            id: String::new(),
            property: property.to_owned(),
            property_type: query.property_type(),
            kind: QueryKind::Position(query),
            on_error,
            clock: None,
            resume: None,
            budget: None,
            compute: Compute::default(),
        };
        spec.validate().map_err(RegistrationError::Invalid)?;
        Ok(spec)
    }
}

/// The property's type for a query of `kind` registered on it, checked
/// against what the query asks of it: a `given` type must be the property's
/// `known` one, a transform needs numbers, and an aggregation must be
/// defined for the values it sees (numbers after a transform).
fn fit(
    property: &str,
    given: Option<PropertyType>,
    known: Option<PropertyType>,
    kind: &QueryKind,
) -> Result<PropertyType, SpecError> {
    let property_type = match (given, known) {
        (Some(given), Some(known)) if given != known => {
            return Err(SpecError::new(
                "type",
                SpecErrorKind::Unfit,
                format!("the property {property} is {known}, not {given}"),
            ));
        }
        (Some(t), _) | (None, Some(t)) => t,
        (None, None) => PropertyType::TReal,
    };
    let (transform, aggregate) = match kind {
        QueryKind::Transform(t) => (Some(t), None),
        QueryKind::Aggregate {
            transform,
            aggregate,
        } => (transform.as_ref(), Some(aggregate)),
        QueryKind::Position(_) => (None, None),
    };
    if transform.is_some_and(|t| !t.applies_to(property_type)) {
        return Err(SpecError::new(
            "operation",
            SpecErrorKind::Unfit,
            format!("transforms take numbers, but the property {property} is {property_type}"),
        ));
    }
    if let Some(aggregate) = aggregate {
        let values = if transform.is_some() {
            PropertyType::TReal
        } else {
            property_type
        };
        check_allowed(aggregate.aggregation, values)?;
    }
    Ok(property_type)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(body: &str) -> Result<QuerySpec, SpecError> {
        Registration::from_json(body)?.into_spec("speed", PropertyType::TReal)
    }

    #[test]
    fn each_refusal_says_its_field_and_kind() {
        use SpecErrorKind::*;
        let cases = [
            ("{", "body", Malformed),
            (r#"{"operation":"mul","arg":"x"}"#, "arg", Malformed),
            (r#"{"operation":"mul"}"#, "arg", Missing),
            (r#"{"operation":"ln","arg":2}"#, "arg", Conflict),
            (r#"{"operation":"div","arg":0}"#, "arg", OutOfRange),
            (r#"{"operation":"nope"}"#, "operation", Unknown),
            (r#"{}"#, "operation", Missing),
            (r#"{"arg":2}"#, "arg", Conflict),
            (r#"{"aggregation":"AVG"}"#, "window", Missing),
            (
                r#"{"aggregation":"MEDIAN","window":{"type":"COUNT","size":2}}"#,
                "aggregation",
                Unknown,
            ),
            (
                r#"{"aggregation":"AVG","window":{"type":"COUNT","size":0}}"#,
                "window.size",
                OutOfRange,
            ),
            (
                r#"{"aggregation":"AVG","window":{"type":"DAILY"}}"#,
                "window.type",
                Unknown,
            ),
            (
                r#"{"aggregation":"AVG","window":{"type":"COUNT","size":2},"grace":1}"#,
                "grace",
                Conflict,
            ),
            (
                r#"{"operation":"ln","onError":"ignore"}"#,
                "onError",
                Unknown,
            ),
        ];
        for (body, field, kind) in cases {
            let e = spec(body).unwrap_err();
            assert_eq!((e.field, e.kind), (field, kind), "{body}: {e}");
        }
        let text = Registration::from_json(r#"{"operation":"ln"}"#)
            .unwrap()
            .into_spec("name", PropertyType::TText)
            .unwrap_err();
        assert_eq!((text.field, text.kind), ("operation", Unfit), "{text}");
    }

    #[test]
    fn a_transform_registration_becomes_a_transform_spec() {
        let spec = spec(r#"{"operation":"mul","arg":1.852}"#).unwrap();
        assert_eq!(spec.operation_name(), "mul");
        assert_eq!(
            spec.kind,
            QueryKind::Transform(Transform::new("mul", Some(1.852)).unwrap())
        );
    }

    #[test]
    fn bad_registrations_name_the_field() {
        assert_eq!(
            spec(r#"{"operation":"nope"}"#).unwrap_err().field,
            "operation"
        );
        assert_eq!(
            spec(r#"{"operation":"div","arg":0}"#).unwrap_err().field,
            "arg"
        );
        assert_eq!(
            spec(r#"{"operation":"ln","bogus":1}"#).unwrap_err().field,
            "body"
        );
        assert_eq!(spec("{}").unwrap_err().field, "operation");
        let text = Registration::from_json(r#"{"operation":"ln","type":"TText"}"#)
            .unwrap()
            .into_spec("name", PropertyType::TReal)
            .unwrap_err();
        assert!(text.message.contains("TText"), "{text}");
        let zero = spec(r#"{"aggregation":"AVG","window":{"type":"COUNT","size":0}}"#);
        assert_eq!(zero.unwrap_err().field, "window.size");
        let partial =
            spec(r#"{"aggregation":"AVG","window":{"type":"COUNT","size":1},"emitPartial":1}"#);
        assert_eq!(partial.unwrap_err().field, "emitPartial");
        assert_eq!(
            spec(r#"{"aggregation":"MEDIAN","window":{"type":"COUNT","size":1}}"#)
                .unwrap_err()
                .field,
            "aggregation"
        );
        assert_eq!(
            spec(r#"{"aggregation":"AVG"}"#).unwrap_err().field,
            "window"
        );
    }

    #[test]
    fn an_aggregation_not_defined_for_the_type_is_refused_listing_the_allowed() {
        let e =
            Registration::from_json(r#"{"aggregation":"avg","window":{"type":"COUNT","size":3}}"#)
                .unwrap()
                .into_spec("name", PropertyType::TText)
                .unwrap_err();
        assert_eq!(e.field, "aggregation");
        assert!(
            e.message.contains("TText allows COUNT, COUNT_DISTINCT"),
            "{e}"
        );
        // After a transform the values are numbers, whatever the type says.
        let composed = spec(
            r#"{"operation":"mul","arg":2,"aggregation":"COUNT_TRUE","window":{"type":"COUNT","size":3}}"#,
        );
        assert!(composed.unwrap_err().message.contains("TReal allows"));
    }

    #[test]
    fn a_registration_on_a_property_tells_an_invalid_body_from_one_that_does_not_fit() {
        let on = |body: &str, known| {
            Registration::from_json(body)
                .unwrap()
                .into_spec_on("name", known)
        };
        let unfit = |body: &str, known| match on(body, known) {
            Err(RegistrationError::Unfit(e)) => e.field,
            other => panic!("{body}: {other:?}"),
        };
        let invalid = |body: &str, known| match on(body, known) {
            Err(RegistrationError::Invalid(e)) => e.field,
            other => panic!("{body}: {other:?}"),
        };
        let text = Some(PropertyType::TText);
        assert_eq!(unfit(r#"{"operation":"abs","type":"TReal"}"#, text), "type");
        assert_eq!(unfit(r#"{"operation":"abs"}"#, text), "operation");
        let avg = r#"{"aggregation":"AVG","window":{"type":"COUNT","size":2}}"#;
        assert_eq!(unfit(avg, text), "aggregation");
        // The same body fits a numeric property, and a transform makes the
        // values numbers whatever the property's type.
        assert!(on(avg, None).is_ok());
        let any = r#"{"operation":"abs","aggregation":"ANY","window":{"type":"COUNT","size":2}}"#;
        assert_eq!(unfit(any, Some(PropertyType::TBoolean)), "operation");
        assert_eq!(unfit(any, None), "aggregation");
        // A body wrong in itself is invalid, whatever the property.
        assert_eq!(invalid(r#"{"operation":"nope"}"#, text), "operation");
        let unknown = r#"{"aggregation":"MEDIAN","window":{"type":"COUNT","size":2}}"#;
        assert_eq!(invalid(unknown, text), "aggregation");
        let zero = r#"{"aggregation":"COUNT","window":{"type":"COUNT","size":0}}"#;
        assert_eq!(invalid(zero, text), "window.size");
        // The spec takes the property's known type when the body has none.
        let spec = on(
            r#"{"aggregation":"COUNT","window":{"type":"COUNT","size":2}}"#,
            text,
        )
        .unwrap();
        assert_eq!(spec.property_type, PropertyType::TText);
    }

    #[test]
    fn a_transform_and_an_aggregate_compose() {
        let spec = spec(
            r#"{"operation":"mul","arg":1.852,"aggregation":"AVG","window":{"type":"COUNT","size":3},"emitPartial":false}"#,
        )
        .unwrap();
        assert_eq!(spec.operation_name(), "AVG");
        assert_eq!(
            spec.kind,
            QueryKind::Aggregate {
                transform: Some(Transform::new("mul", Some(1.852)).unwrap()),
                aggregate: Aggregate {
                    aggregation: crate::Aggregation::Avg,
                    window: Window::Count { size: 3 },
                    emit_partial: false,
                    grace: 0,
                },
            }
        );
    }

    #[test]
    fn an_aggregate_reaches_jobs_as_json() {
        let spec = spec(
            r#"{"aggregation":"avg","window":{"type":"HOPPING","size":3,"unit":"SECONDS","hop":1,"hopUnit":"SECONDS"}}"#,
        )
        .unwrap();
        let json: serde_json::Value = serde_json::from_str(&spec.to_json()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"id":"","property":"speed","type":"TReal","aggregation":"AVG",
                "window":{"type":"HOPPING","size":3,"unit":"SECONDS","hop":1,"hopUnit":"SECONDS"},
                "emitPartial":true,"grace":0,"onError":"skip"})
        );
    }

    #[test]
    fn grace_is_refused_naming_the_field_where_nothing_closes_on_time() {
        let field = |body: &str| spec(body).unwrap_err().field;
        assert_eq!(field(r#"{"operation":"ln","grace":1}"#), "grace");
        assert_eq!(
            field(r#"{"aggregation":"AVG","window":{"type":"COUNT","size":3},"grace":1}"#),
            "grace"
        );
        let tumbling = |grace: &str| {
            format!(
                r#"{{"aggregation":"AVG","window":{{"type":"TUMBLING","size":1,"unit":"SECONDS"}},"grace":{grace}}}"#
            )
        };
        assert_eq!(field(&tumbling("-1")), "grace");
        assert_eq!(field(&tumbling("1.5")), "grace");
        assert_eq!(field(&tumbling("\"5\"")), "grace");
        let too_long = spec(&tumbling("86401")).unwrap_err();
        assert_eq!(too_long.field, "grace");
        assert!(too_long.message.contains("86400"), "{too_long}");
        let too_many = spec(&tumbling("20000")).unwrap_err();
        assert!(too_many.message.contains("10000"), "{too_many}");
        let ok = spec(&tumbling("5")).unwrap();
        let json: serde_json::Value = serde_json::from_str(&ok.to_json()).unwrap();
        assert_eq!(json["grace"], 5);
        assert_eq!(QuerySpec::from_json(&ok.to_json()).unwrap().kind, ok.kind);
        // COUNT with grace 0 is fine: nothing to refuse.
        assert!(
            spec(r#"{"aggregation":"AVG","window":{"type":"COUNT","size":3},"grace":0}"#).is_ok()
        );
    }

    #[test]
    fn the_spec_reaches_jobs_as_json() {
        let mut spec = spec(r#"{"operation":"add","arg":2}"#).unwrap();
        spec.id = "q1".into();
        let json: serde_json::Value = serde_json::from_str(&spec.to_json()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"id":"q1","property":"speed","type":"TReal","operation":"add","arg":2.0,"onError":"skip"})
        );
    }

    #[test]
    fn on_error_is_skip_by_default_fail_when_asked_and_anything_else_is_refused() {
        assert_eq!(
            spec(r#"{"operation":"ln"}"#).unwrap().on_error,
            OnError::Skip
        );
        let fail = spec(r#"{"operation":"ln","onError":"fail"}"#).unwrap();
        assert_eq!(fail.on_error, OnError::Fail);
        // It reaches jobs and isolated plugins, and comes back.
        let json: serde_json::Value = serde_json::from_str(&fail.to_json()).unwrap();
        assert_eq!(json["onError"], "fail");
        assert_eq!(
            QuerySpec::from_json(&fail.to_json()).unwrap().on_error,
            OnError::Fail
        );
        for bad in [r#""maybe""#, r#""SKIP""#, "1", "true"] {
            let e = spec(&format!(r#"{{"operation":"ln","onError":{bad}}}"#)).unwrap_err();
            assert_eq!(e.field, "onError", "{bad}");
            assert!(e.message.contains(r#""skip" or "fail""#), "{bad}: {e}");
        }
        let maybe = spec(r#"{"operation":"ln","onError":"maybe"}"#).unwrap_err();
        assert!(maybe.message.contains(r#""maybe""#), "{maybe}");
    }
}

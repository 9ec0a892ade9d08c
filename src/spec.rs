//! Queries: what a continuous query computes, and the OGC API – MF Part 4
//! registration body that describes one.

use serde::{Deserialize, Serialize};

use crate::ops::{OpError, Transform};
use crate::vocab::PropertyType;

/// The unit of a window's size or hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum TimeUnit {
    /// Seconds.
    Seconds,
    /// Minutes.
    Minutes,
    /// Hours.
    Hours,
}

/// A window over the stream, as OGC API – MF Part 4 registers it.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "UPPERCASE", deny_unknown_fields)]
pub enum Window {
    /// A result every `size` records.
    Count {
        /// Records per window.
        size: u64,
    },
    /// Fixed, epoch-aligned spans of `size` units.
    Tumbling {
        /// The span.
        size: u64,
        /// The span's unit.
        unit: TimeUnit,
    },
    /// Spans of `size` units, advancing by `hop` units.
    Hopping {
        /// The span.
        size: u64,
        /// The span's unit.
        unit: TimeUnit,
        /// The advance.
        hop: u64,
        /// The advance's unit.
        #[serde(rename = "hopUnit")]
        hop_unit: TimeUnit,
    },
}

/// A windowed aggregate: an aggregation (`AVG`, `COUNT`, …) over a window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Aggregate {
    /// The aggregation's name, upper case.
    pub aggregation: String,
    /// The window it runs over.
    pub window: Window,
}

/// What a query computes.
#[derive(Debug, Clone, PartialEq)]
pub enum QueryKind {
    /// A lifted scalar operation applied to each instant.
    Transform(Transform),
    /// An aggregation over a window of instants.
    Aggregate(Aggregate),
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
}

impl QuerySpec {
    /// A transform query on a `TReal` property.
    pub fn transform(property: impl Into<String>, transform: Transform) -> QuerySpec {
        QuerySpec {
            id: String::new(),
            property: property.into(),
            property_type: PropertyType::TReal,
            kind: QueryKind::Transform(transform),
        }
    }

    /// The name events carry as their `operation` (or `aggregation`).
    pub fn operation_name(&self) -> &str {
        match &self.kind {
            QueryKind::Transform(t) => t.op.name(),
            QueryKind::Aggregate(a) => &a.aggregation,
        }
    }

    /// The spec as the JSON object bridge jobs receive in `MFSTREAM_QUERY`.
    pub fn to_json(&self) -> String {
        let mut obj = serde_json::Map::new();
        obj.insert("id".into(), self.id.clone().into());
        obj.insert("property".into(), self.property.clone().into());
        obj.insert("type".into(), self.property_type.as_str().into());
        match &self.kind {
            QueryKind::Transform(t) => {
                obj.insert("operation".into(), t.op.name().into());
                if let Some(arg) = t.arg {
                    obj.insert("arg".into(), arg.into());
                }
            }
            QueryKind::Aggregate(a) => {
                obj.insert("aggregation".into(), a.aggregation.clone().into());
                obj.insert(
                    "window".into(),
                    serde_json::to_value(&a.window).unwrap_or_default(),
                );
            }
        }
        serde_json::Value::Object(obj).to_string()
    }
}

/// A Part 4 registration body: `{"operation":"mul","arg":1.852}` or
/// `{"aggregation":"AVG","window":{"type":"COUNT","size":10}}`.
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
    /// The engine to run on; the registry's default when absent.
    pub engine: Option<String>,
    /// The property's type; `TReal` when absent.
    #[serde(rename = "type")]
    pub property_type: Option<PropertyType>,
}

impl Registration {
    /// Parses a registration body.
    pub fn from_json(body: &str) -> Result<Registration, SpecError> {
        serde_json::from_str(body).map_err(|e| SpecError::new("body", e.to_string()))
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
        let kind = match (self.operation, self.aggregation) {
            (Some(_), Some(_)) => {
                return Err(SpecError::new(
                    "operation",
                    "give either `operation` or `aggregation`, not both",
                ));
            }
            (None, None) => {
                return Err(SpecError::new(
                    "operation",
                    "give an `operation` (a transform) or an `aggregation` with a `window`",
                ));
            }
            (Some(op), None) => {
                if self.window.is_some() {
                    return Err(SpecError::new(
                        "window",
                        "a `window` goes with an `aggregation`, not with an `operation`",
                    ));
                }
                if !property_type.is_numeric() {
                    return Err(SpecError::new(
                        "operation",
                        format!("transforms take numbers, but the property is {property_type}"),
                    ));
                }
                let transform = Transform::new(&op, self.arg).map_err(|e| {
                    let field = match e {
                        OpError::Unknown(_) => "operation",
                        _ => "arg",
                    };
                    SpecError::new(field, e.to_string())
                })?;
                QueryKind::Transform(transform)
            }
            (None, Some(aggregation)) => {
                if self.arg.is_some() {
                    return Err(SpecError::new("arg", "`arg` goes with an `operation`"));
                }
                let window = self
                    .window
                    .ok_or_else(|| SpecError::new("window", "an `aggregation` needs a `window`"))?;
                let window: Window = serde_json::from_value(window)
                    .map_err(|e| SpecError::new("window", e.to_string()))?;
                window.validate()?;
                QueryKind::Aggregate(Aggregate {
                    aggregation: aggregation.to_ascii_uppercase(),
                    window,
                })
            }
        };
        Ok(QuerySpec {
            id: String::new(),
            property: property.into(),
            property_type,
            kind,
        })
    }
}

impl Window {
    fn validate(&self) -> Result<(), SpecError> {
        let (size, hop) = match *self {
            Window::Count { size } => (size, None),
            Window::Tumbling { size, .. } => (size, None),
            Window::Hopping { size, hop, .. } => (size, Some(hop)),
        };
        if size == 0 {
            return Err(SpecError::new(
                "window",
                "`size` must be a positive integer",
            ));
        }
        if hop == Some(0) {
            return Err(SpecError::new("window", "`hop` must be a positive integer"));
        }
        Ok(())
    }
}

/// A query that cannot run, naming the field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct SpecError {
    /// The registration field at fault (`operation`, `arg`, `window`, …).
    pub field: &'static str,
    /// What is wrong, and what is allowed.
    pub message: String,
}

impl SpecError {
    /// An error on `field`.
    pub fn new(field: &'static str, message: impl Into<String>) -> SpecError {
        SpecError {
            field,
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(body: &str) -> Result<QuerySpec, SpecError> {
        Registration::from_json(body)?.into_spec("speed", PropertyType::TReal)
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
        assert_eq!(zero.unwrap_err().field, "window");
    }

    #[test]
    fn the_spec_reaches_jobs_as_json() {
        let mut spec = spec(r#"{"operation":"add","arg":2}"#).unwrap();
        spec.id = "q1".into();
        let json: serde_json::Value = serde_json::from_str(&spec.to_json()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"id":"q1","property":"speed","type":"TReal","operation":"add","arg":2.0})
        );
    }
}

//! Windowed aggregates: the aggregations (`AVG`, `COUNT_DISTINCT`, …), the
//! windows they run over (`COUNT`, `TUMBLING`, `HOPPING`) and the checks a
//! registration body passes before it becomes one.

use std::fmt;

use serde::Serialize;

use crate::spec::SpecError;
use crate::vocab::PropertyType;

/// An aggregation over the values of a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Aggregation {
    /// The number of records.
    Count,
    /// The sum of the numbers.
    Sum,
    /// The mean of the numbers.
    Avg,
    /// The least number.
    Min,
    /// The greatest number.
    Max,
    /// The number of distinct texts.
    CountDistinct,
    /// Whether any boolean is true.
    Any,
    /// Whether every boolean is true.
    All,
    /// The number of true booleans.
    CountTrue,
    /// The number of false booleans.
    CountFalse,
}

const NUMERIC: &[Aggregation] = &[
    Aggregation::Count,
    Aggregation::Sum,
    Aggregation::Avg,
    Aggregation::Min,
    Aggregation::Max,
];
const TEXT: &[Aggregation] = &[Aggregation::Count, Aggregation::CountDistinct];
const BOOLEAN: &[Aggregation] = &[
    Aggregation::Count,
    Aggregation::Any,
    Aggregation::All,
    Aggregation::CountTrue,
    Aggregation::CountFalse,
];

impl Aggregation {
    /// Every aggregation, in documentation order.
    pub const ALL: [Aggregation; 10] = [
        Aggregation::Count,
        Aggregation::Sum,
        Aggregation::Avg,
        Aggregation::Min,
        Aggregation::Max,
        Aggregation::CountDistinct,
        Aggregation::Any,
        Aggregation::All,
        Aggregation::CountTrue,
        Aggregation::CountFalse,
    ];

    /// The OGC API – MF Part 4 name: `COUNT`, `COUNT_DISTINCT`, ….
    pub fn name(self) -> &'static str {
        match self {
            Aggregation::Count => "COUNT",
            Aggregation::Sum => "SUM",
            Aggregation::Avg => "AVG",
            Aggregation::Min => "MIN",
            Aggregation::Max => "MAX",
            Aggregation::CountDistinct => "COUNT_DISTINCT",
            Aggregation::Any => "ANY",
            Aggregation::All => "ALL",
            Aggregation::CountTrue => "COUNT_TRUE",
            Aggregation::CountFalse => "COUNT_FALSE",
        }
    }

    /// The aggregation named `name`, in any case.
    pub fn parse(name: &str) -> Option<Aggregation> {
        Aggregation::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(name))
    }

    /// The aggregations defined for values of type `t`.
    pub fn allowed_for(t: PropertyType) -> &'static [Aggregation] {
        match t {
            PropertyType::TReal | PropertyType::TInteger => NUMERIC,
            PropertyType::TText => TEXT,
            PropertyType::TBoolean => BOOLEAN,
        }
    }
}

impl fmt::Display for Aggregation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Aggregation {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

mod window;

pub use self::window::{TimeUnit, Window};

/// `a, b or c`.
pub(crate) fn list<T: fmt::Display>(items: &[T]) -> String {
    let names: Vec<String> = items.iter().map(ToString::to_string).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// A windowed aggregate: an aggregation over a window.
#[derive(Debug, Clone, PartialEq)]
pub struct Aggregate {
    /// What is computed over each window.
    pub aggregation: Aggregation,
    /// The window.
    pub window: Window,
    /// Whether the windows still open when the source ends are emitted, as
    /// partial results (the default).
    pub emit_partial: bool,
}

impl Aggregate {
    /// An aggregate emitting partial results at the end of the source.
    pub fn new(aggregation: Aggregation, window: Window) -> Aggregate {
        Aggregate {
            aggregation,
            window,
            emit_partial: true,
        }
    }

    /// Checks the aggregation is defined for values of type `t` and the
    /// window is valid.
    pub fn validate(&self, t: PropertyType) -> Result<(), SpecError> {
        check_allowed(self.aggregation, t)?;
        self.window.validate()
    }
}

/// Checks `aggregation` is defined for values of type `t`.
pub(crate) fn check_allowed(aggregation: Aggregation, t: PropertyType) -> Result<(), SpecError> {
    let allowed = Aggregation::allowed_for(t);
    if allowed.contains(&aggregation) {
        return Ok(());
    }
    Err(SpecError::new(
        "aggregation",
        format!(
            "{aggregation} is not defined for {t}: {t} allows {}",
            allowed
                .iter()
                .map(|a| a.name())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    ))
}

/// Parses an aggregation's name, listing every name when it is unknown.
pub(crate) fn parse_aggregation(name: &str) -> Result<Aggregation, SpecError> {
    Aggregation::parse(name).ok_or_else(|| {
        SpecError::new(
            "aggregation",
            format!(
                "unknown aggregation {name:?}: expected one of {}",
                Aggregation::ALL
                    .iter()
                    .map(|a| a.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_in_any_case() {
        for a in Aggregation::ALL {
            assert_eq!(Aggregation::parse(a.name()), Some(a));
            assert_eq!(Aggregation::parse(&a.name().to_lowercase()), Some(a));
        }
        assert_eq!(Aggregation::parse("MEDIAN"), None);
        assert_eq!(Aggregation::CountDistinct.to_string(), "COUNT_DISTINCT");
    }

    #[test]
    fn each_type_allows_its_aggregations_and_names_them_when_refusing() {
        assert!(check_allowed(Aggregation::Avg, PropertyType::TInteger).is_ok());
        assert!(check_allowed(Aggregation::Any, PropertyType::TBoolean).is_ok());
        let e = check_allowed(Aggregation::Avg, PropertyType::TText).unwrap_err();
        assert_eq!(e.field, "aggregation");
        assert!(
            e.message.contains("TText allows COUNT, COUNT_DISTINCT"),
            "{e}"
        );
    }
}

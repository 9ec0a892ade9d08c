//! The aggregations a window computes (`AVG`, `COUNT_DISTINCT`, …), by
//! their OGC API – MF Part 4 names, and the property types each is defined
//! for.

use std::fmt;

use serde::Serialize;

use super::PropertyType;

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
/// Positions: `COUNT` here; the measures of a window of positions
/// (`EXTENT`, `LENGTH`, …) are the position module's.
const POSITION: &[Aggregation] = &[Aggregation::Count];
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
            PropertyType::TGeogPoint | PropertyType::TGeomPoint => POSITION,
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

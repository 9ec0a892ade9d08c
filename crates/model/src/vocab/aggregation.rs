//! The aggregations a window computes (`AVG`, `COUNT_DISTINCT`, …), by
//! their OGC API – MF Part 4 names, and the property types each is defined
//! for.

use std::fmt;

use serde::Serialize;

use super::PropertyType;

/// An aggregation over the values of a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
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
    /// Positions: the bounding box `[minx, miny, maxx, maxy]`.
    Extent,
    /// Positions: the time-weighted centroid (MEOS `twCentroid`).
    Centroid,
    /// Positions: the length travelled between the window's positions.
    Length,
    /// Positions: that length over the time from the first to the last.
    AvgSpeed,
    /// Positions: the fastest segment's speed.
    MaxSpeed,
}

const NUMERIC: &[Aggregation] = &[
    Aggregation::Count,
    Aggregation::Sum,
    Aggregation::Avg,
    Aggregation::Min,
    Aggregation::Max,
];
/// Positions (their measures, such as `speed`, are numbers).
const POSITION: &[Aggregation] = &[
    Aggregation::Count,
    Aggregation::Extent,
    Aggregation::Centroid,
    Aggregation::Length,
    Aggregation::AvgSpeed,
    Aggregation::MaxSpeed,
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
    pub const ALL: [Aggregation; 15] = [
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
        Aggregation::Extent,
        Aggregation::Centroid,
        Aggregation::Length,
        Aggregation::AvgSpeed,
        Aggregation::MaxSpeed,
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
            Aggregation::Extent => "EXTENT",
            Aggregation::Centroid => "CENTROID",
            Aggregation::Length => "LENGTH",
            Aggregation::AvgSpeed => "AVG_SPEED",
            Aggregation::MaxSpeed => "MAX_SPEED",
        }
    }

    /// The aggregation named `name`, in any case.
    pub fn parse(name: &str) -> Option<Aggregation> {
        Aggregation::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(name))
    }

    /// The aggregate over positions it is, if any (`COUNT` counts any
    /// value: it is not one).
    pub fn of_positions(self) -> Option<crate::geo::PositionAggregate> {
        use crate::geo::PositionAggregate as P;
        Some(match self {
            Aggregation::Extent => P::Extent,
            Aggregation::Centroid => P::Centroid,
            Aggregation::Length => P::Length,
            Aggregation::AvgSpeed => P::AvgSpeed,
            Aggregation::MaxSpeed => P::MaxSpeed,
            _ => return None,
        })
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

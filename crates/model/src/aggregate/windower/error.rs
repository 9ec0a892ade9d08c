//! Why a windower fails its query: each cause a variant, its message naming
//! the record or the window.

use crate::vocab::{Aggregation, Value};

/// Why a [`Windower`](super::Windower) fails its query. The query's
/// `failed` status carries the message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum WindowError {
    /// A record whose datetime does not parse (time windows read it).
    #[error(
        "record at {datetime:?} (value {value}): the datetime is not ISO-8601, such as \
         2026-01-01T00:00:00Z"
    )]
    Datetime {
        /// The datetime, verbatim.
        datetime: String,
        /// The record's value.
        value: Value,
    },
    /// A record whose value the aggregation does not take.
    #[error("record at {datetime} has value {value}, but {aggregation} here takes {wanted}")]
    WrongType {
        /// The record's datetime.
        datetime: String,
        /// Its value.
        value: Value,
        /// The aggregation.
        aggregation: Aggregation,
        /// What it takes: `numbers`, `texts` or `booleans`.
        wanted: &'static str,
    },
    /// A window whose aggregate is not finite, under `onError: fail`.
    #[error("the {aggregation} of the window from {window_start} to {window_end} overflows")]
    Overflow {
        /// The aggregation.
        aggregation: Aggregation,
        /// The datetime of the window's first record.
        window_start: String,
        /// The datetime of its last record.
        window_end: String,
    },
    /// A window of positions with one position, so no segment to measure
    /// (`LENGTH`, `AVG_SPEED`, `MAX_SPEED`), under `onError: fail`.
    #[error(
        "the window from {window_start} to {window_end} has no {aggregation}: it holds one \
         position, no segment"
    )]
    NoSegment {
        /// The aggregation.
        aggregation: Aggregation,
        /// The datetime of the window's first record.
        window_start: String,
        /// The datetime of its last record.
        window_end: String,
    },
    /// The query's state is over its budget (`--max-query-state`).
    #[error("{0}")]
    OverBudget(String),
}

//! Windowed aggregation, for every engine: an [`Aggregate`] (an
//! [`Aggregation`] over a [`Window`]), checked when a query is registered,
//! and the [`Windower`] that computes it over a stream of instants in event
//! time.
//!
//! - `window` parses and checks the `window` object of a registration;
//! - `windower` turns instants into window events (the semantics are on
//!   [`Windower`]);
//! - `acc` is the partial aggregate a window, or a bucket of one, keeps
//!   instead of its records.
//!
//! The aggregations themselves ([`Aggregation`]) are
//! vocabulary, with instants and events: events carry their names.

use std::fmt;

use crate::spec_error::SpecError;
use crate::vocab::PropertyType;

mod acc;
mod window;
mod windower;

pub use self::window::{MAX_WINDOW_BUCKETS, TimeUnit, Window};
pub use self::windower::Windower;
pub use crate::vocab::Aggregation;

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

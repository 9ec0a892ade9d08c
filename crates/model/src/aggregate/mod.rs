//! Windowed aggregation, for every engine: an [`Aggregate`] (an
//! [`Aggregation`] over a [`Window`]), checked when a query is registered,
//! and the [`Windower`] that computes it over a stream of instants in event
//! time.
//!
//! - `window` parses and checks the `window` object of a registration;
//! - `windower` turns instants into window events (the semantics are on
//!   [`Windower`]);
//! - `acc` is the partial aggregate a window, or a bucket of one, keeps
//!   instead of its records;
//! - `resume` is where a time window's results resume after a restart of
//!   a durable server, and how that point is kept.
//!
//! The aggregations themselves ([`Aggregation`]) are
//! vocabulary, with instants and events: events carry their names.

use std::fmt;

use crate::spec_error::{SpecError, SpecErrorKind};
use crate::vocab::{Aggregation, PropertyType};

mod acc;
mod grid;
pub mod resume;
mod window;
mod windower;

pub use self::grid::Grid;
pub use self::window::{MAX_WINDOW_BUCKETS, MAX_WINDOWS_PER_RECORD, TimeUnit, Window};
pub use self::windower::{WindowError, Windower};

/// `a, b or c`.
pub fn list<T: fmt::Display>(items: &[T]) -> String {
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
    /// Allowed lateness, in seconds: a time window `[start, end)` closes
    /// once event time (the latest record's datetime, or the wall clock of
    /// a live query) minus the grace reaches `end`. 0 by default; always 0
    /// for a `COUNT` window, which does not close on time.
    pub grace: u64,
}

impl Aggregate {
    /// An aggregate emitting partial results at the end of the source.
    pub fn new(aggregation: Aggregation, window: Window) -> Aggregate {
        Aggregate {
            aggregation,
            window,
            emit_partial: true,
            grace: 0,
        }
    }

    /// The same aggregate with `grace` seconds of allowed lateness.
    pub fn with_grace(mut self, grace: u64) -> Aggregate {
        self.grace = grace;
        self
    }

    /// Checks the window ([`Window::validate`]) and the grace: none on a
    /// `COUNT` window; at most [`MAX_GRACE`] seconds; and the buckets a
    /// window keeps while records may still come for it
    /// (`(span + grace) / gcd(span, hop)`) at most [`MAX_WINDOW_BUCKETS`].
    pub fn validate(&self) -> Result<(), SpecError> {
        self.window.validate()?;
        if self.grace == 0 {
            return Ok(());
        }
        let Some(grid) = self.window.grid() else {
            return Err(SpecError::new(
                "grace",
                SpecErrorKind::Conflict,
                "a COUNT window does not close on time: `grace` goes with a TUMBLING or \
                 HOPPING window",
            ));
        };
        if self.grace > MAX_GRACE {
            return Err(SpecError::new(
                "grace",
                SpecErrorKind::OutOfRange,
                format!(
                    "at most {MAX_GRACE} seconds (24 hours) are allowed, got {}",
                    self.grace
                ),
            ));
        }
        // Validated above: the span and the hop fit a grid unclamped.
        let buckets = (grid.span() as u64 + self.grace).div_ceil(grid.grain() as u64);
        if buckets > MAX_WINDOW_BUCKETS {
            return Err(SpecError::new(
                "grace",
                SpecErrorKind::OutOfRange,
                format!(
                    "with a grace of {} seconds the window keeps up to {buckets} buckets (span \
                     plus grace over gcd(span, hop), in seconds): at most {MAX_WINDOW_BUCKETS} \
                     are allowed; use a shorter grace or a longer hop",
                    self.grace
                ),
            ));
        }
        Ok(())
    }
}

/// The longest grace (allowed lateness) a query may ask for: 24 hours.
pub const MAX_GRACE: u64 = 86_400;

/// Checks `aggregation` is defined for values of type `t`.
pub(crate) fn check_allowed(aggregation: Aggregation, t: PropertyType) -> Result<(), SpecError> {
    let allowed = Aggregation::allowed_for(t);
    if allowed.contains(&aggregation) {
        return Ok(());
    }
    Err(SpecError::new(
        "aggregation",
        SpecErrorKind::Unfit,
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
            SpecErrorKind::Unknown,
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

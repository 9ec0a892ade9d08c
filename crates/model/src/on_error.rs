//! A query's policy for a record or window with no (finite) result: the
//! registration body's `onError`. A leaf, so that the windower, which
//! applies it, need not import the spec, which imports the windows.

use crate::spec_error::{SpecError, SpecErrorKind};

/// What a query does with a record whose result is undefined (outside the
/// operation's domain, see [`Op::domain`](crate::ops::Op::domain)) or not finite,
/// and with a window whose aggregate is not finite: the registration body's
/// `onError`, the same on every engine kind.
///
/// After Kafka Streams' processing exception handler (`CONTINUE`, `FAIL`)
/// and Vector's `drop_on_error`: by default one bad value costs one result,
/// not the query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
// Exhaustive on purpose: every engine and the server match it whole,
// so that a new kind is handled everywhere (the compiler lists where).
pub enum OnError {
    /// The record (or window) gives no result; it is counted in the query's
    /// `skipped` and in the next event's, and the query keeps running.
    #[default]
    Skip,
    /// The query fails, its reason naming the record's datetime (or the
    /// window).
    Fail,
}

impl OnError {
    /// The accepted values, as a body spells them.
    pub const NAMES: [&'static str; 2] = ["skip", "fail"];

    /// The policy's name: `skip` or `fail`.
    pub fn name(self) -> &'static str {
        match self {
            OnError::Skip => "skip",
            OnError::Fail => "fail",
        }
    }

    /// Reads a policy by name (`skip`, `fail`); an error names the field
    /// (`onError`) and the accepted values.
    pub fn from_name(name: &str) -> Result<OnError, SpecError> {
        match name {
            "skip" => Ok(OnError::Skip),
            "fail" => Ok(OnError::Fail),
            other => Err(SpecError::new(
                "onError",
                SpecErrorKind::Unknown,
                format!("expected \"skip\" or \"fail\", got {other:?}"),
            )),
        }
    }
}

impl std::fmt::Display for OnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for OnError {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<OnError, SpecError> {
        OnError::from_name(s)
    }
}

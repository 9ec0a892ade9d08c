//! The error of a query that cannot run, naming the registration field at
//! fault. A leaf: every module that checks part of a query (the spec, its
//! window, its aggregation) returns it without depending on the others.

/// A query that cannot run: the field at fault, what kind of fault, and
/// the message (what is wrong, and what is allowed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct SpecError {
    /// The registration field at fault (`operation`, `arg`, `window`, …).
    pub field: &'static str,
    /// What kind of fault.
    pub kind: SpecErrorKind,
    /// What is wrong, and what is allowed.
    pub message: String,
}

/// What kind of fault a [`SpecError`] is, for a caller that reacts to
/// some (a control plane that fills in a missing field, say); the message
/// says the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SpecErrorKind {
    /// Not JSON, or a field of the wrong JSON type.
    Malformed,
    /// A field the query needs is absent (or one needs another).
    Missing,
    /// A name not in its list: an operation, an aggregation, a window
    /// type, a unit, a key a window does not have, an `onError` policy.
    Unknown,
    /// A number outside its bounds: a size of 0, a window too long, too
    /// many buckets or windows per record, a grace too long, an argument
    /// an operation cannot take.
    OutOfRange,
    /// Fields that do not go together (`arg` without an `operation`,
    /// `grace` with a COUNT window, …).
    Conflict,
    /// Valid in itself, but not for the property's type.
    Unfit,
}

impl SpecError {
    /// An error of `kind` on `field`.
    pub fn new(field: &'static str, kind: SpecErrorKind, message: impl Into<String>) -> SpecError {
        SpecError {
            field,
            kind,
            message: message.into(),
        }
    }
}

//! The error of a query that cannot run, naming the registration field at
//! fault. A leaf: every module that checks part of a query (the spec, its
//! window, its aggregation) returns it without depending on the others.

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

//! An operation with its argument, as the native job and the plugins
//! validate and apply it, in their messages.

use std::fmt;

use crate::{ArgError, Kind, NoResult, Op};

/// A validated operation and its argument, as the native job and the
/// plugins apply it: their messages, on the catalogue's rules.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transform {
    /// The operation.
    pub op: Op,
    /// Its argument; 0 when it takes none.
    pub arg: f64,
}

impl Transform {
    /// Validates a job's arguments: the name of an operation on numbers,
    /// exactly as the host writes it (lowercase), and, exactly when the
    /// operation takes one, a finite argument (non-zero for `div`).
    pub fn from_args(op: &str, arg: Option<&str>) -> Result<Transform, TransformError> {
        let error = |kind| TransformError {
            op: op.to_owned(),
            kind,
        };
        let Some(found) = Op::find(op, Kind::Number) else {
            return Err(error(TransformErrorKind::Unknown));
        };
        let number = match (found.takes_arg(), arg) {
            (false, Some(_)) => return Err(error(TransformErrorKind::Arg(ArgError::Needless))),
            (true, Some(text)) => Some(
                text.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| error(TransformErrorKind::NotANumber(text.to_owned())))?,
            ),
            (_, None) => None,
        };
        let arg = found
            .check_arg(number)
            .map_err(|e| error(TransformErrorKind::Arg(e)))?;
        Ok(Transform { op: found, arg })
    }

    /// Applies the operation to one value; the error says why there is no
    /// result, after the operation's name.
    #[inline]
    pub fn apply(self, x: f64) -> Result<f64, &'static str> {
        self.op.apply(x, self.arg).map_err(|e| match e {
            NoResult::Outside(domain) => domain.why_refused(),
            NoResult::NotFinite => "has no finite result",
        })
    }

    /// The operation's name, for messages.
    pub fn name(self) -> &'static str {
        self.op.name()
    }
}

/// Why a job's arguments are not a [`Transform`]: the operation as given,
/// and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransformError {
    op: String,
    kind: TransformErrorKind,
}

/// What is wrong with a job's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransformErrorKind {
    /// No operation on numbers has that name.
    Unknown,
    /// The argument (as given) is not a finite number.
    NotANumber(String),
    /// The argument does not fit the operation.
    Arg(ArgError),
}

impl TransformError {
    /// The operation, as given.
    pub fn op(&self) -> &str {
        &self.op
    }

    /// What is wrong.
    pub fn kind(&self) -> &TransformErrorKind {
        &self.kind
    }
}

impl fmt::Display for TransformError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = &self.op;
        match &self.kind {
            TransformErrorKind::Unknown => write!(
                f,
                "unknown operation {op:?}: supported operations are {}",
                Op::catalogue_of(Kind::Number)
            ),
            TransformErrorKind::NotANumber(text) => {
                write!(f, "operation {op} needs a finite number, got {text:?}")
            }
            TransformErrorKind::Arg(ArgError::Needless) => {
                write!(f, "operation {op} takes no argument")
            }
            TransformErrorKind::Arg(ArgError::Missing) => {
                write!(f, "operation {op} needs a scalar argument: {op} <x>")
            }
            TransformErrorKind::Arg(ArgError::NotFinite) => {
                write!(f, "operation {op} needs a finite number")
            }
            TransformErrorKind::Arg(ArgError::Zero) => {
                write!(f, "operation {op} by zero is undefined")
            }
        }
    }
}

impl std::error::Error for TransformError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked_against_the_catalogue() {
        let mul = Transform::from_args("mul", Some("1.852")).unwrap();
        assert_eq!((mul.op, mul.arg), (Op::Mul, 1.852));
        assert_eq!(Transform::from_args("ln", None).unwrap().op, Op::Ln);
        let err = |op, arg| Transform::from_args(op, arg).unwrap_err().to_string();
        assert_eq!(
            err("sqrt", None),
            format!(
                "unknown operation \"sqrt\": supported operations are {}",
                Op::catalogue_of(Kind::Number)
            )
        );
        assert_eq!(
            err("mul", None),
            "operation mul needs a scalar argument: mul <x>"
        );
        assert_eq!(err("ln", Some("1")), "operation ln takes no argument");
        assert_eq!(err("div", Some("0")), "operation div by zero is undefined");
        assert_eq!(
            err("add", Some("nan")),
            "operation add needs a finite number, got \"nan\""
        );
        assert_eq!(
            err("add", Some("x")),
            "operation add needs a finite number, got \"x\""
        );
        assert_eq!(Op::Div.check_arg(Some(-0.0)), Err(ArgError::Zero));
        assert_eq!(Op::Mul.check_arg(Some(0.0)), Ok(0.0));
        assert_eq!(Op::Ln.check_arg(None), Ok(0.0));
        // Jobs get the names as the host writes them: lowercase.
        assert!(err("MUL", Some("2")).starts_with("unknown operation"));
        // They compute numbers: an operation on positions is none of theirs.
        assert!(err("speed", None).starts_with("unknown operation \"speed\""));
    }

    #[test]
    fn values_outside_the_domain_are_errors_not_nan() {
        let t = |op, arg| Transform::from_args(op, arg).unwrap();
        assert_eq!(
            t("ln", None).apply(0.0),
            Err("is defined for positive values only")
        );
        assert!(t("log10", None).apply(-1.0).is_err());
        assert_eq!(t("exp", None).apply(1000.0), Err("has no finite result"));
        assert!(t("mul", Some("2")).apply(f64::NAN).is_err());
        assert_eq!(t("mul", Some("1.852")).apply(10.0), Ok(18.52));
        assert_eq!(t("ceil", None).apply(1.2), Ok(2.0));
    }
}

//! The lifted operations: the catalogue's [`Op`] (from the `mfstream-ops`
//! crate, `crates/ops`, the one list every engine, spec validation, the
//! bridge jobs' tables and the book's table (`docs/src/cli.md`) are read or generated from), and
//! the host's validated [`Transform`] with its typed errors.

use std::fmt;

pub use mfstream_ops::{Arg, Domain, Kind, Op};
use mfstream_ops::{ArgError, NoResult};

use crate::vocab::PropertyType;

/// The kind of value a property of type `t` holds, for the catalogue's
/// "applies to" ([`Op::applies_to`]); `None` for a kind no operation
/// takes (text, booleans).
pub(crate) fn kind_of(t: PropertyType) -> Option<Kind> {
    t.is_numeric().then_some(Kind::Number)
}

/// A validated transform: an operation and, where it takes one, its argument.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transform {
    /// The operation.
    pub op: Op,
    /// Its argument; `Some` exactly when the operation takes one.
    pub arg: Option<f64>,
}

impl Transform {
    /// Validates an operation name and argument against the catalogue.
    ///
    /// Rejects an unknown operation, one on positions (`speed`: a
    /// transform takes numbers), a missing or needless argument, a
    /// non-finite argument and `div` by zero.
    pub fn new(op: &str, arg: Option<f64>) -> Result<Transform, OpError> {
        let op = Op::from_name(op).ok_or_else(|| OpError::Unknown(op.to_owned()))?;
        if !op.applies_to(Kind::Number) {
            return Err(OpError::NotOnNumbers(op));
        }
        op.check_arg(arg).map_err(|e| match e {
            ArgError::Missing => OpError::MissingArg(op),
            ArgError::Needless => OpError::NeedlessArg(op),
            ArgError::NotFinite => OpError::NonFiniteArg(op),
            ArgError::Zero => OpError::DivByZero,
        })?;
        Ok(Transform { op, arg })
    }

    /// Whether the transform applies to the values of a property of type
    /// `t` (the catalogue's kinds, [`Op::applies_to`]).
    pub fn applies_to(&self, t: PropertyType) -> bool {
        kind_of(t).is_some_and(|kind| self.op.applies_to(kind))
    }

    /// Applies the transform to one value.
    ///
    /// A result that is not a finite number is a domain error: `ln` and
    /// `log10` of zero or a negative, or an overflow (`exp 1000`).
    #[inline]
    pub fn apply(&self, x: f64) -> Result<f64, DomainError> {
        self.op
            .apply(x, self.arg.unwrap_or(0.0))
            .map_err(|e| DomainError {
                op: self.op,
                input: x,
                why: match e {
                    NoResult::Outside(domain) => domain.why_refused(),
                    NoResult::NotFinite => "overflows to infinity",
                },
            })
    }

    /// The command-line words a bridge job receives: the operation and, where
    /// it takes one, its argument (`mul 1.852`).
    pub fn job_args(&self) -> Vec<String> {
        let mut args = vec![self.op.name().to_owned()];
        if let Some(arg) = self.arg {
            args.push(format_arg(arg));
        }
        args
    }
}

impl fmt::Display for Transform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.arg {
            Some(arg) => write!(f, "{} {}", self.op, format_arg(arg)),
            None => write!(f, "{}", self.op),
        }
    }
}

/// Formats an argument as the shortest decimal that parses back to it.
fn format_arg(x: f64) -> String {
    // `Display` for f64 is the shortest round-trip form (`2`, `1.852`).
    format!("{x}")
}

/// Why a transform was rejected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum OpError {
    /// The name is not in the catalogue.
    #[error("unknown operation {0:?}: supported operations are {ops}", ops = numbers())]
    Unknown(String),
    /// The operation is one on positions (`speed`), given for numbers.
    #[error(
        "operation {0} applies to positions (a feature's tgsequence, or type TGeogPoint or \
         TGeomPoint), not numbers: supported operations on numbers are {ops}",
        ops = numbers()
    )]
    NotOnNumbers(Op),
    /// The operation takes an argument and none was given.
    #[error("operation {0} needs a scalar argument (`arg`): supported operations are {ops}", ops = numbers())]
    MissingArg(Op),
    /// The operation takes no argument and one was given.
    #[error("operation {0} takes no argument, but `arg` was given: supported operations are {ops}", ops = numbers())]
    NeedlessArg(Op),
    /// The argument is NaN or infinite.
    #[error("operation {0} needs a finite argument")]
    NonFiniteArg(Op),
    /// `div` by zero.
    #[error("operation div by zero is undefined: give a non-zero `arg`")]
    DivByZero,
}

/// The operations on numbers as one line, for messages.
fn numbers() -> String {
    Op::catalogue_of(Kind::Number)
}

/// A value outside an operation's domain, met at run time.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{op} {why}, got {}", crate::json::number(*input))]
pub struct DomainError {
    /// The operation.
    pub op: Op,
    /// The offending input.
    pub input: f64,
    /// Why it is out of the domain.
    pub why: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(op: &str, arg: Option<f64>, x: f64) -> f64 {
        Transform::new(op, arg).unwrap().apply(x).unwrap()
    }

    #[test]
    fn every_operation_matches_its_reference_value() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(apply("ln", None, std::f64::consts::E), 1.0));
        assert!(close(apply("exp", None, 1.0), std::f64::consts::E));
        assert!(close(apply("log10", None, 1000.0), 3.0));
        assert_eq!(apply("ceil", None, 1.2), 2.0);
        assert_eq!(apply("floor", None, -1.2), -2.0);
        assert_eq!(apply("abs", None, -3.5), 3.5);
        assert!(close(apply("degrees", None, std::f64::consts::PI), 180.0));
        assert!(close(apply("radians", None, 180.0), std::f64::consts::PI));
        assert!(close(apply("sin", None, std::f64::consts::FRAC_PI_2), 1.0));
        assert!(close(apply("cos", None, 0.0), 1.0));
        assert!(close(apply("tan", None, std::f64::consts::FRAC_PI_4), 1.0));
        assert_eq!(apply("add", Some(2.0), 3.0), 5.0);
        assert_eq!(apply("sub", Some(2.0), 3.0), 1.0);
        assert_eq!(apply("mul", Some(1.852), 10.0), 18.52);
        assert_eq!(apply("div", Some(4.0), 10.0), 2.5);
    }

    #[test]
    fn bad_transforms_are_rejected_with_the_catalogue() {
        let unknown = Transform::new("sqrt", None).unwrap_err().to_string();
        assert!(
            unknown.contains("\"sqrt\"") && unknown.contains("ln, exp"),
            "{unknown}"
        );
        assert_eq!(
            Transform::new("mul", None).unwrap_err(),
            OpError::MissingArg(Op::Mul)
        );
        assert_eq!(
            Transform::new("ln", Some(1.0)).unwrap_err(),
            OpError::NeedlessArg(Op::Ln)
        );
        assert_eq!(
            Transform::new("div", Some(0.0)).unwrap_err(),
            OpError::DivByZero
        );
        assert_eq!(
            Transform::new("add", Some(f64::NAN)).unwrap_err(),
            OpError::NonFiniteArg(Op::Add)
        );
    }

    #[test]
    fn operation_names_are_read_in_any_case_and_written_in_lowercase() {
        for name in ["mul", "MUL", "Mul"] {
            let transform = Transform::new(name, Some(2.0)).unwrap();
            assert_eq!(transform.op, Op::Mul);
            assert_eq!(transform.job_args(), ["mul", "2"]);
        }
        assert_eq!(Op::from_name("LOG10"), Some(Op::Log10));
        assert!(Transform::new("mull", None).is_err());
    }

    /// The catalogue's operations on positions are no transforms: the
    /// message says where they apply, and lists the numbers' operations.
    #[test]
    fn an_operation_on_positions_is_no_transform() {
        for op in Op::on(Kind::Position) {
            let e = Transform::new(&op.name().to_uppercase(), None).unwrap_err();
            assert_eq!(e, OpError::NotOnNumbers(op));
            let text = e.to_string();
            assert!(text.contains("applies to positions"), "{text}");
            assert!(text.ends_with(&Op::catalogue_of(Kind::Number)), "{text}");
        }
        let unknown = Transform::new("mull", None).unwrap_err().to_string();
        assert!(!unknown.contains("speed"), "{unknown}");
    }

    #[test]
    fn domain_errors_never_yield_nan_or_infinity() {
        let ln = Transform::new("ln", None).unwrap();
        assert!(ln.apply(0.0).is_err());
        assert!(ln.apply(-1.0).is_err());
        let log10 = Transform::new("log10", None).unwrap();
        assert!(log10.apply(-5.0).is_err());
        let exp = Transform::new("exp", None).unwrap();
        assert_eq!(exp.apply(1000.0).unwrap_err().why, "overflows to infinity");
    }

    #[test]
    fn the_catalogue_states_a_domain_for_every_operation_and_apply_keeps_to_it() {
        for op in Op::on(Kind::Number) {
            assert!(!op.domain().to_string().is_empty(), "{op}");
        }
        let t = |op: &str, arg| Transform::new(op, arg).unwrap();
        // x > 0.
        for op in ["ln", "log10"] {
            assert!(t(op, None).apply(0.0).is_err() && t(op, None).apply(-1.0).is_err());
            assert!(t(op, None).apply(f64::MIN_POSITIVE).is_ok());
        }
        assert!(t("exp", None).apply(709.78).is_ok());
        assert!(t("exp", None).apply(709.79).is_err());
        // Every finite x, for the trigonometric functions.
        assert!(t("sin", None).apply(f64::INFINITY).is_err());
        assert!(t("tan", None).apply(f64::MAX).is_ok());
        // Every x; the result must be finite.
        assert!(t("mul", Some(10.0)).apply(f64::MAX).is_err());
        assert!(t("div", Some(1e-300)).apply(1e10).is_err());
        assert!(t("degrees", None).apply(f64::MAX).is_err());
        for op in ["ceil", "floor", "abs", "radians"] {
            assert!(t(op, None).apply(f64::MAX).is_ok(), "{op}");
            assert!(t(op, None).apply(-f64::MAX).is_ok(), "{op}");
        }
    }

    #[test]
    fn domain_errors_write_the_input_as_events_do() {
        // `-0` as `0`, and a large input without its hundreds of digits.
        let ln = Transform::new("ln", None).unwrap();
        let e = ln.apply(-0.0).unwrap_err().to_string();
        assert!(e.ends_with("got 0"), "{e}");
        let exp = Transform::new("exp", None).unwrap();
        let e = exp.apply(1e300).unwrap_err().to_string();
        assert!(e.ends_with("got 1e+300"), "{e}");
    }

    /// Spec validation reads the catalogue's kinds: every transform
    /// applies to numbers, and none to text or booleans.
    #[test]
    fn transforms_apply_to_the_kinds_the_catalogue_says() {
        for op in Op::on(Kind::Number) {
            let t = Transform::new(op.name(), op.takes_arg().then_some(2.0)).unwrap();
            assert_eq!(
                t.applies_to(PropertyType::TReal),
                op.applies_to(Kind::Number),
                "{op}"
            );
            assert!(t.applies_to(PropertyType::TInteger), "{op}");
            assert!(!t.applies_to(PropertyType::TText), "{op}");
            assert!(!t.applies_to(PropertyType::TBoolean), "{op}");
        }
        assert_eq!(kind_of(PropertyType::TText), None);
    }

    #[test]
    fn job_args_append_the_argument_in_shortest_form() {
        assert_eq!(
            Transform::new("mul", Some(1.852)).unwrap().job_args(),
            ["mul", "1.852"]
        );
        assert_eq!(
            Transform::new("add", Some(2.0)).unwrap().job_args(),
            ["add", "2"]
        );
        assert_eq!(Transform::new("ln", None).unwrap().job_args(), ["ln"]);
    }
}

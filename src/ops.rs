//! The lifted operations catalogue: the one list of scalar operations that
//! every engine and the command line validate against.

use std::fmt;

/// A lifted scalar operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Op {
    /// Natural logarithm; positive values only.
    Ln,
    /// e to the power of the value.
    Exp,
    /// Base-10 logarithm; positive values only.
    Log10,
    /// Smallest integer not below the value.
    Ceil,
    /// Largest integer not above the value.
    Floor,
    /// Absolute value.
    Abs,
    /// Radians to degrees.
    Degrees,
    /// Degrees to radians.
    Radians,
    /// Sine of radians.
    Sin,
    /// Cosine of radians.
    Cos,
    /// Tangent of radians.
    Tan,
    /// Adds the argument.
    Add,
    /// Subtracts the argument.
    Sub,
    /// Multiplies by the argument.
    Mul,
    /// Divides by the argument (never zero).
    Div,
}

impl Op {
    /// Every operation, in catalogue order.
    pub const ALL: [Op; 15] = [
        Op::Ln,
        Op::Exp,
        Op::Log10,
        Op::Ceil,
        Op::Floor,
        Op::Abs,
        Op::Degrees,
        Op::Radians,
        Op::Sin,
        Op::Cos,
        Op::Tan,
        Op::Add,
        Op::Sub,
        Op::Mul,
        Op::Div,
    ];

    /// The operation's name, as queries and bridge jobs spell it.
    pub fn name(self) -> &'static str {
        match self {
            Op::Ln => "ln",
            Op::Exp => "exp",
            Op::Log10 => "log10",
            Op::Ceil => "ceil",
            Op::Floor => "floor",
            Op::Abs => "abs",
            Op::Degrees => "degrees",
            Op::Radians => "radians",
            Op::Sin => "sin",
            Op::Cos => "cos",
            Op::Tan => "tan",
            Op::Add => "add",
            Op::Sub => "sub",
            Op::Mul => "mul",
            Op::Div => "div",
        }
    }

    /// The operation's domain, as the catalogue states it: the inputs with a
    /// result. Outside it, or where the result is not finite (an overflow:
    /// `exp` of more than about 709.78, `mul` of two large numbers), a
    /// record has no result, and the query's `onError` says what follows
    /// ([`OnError`](crate::OnError)). Every engine kind uses this one list:
    /// the local engine through [`Transform::apply`], and the host's guard
    /// before a version-1 bridge job or plugin that would die on such an
    /// input.
    pub fn domain(self) -> &'static str {
        match self {
            Op::Ln | Op::Log10 => "x > 0",
            Op::Exp => "x ≤ 709.78 (the result overflows past it)",
            Op::Div => "every x (the argument is never 0); the result must be finite",
            Op::Mul | Op::Add | Op::Sub => "every x; the result must be finite",
            Op::Degrees => "every x; the result must be finite",
            Op::Ceil | Op::Floor | Op::Abs | Op::Radians | Op::Sin | Op::Cos | Op::Tan => "every x",
        }
    }

    /// Whether the operation takes one scalar argument.
    pub fn takes_arg(self) -> bool {
        matches!(self, Op::Add | Op::Sub | Op::Mul | Op::Div)
    }

    /// Looks an operation up by name, in any case (`mul`, `MUL`), as
    /// aggregations are; [`Op::name`] gives it back in lowercase.
    pub fn from_name(name: &str) -> Result<Op, OpError> {
        Op::ALL
            .into_iter()
            .find(|op| op.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| OpError::Unknown(name.to_owned()))
    }

    /// The catalogue as one line: `ln, exp, …, add <x>, …`.
    pub fn catalogue() -> String {
        Op::ALL
            .iter()
            .map(|op| {
                if op.takes_arg() {
                    format!("{} <x>", op.name())
                } else {
                    op.name().to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
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
    /// Rejects an unknown operation, a missing or needless argument, a
    /// non-finite argument and `div` by zero.
    pub fn new(op: &str, arg: Option<f64>) -> Result<Transform, OpError> {
        let op = Op::from_name(op)?;
        match (op.takes_arg(), arg) {
            (true, None) => Err(OpError::MissingArg(op)),
            (false, Some(_)) => Err(OpError::NeedlessArg(op)),
            (true, Some(x)) if !x.is_finite() => Err(OpError::NonFiniteArg(op)),
            (true, Some(x)) if op == Op::Div && x == 0.0 => Err(OpError::DivByZero),
            _ => Ok(Transform { op, arg }),
        }
    }

    /// Applies the transform to one value.
    ///
    /// A result that is not a finite number is a domain error: `ln` and
    /// `log10` of zero or a negative, or an overflow (`exp 1000`).
    #[inline]
    pub fn apply(&self, x: f64) -> Result<f64, DomainError> {
        let arg = self.arg.unwrap_or(0.0);
        let y = match self.op {
            Op::Ln | Op::Log10 if x <= 0.0 => {
                return Err(DomainError {
                    op: self.op,
                    input: x,
                    why: "is defined for positive values only",
                });
            }
            Op::Ln => x.ln(),
            Op::Exp => x.exp(),
            Op::Log10 => x.log10(),
            Op::Ceil => x.ceil(),
            Op::Floor => x.floor(),
            Op::Abs => x.abs(),
            Op::Degrees => x.to_degrees(),
            Op::Radians => x.to_radians(),
            Op::Sin => x.sin(),
            Op::Cos => x.cos(),
            Op::Tan => x.tan(),
            Op::Add => x + arg,
            Op::Sub => x - arg,
            Op::Mul => x * arg,
            Op::Div => x / arg,
        };
        if y.is_finite() {
            Ok(y)
        } else {
            Err(DomainError {
                op: self.op,
                input: x,
                why: "overflows to infinity",
            })
        }
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
    #[error("unknown operation {0:?}: supported operations are {ops}", ops = Op::catalogue())]
    Unknown(String),
    /// The operation takes an argument and none was given.
    #[error("operation {0} needs a scalar argument (`arg`): supported operations are {ops}", ops = Op::catalogue())]
    MissingArg(Op),
    /// The operation takes no argument and one was given.
    #[error("operation {0} takes no argument, but `arg` was given: supported operations are {ops}", ops = Op::catalogue())]
    NeedlessArg(Op),
    /// The argument is NaN or infinite.
    #[error("operation {0} needs a finite argument")]
    NonFiniteArg(Op),
    /// `div` by zero.
    #[error("operation div by zero is undefined: give a non-zero `arg`")]
    DivByZero,
}

/// A value outside an operation's domain, met at run time.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{op} {why}, got {}", crate::vocab::number(*input))]
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
        assert_eq!(Op::from_name("LOG10"), Ok(Op::Log10));
        assert!(Op::from_name("mull").is_err());
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
        for op in Op::ALL {
            assert!(!op.domain().is_empty(), "{op}");
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

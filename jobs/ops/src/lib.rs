//! The lifted operations, as native bridge jobs (`jobs/fastjob`) and
//! plugins (`plugins/scale`) apply them.
//!
//! This mirrors `src/ops.rs` of the `mfstream` crate (names, which take an
//! argument, domain rules). It is a crate of its own, std only, rather than
//! a part of the host crate, because depending on the host would pull tokio
//! and serde into a job or a plugin whose point is to be small and fast.
//! Keep the two in step (mfstream's tests compare every operation of the
//! scale plugin and of the job with the `local` engine's).

/// A validated operation and, where it takes one, its argument.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Transform {
    Ln,
    Exp,
    Log10,
    Ceil,
    Floor,
    Abs,
    Degrees,
    Radians,
    Sin,
    Cos,
    Tan,
    Add(f64),
    Sub(f64),
    Mul(f64),
    Div(f64),
}

/// The catalogue, for usage messages.
const CATALOGUE: &str = "ln, exp, log10, ceil, floor, abs, degrees, radians, sin, cos, tan, add <x>, sub <x>, mul <x>, div <x>";

impl Transform {
    /// Validates the job's arguments: an operation name and, exactly when the
    /// operation takes one, a finite argument (non-zero for `div`).
    pub fn from_args(op: &str, arg: Option<&str>) -> Result<Transform, String> {
        let unary = match op {
            "ln" => Some(Transform::Ln),
            "exp" => Some(Transform::Exp),
            "log10" => Some(Transform::Log10),
            "ceil" => Some(Transform::Ceil),
            "floor" => Some(Transform::Floor),
            "abs" => Some(Transform::Abs),
            "degrees" => Some(Transform::Degrees),
            "radians" => Some(Transform::Radians),
            "sin" => Some(Transform::Sin),
            "cos" => Some(Transform::Cos),
            "tan" => Some(Transform::Tan),
            "add" | "sub" | "mul" | "div" => None,
            _ => {
                return Err(format!(
                    "unknown operation {op:?}: supported operations are {CATALOGUE}"
                ));
            }
        };
        match (unary, arg) {
            (Some(t), None) => Ok(t),
            (Some(_), Some(_)) => Err(format!("operation {op} takes no argument")),
            (None, None) => Err(format!("operation {op} needs a scalar argument: {op} <x>")),
            (None, Some(text)) => {
                let x = text
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| format!("operation {op} needs a finite number, got {text:?}"))?;
                match op {
                    "add" => Ok(Transform::Add(x)),
                    "sub" => Ok(Transform::Sub(x)),
                    "mul" => Ok(Transform::Mul(x)),
                    _ if x == 0.0 => Err("operation div by zero is undefined".to_owned()),
                    _ => Ok(Transform::Div(x)),
                }
            }
        }
    }

    /// Applies the operation to one value.
    ///
    /// A result that is not a finite number is a domain error: `ln` and
    /// `log10` of zero or a negative, an overflow, or a NaN or infinite input.
    #[inline]
    pub fn apply(self, x: f64) -> Result<f64, &'static str> {
        let y = match self {
            Transform::Ln | Transform::Log10 if x <= 0.0 => {
                return Err("is defined for positive values only");
            }
            Transform::Ln => x.ln(),
            Transform::Exp => x.exp(),
            Transform::Log10 => x.log10(),
            Transform::Ceil => x.ceil(),
            Transform::Floor => x.floor(),
            Transform::Abs => x.abs(),
            Transform::Degrees => x.to_degrees(),
            Transform::Radians => x.to_radians(),
            Transform::Sin => x.sin(),
            Transform::Cos => x.cos(),
            Transform::Tan => x.tan(),
            Transform::Add(a) => x + a,
            Transform::Sub(a) => x - a,
            Transform::Mul(a) => x * a,
            Transform::Div(a) => x / a,
        };
        if y.is_finite() {
            Ok(y)
        } else {
            Err("has no finite result")
        }
    }

    /// The operation's name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Transform::Ln => "ln",
            Transform::Exp => "exp",
            Transform::Log10 => "log10",
            Transform::Ceil => "ceil",
            Transform::Floor => "floor",
            Transform::Abs => "abs",
            Transform::Degrees => "degrees",
            Transform::Radians => "radians",
            Transform::Sin => "sin",
            Transform::Cos => "cos",
            Transform::Tan => "tan",
            Transform::Add(_) => "add",
            Transform::Sub(_) => "sub",
            Transform::Mul(_) => "mul",
            Transform::Div(_) => "div",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked_against_the_catalogue() {
        assert_eq!(
            Transform::from_args("mul", Some("1.852")),
            Ok(Transform::Mul(1.852))
        );
        assert_eq!(Transform::from_args("ln", None), Ok(Transform::Ln));
        assert!(
            Transform::from_args("sqrt", None)
                .unwrap_err()
                .contains("\"sqrt\"")
        );
        assert!(
            Transform::from_args("mul", None)
                .unwrap_err()
                .contains("needs")
        );
        assert!(
            Transform::from_args("ln", Some("1"))
                .unwrap_err()
                .contains("takes no")
        );
        assert!(
            Transform::from_args("div", Some("0"))
                .unwrap_err()
                .contains("by zero")
        );
        assert!(
            Transform::from_args("add", Some("nan"))
                .unwrap_err()
                .contains("finite")
        );
        assert!(
            Transform::from_args("add", Some("x"))
                .unwrap_err()
                .contains("\"x\"")
        );
    }

    #[test]
    fn values_outside_the_domain_are_errors_not_nan() {
        assert!(Transform::Ln.apply(0.0).is_err());
        assert!(Transform::Log10.apply(-1.0).is_err());
        assert!(Transform::Exp.apply(1000.0).is_err());
        assert!(Transform::Mul(2.0).apply(f64::NAN).is_err());
        assert_eq!(Transform::Mul(1.852).apply(10.0), Ok(18.52));
        assert_eq!(Transform::Ceil.apply(1.2), Ok(2.0));
    }
}

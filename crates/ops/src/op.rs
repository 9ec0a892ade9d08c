//! What the catalogue gives an operation: its entry, its name, its
//! argument check and its result on a number.

use std::fmt;

use crate::{Arg, CATALOGUE, Domain, Entry, Kind, Op};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NoResult {
    /// The domain refuses it before computing ([`Domain::refuses`]).
    Outside(Domain),
    /// The result is NaN or infinite: an overflow, or a NaN or infinite
    /// input.
    NotFinite,
}

/// Why an operation's argument is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgError {
    /// The operation takes one and none was given.
    Missing,
    /// The operation takes none and one was given.
    Needless,
    /// The argument is NaN or infinite.
    NotFinite,
    /// The argument is 0 and the operation refuses it ([`Arg::NonZero`]).
    Zero,
}

impl Op {
    /// The operation's entry in the catalogue.
    pub const fn entry(self) -> &'static Entry {
        // `CATALOGUE` lists the variants in declaration order, so an
        // operation's discriminant is its index.
        &CATALOGUE[self as usize]
    }

    /// The operation's name, as queries and bridge jobs spell it.
    pub const fn name(self) -> &'static str {
        self.entry().name
    }

    /// Whether the operation takes one scalar argument.
    pub const fn takes_arg(self) -> bool {
        self.entry().arg.takes_one()
    }

    /// Whether the operation applies to values of `kind`.
    pub fn applies_to(self, kind: Kind) -> bool {
        self.entry().kinds.contains(&kind)
    }

    /// Looks an operation up by name, in any case (`mul`, `MUL`).
    pub fn from_name(name: &str) -> Option<Op> {
        Op::ALL
            .into_iter()
            .find(|op| op.name().eq_ignore_ascii_case(name))
    }

    /// The operations that apply to `kind`, in catalogue order.
    pub fn on(kind: Kind) -> impl Iterator<Item = Op> {
        Op::ALL.into_iter().filter(move |op| op.applies_to(kind))
    }

    /// Checks an argument against [`Entry::arg`]: the argument to apply
    /// with, 0 for an operation that takes none.
    pub fn check_arg(self, arg: Option<f64>) -> Result<f64, ArgError> {
        match (self.entry().arg, arg) {
            // A geometry is no scalar `arg`: it comes in its own field.
            (Arg::None | Arg::Geometry, None) => Ok(0.0),
            (Arg::None | Arg::Geometry, Some(_)) => Err(ArgError::Needless),
            (_, None) => Err(ArgError::Missing),
            (_, Some(a)) if !a.is_finite() => Err(ArgError::NotFinite),
            (Arg::NonZero, Some(0.0)) => Err(ArgError::Zero),
            (_, Some(a)) => Ok(a),
        }
    }

    /// Applies the operation to the number `x`, with argument `a` (0 when
    /// it takes none): no result outside its domain or where the result is
    /// not finite, so NaN and infinity never come out.
    #[inline]
    pub fn apply(self, x: f64, a: f64) -> Result<f64, NoResult> {
        let domain = self.domain();
        if domain.refuses(x) {
            return Err(NoResult::Outside(domain));
        }
        let y = self.number(x, a);
        if y.is_finite() {
            Ok(y)
        } else {
            Err(NoResult::NotFinite)
        }
    }

    /// The operation named `name` exactly (lowercase, as the host writes
    /// it for jobs and plugins) among those that apply to `kind`.
    pub fn find(name: &str, kind: Kind) -> Option<Op> {
        Op::ALL
            .into_iter()
            .find(|op| op.name() == name && op.applies_to(kind))
    }

    /// The catalogue as one line, for messages: `ln, exp, …, add <x>, …`.
    pub fn catalogue() -> String {
        Op::line(Op::ALL.iter().copied())
    }

    /// The operations that apply to `kind` as one line, for the messages of
    /// jobs and plugins that compute that kind only.
    pub fn catalogue_of(kind: Kind) -> String {
        Op::line(Op::on(kind))
    }

    pub(crate) fn line(ops: impl Iterator<Item = Op>) -> String {
        ops.map(|op| {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LN_MAX;

    #[test]
    fn every_entry_sits_at_its_operations_index() {
        for (i, entry) in CATALOGUE.iter().enumerate() {
            assert_eq!(entry.op as usize, i, "{}", entry.name);
            assert_eq!(Op::ALL[i], entry.op);
            assert_eq!(entry.op.domain(), entry.domain, "{}", entry.name);
            assert!(!entry.kinds.is_empty(), "{}", entry.name);
            // Jobs get the names of operations on numbers in lowercase.
            if entry.kinds.contains(&Kind::Number) {
                assert_eq!(entry.name, entry.name.to_ascii_lowercase());
            }
        }
    }

    /// An operation on positions is computed by the `local` engine alone:
    /// it has no number, no job's implementation, a domain of instants,
    /// and the MEOS function it follows where there is one.
    #[test]
    fn every_operation_on_positions_is_for_the_local_engine_only() {
        let positions: Vec<&Entry> = Op::on(Kind::Position).map(Op::entry).collect();
        let names: Vec<&str> = positions.iter().map(|e| e.name).collect();
        for name in [
            "speed",
            "azimuth",
            "cumulativeLength",
            "distance",
            "position",
        ] {
            assert!(names.contains(&name), "{name}");
        }
        for e in positions {
            assert!(e.python.is_none() && e.java.is_none() && e.c.is_none() && e.meos.is_none());
            assert!(!e.kinds.contains(&Kind::Number), "{}", e.name);
            assert!(matches!(e.domain, Domain::Instants(_)), "{}", e.name);
            assert!(e.op.apply(1.0, 0.0).is_err(), "{}", e.name);
            assert!(!e.arg.takes_one(), "{}", e.name);
        }
        assert_eq!(Op::Distance.entry().arg, Arg::Geometry);
        assert_eq!(Op::Distance.check_arg(None), Ok(0.0));
        assert_eq!(Op::Distance.check_arg(Some(1.0)), Err(ArgError::Needless));
        assert_eq!(
            Op::from_name("CUMULATIVELENGTH"),
            Some(Op::CumulativeLength)
        );
        assert_eq!(Op::find("speed", Kind::Number), None);
        assert!(Op::catalogue_of(Kind::Position).starts_with("speed, azimuth, cumulativeLength"));
        assert_eq!(Op::Speed.entry().meos_function().as_deref(), Some("speed"));
        assert_eq!(
            Op::Tan.entry().meos_function().as_deref(),
            Some("pg_dsin / pg_dcos")
        );
        assert_eq!(Op::Position.entry().meos_function(), None);
    }

    /// The jobs compute numbers: an operation on numbers has their
    /// implementations, and a formula (`number`) the engines compute.
    #[test]
    fn every_operation_on_numbers_is_complete() {
        for entry in Op::on(Kind::Number).map(Op::entry) {
            assert!(
                entry.python.is_some() && entry.java.is_some() && entry.c.is_some(),
                "{}",
                entry.name
            );
            assert!(
                entry.op.apply(0.5, 1.852).is_ok(),
                "{} has no `number`",
                entry.name
            );
        }
    }

    /// The domain is data the code keeps to: on values across the range
    /// and at the edges, an input has a result exactly where the catalogue
    /// admits it (for `FiniteResult`, only where it admits it).
    #[test]
    fn apply_keeps_to_each_entrys_domain() {
        let mut xs = vec![
            0.0,
            -0.0,
            f64::MIN_POSITIVE,
            -1.0,
            1.0,
            0.5,
            1e10,
            -1e10,
            709.0,
        ];
        xs.extend([
            LN_MAX,
            f64::from_bits(LN_MAX.to_bits() + 1),
            f64::MAX,
            -f64::MAX,
        ]);
        xs.extend([f64::INFINITY, f64::NEG_INFINITY, f64::NAN]);
        for entry in CATALOGUE {
            let a = if entry.arg.takes_one() { 1.852 } else { 0.0 };
            for &x in &xs {
                let ok = entry.op.apply(x, a).is_ok();
                if entry.domain == Domain::FiniteResult {
                    assert!(!ok || entry.domain.admits(x), "{} {x}", entry.name);
                } else {
                    assert_eq!(ok, entry.domain.admits(x), "{} {x}", entry.name);
                }
            }
        }
    }

    #[test]
    fn exps_bound_is_where_libm_overflows() {
        assert!(LN_MAX.exp().is_finite());
        assert!(f64::from_bits(LN_MAX.to_bits() + 1).exp().is_infinite());
        assert_eq!(Op::Exp.domain(), Domain::AtMost(LN_MAX));
    }

    #[test]
    fn names_are_found_in_any_case() {
        assert_eq!(Op::from_name("LOG10"), Some(Op::Log10));
        assert_eq!(Op::from_name("mull"), None);
        assert!(
            Op::ALL
                .iter()
                .all(|op| Op::from_name(op.name()) == Some(*op))
        );
    }
}

//! The operation catalogue of mfstream: the one list of lifted operations
//! (`ln`, `mul 1.852`, …) that every part of the project reads.
//!
//! Each [`Entry`] says an operation's name, its argument ([`Arg`]: none, a
//! number, a non-zero number), its domain ([`Domain`]: the inputs with a
//! result, `ln` of `x > 0` …), its formula, the value kinds it applies to
//! ([`Kind`]) and how the other languages' jobs compute it. Readers:
//!
//! - the `mfstream` crate: spec validation, the `local` engine and the host's
//!   guard before version-1 jobs and plugins (`src/ops.rs` wraps [`Op`]);
//! - the native bridge job (`jobs/fastjob`) and the plugins (`plugins/scale`,
//!   `plugins/meos`), through [`Transform`] and [`Op`];
//! - the Flink cluster client (`jobs/flink-cluster-client`), which checks
//!   a query's operation before submitting it;
//! - the tables generated from it ([`render`]): README's table of
//!   operations, the server page's menu (`src/server/page.html`), the
//!   Python jobs' (`jobs/reference`, `jobs/beam`), the JVM
//!   jobs' (`jobs/jvm/LiftedOperation.java`) and the MEOS C job's
//!   (`jobs/meos/meos_job.c`). The `generated` test fails when a checked-in
//!   table differs from what the catalogue renders;
//!   `MFSTREAM_BLESS=1 cargo test -p mfstream-ops --test generated`
//!   rewrites them.
//!
//! Adding an operation is one entry in `catalogue.rs`.
//!
//! The crate is std only, with no dependencies, so a job or a plugin that
//! uses it stays small; the host crate depends on it, never the reverse.
//!
//! ```
//! use mfstream_ops::{Arg, Domain, Op, Transform};
//!
//! assert_eq!(Op::from_name("LN"), Some(Op::Ln));
//! assert_eq!(Op::Ln.entry().domain, Domain::Positive);
//! assert_eq!(Op::Div.entry().arg, Arg::NonZero);
//! let knots = Transform::from_args("mul", Some("1.852")).unwrap();
//! assert_eq!(knots.apply(10.0), Ok(18.52));
//! assert!(Transform::from_args("ln", None).unwrap().apply(0.0).is_err());
//! ```

use std::fmt;

/// Makes the [`Op`] enum, [`CATALOGUE`] and the per-number `match` from
/// the one list in `catalogue.rs`, so they cannot drift apart.
macro_rules! catalogue {
    // An entry with no `number` applies to other kinds only: spec
    // validation never lets a number reach it, and one that did would have
    // no result (NaN is never finite).
    (@number $xv:ident, $av:ident) => {
        f64::NAN
    };
    (@number $xv:ident, $av:ident, |$x:ident, $a:ident| $number:expr) => {{
        let ($x, $a) = ($xv, $av);
        $number
    }};
    (@option) => {
        None
    };
    (@option $e:expr) => {
        Some($e)
    };
    ($(
        $(#[doc = $doc:literal])*
        $variant:ident {
            name: $name:literal, arg: $arg:expr, domain: $domain:expr, formula: $formula:literal,
            kinds: $kinds:expr,
            $(number: |$x:ident, $a:ident| $number:expr,)?
            $(python: $python:literal,)?
            $(java: $java:literal,)?
            $(meos: $meos:expr,)?
        }
    ),* $(,)?) => {
        /// A lifted operation: one entry of the catalogue ([`Op::entry`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Op {
            $( $(#[doc = $doc])* $variant, )*
        }

        /// The catalogue, in its order (which is also [`Op::ALL`]'s).
        pub const CATALOGUE: &[Entry] = &[
            $( Entry {
                op: Op::$variant,
                name: $name,
                arg: $arg,
                domain: $domain,
                formula: $formula,
                kinds: $kinds,
                python: catalogue!(@option $($python)?),
                java: catalogue!(@option $($java)?),
                meos: catalogue!(@option $($meos)?),
            }, )*
        ];

        impl Op {
            /// Every operation, in catalogue order.
            pub const ALL: [Op; CATALOGUE.len()] = [$( Op::$variant ),*];

            /// The operation's domain ([`Entry::domain`]), as a `match`:
            /// the per-record path reads no table.
            #[inline]
            pub const fn domain(self) -> Domain {
                match self {
                    $( Op::$variant => $domain, )*
                }
            }

            /// The result on a number, before the domain and finiteness
            /// checks of [`Op::apply`].
            #[inline(always)]
            pub(crate) fn number(self, x: f64, a: f64) -> f64 {
                match self {
                    $( Op::$variant => catalogue!(@number x, a $(, |$x, $a| $number)?), )*
                }
            }
        }
    };
}

mod catalogue;
pub mod render;

pub use catalogue::{CATALOGUE, LN_MAX, Op};

/// One operation of the catalogue, as every table shows it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Entry {
    /// The operation.
    pub op: Op,
    /// Its name, as queries and bridge jobs spell it (lowercase).
    pub name: &'static str,
    /// Its argument.
    pub arg: Arg,
    /// The inputs it has a result for.
    pub domain: Domain,
    /// The result, with `x` the value and `a` the argument (`x · a`).
    pub formula: &'static str,
    /// The value kinds it applies to.
    pub kinds: &'static [Kind],
    /// The Python jobs' function: of `x` alone, or of `x` and `a` when the
    /// operation takes an argument (`math.log`, `operator.mul`). Every
    /// operation on numbers has one; the jobs compute numbers only.
    pub python: Option<&'static str>,
    /// The JVM jobs' expression in `x` and `a` (`Math.log(x)`, `x * a`);
    /// as `python`.
    pub java: Option<&'static str>,
    /// How the MEOS job and plugin compute it; `None` where they do not.
    pub meos: Option<Meos>,
}

/// What an operation takes after its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// Nothing: `ln`.
    None,
    /// One finite number: `mul 1.852`.
    Number,
    /// One finite number other than 0: `div 4`.
    NonZero,
}

impl Arg {
    /// Whether there is an argument.
    pub const fn takes_one(self) -> bool {
        !matches!(self, Arg::None)
    }
}

impl fmt::Display for Arg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Arg::None => "none",
            Arg::Number => "one finite number",
            Arg::NonZero => "one finite number, not 0",
        })
    }
}

/// The inputs an operation has a result for. Every operation also has no
/// result where its result is not a finite number: an input outside its
/// domain never gets NaN or infinity through ([`Op::apply`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Domain {
    /// Every finite `x` (`sin`, `ceil`).
    Finite,
    /// Finite `x > 0` (`ln`, `log10`): 0 and negative values are refused
    /// before computing ([`NoResult::Outside`]).
    Positive,
    /// `x` up to the bound; past it the result overflows (`exp`, up to
    /// [`LN_MAX`]).
    AtMost(f64),
    /// Every finite `x` whose result is finite: large values or a large
    /// argument overflow (`mul`, `degrees`).
    FiniteResult,
}

impl Domain {
    /// Whether `x` is refused before computing: the values for which the
    /// formula has a result in floating point that is still wrong to give
    /// (`ln 0` is −∞, `ln −1` is NaN; both are better said as "positive
    /// values only"). The rest of the domain is kept by the finiteness
    /// check after computing.
    #[inline]
    pub const fn refuses(self, x: f64) -> bool {
        matches!(self, Domain::Positive) && x <= 0.0
    }

    /// Whether `x` may have a result: exact for every domain but
    /// [`Domain::FiniteResult`], where the result must also be finite.
    pub fn admits(self, x: f64) -> bool {
        match self {
            Domain::Finite | Domain::FiniteResult => x.is_finite(),
            Domain::Positive => x.is_finite() && x > 0.0,
            Domain::AtMost(bound) => x <= bound,
        }
    }

    /// Why an input [`refused`](Domain::refuses) has no result, after the
    /// operation's name: `ln is defined for positive values only`.
    pub const fn why_refused(self) -> &'static str {
        match self {
            Domain::Positive => "is defined for positive values only",
            _ => "has no result for this value",
        }
    }
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Domain::Finite => f.write_str("every finite x"),
            Domain::Positive => f.write_str("x > 0"),
            Domain::AtMost(bound) => write!(f, "x ≤ {bound:.2} (the result overflows past it)"),
            Domain::FiniteResult => f.write_str("every finite x; the result must be finite"),
        }
    }
}

/// A kind of value an operation applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// Numbers (`TReal`, `TInteger`).
    Number,
    /// Positions (`TGeogPoint`, `TGeomPoint`): the kind of the position
    /// operations (issue 20), which give a number per position (`speed`).
    /// An entry for one has `kinds: &[Kind::Position]` and no `number`,
    /// `python` or `java`: spec validation keeps it to positions, and the
    /// jobs' tables, which are for numbers, leave it out.
    Position,
}

impl Kind {
    /// The kind's name in tables: `numbers`.
    pub const fn plural(self) -> &'static str {
        match self {
            Kind::Number => "numbers",
            Kind::Position => "positions",
        }
    }
}

/// How MEOS computes an operation (the C job's `enum kind` and the MEOS
/// plugin's calls): the function's symbol and its shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meos {
    /// `Temporal *f(const Temporal *)`.
    Unary(&'static str),
    /// `Temporal *f(const Temporal *, bool normalize)`, called with false.
    Degrees(&'static str),
    /// `Temporal *f(const Temporal *, double)`, called with the argument.
    Binary(&'static str),
    /// `double f(double)` on the value itself: MEOS lifts no `sin`/`cos`.
    Scalar(&'static str),
    /// `pg_dsin(x) / pg_dcos(x)`: MEOS has no tangent.
    Tan,
}

impl Meos {
    /// The MEOS function called (for `Tan`, the sine; the cosine is
    /// `pg_dcos`).
    pub const fn symbol(self) -> &'static str {
        match self {
            Meos::Unary(s) | Meos::Degrees(s) | Meos::Binary(s) | Meos::Scalar(s) => s,
            Meos::Tan => "pg_dsin",
        }
    }
}

/// Why a value has no result.
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

    /// Checks an argument against [`Entry::arg`]: the argument to apply
    /// with, 0 for an operation that takes none.
    pub fn check_arg(self, arg: Option<f64>) -> Result<f64, ArgError> {
        match (self.entry().arg, arg) {
            (Arg::None, None) => Ok(0.0),
            (Arg::None, Some(_)) => Err(ArgError::Needless),
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
        Op::line(Op::ALL.into_iter().filter(|op| op.applies_to(kind)))
    }

    fn line(ops: impl Iterator<Item = Op>) -> String {
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
    pub fn from_args(op: &str, arg: Option<&str>) -> Result<Transform, String> {
        let Some(found) = Op::find(op, Kind::Number) else {
            return Err(format!(
                "unknown operation {op:?}: supported operations are {}",
                Op::catalogue_of(Kind::Number)
            ));
        };
        let number = match (found.takes_arg(), arg) {
            (false, Some(_)) => return Err(format!("operation {op} takes no argument")),
            (true, Some(text)) => Some(
                text.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| format!("operation {op} needs a finite number, got {text:?}"))?,
            ),
            (_, None) => None,
        };
        let arg = found.check_arg(number).map_err(|e| match e {
            ArgError::Needless => format!("operation {op} takes no argument"),
            ArgError::Missing => format!("operation {op} needs a scalar argument: {op} <x>"),
            ArgError::NotFinite => format!("operation {op} needs a finite number"),
            ArgError::Zero => format!("operation {op} by zero is undefined"),
        })?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_sits_at_its_operations_index() {
        for (i, entry) in CATALOGUE.iter().enumerate() {
            assert_eq!(entry.op as usize, i, "{}", entry.name);
            assert_eq!(Op::ALL[i], entry.op);
            assert_eq!(entry.op.domain(), entry.domain, "{}", entry.name);
            assert_eq!(entry.name, entry.name.to_ascii_lowercase());
            assert!(!entry.kinds.is_empty(), "{}", entry.name);
        }
    }

    /// The jobs compute numbers: an operation on numbers has their
    /// implementations, and a formula (`number`) the engines compute.
    #[test]
    fn every_operation_on_numbers_is_complete() {
        for entry in CATALOGUE.iter().filter(|e| e.kinds.contains(&Kind::Number)) {
            assert!(
                entry.python.is_some() && entry.java.is_some(),
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

    #[test]
    fn arguments_are_checked_against_the_catalogue() {
        let mul = Transform::from_args("mul", Some("1.852")).unwrap();
        assert_eq!((mul.op, mul.arg), (Op::Mul, 1.852));
        assert_eq!(Transform::from_args("ln", None).unwrap().op, Op::Ln);
        let err = |op, arg| Transform::from_args(op, arg).unwrap_err();
        assert_eq!(
            err("sqrt", None),
            format!(
                "unknown operation \"sqrt\": supported operations are {}",
                Op::catalogue()
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

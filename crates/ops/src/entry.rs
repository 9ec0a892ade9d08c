//! An entry of the catalogue and the types of its columns: the argument,
//! the domain, the value kinds and how MEOS computes it.

use std::fmt;

use crate::Op;

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
    /// The C plugin's expression in `x` and `a`, with libm (`log(x)`);
    /// as `python`. The domain's refusal (`x <= 0`) is added to it.
    pub c: Option<&'static str>,
    /// How the MEOS job and plugin compute it; `None` where they do not.
    pub meos: Option<Meos>,
    /// The MEOS function whose result it gives, where no job calls one:
    /// the position operations, which the `local` engine computes
    /// (`crates/model/src/geo`, checked against pymeos) after MEOS's `speed`, ….
    pub follows: Option<&'static str>,
}

impl Entry {
    /// The MEOS function it computes or follows, for tables: `tfloat_ln`,
    /// `pg_dsin / pg_dcos`, `speed`; `None` when it has none.
    pub fn meos_function(&self) -> Option<String> {
        match (self.meos, self.follows) {
            (Some(Meos::Tan), _) => Some("pg_dsin / pg_dcos".to_owned()),
            (Some(meos), _) => Some(meos.symbol().to_owned()),
            (None, follows) => follows.map(str::to_owned),
        }
    }
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
    /// A GeoJSON geometry, in the registration's `geometry` (not its
    /// scalar `arg`): `distance`.
    Geometry,
}

impl Arg {
    /// Whether there is a scalar argument (`arg`, `<x>`): a number. A
    /// [`Arg::Geometry`] is not one: it comes in its own field.
    pub const fn takes_one(self) -> bool {
        matches!(self, Arg::Number | Arg::NonZero)
    }
}

impl fmt::Display for Arg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Arg::None => "none",
            Arg::Number => "one finite number",
            Arg::NonZero => "one finite number, not 0",
            Arg::Geometry => "a GeoJSON geometry (`geometry`)",
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
    /// before computing ([`NoResult::Outside`](crate::NoResult::Outside)).
    Positive,
    /// `x` up to the bound; past it the result overflows (`exp`, up to
    /// [`LN_MAX`](crate::LN_MAX)).
    AtMost(f64),
    /// Every finite `x` whose result is finite: large values or a large
    /// argument overflow (`mul`, `degrees`).
    FiniteResult,
    /// No number: the operation takes positions, and has a result at the
    /// instants the text says (`every instant but a feature's first`).
    Instants(&'static str),
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
            Domain::Instants(_) => false,
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
            Domain::Instants(text) => f.write_str(text),
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
    /// operations, which give a number per position (`speed`) or the
    /// position itself. An entry for one has `kinds: &[Kind::Position]`, a
    /// [`Domain::Instants`] and no `number`, `python`, `java`, `c` or `meos`:
    /// the `local` engine computes it (`crates/engine/src/positions`), spec validation
    /// keeps it to positions, and the jobs' tables, which are for numbers,
    /// leave it out.
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

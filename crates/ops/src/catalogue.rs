//! The catalogue itself: one entry per lifted operation.
//!
//! Adding an operation is one entry here. The macro makes from it the
//! [`Op`](crate::Op) variant, the [`Entry`](crate::Entry) that every table
//! is read or generated from, and the `match` arm that computes it on a
//! number (the engines' per-record path: a `match`, no table look-up).
//! `cargo test -p mfstream-ops --test generated` then says which checked-in
//! tables (the book's `docs/src/cli.md`, the Python, Java and C jobs) to regenerate, and
//! `MFSTREAM_BLESS=1` regenerates them.
//!
//! Fields, in this order:
//! - `name`: as queries and jobs spell it (lowercase).
//! - `arg`: [`Arg`]: none, a finite number, or a finite non-zero number.
//! - `domain`: [`Domain`]: the inputs with a result.
//! - `formula`: the result, with `x` the value and `a` the argument.
//! - `kinds`: the value kinds it applies to ([`Kind`]).
//! - `number`: the result on a number, `|x, a| …`; the caller checks the
//!   domain before and that the result is finite after.
//! - `python`, `java`, `c`: the same in the Python jobs (a function of
//!   `x`, or of `x` and `a`), in the JVM jobs and in the C plugin of the
//!   tests (`tests/plugins/c/scale.c`; expressions in `x` and `a`, Java's
//!   `Math` and C's libm).
//! - `meos`: the MEOS function the C job and the MEOS plugin call ([`Meos`]).
//! - `follows`: the MEOS function whose result an operation no job
//!   computes gives (the position operations).
//!
//! `number`, `python`, `java`, `c`, `meos` and `follows` may be left out: an
//! operation on another kind of value (positions: `kinds:
//! &[Kind::Position]`, a [`Domain::Instants`]) has no `number`, and the
//! jobs, which compute numbers, do not list it; the `local` engine computes
//! it (`crates/engine/src/positions`, with `mfstream_model::position::Measure`, from the [`Op`]). Every operation on
//! numbers has `number`, `python`, `java` and `c` (a test says so). Names are
//! lowercase, but for the position operations, which are spelt as OGC API
//! – Moving Features and MEOS spell them (`cumulativeLength`); every name
//! is found in any case ([`Op::from_name`]).

use crate::{Arg, Domain, Entry, Kind, Meos};

/// ln of the largest finite double: `exp` overflows past it.
pub const LN_MAX: f64 = 709.782_712_893_384;

catalogue! {
    /// Natural logarithm; positive values only.
    Ln {
        name: "ln", arg: Arg::None, domain: Domain::Positive, formula: "ln x",
        kinds: &[Kind::Number], number: |x, _a| x.ln(),
        python: "math.log", java: "Math.log(x)", c: "log(x)", meos: Meos::Unary("tfloat_ln"),
    },
    /// e to the power of the value.
    Exp {
        name: "exp", arg: Arg::None, domain: Domain::AtMost(LN_MAX), formula: "eˣ",
        kinds: &[Kind::Number], number: |x, _a| x.exp(),
        python: "math.exp", java: "Math.exp(x)", c: "exp(x)", meos: Meos::Unary("tfloat_exp"),
    },
    /// Base-10 logarithm; positive values only.
    Log10 {
        name: "log10", arg: Arg::None, domain: Domain::Positive, formula: "log₁₀ x",
        kinds: &[Kind::Number], number: |x, _a| x.log10(),
        python: "math.log10", java: "Math.log10(x)", c: "log10(x)",
        meos: Meos::Unary("tfloat_log10"),
    },
    /// Smallest integer not below the value.
    Ceil {
        name: "ceil", arg: Arg::None, domain: Domain::Finite, formula: "⌈x⌉",
        kinds: &[Kind::Number], number: |x, _a| x.ceil(),
        python: "math.ceil", java: "Math.ceil(x)", c: "ceil(x)", meos: Meos::Unary("tfloat_ceil"),
    },
    /// Largest integer not above the value.
    Floor {
        name: "floor", arg: Arg::None, domain: Domain::Finite, formula: "⌊x⌋",
        kinds: &[Kind::Number], number: |x, _a| x.floor(),
        python: "math.floor", java: "Math.floor(x)", c: "floor(x)",
        meos: Meos::Unary("tfloat_floor"),
    },
    /// Absolute value.
    Abs {
        name: "abs", arg: Arg::None, domain: Domain::Finite, formula: "|x|",
        kinds: &[Kind::Number], number: |x, _a| x.abs(),
        python: "abs", java: "Math.abs(x)", c: "fabs(x)", meos: Meos::Unary("tnumber_abs"),
    },
    /// Radians to degrees.
    Degrees {
        name: "degrees", arg: Arg::None, domain: Domain::FiniteResult, formula: "x · 180 / π",
        kinds: &[Kind::Number], number: |x, _a| x.to_degrees(),
        python: "math.degrees", java: "Math.toDegrees(x)", c: "x * (180.0 / M_PI)",
        meos: Meos::Degrees("tfloat_degrees"),
    },
    /// Degrees to radians.
    Radians {
        name: "radians", arg: Arg::None, domain: Domain::Finite, formula: "x · π / 180",
        kinds: &[Kind::Number], number: |x, _a| x.to_radians(),
        python: "math.radians", java: "Math.toRadians(x)", c: "x * (M_PI / 180.0)",
        meos: Meos::Unary("tfloat_radians"),
    },
    /// Sine of radians.
    Sin {
        name: "sin", arg: Arg::None, domain: Domain::Finite, formula: "sin x",
        kinds: &[Kind::Number], number: |x, _a| x.sin(),
        python: "math.sin", java: "Math.sin(x)", c: "sin(x)", meos: Meos::Scalar("pg_dsin"),
    },
    /// Cosine of radians.
    Cos {
        name: "cos", arg: Arg::None, domain: Domain::Finite, formula: "cos x",
        kinds: &[Kind::Number], number: |x, _a| x.cos(),
        python: "math.cos", java: "Math.cos(x)", c: "cos(x)", meos: Meos::Scalar("pg_dcos"),
    },
    /// Tangent of radians.
    Tan {
        name: "tan", arg: Arg::None, domain: Domain::Finite, formula: "tan x",
        kinds: &[Kind::Number], number: |x, _a| x.tan(),
        python: "math.tan", java: "Math.tan(x)", c: "tan(x)", meos: Meos::Tan,
    },
    /// Adds the argument.
    Add {
        name: "add", arg: Arg::Number, domain: Domain::FiniteResult, formula: "x + a",
        kinds: &[Kind::Number], number: |x, a| x + a,
        python: "operator.add", java: "x + a", c: "x + a", meos: Meos::Binary("add_tfloat_float"),
    },
    /// Subtracts the argument.
    Sub {
        name: "sub", arg: Arg::Number, domain: Domain::FiniteResult, formula: "x − a",
        kinds: &[Kind::Number], number: |x, a| x - a,
        python: "operator.sub", java: "x - a", c: "x - a", meos: Meos::Binary("sub_tfloat_float"),
    },
    /// Multiplies by the argument.
    Mul {
        name: "mul", arg: Arg::Number, domain: Domain::FiniteResult, formula: "x · a",
        kinds: &[Kind::Number], number: |x, a| x * a,
        python: "operator.mul", java: "x * a", c: "x * a", meos: Meos::Binary("mult_tfloat_float"),
    },
    /// Divides by the argument (never zero).
    Div {
        name: "div", arg: Arg::NonZero, domain: Domain::FiniteResult, formula: "x / a",
        kinds: &[Kind::Number], number: |x, a| x / a,
        python: "operator.truediv", java: "x / a", c: "x / a",
        meos: Meos::Binary("div_tfloat_float"),
    },
    /// Speed along the positions: of the segment ending at each instant.
    Speed {
        name: "speed", arg: Arg::None,
        domain: Domain::Instants("every instant but a feature's first"),
        formula: "m/s (units/s when planar) of the segment ending at the instant",
        kinds: &[Kind::Position], follows: "speed",
    },
    /// Heading of the segment ending at each instant.
    Azimuth {
        name: "azimuth", arg: Arg::None,
        domain: Domain::Instants("every instant but a feature's first and those after a stop (a segment of length 0)"),
        formula: "degrees clockwise from north in [0, 360) of the segment ending at the instant (MEOS gives radians)",
        kinds: &[Kind::Position], follows: "azimuth",
    },
    /// Length travelled since the feature's first instant.
    CumulativeLength {
        name: "cumulativeLength", arg: Arg::None,
        domain: Domain::Instants("every instant (0 at a feature's first)"),
        formula: "metres (units when planar) travelled since the feature's first instant",
        kinds: &[Kind::Position], follows: "cumulativeLength",
    },
    /// Distance to a static geometry, given as GeoJSON in `geometry`.
    Distance {
        name: "distance", arg: Arg::Geometry,
        domain: Domain::Instants("every instant"),
        formula: "metres (units when planar) to the geometry, 0 inside a polygon",
        kinds: &[Kind::Position], follows: "distance(tgeogpoint, geography)",
    },
    /// The instant itself: its datetime and coordinates.
    Position {
        name: "position", arg: Arg::None,
        domain: Domain::Instants("every instant"),
        formula: "the instant itself: `{\"datetime\",\"coordinates\"}`",
        kinds: &[Kind::Position],
    },
}

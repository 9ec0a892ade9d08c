//! The operation catalogue of mfstream: the one list of lifted operations
//! (`ln`, `mul 1.852`, …) that every part of the project reads.
//!
//! Each [`Entry`] says an operation's name, its argument ([`Arg`]: none, a
//! number, a non-zero number, a geometry), its domain ([`Domain`]: the
//! inputs with a result, `ln` of `x > 0` …), its formula, the value kinds
//! it applies to ([`Kind`]: numbers, positions) and how the other
//! languages' jobs compute it, or the MEOS function it follows. Readers:
//!
//! - the `mfstream` crate: spec validation, the `local` engine and the host's
//!   guard before version-1 jobs and plugins (`crates/model/src/ops.rs` wraps [`Op`]);
//!   the position queries' validation (`crates/model/src/position`) and `mfstream run
//!   --op`'s completions and help (`src/cli/values.rs`);
//! - the native bridge job (`jobs/fastjob`) and the plugins (`plugins/scale`,
//!   `plugins/meos`), through [`Transform`] and [`Op`];
//! - the Flink cluster client (`jobs/flink-cluster-client`), which checks
//!   a query's operation before submitting it;
//! - the tables generated from it ([`render`]): the book's table of
//!   operations (`docs/src/cli.md`: numbers and positions), the server page's menu (`crates/server/src/page.html`), the
//!   Python jobs' (`jobs/reference`, `jobs/beam`), the JVM
//!   jobs' (`jobs/jvm/LiftedOperation.java`), the MEOS C job's
//!   (`jobs/meos/meos_job.c`) and the tests' C plugin's
//!   (`tests/plugins/c/scale.c`). The `generated` test fails when a checked-in
//!   table differs from what the catalogue renders;
//!   `MFSTREAM_BLESS=1 cargo test -p mfstream-ops --test generated`
//!   rewrites them.
//!
//! Adding an operation on numbers is one entry in `catalogue.rs`; one on
//! positions is an entry there and its computation in `crates/engine/src/positions`.
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
            $(c: $c:literal,)?
            $(meos: $meos:expr,)?
            $(follows: $follows:literal,)?
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
                c: catalogue!(@option $($c)?),
                meos: catalogue!(@option $($meos)?),
                follows: catalogue!(@option $($follows)?),
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
mod entry;
mod op;
pub mod render;
mod transform;

pub use catalogue::{CATALOGUE, LN_MAX, Op};
pub use entry::{Arg, Domain, Entry, Kind, Meos};
pub use op::{ArgError, NoResult};
pub use transform::{Transform, TransformError, TransformErrorKind};

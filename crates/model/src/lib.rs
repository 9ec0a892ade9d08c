//! The vocabulary and query model of mfstream: what every engine, the
//! registry and the server speak.
//!
//! A continuous query applies a lifted scalar operation (`ln`, `mul 1.852`,
//! …) or a windowed aggregate (`AVG` over a `TUMBLING` window of 10
//! seconds, …) to a stream of temporal-property instants, or measures a
//! feature's positions. This crate says what those are, with no engine,
//! server or store in it:
//!
//! - [`Instant`], [`Value`], [`Point`], [`PropertyType`]: what a query
//!   reads; [`Event`] and [`QueryStatus`]: what it gives back;
//! - [`QuerySpec`] (and [`Registration`], the body a client sends): what a
//!   query computes, engine-neutral, with how it is run (its
//!   [`budget`], its [`compute`] threads and CPU bound, its [`clock`]);
//! - [`aggregate`]: windows and the [`Windower`](aggregate::Windower) any
//!   engine can use; [`ops`]: the lifted operations; [`position`]: queries
//!   over a feature's positions; [`geo`]: their geodesy and geometry;
//!   [`datetime`]: the datetimes instants carry;
//! - [`origin`]: where an option's value came from (a flag, the
//!   environment, `engines.toml`, the embedding program), so that a
//!   message about it names it as its origin does.
//!
//! The engines that run a spec are `mfstream-engine`'s; the registry that
//! names them is `mfstream-registry`'s.
//!
//! # Where things are
//!
//! Every public item has exactly one path. The root holds the vocabulary
//! ([`Instant`], [`QuerySpec`], [`Event`] …) and its errors, re-exported
//! from private modules; each public module is one concept's API, read
//! qualified (`aggregate::Window`, `geo::Crs`), re-exporting only from its
//! own private submodules (tests/public_api.rs checks both). The enums a
//! caller matches on and that will grow (errors, [`Value`],
//! [`PropertyType`], [`QueryKind`], [`Event`] …) are `#[non_exhaustive]`:
//! match them with a wildcard arm.
//!
//! ```
//! use mfstream_model::ops::Transform;
//! use mfstream_model::{PropertyType, QuerySpec};
//!
//! let spec = QuerySpec::transform("speed", Transform::new("mul", Some(1.852)).unwrap());
//! assert_eq!(spec.property_type, PropertyType::TReal);
//! assert_eq!(spec.operation_name(), "mul");
//! ```

// The modules, public and private; see "Where things are" above. A new
// module goes in its alphabetical place.
pub mod aggregate;
pub mod budget;
pub mod clock;
pub mod compute;
pub mod datetime;
pub mod geo;
pub mod json;
mod on_error;
pub mod ops;
pub mod origin;
pub mod position;
mod spec;
mod spec_error;
mod vocab;

// The root's items: one line per private module, in the modules' order.
pub use crate::on_error::OnError;
pub use crate::spec::{QueryKind, QuerySpec, Registration, RegistrationError};
pub use crate::spec_error::{SpecError, SpecErrorKind};
pub use crate::vocab::{
    Aggregation, CoordinatesError, DetectEvent, Event, EventKind, Instant, InstantEvent, Point,
    PropertyPath, PropertyType, QueryStatus, Value, WindowEvent,
};

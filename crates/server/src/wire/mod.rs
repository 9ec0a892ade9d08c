//! The wire model: the JSON the server answers and takes, as typed values
//! that serialise to the answers and describe themselves to `GET /api`.
//!
//! Three kinds of type live here:
//!
//! - the answers the handlers build (`answers`): each route returns one of
//!   these, and its `#[utoipa::path]` names the same type, so the document
//!   and the answer are one declaration and cannot drift;
//! - the events of a stream the server writes itself (`events`: `end`,
//!   `lagged`, `reset`), built where they are written;
//! - the bodies the server is sent and the result events its engines write
//!   (`bodies`, `events`): parsed and written by `mfstream-model`, whose
//!   types carry no schema, so they are described here. The test that
//!   validates the served document validates real bodies and events against
//!   these descriptions (`tests/serve/api.rs`).
//!
//! The answers' keys come in alphabetical order, as they always have (they
//! were built as `serde_json` maps, which sort their keys): a handler wraps
//! its answer in [`Answer`], which writes it so. `GET /engines` is the
//! exception: it prints the registry's listing, in its fields' order, as
//! `mfstream engines --json` does.

mod answers;
mod bodies;
mod events;

pub(crate) use answers::{
    Answer, CQuery, Conformance, Engine, Exception, IngestAnswer, Kind, Landing, Link, QueryList,
    Status,
};
pub(crate) use bodies::{
    Instant, Instants, MovingPoint, Position, Positions, Registration, Window,
};
pub(crate) use events::{
    DetectEvent, EndEvent, EventStream, InstantEvent, LaggedEvent, ResetEvent, STREAM, WindowEvent,
};

//! The events of a query's stream (`…/queries/{qid}/stream`), the data of
//! each Server-Sent Event.
//!
//! The server writes `end`, `lagged` and `reset` itself, from these types
//! (`super::super::fanout`). A result's `instant`, `window` and `detect`
//! are written by `mfstream-model`'s JSON writers, once per result on the
//! hot path, and described here only.

use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use super::answers::Status;

/// The description of the stream's events, for its operation.
pub(crate) const STREAM: &str = "The results as Server-Sent Events. The stream opens with \
`retry: 1000`. Each result is `event: instant` (data: `InstantEvent`) or `event: window` (data: \
`WindowEvent`) or, for a geofence, `event: detect` (data: `DetectEvent`), with `id:` 1, 2, 3, \
… per query. A subscriber that fell behind the replay buffer gets `event: lagged` (data: \
`LaggedEvent`); a `Last-Event-ID` ahead of the query gets `event: reset` first (data: \
`ResetEvent`, no `id:`). An idle stream gets a `: keep-alive` comment. The last event is `event: end` (data: `EndEvent`), then the response ends.";

/// A query's stream as a body: its events, as [`STREAM`] says, from
/// `retry: 1000` on.
#[derive(Debug)]
pub(crate) struct EventStream(pub(crate) Body);

impl IntoResponse for EventStream {
    fn into_response(self) -> Response {
        (
            [
                (header::CONTENT_TYPE, "text/event-stream"),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            self.0,
        )
            .into_response()
    }
}

/// `event: end`: the query ended; the stream's last event.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EndEvent {
    pub(crate) status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
}

/// `event: lagged`: the subscriber fell behind the replay buffer.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct LaggedEvent {
    #[schema(minimum = 1)]
    pub(crate) missed: u64,
}

/// `event: reset`: the `Last-Event-ID` given is ahead of the query.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResetEvent {
    #[schema(minimum = 0)]
    pub(crate) last_event_id: u64,
}

/// A value: a number, a string or a boolean; for a position aggregate,
/// `EXTENT`'s `[minx,miny,maxx,maxy]` or `CENTROID`'s `[x,y]`.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[expect(dead_code, reason = "written by mfstream-model; described to /api")]
pub(crate) enum Scalar {
    Number(f64),
    Text(String),
    Boolean(bool),
    Numbers(Vec<f64>),
}

/// `event: instant`: a transformed instant (a position query's has
/// `coordinates` for `position`, else a `value`).
#[derive(Serialize, ToSchema)]
pub(crate) struct InstantEvent {
    datetime: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<Scalar>,
    #[serde(skip_serializing_if = "Option::is_none")]
    coordinates: Option<Vec<f64>>,
    property: String,
    operation: String,
    /// Records skipped since the previous event, when some were.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0)]
    skipped: Option<u64>,
}

/// `event: window`: a window's aggregate.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WindowEvent {
    window_start: String,
    window_end: String,
    property: String,
    aggregation: String,
    value: Scalar,
    #[schema(minimum = 0)]
    count: u64,
    /// A window still open when the source ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    partial: Option<bool>,
    /// Records skipped as late since the previous event.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0)]
    late: Option<u64>,
    /// Records or windows skipped since the previous event.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0)]
    skipped: Option<u64>,
}

/// `event: detect`: a geofence detection.
#[derive(Serialize, ToSchema)]
pub(crate) struct DetectEvent {
    datetime: String,
    coordinates: Vec<f64>,
    /// `enter`, `exit`, `inside`, `outside` or `cross`.
    detect: String,
    property: String,
    operation: String,
}

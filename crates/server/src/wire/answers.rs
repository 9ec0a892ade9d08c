//! The answers the handlers build: each is the body of a route's answer and
//! the schema `GET /api` gives for it.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use mfstream_model::{QueryKind, QueryStatus};
use mfstream_registry::ListedEngine;
use serde::Serialize;
use utoipa::ToSchema;

/// An answer's body: `T` as JSON, the keys of each object in alphabetical
/// order.
///
/// The answers have always come with their keys so ordered (they were
/// built as `serde_json` maps, which keep their keys sorted), while the
/// types declare their fields in the order `GET /api` has always listed
/// them (a schema's `required` follows its fields): the body goes through
/// such a map on its way out, so both stay as they were.
#[derive(Debug)]
pub(crate) struct Answer<T>(pub(crate) T);

impl<T: Serialize> Answer<T> {
    /// The body as `serde_json` map, its keys sorted.
    fn to_value(&self) -> serde_json::Result<serde_json::Value> {
        serde_json::to_value(&self.0)
    }

    /// The body's text.
    pub(crate) fn to_json(&self) -> serde_json::Result<String> {
        self.to_value().map(|value| value.to_string())
    }
}

impl<T: Serialize> IntoResponse for Answer<T> {
    fn into_response(self) -> Response {
        match self.to_value() {
            Ok(value) => Json(value).into_response(),
            // What `Json` answers a value it cannot write (none of these:
            // their maps' keys are strings).
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        }
    }
}

/// A link.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Link {
    rel: String,
    href: String,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    media_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<String>,
}

impl Link {
    /// A link of relation `rel` to `href`, whose answer is of `media_type`.
    pub(crate) fn new(rel: &str, href: impl Into<String>, media_type: &str) -> Link {
        Link {
            rel: rel.to_owned(),
            href: href.into(),
            media_type: Some(media_type.to_owned()),
            title: None,
        }
    }

    /// The same link, with a title for people.
    pub(crate) fn titled(self, title: &str) -> Link {
        Link {
            title: Some(title.to_owned()),
            ..self
        }
    }
}

/// A query's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Status {
    /// Still running.
    Running,
    /// The source ended and every result was delivered.
    Completed,
    /// Asked to stop, and stopped.
    Stopped,
    /// Failed (the answer says why).
    Failed,
}

impl From<&QueryStatus> for Status {
    fn from(status: &QueryStatus) -> Status {
        match status {
            QueryStatus::Running => Status::Running,
            QueryStatus::Completed => Status::Completed,
            QueryStatus::Stopped => Status::Stopped,
            QueryStatus::Failed { .. } => Status::Failed,
        }
    }
}

/// A query's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Kind {
    /// A lifted operation on each instant.
    Transform,
    /// A windowed aggregate (of the instants, or of a transform's outputs).
    Aggregate,
}

impl From<&QueryKind> for Kind {
    fn from(kind: &QueryKind) -> Kind {
        match kind {
            QueryKind::Transform(_) => Kind::Transform,
            QueryKind::Aggregate { .. } => Kind::Aggregate,
            QueryKind::Position(q) if q.aggregate().is_some() => Kind::Aggregate,
            QueryKind::Position(_) => Kind::Transform,
        }
    }
}

/// The cquery link object of a query, with its live status. `href` and the
/// links are absolute; `channel` is the query's path.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CQuery {
    /// Always `cquery`.
    pub(crate) rel: String,
    pub(crate) query_id: String,
    /// The stream's URL.
    pub(crate) href: String,
    /// The query's path.
    pub(crate) channel: String,
    pub(crate) status: Status,
    /// Always `text/event-stream`.
    #[serde(rename = "type")]
    pub(crate) media_type: String,
    pub(crate) kind: Kind,
    /// The operation or aggregation.
    pub(crate) operation: String,
    pub(crate) engine: String,
    pub(crate) property: String,
    /// The results emitted so far.
    #[schema(minimum = 0)]
    pub(crate) events: u64,
    /// The records skipped (no finite result, `onError: skip`).
    #[schema(minimum = 0)]
    pub(crate) skipped: u64,
    /// CPU time spent on the query's in-process work, in seconds, since it
    /// started (or resumed after a restart): its task on the compute
    /// threads, or an in-process plugin's thread; a bridge job's own
    /// process is not counted.
    #[schema(minimum = 0)]
    pub(crate) cpu_seconds: f64,
    /// Why a failed query failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    /// A query on positions: the feature's reference system (`EPSG:4326`
    /// or `EPSG:NNNN`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) crs: Option<String>,
    /// A geofence's fence, or `distance`'s target, as registered (GeoJSON):
    /// in one query's answer (its 201, its `GET`), not in a list's.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub(crate) geometry: Option<serde_json::Value>,
    /// `self` and `stream`.
    pub(crate) links: Vec<Link>,
}

/// The queries on a property.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct QueryList {
    pub(crate) queries: Vec<CQuery>,
    #[schema(minimum = 0)]
    pub(crate) number_returned: u64,
    pub(crate) links: Vec<Link>,
}

/// What an ingest took.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct IngestAnswer {
    /// The instants accepted.
    #[schema(minimum = 0)]
    pub(crate) accepted: u64,
    /// The queries they were handed to.
    #[schema(minimum = 0)]
    pub(crate) queries: u64,
}

/// An error, as OGC API exceptions are shaped.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Exception {
    /// `InvalidParameterValue`, `UnprocessableEntity`, `NotFound`,
    /// `MethodNotAllowed`, `Unauthorized`, `ServiceUnavailable`, …
    pub(crate) code: String,
    /// What went wrong, and what to do.
    pub(crate) description: String,
    /// The request field at fault, when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) field: Option<String>,
    /// The instants of an ingest accepted before it failed, when it says.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0)]
    pub(crate) accepted: Option<u64>,
}

/// The landing links.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Landing {
    pub(crate) title: String,
    pub(crate) description: String,
    /// `self`, `alternate` (the page), `service-desc` (`/api`),
    /// `conformance`, `engines`, `metrics`.
    pub(crate) links: Vec<Link>,
}

/// The conformance classes.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Conformance {
    pub(crate) conforms_to: Vec<String>,
}

/// An engine of the registry, as `mfstream engines --json` prints it.
// The registry's `ListedEngine`, field for field and in its order (a test
// holds the two to the same bytes).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Engine {
    /// A plugin engine's plugin ABI version (1 to 3): absent for others.
    #[serde(skip_serializing_if = "Option::is_none")]
    abi_version: Option<u32>,
    name: String,
    /// `builtin`, `bridge` or `plugin`.
    kind: String,
    ready: bool,
    /// Why it is not ready.
    reason: Option<String>,
    description: String,
    /// `transform`, `aggregate`, `positions`.
    serves: Vec<String>,
    /// `in-process`, `job` or `host`.
    aggregates_in: String,
    default: bool,
}

impl From<ListedEngine> for Engine {
    fn from(listed: ListedEngine) -> Engine {
        let info = listed.info;
        Engine {
            abi_version: info.abi_version,
            name: info.name,
            kind: info.kind.to_string(),
            ready: info.ready,
            reason: info.reason,
            description: info.description,
            serves: info.serves.names().map(str::to_owned).collect(),
            aggregates_in: info.aggregates_in.as_str().to_owned(),
            default: listed.default,
        }
    }
}

#[cfg(test)]
mod tests {
    use mfstream_registry::Registry;
    use mfstream_registry::config::Config;

    use super::*;

    /// `GET /engines` and `mfstream engines --json` print the same bytes:
    /// the wire's `Engine` is the registry's listing, field for field.
    #[test]
    fn an_engine_on_the_wire_is_the_registrys_listing() {
        let config = Config::parse(include_str!("../../../../engines.toml"), None)
            .expect("the repository's engines.toml parses");
        let env = |_: &str| None;
        let registry = Registry::from_config_with_env(&config, &env);
        let listing = registry.listing();
        assert!(listing.len() > 1, "{listing:?}");
        for listed in listing {
            let expected = serde_json::to_string(&listed).expect("a listing serialises");
            let wire = serde_json::to_string(&Engine::from(listed)).expect("an engine serialises");
            assert_eq!(wire, expected);
        }
    }

    /// The answers' keys stay in the order they always had (alphabetical),
    /// whatever the order of the types' fields.
    #[test]
    fn a_link_and_an_exception_keep_their_keys_in_order() {
        let link = Link::new("service-desc", "/api", "application/json").titled("t");
        assert_eq!(
            Answer(link).to_json().expect("a link serialises"),
            r#"{"href":"/api","rel":"service-desc","title":"t","type":"application/json"}"#
        );
        let exception = Exception {
            accepted: Some(2),
            code: "ServiceUnavailable".into(),
            description: "later".into(),
            field: Some("body".into()),
        };
        assert_eq!(
            Answer(exception)
                .to_json()
                .expect("an exception serialises"),
            r#"{"accepted":2,"code":"ServiceUnavailable","description":"later","field":"body"}"#
        );
    }
}

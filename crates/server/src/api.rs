//! `GET /api`: the OpenAPI 3.1 document of the server, made from the very
//! declarations that make its routes.
//!
//! Every route is declared once, in `super::routes`, by
//! `utoipa_axum::routes!(handler)`: the macro takes the method and the path
//! from the handler's `#[utoipa::path]` attribute, so the router and the
//! document come from the same attribute and cannot name different paths.
//! What the macros cannot forbid (an `OpenApiRouter::route` or a plain
//! axum route added beside them) the tests catch: one reads the router's
//! source, one probes the running server's paths and methods against the
//! document (`tests/serve/api.rs`).
//!
//! The bodies are schemas: the structs below describe the JSON the handlers
//! build (the handlers keep their `json!`); the test that validates the
//! served document also validates real answers against these schemas, so a
//! drift between the two fails.

// The schema structs are descriptions, never built: their fields are read
// by the derive only.
#![allow(dead_code)]

use std::sync::{Arc, OnceLock};

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{
    Content, OpenApi as Document, Ref, RefOr, ResponseBuilder, SecurityRequirement,
};
use utoipa::{IntoParams, Modify, OpenApi, ToSchema};

use super::App;

/// The document's media type, as OGC API – Common names an OpenAPI
/// definition (version 3.1 here).
pub(crate) const MEDIA_TYPE: &str = "application/vnd.oai.openapi+json;version=3.1";

/// The parts of the document no route declares: its title, the schemas,
/// the token's security scheme.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "mfstream",
        description = "OGC API - Moving Features continuous queries (Part 4) on a registry of \
                       stream engines. With `--token`, every path but `/` requires \
                       `Authorization: Bearer TOKEN` (this document included).",
        license(name = "MIT OR Apache-2.0", identifier = "MIT OR Apache-2.0"),
    ),
    components(schemas(
        Registration,
        Window,
        CQuery,
        QueryList,
        Instant,
        Instants,
        IngestAnswer,
        Exception,
        Link,
        Landing,
        Conformance,
        Engine,
        InstantEvent,
        WindowEvent,
        EndEvent,
        LaggedEvent,
        ResetEvent,
        Position,
        Positions,
        MovingPoint,
        DetectEvent,
        MqttStatus,
        MqttBadSample,
        KafkaStatus,
    )),
    tags(
        (name = "cquery", description = "continuous queries on a temporal property (Part 4)"),
        (name = "ingest", description = "live instants"),
        (name = "positions", description = "continuous queries on a feature's positions (`tgsequence`)"),
        (name = "server", description = "the landing page, the API, the engines, the metrics"),
    ),
)]
struct Base;

/// The document of a server: the routes' operations on the base, the
/// answers every route may give, and the bearer token required everywhere
/// but `/` when the server has one.
fn build(token: bool) -> Document {
    let (_, paths) = super::routes().split_for_parts();
    let mut document = Base::openapi().merge_from(paths);
    Refusals { token }.modify(&mut document);
    if token {
        Bearer.modify(&mut document);
    }
    document
}

/// The refusals that come before any route's own work, declared once in
/// `components.responses` and referenced by every operation (the routes'
/// attributes leave them out): 403 for a `Host` or `Origin` the server does
/// not answer, on every path; with a token, 401 for a request without it,
/// on every path but `/`.
struct Refusals {
    token: bool,
}

/// The names of the refusals in `components.responses`.
const FORBIDDEN: &str = "Forbidden";
const UNAUTHORIZED: &str = "Unauthorized";

impl Modify for Refusals {
    fn modify(&self, document: &mut Document) {
        let refusal = |description: &str| {
            RefOr::T(
                ResponseBuilder::new()
                    .description(description)
                    .content(
                        "application/json",
                        Content::new(Some(Ref::from_schema_name("Exception"))),
                    )
                    .build(),
            )
        };
        let components = document.components.get_or_insert_with(Default::default);
        components.responses.insert(
            FORBIDDEN.into(),
            refusal("a `Host` or `Origin` this server does not answer"),
        );
        if self.token {
            components.responses.insert(
                UNAUTHORIZED.into(),
                refusal("no token, or not the server's"),
            );
        }
        for (path, item) in document.paths.paths.iter_mut() {
            let operations = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ];
            for operation in operations.into_iter().flatten() {
                let answers = &mut operation.responses.responses;
                answers.insert("403".into(), RefOr::Ref(Ref::from_response_name(FORBIDDEN)));
                if self.token && path != "/" {
                    answers.insert(
                        "401".into(),
                        RefOr::Ref(Ref::from_response_name(UNAUTHORIZED)),
                    );
                }
            }
        }
    }
}

/// Adds the bearer scheme, required by every operation but those of `/`.
struct Bearer;

impl Modify for Bearer {
    fn modify(&self, document: &mut Document) {
        let components = document.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        document.security = Some(vec![SecurityRequirement::new::<_, _, &str>("bearer", [])]);
        if let Some(landing) = document.paths.paths.get_mut("/") {
            // An empty list: no requirement (the page is public).
            if let Some(operation) = landing.get.as_mut() {
                operation.security = Some(Vec::new());
            }
        }
    }
}

/// The served JSON, made once per process for each of the two forms.
fn document(token: bool) -> &'static str {
    static WITH: OnceLock<String> = OnceLock::new();
    static WITHOUT: OnceLock<String> = OnceLock::new();
    let cell = if token { &WITH } else { &WITHOUT };
    cell.get_or_init(|| {
        build(token)
            .to_json()
            .expect("an OpenAPI document of strings and maps serialises")
    })
}

/// `GET /api`.
#[utoipa::path(
    get,
    path = "/api",
    tag = "server",
    operation_id = "getApi",
    summary = "this document: the OpenAPI 3.1 definition of the server",
    responses(
        (status = 200, description = "the API definition",
         content_type = "application/vnd.oai.openapi+json;version=3.1", body = Object),
    ),
)]
pub(crate) async fn serve(State(app): State<Arc<App>>) -> Response {
    (
        [(header::CONTENT_TYPE, MEDIA_TYPE)],
        document(app.options.access.token.is_some()),
    )
        .into_response()
}

/// The path parameters of a temporal property.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub(crate) struct PropertyParams {
    /// The collection's id.
    cid: String,
    /// The feature's id.
    fid: String,
    /// The temporal property's name.
    pname: String,
}

/// The path parameters of a query on a temporal property.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub(crate) struct QueryParams {
    /// The collection's id.
    cid: String,
    /// The feature's id.
    fid: String,
    /// The temporal property's name.
    pname: String,
    /// The query's id (32 hex digits).
    qid: String,
}

/// The path parameters of a feature's positions.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub(crate) struct FeatureParams {
    /// The collection's id.
    cid: String,
    /// The feature's id.
    fid: String,
}

/// The path parameters of a query on a feature's positions.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub(crate) struct FeatureQueryParams {
    /// The collection's id.
    cid: String,
    /// The feature's id.
    fid: String,
    /// The query's id (32 hex digits).
    qid: String,
}

/// The landing page's query.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct LandingParams {
    /// `json` for the landing links (as `Accept: application/json` does).
    f: Option<String>,
}

/// A continuous query's registration (Part 4): a lifted operation, a
/// windowed aggregate, or both (the aggregate over the operation's
/// results).
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Registration {
    /// A lifted operation (`ln`, `exp`, `log10`, `ceil`, `floor`, `abs`,
    /// `degrees`, `radians`, `sin`, `cos`, `tan`, `add`, `sub`, `mul`,
    /// `div`), in any case.
    #[schema(example = "mul")]
    operation: Option<String>,
    /// The operation's argument (`add`, `sub`, `mul`, `div`).
    arg: Option<f64>,
    /// An aggregation (`COUNT`, `SUM`, `AVG`, `MIN`, `MAX`, …), in any case.
    aggregation: Option<String>,
    window: Option<Window>,
    /// Whether the windows still open at the end emit partial results
    /// (true when absent; not null).
    #[serde(rename = "emitPartial")]
    #[schema(nullable = false)]
    emit_partial: Option<bool>,
    /// Allowed lateness of a time window, in whole seconds (0 when absent).
    #[schema(minimum = 0)]
    grace: Option<u64>,
    /// The engine to run on (`GET /engines`); the default engine when
    /// absent.
    engine: Option<String>,
    /// The property's type; fixed by its first registration or ingest.
    #[serde(rename = "type")]
    #[schema(
        value_type = Option<String>,
        pattern = "^(TReal|TInteger|TText|TBoolean|TGeogPoint|TGeomPoint)$"
    )]
    property_type: Option<String>,
    /// What a record with no finite result does: `skip` (the default) or
    /// `fail`.
    #[serde(rename = "onError")]
    #[schema(value_type = Option<String>, pattern = "^(skip|fail)$")]
    on_error: Option<String>,
    /// Positions only: the feature's reference system, `EPSG:NNNN`
    /// (planar); geodetic `EPSG:4326` when absent. For `position`, the
    /// output's: `EPSG:3857` on a geodetic feature (or `EPSG:4326` on an
    /// `EPSG:3857` one) reprojects.
    crs: Option<String>,
    /// Positions only: a GeoJSON Polygon or MultiPolygon to detect
    /// `enter`, `exit`, `inside`, `outside`, `cross` against.
    #[schema(value_type = Option<Object>)]
    geofence: Option<serde_json::Value>,
    /// Positions only, with `geofence`: the detections wanted (every one
    /// when absent).
    #[schema(value_type = Option<Vec<String>>)]
    detect: Option<serde_json::Value>,
    /// Positions only, for `distance`: a static GeoJSON geometry.
    #[schema(value_type = Option<Object>)]
    geometry: Option<serde_json::Value>,
}

/// The window of an aggregation.
#[derive(Serialize, ToSchema)]
pub(crate) struct Window {
    /// `TUMBLING`, `HOPPING`, `SLIDING` or `COUNT`, in any case.
    #[serde(rename = "type")]
    kind: String,
    /// The window's size, in `unit`s (or records for `COUNT`).
    size: f64,
    /// A hopping window's step, in `unit`s.
    slide: Option<f64>,
    /// `MILLISECONDS`, `SECONDS`, `MINUTES`, `HOURS` or `DAYS`.
    unit: Option<String>,
}

/// A link.
#[derive(Serialize, ToSchema)]
pub(crate) struct Link {
    rel: String,
    href: String,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    media_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<String>,
}

/// A query's status.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Status {
    Running,
    Completed,
    Stopped,
    Failed,
}

/// A query's kind.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Kind {
    Transform,
    Aggregate,
}

/// The cquery link object of a query, with its live status. `href` and the
/// links are absolute; `channel` is the query's path.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CQuery {
    /// Always `cquery`.
    rel: String,
    query_id: String,
    /// The stream's URL.
    href: String,
    /// The query's path.
    channel: String,
    status: Status,
    /// Always `text/event-stream`.
    #[serde(rename = "type")]
    media_type: String,
    kind: Kind,
    /// The operation or aggregation.
    operation: String,
    engine: String,
    property: String,
    /// The results emitted so far.
    #[schema(minimum = 0)]
    events: u64,
    /// The records skipped (no finite result, `onError: skip`).
    #[schema(minimum = 0)]
    skipped: u64,
    /// CPU time spent on the query's in-process work, in seconds, since it
    /// started (or resumed after a restart): its task on the compute
    /// threads, or an in-process plugin's thread; a bridge job's own
    /// process is not counted.
    #[schema(minimum = 0)]
    cpu_seconds: f64,
    /// Why a failed query failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    /// A query on positions: the feature's reference system (`EPSG:4326`
    /// or `EPSG:NNNN`).
    #[serde(skip_serializing_if = "Option::is_none")]
    crs: Option<String>,
    /// A geofence's fence, or `distance`'s target, as registered (GeoJSON):
    /// in one query's answer (its 201, its `GET`), not in a list's.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    geometry: Option<serde_json::Value>,
    /// `self` and `stream`.
    links: Vec<Link>,
}

/// The queries on a property.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct QueryList {
    queries: Vec<CQuery>,
    #[schema(minimum = 0)]
    number_returned: u64,
    links: Vec<Link>,
}

/// One instant of a temporal property.
#[derive(Serialize, ToSchema)]
pub(crate) struct Instant {
    /// RFC 3339 (or one of the forms the book's "Datetimes accepted" (`docs/src/windows.md`) lists).
    #[schema(example = "2026-01-01T00:00:00Z")]
    datetime: String,
    /// A number (`TReal`, `TInteger`), a string (`TText`) or a boolean
    /// (`TBoolean`).
    value: Scalar,
}

/// A value: a number, a string or a boolean; for a position aggregate,
/// `EXTENT`'s `[minx,miny,maxx,maxy]` or `CENTROID`'s `[x,y]`.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub(crate) enum Scalar {
    Number(f64),
    Text(String),
    Boolean(bool),
    Numbers(Vec<f64>),
}

/// One position of a feature.
#[derive(Serialize, ToSchema)]
pub(crate) struct Position {
    #[schema(example = "2026-01-01T00:00:00Z")]
    datetime: String,
    /// `[x, y]` or `[x, y, z]`: lon/lat in degrees for a geodetic feature.
    #[schema(min_items = 2, max_items = 3)]
    coordinates: Vec<f64>,
}

/// An MF-JSON MovingPoint.
#[derive(Serialize, ToSchema)]
pub(crate) struct MovingPoint {
    /// `MovingPoint`.
    #[serde(rename = "type")]
    kind: String,
    coordinates: Vec<Vec<f64>>,
    datetimes: Vec<String>,
    /// `Linear` only.
    interpolation: Option<String>,
    /// The reference system, as MF-JSON gives it.
    #[schema(value_type = Option<Object>)]
    crs: Option<serde_json::Value>,
}

/// A positions ingest's body: one position, an array of them, or a
/// MovingPoint.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub(crate) enum Positions {
    One(Position),
    Many(Vec<Position>),
    Moving(MovingPoint),
}

/// An ingest's body: one instant, or an array of them.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub(crate) enum Instants {
    One(Instant),
    Many(Vec<Instant>),
}

/// What an ingest took.
#[derive(Serialize, ToSchema)]
pub(crate) struct IngestAnswer {
    /// The instants accepted.
    #[schema(minimum = 0)]
    accepted: u64,
    /// The queries they were handed to.
    #[schema(minimum = 0)]
    queries: u64,
}

/// An error, as OGC API exceptions are shaped.
#[derive(Serialize, ToSchema)]
pub(crate) struct Exception {
    /// `InvalidParameterValue`, `UnprocessableEntity`, `NotFound`,
    /// `MethodNotAllowed`, `Unauthorized`, `ServiceUnavailable`, …
    code: String,
    /// What went wrong, and what to do.
    description: String,
    /// The request field at fault, when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<String>,
    /// The instants of an ingest accepted before it failed, when it says.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0)]
    accepted: Option<u64>,
}

/// The landing links.
#[derive(Serialize, ToSchema)]
pub(crate) struct Landing {
    title: String,
    description: String,
    /// `self`, `alternate` (the page), `service-desc` (`/api`),
    /// `conformance`, `engines`, `metrics`.
    links: Vec<Link>,
}

/// The conformance classes.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Conformance {
    conforms_to: Vec<String>,
}

/// An engine of the registry, as `mfstream engines --json` prints it.
#[derive(Serialize, ToSchema)]
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

/// `GET /ingest/mqtt`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MqttStatus {
    broker: String,
    client_id: String,
    topics: Vec<String>,
    connected: bool,
    subscribed: bool,
    connects: u64,
    last_error: Option<String>,
    messages: u64,
    acknowledged: u64,
    instants: u64,
    duplicates: u64,
    retries: u64,
    /// Bad messages, per reason.
    #[schema(value_type = Object)]
    bad: std::collections::BTreeMap<String, u64>,
    /// The last bad messages, newest first.
    bad_samples: Vec<MqttBadSample>,
}

/// `GET /ingest/kafka`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KafkaStatus {
    brokers: String,
    group: String,
    topics: Vec<String>,
    /// Partitions the group assigned to this server now.
    assigned_partitions: u64,
    /// Rebalances that assigned this server partitions.
    assignments: u64,
    /// Whether the brokers can be reached: `null` until a connection
    /// succeeded or every one failed. A change is logged once; the
    /// failures in between are counted in `brokerErrors`.
    reachable: Option<bool>,
    /// When `reachable` took its value (RFC 3339); `null` with it.
    reachable_since: Option<String>,
    /// Errors librdkafka reported about reaching the brokers (a refused
    /// connection, every broker down), since the start.
    broker_errors: u64,
    last_error: Option<String>,
    /// Records read, those read again included.
    records: u64,
    /// Records whose offsets were committed.
    committed: u64,
    instants: u64,
    duplicates: u64,
    retries: u64,
    /// Bad records, per reason.
    #[schema(value_type = Object)]
    bad: std::collections::BTreeMap<String, u64>,
    /// The last bad records, newest first.
    bad_samples: Vec<MqttBadSample>,
}

/// A bad MQTT message (or Kafka record).
#[derive(Serialize, ToSchema)]
pub(crate) struct MqttBadSample {
    at: String,
    topic: String,
    reason: String,
    detail: String,
    payload: String,
}

/// `event: end`: the query ended; the stream's last event.
#[derive(Serialize, ToSchema)]
pub(crate) struct EndEvent {
    status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

/// `event: lagged`: the subscriber fell behind the replay buffer.
#[derive(Serialize, ToSchema)]
pub(crate) struct LaggedEvent {
    #[schema(minimum = 1)]
    missed: u64,
}

/// `event: reset`: the `Last-Event-ID` given is ahead of the query.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResetEvent {
    #[schema(minimum = 0)]
    last_event_id: u64,
}

/// The description of the stream's events, for its operation.
pub(crate) const STREAM: &str = "The results as Server-Sent Events. The stream opens with \
`retry: 1000`. Each result is `event: instant` (data: `InstantEvent`) or `event: window` (data: \
`WindowEvent`) or, for a geofence, `event: detect` (data: `DetectEvent`), with `id:` 1, 2, 3, \
… per query. A subscriber that fell behind the replay buffer gets `event: lagged` (data: \
`LaggedEvent`); a `Last-Event-ID` ahead of the query gets `event: reset` first (data: \
`ResetEvent`, no `id:`). An idle stream gets a `: keep-alive` comment. The last event is `event: end` (data: `EndEvent`), then the response ends.";

#[cfg(test)]
mod tests {
    /// The router is declared with `routes!` only: a plain `.route(…)` (or a
    /// service, or a merged axum router) would answer a path the document
    /// does not list. A crude but sure check of the one function that
    /// declares the routes.
    #[test]
    fn every_route_is_declared_with_its_documentation() {
        let source = include_str!("lib.rs");
        let start = source
            .find("pub(crate) fn routes()")
            .expect("lib.rs declares the routes in `routes()`");
        let body = &source[start..];
        let body = &body[..body.find("\n}\n").expect("the function ends")];
        assert!(body.contains(".routes(routes!("), "{body}");
        for plain in [".route(", ".route_service(", ".nest_service(", ".merge("] {
            assert!(
                !body.contains(plain),
                "routes() declares a route with `{plain}`: declare it with `.routes(routes!(…))` \
                 and a #[utoipa::path] on its handler, so that /api documents it"
            );
        }
        // The sources' routes: each kind's, in its `KIND`.
        for (file, source) in [
            ("sources/http.rs", include_str!("sources/http.rs")),
            ("sources/mqtt/mod.rs", include_str!("sources/mqtt/mod.rs")),
            ("sources/kafka/mod.rs", include_str!("sources/kafka/mod.rs")),
        ] {
            let start = source
                .find("    routes: |router| ")
                .unwrap_or_else(|| panic!("{file} declares its kind's routes"));
            let line = &source[start..];
            let line = &line[..line.find('\n').expect("the line ends")];
            for plain in [".route(", ".route_service(", ".nest_service(", ".merge("] {
                assert!(
                    !line.contains(plain),
                    "{file} declares a route with `{plain}`: declare it with \
                     `.routes(routes!(…))` and a #[utoipa::path] on its handler"
                );
            }
        }
        let router = &source[source.find("fn router(").expect("mod.rs has router()")..];
        let router = &router[..router.find("\n}\n").expect("the function ends")];
        for plain in [".route(", ".route_service(", ".nest", ".merge("] {
            assert!(
                !router.contains(plain),
                "router() adds a route with `{plain}` past routes(): /api would not list it"
            );
        }
    }

    /// Every operation has an id, a tag, a summary and a 2xx answer, and
    /// with a token every one but the landing page's requires it.
    #[test]
    fn every_operation_is_described() {
        let document: serde_json::Value =
            serde_json::from_str(super::document(true)).expect("the document is JSON");
        let paths = document["paths"].as_object().expect("paths");
        assert!(paths.contains_key("/api"), "{paths:?}");
        for (path, item) in paths {
            for (method, operation) in item.as_object().expect("a path item") {
                let at = format!("{method} {path}");
                assert!(operation["operationId"].is_string(), "{at}");
                assert!(operation["tags"].is_array(), "{at}");
                assert!(operation["summary"].is_string(), "{at}");
                let responses = operation["responses"].as_object().expect("responses");
                assert!(responses.keys().any(|s| s.starts_with('2')), "{at}");
                let open = operation["security"] == serde_json::json!([]);
                assert_eq!(open, path == "/", "{at}");
            }
        }
        assert_eq!(document["security"], serde_json::json!([{"bearer": []}]));
    }
}

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
//! The bodies are the wire model's types (`super::wire`): a handler returns
//! the type its attribute names, so an answer and its schema are one
//! declaration.

use std::sync::{Arc, OnceLock};

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{
    Content, OpenApi as Document, Ref, RefOr, ResponseBuilder, SecurityRequirement,
};
use utoipa::{IntoParams, Modify, OpenApi};

use super::App;
use super::wire::{
    CQuery, Conformance, DetectEvent, EndEvent, Engine, Exception, IngestAnswer, Instant,
    InstantEvent, Instants, LaggedEvent, Landing, Link, MovingPoint, Position, Positions,
    QueryList, Registration, ResetEvent, Window, WindowEvent,
};

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
#[expect(
    dead_code,
    reason = "the extractors (request.rs) read the path; this describes it"
)]
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
#[expect(
    dead_code,
    reason = "the extractors (request.rs) read the path; this describes it"
)]
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
#[expect(
    dead_code,
    reason = "the extractors (request.rs) read the path; this describes it"
)]
pub(crate) struct FeatureParams {
    /// The collection's id.
    cid: String,
    /// The feature's id.
    fid: String,
}

/// The path parameters of a query on a feature's positions.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[expect(
    dead_code,
    reason = "the extractors (request.rs) read the path; this describes it"
)]
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
#[expect(
    dead_code,
    reason = "the handler reads the query itself; this describes it"
)]
pub(crate) struct LandingParams {
    /// `json` for the landing links (as `Accept: application/json` does).
    f: Option<String>,
}

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

//! The landing page (`/`: an HTML page for people, JSON links for
//! clients) and the conformance classes.

use axum::Json;
use axum::http::{HeaderMap, Uri, header};
use axum::response::{Html, IntoResponse, Response};
use serde_json::json;

/// The page: register a query, push instants, watch the results as a line
/// chart. Static, with no build step.
const PAGE: &str = include_str!("page.html");

/// `GET /`: the page, or the landing links as JSON for `?f=json` or
/// `Accept: application/json`.
pub(crate) async fn landing(uri: Uri, headers: HeaderMap) -> Response {
    let wants_json = uri
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "f=json"))
        || headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("application/json") && !v.contains("text/html"));
    if !wants_json {
        return Html(PAGE).into_response();
    }
    Json(json!({
        "title": "mfstream",
        "description": "OGC API - Moving Features continuous queries (Part 4) on a registry of stream engines",
        "links": [
            {"rel": "self", "href": "/?f=json", "type": "application/json"},
            {"rel": "alternate", "href": "/", "type": "text/html", "title": "the page"},
            {"rel": "conformance", "href": "/conformance", "type": "application/json"},
            {"rel": "engines", "href": "/engines", "type": "application/json"},
        ],
    }))
    .into_response()
}

/// `GET /conformance`.
pub(crate) async fn conformance() -> Response {
    Json(json!({
        "conformsTo": [
            "http://www.opengis.net/spec/ogcapi-common-1/1.0/conf/core",
            "http://www.opengis.net/spec/ogcapi-common-1/1.0/conf/json",
            "http://www.opengis.net/spec/ogcapi-movingfeatures-1/1.0/conf/common",
            "http://www.opengis.net/spec/ogcapi-movingfeatures-4/1.0/conf/cquery",
        ],
    }))
    .into_response()
}

//! The landing page (`/`: an HTML page for people, JSON links for
//! clients) and the conformance classes.

use axum::Json;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{Html, IntoResponse, Response};
use serde_json::json;

use super::api::{Conformance, Exception, Landing, LandingParams};
use super::problem::Problem;

/// The page: register a query, push instants, watch the results as a line
/// chart. Static, with no build step.
const PAGE: &str = include_str!("page.html");

/// The page with its policy: its one inline script and one inline style
/// run by a nonce fresh for each answer, it talks to its own origin only,
/// loads nothing else, and no other site may frame it or take a form's
/// submission from it.
fn page() -> Response {
    let mut nonce = [0u8; 16];
    if let Err(e) = getrandom::fill(&mut nonce) {
        return Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "NoRandomness",
            format!("cannot make the page's nonce: {e}"),
        )
        .into_response();
    }
    let nonce: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
    let html = PAGE
        .replacen("<style>", &format!("<style nonce=\"{nonce}\">"), 1)
        .replacen("<script>", &format!("<script nonce=\"{nonce}\">"), 1);
    let policy = format!(
        "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; \
         connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
         frame-ancestors 'none'"
    );
    let mut response = Html(html).into_response();
    if let Ok(policy) = HeaderValue::from_str(&policy) {
        response
            .headers_mut()
            .insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    response
}

/// `GET /`: the page, or the landing links as JSON for `?f=json` or
/// `Accept: application/json`.
#[utoipa::path(
    get,
    path = "/",
    tag = "server",
    operation_id = "getLanding",
    summary = "the page, or the landing links (`?f=json`, `Accept: application/json`)",
    params(LandingParams),
    responses(
        (status = 200, description = "the page (HTML) or the landing links (JSON)", content(
            (String = "text/html"),
            (Landing = "application/json"),
        )),
        (status = 403, description = "a `Host` or `Origin` this server does not answer", body = Exception),
    ),
)]
pub(crate) async fn landing(uri: Uri, headers: HeaderMap) -> Response {
    let wants_json = uri
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "f=json"))
        || headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("application/json") && !v.contains("text/html"));
    if !wants_json {
        return page();
    }
    Json(json!({
        "title": "mfstream",
        "description": "OGC API - Moving Features continuous queries (Part 4) on a registry of stream engines",
        "links": [
            {"rel": "self", "href": "/?f=json", "type": "application/json"},
            {"rel": "alternate", "href": "/", "type": "text/html", "title": "the page"},
            {"rel": "service-desc", "href": "/api", "type": super::api::MEDIA_TYPE, "title": "the API definition (OpenAPI 3.1)"},
            {"rel": "conformance", "href": "/conformance", "type": "application/json"},
            {"rel": "engines", "href": "/engines", "type": "application/json"},
            {"rel": "metrics", "href": "/metrics", "type": "text/plain; version=0.0.4"},
        ],
    }))
    .into_response()
}

/// `GET /conformance`.
#[utoipa::path(
    get,
    path = "/conformance",
    tag = "server",
    operation_id = "getConformance",
    summary = "the conformance classes",
    responses(
        (status = 200, description = "the classes", body = Conformance),
        (status = 401, description = "no token, or not the server's", body = Exception),
        (status = 403, description = "a `Host` or `Origin` this server does not answer", body = Exception),
    ),
)]
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

#[cfg(test)]
mod tests {
    /// The nonce covers every script and style of the page only if there is
    /// one of each, and no inline handler or style attribute (which no
    /// nonce allows).
    #[test]
    fn the_page_has_one_script_one_style_and_no_inline_handlers() {
        let page = super::PAGE;
        assert_eq!(page.matches("<script").count(), 1);
        assert_eq!(page.matches("<style").count(), 1);
        assert_eq!(page.matches("<script>").count(), 1);
        assert_eq!(page.matches("<style>").count(), 1);
        let markup = &page[..page.find("<script>").unwrap()];
        for attribute in [
            " onclick=",
            " onload=",
            " onchange=",
            " style=",
            "javascript:",
        ] {
            assert!(!markup.contains(attribute), "{attribute}");
        }
    }
}

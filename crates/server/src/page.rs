//! The landing page (`/`: an HTML page for people, JSON links for
//! clients) and the conformance classes. The page charts a property's
//! results and maps a feature's positions, over map tiles from the
//! `--tiles` template ([`Tiles`]) when there is one.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{Html, IntoResponse, Response};

use super::api::LandingParams;
use super::problem::Problem;
use super::wire::{Answer, Conformance, Landing, Link};
use mfstream_model::origin::Origin;

use super::{App, ServeError};

/// The page: register a query, push instants, watch the results as a line
/// chart, and a feature's positions on a map. Static, with no build step.
const PAGE: &str = include_str!("page.html");

/// The longest `--tiles` template taken: it is put on the page, and its
/// origin in the page's policy header.
pub(crate) const MAX_TILES_TEMPLATE: usize = 512;

/// A `--tiles` template (`https://tile.example/{z}/{x}/{y}.png`), checked:
/// `http` or `https`, a plain `host[:port]` (no user, nothing a policy
/// header or the page's markup could take for syntax), then visible ASCII
/// with `{z}`, `{x}` and `{y}` once each and no other braces.
#[derive(Debug, Clone)]
pub(crate) struct Tiles {
    template: String,
    /// `scheme://host[:port]`, which the page's policy lets it load images
    /// from.
    origin: String,
}

impl Tiles {
    pub(crate) fn parse(template: &str, origin: &Origin) -> Result<Tiles, ServeError> {
        let bad = |why: String| ServeError::BadTiles {
            option: origin.name("access.tiles"),
            value: quote_cut(template),
            why,
        };
        const FORM: &str = "give a URL template such as https://tile.example/{z}/{x}/{y}.png";
        if template.len() > MAX_TILES_TEMPLATE {
            return Err(bad(format!(
                "{} bytes; a template is at most {MAX_TILES_TEMPLATE}",
                template.len()
            )));
        }
        if let Some(c) = template
            .chars()
            .find(|c| !c.is_ascii_graphic() || "\"'<>\\`^|".contains(*c))
        {
            return Err(bad(format!(
                "{c:?} is not taken in a template (percent-encode it): {FORM}"
            )));
        }
        let (scheme, rest) = template
            .split_once("://")
            .filter(|(scheme, _)| *scheme == "http" || *scheme == "https")
            .ok_or_else(|| bad(format!("not an http or https URL: {FORM}")))?;
        let (authority, path) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
        if super::browser::split_authority(authority).is_none() {
            return Err(bad(format!(
                "{authority:?} is not a host[:port] (no user, no placeholder): {FORM}"
            )));
        }
        for placeholder in ["{z}", "{x}", "{y}"] {
            if path.matches(placeholder).count() != 1 {
                return Err(bad(format!("{placeholder} must appear once: {FORM}")));
            }
        }
        if path.matches(['{', '}']).count() != 6 {
            return Err(bad(format!(
                "the only placeholders are {{z}}, {{x}} and {{y}}: {FORM}"
            )));
        }
        Ok(Tiles {
            template: template.to_owned(),
            origin: format!("{scheme}://{}", authority.to_ascii_lowercase()),
        })
    }
}

/// `text` quoted for an error, cut to its first 64 characters.
fn quote_cut(text: &str) -> String {
    match text.char_indices().nth(64) {
        Some((end, _)) => format!("{:?}…", &text[..end]),
        None => format!("{text:?}"),
    }
}

/// `text` for an HTML attribute's value.
fn attribute(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The page with its policy: its one inline script and one inline style
/// run by a nonce fresh for each answer, it talks to its own origin only,
/// loads images only from it (and the `--tiles` origin), nothing else, and
/// no other site may frame it or take a form's submission from it.
fn page(tiles: Option<&Tiles>) -> Response {
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
    let mut html = PAGE
        .replacen("<style>", &format!("<style nonce=\"{nonce}\">"), 1)
        .replacen("<script>", &format!("<script nonce=\"{nonce}\">"), 1);
    let mut images = "'self'".to_owned();
    if let Some(tiles) = tiles {
        html = html.replacen(
            "<title>",
            &format!(
                "<meta name=\"mfstream-tiles\" content=\"{}\">\n<title>",
                attribute(&tiles.template)
            ),
            1,
        );
        images = format!("'self' {}", tiles.origin);
    }
    let policy = format!(
        "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; \
         connect-src 'self'; img-src {images}; base-uri 'none'; form-action 'none'; \
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
    ),
)]
pub(crate) async fn landing(State(app): State<Arc<App>>, uri: Uri, headers: HeaderMap) -> Response {
    let wants_json = uri
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "f=json"))
        || headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("application/json") && !v.contains("text/html"));
    if !wants_json {
        return page(app.tiles.as_ref());
    }
    let json = "application/json";
    Answer(Landing {
        title: "mfstream".to_owned(),
        description: "OGC API - Moving Features continuous queries (Part 4) on a registry of \
                      stream engines"
            .to_owned(),
        links: vec![
            Link::new("self", "/?f=json", json),
            Link::new("alternate", "/", "text/html").titled("the page"),
            Link::new("service-desc", "/api", super::api::MEDIA_TYPE)
                .titled("the API definition (OpenAPI 3.1)"),
            Link::new("conformance", "/conformance", json),
            Link::new("engines", "/engines", json),
            Link::new("metrics", "/metrics", "text/plain; version=0.0.4"),
        ],
    })
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
    ),
)]
pub(crate) async fn conformance() -> Answer<Conformance> {
    Answer(Conformance {
        conforms_to: [
            "http://www.opengis.net/spec/ogcapi-common-1/1.0/conf/core",
            "http://www.opengis.net/spec/ogcapi-common-1/1.0/conf/json",
            "http://www.opengis.net/spec/ogcapi-movingfeatures-1/1.0/conf/common",
            "http://www.opengis.net/spec/ogcapi-movingfeatures-4/1.0/conf/cquery",
        ]
        .map(str::to_owned)
        .to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::{MAX_TILES_TEMPLATE, Origin, Tiles};

    /// The command line's `--tiles`, as messages name it.
    fn tiles_flag() -> Origin {
        Origin::flag("--tiles")
    }

    #[test]
    fn a_tiles_template_gives_its_origin_to_the_pages_policy() {
        let tiles = Tiles::parse(
            "https://Tile.OpenStreetMap.org/{z}/{x}/{y}.png",
            &tiles_flag(),
        )
        .unwrap();
        assert_eq!(tiles.origin, "https://tile.openstreetmap.org");
        let tiles = Tiles::parse(
            "http://127.0.0.1:8089/t?z={z}&x={x}&y={y}&key=a%20b",
            &tiles_flag(),
        )
        .unwrap();
        assert_eq!(tiles.origin, "http://127.0.0.1:8089");
        assert_eq!(
            tiles.template,
            "http://127.0.0.1:8089/t?z={z}&x={x}&y={y}&key=a%20b"
        );
        let tiles = Tiles::parse("https://[::1]:8443/{y}/{x}/{z}", &tiles_flag()).unwrap();
        assert_eq!(tiles.origin, "https://[::1]:8443");
    }

    #[test]
    fn a_tiles_template_that_is_not_a_plain_url_with_z_x_y_is_refused_naming_why() {
        let long = format!(
            "https://t.example/{{z}}/{{x}}/{{y}}?{}",
            "k".repeat(MAX_TILES_TEMPLATE)
        );
        for (template, why) in [
            (long.as_str(), "at most 512"),
            ("ftp://t.example/{z}/{x}/{y}", "not an http or https URL"),
            ("javascript:alert(1)//{z}{x}{y}", "not an http or https URL"),
            ("t.example/{z}/{x}/{y}", "not an http or https URL"),
            ("https://t.example/{z}/{x}", "{y} must appear once"),
            ("https://t.example/{z}/{x}/{y}/{z}", "{z} must appear once"),
            ("https://t.example/{z}/{x}/{y}{s}", "the only placeholders"),
            ("https://{s}.t.example/{z}/{x}/{y}", "not a host[:port]"),
            ("https://user@t.example/{z}/{x}/{y}", "not a host[:port]"),
            (
                "https://t.example;img-src */{z}/{x}/{y}",
                "' ' is not taken",
            ),
            ("https://t.example;x/{z}/{x}/{y}", "not a host[:port]"),
            ("https:///{z}/{x}/{y}", "not a host[:port]"),
            (
                "https://t.example/{z}/{x}/{y}\"><script>",
                "'\"' is not taken",
            ),
            ("https://t.example/{z}/{x}/{y}.png\n", "'\\n' is not taken"),
            ("https://t.example/é/{z}/{x}/{y}", "'é' is not taken"),
        ] {
            let e = Tiles::parse(template, &tiles_flag())
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("--tiles \""), "{e}");
            assert!(e.contains(why), "{template}: {e}");
            assert!(e.len() < 300, "{e}");
        }
    }

    #[test]
    fn the_pages_policy_lets_it_load_tiles_from_the_tiles_origin_only() {
        let policy = |tiles: Option<&Tiles>| {
            let response = super::page(tiles);
            let policy = &response.headers()[axum::http::header::CONTENT_SECURITY_POLICY];
            policy.to_str().unwrap().to_owned()
        };
        assert!(policy(None).contains("img-src 'self';"), "{}", policy(None));
        let tiles = Tiles::parse(
            "https://tile.example:8443/{z}/{x}/{y}.png?a=1&b='",
            &tiles_flag(),
        )
        .ok();
        assert!(tiles.is_none(), "a quote is refused");
        let tiles = Tiles::parse(
            "https://tile.example:8443/{z}/{x}/{y}.png?a=1&b=2",
            &tiles_flag(),
        )
        .unwrap();
        let with = policy(Some(&tiles));
        assert!(
            with.contains("img-src 'self' https://tile.example:8443;"),
            "{with}"
        );
        assert!(with.contains("connect-src 'self';"), "{with}");
    }

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

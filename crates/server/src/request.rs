//! What a request brings, bounded and checked before a handler trusts it:
//! its URI, its path ids, and its body.
//!
//! Every rejection is a [`Problem`], so the client gets the same JSON error
//! as from the handlers (axum's own rejections are plain text).

use std::sync::Arc;
use std::time::Duration;

use axum::body::HttpBody as _;
use axum::body::{Body, Bytes};
use axum::extract::{FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use http_body_util::BodyExt;

use super::App;
use super::inflight::Held;
use super::metrics::Reason;
use super::problem::Problem;
use mfstream_model::PropertyPath;
use mfstream_model::origin::Value;

/// The longest request target (path and query), in bytes: a longer one is
/// answered 414.
pub(crate) const MAX_URI: usize = 8 * 1024;

/// The longest id in a path (collection, feature, property, query), in
/// bytes once percent-decoded.
pub(crate) const MAX_ID: usize = 256;

/// Refuses, before any handler runs and before the body is read, a URI over
/// [`MAX_URI`] (414) and a declared `Content-Length` over `--max-body`
/// (413, at once: the body is never waited for).
///
/// An error answered to a request with a body says `Connection: close`: the
/// body may not have been read (a path refused first), and then the
/// connection cannot carry another request; hyper closes it, and the
/// client is told.
pub(crate) async fn bound(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let uri = request
        .uri()
        .path_and_query()
        .map_or(0, |pq| pq.as_str().len());
    if uri > MAX_URI {
        return Problem::new(
            StatusCode::URI_TOO_LONG,
            "URITooLong",
            format!("the URI is {uri} bytes; at most {MAX_URI} are accepted"),
        )
        .closing()
        .into_response();
    }
    if let Some(len) = declared_length(request.headers())
        && len > *app.options.limits.max_body as u64
    {
        // Refused before its route: an ingest is counted here.
        if request.method() == Method::POST && request.uri().path().ends_with("/ingest") {
            app.sources.http().refused(Reason::TooLarge);
        }
        return too_large(&app.options.limits.max_body).into_response();
    }
    let has_body = declared_length(request.headers()).is_some_and(|n| n > 0)
        || request.headers().contains_key(header::TRANSFER_ENCODING);
    let mut response = next.run(request).await;
    let status = response.status();
    if has_body && (status.is_client_error() || status.is_server_error()) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// 413 for a body over `max`, naming it as its origin does.
fn too_large(max: &Value<usize>) -> Problem {
    Problem::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "PayloadTooLarge",
        format!("body: over {} bytes ({})", **max, max.name("max_body")),
    )
    .closing()
}

/// Refuses (415) a body whose `Content-Type` is not one of `accepted`
/// (parameters such as `; charset=utf-8` allowed), is missing, or is given
/// twice (which one counts would be a guess): so an HTML form, which can
/// only send `text/plain`, `application/x-www-form-urlencoded` or
/// `multipart/form-data`, cannot send one, and a page can send one only
/// through `fetch`, which the browser then checks with the server first
/// (CORS).
///
/// Called before the body is read: the answer closes the connection.
pub(crate) fn require_content_type(headers: &HeaderMap, accepted: &[&str]) -> Result<(), Problem> {
    let wanted = accepted.join(" or ");
    if headers
        .get_all(header::CONTENT_TYPE)
        .iter()
        .nth(1)
        .is_some()
    {
        return Err(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!("the body has more than one Content-Type: send one, {wanted}"),
        )
        .closing());
    }
    let given = headers
        .get(header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()));
    let essence = given
        .as_deref()
        .map(|v| v.split(';').next().unwrap_or_default().trim());
    if essence.is_some_and(|e| accepted.iter().any(|a| a.eq_ignore_ascii_case(e))) {
        return Ok(());
    }
    let description = match given {
        Some(given) => {
            let given: String = given.chars().take(128).collect();
            format!("Content-Type {given:?} is not accepted here: send {wanted}")
        }
        None => format!("the body has no Content-Type: send {wanted}"),
    };
    Err(Problem::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "UnsupportedMediaType",
        description,
    )
    .closing())
}

/// Reads a request body whole: at most `--max-body` bytes (413 beyond), all
/// of it within `--body-timeout-ms` (408 after), its bytes held under
/// `--max-inflight-bytes` from the start (503 past it) until the returned
/// [`Held`] is dropped: keep it until the call the body carries is done.
pub(crate) async fn read_body(app: &App, body: Body) -> Result<(Bytes, Held), Problem> {
    let timeout = &app.options.limits.body_timeout;
    let wait: Duration = **timeout;
    match tokio::time::timeout(wait, collect(app, body)).await {
        Ok(read) => read,
        Err(_elapsed) => Err(Problem::new(
            StatusCode::REQUEST_TIMEOUT,
            "RequestTimeout",
            format!(
                "body: not received within {} ms ({})",
                wait.as_millis(),
                timeout.name("body_timeout")
            ),
        )
        .closing()),
    }
}

/// The body's bytes, held as they come: a declared length at once.
async fn collect(app: &App, mut body: Body) -> Result<(Bytes, Held), Problem> {
    let max = &app.options.limits.max_body;
    let mut held = app.inflight.hold();
    let declared = body.size_hint().exact().map(|n| n as usize);
    if let Some(n) = declared {
        if n > **max {
            return Err(too_large(max));
        }
        held.cover(n)?;
    }
    let mut buf = BytesMut::with_capacity(declared.unwrap_or(0));
    while let Some(frame) = body.frame().await {
        let frame = frame
            .map_err(|e| Problem::invalid("body", format!("cannot be read: {e}")).closing())?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if buf.len() + data.len() > **max {
            return Err(too_large(max));
        }
        held.cover(buf.len() + data.len())?;
        buf.extend_from_slice(&data);
    }
    Ok((buf.freeze(), held))
}

/// The temporal property a path names,
/// `/collections/{cid}/items/{fid}/tproperties/{pname}`, or the feature's
/// positions, `/collections/{cid}/items/{fid}/tgsequence` (a path with no
/// `{pname}`).
#[derive(Debug)]
pub(crate) struct PropertyAt(pub(crate) PropertyPath);

/// A query a path names: the property's path, then `/queries/{qid}`.
#[derive(Debug)]
pub(crate) struct QueryAt(pub(crate) PropertyPath, pub(crate) String);

/// The ids of a path, by the names the router gives them (`cid`, `fid`,
/// `pname`, `qid`), each checked.
async fn ids<S: Send + Sync>(
    parts: &mut Parts,
    state: &S,
) -> Result<(PropertyPath, Option<String>), Problem> {
    let Path(params) = Path::<Vec<(String, String)>>::from_request_parts(parts, state)
        .await
        .map_err(|e| Problem::invalid("path", e.body_text()))?;
    let (mut collection, mut feature, mut property, mut query) = (None, None, None, None);
    for (name, id) in params {
        let (slot, what) = match name.as_str() {
            "cid" => (&mut collection, "collection"),
            "fid" => (&mut feature, "feature"),
            "pname" => (&mut property, "property"),
            _ => (&mut query, "query"),
        };
        check_id(what, &id)?;
        *slot = Some(id);
    }
    let (Some(collection), Some(feature)) = (collection, feature) else {
        return Err(Problem::invalid("path", "no collection and feature ids"));
    };
    let key = match property {
        // Empty is a feature's positions' name in the table (see
        // `PropertyPath`): never a property's.
        Some(property) if property.is_empty() => {
            return Err(Problem::invalid(
                "path",
                "the property id is empty: name a property",
            ));
        }
        Some(property) => PropertyPath {
            collection,
            feature,
            property,
        },
        None => PropertyPath::sequence(collection, feature),
    };
    Ok((key, query))
}

impl<S: Send + Sync> FromRequestParts<S> for PropertyAt {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Problem> {
        Ok(PropertyAt(ids(parts, state).await?.0))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for QueryAt {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Problem> {
        match ids(parts, state).await? {
            (key, Some(query)) => Ok(QueryAt(key, query)),
            (_, None) => Err(Problem::invalid("path", "no query id")),
        }
    }
}

fn check_id(name: &str, id: &str) -> Result<(), Problem> {
    match id_fault(id) {
        Some(why) => Err(Problem::invalid("path", format!("the {name} id {why}"))),
        None => Ok(()),
    }
}

/// Why `id` cannot be an id of a path (a collection's, a feature's, a
/// property's, a query's), if it cannot: over [`MAX_ID`] bytes, or `.` or
/// `..`. Those two are dot-segments, which every client removes from a
/// link before requesting it (RFC 3986, section 5.2.4; `%2E` is `.` there
/// too, section 6.2.2.2), so no `href`, `links` or `Location` could name
/// them: encoding cannot help.
pub(crate) fn id_fault(id: &str) -> Option<String> {
    if id.len() > MAX_ID {
        return Some(format!("is {} bytes; ids are at most {MAX_ID}", id.len()));
    }
    if id == "." || id == ".." {
        return Some(format!(
            "is {id:?}, a dot-segment that clients remove from every link (%2E too): \
             choose another id"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use mfstream_model::origin::{Origin, Value};

    #[test]
    fn a_body_over_the_bound_names_the_bound_as_its_origin_does() {
        let cli = format!(
            "{:?}",
            super::too_large(&Value::new(10, Origin::flag("--max-body")))
        );
        assert!(cli.contains("body: over 10 bytes (--max-body)"), "{cli}");
        let embedded = format!("{:?}", super::too_large(&10.into()));
        assert!(
            embedded.contains("body: over 10 bytes (the embedding program's max_body)"),
            "{embedded}"
        );
    }
}

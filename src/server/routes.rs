//! The routes of OGC API – Moving Features Part 4 continuous queries: the
//! handlers and the JSON they answer.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::aggregate::Aggregation;
use crate::engine::Source;
use crate::spec::{QueryKind, Registration};
use crate::vocab::{PropertyType, QueryStatus};

use super::App;
use super::fanout::Fanout;
use super::ingest;
use super::problem::Problem;
use super::table::{Feed, Property, PropertyKey, Query, new_id};

/// The path parameters of a property.
pub(crate) type PropertyPath = Path<(String, String, String)>;
/// The path parameters of a query.
pub(crate) type QueryPath = Path<(String, String, String, String)>;

fn key((collection, feature, property): (String, String, String)) -> PropertyKey {
    PropertyKey {
        collection,
        feature,
        property,
    }
}

/// The property at `key`, or 503 when the server knows too many.
fn property(app: &App, key: &PropertyKey) -> Result<Arc<Property>, Problem> {
    let max = app.options.max_properties;
    app.table.property(key, max).ok_or_else(|| {
        Problem::unavailable(format!(
            "the server knows {max} temporal properties already (--max-properties)"
        ))
    })
}

/// A request body, or the reason it could not be read (too large: 413) in
/// the same `{"code","description"}` shape as every other error.
fn read_body(body: Result<Bytes, BytesRejection>) -> Result<Bytes, Problem> {
    body.map_err(|e| {
        let code = if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            "PayloadTooLarge"
        } else {
            "InvalidBody"
        };
        Problem::new(e.status(), code, format!("body: {}", e.body_text()))
    })
}

/// `POST P/queries`: registers a continuous query.
pub(crate) async fn register(
    State(app): State<Arc<App>>,
    Path(path): PropertyPath,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let body = read_body(body)?;
    if app.table.is_closing() {
        return Err(Problem::unavailable("the server is shutting down".into()));
    }
    let text = std::str::from_utf8(&body).map_err(|e| Problem::invalid("body", e))?;
    let registration = Registration::from_json(text)?;
    let key = key(path);
    let property = property(&app, &key)?;
    let mut state = property.state.lock().await;
    let property_type = match (registration.property_type, state.property_type) {
        (Some(given), Some(known)) if given != known => {
            return Err(Problem::unprocessable(
                "type",
                format!("the property {} is {known}, not {given}", key.property),
            ));
        }
        (Some(t), _) | (None, Some(t)) => t,
        (None, None) => PropertyType::TReal,
    };
    if registration.operation.is_some() && !property_type.is_numeric() {
        return Err(Problem::unprocessable(
            "operation",
            format!(
                "transforms take numbers, but the property {} is {property_type}",
                key.property
            ),
        ));
    }
    if let Some(aggregation) = registration
        .aggregation
        .as_deref()
        .and_then(Aggregation::parse)
        && !Aggregation::allowed_for(property_type).contains(&aggregation)
    {
        return Err(Problem::unprocessable(
            "aggregation",
            format!(
                "{aggregation} is not defined for the property {}, which is {property_type}",
                key.property
            ),
        ));
    }
    let engine_name = registration.engine.clone();
    let mut spec = registration.into_spec(&key.property, property_type)?;
    let engine = match &engine_name {
        Some(name) => app.registry.get(name)?,
        None => app.registry.get_default()?,
    };
    if app.table.len() >= app.options.max_queries {
        return Err(Problem::unavailable(format!(
            "the server holds at most {} queries (--max-queries): delete one first",
            app.options.max_queries
        )));
    }
    let id = new_id().map_err(|e| {
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "NoRandomness",
            format!("cannot make a query id: {e}"),
        )
    })?;
    spec.id = id.clone();
    let operation = spec.operation_name().to_owned();
    let kind = match spec.kind {
        QueryKind::Transform(_) => "transform",
        QueryKind::Aggregate { .. } => "aggregate",
    };
    let (sender, source) = Source::channel(app.options.source_buffer);
    let handle = engine.submit(spec, source).await?;
    state.property_type = Some(property_type);
    let query = Arc::new(Query {
        id,
        key,
        engine: engine.name().to_owned(),
        kind,
        operation,
        status: handle.watch_status(),
        stop: CancellationToken::new(),
        fanout: Arc::new(Fanout::new(app.options.replay, app.options.max_subscribers)),
    });
    state.feeds.push(Feed {
        query_id: query.id.clone(),
        sender,
        stop: query.stop.clone(),
    });
    drop(state);
    app.table.insert(query.clone(), handle, property);
    tracing::info!(id = %query.id, engine = %query.engine, path = %query.path(), "query registered");
    let mut response = (StatusCode::CREATED, Json(link(&query))).into_response();
    if let Ok(location) = query.path().parse() {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

/// The cquery link object of a query, with its live status.
fn link(query: &Query) -> serde_json::Value {
    let path = query.path();
    let stream = format!("{path}/stream");
    let status = query.status.borrow().clone();
    let mut link = json!({
        "rel": "cquery",
        "queryId": query.id,
        "href": stream,
        "channel": path,
        "status": status.name(),
        "type": "text/event-stream",
        "kind": query.kind,
        "operation": query.operation,
        "engine": query.engine,
        "property": query.key.property,
        "events": query.fanout.events(),
        "links": [
            {"rel": "self", "href": path, "type": "application/json"},
            {"rel": "stream", "href": stream, "type": "text/event-stream"},
        ],
    });
    if let QueryStatus::Failed { reason } = status {
        link["reason"] = reason.into();
    }
    link
}

/// `GET P/queries`: the queries registered on the property.
pub(crate) async fn list(State(app): State<Arc<App>>, Path(path): PropertyPath) -> Response {
    let key = key(path);
    let queries: Vec<_> = app.table.list(&key).iter().map(|q| link(q)).collect();
    let n = queries.len();
    Json(json!({
        "queries": queries,
        "numberReturned": n,
        "links": [{"rel": "self", "href": format!("{}/queries", key.path()), "type": "application/json"}],
    }))
    .into_response()
}

/// `GET P/queries/{qid}`: one query with its live status.
pub(crate) async fn get(
    State(app): State<Arc<App>>,
    Path((cid, fid, pname, qid)): QueryPath,
) -> Result<Response, Problem> {
    let query = find(&app, (cid, fid, pname), &qid)?;
    Ok(Json(link(&query)).into_response())
}

fn find(app: &App, path: (String, String, String), id: &str) -> Result<Arc<Query>, Problem> {
    let key = key(path);
    app.table
        .get(&key, id)
        .ok_or_else(|| Problem::not_found(format!("no query {id:?} on {}", key.path())))
}

/// `DELETE P/queries/{qid}`: stops and removes the query.
pub(crate) async fn delete(
    State(app): State<Arc<App>>,
    Path((cid, fid, pname, qid)): QueryPath,
) -> Result<StatusCode, Problem> {
    let key = key((cid, fid, pname));
    if app.table.remove(&key, &qid) {
        tracing::info!(id = %qid, "query deleted");
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(Problem::not_found(format!(
            "no query {qid:?} on {}",
            key.path()
        )))
    }
}

/// `GET P/queries/{qid}/stream`: the results as Server-Sent Events.
pub(crate) async fn stream(
    State(app): State<Arc<App>>,
    Path((cid, fid, pname, qid)): QueryPath,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let query = find(&app, (cid, fid, pname), &qid)?;
    let last_event_id = match headers.get("last-event-id") {
        None => None,
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    Problem::invalid("Last-Event-ID", "expected an event id (a number)")
                })?,
        ),
    };
    let subscriber = query
        .fanout
        .subscribe(last_event_id, app.options.keep_alive)
        .map_err(|_| {
            Problem::new(
                StatusCode::TOO_MANY_REQUESTS,
                "TooManySubscribers",
                format!(
                    "query {qid} has {} subscribers already (--max-subscribers)",
                    app.options.max_subscribers
                ),
            )
        })?;
    let hello = futures_util::stream::once(async { Ok(Bytes::from_static(b"retry: 1000\n\n")) });
    let events = futures_util::stream::unfold(subscriber, |mut subscriber| async move {
        let chunk = subscriber.next_chunk().await?;
        Some((Ok::<_, Infallible>(chunk), subscriber))
    });
    let body = Body::from_stream(futures_util::StreamExt::chain(hello, events));
    Ok((
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response())
}

/// `POST P/ingest`: live instants for the property.
pub(crate) async fn ingest(
    State(app): State<Arc<App>>,
    Path(path): PropertyPath,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let body = read_body(body)?;
    if app.table.is_closing() {
        return Err(Problem::unavailable("the server is shutting down".into()));
    }
    let instants = ingest::parse(&body)?;
    let property = property(&app, &key(path))?;
    let delivered = ingest::deliver(&property, instants, app.options.ingest_wait).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"accepted": delivered.accepted, "queries": delivered.queries})),
    )
        .into_response())
}

/// `GET /engines`: the registry, as `mfstream engines --json` prints it.
pub(crate) async fn engines(State(app): State<Arc<App>>) -> Response {
    Json(app.registry.listing()).into_response()
}

/// Anything else: 404.
pub(crate) async fn fallback() -> Problem {
    Problem::not_found("no such resource: see / for the links")
}

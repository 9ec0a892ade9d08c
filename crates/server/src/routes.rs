//! The routes of OGC API – Moving Features Part 4 continuous queries: the
//! handlers and the JSON they answer.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::AppendHeaders;

use mfstream_engine::Source;
use mfstream_model::Registration;
use mfstream_model::budget::{GeometryRefused, StateBudget};
use mfstream_model::{PropertyType, QueryStatus};
use mfstream_store::{EventIds, NewQuery, PropertyGuard};

use super::App;
use super::api::{FeatureParams, FeatureQueryParams, PropertyParams, QueryParams};
use super::durable::{self, Keeper, Ledger, Recording, Rule};
use super::fanout::Fanout;
use super::ingest::{self, Horizon};
use super::positions;
use super::problem::Problem;
use super::request::{PropertyAt, QueryAt, read_body, require_content_type};
use super::table::{About, Full, PropertyState, Query, Reservation, Started, new_id};
use super::wire::{
    self, Answer, CQuery, Engine, EventStream, Exception, IngestAnswer, Instant, Instants, Link,
    QueryList, Status,
};
use mfstream_model::PropertyPath;

/// The routes of a temporal property (`P` below): each is a path under it.
const PROPERTY: &str = "/collections/{cid}/items/{fid}/tproperties/{pname}";

/// The routes of a feature's positions (`S` below), the property routes'
/// twins: each is a path under it.
const SEQUENCE: &str = "/collections/{cid}/items/{fid}/tgsequence";

/// The body type of a registration, and of an ingest (one JSON instant or
/// an array of them, or JSON lines).
const JSON: &str = "application/json";
/// An ingest's other body type: JSON lines (the body is read the same way
/// whichever of the two types it declares).
const NDJSON: &str = "application/x-ndjson";

/// `POST P/queries`: registers a continuous query.
///
/// Its slot (under `--max-queries`, and `--max-properties` for a new
/// property) is reserved before the query is submitted, so concurrent
/// registrations never exceed the bounds, and given back if the
/// registration fails.
#[utoipa::path(
    post,
    context_path = PROPERTY,
    path = "/queries",
    tag = "cquery",
    operation_id = "registerQuery",
    summary = "register a continuous query on the temporal property",
    params(PropertyParams),
    request_body(content = wire::Registration, content_type = "application/json"),
    responses(
        (status = 201, description = "registered; `Location` is the query's path", body = CQuery,
         headers(("Location" = String, description = "the query's path"))),
        (status = 400, description = "an invalid body or field (`field` names it), or an unknown engine", body = Exception),
        (status = 413, description = "a body over `--max-body`, or a position query's geometry that alone holds more than `--max-query-state` (`field` names it)", body = Exception),
        (status = 415, description = "a body that is not `application/json`", body = Exception),
        (status = 422, description = "a valid body that does not fit the property", body = Exception),
        (status = 501, description = "an engine that is not ready", body = Exception),
        (status = 503, description = "`--max-queries` or `--max-properties` reached, a position query's geometry that would take the queries' state past `--max-total-query-state`, or shutting down", body = Exception),
    ),
)]
pub(crate) async fn register(
    State(app): State<Arc<App>>,
    PropertyAt(key): PropertyAt,
    headers: HeaderMap,
    body: Body,
) -> Result<Created, Problem> {
    require_content_type(&headers, &[JSON])?;
    // The body's bytes are held (--max-inflight-bytes) while it is read
    // and checked.
    let (body, _held) = read_body(&app, body).await?;
    if app.table.is_closing() {
        return Err(Problem::unavailable("the server is shutting down".into()));
    }
    let text = std::str::from_utf8(&body).map_err(|e| Problem::invalid("body", e))?;
    let registration = Registration::from_json(text)?;
    let engine = match &registration.engine {
        Some(name) => app.registry.get(name)?,
        None => app.registry.get_default()?,
    };
    let reservation = reserve(&app, &key)?;
    let property = reservation.property.clone();
    let mut state = property.state.lock().await;
    let budget = app.query_budget();
    let mut spec = spec_on(&key, registration, &state)?
        .live()
        .with_budget(budget.clone())
        .with_compute(app.query_compute());
    app.registry.check_serves(engine.as_ref(), &spec)?;
    // A position query's geometry counts in its state and the total
    // before anything is built from it.
    if let Some((bytes, field)) = spec.geometry_bytes() {
        budget
            .hold_geometry(bytes)
            .map_err(|refused| geometry_refused(field, refused))?;
    }
    spec.id = query_id()?;
    let about = About::of(&spec, key, engine.name());
    let property_type = spec.property_type;
    let crs = spec.crs();
    let registered_crs = spec.registered_crs();
    let rule = app
        .store
        .as_ref()
        .map(|_| Rule::of(&spec, &engine.describe()));
    let (sender, source) = Source::budgeted(app.options.limits.source_buffer, budget.clone());
    let handle = engine.submit(spec, source).await?;
    let stored = stored_spec(text, engine.name(), property_type, registered_crs);
    let (keeper, recording) = record(&app, &state, &about, stored, rule, &budget).await?;
    let fanout = Arc::new(Fanout::new(
        *app.options.state.replay,
        *app.options.state.replay_bytes,
        *app.options.limits.max_subscribers,
    ));
    let started = Started {
        about,
        property_type,
        crs,
        handle,
        sender,
        fanout,
        budget,
        keeper,
    };
    let query = app.table.start(reservation, &mut state, started);
    drop(state);
    if let Some(recording) = recording {
        recording.done();
    }
    tracing::info!(id = %query.id, engine = %query.engine, path = %query.path(), "query registered");
    Ok(created(&app, &headers, &query))
}

/// The query a registration asks for on `key`, whose state is `state`: a
/// query on a feature's positions (`…/tgsequence`), or on a temporal
/// property, which cannot be a position (422: positions are a feature's).
fn spec_on(
    key: &PropertyPath,
    registration: Registration,
    state: &PropertyState,
) -> Result<mfstream_model::QuerySpec, Problem> {
    if key.is_sequence() {
        return Ok(registration.into_position_spec(key.name(), state.property_type, state.crs)?);
    }
    if let Some(t) = registration.property_type.filter(|t| t.is_point()) {
        return Err(Problem::unprocessable(
            "type",
            format!(
                "{t} is a feature's positions: register on {}/tgsequence/queries",
                key.href()
                    .rsplit_once("/tproperties/")
                    .map_or("", |(feature, _)| feature)
            ),
        ));
    }
    Ok(registration.into_spec_on(key.name(), state.property_type)?)
}

/// A geometry the query's budget refused: 413 naming the field when it
/// alone passes the query's own budget (no server takes it without a
/// larger `--max-query-state`), 503 when the queries together would pass
/// `--max-total-query-state` (it may fit once others are deleted).
fn geometry_refused(field: &'static str, refused: GeometryRefused) -> Problem {
    match refused {
        GeometryRefused::Query { .. } => Problem::too_large(field, refused),
        GeometryRefused::Total { .. } => Problem::unavailable(refused.to_string()),
    }
}

/// Reserves a query slot on `key` (`--max-queries`, `--max-properties`).
fn reserve<'a>(app: &'a App, key: &PropertyPath) -> Result<Reservation<'a>, Problem> {
    app.table
        .reserve(
            key,
            *app.options.limits.max_queries,
            *app.options.limits.max_properties,
        )
        .map_err(|full| match full {
            Full::Queries => Problem::unavailable(format!(
                "the server holds at most {} queries ({}): delete one first",
                *app.options.limits.max_queries,
                app.options.limits.max_queries.name("max_queries")
            )),
            Full::Properties => Problem::unavailable(format!(
                "the server holds queries on {} temporal properties already ({})",
                *app.options.limits.max_properties,
                app.options.limits.max_properties.name("max_properties")
            )),
        })
}

/// A fresh query id.
fn query_id() -> Result<String, Problem> {
    new_id().map_err(|e| {
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "NoRandomness",
            format!("cannot make a query id: {e}"),
        )
    })
}

/// With `--state`, records the query (`stored`, its body as kept) on its
/// property, whose lock `state` is: the query reads exactly the instants
/// logged after this, and a crash before the 201 leaves a query that the
/// client never heard of but that runs after a restart (as any request
/// whose answer was lost). Its keeper, and the recording to mark done once
/// it is in the table; neither without a store.
async fn record(
    app: &App,
    state: &PropertyGuard<'_, PropertyState>,
    about: &About,
    stored: String,
    rule: Option<Rule>,
    budget: &Arc<StateBudget>,
) -> Result<(Option<Keeper>, Option<Recording>), Problem> {
    let (Some(store), Some(rule)) = (&app.store, rule) else {
        return Ok((None, None));
    };
    let recording = Recording::new(store.clone(), about.id.clone());
    let record = NewQuery {
        id: about.id.clone(),
        property: about.key.clone(),
        spec: stored,
        engine: about.engine.clone(),
        created: std::time::SystemTime::now(),
    };
    let checkpoint = store
        .register(state, record)
        .await
        .map_err(|e| durable::unavailable("the query could not be recorded", &e))?;
    let ledger =
        Arc::new(Ledger::new(rule, checkpoint.after_seq, None).with_budget(budget.clone()));
    let keeper = Keeper {
        store: store.clone(),
        ids: EventIds::new(),
        ledger,
    };
    Ok((Some(keeper), Some(recording)))
}

/// The 201 of a registration: the query's link object, and its path as
/// the `Location`.
type Created = (
    StatusCode,
    AppendHeaders<Option<(HeaderName, HeaderValue)>>,
    Answer<CQuery>,
);

/// The 201 of a registration of `query`.
fn created(app: &App, headers: &HeaderMap, query: &Query) -> Created {
    let origin = origin(app, headers);
    let location = query.path().parse().ok();
    (
        StatusCode::CREATED,
        AppendHeaders(location.map(|path| (header::LOCATION, path))),
        Answer(link(query, &origin, Geometry::With)),
    )
}

/// The registration as the store keeps it: the body, with the engine and
/// the property's type it was resolved to, so that a restart resolves it
/// the same way whatever the default engine and the property's first
/// ingest then.
fn stored_spec(
    body: &str,
    engine: &str,
    property_type: PropertyType,
    crs: Option<mfstream_model::geo::Crs>,
) -> String {
    let mut object = match serde_json::from_str::<serde_json::Value>(body) {
        Ok(serde_json::Value::Object(object)) => object,
        _ => serde_json::Map::new(),
    };
    object.insert("engine".into(), engine.into());
    object.insert("type".into(), property_type.as_str().into());
    if let Some(crs) = crs {
        object.insert("crs".into(), crs.name().into());
    }
    serde_json::Value::Object(object).to_string()
}

/// `scheme://host` of the links: the request's `Host` (else the address the
/// server is bound to), `https` when `X-Forwarded-Proto` says so, else
/// `http`.
fn origin(app: &App, headers: &HeaderMap) -> String {
    let scheme = match headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
    {
        Some(p) if p.trim().eq_ignore_ascii_case("https") => "https",
        _ => "http",
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .filter(|h| is_authority(h));
    match host {
        Some(host) => format!("{scheme}://{host}"),
        None => format!("{scheme}://{}", app.local_addr),
    }
}

/// Whether `host` is a plain `host[:port]` (a name, an IPv4 or a bracketed
/// IPv6 address): nothing that could turn a link into another URL.
fn is_authority(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 255
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._:[]".contains(&b))
}

/// Whether a link object carries a position query's `geometry`: one
/// query's does (its 201, its `GET`), a list's do not (up to 1 MiB each).
#[derive(Clone, Copy, PartialEq)]
enum Geometry {
    With,
    Without,
}

/// The cquery link object of a query, with its live status; its links are
/// absolute, under `origin`. A position query's says its `crs`, and with
/// [`Geometry::With`] the geometry it measures against (for the page's map).
fn link(query: &Query, origin: &str, geometry: Geometry) -> CQuery {
    let path = query.path();
    let this = format!("{origin}{path}");
    let stream = format!("{this}/stream");
    let status = query.status();
    let progress = query.progress.snapshot();
    let (crs, geometry) = match &query.shape {
        Some(shape) => (
            Some(shape.crs.clone()),
            match (&shape.geometry, geometry) {
                (Some(g), Geometry::With) => Some((**g).clone()),
                _ => None,
            },
        ),
        None => (None, None),
    };
    CQuery {
        rel: "cquery".to_owned(),
        query_id: query.id.clone(),
        href: stream.clone(),
        channel: path,
        status: Status::from(&status),
        media_type: "text/event-stream".to_owned(),
        kind: query.kind,
        operation: query.operation.clone(),
        engine: query.engine.clone(),
        property: query.key.name().to_owned(),
        events: query.fanout.events(),
        skipped: progress.skipped,
        cpu_seconds: progress.cpu_seconds(),
        reason: match status {
            QueryStatus::Failed { reason } => Some(reason),
            _ => None,
        },
        crs,
        geometry,
        links: vec![
            Link::new("self", this, JSON),
            Link::new("stream", stream, "text/event-stream"),
        ],
    }
}

/// `GET P/queries`: the queries registered on the property.
#[utoipa::path(
    get,
    context_path = PROPERTY,
    path = "/queries",
    tag = "cquery",
    operation_id = "listQueries",
    summary = "the queries registered on the temporal property",
    params(PropertyParams),
    responses(
        (status = 200, description = "the queries", body = QueryList),
        (status = 400, description = "an invalid path segment", body = Exception),
    ),
)]
pub(crate) async fn list(
    State(app): State<Arc<App>>,
    PropertyAt(key): PropertyAt,
    headers: HeaderMap,
) -> Answer<QueryList> {
    let origin = origin(&app, &headers);
    let queries: Vec<CQuery> = app
        .table
        .list(&key)
        .iter()
        .map(|q| link(q, &origin, Geometry::Without))
        .collect();
    Answer(QueryList {
        number_returned: queries.len() as u64,
        queries,
        links: vec![Link::new("self", format!("{}/queries", key.href()), JSON)],
    })
}

/// `GET P/queries/{qid}`: one query with its live status.
#[utoipa::path(
    get,
    context_path = PROPERTY,
    path = "/queries/{qid}",
    tag = "cquery",
    operation_id = "getQuery",
    summary = "one query, with its live status",
    params(QueryParams),
    responses(
        (status = 200, description = "the query", body = CQuery),
        (status = 400, description = "an invalid path segment", body = Exception),
        (status = 404, description = "no such query on this property", body = Exception),
    ),
)]
pub(crate) async fn get(
    State(app): State<Arc<App>>,
    QueryAt(key, qid): QueryAt,
    headers: HeaderMap,
) -> Result<Answer<CQuery>, Problem> {
    let query = find(&app, &key, &qid)?;
    Ok(Answer(link(
        &query,
        &origin(&app, &headers),
        Geometry::With,
    )))
}

fn find(app: &App, key: &PropertyPath, id: &str) -> Result<Arc<Query>, Problem> {
    app.table
        .get(key, id)
        .ok_or_else(|| Problem::not_found(format!("no query {id:?} on {}", key.href())))
}

/// `DELETE P/queries/{qid}`: forgets and stops the query.
///
/// With `--state`, all or nothing: the deletion is made durable first, and
/// only then is the query stopped and taken out of the table. A store that
/// cannot record it gets a 503 and leaves the query registered and running,
/// so a retry works; a 204 means it never comes back after a restart.
#[utoipa::path(
    delete,
    context_path = PROPERTY,
    path = "/queries/{qid}",
    tag = "cquery",
    operation_id = "deleteQuery",
    summary = "stop the query (gracefully) and forget it",
    params(QueryParams),
    responses(
        (status = 204, description = "stopped and removed"),
        (status = 400, description = "an invalid path segment", body = Exception),
        (status = 404, description = "no such query on this property", body = Exception),
        (status = 503, description = "the deletion could not be recorded (`--state`): the query still runs", body = Exception),
    ),
)]
pub(crate) async fn delete(
    State(app): State<Arc<App>>,
    QueryAt(key, qid): QueryAt,
) -> Result<StatusCode, Problem> {
    let not_found = |key: &PropertyPath, qid: &str| {
        Problem::not_found(format!("no query {qid:?} on {}", key.href()))
    };
    if app.table.get(&key, &qid).is_none() {
        return Err(not_found(&key, &qid));
    }
    // On a task of its own: a client going away cannot leave the query
    // forgotten by the store but still running.
    let deleted = tokio::spawn(async move {
        if let Some(store) = &app.store {
            match store.delete(&qid).await {
                Ok(()) => {}
                // Deleted meanwhile (a concurrent DELETE): the table says.
                Err(e) if durable::is_unknown(&e) => {}
                Err(e) => {
                    tracing::error!(id = %qid, "cannot record the query's deletion: {e}");
                    return Err(durable::unavailable(
                        "the deletion could not be recorded, so the query is still registered \
                         and running: retry",
                        &e,
                    ));
                }
            }
        }
        if app.table.remove(&key, &qid) {
            tracing::info!(id = %qid, "query deleted");
            Ok(StatusCode::NO_CONTENT)
        } else {
            Err(not_found(&key, &qid))
        }
    })
    .await;
    deleted.unwrap_or_else(|e| {
        Err(Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "DeleteFailed",
            format!("the deletion's task failed: {e}"),
        ))
    })
}

/// `GET P/queries/{qid}/stream`: the results as Server-Sent Events.
#[utoipa::path(
    get,
    context_path = PROPERTY,
    path = "/queries/{qid}/stream",
    tag = "cquery",
    operation_id = "streamQuery",
    summary = "the query's results as Server-Sent Events",
    description = wire::STREAM,
    params(
        QueryParams,
        ("Last-Event-ID" = Option<String>, Header,
         description = "resume after this event id (a number)"),
    ),
    responses(
        (status = 200, description = "the events: `instant` (InstantEvent), `window` (WindowEvent), `lagged` (LaggedEvent), `reset` (ResetEvent), `end` (EndEvent)",
         content_type = "text/event-stream", body = String),
        (status = 400, description = "a `Last-Event-ID` that is not an event id, or an invalid path segment", body = Exception),
        (status = 404, description = "no such query on this property", body = Exception),
        (status = 429, description = "`--max-subscribers` reached", body = Exception),
        (status = 503, description = "`--max-streams` reached", body = Exception),
    ),
)]
pub(crate) async fn stream(
    State(app): State<Arc<App>>,
    QueryAt(key, qid): QueryAt,
    headers: HeaderMap,
) -> Result<EventStream, Problem> {
    let query = find(&app, &key, &qid)?;
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
    // Server-wide first: streams must leave connections for ingest.
    let slot = app.streams.try_open().ok_or_else(|| {
        Problem::unavailable(format!(
            "the server has {} streams open already ({}): connect again later",
            app.streams.max(),
            app.options.limits.max_streams.name("max_streams")
        ))
    })?;
    let subscriber = query
        .fanout
        .subscribe(last_event_id, *app.options.timing.keep_alive)
        .map_err(|_| {
            Problem::new(
                StatusCode::TOO_MANY_REQUESTS,
                "TooManySubscribers",
                format!(
                    "query {qid} has {} subscribers already ({})",
                    *app.options.limits.max_subscribers,
                    app.options.limits.max_subscribers.name("max_subscribers")
                ),
            )
        })?;
    let hello = futures_util::stream::once(async { Ok(Bytes::from_static(b"retry: 1000\n\n")) });
    // The slot goes with the stream's body: when the stream ends or its
    // client goes away.
    let events =
        futures_util::stream::unfold((subscriber, slot), |(mut subscriber, slot)| async move {
            let chunk = subscriber.next_chunk().await?;
            Some((Ok::<_, Infallible>(chunk), (subscriber, slot)))
        });
    Ok(EventStream(Body::from_stream(
        futures_util::StreamExt::chain(hello, events),
    )))
}

/// `POST P/ingest`: live instants for the property.
///
/// Instants for a property no query reads are checked and counted, not
/// kept. The answer is counted for `GET /metrics`.
#[utoipa::path(
    post,
    context_path = PROPERTY,
    path = "/ingest",
    tag = "ingest",
    operation_id = "ingest",
    summary = "live instants for the temporal property",
    description = "One JSON instant, a JSON array of them, or JSON lines (one instant a line), \
                   whichever type is declared. Each instant is handed to every query on the \
                   property, in order.",
    params(PropertyParams),
    request_body(content(
        (Instants = "application/json"),
        (Instant = "application/x-ndjson"),
    )),
    responses(
        (status = 202, description = "taken", body = IngestAnswer),
        (status = 400, description = "an invalid instant (`field` names it)", body = Exception),
        (status = 413, description = "a body over `--max-body`, or a text value over what `--state` keeps", body = Exception),
        (status = 415, description = "a body that is neither JSON nor JSON lines", body = Exception),
        (status = 503, description = "not taken in time (`accepted` says how many were), or shutting down", body = Exception),
    ),
)]
pub(crate) async fn ingest(
    State(app): State<Arc<App>>,
    PropertyAt(key): PropertyAt,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Answer<IngestAnswer>), Problem> {
    let delivered = take_ingest(&app, key, &headers, body).await;
    let accepted = delivered.as_ref().map(|d| d.accepted);
    app.sources.http().answered(accepted);
    let delivered = delivered?;
    Ok((
        StatusCode::ACCEPTED,
        Answer(IngestAnswer {
            accepted: delivered.accepted as u64,
            queries: delivered.queries as u64,
        }),
    ))
}

/// The ingest itself: what it delivered, or why not (with what it
/// accepted first, when it says).
async fn take_ingest(
    app: &Arc<App>,
    key: PropertyPath,
    headers: &HeaderMap,
    body: Body,
) -> Result<ingest::Delivered, Problem> {
    require_content_type(headers, &[JSON, NDJSON])?;
    // Held (--max-inflight-bytes) until the instants are handed over.
    let (body, held) = read_body(app, body).await?;
    if app.table.is_closing() {
        return Err(Problem::unavailable("the server is shutting down".into()));
    }
    let horizon = Horizon::from_now(*app.options.timing.max_datetime_ahead);
    let instants = match app.table.property(&key) {
        _ if !key.is_sequence() => positions::scalars(ingest::parse(&body, &horizon)?, &key)?,
        Some(property) => {
            let state = property.state.lock().await;
            let known = positions::feature_crs(state.property_type, state.crs);
            drop(state);
            positions::parse(&body, known, &horizon)?
        }
        None => positions::parse(&body, None, &horizon)?,
    };
    drop(body);
    ingest::take(app, &key, instants, held).await
}

/// `GET /engines`: the registry, as `mfstream engines --json` prints it.
#[utoipa::path(
    get,
    path = "/engines",
    tag = "server",
    operation_id = "getEngines",
    summary = "the registry's engines, as `mfstream engines --json` prints them",
    responses(
        (status = 200, description = "the engines", body = Vec<Engine>),
    ),
)]
pub(crate) async fn engines(State(app): State<Arc<App>>) -> Json<Vec<Engine>> {
    Json(
        app.registry
            .listing()
            .into_iter()
            .map(Engine::from)
            .collect(),
    )
}

// A feature's positions (`S`, [`SEQUENCE`]): the property handlers, keyed
// by the feature (`PropertyPath::sequence`). Each route has a function of
// its own so that its `#[utoipa::path]` can declare it (one path, and one
// operation id, per function).

/// `POST S/queries`: registers a continuous query on a feature's positions.
#[utoipa::path(
    post,
    context_path = SEQUENCE,
    path = "/queries",
    tag = "positions",
    operation_id = "registerPositionsQuery",
    summary = "register a continuous query on the feature's positions",
    params(FeatureParams),
    request_body(content = wire::Registration, content_type = "application/json"),
    responses(
        (status = 201, description = "registered; `Location` is the query's path", body = CQuery,
         headers(("Location" = String, description = "the query's path"))),
        (status = 400, description = "an invalid body or field (`field` names it)", body = Exception),
        (status = 413, description = "a body over `--max-body`", body = Exception),
        (status = 415, description = "a body that is not `application/json`", body = Exception),
        (status = 422, description = "a valid body that does not fit the feature (another `crs`), or an engine that does not serve positions (the description names those that do)", body = Exception),
        (status = 503, description = "`--max-queries` or `--max-properties` reached, or shutting down", body = Exception),
    ),
)]
pub(crate) async fn register_positions(
    app: State<Arc<App>>,
    at: PropertyAt,
    headers: HeaderMap,
    body: Body,
) -> Result<Created, Problem> {
    register(app, at, headers, body).await
}

/// `GET S/queries`.
#[utoipa::path(
    get,
    context_path = SEQUENCE,
    path = "/queries",
    tag = "positions",
    operation_id = "listPositionsQueries",
    summary = "the queries registered on the feature's positions",
    params(FeatureParams),
    responses(
        (status = 200, description = "the queries", body = QueryList),
        (status = 400, description = "an invalid path segment", body = Exception),
    ),
)]
pub(crate) async fn list_positions(
    app: State<Arc<App>>,
    at: PropertyAt,
    headers: HeaderMap,
) -> Answer<QueryList> {
    list(app, at, headers).await
}

/// `GET S/queries/{qid}`.
#[utoipa::path(
    get,
    context_path = SEQUENCE,
    path = "/queries/{qid}",
    tag = "positions",
    operation_id = "getPositionsQuery",
    summary = "one query on the feature's positions, with its live status",
    params(FeatureQueryParams),
    responses(
        (status = 200, description = "the query", body = CQuery),
        (status = 400, description = "an invalid path segment", body = Exception),
        (status = 404, description = "no such query on this feature", body = Exception),
    ),
)]
pub(crate) async fn get_positions_query(
    app: State<Arc<App>>,
    at: QueryAt,
    headers: HeaderMap,
) -> Result<Answer<CQuery>, Problem> {
    get(app, at, headers).await
}

/// `DELETE S/queries/{qid}`.
#[utoipa::path(
    delete,
    context_path = SEQUENCE,
    path = "/queries/{qid}",
    tag = "positions",
    operation_id = "deletePositionsQuery",
    summary = "stop the query (gracefully) and forget it",
    params(FeatureQueryParams),
    responses(
        (status = 204, description = "stopped and removed"),
        (status = 400, description = "an invalid path segment", body = Exception),
        (status = 404, description = "no such query on this feature", body = Exception),
        (status = 503, description = "the deletion could not be recorded (`--state`): the query still runs", body = Exception),
    ),
)]
pub(crate) async fn delete_positions_query(
    app: State<Arc<App>>,
    at: QueryAt,
) -> Result<StatusCode, Problem> {
    delete(app, at).await
}

/// `GET S/queries/{qid}/stream`.
#[utoipa::path(
    get,
    context_path = SEQUENCE,
    path = "/queries/{qid}/stream",
    tag = "positions",
    operation_id = "streamPositionsQuery",
    summary = "the query's results as Server-Sent Events",
    description = wire::STREAM,
    params(
        FeatureQueryParams,
        ("Last-Event-ID" = Option<String>, Header,
         description = "resume after this event id (a number)"),
    ),
    responses(
        (status = 200, description = "the events: `instant` (InstantEvent), `window` (WindowEvent), `detect` (DetectEvent), `lagged` (LaggedEvent), `reset` (ResetEvent), `end` (EndEvent)",
         content_type = "text/event-stream", body = String),
        (status = 400, description = "a `Last-Event-ID` that is not an event id, or an invalid path segment", body = Exception),
        (status = 404, description = "no such query on this feature", body = Exception),
        (status = 429, description = "`--max-subscribers` reached", body = Exception),
        (status = 503, description = "`--max-streams` reached", body = Exception),
    ),
)]
pub(crate) async fn stream_positions(
    app: State<Arc<App>>,
    at: QueryAt,
    headers: HeaderMap,
) -> Result<EventStream, Problem> {
    stream(app, at, headers).await
}

/// `POST S/ingest`.
#[utoipa::path(
    post,
    context_path = SEQUENCE,
    path = "/ingest",
    tag = "positions",
    operation_id = "ingestPositions",
    summary = "live positions for the feature",
    description = "One position, a JSON array of them, JSON lines (one a line), or an MF-JSON \
                   `MovingPoint`. Nothing of a body with an invalid position is taken.",
    params(FeatureParams),
    request_body(content(
        (wire::Positions = "application/json"),
        (wire::Position = "application/x-ndjson"),
    )),
    responses(
        (status = 202, description = "taken", body = IngestAnswer),
        (status = 400, description = "an invalid position (`field` names it)", body = Exception),
        (status = 413, description = "a body over `--max-body`", body = Exception),
        (status = 415, description = "a body that is neither JSON nor JSON lines", body = Exception),
        (status = 503, description = "not taken in time (`accepted` says how many were), or shutting down", body = Exception),
    ),
)]
pub(crate) async fn ingest_positions(
    app: State<Arc<App>>,
    at: PropertyAt,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Answer<IngestAnswer>), Problem> {
    ingest(app, at, headers, body).await
}

/// Anything else: 404.
pub(crate) async fn fallback() -> Problem {
    Problem::not_found("no such resource: see / for the links")
}

/// A known path with a method it does not take: 405.
pub(crate) async fn method_not_allowed(method: Method) -> Problem {
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        format!("{method} is not allowed here: see / for the links"),
    )
}

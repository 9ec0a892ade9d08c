//! Live ingest: the instants of a `POST …/ingest` body, checked against the
//! property's type and handed to every query on the property, in order.
//!
//! Nothing is dropped silently. Each chunk of instants goes to every query
//! or to none: room is reserved in every query's source buffer first, then
//! the chunk is sent. A full buffer holds the request back (backpressure) up
//! to the ingest wait; then the request fails with 503, saying how many
//! instants every query did receive.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::StatusCode;
use tokio::time::Instant as Clock;

use mfstream_engine::{SourceError, SourcePermit};
use mfstream_model::PropertyPath;
use mfstream_model::datetime::Timestamp;
use mfstream_model::{Instant, PropertyType, Value};
use mfstream_store::{Store, StoreErrorKind};

use super::App;
use super::durable::{LogCap, unavailable};
use super::problem::Problem;
use super::table::{Feed, Property};

/// Instants sent to a query at once.
const CHUNK: usize = 256;

/// The longest datetime accepted, in bytes. The longest ISO-8601 form
/// accepted (nanoseconds and an offset) is 35.
pub(crate) const MAX_DATETIME: usize = 64;

/// How far ahead of the server's clock an ingested datetime may be unless
/// `--max-datetime-ahead-ms` says otherwise: a day, more than any clock
/// skew or time-zone slip, far less than the year 9999 a broken device
/// stamps.
pub const DEFAULT_MAX_DATETIME_AHEAD: Duration = Duration::from_secs(86_400);

/// The latest datetime an ingest takes: the server's clock, read once per
/// body (or batch of messages), plus `--max-datetime-ahead-ms`.
///
/// One instant stamped far in the future would otherwise move its
/// property's duplicate mark (MQTT, Kafka: the broker pipeline) so far
/// that every later instant were dropped as a duplicate, and close every
/// time window up to it. Only the server bounds it: `mfstream run` reads files
/// of any time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Horizon {
    /// Microseconds since the epoch.
    latest: i64,
    ahead: Duration,
}

impl Horizon {
    /// The horizon `ahead` of the clock now.
    pub(crate) fn from_now(ahead: Duration) -> Horizon {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let latest = i64::try_from(now.saturating_add(ahead).as_micros()).unwrap_or(i64::MAX);
        Horizon { latest, ahead }
    }

    /// Why instant `n`, at `datetime` (`at` parsed), is past the horizon,
    /// if it is.
    pub(crate) fn check(&self, n: usize, datetime: &str, at: Timestamp) -> Result<(), PastHorizon> {
        if at.micros() <= self.latest {
            return Ok(());
        }
        Err(PastHorizon {
            n,
            datetime: datetime.to_owned(),
            horizon: *self,
        })
    }
}

/// An instant later than the horizon: the `n`th of its body, at
/// `datetime`.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "instant {n}: {datetime:?} is after {}, the server's clock plus \
     --max-datetime-ahead-ms ({}): stamp instants with a clock in time, or raise \
     --max-datetime-ahead-ms",
    mfstream_model::datetime::format_micros(horizon.latest),
    horizon.ahead.as_millis()
)]
pub(crate) struct PastHorizon {
    n: usize,
    datetime: String,
    horizon: Horizon,
}

/// Parses a body: one JSON instant, a JSON array of instants, or JSON lines;
/// every datetime must be an ISO-8601 datetime (at most [`MAX_DATETIME`]
/// bytes) no later than `horizon`, so a bad one is refused here, naming the
/// instant, and not later by every time window of every query on the
/// property.
pub(crate) fn parse(body: &[u8], horizon: &Horizon) -> Result<Vec<Instant>, Problem> {
    let instants = parse_json(body)?;
    for (i, instant) in instants.iter().enumerate() {
        check_datetime(i + 1, &instant.datetime, horizon)?;
    }
    Ok(instants)
}

/// Checks instant `n`'s datetime: ISO-8601, at most [`MAX_DATETIME`]
/// bytes, no later than `horizon` (400, `datetime`).
pub(crate) fn check_datetime(n: usize, datetime: &str, horizon: &Horizon) -> Result<(), Problem> {
    if datetime.len() > MAX_DATETIME {
        return Err(Problem::invalid(
            "datetime",
            format!(
                "instant {n}: the datetime is {} bytes; at most {MAX_DATETIME} are accepted",
                datetime.len()
            ),
        ));
    }
    let Some(at) = mfstream_model::datetime::parse(datetime) else {
        return Err(Problem::invalid(
            "datetime",
            format!(
                "instant {n}: {datetime:?} is not an ISO-8601 datetime, \
                 such as 2026-01-01T00:00:00Z"
            ),
        ));
    };
    horizon
        .check(n, datetime, at)
        .map_err(|why| Problem::invalid("datetime", why))
}

fn parse_json(body: &[u8]) -> Result<Vec<Instant>, Problem> {
    let trimmed = body.trim_ascii();
    if trimmed.is_empty() {
        return Err(Problem::invalid(
            "body",
            "no instants: send one JSON instant, an array of them, or one per line",
        ));
    }
    if trimmed.starts_with(b"[") {
        return serde_json::from_slice(trimmed).map_err(|e| Problem::invalid("body", e));
    }
    if let Ok(instant) = Instant::from_json(trimmed) {
        return Ok(vec![instant]);
    }
    let mut instants = Vec::new();
    for (i, line) in trimmed.split(|&b| b == b'\n').enumerate() {
        if line.trim_ascii().is_empty() {
            continue;
        }
        let instant = Instant::from_json(line).map_err(|e| {
            Problem::invalid("body", format!("line {} is not a JSON instant: {e}", i + 1))
        })?;
        instants.push(instant);
    }
    Ok(instants)
}

/// Refuses (413), before anything is delivered or logged, a body with a
/// text value over `max` bytes: the most the state store keeps of one
/// (`--state`), so an ingest is never half taken and then refused by the
/// store.
pub(crate) fn check_text_values(instants: &[Instant], max: usize) -> Result<(), Problem> {
    for (i, instant) in instants.iter().enumerate() {
        if let Value::Text(text) = &instant.value
            && text.len() > max
        {
            return Err(Problem::too_large(
                "value",
                format!(
                    "instant {}: the text value is {} bytes; with --state a text value is \
                     kept up to {max} bytes: send a shorter one",
                    i + 1,
                    text.len()
                ),
            ));
        }
    }
    Ok(())
}

/// The type an instant's value suggests, for a property's first ingest.
pub(crate) fn type_of(value: &Value) -> PropertyType {
    match value {
        Value::Number(_) => PropertyType::TReal,
        Value::Text(_) => PropertyType::TText,
        Value::Bool(_) => PropertyType::TBoolean,
        Value::Point(_) => PropertyType::TGeogPoint,
        // No body has one (it is a window's result): it fits no type.
        Value::BBox(_) => PropertyType::TReal,
    }
}

/// Checks instants for a property no query reads: their values must all
/// fit the type the first suggests. Nothing is kept.
pub(crate) fn check_alone(instants: &[Instant]) -> Result<Delivered, Problem> {
    if let Some(first) = instants.first() {
        check_types(instants, type_of(&first.value))?;
    }
    Ok(Delivered {
        accepted: instants.len(),
        queries: 0,
    })
}

fn check_types(instants: &[Instant], property_type: PropertyType) -> Result<(), Problem> {
    match instants
        .iter()
        .enumerate()
        .find(|(_, instant)| !fits(&instant.value, property_type))
    {
        Some((i, bad)) => Err(Problem::invalid(
            "value",
            format!(
                "instant {} has the value {}, but the property is {property_type}",
                i + 1,
                bad.value
            ),
        )),
        None => Ok(()),
    }
}

fn fits(value: &Value, property_type: PropertyType) -> bool {
    match value {
        Value::Number(v) => match property_type {
            PropertyType::TReal => true,
            PropertyType::TInteger => v.fract() == 0.0,
            _ => false,
        },
        Value::Text(_) => property_type == PropertyType::TText,
        Value::Bool(_) => property_type == PropertyType::TBoolean,
        Value::Point(_) => property_type.is_point(),
        Value::BBox(_) => false,
    }
}

/// The one ingest path every source takes (`POST …/ingest`, MQTT): checks
/// the text values against the store's limit, then hands `instants` to the
/// queries on `key` (logging them first with `--state`), or checks them
/// alone when no query reads it. `hold` (the bytes the caller holds in
/// flight) is released once they are handed over. With a store the
/// delivery runs on a task of its own, so a caller going away cannot leave
/// a chunk logged but not delivered (see [`deliver`]).
pub(crate) async fn take(
    app: &Arc<App>,
    key: &PropertyPath,
    instants: Vec<Instant>,
    hold: impl Send + 'static,
) -> Result<Delivered, Problem> {
    if app.table.is_closing() {
        return Err(Problem::unavailable("the server is shutting down".into()));
    }
    if let Some(store) = &app.store {
        check_text_values(&instants, store.options().max_text_bytes)?;
    }
    let wait = *app.options.timing.ingest_wait;
    match (app.table.property(key), app.store.clone()) {
        (Some(property), None) => deliver(&property, instants, wait, None).await,
        (Some(property), Some(store)) => {
            let path = key.clone();
            let cap = LogCap {
                max: *app.options.state.max_query_log,
            };
            tokio::spawn(async move {
                let log = Some((&*store, &path, cap));
                let delivered = deliver(&property, instants, wait, log).await;
                drop(hold);
                delivered
            })
            .await
            .map_err(|e| {
                Problem::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "IngestFailed",
                    format!("the ingest's task failed: {e}"),
                )
            })?
        }
        (None, _) => check_alone(&instants),
    }
}

/// What an ingest did.
#[derive(Debug)]
pub(crate) struct Delivered {
    pub(crate) accepted: usize,
    pub(crate) queries: usize,
}

/// Hands `instants` to every running query on `property`, in order, holding
/// back up to `wait` while a query's buffer is full.
///
/// With a state store (`log`), the body is appended to the ingest log as
/// one journal record once room for its first chunk is reserved in every
/// query's buffer and before any query gets it: the whole body is logged,
/// then delivered chunk by chunk (the later chunks wait for room without
/// the deadline: they are owed), or none of it is. An ingest acknowledged
/// is durable, and a crash never leaves part of one in the log. Call it
/// from a task of its own (the route spawns one): were it dropped between
/// the log's commit and the send, the log would hold instants no query
/// was given. A query that keeps more of the log than `cap` allows fails
/// ([`LogCap`]) and is fed no more.
pub(crate) async fn deliver(
    property: &Property,
    instants: Vec<Instant>,
    wait: Duration,
    log: Option<(&Store, &PropertyPath, LogCap)>,
) -> Result<Delivered, Problem> {
    let deadline = Clock::now() + wait;
    let total = instants.len();
    let busy = |accepted| Problem::ingest_busy(accepted, total, wait.as_millis());
    // The lock orders concurrent ingests: every query sees the same order.
    let mut state = tokio::time::timeout_at(deadline, property.state.lock())
        .await
        .map_err(|_| busy(0))?;
    let Some(property_type) = state
        .property_type
        .or_else(|| instants.first().map(|first| type_of(&first.value)))
    else {
        return Ok(Delivered {
            accepted: 0,
            queries: 0,
        });
    };
    check_types(&instants, property_type)?;
    // A store that takes no more writes (its directory deleted under the
    // server) fails the ingest even when no query is left to log it for.
    if let Some((store, _, _)) = log {
        store.check_writable().map_err(|e| {
            tracing::error!(total, "ingest refused: {e}");
            unavailable(&format!("accepted 0 of {total} instants"), &e).with_accepted(0)
        })?;
    }
    state.property_type = Some(property_type);
    let mut feeds: Vec<_> = state
        .feeds
        .iter()
        .filter(|feed| !feed.stop.is_cancelled())
        .collect();
    let queries = feeds.len();
    // Queries failed for the log they keep: fed no more.
    let mut capped: Vec<String> = Vec::new();
    let mut accepted = 0;
    // With a store, the whole body is logged as one journal record, at the
    // first chunk with room in every query: all of it or none of it is in
    // the log after a crash. From then on every chunk is owed to the
    // queries (a restart would replay it), so the later chunks wait for
    // room without the deadline, as long as their query runs.
    // The first sequence number logged, and the index of its instant.
    let mut logged: Option<(u64, usize)> = None;
    for (i, chunk) in instants.chunks(CHUNK).enumerate() {
        let within = logged.is_none().then_some(deadline);
        let permits = reserve(&feeds, within).await.map_err(|Full { query }| {
            tracing::warn!(
                %query,
                accepted,
                total,
                "ingest gave up: the query's buffer stayed full"
            );
            busy(accepted)
        })?;
        if let Some((store, path, _)) = log
            && logged.is_none()
            && !permits.is_empty()
        {
            let first = append(store, path, &instants[i * CHUNK..], accepted, total).await?;
            logged = Some((first, i * CHUNK));
        }
        if let (Some((start, from)), Some((store, _, cap))) = (logged, log) {
            let first = start + (i * CHUNK - from) as u64;
            let seqs = first..first + chunk.len() as u64;
            capped.extend(record_fed(store, &cap, &permits, seqs, chunk).await);
        }
        for (permit, _) in permits {
            permit.send_batch(chunk.to_vec());
        }
        feeds.retain(|feed| !capped.contains(&feed.query_id));
        accepted += chunk.len();
    }
    drop(feeds);
    if !capped.is_empty() {
        state.feeds.retain(|feed| !capped.contains(&feed.query_id));
    }
    Ok(Delivered { accepted, queries })
}

/// Logs `rest`, the instants of a body after the `accepted` first of
/// `total`, as one journal record; the sequence number of its first.
async fn append(
    store: &Store,
    path: &PropertyPath,
    rest: &[Instant],
    accepted: usize,
    total: usize,
) -> Result<u64, Problem> {
    match store.append_instants(path, rest).await {
        Ok(seqs) => Ok(seqs.start),
        Err(e) => {
            // A directory that cannot be reached is logged by the store
            // once when it starts and once when it ends, not per ingest.
            if matches!(e.kind(), StoreErrorKind::Unreachable { .. }) {
                tracing::debug!(accepted, total, "ingest gave up: {e}");
            } else {
                tracing::error!(accepted, total, "ingest gave up: {e}");
            }
            Err(unavailable(
                &format!("accepted {accepted} of {total} instants: the rest could not be logged"),
                &e,
            )
            .with_accepted(accepted))
        }
    }
}

/// A query whose buffer stayed full past the ingest's deadline.
struct Full {
    /// Its id.
    query: String,
}

/// Room for one batch in every feed that still takes instants (a query
/// ended, stopping or deleted meanwhile takes none), waiting until
/// `deadline` when there is one.
async fn reserve<'f>(
    feeds: &[&'f Feed],
    deadline: Option<Clock>,
) -> Result<Vec<(SourcePermit<'f>, &'f Feed)>, Full> {
    let mut permits = Vec::with_capacity(feeds.len());
    for &feed in feeds {
        let reserve = async {
            tokio::select! {
                permit = feed.sender.reserve() => permit.ok(),
                // Deleted meanwhile: it takes no more instants.
                () = feed.stop.cancelled() => None,
            }
        };
        let reserved = match deadline {
            None => Ok(reserve.await),
            Some(deadline) => tokio::time::timeout_at(deadline, reserve).await,
        };
        match reserved {
            Ok(Some(permit)) => permits.push((permit, feed)),
            // The query has ended or is stopping: it takes no more.
            Ok(None) => {}
            Err(_elapsed) => {
                return Err(Full {
                    query: feed.query_id.clone(),
                });
            }
        }
    }
    Ok(permits)
}

/// Records in each durable query's ledger that it is fed `chunk`, logged
/// at `seqs`; the ids of the queries that the log they keep now fails
/// (`cap`), each failed behind the batches it was given.
async fn record_fed(
    store: &Store,
    cap: &LogCap,
    permits: &[(SourcePermit<'_>, &Feed)],
    seqs: std::ops::Range<u64>,
    chunk: &[Instant],
) -> Vec<String> {
    let mut capped = Vec::new();
    for (_, feed) in permits {
        let Some(ledger) = &feed.ledger else {
            continue;
        };
        ledger.fed(seqs.clone().zip(chunk));
        if let Some(reason) = cap.check(store, &feed.query_id, ledger, chunk).await {
            tracing::warn!(query = %feed.query_id, %reason, "query failed");
            capped.push(feed.query_id.clone());
            // Behind the batches it was given (this chunk too: it is
            // logged for it); on a task, as its buffer may be full.
            let sender = feed.sender.clone();
            tokio::spawn(sender.fail(SourceError(reason)));
        }
    }
    capped
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "2026-01-01T00:00:00Z";

    /// A body parsed as the server does by default.
    fn parse(body: &[u8]) -> Result<Vec<Instant>, Problem> {
        super::parse(body, &Horizon::from_now(DEFAULT_MAX_DATETIME_AHEAD))
    }

    #[test]
    fn a_datetime_past_the_horizon_is_refused_naming_the_instant_and_the_option() {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let at = |ahead: Duration| {
            let micros = i64::try_from((now + ahead).as_micros()).unwrap();
            mfstream_model::datetime::format_micros(micros)
        };
        let hour = Duration::from_secs(3600);
        let body = format!(
            "{{\"datetime\":\"{}\",\"value\":1}}\n{{\"datetime\":\"9999-12-31T00:00:00Z\",\"value\":2}}",
            at(hour)
        );
        let err = parse(body.as_bytes()).unwrap_err();
        assert_eq!(err.field(), Some("datetime"));
        let says = err.description();
        assert!(
            says.starts_with("datetime: instant 2: \"9999-12-31T00:00:00Z\" is after ")
                && says.contains("--max-datetime-ahead-ms (86400000)"),
            "{says}"
        );
        // An hour ahead is within a day; not within a minute.
        let one = format!("{{\"datetime\":\"{}\",\"value\":1}}", at(hour));
        assert!(parse(one.as_bytes()).is_ok());
        let minute = Horizon::from_now(Duration::from_secs(60));
        assert!(super::parse(one.as_bytes(), &minute).is_err());
        // The past is not bounded.
        let old = r#"{"datetime":"1970-01-01T00:00:00Z","value":1}"#;
        assert!(super::parse(old.as_bytes(), &minute).is_ok());
    }

    #[test]
    fn a_body_is_one_instant_an_array_or_json_lines() {
        let one = parse(format!(r#" {{"datetime":"{T}","value":1}} "#).as_bytes()).unwrap();
        assert_eq!(one.len(), 1);
        let array = format!(r#"[{{"datetime":"{T}","value":1}},{{"datetime":"{T}","value":2}}]"#);
        assert_eq!(parse(array.as_bytes()).unwrap().len(), 2);
        let lines = format!(
            "{{\"datetime\":\"{T}\",\"value\":1}}\n\n{{\"datetime\":\"2026-01-02 00:00+00\",\"value\":2}}\n"
        );
        assert_eq!(
            parse(lines.as_bytes()).unwrap()[1].datetime,
            "2026-01-02 00:00+00"
        );
    }

    #[test]
    fn a_bad_line_is_named() {
        let err =
            parse(format!("{{\"datetime\":\"{T}\",\"value\":1}}\nnope\n").as_bytes()).unwrap_err();
        assert!(format!("{err:?}").contains("line 2"), "{err:?}");
    }

    #[test]
    fn a_datetime_that_does_not_parse_or_is_too_long_is_refused_naming_the_instant() {
        let soon =
            format!("[{{\"datetime\":\"{T}\",\"value\":1}},{{\"datetime\":\"soon\",\"value\":2}}]");
        let err = format!("{:?}", parse(soon.as_bytes()).unwrap_err());
        assert!(err.contains("instant 2") && err.contains("soon"), "{err}");
        let long = format!(
            "{{\"datetime\":\"{T}{}\",\"value\":1}}",
            " ".repeat(MAX_DATETIME)
        );
        let err = format!("{:?}", parse(long.as_bytes()).unwrap_err());
        assert!(
            err.contains("instant 1") && err.contains("at most 64"),
            "{err}"
        );
    }

    #[test]
    fn a_text_value_over_the_store_limit_is_413_naming_the_instant_and_the_limit() {
        let instants = parse(
            format!(
                "{{\"datetime\":\"{T}\",\"value\":\"abc\"}}\n{{\"datetime\":\"{T}\",\"value\":\"abcd\"}}"
            )
            .as_bytes(),
        )
        .unwrap();
        assert!(check_text_values(&instants, 4).is_ok());
        let err = format!("{:?}", check_text_values(&instants, 3).unwrap_err());
        assert!(
            err.contains("PAYLOAD_TOO_LARGE") || err.contains("413"),
            "{err}"
        );
        assert!(
            err.contains("instant 2") && err.contains("up to 3 bytes"),
            "{err}"
        );
    }

    #[test]
    fn values_must_fit_the_property_type() {
        assert!(fits(&Value::Number(2.0), PropertyType::TInteger));
        assert!(!fits(&Value::Number(2.5), PropertyType::TInteger));
        assert!(!fits(&Value::Text("a".into()), PropertyType::TReal));
        assert!(fits(&Value::Bool(true), PropertyType::TBoolean));
    }
}

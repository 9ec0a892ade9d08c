//! From messages to the ingest path, and back to acknowledgements.
//!
//! A source hands the messages waiting in batches (MQTT's up to 1,024
//! messages, Kafka's up to 1,024 records and `--max-inflight-bytes`) to
//! [`take`]: a bad one is counted and acknowledged at once, the good ones
//! are grouped by property (in order) and each group is one call of the
//! ingest path (one journal record with `--state`), the groups of a batch
//! concurrently. Then every message of the group is acknowledged (MQTT's
//! ack, Kafka's commit of the offsets), and the next batch is taken: a
//! property's instants are ingested in the order received.
//!
//! **The duplicate rule.** A broker delivers at least once: after a
//! reconnection (or a rebalance), and after `serve` was killed, it sends
//! again what it has no acknowledgement for, some of which the store may
//! already hold. So each property has a mark: the datetime of the last
//! instant it took from the broker (at start-up, lazily, that of the last
//! instant in its log, from any source). An instant at or before the mark
//! is dropped and counted as a duplicate; the mark moves only once the
//! ingest took the instants. A bare number has no datetime: it is stamped
//! with the server's clock when ingested (microseconds, UTC), at least a
//! microsecond after the mark, so it is never a duplicate (nor recognised
//! as one when redelivered).
//!
//! A feature's positions (a `…/tgsequence` topic) take the same path: a
//! group of their own (the feature's `tgsequence` path), parsed by its
//! ingest task in the feature's reference system, and the same mark.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mfstream_model::PropertyPath;
use mfstream_model::datetime::Timestamp;
use mfstream_model::geo::Crs;
use mfstream_model::{Instant, Value};

use super::payload::{self, Payload};
use super::stats::{Reason, Stats};
use super::topic::Route;
use crate::App;
use crate::ingest::{self, Horizon};
use crate::metrics::{self, IngestCounters};
use crate::table::Property;

/// A broker's message on its way to the ingest path (an MQTT message, a
/// Kafka record): what the pipeline reads of it.
pub(crate) trait Delivery: Send + Sync + 'static {
    /// Its topic.
    fn topic(&self) -> &str;
    /// Its payload.
    fn payload(&self) -> &[u8];
}

/// A broker source, as the pipeline sees it: its topics and its counters.
pub(crate) trait Broker: Send + Sync + 'static {
    /// Its name, in the log.
    fn name(&self) -> &'static str;
    /// Its counters, bad messages and samples.
    fn stats(&self) -> &Stats;
    /// Its rows of `mfstream_ingest_…{source}`.
    fn counters(&self) -> &IngestCounters;
    /// The property a topic names, if one of its patterns matches it.
    fn route(&self, topic: &str) -> Option<Route>;
    /// Its topic patterns, for the reason of a topic it does not take.
    fn patterns(&self) -> String;
}

/// The first wait before an ingest that could not be taken is tried
/// again, doubled up to [`MAX_RETRY`].
const MIN_RETRY: Duration = Duration::from_millis(50);
const MAX_RETRY: Duration = Duration::from_secs(2);

/// One good message, parsed.
struct Item<M> {
    msg: M,
    instants: Vec<Instant>,
}

/// The good messages of a batch for one property, in order.
struct Group<M> {
    key: PropertyPath,
    items: Vec<Item<M>>,
    /// Bare numbers to stamp, by item index.
    numbers: Vec<(usize, f64)>,
}

/// A property's mark: `None` until looked up; then the last datetime
/// taken, if any.
pub(crate) type Marks = HashMap<PropertyPath, Option<Timestamp>>;

/// Ingests a batch: each bad message counted and handed to `done` at
/// once; the good ones grouped by property, each group ingested by a task
/// of its own (their journal writes commit together, and the ingest path
/// runs to its end even at a shutdown), and its messages handed to `done`
/// once taken. `marks` are the properties' marks, moved. `false` when some
/// message was not taken (the server shutting down, or a task that failed):
/// the broker delivers it again.
pub(crate) async fn take<M: Delivery, B: Broker>(
    app: &Arc<App>,
    broker: &Arc<B>,
    marks: &mut Marks,
    batch: impl Iterator<Item = M>,
    mut done: impl FnMut(M),
) -> bool {
    let mut received = 0;
    let mut taken = 0;
    let (groups, bad) = sort(app, &**broker, batch.inspect(|_| received += 1));
    for msg in bad {
        taken += 1;
        done(msg);
    }
    let mut tasks = Vec::with_capacity(groups.len());
    for group in groups {
        let mark = marks.get(&group.key).copied();
        tasks.push(tokio::spawn(ingest(
            app.clone(),
            broker.clone(),
            group,
            mark,
        )));
    }
    for task in tasks {
        let Ok((key, mark, acked)) = task.await else {
            // Its messages are not acknowledged: the broker delivers them
            // again (at the next connection, or the next start).
            tracing::error!("{}: an ingest task failed", broker.name());
            continue;
        };
        marks.insert(key, mark);
        for msg in acked {
            taken += 1;
            done(msg);
        }
    }
    if marks.len() > 2 * *app.options.limits.max_properties {
        // The marks of properties no query reads any more.
        marks.retain(|key, _| app.table.property(key).is_some());
    }
    taken == received
}

/// Refuses a message over `--max-body` before it is parsed (`what` is
/// `payload` or `record`, as its source says): counted, and `true`; the
/// caller acknowledges it.
pub(crate) fn over_max_body<B: Broker>(
    app: &App,
    broker: &B,
    topic: &str,
    len: usize,
    what: &str,
) -> bool {
    let max_body = *app.options.limits.max_body;
    if len <= max_body {
        return false;
    }
    let detail = format!("the {what} is {len} bytes; at most --max-body ({max_body}) are taken");
    broker.stats().bad(topic, Reason::TooLarge, &detail, &[]);
    broker.counters().refused(Reason::TooLarge.metric());
    true
}

/// Parses and routes each message: the good ones grouped by property,
/// in order; the bad ones counted, and returned to be acknowledged.
fn sort<M: Delivery, B: Broker>(
    app: &App,
    broker: &B,
    batch: impl Iterator<Item = M>,
) -> (Vec<Group<M>>, Vec<M>) {
    let mut groups: Vec<Group<M>> = Vec::new();
    let mut bad = Vec::new();
    let mut index: HashMap<PropertyPath, usize> = HashMap::new();
    let horizon = Horizon::from_now(*app.options.timing.max_datetime_ahead);
    for msg in batch {
        let parsed = match broker.route(msg.topic()) {
            None => Err((
                Reason::Topic,
                format!(
                    "the topic matches no topic pattern ({}), or has an id that is empty, `.`, \
                     `..` or over 256 bytes",
                    broker.patterns()
                ),
            )),
            // Parsed by the group's ingest task: it needs the feature's
            // reference system, which a query may have fixed.
            Some(Route::Positions(key)) => {
                Ok((PropertyPath::sequence(key.collection, key.feature), None))
            }
            Some(Route::Property(key)) => payload::parse(msg.payload(), &horizon)
                .and_then(|p| no_positions(&key, p))
                .map(|p| (key, Some(p))),
        };
        let (key, payload) = match parsed {
            Ok(good) => good,
            Err((reason, detail)) => {
                refuse(broker, &msg, reason, reason.metric(), &detail);
                bad.push(msg);
                continue;
            }
        };
        let at = *index.entry(key.clone()).or_insert_with(|| {
            groups.push(Group {
                key,
                items: Vec::new(),
                numbers: Vec::new(),
            });
            groups.len() - 1
        });
        let group = &mut groups[at];
        let instants = match payload {
            None => Vec::new(),
            Some(Payload::Instants(instants)) => instants,
            Some(Payload::Number(v)) => {
                group.numbers.push((group.items.len(), v));
                Vec::new()
            }
        };
        group.items.push(Item { msg, instants });
    }
    (groups, bad)
}

/// Parses the messages of a feature's positions (`…/tgsequence`) as
/// `POST …/tgsequence/ingest` parses a body: in the feature's reference
/// system, once a query has fixed it. A message that is not positions is a
/// bad message (counted; acknowledged with the group, its instants empty):
/// `badDatetime` for a datetime at fault (not ISO-8601, not after the one
/// before it, past the horizon), as on a property's topic; else
/// `badPosition`.
async fn positions<M: Delivery, B: Broker>(app: &App, broker: &B, group: &mut Group<M>) {
    let known = match app.table.property(&group.key) {
        Some(property) => crs_of(&property).await,
        None => None,
    };
    let horizon = Horizon::from_now(*app.options.timing.max_datetime_ahead);
    for item in &mut group.items {
        let payload = item.msg.payload();
        match crate::positions::parse(payload, known, &horizon) {
            Ok(instants) => item.instants = instants,
            Err(problem) => {
                let reason = if problem.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                    Reason::TooLarge
                } else if !is_json(payload) {
                    Reason::NotJson
                } else if problem.field() == Some("datetime") {
                    Reason::BadDatetime
                } else {
                    Reason::BadPosition
                };
                let metric = if reason == Reason::NotJson {
                    reason.metric()
                } else {
                    metrics::Reason::of(&problem)
                };
                refuse(broker, &item.msg, reason, metric, problem.description());
            }
        }
    }
}

/// A property's payload, none of its instants a position (those are a
/// feature's, on its `tgsequence` topic).
fn no_positions(key: &PropertyPath, payload: Payload) -> Result<Payload, (Reason, String)> {
    match payload {
        Payload::Instants(instants) => crate::positions::scalars(instants, key)
            .map(Payload::Instants)
            .map_err(|problem| (Reason::WrongType, problem.description().to_owned())),
        number => Ok(number),
    }
}

/// The reference system a feature's positions are checked in, once fixed.
async fn crs_of(property: &Property) -> Option<Crs> {
    let state = property.state.lock().await;
    crate::positions::feature_crs(state.property_type, state.crs)
}

/// Whether `payload` is JSON, or JSON lines.
fn is_json(payload: &[u8]) -> bool {
    let json = |text: &[u8]| serde_json::from_slice::<serde::de::IgnoredAny>(text).is_ok();
    let trimmed = payload.trim_ascii();
    !trimmed.is_empty()
        && (json(trimmed)
            || trimmed
                .split(|&b| b == b'\n')
                .filter(|line| !line.trim_ascii().is_empty())
                .all(json))
}

/// Ingests one group; its property's mark after it, and the messages to
/// acknowledge (all of them but those whose ingest was cut short by a
/// shutdown).
async fn ingest<M: Delivery, B: Broker>(
    app: Arc<App>,
    broker: Arc<B>,
    mut group: Group<M>,
    mark: Option<Option<Timestamp>>,
) -> (PropertyPath, Option<Timestamp>, Vec<M>) {
    let mut mark = match mark {
        Some(mark) => mark,
        None => seed(&app, &group.key).await,
    };
    if group.key.is_sequence() {
        positions(&app, &*broker, &mut group).await;
    } else {
        stamp(&mut group, mark);
    }
    let stats = broker.stats();
    // The whole group at once, the common case.
    let (kept, duplicates, last) = fresh(group.items.iter().map(|i| &i.instants), mark);
    stats.duplicates.fetch_add(duplicates, Relaxed);
    if kept.is_empty() {
        return (group.key, mark, done(group.items));
    }
    let n = kept.len();
    match ingest::take(&app, &group.key, kept, ()).await {
        Ok(_) => {
            took(&*broker, n);
            return (group.key, last.or(mark), done(group.items));
        }
        Err(problem) => {
            if let Some(k) = problem.accepted().filter(|&k| k > 0) {
                // Taken in part (memory only): the mark says how far.
                mark = nth_datetime(group.items.iter().map(|i| &i.instants), mark, k).or(mark);
                took(&*broker, k);
            }
        }
    }
    // One message at a time: a refused one is a bad message alone; one
    // that cannot be taken now is tried again until it is.
    let mut acked = Vec::with_capacity(group.items.len());
    for item in group.items {
        if !one(&app, &*broker, &group.key, &item, &mut mark).await {
            // Shutting down: not acknowledged, sent again at the next start.
            return (group.key, mark, acked);
        }
        acked.push(item.msg);
    }
    (group.key, mark, acked)
}

/// Ingests one message's instants alone, moving `mark`: taken, or
/// refused as a bad message (counted), or tried again until one of those;
/// `false` when the server shuts down first.
async fn one<M: Delivery, B: Broker>(
    app: &Arc<App>,
    broker: &B,
    key: &PropertyPath,
    item: &Item<M>,
    mark: &mut Option<Timestamp>,
) -> bool {
    let stats = broker.stats();
    let mut wait = MIN_RETRY;
    loop {
        // The duplicates were counted for the whole group; what is
        // dropped here besides is what an earlier try took in part.
        let (kept, _, last) = fresh(std::iter::once(&item.instants), *mark);
        if kept.is_empty() {
            return true;
        }
        let n = kept.len();
        let problem = match ingest::take(app, key, kept, ()).await {
            Ok(_) => {
                took(broker, n);
                *mark = last.or(*mark);
                return true;
            }
            Err(problem) => problem,
        };
        if problem.status().is_client_error() {
            let reason = if problem.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                Reason::TooLarge
            } else if key.is_sequence() {
                Reason::BadPosition
            } else {
                Reason::WrongType
            };
            let metric = metrics::Reason::of(&problem);
            refuse(broker, &item.msg, reason, metric, problem.description());
            return true;
        }
        if let Some(k) = problem.accepted().filter(|&k| k > 0) {
            *mark = nth_datetime(std::iter::once(&item.instants), *mark, k).or(*mark);
            took(broker, k);
        }
        if app.table.is_closing() {
            return false;
        }
        stats.retries.fetch_add(1, Relaxed);
        tracing::debug!(
            topic = %item.msg.topic(),
            source = broker.name(),
            "ingest not taken now, trying again in {wait:?}: {}",
            problem.description()
        );
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(MAX_RETRY);
    }
}

/// Counts `n` instants the ingest path took: in the source's counters and
/// in `mfstream_ingest_instants_total{source}`.
fn took<B: Broker>(broker: &B, n: usize) {
    broker.stats().instants.fetch_add(n as u64, Relaxed);
    broker.counters().accepted(n);
}

/// Counts a bad message: in the source's counters (and samples, and the
/// log) by `reason`, and in `mfstream_ingest_refused_total{source}` by
/// `metric`.
fn refuse<M: Delivery, B: Broker>(
    broker: &B,
    msg: &M,
    reason: Reason,
    metric: metrics::Reason,
    why: &str,
) {
    broker.stats().bad(msg.topic(), reason, why, msg.payload());
    broker.counters().refused(metric);
}

fn done<M>(items: Vec<Item<M>>) -> Vec<M> {
    items.into_iter().map(|i| i.msg).collect()
}

/// The mark of a property not seen yet since start-up: the datetime of
/// the last instant in its log (with `--state`), else none.
async fn seed(app: &App, key: &PropertyPath) -> Option<Timestamp> {
    let store = app.store.clone()?;
    let path = key.clone();
    let newest = tokio::task::spawn_blocking(move || store.newest_instant(&path)).await;
    match newest {
        Ok(Ok(newest)) => newest.and_then(|n| mfstream_model::datetime::parse(&n.instant.datetime)),
        Ok(Err(e)) => {
            tracing::warn!("cannot read the last instant of {}: {e}", key.href());
            None
        }
        Err(e) => {
            tracing::warn!("cannot read the last instant of {}: {e}", key.href());
            None
        }
    }
}

/// Stamps the group's bare numbers.
fn stamp<M>(group: &mut Group<M>, mark: Option<Timestamp>) {
    if group.numbers.is_empty() {
        return;
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
    let numbers = std::mem::take(&mut group.numbers);
    let lists = group.items.iter_mut().map(|item| &mut item.instants);
    stamp_numbers(lists, &numbers, mark, now);
}

/// Gives each bare number (`numbers`: the index of its list, its value)
/// the time `now`, or a microsecond after the mark or the instant before
/// it when that is later.
fn stamp_numbers<'a>(
    lists: impl Iterator<Item = &'a mut Vec<Instant>>,
    numbers: &[(usize, f64)],
    mark: Option<Timestamp>,
    now: i64,
) {
    let mut after = mark.map_or(i64::MIN, micros);
    let mut next = numbers.iter().peekable();
    for (i, instants) in lists.enumerate() {
        match next.peek() {
            Some(&&(at, v)) if at == i => {
                next.next();
                let t = now.max(after.saturating_add(1));
                after = t;
                *instants = vec![Instant {
                    datetime: rfc3339_micros(t),
                    value: Value::Number(v),
                }];
            }
            _ => {
                for instant in instants.iter() {
                    if let Some(t) = mfstream_model::datetime::parse(&instant.datetime) {
                        after = after.max(micros(t));
                    }
                }
            }
        }
    }
}

fn micros(t: Timestamp) -> i64 {
    t.secs
        .saturating_mul(1_000_000)
        .saturating_add(i64::from(t.nanos / 1000))
}

/// `2026-01-01T00:00:00.000001Z` for a time in microseconds.
fn rfc3339_micros(t: i64) -> String {
    let mut text = mfstream_model::clock::rfc3339_millis(t.div_euclid(1000));
    text.pop(); // the Z
    text.push_str(&format!("{:03}Z", t.rem_euclid(1000)));
    text
}

/// The instants of `lists` after `mark`, each after the one before (the
/// others are duplicates); how many were dropped; the last datetime kept.
fn fresh<'a>(
    lists: impl Iterator<Item = &'a Vec<Instant>>,
    mut mark: Option<Timestamp>,
) -> (Vec<Instant>, u64, Option<Timestamp>) {
    let mut out = Vec::new();
    let mut duplicates = 0;
    let mut last = None;
    for instant in lists.flatten() {
        // Parsed when the payload was: a datetime that does not parse
        // never gets here.
        let Some(t) = mfstream_model::datetime::parse(&instant.datetime) else {
            continue;
        };
        if mark.is_some_and(|m| t <= m) {
            duplicates += 1;
            continue;
        }
        mark = Some(t);
        last = Some(t);
        out.push(instant.clone());
    }
    (out, duplicates, last)
}

/// The datetime of the `k`-th (1-based) instant `fresh` would keep.
fn nth_datetime<'a>(
    lists: impl Iterator<Item = &'a Vec<Instant>>,
    mark: Option<Timestamp>,
    k: usize,
) -> Option<Timestamp> {
    let (kept, _, _) = fresh(lists, mark);
    kept.get(k.checked_sub(1)?)
        .and_then(|i| mfstream_model::datetime::parse(&i.datetime))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(seconds: &[u32]) -> Vec<Instant> {
        seconds
            .iter()
            .map(|s| Instant::number(format!("2026-01-01T00:00:{s:02}Z"), f64::from(*s)))
            .collect()
    }

    fn t(s: u32) -> Option<Timestamp> {
        mfstream_model::datetime::parse(&format!("2026-01-01T00:00:{s:02}Z"))
    }

    #[test]
    fn instants_at_or_before_the_mark_or_the_one_kept_before_are_duplicates() {
        let a = list(&[1, 2, 3]);
        let b = list(&[3, 2, 4, 5]);
        let (kept, duplicates, last) = fresh([&a, &b].into_iter(), t(1));
        let seconds: Vec<f64> = kept.iter().map(|i| i.value.as_f64().unwrap()).collect();
        assert_eq!(seconds, [2.0, 3.0, 4.0, 5.0]);
        assert_eq!(duplicates, 3);
        assert_eq!(last, t(5));
        // Nothing kept: the mark stays.
        assert_eq!(fresh([&a].into_iter(), t(9)).2, None);
        assert_eq!(nth_datetime([&a, &b].into_iter(), t(1), 3), t(4));
    }

    #[test]
    fn bare_numbers_are_stamped_after_the_mark_and_after_the_instants_before_them() {
        assert_eq!(rfc3339_micros(1_000_001), "1970-01-01T00:00:01.000001Z");
        assert_eq!(rfc3339_micros(-1), "1969-12-31T23:59:59.999999Z");
        let now = 1_000_000;
        let future = "2999-01-01T00:00:00Z";
        let mut lists = [
            Vec::new(),
            vec![Instant::number(future, 1.0)],
            Vec::new(),
            Vec::new(),
        ];
        let mark = mfstream_model::datetime::parse("2998-01-01T00:00:00Z");
        stamp_numbers(lists.iter_mut(), &[(0, 7.0), (2, 8.0), (3, 9.0)], mark, now);
        assert_eq!(lists[0][0].datetime, "2998-01-01T00:00:00.000001Z");
        assert_eq!(lists[1][0].datetime, future);
        assert_eq!(lists[2][0].datetime, "2999-01-01T00:00:00.000001Z");
        assert_eq!(lists[2][0].value, Value::Number(8.0));
        assert_eq!(lists[3][0].datetime, "2999-01-01T00:00:00.000002Z");
        // Without a mark: the clock.
        let mut lists = [Vec::new()];
        stamp_numbers(lists.iter_mut(), &[(0, 1.0)], None, now);
        assert_eq!(lists[0][0].datetime, "1970-01-01T00:00:01.000000Z");
    }
}

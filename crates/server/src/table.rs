//! The query table: every registered query by id, and every temporal
//! property's feeds (the live sources of the queries reading it).
//!
//! A query's results are pumped from its [`QueryHandle`] into its
//! [`Fanout`] by a task of its own, which never waits for subscribers; the
//! query ends when it is deleted, when the server shuts down, or on its own
//! (a bridge job that crashes). An ended query stays in the table, with its
//! final status and its replay buffer, until it is deleted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use mfstream_engine::{Progress, QueryHandle, SourceSender};
use mfstream_model::budget::StateBudget;
use mfstream_model::{PropertyType, QueryStatus};
use mfstream_model::{QueryKind, QuerySpec};
use mfstream_store::PropertyLock;

use super::durable::{Keeper, Ledger, is_unknown};
use super::fanout::Fanout;
use super::metrics::EngineTally;
use super::wire::Kind;
use mfstream_model::PropertyPath;

/// A property's type and the feeds of the queries reading it, under the
/// lock that orders its ingests and registrations (which the store's
/// `register` requires).
#[derive(Debug)]
pub(crate) struct Property {
    pub(crate) state: PropertyLock<PropertyState>,
}

impl Property {
    pub(crate) fn new(key: &PropertyPath) -> Property {
        Property {
            state: PropertyLock::new(key.clone(), PropertyState::default()),
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct PropertyState {
    /// Fixed by the first registration or ingest.
    pub(crate) property_type: Option<PropertyType>,
    /// A feature's positions' reference system, fixed with its type.
    pub(crate) crs: Option<mfstream_model::geo::Crs>,
    pub(crate) feeds: Vec<Feed>,
}

/// The live source of one query.
#[derive(Debug)]
pub(crate) struct Feed {
    pub(crate) query_id: String,
    pub(crate) sender: SourceSender,
    pub(crate) stop: CancellationToken,
    /// What the query was fed since its checkpoint (with `--state`).
    pub(crate) ledger: Option<Arc<Ledger>>,
}

/// One registered query.
#[derive(Debug)]
pub(crate) struct Query {
    pub(crate) id: String,
    pub(crate) key: PropertyPath,
    pub(crate) engine: String,
    pub(crate) kind: Kind,
    pub(crate) operation: String,
    pub(crate) shape: Option<Shape>,
    pub(crate) status: watch::Receiver<QueryStatus>,
    /// Why the server failed the query, when it did (the state store
    /// refused its results): its engine was only stopped, but the query
    /// failed, and says so.
    pub(crate) failure: OnceLock<String>,
    pub(crate) stop: CancellationToken,
    pub(crate) fanout: Arc<Fanout>,
    /// The engine's counters (`skipped`): fresh for a query that ended
    /// before this start.
    pub(crate) progress: Arc<Progress>,
}

/// What a query is, as its path and its link object name it: the part of
/// a [`Query`] that a registration, a resumed query and one that ended
/// before a restart all have.
#[derive(Debug)]
pub(crate) struct About {
    pub(crate) id: String,
    pub(crate) key: PropertyPath,
    pub(crate) engine: String,
    pub(crate) kind: Kind,
    pub(crate) operation: String,
    /// For a query on positions: where its events lie.
    pub(crate) shape: Option<Shape>,
}

/// Where a position query's events lie, for a map of them: the feature's
/// reference system and the static geometry the query measures against.
#[derive(Debug)]
pub(crate) struct Shape {
    /// `EPSG:4326` or `EPSG:NNNN`.
    pub(crate) crs: String,
    /// A geofence's fence, `distance`'s target (GeoJSON, at most
    /// `MAX_GEOMETRY_BYTES` of it, as registered).
    pub(crate) geometry: Option<Arc<serde_json::Value>>,
}

impl About {
    /// The query `spec` (its id is the query's) on the engine `engine`.
    pub(crate) fn of(spec: &QuerySpec, key: PropertyPath, engine: &str) -> About {
        let shape = match &spec.kind {
            QueryKind::Position(q) => Some(Shape {
                // A `position` that reprojects draws in its output's system.
                crs: spec
                    .registered_crs()
                    .map_or_else(|| q.crs_name(), |crs| crs.name()),
                geometry: q.geometry().cloned().map(Arc::new),
            }),
            _ => None,
        };
        About {
            id: spec.id.clone(),
            key,
            engine: engine.to_owned(),
            kind: Kind::from(&spec.kind),
            operation: spec.operation_name().to_owned(),
            shape,
        }
    }
}

/// A query submitted to its engine, to be wired in by [`Table::start`].
#[derive(Debug)]
pub(crate) struct Started {
    pub(crate) about: About,
    pub(crate) property_type: PropertyType,
    /// For positions: their reference system.
    pub(crate) crs: Option<mfstream_model::geo::Crs>,
    pub(crate) handle: QueryHandle,
    /// Where the property's instants go to the query.
    pub(crate) sender: SourceSender,
    /// Where its results go (new, or as a restart found it).
    pub(crate) fanout: Arc<Fanout>,
    /// The query's state budget, which its replay buffer counts in.
    pub(crate) budget: Arc<StateBudget>,
    /// With `--state`: what moves its checkpoint (its ledger is its feed's).
    pub(crate) keeper: Option<Keeper>,
}

impl Query {
    /// A query that ended before this start, with its final `status` and
    /// the results `fanout` kept.
    pub(crate) fn ended(about: About, status: QueryStatus, fanout: Arc<Fanout>) -> Arc<Query> {
        Query::new(about, watch::channel(status).1, Default::default(), fanout)
    }

    fn new(
        about: About,
        status: watch::Receiver<QueryStatus>,
        progress: Arc<Progress>,
        fanout: Arc<Fanout>,
    ) -> Arc<Query> {
        let About {
            id,
            key,
            engine,
            kind,
            operation,
            shape,
        } = about;
        Arc::new(Query {
            id,
            key,
            engine,
            kind,
            operation,
            shape,
            status,
            failure: OnceLock::new(),
            stop: CancellationToken::new(),
            fanout,
            progress,
        })
    }

    /// The query's status: its engine's, unless the server failed it.
    pub(crate) fn status(&self) -> QueryStatus {
        match self.failure.get() {
            Some(reason) => QueryStatus::Failed {
                reason: reason.clone(),
            },
            None => self.status.borrow().clone(),
        }
    }

    /// The query's path.
    pub(crate) fn path(&self) -> String {
        format!("{}/queries/{}", self.key.href(), self.id)
    }
}

/// Every query and property of the server.
///
/// A property is kept while something uses it: a registered query (running
/// or ended, until it is deleted) or a registration under way. So a failed
/// registration, or the deletion of a property's last query, frees it, and
/// an ingest to a property nobody queries keeps nothing.
#[derive(Debug, Default)]
pub(crate) struct Table {
    inner: Mutex<Inner>,
    pumps: TaskTracker,
    closing: CancellationToken,
    /// Per engine, what its queries did (`GET /metrics`).
    pub(crate) engines: Arc<EngineTally>,
}

#[derive(Debug, Default)]
struct Inner {
    queries: HashMap<String, Arc<Query>>,
    properties: HashMap<PropertyPath, Held>,
    /// Queries registered plus registrations under way: what
    /// `--max-queries` bounds.
    reserved: usize,
}

/// A property and how many queries and registrations hold it.
#[derive(Debug)]
struct Held {
    property: Arc<Property>,
    holders: usize,
}

impl Inner {
    /// Lets go of one hold on `key`: the property goes with the last one.
    fn release(&mut self, key: &PropertyPath) {
        if let Some(held) = self.properties.get_mut(key) {
            held.holders -= 1;
            if held.holders == 0 {
                self.properties.remove(key);
            }
        }
    }
}

/// Why a registration cannot be reserved.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Full {
    /// `--max-queries` are registered or being registered.
    Queries,
    /// `--max-properties` are in use.
    Properties,
}

/// A slot for one query on one property, taken before the query is
/// submitted (so concurrent registrations never exceed the bounds) and
/// given back when dropped unless [`Table::insert`] took it.
#[derive(Debug)]
pub(crate) struct Reservation<'a> {
    table: &'a Table,
    key: PropertyPath,
    pub(crate) property: Arc<Property>,
    taken: bool,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.taken {
            let mut inner = self.table.inner();
            inner.reserved -= 1;
            inner.release(&self.key);
        }
    }
}

impl Table {
    fn inner(&self) -> MutexGuard<'_, Inner> {
        // Every update completes under the lock without panicking paths: a
        // poisoned table is still consistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reserves a query slot on `key`, making the property if it is new,
    /// while fewer than `max_queries` queries and `max_properties`
    /// properties are held.
    pub(crate) fn reserve(
        &self,
        key: &PropertyPath,
        max_queries: usize,
        max_properties: usize,
    ) -> Result<Reservation<'_>, Full> {
        let mut inner = self.inner();
        if inner.reserved >= max_queries {
            return Err(Full::Queries);
        }
        let known = inner.properties.len();
        let property = match inner.properties.get_mut(key) {
            Some(held) => {
                held.holders += 1;
                held.property.clone()
            }
            None if known >= max_properties => return Err(Full::Properties),
            None => {
                let property = Arc::new(Property::new(key));
                inner.properties.insert(
                    key.clone(),
                    Held {
                        property: property.clone(),
                        holders: 1,
                    },
                );
                property
            }
        };
        inner.reserved += 1;
        Ok(Reservation {
            table: self,
            key: key.clone(),
            property,
            taken: false,
        })
    }

    /// The property at `key`, if a query holds it.
    pub(crate) fn property(&self, key: &PropertyPath) -> Option<Arc<Property>> {
        self.inner()
            .properties
            .get(key)
            .map(|held| held.property.clone())
    }

    /// The number of properties held.
    #[cfg(test)]
    fn properties(&self) -> usize {
        self.inner().properties.len()
    }

    /// The query `id`, if it is registered under `key`: an id is found only
    /// under its own path.
    pub(crate) fn get(&self, key: &PropertyPath, id: &str) -> Option<Arc<Query>> {
        self.inner()
            .queries
            .get(id)
            .filter(|q| &q.key == key)
            .cloned()
    }

    /// Every query, in no order.
    pub(crate) fn all(&self) -> Vec<Arc<Query>> {
        self.inner().queries.values().cloned().collect()
    }

    /// The queries on `key`.
    pub(crate) fn list(&self, key: &PropertyPath) -> Vec<Arc<Query>> {
        let mut list: Vec<_> = self
            .inner()
            .queries
            .values()
            .filter(|q| &q.key == key)
            .cloned()
            .collect();
        list.sort_by(|a, b| a.id.cmp(&b.id));
        list
    }

    /// Whether the server is shutting down.
    pub(crate) fn is_closing(&self) -> bool {
        self.closing.is_cancelled()
    }

    /// Adds a started query in its reserved slot: its pump starts
    /// delivering its results.
    /// With `--state`, `keeper` stores each result before it is sent.
    fn insert(
        &self,
        mut reservation: Reservation<'_>,
        query: Arc<Query>,
        handle: QueryHandle,
        keeper: Option<Keeper>,
    ) {
        reservation.taken = true;
        let property = reservation.property.clone();
        self.inner().queries.insert(query.id.clone(), query.clone());
        let span = tracing::info_span!("query", id = %query.id, engine = %query.engine);
        let closing = self.closing.clone();
        let running = self.engines.start(&query.engine, query.progress.clone());
        self.pumps.spawn(
            async move {
                let status = pump(query, handle, property, keeper, closing).await;
                running.end(&status);
            }
            .instrument(span),
        );
    }

    /// Wires a submitted query in, the one assembly of a registration and
    /// of a query resumed after a restart: the query in its reserved slot,
    /// its results pumped into its fanout (counted in its budget), and its
    /// feed on the property whose lock `state` is, which fixes the
    /// property's type. The caller holds that lock, so no ingest reaches the
    /// query before it is in the table.
    pub(crate) fn start(
        &self,
        reservation: Reservation<'_>,
        state: &mut PropertyState,
        started: Started,
    ) -> Arc<Query> {
        let Started {
            about,
            property_type,
            crs,
            handle,
            sender,
            fanout,
            budget,
            keeper,
        } = started;
        fanout.count_in(budget);
        let query = Query::new(
            about,
            handle.watch_status(),
            handle.progress_counters(),
            fanout,
        );
        state.property_type = Some(property_type);
        state.crs = state.crs.or(crs);
        state.feeds.push(Feed {
            query_id: query.id.clone(),
            sender,
            stop: query.stop.clone(),
            ledger: keeper.as_ref().map(|k| k.ledger.clone()),
        });
        self.insert(reservation, query.clone(), handle, keeper);
        query
    }

    /// Adds a query that had ended before a restart, with its results and
    /// final status, in its reserved slot.
    pub(crate) fn insert_ended(&self, mut reservation: Reservation<'_>, query: Arc<Query>) {
        reservation.taken = true;
        self.inner().queries.insert(query.id.clone(), query);
    }

    /// Stops and removes the query `id` under `key`, freeing its slot (and
    /// its property, if it was the last query on it); false if there is
    /// none.
    pub(crate) fn remove(&self, key: &PropertyPath, id: &str) -> bool {
        let mut inner = self.inner();
        match inner.queries.get(id) {
            Some(q) if &q.key == key => {
                q.stop.cancel();
                inner.queries.remove(id);
                inner.reserved -= 1;
                inner.release(key);
                true
            }
            _ => false,
        }
    }

    /// Stops every query and waits up to `wait` for each to end; a query
    /// still running then has its results ended anyway, so every subscriber
    /// gets its `end` event.
    pub(crate) async fn shutdown(&self, wait: Duration) {
        self.closing.cancel();
        let queries: Vec<_> = self.inner().queries.values().cloned().collect();
        for query in &queries {
            query.stop.cancel();
        }
        self.pumps.close();
        if tokio::time::timeout(wait, self.pumps.wait()).await.is_err() {
            tracing::warn!("some queries did not end within {wait:?} of the shutdown");
            for query in &queries {
                query.fanout.finish(&QueryStatus::Stopped);
            }
        }
    }
}

/// Moves a query's results into its fanout (counting what they say was
/// late) until it ends, then records the end, takes its feed off the
/// property, and returns its final status.
///
/// With `--state` (a `keeper`), each batch is stored before it is sent, and
/// the final status is stored before the `end` event, except a stop by the
/// server's shutdown: the query is still running as far as the next start
/// is concerned, and the results it gives after the stop are dropped (they
/// are computed again after the restart, from its checkpoint).
async fn pump(
    query: Arc<Query>,
    mut handle: QueryHandle,
    property: Arc<Property>,
    mut keeper: Option<Keeper>,
    closing: CancellationToken,
) -> QueryStatus {
    tracing::debug!("query started");
    let mut stop_sent = false;
    let mut failure: Option<String> = None;
    loop {
        tokio::select! {
            batch = handle.next_batch() => match batch.inspect(|b| query.fanout.tally.count_batch(b)) {
                Some(batch) => match &mut keeper {
                    None => query.fanout.push(&batch),
                    Some(_) if failure.is_some() || (stop_sent && closing.is_cancelled()) => {}
                    Some(keeper) => {
                        if let Err(e) = keeper.keep(&query.id, &batch, &query.fanout).await {
                            if !is_unknown(&e) {
                                tracing::error!("cannot store the query's results: {e}");
                                let reason = format!("the state store refused its results: {e}");
                                // Shown at once, before its engine reports
                                // the stop that follows.
                                let _ = query.failure.set(reason.clone());
                                failure = Some(reason);
                            }
                            handle.stop();
                            stop_sent = true;
                        }
                    }
                },
                None => break,
            },
            _ = query.stop.cancelled(), if !stop_sent => {
                handle.stop();
                stop_sent = true;
            }
        }
    }
    let status = match failure {
        Some(reason) => QueryStatus::Failed { reason },
        None => handle.status(),
    };
    let shut_down = closing.is_cancelled() && status == QueryStatus::Stopped;
    if let Some(keeper) = &keeper
        && !shut_down
        && let Err(e) = keeper.store.set_status(&query.id, &status).await
        && !is_unknown(&e)
    {
        tracing::error!("cannot store the query's status: {e}");
    }
    query.fanout.finish(&status);
    property
        .state
        .lock()
        .await
        .feeds
        .retain(|feed| feed.query_id != query.id);
    match &status {
        QueryStatus::Failed { reason } => tracing::warn!(%reason, "query failed"),
        other => tracing::debug!(status = %other, events = query.fanout.events(), "query ended"),
    }
    status
}

/// A fresh query id: 128 random bits, in hex.
pub(crate) fn new_id() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_128_random_bits_and_differ() {
        let a = new_id().unwrap();
        let b = new_id().unwrap();
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }

    fn key(property: &str) -> PropertyPath {
        PropertyPath {
            collection: "c".into(),
            feature: "f".into(),
            property: property.into(),
        }
    }

    #[test]
    fn a_reservation_not_taken_frees_its_query_slot_and_its_property() {
        let table = Table::default();
        let first = table.reserve(&key("a"), 2, 1).unwrap();
        assert_eq!(table.properties(), 1);
        // The one property is in use: another is refused.
        assert_eq!(
            table.reserve(&key("b"), 2, 1).unwrap_err(),
            Full::Properties
        );
        let second = table.reserve(&key("a"), 2, 1).unwrap();
        assert_eq!(table.reserve(&key("a"), 2, 1).unwrap_err(), Full::Queries);
        drop(first);
        assert_eq!(table.properties(), 1, "still held by the second");
        drop(second);
        assert_eq!(table.properties(), 0);
        assert!(table.property(&key("a")).is_none());
        assert!(table.reserve(&key("b"), 2, 1).is_ok());
    }

    #[test]
    fn paths_percent_encode_their_ids() {
        let key = PropertyPath {
            collection: "ships".into(),
            feature: "a b/c".into(),
            property: "speed".into(),
        };
        assert_eq!(
            key.href(),
            "/collections/ships/items/a%20b%2Fc/tproperties/speed"
        );
    }
}

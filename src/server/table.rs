//! The query table: every registered query by id, and every temporal
//! property's feeds (the live sources of the queries reading it).
//!
//! A query's results are pumped from its [`QueryHandle`] into its
//! [`Fanout`] by a task of its own, which never waits for subscribers; the
//! query ends when it is deleted, when the server shuts down, or on its own
//! (a bridge job that crashes). An ended query stays in the table, with its
//! final status and its replay buffer, until it is deleted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::engine::{QueryHandle, SourceSender};
use crate::vocab::{PropertyType, QueryStatus};

use super::fanout::Fanout;

/// A temporal property: `/collections/{cid}/items/{fid}/tproperties/{pname}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PropertyKey {
    pub(crate) collection: String,
    pub(crate) feature: String,
    pub(crate) property: String,
}

impl PropertyKey {
    /// The property's path, each id percent-encoded.
    pub(crate) fn path(&self) -> String {
        format!(
            "/collections/{}/items/{}/tproperties/{}",
            encode(&self.collection),
            encode(&self.feature),
            encode(&self.property)
        )
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A property's type and the queries reading it.
#[derive(Debug, Default)]
pub(crate) struct Property {
    pub(crate) state: tokio::sync::Mutex<PropertyState>,
}

#[derive(Debug, Default)]
pub(crate) struct PropertyState {
    /// Fixed by the first registration or ingest.
    pub(crate) property_type: Option<PropertyType>,
    pub(crate) feeds: Vec<Feed>,
}

/// The live source of one query.
#[derive(Debug)]
pub(crate) struct Feed {
    pub(crate) query_id: String,
    pub(crate) sender: SourceSender,
    pub(crate) stop: CancellationToken,
}

/// One registered query.
#[derive(Debug)]
pub(crate) struct Query {
    pub(crate) id: String,
    pub(crate) key: PropertyKey,
    pub(crate) engine: String,
    /// `transform` or `aggregate`.
    pub(crate) kind: &'static str,
    pub(crate) operation: String,
    pub(crate) status: watch::Receiver<QueryStatus>,
    pub(crate) stop: CancellationToken,
    pub(crate) fanout: Arc<Fanout>,
}

impl Query {
    /// The query's path.
    pub(crate) fn path(&self) -> String {
        format!("{}/queries/{}", self.key.path(), self.id)
    }
}

/// Every query and property of the server.
#[derive(Debug, Default)]
pub(crate) struct Table {
    queries: Mutex<HashMap<String, Arc<Query>>>,
    properties: Mutex<HashMap<PropertyKey, Arc<Property>>>,
    pumps: TaskTracker,
    closing: CancellationToken,
}

impl Table {
    fn queries(&self) -> MutexGuard<'_, HashMap<String, Arc<Query>>> {
        // Every update is one insert or remove: a poisoned map is consistent.
        self.queries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The property at `key`, made on first use while fewer than `max`
    /// properties are known (each keeps its type for the server's life).
    pub(crate) fn property(&self, key: &PropertyKey, max: usize) -> Option<Arc<Property>> {
        let mut properties = self.properties.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(property) = properties.get(key) {
            return Some(property.clone());
        }
        if properties.len() >= max {
            return None;
        }
        Some(properties.entry(key.clone()).or_default().clone())
    }

    /// The query `id`, if it is registered under `key`: an id is found only
    /// under its own path.
    pub(crate) fn get(&self, key: &PropertyKey, id: &str) -> Option<Arc<Query>> {
        self.queries().get(id).filter(|q| &q.key == key).cloned()
    }

    /// The queries on `key`.
    pub(crate) fn list(&self, key: &PropertyKey) -> Vec<Arc<Query>> {
        let mut list: Vec<_> = self
            .queries()
            .values()
            .filter(|q| &q.key == key)
            .cloned()
            .collect();
        list.sort_by(|a, b| a.id.cmp(&b.id));
        list
    }

    /// The number of registered queries.
    pub(crate) fn len(&self) -> usize {
        self.queries().len()
    }

    /// Whether the server is shutting down.
    pub(crate) fn is_closing(&self) -> bool {
        self.closing.is_cancelled()
    }

    /// Adds a started query: its pump starts delivering its results.
    pub(crate) fn insert(&self, query: Arc<Query>, handle: QueryHandle, property: Arc<Property>) {
        self.queries().insert(query.id.clone(), query.clone());
        let span = tracing::info_span!("query", id = %query.id, engine = %query.engine);
        self.pumps
            .spawn(pump(query, handle, property).instrument(span));
    }

    /// Stops and removes the query `id` under `key`; false if there is none.
    pub(crate) fn remove(&self, key: &PropertyKey, id: &str) -> bool {
        let mut queries = self.queries();
        match queries.get(id) {
            Some(q) if &q.key == key => {
                q.stop.cancel();
                queries.remove(id);
                true
            }
            _ => false,
        }
    }

    /// Stops every query and waits up to `wait` for each to end (every
    /// subscriber then gets its `end` event).
    pub(crate) async fn shutdown(&self, wait: Duration) {
        self.closing.cancel();
        for query in self.queries().values() {
            query.stop.cancel();
        }
        self.pumps.close();
        if tokio::time::timeout(wait, self.pumps.wait()).await.is_err() {
            tracing::warn!("some queries did not end within {wait:?} of the shutdown");
        }
    }
}

/// Moves a query's results into its fanout until it ends, then records the
/// end and takes its feed off the property.
async fn pump(query: Arc<Query>, mut handle: QueryHandle, property: Arc<Property>) {
    tracing::debug!("query started");
    let mut stop_sent = false;
    loop {
        tokio::select! {
            batch = handle.next_batch() => match batch {
                Some(batch) => query.fanout.push(&batch),
                None => break,
            },
            _ = query.stop.cancelled(), if !stop_sent => {
                handle.stop();
                stop_sent = true;
            }
        }
    }
    let status = handle.status();
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

    #[test]
    fn paths_percent_encode_their_ids() {
        let key = PropertyKey {
            collection: "ships".into(),
            feature: "a b/c".into(),
            property: "speed".into(),
        };
        assert_eq!(
            key.path(),
            "/collections/ships/items/a%20b%2Fc/tproperties/speed"
        );
    }
}

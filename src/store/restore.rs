//! Reading the store back at start-up: the queries with their rings and
//! checkpoints, and the instants a query still has to be fed.
//!
//! Reads run on a connection of their own, in a read transaction (one
//! consistent snapshot), and never hold up the writer (WAL readers do not
//! block it).

use std::time::{Duration, UNIX_EPOCH};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, params};

use super::batch;
use super::error::{StoreErrorKind, classify};
use super::record::{Checkpoint, LoggedInstant, PropertyPath, RestoredQuery, StoredEvent};
use super::writer::Bounds;
use crate::vocab::QueryStatus;

fn db(e: rusqlite::Error) -> StoreErrorKind {
    classify(&e)
}

/// Every query, oldest registration first, each with its ring.
pub(crate) fn queries(
    conn: &mut Connection,
    bounds: Bounds,
) -> Result<Vec<RestoredQuery>, StoreErrorKind> {
    let tx = conn.transaction().map_err(db)?;
    let mut queries = Vec::new();
    {
        let mut stmt = tx
            .prepare(
                "SELECT q.id, p.collection, p.feature, p.property, q.spec, q.engine, q.status, \
                 q.reason, q.created_ms, q.last_event_id, q.checkpoint_seq, \
                 q.checkpoint_event_id, q.checkpoint_state \
                 FROM queries q JOIN properties p ON p.id = q.property \
                 ORDER BY q.created_ms, q.id",
            )
            .map_err(db)?;
        let mut rows = stmt.query([]).map_err(db)?;
        while let Some(r) = rows.next().map_err(db)? {
            let id: String = r.get(0).map_err(db)?;
            let status = status(
                &r.get::<_, String>(6).map_err(db)?,
                r.get::<_, Option<String>>(7).map_err(db)?,
            )
            .ok_or_else(|| {
                StoreErrorKind::Malformed(format!("query {id:?} has an unknown status"))
            })?;
            let created_ms: i64 = r.get(8).map_err(db)?;
            queries.push(RestoredQuery {
                property: PropertyPath {
                    collection: r.get(1).map_err(db)?,
                    feature: r.get(2).map_err(db)?,
                    property: r.get(3).map_err(db)?,
                },
                spec: r.get(4).map_err(db)?,
                engine: r.get(5).map_err(db)?,
                status,
                created: UNIX_EPOCH + Duration::from_millis(created_ms.max(0) as u64),
                last_event_id: r.get(9).map_err(db)?,
                ring: Vec::new(),
                checkpoint: Checkpoint {
                    after_seq: r.get(10).map_err(db)?,
                    last_event_id: r.get(11).map_err(db)?,
                    state: r.get(12).map_err(db)?,
                },
                id,
            });
        }
        let mut stmt = tx
            .prepare("SELECT first_id, data FROM events WHERE query = ?1 ORDER BY first_id")
            .map_err(db)?;
        for query in &mut queries {
            let mut rows = stmt.query([&query.id]).map_err(db)?;
            while let Some(r) = rows.next().map_err(db)? {
                let first: u64 = r.get(0).map_err(db)?;
                let data = match r.get_ref(1).map_err(db)? {
                    ValueRef::Blob(data) => data,
                    other => {
                        return Err(StoreErrorKind::Malformed(format!(
                            "the events of query {:?} from {first} are a {}, not a blob",
                            query.id,
                            other.data_type()
                        )));
                    }
                };
                batch::decode_events(data, first, |e| query.ring.push(e)).map_err(|e| {
                    StoreErrorKind::Malformed(format!(
                        "the events of query {:?} from {first}: {e}",
                        query.id
                    ))
                })?;
            }
            trim(&mut query.ring, bounds);
        }
    }
    tx.commit().map_err(db)?;
    Ok(queries)
}

/// The ring as its bounds say: the writer deletes whole rows, so the rows
/// kept may hold a few events more than the ring; the oldest go while it is
/// over a bound, but the newest always stays.
fn trim(ring: &mut Vec<StoredEvent>, bounds: Bounds) {
    let mut bytes: usize = ring.iter().map(StoredEvent::size).sum();
    let mut drop = 0;
    while ring.len() - drop > 1
        && (ring.len() - drop > bounds.ring_events || bytes > bounds.ring_bytes)
    {
        bytes -= ring[drop].size();
        drop += 1;
    }
    ring.drain(..drop);
}

fn status(name: &str, reason: Option<String>) -> Option<QueryStatus> {
    Some(match name {
        "running" => QueryStatus::Running,
        "completed" => QueryStatus::Completed,
        "stopped" => QueryStatus::Stopped,
        "failed" => QueryStatus::Failed {
            reason: reason.unwrap_or_default(),
        },
        _ => return None,
    })
}

/// Up to `limit` instants of `property` with sequence numbers above
/// `after`, in order.
pub(crate) fn instants(
    conn: &Connection,
    property: &PropertyPath,
    after: u64,
    limit: usize,
) -> Result<Vec<LoggedInstant>, StoreErrorKind> {
    // The walk starts at the batch holding `after + 1`, if one does (at
    // most one batch straddles it: batches never overlap), and filters on
    // the property as it goes: an index on the property would slow every
    // ingest for the sake of one read at start-up.
    let mut stmt = conn
        .prepare_cached(
            "SELECT first_seq, data FROM instants \
             WHERE first_seq >= coalesce((SELECT max(first_seq) FROM instants WHERE first_seq <= ?1), 0) \
             AND property = (SELECT id FROM properties \
                             WHERE collection = ?2 AND feature = ?3 AND property = ?4) \
             ORDER BY first_seq",
        )
        .map_err(db)?;
    let mut rows = stmt
        .query(params![
            after.saturating_add(1),
            property.collection,
            property.feature,
            property.property
        ])
        .map_err(db)?;
    let mut out = Vec::new();
    while out.len() < limit {
        let Some(r) = rows.next().map_err(db)? else {
            break;
        };
        let first: u64 = r.get(0).map_err(db)?;
        let data = match r.get_ref(1).map_err(db)? {
            ValueRef::Blob(data) => data,
            other => {
                return Err(StoreErrorKind::Malformed(format!(
                    "the instants from {first} are a {}, not a blob",
                    other.data_type()
                )));
            }
        };
        let mut seq = first;
        batch::decode(data, |instant| {
            if seq > after && out.len() < limit {
                out.push(LoggedInstant { seq, instant });
            }
            seq += 1;
        })
        .map_err(|e| StoreErrorKind::Malformed(format!("the instants from {first}: {e}")))?;
    }
    Ok(out)
}

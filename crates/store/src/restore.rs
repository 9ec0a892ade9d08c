//! Reading the database back: the queries as registered, with their
//! statuses. Their rings, checkpoints and instants are in the journal.
//!
//! Reads run on a connection of their own, in a read transaction (one
//! consistent snapshot), and never hold up the writer (WAL readers do not
//! block it).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::Connection;

use super::error::{StoreErrorKind, classify};
use super::record::PropertyPath;
use mfstream_model::QueryStatus;

fn db(e: rusqlite::Error) -> StoreErrorKind {
    classify(&e)
}

/// A query as the database holds it.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub id: String,
    pub property: PropertyPath,
    pub spec: String,
    pub engine: String,
    pub status: QueryStatus,
    pub created: SystemTime,
    /// The registration's checkpoint: the last instant logged before it.
    pub start_seq: u64,
}

/// Every query, oldest registration first.
pub(crate) fn queries(conn: &mut Connection) -> Result<Vec<Row>, StoreErrorKind> {
    let tx = conn.transaction().map_err(db)?;
    let mut queries = Vec::new();
    {
        let mut stmt = tx
            .prepare(
                "SELECT q.id, p.collection, p.feature, p.property, q.spec, q.engine, q.status, \
                 q.reason, q.created_ms, q.start_seq \
                 FROM queries q LEFT JOIN properties p ON p.id = q.property \
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
            // A join would drop such a query without a word.
            let (Some(collection), Some(feature), Some(property)) = (
                r.get(1).map_err(db)?,
                r.get(2).map_err(db)?,
                r.get(3).map_err(db)?,
            ) else {
                return Err(StoreErrorKind::Malformed(format!(
                    "query {id:?} reads a property the catalog does not hold: restore the catalog \
                     from a backup"
                )));
            };
            queries.push(Row {
                property: PropertyPath {
                    collection,
                    feature,
                    property,
                },
                spec: r.get(4).map_err(db)?,
                engine: r.get(5).map_err(db)?,
                status,
                created: UNIX_EPOCH + Duration::from_millis(created_ms.max(0) as u64),
                start_seq: r.get(9).map_err(db)?,
                id,
            });
        }
    }
    tx.commit().map_err(db)?;
    Ok(queries)
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

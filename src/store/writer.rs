//! The writer: one thread owns the database connection and commits
//! whatever is queued as one transaction (group commit), then acknowledges
//! each caller.
//!
//! The queue is bounded, so callers wait (backpressure) instead of memory
//! growing. The writer keeps a small cache of what it needs to check and
//! trim without reading the database back: the next sequence number, each
//! query's last event id, checkpoint and replay-ring rows and sizes. A job is
//! checked against the cache, written inside a savepoint (so that one bad
//! job fails alone), and only then applied to the cache. If a commit
//! fails, every job of the batch gets the error and the cache is reloaded
//! from the database.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;

use rusqlite::{Connection, params};
use tokio::sync::{mpsc, oneshot};

use super::batch;
use super::error::{StoreErrorKind, classify};
use super::record::{Checkpoint, EventBatch, NewQuery, PropertyPath};
use super::wal::Checkpointer;
use crate::vocab::QueryStatus;

/// The most jobs one transaction takes.
const MAX_JOBS_PER_COMMIT: usize = 4096;

/// Instants below every running query's low-water mark are deleted once
/// this many have piled up (deleting on every commit would cost a write per
/// commit for little space).
const TRIM_EVERY: u64 = 4096;

/// The answer to one job.
pub(crate) type Ack<T> = oneshot::Sender<Result<T, StoreErrorKind>>;

/// One request to the writer.
#[derive(Debug)]
pub(crate) enum Job {
    Register {
        query: NewQuery,
        ack: Ack<Checkpoint>,
    },
    Status {
        id: String,
        status: QueryStatus,
        ack: Ack<()>,
    },
    Events {
        id: String,
        events: EventBatch,
        checkpoint: Option<Checkpoint>,
        ack: Ack<()>,
    },
    Delete {
        id: String,
        ack: Ack<()>,
    },
    /// `count` instants, encoded by the caller (off the writer's thread).
    Instants {
        property: PropertyPath,
        count: u64,
        data: Vec<u8>,
        ack: Ack<Range<u64>>,
    },
}

impl Job {
    /// About the bytes the job holds and writes to the log.
    pub(crate) fn size(&self) -> usize {
        match self {
            Job::Register { query, .. } => query.spec.len() + 128,
            Job::Status { .. } | Job::Delete { .. } => 128,
            Job::Events { events, .. } => events.data().len() + 32,
            Job::Instants { data, .. } => data.len() + 32,
        }
    }
}

/// The bounds the writer keeps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    pub(crate) ring_events: usize,
    pub(crate) ring_bytes: usize,
}

#[derive(Debug, Default)]
struct QueryState {
    running: bool,
    /// The property it reads (its row id).
    property: i64,
    last_event_id: u64,
    checkpoint_seq: u64,
    checkpoint_event_id: u64,
    /// The ring's rows, oldest first: first event id, events, bytes (of
    /// kinds and data).
    ring: VecDeque<(u64, usize, usize)>,
    /// The events in `ring`.
    ring_len: usize,
    ring_bytes: usize,
}

pub(crate) struct Writer {
    conn: Connection,
    checkpointer: Checkpointer,
    bounds: Bounds,
    next_seq: u64,
    /// The next sequence number as last written to `meta`.
    stored_next_seq: u64,
    /// For each property (by row id): every instant of it up to this
    /// sequence number has been deleted.
    trimmed: HashMap<i64, u64>,
    properties: HashMap<PropertyPath, i64>,
    /// The last sequence number logged for each property (by row id).
    logged: HashMap<i64, u64>,
    queries: HashMap<String, QueryState>,
}

/// A job's answer, sent once its transaction's fate is known.
type Reply = Box<dyn FnOnce(Option<&StoreErrorKind>) + Send>;

fn reply<T: Send + 'static>(ack: Ack<T>, result: Result<T, StoreErrorKind>) -> Reply {
    Box::new(move |commit: Option<&StoreErrorKind>| {
        let answer = match commit {
            Some(e) => Err(e.clone()),
            None => result,
        };
        // A caller that gave up waiting no longer wants the answer.
        let _ = ack.send(answer);
    })
}

/// The reply of a job that failed before it was applied.
fn fail(job: Job, e: StoreErrorKind) -> Reply {
    match job {
        Job::Register { ack, .. } => reply(ack, Err(e)),
        Job::Status { ack, .. } | Job::Events { ack, .. } | Job::Delete { ack, .. } => {
            reply(ack, Err(e))
        }
        Job::Instants { ack, .. } => reply(ack, Err(e)),
    }
}

fn db(e: rusqlite::Error) -> StoreErrorKind {
    classify(&e)
}

impl Writer {
    /// A writer on `conn`, its cache loaded from the database.
    pub(crate) fn new(
        conn: Connection,
        checkpointer: Checkpointer,
        bounds: Bounds,
    ) -> Result<Writer, StoreErrorKind> {
        let mut writer = Writer {
            conn,
            checkpointer,
            bounds,
            next_seq: 1,
            stored_next_seq: 1,
            trimmed: HashMap::new(),
            properties: HashMap::new(),
            logged: HashMap::new(),
            queries: HashMap::new(),
        };
        writer.load()?;
        Ok(writer)
    }

    fn load(&mut self) -> Result<(), StoreErrorKind> {
        let conn = &self.conn;
        let stored: i64 = conn
            .query_row("SELECT value FROM meta WHERE key = 'next_seq'", [], |r| {
                r.get(0)
            })
            .map_err(db)?;
        let max: Option<i64> = conn
            .query_row("SELECT max(last_seq) FROM instants", [], |r| r.get(0))
            .map_err(db)?;
        let next_seq = (stored.max(max.unwrap_or(0) + 1)).max(1) as u64;
        let mut queries = HashMap::new();
        let mut stmt = conn
            .prepare(
                "SELECT id, status, last_event_id, checkpoint_seq, checkpoint_event_id, property \
                 FROM queries",
            )
            .map_err(db)?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    QueryState {
                        running: r.get::<_, String>(1)? == "running",
                        last_event_id: r.get(2)?,
                        checkpoint_seq: r.get(3)?,
                        checkpoint_event_id: r.get(4)?,
                        property: r.get(5)?,
                        ..QueryState::default()
                    },
                ))
            })
            .map_err(db)?;
        for row in rows {
            let (id, state) = row.map_err(db)?;
            queries.insert(id, state);
        }
        let mut stmt = conn
            .prepare(
                "SELECT query, first_id, last_id, length(data) FROM events \
                 ORDER BY query, first_id",
            )
            .map_err(db)?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, u64>(1)?,
                    r.get::<_, u64>(2)?,
                    r.get::<_, usize>(3)?,
                ))
            })
            .map_err(db)?;
        for row in rows {
            let (query, first, last, size) = row.map_err(db)?;
            if let Some(state) = queries.get_mut(&query) {
                let len = (last + 1).saturating_sub(first) as usize;
                let bytes = size.saturating_sub(len * batch::EVENT_OVERHEAD);
                state.ring.push_back((first, len, bytes));
                state.ring_len += len;
                state.ring_bytes += bytes;
            }
        }
        let mut logged = HashMap::new();
        let mut trimmed = HashMap::new();
        let mut stmt = conn
            .prepare(
                "SELECT property, min(first_seq), max(last_seq) FROM instants GROUP BY property",
            )
            .map_err(db)?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, u64>(1)?,
                    r.get::<_, u64>(2)?,
                ))
            })
            .map_err(db)?;
        for row in rows {
            let (property, first, last) = row.map_err(db)?;
            logged.insert(property, last);
            trimmed.insert(property, first.saturating_sub(1));
        }
        self.logged = logged;
        self.trimmed = trimmed;
        self.next_seq = next_seq;
        self.stored_next_seq = stored.max(1) as u64;
        self.properties.clear();
        self.queries = queries;
        Ok(())
    }

    /// Commits batches until every sender is gone.
    pub(crate) fn run(mut self, mut jobs: mpsc::Receiver<Job>) {
        let mut batch = Vec::new();
        while let Some(first) = jobs.blocking_recv() {
            batch.push(first);
            while batch.len() < MAX_JOBS_PER_COMMIT {
                match jobs.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
            self.commit(&mut batch);
        }
        self.checkpointer.stop();
        // Leave a small WAL behind: the next open starts quickly.
        if let Err(e) = self.conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)") {
            tracing::debug!("no checkpoint of the state store's log at close: {e}");
        }
    }

    /// Writes `batch` in one transaction, then answers every job.
    fn commit(&mut self, batch: &mut Vec<Job>) {
        let mut replies: Vec<Reply> = Vec::with_capacity(batch.len());
        if let Err(e) = self.conn.execute_batch("BEGIN IMMEDIATE") {
            let e = db(e);
            for job in batch.drain(..) {
                fail(job, e.clone())(None);
            }
            return;
        }
        let mut ingested = false;
        let mut bytes = 0;
        for job in batch.drain(..) {
            ingested |= matches!(job, Job::Instants { .. });
            bytes += job.size();
            replies.push(self.apply_in_savepoint(job));
        }
        let result = self
            .finish_batch(ingested)
            .and_then(|()| self.conn.execute_batch("COMMIT").map_err(db));
        match result {
            Ok(()) => {
                self.stored_next_seq = self.next_seq;
                self.checkpointer.committed(&self.conn, bytes);
                for reply in replies {
                    reply(None);
                }
            }
            Err(e) => {
                tracing::error!("the state store could not commit: {e}");
                let _ = self.conn.execute_batch("ROLLBACK");
                if let Err(reload) = self.load() {
                    tracing::error!("the state store could not reload its cache: {reload}");
                }
                for reply in replies {
                    reply(Some(&e));
                }
            }
        }
    }

    /// Deletes what no query needs and records the next sequence number.
    ///
    /// The log is trimmed property by property: a running query needs the
    /// instants of its property after its checkpoint; one whose checkpoint
    /// is at or past the last instant logged for its property needs none of
    /// the log (what it reads next is logged later), so an idle query does
    /// not hold the log back, and a query that never moves its checkpoint
    /// holds back its own property's instants only.
    fn finish_batch(&mut self, ingested: bool) -> Result<(), StoreErrorKind> {
        // What each property's queries still need: everything after `low`.
        let mut low: HashMap<i64, u64> = self.logged.clone();
        for q in self.queries.values().filter(|q| q.running) {
            if let Some(needed) = low.get_mut(&q.property) {
                *needed = (*needed).min(q.checkpoint_seq);
            }
        }
        for (property, low) in low {
            let trimmed = self.trimmed.get(&property).copied().unwrap_or(0);
            if low > trimmed && (low - trimmed >= TRIM_EVERY || !ingested) {
                self.conn
                    .prepare_cached("DELETE FROM instants WHERE property = ?1 AND last_seq <= ?2")
                    .and_then(|mut s| s.execute([property, low as i64]))
                    .map_err(db)?;
                self.trimmed.insert(property, low);
            }
        }
        if self.next_seq != self.stored_next_seq {
            self.conn
                .prepare_cached("UPDATE meta SET value = ?1 WHERE key = 'next_seq'")
                .and_then(|mut s| s.execute([self.next_seq]))
                .map_err(db)?;
        }
        Ok(())
    }

    fn apply_in_savepoint(&mut self, job: Job) -> Reply {
        if let Err(e) = self.run_cached("SAVEPOINT job") {
            return fail(job, db(e));
        }
        let outcome = match job {
            Job::Register { query, ack } => reply(ack, self.register(query)),
            Job::Status { id, status, ack } => reply(ack, self.status(&id, &status)),
            Job::Events {
                id,
                events,
                checkpoint,
                ack,
            } => reply(ack, self.events(&id, &events, checkpoint)),
            Job::Delete { id, ack } => reply(ack, self.delete(&id)),
            Job::Instants {
                property,
                count,
                data,
                ack,
            } => {
                let result = self.instants(&property, count, &data);
                let failed = result.is_err();
                let reply = reply(ack, result);
                if failed {
                    // A property inserted by the failed job is rolled back.
                    self.properties.clear();
                }
                reply
            }
        };
        if let Err(e) = self.run_cached("RELEASE job") {
            tracing::warn!("the state store could not release a savepoint: {e}");
        }
        outcome
    }

    /// Rolls back to the job's savepoint when `result` failed.
    fn undo_on_error<T>(&self, result: Result<T, StoreErrorKind>) -> Result<T, StoreErrorKind> {
        if result.is_err()
            && let Err(e) = self.run_cached("ROLLBACK TO job")
        {
            tracing::warn!("the state store could not roll back a failed job: {e}");
        }
        result
    }

    /// Runs a statement without parameters, prepared once.
    fn run_cached(&self, sql: &str) -> Result<(), rusqlite::Error> {
        self.conn.prepare_cached(sql)?.execute([]).map(drop)
    }

    fn property_id(&mut self, property: &PropertyPath) -> Result<i64, StoreErrorKind> {
        if let Some(&id) = self.properties.get(property) {
            return Ok(id);
        }
        let p = property;
        self.conn
            .prepare_cached(
                "INSERT OR IGNORE INTO properties (collection, feature, property) VALUES (?1, ?2, ?3)",
            )
            .and_then(|mut s| s.execute(params![p.collection, p.feature, p.property]))
            .map_err(db)?;
        let id: i64 = self
            .conn
            .prepare_cached(
                "SELECT id FROM properties WHERE collection = ?1 AND feature = ?2 AND property = ?3",
            )
            .and_then(|mut s| {
                s.query_row(params![p.collection, p.feature, p.property], |r| r.get(0))
            })
            .map_err(db)?;
        self.properties.insert(property.clone(), id);
        Ok(id)
    }

    fn register(&mut self, query: NewQuery) -> Result<Checkpoint, StoreErrorKind> {
        if self.queries.contains_key(&query.id) {
            return Err(StoreErrorKind::DuplicateQuery(query.id));
        }
        let result = self.insert_query(&query);
        let (checkpoint, property) = self.undo_on_error(result)?;
        self.queries.insert(
            query.id,
            QueryState {
                running: true,
                property,
                checkpoint_seq: checkpoint.after_seq,
                ..QueryState::default()
            },
        );
        Ok(checkpoint)
    }

    fn insert_query(&mut self, query: &NewQuery) -> Result<(Checkpoint, i64), StoreErrorKind> {
        let property = self.property_id(&query.property)?;
        let created_ms = query
            .created
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        // The query reads what is ingested after it: every instant logged so
        // far is behind its low-water mark.
        let checkpoint = Checkpoint {
            after_seq: self.next_seq - 1,
            last_event_id: 0,
            state: None,
        };
        self.conn
            .prepare_cached(
                "INSERT INTO queries (id, property, spec, engine, status, reason, created_ms, \
                 last_event_id, checkpoint_seq, checkpoint_event_id, checkpoint_state) \
                 VALUES (?1, ?2, ?3, ?4, 'running', NULL, ?5, 0, ?6, 0, NULL)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    query.id,
                    property,
                    query.spec,
                    query.engine,
                    created_ms,
                    checkpoint.after_seq
                ])
            })
            .map_err(db)?;
        Ok((checkpoint, property))
    }

    fn status(&mut self, id: &str, status: &QueryStatus) -> Result<(), StoreErrorKind> {
        let Some(state) = self.queries.get_mut(id) else {
            return Err(StoreErrorKind::UnknownQuery(id.to_owned()));
        };
        let reason = match status {
            QueryStatus::Failed { reason } => Some(reason.as_str()),
            _ => None,
        };
        let result = self
            .conn
            .prepare_cached("UPDATE queries SET status = ?1, reason = ?2 WHERE id = ?3")
            .and_then(|mut s| s.execute(params![status.name(), reason, id]))
            .map(drop)
            .map_err(db);
        if result.is_ok() {
            state.running = !status.is_terminal();
        }
        self.undo_on_error(result)
    }

    fn delete(&mut self, id: &str) -> Result<(), StoreErrorKind> {
        if !self.queries.contains_key(id) {
            return Err(StoreErrorKind::UnknownQuery(id.to_owned()));
        }
        let result = (|| {
            self.conn
                .prepare_cached("DELETE FROM events WHERE query = ?1")?
                .execute([id])?;
            self.conn
                .prepare_cached("DELETE FROM queries WHERE id = ?1")?
                .execute([id])
        })()
        .map(drop)
        .map_err(db);
        self.undo_on_error(result)?;
        self.queries.remove(id);
        Ok(())
    }

    fn events(
        &mut self,
        id: &str,
        events: &EventBatch,
        checkpoint: Option<Checkpoint>,
    ) -> Result<(), StoreErrorKind> {
        let bounds = self.bounds;
        let next_seq = self.next_seq;
        let Some(state) = self.queries.get(id) else {
            return Err(StoreErrorKind::UnknownQuery(id.to_owned()));
        };
        if !events.is_empty() && events.first_id() != state.last_event_id + 1 {
            return Err(StoreErrorKind::EventOutOfOrder {
                query: id.to_owned(),
                last: state.last_event_id,
                got: events.first_id(),
            });
        }
        let last_event_id = state.last_event_id + events.len() as u64;
        if let Some(cp) = &checkpoint {
            let bad = |why: String| StoreErrorKind::BadCheckpoint {
                query: id.to_owned(),
                why,
            };
            if cp.last_event_id > last_event_id {
                return Err(bad(format!(
                    "it is at event {}, but the last event stored is {last_event_id}",
                    cp.last_event_id
                )));
            }
            if cp.after_seq < state.checkpoint_seq || cp.last_event_id < state.checkpoint_event_id {
                return Err(bad(format!(
                    "it moves back from instant {} and event {} to instant {} and event {}",
                    state.checkpoint_seq, state.checkpoint_event_id, cp.after_seq, cp.last_event_id
                )));
            }
            if cp.after_seq >= next_seq {
                return Err(bad(format!(
                    "it is after instant {}, but the last instant logged is {}",
                    cp.after_seq,
                    next_seq - 1
                )));
            }
        }
        // The ring after this job, in whole rows: the oldest row goes while
        // the rows after it still hold every event the ring keeps (they
        // reach one of its bounds alone); the newest row always stays. The
        // rows kept hold the ring and at most one row more; reading them
        // back trims to the ring exactly.
        let size = events.bytes();
        let mut len = state.ring_len + events.len();
        let mut bytes = state.ring_bytes + size;
        let mut dropped = 0;
        let mut cut = None;
        for &(first, n, b) in &state.ring {
            if len - n < bounds.ring_events.max(1) && bytes - b < bounds.ring_bytes.max(1) {
                cut = Some(first);
                break;
            }
            if events.is_empty() && dropped + 1 == state.ring.len() {
                break;
            }
            len -= n;
            bytes -= b;
            dropped += 1;
        }
        if cut.is_none() && dropped > 0 {
            cut = Some(if events.is_empty() {
                u64::MAX
            } else {
                events.first_id()
            });
        }
        let result =
            self.write_events(id, events, checkpoint.as_ref(), last_event_id, cut, dropped);
        self.undo_on_error(result)?;
        let Some(state) = self.queries.get_mut(id) else {
            return Ok(());
        };
        if !events.is_empty() {
            state
                .ring
                .push_back((events.first_id(), events.len(), size));
            state.ring_len += events.len();
            state.ring_bytes += size;
        }
        for _ in 0..dropped {
            if let Some((_, n, b)) = state.ring.pop_front() {
                state.ring_len -= n;
                state.ring_bytes -= b;
            }
        }
        state.last_event_id = last_event_id;
        if let Some(cp) = checkpoint {
            state.checkpoint_seq = cp.after_seq;
            state.checkpoint_event_id = cp.last_event_id;
        }
        Ok(())
    }

    fn write_events(
        &self,
        id: &str,
        events: &EventBatch,
        checkpoint: Option<&Checkpoint>,
        last_event_id: u64,
        cut: Option<u64>,
        dropped: usize,
    ) -> Result<(), StoreErrorKind> {
        let conn = &self.conn;
        if !events.is_empty() {
            let first = events.first_id();
            let last = first + events.len() as u64 - 1;
            conn.prepare_cached(
                "INSERT INTO events (query, first_id, last_id, data) VALUES (?1, ?2, ?3, ?4)",
            )
            .and_then(|mut s| s.execute(params![id, first, last, events.data()]))
            .map_err(db)?;
        }
        if dropped > 0
            && let Some(cut) = cut
        {
            conn.prepare_cached("DELETE FROM events WHERE query = ?1 AND first_id < ?2")
                .and_then(|mut s| s.execute(params![id, cut as i64]))
                .map_err(db)?;
        }
        match checkpoint {
            Some(cp) => conn
                .prepare_cached(
                    "UPDATE queries SET last_event_id = ?1, checkpoint_seq = ?2, \
                     checkpoint_event_id = ?3, checkpoint_state = ?4 WHERE id = ?5",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        last_event_id,
                        cp.after_seq,
                        cp.last_event_id,
                        cp.state,
                        id
                    ])
                }),
            None => conn
                .prepare_cached("UPDATE queries SET last_event_id = ?1 WHERE id = ?2")
                .and_then(|mut s| s.execute(params![last_event_id, id])),
        }
        .map(drop)
        .map_err(db)
    }

    fn instants(
        &mut self,
        property: &PropertyPath,
        count: u64,
        data: &[u8],
    ) -> Result<Range<u64>, StoreErrorKind> {
        let result = self.insert_instants(property, count, data);
        let (range, id) = self.undo_on_error(result)?;
        self.next_seq = range.end;
        if let Some(id) = id {
            self.logged.insert(id, range.end - 1);
        }
        Ok(range)
    }

    fn insert_instants(
        &mut self,
        property: &PropertyPath,
        count: u64,
        data: &[u8],
    ) -> Result<(Range<u64>, Option<i64>), StoreErrorKind> {
        let first = self.next_seq;
        let end = first + count;
        if count == 0 {
            return Ok((first..end, None));
        }
        let property = self.property_id(property)?;
        self.conn
            .prepare_cached(
                "INSERT INTO instants (first_seq, last_seq, property, data) VALUES (?1, ?2, ?3, ?4)",
            )
            .and_then(|mut s| s.execute(params![first, end - 1, property, data]))
            .map_err(db)?;
        Ok((first..end, Some(property)))
    }
}

//! The control plane's durable state: what `mfstream serve --state DIR`
//! keeps so that its queries survive a restart, a crash, or `kill -9`.
//!
//! # The roles
//!
//! - [`Store`] is one state directory: a lock (on the directory and its
//!   lock file) that keeps a second server out, a journal for the hot
//!   records and a SQLite database for the rest.
//! - The **journal** (`journal/`, the journal module) holds every instant
//!   ingested, every result event and every checkpoint: append-only segment
//!   files of records framed with their length and a CRC-32, appended by
//!   the journal's own thread, which commits the records waiting with one
//!   `pwrite(2)` (group commit; no file I/O on the caller's thread). Old
//!   segments are deleted once nothing in them is needed, or
//!   have what is needed copied forward first.
//! - The **database** holds the registrations ([`NewQuery`]) and their
//!   statuses. One **writer** thread owns its connection and commits
//!   whatever callers have queued as one transaction (group commit),
//!   answering each caller only after the `COMMIT` returned, and only
//!   while the database and its log are still the files it opened. Its
//!   queue is bounded in calls and in bytes: callers wait (backpressure)
//!   rather than memory growing.
//! - The **records**: a registration with its status; per query its result
//!   events ([`StoredEvent`]), of which the last ones form the replay ring
//!   (bounded in count and bytes; stored one record per call, so the
//!   records kept hold the ring and at most one record more, and read back
//!   trimmed to the ring exactly), and its [`Checkpoint`]; and the **ingest
//!   log**, every instant ingested per property with a sequence number
//!   ([`LoggedInstant`]), each property's kept above the low-water mark of
//!   the running queries on it.
//! - **Restore** ([`Store::queries`], [`Store::instants`]) reads it all
//!   back, and [`EventIds`] gives a resumed query's results the ids they had
//!   before the restart.
//!
//! # Why a journal and SQLite
//!
//! The first design kept everything in SQLite, a row per call committed by
//! the writer thread. Under the serve bench's unpaced ingest it held
//! durable ingest to about a third of the memory-only rate: a fifth of the
//! CPU went to waking the writer and its callers, most of the rest to
//! writing each row's pages twice (log, then database) and trimming them.
//! The hot records are appends that are read back only at start-up; a file
//! of framed records is what they need. The registrations are few, change in place (a status), and are
//! what an operator wants to look at: SQLite (through `rusqlite`, built from
//! its bundled C source so no system library is needed) gives them atomic
//! transactions, detection of a damaged file, and a file any operator can
//! open with the `sqlite3` shell.
//!
//! # Durability: `Process` or `Power`
//!
//! A journal append returns once `pwrite(2)` did: the kernel has the bytes,
//! so a process killed with `SIGKILL` loses nothing it was told was
//! written. The database runs with `synchronous = NORMAL` in WAL mode,
//! which gives the same. That is [`Durability::Process`], the default.
//! What it can lose is the last writes before a power failure or a kernel
//! crash; [`Durability::Power`] adds an `fdatasync` of the journal before a
//! call returns (shared by every call waiting: group commit), syncs each new
//! segment and its directory, and runs the database with `synchronous =
//! FULL`. "An ingest answered 202 survives `kill -9`" needs `Process`, not
//! `Power`.
//!
//! # What is written when: the exactly-once argument
//!
//! Four rules, each one write (a journal record or a transaction) or part
//! of one:
//!
//! 1. **Log before delivery.** An ingest appends its instants to the log
//!    ([`Store::append_instants`]) and waits for the write before it hands
//!    them to any query and before it answers 202. So every instant an
//!    engine ever saw, and every instant acknowledged, is in the log, with a
//!    sequence number that orders it as it was delivered (the server calls
//!    this with the property's lock held, which fixes the order). And only
//!    what was delivered is logged: the server logs a chunk once it holds
//!    room for it in every query's buffer, so a chunk is logged and
//!    delivered to every running query of the property, or neither.
//! 2. **Store before send.** A query's results get consecutive ids and are
//!    stored ([`Store::append_events`]) before the fan-out sends them. The
//!    store refuses a gap or a repeat in the ids.
//! 3. **Checkpoints move with their events.** A [`Checkpoint`] `(after_seq,
//!    last_event_id, state)` says "an engine in `state`, fed the instants
//!    after `after_seq`, produces as its `k`-th result the event
//!    `last_event_id + k`". It is stored in the same journal record as (or
//!    after) the events up to `last_event_id`, and never moves back. A transform
//!    (one result per instant, no state) can checkpoint after every batch;
//!    a windowed aggregate checkpoints with its open windows as `state`, or
//!    with `state: None` at an instant where no window is open.
//! 4. **Trim below every low-water mark.** A property's instants at or below
//!    the smallest `after_seq` of the running queries on it are dropped (and
//!    their segment deleted once nothing else in it is needed); no
//!    checkpoint needs them. (A query that never moves its checkpoint holds
//!    back its own property's log, not the others'.)
//!
//! On restart each running query's engine is put in its checkpoint's state
//! and fed the instants after `after_seq`, in log order. [`EventIds`] numbers
//! its results from `last_event_id + 1`: a result whose id is at most the
//! last stored one was stored (and perhaps sent) before the crash and is
//! dropped; the rest are new and go through rule 2. A crash at any point:
//!
//! - before an ingest's write: not answered 202, not delivered; no result
//!   depends on it (the client retries); a record cut short is cut off at
//!   the next open (an ingest is one record: all of it or none);
//! - after the write, before 202: in the log, so it is replayed; a client
//!   that retries ingests it twice (as with any at-least-once HTTP API);
//! - after results were computed, before they were stored: never sent;
//!   replay computes them again, with the same ids;
//! - after they were stored, before or after they were sent: replay
//!   computes them again, and they are dropped as duplicates; the restored
//!   ring gives a reconnecting subscriber exactly the events after its
//!   `Last-Event-ID`, or `lagged` with the exact count.
//!
//! Nothing is lost (rule 1 and 4: every instant a result may depend on is
//! in the log until a checkpoint covers it), and nothing is counted twice
//! (rule 3: replay starts from a state that reflects exactly the instants up
//! to `after_seq`). This assumes what every engine of mfstream provides for
//! event-time work: the same instants in the same order from the same state
//! give the same results. A window closed by the wall clock (issue 12,
//! part 1) is not a function of the instants alone; to keep it exactly
//! once, checkpoint right after each such window is emitted.
//!
//! # Wiring it into `mfstream serve --state DIR`
//!
//! | server event | store call |
//! |---|---|
//! | start-up | [`Store::open`]; [`Store::queries`]; per running query: submit its spec with the checkpoint's state, feed it [`Store::instants`] after `checkpoint.after_seq` page by page, number its results with [`EventIds::resume`]; seed its fan-out ring from `ring` with next id `last_event_id + 1` |
//! | `POST …/queries` accepted | [`Store::register`] (status `running`) before answering 201, with the property's lock held (it takes the [`PropertyGuard`]); keep the returned [`Checkpoint`] |
//! | `POST …/ingest` | once every feed's permit for the first chunk is reserved and before any is used: [`Store::append_instants`] of the whole body, one record (the property's lock is held), then send chunk by chunk; answer 202 only after the call returned `Ok` and every chunk was sent (a 503 before the call, or an error from it: nothing logged, nothing replayed) |
//! | a query's pump gets a batch of results | [`EventIds::assign`] each; [`Store::append_batch`] the new ones, encoded once into an [`EventBatch`] (with a checkpoint when it moved: `server::durable`), then `Fanout::push_frames` |
//! | a query ends (completed, stopped, failed) | [`Store::set_status`] before its `end` event is sent |
//! | `DELETE …/queries/{id}` | [`Store::delete`] before the query is stopped and answered 204; an error leaves it registered and running (503) |
//! | shutdown | [`Store::close`] after every pump has ended (it blocks: `spawn_blocking`) |
//!
//! A query deleted while its pump still runs: the pump's last
//! [`Store::append_events`] or [`Store::set_status`] gets
//! [`StoreErrorKind::UnknownQuery`], which it can ignore. [`Store::queries`]
//! and [`Store::instants`] block too: call them before serving, or from
//! `spawn_blocking`. Set [`StoreOptions::ring_events`] to the server's
//! `replay`, so that the ring restored is the ring that was served.
//!
//! # Bounds
//!
//! Every record is bounded ([`StoreOptions`]): ids, datetimes and texts,
//! registration bodies, event data, checkpoint state, and the instants or
//! events of one call. A record over its bound is refused with
//! [`StoreErrorKind::TooLarge`], never truncated, except a failure reason,
//! which is cut to its bound (a status must not be lost to a long stderr).
//!
//! ```
//! use mfstream_model::{Instant, PropertyPath};
//! use mfstream_store::{NewQuery, PropertyLock, Store, StoreOptions};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let dir = std::env::temp_dir().join(format!("mfstream-doc-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&dir);
//! let store = Store::open(&dir, StoreOptions::default()).unwrap();
//! let speed = PropertyPath { collection: "ships".into(), feature: "a".into(), property: "speed".into() };
//! // What orders the property's log and its registrations: held across both.
//! let lock = PropertyLock::new(speed.clone(), ());
//! let held = lock.lock().await;
//! store.register(&held, NewQuery {
//!     id: "q1".into(),
//!     property: speed.clone(),
//!     spec: r#"{"operation":"abs"}"#.into(),
//!     engine: "local".into(),
//!     created: std::time::SystemTime::now(),
//! }).await.unwrap();
//! let seqs = store.append_instants(&speed, &[Instant::number("2026-01-01T00:00:00Z", -1.5)]).await.unwrap();
//! drop(held);
//! assert_eq!(seqs, 1..2);
//! store.close();
//!
//! let store = Store::open(&dir, StoreOptions::default()).unwrap();
//! assert_eq!(store.queries().unwrap()[0].id, "q1");
//! assert_eq!(store.instants(&speed, 0, 10).unwrap()[0].instant.datetime, "2026-01-01T00:00:00Z");
//! # store.close();
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # });
//! ```

mod batch;
mod error;
mod frame;
mod journal;
mod property_lock;
mod record;
mod restore;
mod schema;
mod writer;

#[cfg(test)]
mod tests;

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use self::journal::{Journal, Registered};
use self::writer::{CatalogFiles, Job, Writer};
pub use crate::error::{CheckpointFault, StoreError, StoreErrorKind};
pub use crate::journal::inspect::{
    DamageReport, SegmentReport, StateReport, check as check_state, repair as repair_state,
};
pub use crate::journal::{JournalStats, SYNC_BUCKETS, SyncHistogram};
pub use crate::property_lock::{OwnedPropertyGuard, PropertyGuard, PropertyLock};
pub use crate::record::{
    Assigned, Checkpoint, EventBatch, EventIds, LoggedInstant, NewQuery, RestoredQuery, StoredEvent,
};
use mfstream_model::{Instant, PropertyPath, QueryStatus, Value};

/// How far a write is durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Survives the process being killed (`SIGKILL`, a panic, an OOM kill):
    /// the kernel has the bytes (`synchronous = NORMAL` for the database).
    /// The default.
    #[default]
    Process,
    /// Survives a power failure or a kernel crash too: an `fdatasync` of the
    /// journal shared by the calls waiting (`synchronous = FULL` for the
    /// database).
    Power,
}

/// How a store is opened, and what it bounds.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Create the directory when it is missing (default); when false, a
    /// missing directory is an error ([`StoreErrorKind::Missing`]).
    pub create: bool,
    /// How far a write is durable.
    pub durability: Durability,
    /// The events each query's replay ring keeps (the server's `replay`).
    pub ring_events: usize,
    /// The bytes (event names and data) each ring keeps.
    pub ring_bytes: usize,
    /// The largest event data.
    pub max_event_bytes: usize,
    /// The largest registration body.
    pub max_spec_bytes: usize,
    /// The longest id, engine name, property path segment, datetime, text
    /// value or failure reason.
    pub max_text_bytes: usize,
    /// The most instants or events one call takes.
    pub max_batch: usize,
    /// The largest checkpoint state.
    pub max_state_bytes: usize,
    /// The bytes past which the journal starts a new segment file (and
    /// looks at the older ones: see the journal's retention).
    pub segment_bytes: u64,
    /// The registrations, statuses and deletions queued for the writer
    /// before callers wait.
    pub queue: usize,
    /// The bytes of records queued or being written before callers wait:
    /// the writer's memory bound, whatever the size of each call.
    pub queue_bytes: usize,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions {
            create: true,
            durability: Durability::Process,
            ring_events: 4096,
            ring_bytes: 16 * 1024 * 1024,
            max_event_bytes: 256 * 1024,
            max_spec_bytes: 64 * 1024,
            max_text_bytes: 64 * 1024,
            max_batch: 65_536,
            max_state_bytes: 16 * 1024 * 1024,
            segment_bytes: 16 * 1024 * 1024,
            queue: 1024,
            queue_bytes: 64 * 1024 * 1024,
        }
    }
}

/// An open state directory.
///
/// Writes are `async` and return once written (journal) or committed
/// (database); reads are blocking and
/// meant for start-up (or `spawn_blocking`). Dropping the store lets the
/// writer finish what is queued; [`Store::close`] also waits for it.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    options: StoreOptions,
    jobs: mpsc::Sender<Job>,
    writer: JoinHandle<()>,
    reader: Mutex<Connection>,
    journal: Journal,
    /// The bytes that may be queued (`queue_bytes`), in permits.
    budget: tokio::sync::Semaphore,
    budget_max: u32,
    /// The directory's lock, for the store's whole life.
    _lock: Arc<schema::DirLock>,
    /// A failure every journal write gets, for the tests of what a store
    /// error does to a query (compiled for tests only).
    #[cfg(any(test, feature = "fault-injection"))]
    fault: Mutex<Option<StoreErrorKind>>,
    /// Told each time the fault fails a call.
    #[cfg(any(test, feature = "fault-injection"))]
    fault_hit: tokio::sync::Notify,
}

impl Store {
    /// Opens (or creates) the store in `dir`.
    ///
    /// Fails, naming `dir`, when it is not a directory, cannot be created or
    /// written, is held by another process, or holds a damaged database, a
    /// database of another schema version, or something else than a store;
    /// and when its catalog or its journal is gone while the other holds
    /// what needs it ([`StoreErrorKind::CatalogLost`],
    /// [`StoreErrorKind::JournalLost`]).
    pub fn open(dir: impl AsRef<Path>, options: StoreOptions) -> Result<Store, StoreError> {
        let dir = dir.as_ref().to_owned();
        // Held by the store and by its writer thread: released once both
        // are done (after `close`, or after the writer's last commit).
        let lock = Arc::new(schema::lock_dir(&dir, &options)?);
        let conn = schema::open_writer(&dir, &options)?;
        let files = CatalogFiles::new(dir.join(schema::DB_FILE));
        let writer = Writer::new(conn, files).map_err(|kind| StoreError::new(&dir, kind))?;
        let mut reader = schema::open_reader(&dir)?;
        let registered: Vec<Registered> = restore::queries(&mut reader)
            .map_err(|kind| StoreError::new(&dir, kind))?
            .into_iter()
            .map(|row| Registered {
                running: !row.status.is_terminal(),
                id: row.id,
                property: row.property,
                start_seq: row.start_seq,
            })
            .collect();
        schema::check_journal(&dir, registered.len())?;
        let journal = Journal::open(&dir, &options, registered)
            .map_err(|kind| StoreError::new(&dir, kind))?;
        let (jobs, queue) = mpsc::channel(options.queue.max(1));
        let held = lock.clone();
        let writer = std::thread::Builder::new()
            .name("mfstream-store".into())
            .spawn(move || {
                // The lock is held until the last write is done.
                let _lock = held;
                writer.run(queue);
            })
            .map_err(|e| {
                let message = format!("cannot start it: {e}");
                StoreError::new(
                    &dir,
                    StoreErrorKind::Thread {
                        name: "writer",
                        message,
                    },
                )
            })?;
        let budget_max = u32::try_from(options.queue_bytes.max(1)).unwrap_or(u32::MAX);
        Ok(Store {
            budget: tokio::sync::Semaphore::new(budget_max as usize),
            budget_max,
            dir,
            options,
            jobs,
            writer,
            reader: Mutex::new(reader),
            journal,
            _lock: lock,
            #[cfg(any(test, feature = "fault-injection"))]
            fault: Mutex::new(None),
            #[cfg(any(test, feature = "fault-injection"))]
            fault_hit: tokio::sync::Notify::new(),
        })
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The options it was opened with: its bounds, for a caller to check a
    /// request against before it writes anything.
    pub fn options(&self) -> &StoreOptions {
        &self.options
    }

    /// Waits for every queued write to be committed, then closes the
    /// database and releases the directory.
    pub fn close(self) {
        let Store {
            jobs,
            writer,
            journal,
            _lock,
            ..
        } = self;
        drop(jobs);
        if writer.join().is_err() {
            tracing::error!("the state store's writer panicked");
        }
        journal.close();
        // Only now may another process open the directory.
        drop(_lock);
    }

    fn error(&self, kind: StoreErrorKind) -> StoreError {
        StoreError::new(&self.dir, kind)
    }

    /// Queues a job and waits for its commit.
    ///
    /// # Cancel safety
    ///
    /// Once queued, a job is committed whether or not its caller still
    /// waits.
    async fn submit<T>(&self, job: impl FnOnce(writer::Ack<T>) -> Job) -> Result<T, StoreError> {
        let (ack, answer) = oneshot::channel();
        let job = job(ack);
        // The budget is held until the job is answered: a call larger than
        // the whole budget takes all of it, and waits alone.
        let cost = u32::try_from(job.size())
            .unwrap_or(u32::MAX)
            .clamp(1, self.budget_max);
        let _budget = self
            .budget
            .acquire_many(cost)
            .await
            .map_err(|_| self.error(StoreErrorKind::Closed))?;
        self.jobs
            .send(job)
            .await
            .map_err(|_| self.error(StoreErrorKind::Closed))?;
        match answer.await {
            Ok(result) => result.map_err(|kind| self.error(kind)),
            Err(_) => Err(self.error(StoreErrorKind::Closed)),
        }
    }

    fn check_len(&self, what: &'static str, size: usize, max: usize) -> Result<(), StoreError> {
        if size > max {
            return Err(self.error(StoreErrorKind::TooLarge { what, size, max }));
        }
        Ok(())
    }

    fn check_text(&self, what: &'static str, text: &str) -> Result<(), StoreError> {
        self.check_len(what, text.len(), self.options.max_text_bytes)
    }

    fn check_property(&self, property: &PropertyPath) -> Result<(), StoreError> {
        self.check_text("a collection id", &property.collection)?;
        self.check_text("a feature id", &property.feature)?;
        self.check_text("a property name", &property.property)
    }

    /// Records a new query, running, and returns its first checkpoint: it
    /// reads the instants logged after this call.
    ///
    /// `held` is its property's lock ([`PropertyLock`]), which the caller
    /// keeps until the query gets its feed; a query on another property
    /// than the lock's is refused ([`StoreErrorKind::WrongLock`]).
    pub async fn register<T>(
        &self,
        held: &PropertyGuard<'_, T>,
        query: NewQuery,
    ) -> Result<Checkpoint, StoreError> {
        if held.property() != &query.property {
            let name = |p: &PropertyPath| format!("{}/{}/{}", p.collection, p.feature, p.property);
            return Err(self.error(StoreErrorKind::WrongLock {
                query: query.id,
                property: name(&query.property),
                held: name(held.property()),
            }));
        }
        self.check_text("a query id", &query.id)?;
        self.check_text("an engine name", &query.engine)?;
        self.check_property(&query.property)?;
        let o = &self.options;
        self.check_len("a registration body", query.spec.len(), o.max_spec_bytes)?;
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(&query.spec) {
            return Err(self.error(StoreErrorKind::NotJson {
                query: query.id,
                message: e.to_string(),
            }));
        }
        // The server registers with the property's lock held, so no
        // instant of the property is logged between this and the commit.
        let start_seq = self
            .journal
            .next_seq()
            .await
            .map_err(|kind| self.error(kind))?
            - 1;
        let (id, property) = (query.id.clone(), query.property.clone());
        self.submit(|ack| Job::Register {
            query,
            start_seq,
            ack,
        })
        .await?;
        self.journal.register(&id, &property, start_seq);
        Ok(Checkpoint {
            after_seq: start_seq,
            last_event_id: 0,
            state: None,
            skipped: 0,
        })
    }

    /// Records a query's status (and a failure's reason, cut to
    /// `max_text_bytes`).
    pub async fn set_status(&self, id: &str, status: &QueryStatus) -> Result<(), StoreError> {
        let status = match status {
            QueryStatus::Failed { reason } => QueryStatus::Failed {
                reason: cut(reason, self.options.max_text_bytes).to_owned(),
            },
            other => other.clone(),
        };
        let running = !status.is_terminal();
        let owned = id.to_owned();
        self.submit(|ack| Job::Status {
            id: owned,
            status,
            ack,
        })
        .await?;
        self.journal.set_running(id, running);
        Ok(())
    }

    /// Stores a query's next results, each id one more than the last
    /// stored, and trims its ring; with `checkpoint`, moves its checkpoint
    /// forward in the same journal record (events may be empty to move the
    /// checkpoint alone).
    pub async fn append_events(
        &self,
        id: &str,
        events: Vec<StoredEvent>,
        checkpoint: Option<Checkpoint>,
    ) -> Result<(), StoreError> {
        let mut batch = EventBatch::new(events.first().map_or(0, |e| e.id));
        for (i, event) in events.iter().enumerate() {
            if i > 0 && event.id != events[i - 1].id + 1 {
                return Err(self.error(StoreErrorKind::EventOutOfOrder {
                    query: id.to_owned(),
                    last: events[i - 1].id,
                    got: event.id,
                }));
            }
            batch.push(event.kind, event.data.as_bytes());
        }
        self.append_batch(id, batch, checkpoint).await
    }

    /// [`Store::append_events`] for events already encoded (the server's
    /// way: no `String` per event).
    pub async fn append_batch(
        &self,
        id: &str,
        events: EventBatch,
        checkpoint: Option<Checkpoint>,
    ) -> Result<(), StoreError> {
        #[cfg(any(test, feature = "fault-injection"))]
        if let Some(kind) = self.fault.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            self.fault_hit.notify_one();
            return Err(self.error(kind));
        }
        let o = &self.options;
        self.check_len("a batch of events", events.len(), o.max_batch)?;
        self.check_len("an event", events.largest(), o.max_event_bytes)?;
        if let Some(state) = checkpoint.as_ref().and_then(|c| c.state.as_ref()) {
            self.check_len("a checkpoint state", state.len(), o.max_state_bytes)?;
        }
        self.journal
            .append_events(id, events, checkpoint)
            .await
            .map_err(|kind| self.error(kind))
    }

    /// Forgets a query: its registration, events and checkpoint.
    pub async fn delete(&self, id: &str) -> Result<(), StoreError> {
        // The journal's directory is checked first (still the one opened,
        // on the journal's thread): a deletion is not acknowledged on a
        // state directory replaced under the server, even when only its
        // `journal/` was and the catalog would take it.
        self.journal
            .next_seq()
            .await
            .map_err(|kind| self.error(kind))?;
        let owned = id.to_owned();
        self.submit(|ack| Job::Delete { id: owned, ack }).await?;
        self.journal.forget(id);
        Ok(())
    }

    /// Appends instants to the ingest log of `property` and returns their
    /// sequence numbers, once written: an instant acknowledged after this
    /// returned survives a crash of the process.
    pub async fn append_instants(
        &self,
        property: &PropertyPath,
        instants: &[Instant],
    ) -> Result<Range<u64>, StoreError> {
        self.check_property(property)?;
        self.check_len(
            "a batch of instants",
            instants.len(),
            self.options.max_batch,
        )?;
        for instant in instants {
            self.check_text("a datetime", &instant.datetime)?;
            match &instant.value {
                Value::Text(text) => self.check_text("a text value", text)?,
                Value::Number(v) if !v.is_finite() => {
                    return Err(self.error(StoreErrorKind::NotFinite {
                        datetime: instant.datetime.clone(),
                        value: *v,
                    }));
                }
                Value::Point(p)
                    if ![Some(p.x), Some(p.y), p.z()]
                        .into_iter()
                        .flatten()
                        .all(f64::is_finite) =>
                {
                    return Err(self.error(StoreErrorKind::NotFinitePosition {
                        datetime: instant.datetime.clone(),
                        coordinates: instant.value.to_string(),
                    }));
                }
                Value::BBox(_) => {
                    return Err(self.error(StoreErrorKind::ExtentInstant(instant.datetime.clone())));
                }
                Value::Number(_) | Value::Bool(_) | Value::Point(_) => {}
            }
        }
        let mut data = Vec::with_capacity(instants.len() * 40);
        batch::encode(instants, &mut data);
        let count = u32::try_from(instants.len()).expect("bounded by max_batch above");
        self.journal
            .append_instants(property, count, data)
            .await
            .map_err(|kind| self.error(kind))
    }

    /// Fails when the store takes no more writes: its journal's directory
    /// was deleted or replaced, or a write failed and could not be undone.
    /// Cheap (no I/O): for a caller about to acknowledge without writing.
    pub fn check_writable(&self) -> Result<(), StoreError> {
        self.journal.broken().map_err(|kind| self.error(kind))
    }

    /// Makes every later [`Store::append_batch`] fail with `kind` (or
    /// succeed again with `None`): a test's way to a store error.
    #[cfg(any(test, feature = "fault-injection"))]
    pub fn inject_fault(&self, kind: Option<StoreErrorKind>) {
        *self.fault.lock().unwrap_or_else(|e| e.into_inner()) = kind;
    }

    /// Waits until the injected fault fails a call (one that failed since
    /// the last wait counts).
    #[cfg(any(test, feature = "fault-injection"))]
    pub async fn fault_hit(&self) {
        self.fault_hit.notified().await;
    }

    fn reader(&self) -> MutexGuard<'_, Connection> {
        // A reader holds no state between calls: a poisoned one is usable.
        self.reader.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every query, oldest registration first, with its status, ring and
    /// checkpoint, as last committed. Blocking.
    pub fn queries(&self) -> Result<Vec<RestoredQuery>, StoreError> {
        let rows = restore::queries(&mut self.reader()).map_err(|kind| self.error(kind))?;
        let mut queries = Vec::with_capacity(rows.len());
        for row in rows {
            let kept = self
                .journal
                .restored(&row.id)
                .map_err(|kind| self.error(kind))?;
            let (last_event_id, ring, checkpoint) = match kept {
                Some(k) => (k.last_event_id, k.ring, k.checkpoint),
                // Registered after the journal was opened.
                None => (
                    0,
                    Vec::new(),
                    Checkpoint {
                        after_seq: row.start_seq,
                        last_event_id: 0,
                        state: None,
                        skipped: 0,
                    },
                ),
            };
            queries.push(RestoredQuery {
                id: row.id,
                property: row.property,
                spec: row.spec,
                engine: row.engine,
                status: row.status,
                created: row.created,
                last_event_id,
                ring,
                checkpoint,
            });
        }
        Ok(queries)
    }

    /// The bytes of the journal's records of query `id`'s property logged
    /// after its stored checkpoint: what the journal keeps on its behalf
    /// (while it runs and its checkpoint stays there). `None` for a query
    /// the store does not know. Read-only; walks those records, so call it
    /// now and then, not per ingest.
    pub async fn pinned_bytes(&self, id: &str) -> Option<u64> {
        self.journal.pinned_bytes(id).await.ok().flatten()
    }

    /// The journal's size, sync latencies, compactions and open-time cuts,
    /// for `GET /metrics` (see the journal's `stats` module).
    pub async fn stats(&self) -> Result<JournalStats, StoreError> {
        self.journal.stats().await.map_err(|kind| self.error(kind))
    }

    /// The last instant logged for `property` (from any ingest), kept
    /// across restarts whatever the queries' checkpoints; `None` when none
    /// is. Blocking.
    pub fn newest_instant(
        &self,
        property: &PropertyPath,
    ) -> Result<Option<LoggedInstant>, StoreError> {
        self.journal
            .newest(property)
            .map_err(|kind| self.error(kind))
    }

    /// Up to `limit` instants of `property` logged after the sequence number
    /// `after`, in order: call again with the last one's `seq` for the next
    /// page. Blocking.
    pub fn instants(
        &self,
        property: &PropertyPath,
        after: u64,
        limit: usize,
    ) -> Result<Vec<LoggedInstant>, StoreError> {
        self.journal
            .instants(property, after, limit)
            .map_err(|kind| self.error(kind))
    }
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

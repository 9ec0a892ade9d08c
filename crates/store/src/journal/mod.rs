//! The journal: the store's hot records (every ingested instant, every
//! result event, every checkpoint) appended to segment files by one writer
//! thread that owns them and commits the writes waiting together.
//!
//! # Why not the database
//!
//! Under the serve bench's unpaced ingest, a commit per call through
//! SQLite's write-ahead log cost two thirds of the server's throughput,
//! most of it in writing each row's pages twice (log, then checkpoint).
//! These records are appends read back only at start-up: a file of framed
//! records is what they need. Registrations, statuses and deletions, which
//! are rare, stay in the database.
//!
//! # The writer thread: group commit, off the runtime
//!
//! A caller hands its record to the journal's thread over a channel and
//! awaits the answer; no file is touched, and no lock held, on a runtime
//! worker. The thread takes every request waiting, encodes the writes
//! into one buffer, writes it with one `pwrite(2)`, and (with
//! [`Durability::Power`]) one `fdatasync`; then it checks that the segment
//! still has a name and its directory is still the one opened (a state
//! directory deleted or replaced under the server fails the writes: no
//! write to an unlinked file is acknowledged), updates the index and
//! answers every caller. A group whose look after it fails is cut off
//! again (synced) before anyone is answered: a write answered with an
//! error is never read back. A directory that cannot be looked at for want
//! of permission fails the writes meanwhile, each looked at before it is
//! written ([`StoreErrorKind::Unreachable`]), not for good. The bytes queued are bounded (`queue_bytes`):
//! callers wait their turn rather than memory growing.
//!
//! # Durability
//!
//! [`Durability::Process`]: a record is in the kernel's page cache when
//! its call returns, so it survives the process being killed, not a power
//! failure. [`Durability::Power`]: the answer waits for the `fdatasync`
//! that covers its record, and a new segment is synced with its directory
//! before it is used. In both modes a full segment (and, with `Process`,
//! its name) is synced before the next is started, the copies compaction
//! makes are synced (file and directory) before the segment they came
//! from is deleted, and with `Process` the disk is told to write a segment
//! back every MiB (so those syncs wait for little): what a power cut takes
//! is a suffix of the newest segment, never a hole.
//!
//! # Segments, retention, compaction
//!
//! Records go to the newest segment; once it passes `segment_bytes`, a new
//! one is started and the older ones are looked at. A record is *live*
//! while something may still read it back: an instants record above its
//! property's low-water mark (the smallest checkpoint of the running queries
//! on it) or its property's newest (`Journal::newest`), an events record in
//! its query's replay ring or holding its latest checkpoint. A segment with nothing live is deleted; one with at
//! most half of its bytes live has those records copied to the newest
//! segment and is deleted. So the journal holds at most about twice its
//! live records, plus the newest segment.
//!
//! # Reading back, and damage
//!
//! At open every segment is read in full, each record checked against its
//! checksum and its fields against each other (a count against the
//! instants or events held: nothing is allocated on a number read alone).
//! What follows the last record that checks of the newest segment, when
//! nothing after it checks (zeros, a record cut short, a record that does
//! not match its checksum), is the remains of a write never finished: it is
//! cut off, the cut synced, and a warning names the file, the offset and
//! the bytes dropped. An older segment cannot end so (each is synced
//! before the next is started, at open too): the same bytes there are
//! damage. Damage followed by a record that checks, or a record that
//! checks but makes no sense, is no unfinished write: the open is refused
//! ([`StoreErrorKind::JournalDamaged`]), naming the segment and offset, and
//! `mfstream state check` / `state repair` ([`inspect`]) report it and keep
//! every record that checks. A record may be read twice (compaction copies
//! before it deletes): each instants record is kept once by its first
//! sequence number, each events record once by its first event id.
//!
//! Compaction leaves gaps in the segments' numbering, so a segment deleted
//! by hand could not be told from one compacted away: the [`manifest`]
//! lists the segments the journal should have, and an open refuses one
//! listed and missing ([`StoreErrorKind::SegmentMissing`]).

pub(crate) mod inspect;
mod manifest;
mod open;
mod retention;
mod ring;
mod segment;
#[cfg(test)]
pub(crate) mod sim;
mod stats;
mod vfs;
mod write;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::mpsc as chan;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

use tokio::sync::{Semaphore, oneshot};

use self::open::scan;
use self::ring::{check_events, push_row, trim};
pub use self::stats::{JournalStats, SYNC_BUCKETS, SyncHistogram};
pub(crate) use self::vfs::{OsFs, SegFile, Vfs};
use super::batch;
use super::error::StoreErrorKind;
use super::frame::DecodeError;
use super::record::{Checkpoint, EventBatch, LoggedInstant, PropertyPath, StoredEvent};
use super::schema::JOURNAL_DIR;
use super::{Durability, StoreOptions};

/// The bytes written to a segment between two starts of its writeback
/// (RocksDB's `wal_bytes_per_sync`): the disk takes a segment as it is
/// written, so the syncs at its end (the next segment's start, a
/// compaction's copies) wait for little, even with `Process`.
const WRITEBACK_BYTES: u64 = 1024 * 1024;

/// The most bytes one group commit writes: larger groups are split, so
/// that the group's buffer stays bounded whatever is queued.
const GROUP_BYTES: usize = 8 * 1024 * 1024;

/// Where a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Loc {
    segment: u64,
    offset: u64,
    /// Frame included.
    len: u64,
}

/// A record of a segment, as the index knows it.
#[derive(Debug)]
enum Kept {
    Instants {
        property: Arc<PropertyPath>,
        first_seq: u64,
        loc: Loc,
    },
    Events {
        query: Arc<str>,
        first_id: u64,
        loc: Loc,
    },
}

#[derive(Debug)]
struct Segment {
    len: u64,
    records: Vec<Kept>,
}

/// A property's instants records: first sequence number to last and where.
#[derive(Debug)]
struct PropertyLog {
    path: Arc<PropertyPath>,
    records: BTreeMap<u64, (u64, Loc)>,
    /// The last sequence number logged for it.
    last_logged: u64,
}

/// One events record of a ring.
#[derive(Debug, Clone, Copy)]
struct Row {
    first_id: u64,
    len: usize,
    bytes: usize,
    loc: Loc,
}

#[derive(Debug)]
struct QueryLog {
    id: Arc<str>,
    property: PropertyPath,
    running: bool,
    last_event_id: u64,
    checkpoint: Checkpoint,
    /// The record holding `checkpoint`; `None` for the registration's.
    checkpoint_loc: Option<Loc>,
    /// The ring's records, oldest first.
    ring: VecDeque<Row>,
    ring_len: usize,
    ring_bytes: usize,
}

/// A query as the database has it, for the journal to open with.
#[derive(Debug, Clone)]
pub(crate) struct Registered {
    pub id: String,
    pub property: PropertyPath,
    pub running: bool,
    /// The registration's checkpoint: it reads what is logged after this.
    pub start_seq: u64,
}

/// What a restored query gets from the journal.
#[derive(Debug)]
pub(crate) struct Restored {
    pub last_event_id: u64,
    pub ring: Vec<StoredEvent>,
    pub checkpoint: Checkpoint,
}

/// The ring's bounds.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    events: usize,
    bytes: usize,
}

#[derive(Debug)]
struct Active {
    number: u64,
    file: Arc<dyn SegFile>,
    len: u64,
    /// The length past which the next segment is started.
    roll_at: u64,
    /// The length up to which writeback was started.
    flushed: u64,
}

#[derive(Debug)]
struct Inner {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    /// The directory's identity when opened (device, inode).
    dir_id: (u64, u64),
    bounds: Bounds,
    segment_bytes: u64,
    durability: Durability,
    active: Active,
    segments: BTreeMap<u64, Segment>,
    next_seq: u64,
    properties: HashMap<PropertyPath, PropertyLog>,
    queries: HashMap<Arc<str>, QueryLog>,
    /// Why the journal takes no more records (a write failed and could not
    /// be undone, the directory is gone): shared with the [`Journal`], so
    /// that a caller learns it without a round trip.
    broken: Arc<OnceLock<StoreErrorKind>>,
    /// Whether the directory could not be looked at for want of permission
    /// at the last look: said once in the log when it starts, once when it
    /// ends.
    unreachable: bool,
    /// What `GET /metrics` reads ([`Journal::stats`]).
    tally: stats::Tally,
}

type Answer<T> = oneshot::Sender<Result<T, StoreErrorKind>>;
type BlockingAnswer<T> = chan::SyncSender<Result<T, StoreErrorKind>>;

/// A request to the journal's thread.
enum Req {
    Instants {
        property: PropertyPath,
        count: u32,
        data: Vec<u8>,
        ack: Answer<Range<u64>>,
    },
    Events {
        id: String,
        events: EventBatch,
        checkpoint: Option<Checkpoint>,
        ack: Answer<()>,
    },
    NextSeq(Answer<u64>),
    Register {
        id: String,
        property: PropertyPath,
        start_seq: u64,
    },
    SetRunning {
        id: String,
        running: bool,
    },
    Forget(String),
    Restored {
        id: String,
        ack: BlockingAnswer<Option<Restored>>,
    },
    Read {
        property: PropertyPath,
        after: u64,
        limit: usize,
        ack: BlockingAnswer<Vec<LoggedInstant>>,
    },
    Pinned {
        id: String,
        ack: Answer<Option<u64>>,
    },
    Stats(Answer<JournalStats>),
    Newest {
        property: PropertyPath,
        ack: BlockingAnswer<Option<LoggedInstant>>,
    },
    #[cfg(test)]
    RingRecords {
        id: String,
        ack: chan::SyncSender<(usize, usize)>,
    },
    Close(chan::SyncSender<()>),
}

/// A write encoded into the group's buffer, waiting for the commit.
enum Staged {
    Instants {
        property: PropertyPath,
        first: u64,
        last: u64,
        start: usize,
        len: usize,
        ack: Answer<Range<u64>>,
    },
    Events {
        id: String,
        first_id: u64,
        count: usize,
        bytes: usize,
        checkpoint: Option<Checkpoint>,
        last_event_id: u64,
        start: usize,
        len: usize,
        ack: Answer<()>,
    },
}

/// The writes of one group commit.
#[derive(Default)]
struct Group {
    buf: Vec<u8>,
    staged: Vec<Staged>,
    /// The queries with events in the group: a second batch of one waits
    /// for the next group, as its checks build on the first.
    queries: HashSet<String>,
}

impl Group {
    /// The length of the record framed into the buffer from `start`; a
    /// record over the largest one a segment may hold is taken out again
    /// and refused, naming `what` it is.
    fn framed_since(&mut self, start: usize, what: &'static str) -> Result<usize, StoreErrorKind> {
        let len = self.buf.len() - start;
        if len as u64 > segment::FRAME + segment::MAX_RECORD {
            self.buf.truncate(start);
            return Err(StoreErrorKind::TooLarge {
                what,
                size: len,
                max: segment::MAX_RECORD as usize,
            });
        }
        Ok(len)
    }
}

/// The journal of a store; see the module docs.
#[derive(Debug)]
pub(crate) struct Journal {
    tx: chan::Sender<Req>,
    /// Taken by [`Journal::close`]; never locked on the write path.
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The bytes that may be queued, in permits.
    budget: Semaphore,
    budget_max: u32,
    broken: Arc<OnceLock<StoreErrorKind>>,
}

fn io(action: &'static str, path: &Path, e: std::io::Error) -> StoreErrorKind {
    StoreErrorKind::io(action, path, &e)
}

/// A record read back after the open no longer checks.
fn corrupt(path: &Path, offset: u64, why: DecodeError) -> StoreErrorKind {
    StoreErrorKind::JournalDamaged {
        segment: path.to_owned(),
        offset,
        why: why.to_string(),
    }
}

fn closed() -> StoreErrorKind {
    StoreErrorKind::Closed
}

impl Journal {
    /// Opens the journal in `store_dir`, creating it when missing, with the
    /// queries the database holds; starts a new segment and the thread.
    pub(crate) fn open(
        store_dir: &Path,
        options: &StoreOptions,
        registered: Vec<Registered>,
    ) -> Result<Journal, StoreErrorKind> {
        Journal::open_on(Arc::new(OsFs), store_dir, options, registered)
    }

    /// [`Journal::open`] on a file system of the caller's (a test's).
    pub(crate) fn open_on(
        vfs: Arc<dyn Vfs>,
        store_dir: &Path,
        options: &StoreOptions,
        registered: Vec<Registered>,
    ) -> Result<Journal, StoreErrorKind> {
        let dir = store_dir.join(JOURNAL_DIR);
        vfs.create_dir_all(&dir)
            .map_err(|e| io("create", &dir, e))?;
        let dir_id = vfs.id(&dir).map_err(|e| io("read", &dir, e))?;
        let found = scan(&*vfs, &dir)?;
        let placeholder = Active {
            number: 0,
            file: Arc::new(NoFile),
            len: 0,
            roll_at: 0,
            flushed: 0,
        };
        let mut inner = Inner {
            vfs,
            dir_id,
            bounds: Bounds {
                events: options.ring_events.max(1),
                bytes: options.ring_bytes.max(1),
            },
            segment_bytes: options.segment_bytes.max(segment::HEADER + 1),
            durability: options.durability,
            active: placeholder,
            dir,
            segments: BTreeMap::new(),
            next_seq: found.base_seq.max(1),
            properties: HashMap::new(),
            queries: HashMap::new(),
            broken: Arc::new(OnceLock::new()),
            unreachable: false,
            tally: stats::Tally::default(),
        };
        let broken = inner.broken.clone();
        inner.rebuild(found, registered);
        // The newest segment the last run left may hold writes it never
        // synced (a process killed under `Process`): sync it and its name
        // before a newer segment exists, so that a power cut later never
        // keeps the newer segment's records without its own, and so that
        // only the newest segment can ever end in an unfinished write.
        if let Some(&newest) = inner.segments.keys().next_back() {
            let path = segment::path(&inner.dir, newest);
            inner
                .vfs
                .open(&path, false)
                .and_then(|file| file.sync())
                .and_then(|()| inner.vfs.sync_dir(&inner.dir))
                .map_err(|e| io("sync", &path, e))?;
        }
        let number = inner.segments.keys().next_back().map_or(1, |n| n + 1);
        inner.start_segment(number)?;
        inner.compact();
        let (tx, rx) = chan::channel();
        let thread = std::thread::Builder::new()
            .name("mfstream-journal".into())
            .spawn(move || inner.run(rx))
            .map_err(|e| StoreErrorKind::Thread {
                name: "journal",
                message: format!("cannot start it: {e}"),
            })?;
        let budget_max = u32::try_from(options.queue_bytes.max(1)).unwrap_or(u32::MAX);
        Ok(Journal {
            broken,
            tx,
            thread: Mutex::new(Some(thread)),
            budget: Semaphore::new(budget_max as usize),
            budget_max,
        })
    }

    /// Sends a write of `size` bytes and waits for its answer, holding its
    /// share of the queue's bytes meanwhile.
    ///
    /// # Cancel safety
    ///
    /// Once sent, a write is made whether or not its caller still waits.
    async fn call<T>(
        &self,
        size: usize,
        req: impl FnOnce(Answer<T>) -> Req,
    ) -> Result<T, StoreErrorKind> {
        let cost = u32::try_from(size)
            .unwrap_or(u32::MAX)
            .clamp(1, self.budget_max);
        let _budget = self.budget.acquire_many(cost).await.map_err(|_| closed())?;
        let (ack, answer) = oneshot::channel();
        self.tx.send(req(ack)).map_err(|_| closed())?;
        answer.await.map_err(|_| closed())?
    }

    /// Asks the thread and blocks for its answer.
    fn ask<T>(&self, req: impl FnOnce(BlockingAnswer<T>) -> Req) -> Result<T, StoreErrorKind> {
        let (ack, answer) = chan::sync_channel(1);
        self.tx.send(req(ack)).map_err(|_| closed())?;
        answer.recv().map_err(|_| closed())?
    }

    /// Why the journal takes no more writes, if it does not: a write failed
    /// and could not be undone, or its directory was deleted or replaced.
    pub(crate) fn broken(&self) -> Result<(), StoreErrorKind> {
        match self.broken.get() {
            Some(why) => Err(why.clone()),
            None => Ok(()),
        }
    }

    /// The next sequence number to be logged, once every write sent before
    /// is made.
    pub(crate) async fn next_seq(&self) -> Result<u64, StoreErrorKind> {
        self.call(0, Req::NextSeq).await
    }

    /// Logs `count` instants of `property`, encoded as the batch module
    /// says, as one record: all of them or none; returns their sequence
    /// numbers once written (and synced, with `Power`).
    pub(crate) async fn append_instants(
        &self,
        property: &PropertyPath,
        count: u32,
        data: Vec<u8>,
    ) -> Result<Range<u64>, StoreErrorKind> {
        let size = data.len();
        let property = property.clone();
        self.call(size, |ack| Req::Instants {
            property,
            count,
            data,
            ack,
        })
        .await
    }

    /// Stores a query's next events (and checkpoint) as one record.
    pub(crate) async fn append_events(
        &self,
        id: &str,
        events: EventBatch,
        checkpoint: Option<Checkpoint>,
    ) -> Result<(), StoreErrorKind> {
        let size = events.data().len()
            + checkpoint
                .as_ref()
                .map_or(0, |c| c.state.as_ref().map_or(0, Vec::len));
        let id = id.to_owned();
        self.call(size, |ack| Req::Events {
            id,
            events,
            checkpoint,
            ack,
        })
        .await
    }

    /// A query just registered, reading the instants after `start_seq`.
    pub(crate) fn register(&self, id: &str, property: &PropertyPath, start_seq: u64) {
        let _ = self.tx.send(Req::Register {
            id: id.to_owned(),
            property: property.clone(),
            start_seq,
        });
    }

    /// A query's status changed.
    pub(crate) fn set_running(&self, id: &str, running: bool) {
        let _ = self.tx.send(Req::SetRunning {
            id: id.to_owned(),
            running,
        });
    }

    /// A query was deleted: its records are dead.
    pub(crate) fn forget(&self, id: &str) {
        let _ = self.tx.send(Req::Forget(id.to_owned()));
    }

    /// A query's last event id, ring and checkpoint. Blocking.
    pub(crate) fn restored(&self, id: &str) -> Result<Option<Restored>, StoreErrorKind> {
        self.ask(|ack| Req::Restored {
            id: id.to_owned(),
            ack,
        })
    }

    /// Up to `limit` instants of `property` logged after `after` and still
    /// kept (above its low-water mark), in order. Blocking.
    pub(crate) fn instants(
        &self,
        property: &PropertyPath,
        after: u64,
        limit: usize,
    ) -> Result<Vec<LoggedInstant>, StoreErrorKind> {
        self.ask(|ack| Req::Read {
            property: property.clone(),
            after,
            limit,
            ack,
        })
    }

    /// The last instant logged for `property`, whatever the checkpoints:
    /// the journal keeps each property's newest instants record (see
    /// [`Inner::compact`]), so this survives a restart. What an at-least-
    /// once source (MQTT) compares a redelivery with. Blocking.
    pub(crate) fn newest(
        &self,
        property: &PropertyPath,
    ) -> Result<Option<LoggedInstant>, StoreErrorKind> {
        self.ask(|ack| Req::Newest {
            property: property.clone(),
            ack,
        })
    }

    /// The bytes of the instants records of query `id`'s property that
    /// hold an instant logged after its checkpoint: what the journal keeps
    /// for it (a record is kept while any running query's checkpoint is
    /// below its end). `None` for a query it does not know. Walks those
    /// records on the journal's thread, so call it now and then, not per
    /// ingest.
    pub(crate) async fn pinned_bytes(&self, id: &str) -> Result<Option<u64>, StoreErrorKind> {
        let id = id.to_owned();
        self.call(0, |ack| Req::Pinned { id, ack }).await
    }

    /// The journal's size and counts, for `GET /metrics`: answered between
    /// two group commits, without forcing one.
    pub(crate) async fn stats(&self) -> Result<JournalStats, StoreErrorKind> {
        self.call(0, Req::Stats).await
    }

    /// The records of a query's ring, and the events they hold.
    #[cfg(test)]
    pub(crate) fn ring_records(&self, id: &str) -> (usize, usize) {
        let (ack, answer) = chan::sync_channel(1);
        let sent = self.tx.send(Req::RingRecords {
            id: id.to_owned(),
            ack,
        });
        sent.ok()
            .and_then(|()| answer.recv().ok())
            .unwrap_or((0, 0))
    }

    /// Makes every write sent, syncs (with `Power`) and stops the thread.
    /// Blocking.
    pub(crate) fn close(&self) {
        let (ack, done) = chan::sync_channel(1);
        if self.tx.send(Req::Close(ack)).is_ok() {
            let _ = done.recv();
        }
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(thread) = thread
            && thread.join().is_err()
        {
            tracing::error!("the state store's journal thread panicked");
        }
    }
}

/// The active segment before the first is started.
#[derive(Debug)]
struct NoFile;

impl SegFile for NoFile {
    fn read_at(&self, _: &mut [u8], _: u64) -> std::io::Result<()> {
        Err(std::io::ErrorKind::NotFound.into())
    }
    fn write_at(&self, _: &[u8], _: u64) -> std::io::Result<()> {
        Err(std::io::ErrorKind::NotFound.into())
    }
    fn set_len(&self, _: u64) -> std::io::Result<()> {
        Err(std::io::ErrorKind::NotFound.into())
    }
    fn len(&self) -> std::io::Result<u64> {
        Ok(0)
    }
    fn sync(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn unlinked(&self) -> std::io::Result<bool> {
        Ok(true)
    }
}

impl Inner {
    /// The thread: takes every request waiting, commits the writes among
    /// them together, answers the rest in order.
    fn run(mut self, rx: chan::Receiver<Req>) {
        let mut group = Group::default();
        while let Ok(first) = rx.recv() {
            let mut next = Some(first);
            while let Some(req) = next.take().or_else(|| rx.try_recv().ok()) {
                if let Some(Req::Close(ack)) = self.handle(req, &mut group) {
                    self.commit(&mut group);
                    self.close();
                    let _ = ack.send(());
                    return;
                }
                if group.buf.len() >= GROUP_BYTES {
                    self.commit(&mut group);
                }
            }
            self.commit(&mut group);
        }
        self.commit(&mut group);
        self.close();
    }

    /// Stages a write, or commits what is staged and then answers a
    /// request that reads or changes the index. Gives `Close` back.
    fn handle(&mut self, req: Req, group: &mut Group) -> Option<Req> {
        match req {
            Req::Instants {
                property,
                count,
                data,
                ack,
            } => self.stage_instants(group, property, count, &data, ack),
            Req::Events {
                id,
                events,
                checkpoint,
                ack,
            } => {
                if group.queries.contains(&id) {
                    self.commit(group);
                }
                self.stage_events(group, id, &events, checkpoint, ack);
            }
            close @ Req::Close(_) => return Some(close),
            // What reads or changes the index sees every write sent before
            // it made.
            Req::NextSeq(ack) => {
                self.commit(group);
                // A registration is about to be acknowledged on this: not
                // in a directory that is gone.
                let owned = self.check().and_then(|()| self.check_owned());
                let _ = ack.send(owned.map(|()| self.next_seq));
            }
            Req::Register {
                id,
                property,
                start_seq,
            } => {
                self.commit(group);
                let query = QueryLog::new(&id, property, true, start_seq);
                self.queries.insert(query.id.clone(), query);
            }
            Req::SetRunning { id, running } => {
                self.commit(group);
                if let Some(query) = self.queries.get_mut(id.as_str()) {
                    query.running = running;
                }
            }
            Req::Forget(id) => {
                self.commit(group);
                self.queries.remove(id.as_str());
            }
            Req::Restored { id, ack } => {
                self.commit(group);
                let _ = ack.send(self.restored(&id));
            }
            Req::Read {
                property,
                after,
                limit,
                ack,
            } => {
                self.commit(group);
                let _ = ack.send(self.instants(&property, after, limit));
            }
            Req::Pinned { id, ack } => {
                self.commit(group);
                let _ = ack.send(Ok(self.pinned_bytes(&id)));
            }
            Req::Stats(ack) => {
                let _ = ack.send(Ok(self.stats()));
            }
            Req::Newest { property, ack } => {
                self.commit(group);
                let _ = ack.send(self.newest(&property));
            }
            #[cfg(test)]
            Req::RingRecords { id, ack } => {
                self.commit(group);
                let _ = ack.send(
                    self.queries
                        .get(id.as_str())
                        .map_or((0, 0), |q| (q.ring.len(), q.ring_len)),
                );
            }
        }
        None
    }

    /// See [`Journal::pinned_bytes`].
    fn pinned_bytes(&self, id: &str) -> Option<u64> {
        let query = self.queries.get(id)?;
        let after = query.checkpoint.after_seq;
        let Some(log) = self.properties.get(&query.property) else {
            return Some(0);
        };
        // The record holding `after + 1`, if one does, and those after it.
        let from = log
            .records
            .range(..=after.saturating_add(1))
            .next_back()
            .map_or(0, |(&first, _)| first);
        Some(
            log.records
                .range(from..)
                .filter(|(_, (last, _))| *last > after)
                .map(|(_, (_, loc))| loc.len)
                .sum(),
        )
    }

    fn stage_instants(
        &mut self,
        group: &mut Group,
        property: PropertyPath,
        count: u32,
        data: &[u8],
        ack: Answer<Range<u64>>,
    ) {
        if let Err(e) = self.check() {
            let _ = ack.send(Err(e));
            return;
        }
        let first = self.next_seq;
        if count == 0 {
            let _ = ack.send(Ok(first..first));
            return;
        }
        let last = first + u64::from(count) - 1;
        let start = group.buf.len();
        segment::instants_record(&mut group.buf, &property, first, count, data);
        let len = match group.framed_since(start, "an ingest's journal record") {
            Ok(len) => len,
            Err(e) => {
                let _ = ack.send(Err(e));
                return;
            }
        };
        // Numbers are given once staged: a group that fails leaves a gap,
        // never a number used twice.
        self.next_seq = last + 1;
        group.staged.push(Staged::Instants {
            property,
            first,
            last,
            start,
            len,
            ack,
        });
    }

    fn stage_events(
        &mut self,
        group: &mut Group,
        id: String,
        events: &EventBatch,
        checkpoint: Option<Checkpoint>,
        ack: Answer<()>,
    ) {
        if let Err(e) = self.check() {
            let _ = ack.send(Err(e));
            return;
        }
        let Some(query) = self.queries.get(id.as_str()) else {
            let _ = ack.send(Err(StoreErrorKind::UnknownQuery(id)));
            return;
        };
        let last_event_id = match check_events(query, events, checkpoint.as_ref(), self.next_seq) {
            Ok(last) => last,
            Err(e) => {
                let _ = ack.send(Err(e));
                return;
            }
        };
        if events.is_empty() && checkpoint.is_none() {
            let _ = ack.send(Ok(()));
            return;
        }
        let start = group.buf.len();
        let head = segment::EventsHead {
            query: &id,
            first_id: events.first_id(),
            count: u32::try_from(events.len()).expect("batches are bounded by max_batch"),
            bytes: events.bytes() as u64,
            checkpoint: checkpoint.as_ref(),
        };
        segment::events_record(&mut group.buf, &head, events.data());
        let len = match group.framed_since(start, "a batch of events' journal record") {
            Ok(len) => len,
            Err(e) => {
                let _ = ack.send(Err(e));
                return;
            }
        };
        group.queries.insert(id.clone());
        group.staged.push(Staged::Events {
            id,
            first_id: events.first_id(),
            count: events.len(),
            bytes: events.bytes(),
            checkpoint,
            last_event_id,
            start,
            len,
            ack,
        });
    }

    /// Writes the group with one `pwrite`, syncs it with `Power`, checks
    /// that the files are still the directory's, then updates the index
    /// and answers every caller.
    fn commit(&mut self, group: &mut Group) {
        if group.staged.is_empty() {
            group.buf.clear();
            group.queries.clear();
            return;
        }
        let result = self.write_group(&group.buf);
        group.buf.clear();
        group.queries.clear();
        let base = match result {
            Ok(base) => base,
            Err(e) => {
                for staged in group.staged.drain(..) {
                    match staged {
                        Staged::Instants { ack, .. } => drop(ack.send(Err(e.clone()))),
                        Staged::Events { ack, .. } => drop(ack.send(Err(e.clone()))),
                    }
                }
                return;
            }
        };
        let segment = self.active.number;
        for staged in group.staged.drain(..) {
            match staged {
                Staged::Instants {
                    property,
                    first,
                    last,
                    start,
                    len,
                    ack,
                } => {
                    let loc = Loc {
                        segment,
                        offset: base + start as u64,
                        len: len as u64,
                    };
                    let log = self.property(&property);
                    log.records.insert(first, (last, loc));
                    log.last_logged = last;
                    let path = log.path.clone();
                    self.kept(Kept::Instants {
                        property: path,
                        first_seq: first,
                        loc,
                    });
                    let _ = ack.send(Ok(first..last + 1));
                }
                Staged::Events {
                    id,
                    first_id,
                    count,
                    bytes,
                    checkpoint,
                    last_event_id,
                    start,
                    len,
                    ack,
                } => {
                    let loc = Loc {
                        segment,
                        offset: base + start as u64,
                        len: len as u64,
                    };
                    let bounds = self.bounds;
                    // A query forgotten meanwhile: its record is dead.
                    if let Some(query) = self.queries.get_mut(id.as_str()) {
                        if count > 0 {
                            push_row(
                                query,
                                Row {
                                    first_id,
                                    len: count,
                                    bytes,
                                    loc,
                                },
                                bounds,
                            );
                        }
                        query.last_event_id = last_event_id;
                        if let Some(cp) = checkpoint {
                            query.checkpoint = cp;
                            query.checkpoint_loc = Some(loc);
                        }
                        let qid = query.id.clone();
                        self.kept(Kept::Events {
                            query: qid,
                            first_id,
                            loc,
                        });
                    }
                    let _ = ack.send(Ok(()));
                }
            }
        }
    }

    fn check(&self) -> Result<(), StoreErrorKind> {
        match self.broken.get() {
            Some(why) => Err(why.clone()),
            None => Ok(()),
        }
    }

    fn path(&self, loc: Loc) -> PathBuf {
        segment::path(&self.dir, loc.segment)
    }

    /// The payload of the record at `loc`, its segment opened once per
    /// read-back in `files`.
    fn read(
        &self,
        loc: Loc,
        files: &mut HashMap<u64, Arc<dyn SegFile>>,
    ) -> Result<Vec<u8>, StoreErrorKind> {
        let path = self.path(loc);
        let file = if loc.segment == self.active.number {
            self.active.file.clone()
        } else {
            match files.entry(loc.segment) {
                std::collections::hash_map::Entry::Occupied(open) => open.get().clone(),
                std::collections::hash_map::Entry::Vacant(slot) => slot
                    .insert(
                        self.vfs
                            .open(&path, false)
                            .map_err(|e| io("open", &path, e))?,
                    )
                    .clone(),
            }
        };
        segment::read_at(&*file, &path, loc.offset, loc.len)
    }

    /// Reads the record at `loc`, which must have the tag `tag`, and hands
    /// its instants or events, still encoded, to `decode`; anything amiss is
    /// corruption at `loc`.
    fn read_batch(
        &self,
        loc: Loc,
        files: &mut HashMap<u64, Arc<dyn SegFile>>,
        tag: u8,
        decode: impl FnOnce(&[u8]) -> Result<(), DecodeError>,
    ) -> Result<(), StoreErrorKind> {
        let payload = self.read(loc, files)?;
        let data = match segment::decode(&payload) {
            Ok(segment::Record::Instants { data, .. }) if tag == segment::TAG_INSTANTS => Ok(data),
            Ok(segment::Record::Events { data, .. }) if tag == segment::TAG_EVENTS => Ok(data),
            Ok(_) => Err(DecodeError::WrongKind),
            Err(why) => Err(why),
        };
        data.and_then(decode)
            .map_err(|why| corrupt(&self.path(loc), loc.offset, why))
    }

    fn restored(&self, id: &str) -> Result<Option<Restored>, StoreErrorKind> {
        let Some(query) = self.queries.get(id) else {
            return Ok(None);
        };
        // The ring's events were counted from what the records hold, but
        // the capacity is bounded by the ring all the same.
        let mut ring = Vec::with_capacity(query.ring_len.min(self.bounds.events));
        let mut files = HashMap::new();
        for row in &query.ring {
            self.read_batch(row.loc, &mut files, segment::TAG_EVENTS, |data| {
                batch::decode_events(data, row.first_id, |e| ring.push(e))
            })?;
        }
        trim(&mut ring, self.bounds);
        Ok(Some(Restored {
            last_event_id: query.last_event_id,
            ring,
            checkpoint: query.checkpoint.clone(),
        }))
    }

    fn instants(
        &self,
        property: &PropertyPath,
        after: u64,
        limit: usize,
    ) -> Result<Vec<LoggedInstant>, StoreErrorKind> {
        let Some(log) = self.properties.get(property) else {
            return Ok(Vec::new());
        };
        let low = self.low(property, log.last_logged);
        // The record holding `after + 1`, if one does (records never
        // overlap), and those after it.
        let from = log
            .records
            .range(..=after.saturating_add(1))
            .next_back()
            .map_or(0, |(&first, _)| first);
        let mut out = Vec::new();
        let mut files = HashMap::new();
        for (&first, &(last, loc)) in log.records.range(from..) {
            if out.len() >= limit {
                break;
            }
            if last <= low || last <= after {
                continue;
            }
            let mut seq = first;
            self.read_batch(loc, &mut files, segment::TAG_INSTANTS, |data| {
                batch::decode(data, |instant| {
                    if seq > after && out.len() < limit {
                        out.push(LoggedInstant { seq, instant });
                    }
                    seq += 1;
                })
            })?;
        }
        Ok(out)
    }

    /// See [`Journal::newest`].
    fn newest(&self, property: &PropertyPath) -> Result<Option<LoggedInstant>, StoreErrorKind> {
        let Some((&first, &(_, loc))) = self
            .properties
            .get(property)
            .and_then(|log| log.records.iter().next_back())
        else {
            return Ok(None);
        };
        let mut newest = None;
        let mut seq = first;
        self.read_batch(loc, &mut HashMap::new(), segment::TAG_INSTANTS, |data| {
            batch::decode(data, |instant| {
                newest = Some(LoggedInstant { seq, instant });
                seq += 1;
            })
        })?;
        Ok(newest)
    }

    /// Syncs what was written, at close.
    fn close(&self) {
        if self.broken.get().is_none()
            && let Err(e) = self.active.file.sync()
        {
            tracing::error!("cannot sync the state store's journal at close: {e}");
        }
    }

    fn property(&mut self, property: &PropertyPath) -> &mut PropertyLog {
        self.properties
            .entry(property.clone())
            .or_insert_with(|| PropertyLog {
                path: Arc::new(property.clone()),
                records: BTreeMap::new(),
                last_logged: 0,
            })
    }

    fn kept(&mut self, kept: Kept) {
        let segment = match &kept {
            Kept::Instants { loc, .. } | Kept::Events { loc, .. } => loc.segment,
        };
        if let Some(segment) = self.segments.get_mut(&segment) {
            segment.records.push(kept);
        }
    }

    /// The low-water mark of `property`: its instants up to it are needed
    /// by no running query.
    fn low(&self, property: &PropertyPath, last_logged: u64) -> u64 {
        self.queries
            .values()
            .filter(|q| q.running && q.property == *property)
            .map(|q| q.checkpoint.after_seq)
            .fold(last_logged, u64::min)
    }
}

//! The journal: the store's hot records (every ingested instant, every
//! result event, every checkpoint) appended to segment files by the caller
//! itself, with one `write(2)` per call and no thread in between.
//!
//! # Why not the database
//!
//! Under the serve bench's unpaced ingest, a commit per call through
//! SQLite's write-ahead log, on a writer thread, cost two thirds of the
//! server's throughput: most of it in waking the writer and the callers
//! (a fifth of the CPU went to the scheduler), the rest in writing each
//! row's pages twice (log, then checkpoint). An append to a file the
//! kernel already caches survives `SIGKILL` as a commit with
//! `synchronous = NORMAL` does, for the price of a `write(2)`. So these
//! records go to the journal, appended under a lock by the task that makes
//! them; registrations, statuses and deletions, which are rare, stay in the
//! database.
//!
//! # Durability
//!
//! [`Durability::Process`]: a record is in the kernel's page cache when
//! its call returns, so it survives the process being killed, not a power
//! failure. [`Durability::Power`]: the caller then waits for an
//! `fdatasync` that covers its record; concurrent callers share one (group
//! commit), and a new segment is synced, with its directory, before it is
//! used.
//!
//! # Segments, retention, compaction
//!
//! Records go to the newest segment; once it passes `segment_bytes`, a new
//! one is started and the older ones are looked at. A record is *live*
//! while something may still read it back: an instants record above its
//! property's low-water mark (the smallest checkpoint of the running queries
//! on it), an events record in its query's replay ring or holding its
//! latest checkpoint. A segment with nothing live is deleted; one with at
//! most half of its bytes live has those records copied to the newest
//! segment and is deleted. So the journal holds at most about twice its
//! live records, plus the newest segment.
//!
//! # What a write costs its caller
//!
//! The lock is held for one `pwrite(2)` of the call's records, tens of
//! microseconds, on the caller's thread (a runtime worker: the journal
//! has no thread of its own). Two things make it longer, and the caller's
//! thread waits through them: the kernel throttling writers once the disk
//! has fallen behind (ingest then runs at the disk's pace, which it must
//! anyway), and starting a segment, which copies the live records of the
//! old segments that are at most half live (at most half a segment each).
//!
//! # Reading back
//!
//! At open every segment is read in full, each record checked against its
//! checksum. A record cut short or damaged at the end of the newest
//! segment is a write the process did not finish (its caller never had an
//! answer): the segment is cut there. Damage anywhere else is refused as
//! corrupt. A record may be read twice (compaction copies before it
//! deletes): each instants record is kept once by its first sequence
//! number, each events record once by its first event id.

mod open;
mod retention;
mod ring;
mod segment;
mod write;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use self::open::scan;
use self::ring::{check_events, push_row, trim};
use super::batch;
use super::error::StoreErrorKind;
use super::record::{Checkpoint, EventBatch, LoggedInstant, PropertyPath, StoredEvent};
use super::{Durability, StoreOptions};

/// The journal's directory inside the store's.
pub(crate) const DIR: &str = "journal";

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
    pub(crate) id: String,
    pub(crate) property: PropertyPath,
    pub(crate) running: bool,
    /// The registration's checkpoint: it reads what is logged after this.
    pub(crate) start_seq: u64,
}

/// What a restored query gets from the journal.
#[derive(Debug)]
pub(crate) struct Restored {
    pub(crate) last_event_id: u64,
    pub(crate) ring: Vec<StoredEvent>,
    pub(crate) checkpoint: Checkpoint,
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
    file: Arc<File>,
    len: u64,
    /// The length past which the next segment is started.
    roll_at: u64,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    bounds: Bounds,
    segment_bytes: u64,
    durability: Durability,
    active: Active,
    segments: BTreeMap<u64, Segment>,
    next_seq: u64,
    properties: HashMap<PropertyPath, PropertyLog>,
    queries: HashMap<Arc<str>, QueryLog>,
    /// Why the journal takes no more records (a write failed and could not
    /// be undone).
    broken: Option<String>,
    /// Bytes appended since the journal was opened, across segments.
    written: u64,
    buf: Vec<u8>,
}

/// The journal of a store; see the module docs.
#[derive(Debug)]
pub(crate) struct Journal {
    inner: Mutex<Inner>,
    /// With [`Durability::Power`]: the bytes of `written` known synced.
    synced: Mutex<u64>,
}

fn io(what: &str, path: &Path, e: std::io::Error) -> StoreErrorKind {
    StoreErrorKind::Unwritable(format!("{what} {}: {e}", path.display()))
}

fn corrupt(path: &Path, offset: u64, why: &str) -> StoreErrorKind {
    StoreErrorKind::Corrupt(format!(
        "journal segment {} at byte {offset}: {why}",
        path.display()
    ))
}

impl Journal {
    /// Opens the journal in `store_dir`, creating it when missing, with the
    /// queries the database holds; starts a new segment.
    pub(crate) fn open(
        store_dir: &Path,
        options: &StoreOptions,
        registered: Vec<Registered>,
    ) -> Result<Journal, StoreErrorKind> {
        let dir = store_dir.join(DIR);
        std::fs::create_dir_all(&dir).map_err(|e| io("cannot create", &dir, e))?;
        let found = scan(&dir)?;
        let mut inner = Inner {
            bounds: Bounds {
                events: options.ring_events.max(1),
                bytes: options.ring_bytes.max(1),
            },
            segment_bytes: options.segment_bytes.max(segment::HEADER + 1),
            durability: options.durability,
            active: Active {
                number: 0,
                file: Arc::new(File::open(&dir).map_err(|e| io("cannot open", &dir, e))?),
                len: 0,
                roll_at: 0,
            },
            dir,
            segments: BTreeMap::new(),
            next_seq: found.base_seq.max(1),
            properties: HashMap::new(),
            queries: HashMap::new(),
            broken: None,
            written: 0,
            buf: Vec::new(),
        };
        inner.rebuild(found, registered);
        let number = inner.segments.keys().next_back().map_or(1, |n| n + 1);
        inner.start_segment(number)?;
        inner.compact();
        Ok(Journal {
            inner: Mutex::new(inner),
            synced: Mutex::new(0),
        })
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        // Every change to the index is made after its write succeeded, in
        // steps that cannot panic halfway: a poisoned lock is usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next sequence number to be logged.
    pub(crate) fn next_seq(&self) -> u64 {
        self.inner().next_seq
    }

    /// Logs `count` instants of `property`, encoded as the batch module
    /// says; returns their sequence numbers and the journal's length after
    /// them (for [`Journal::sync`]).
    pub(crate) fn append_instants(
        &self,
        property: &PropertyPath,
        count: u32,
        data: &[u8],
    ) -> Result<(Range<u64>, u64), StoreErrorKind> {
        let mut inner = self.inner();
        inner.check()?;
        let first = inner.next_seq;
        if count == 0 {
            return Ok((first..first, inner.written));
        }
        let mut buf = std::mem::take(&mut inner.buf);
        buf.clear();
        segment::instants_record(&mut buf, property, first, count, data);
        let written = inner.write(&buf);
        inner.buf = buf;
        let loc = written?;
        let last = first + u64::from(count) - 1;
        inner.next_seq = last + 1;
        let log = inner.property(property);
        log.records.insert(first, (last, loc));
        log.last_logged = last;
        let path = log.path.clone();
        inner.kept(Kept::Instants {
            property: path,
            first_seq: first,
            loc,
        });
        Ok((first..last + 1, inner.written))
    }

    /// Stores a query's next events (and checkpoint); returns the journal's
    /// length after them.
    pub(crate) fn append_events(
        &self,
        id: &str,
        events: &EventBatch,
        checkpoint: Option<Checkpoint>,
    ) -> Result<u64, StoreErrorKind> {
        let mut inner = self.inner();
        inner.check()?;
        let next_seq = inner.next_seq;
        let bounds = inner.bounds;
        let Some(query) = inner.queries.get(id) else {
            return Err(StoreErrorKind::UnknownQuery(id.to_owned()));
        };
        let last_event_id = check_events(query, events, checkpoint.as_ref(), next_seq)?;
        if events.is_empty() && checkpoint.is_none() {
            return Ok(inner.written);
        }
        let qid = query.id.clone();
        let mut buf = std::mem::take(&mut inner.buf);
        buf.clear();
        let head = segment::EventsHead {
            query: id,
            first_id: events.first_id(),
            count: u32::try_from(events.len()).expect("batches are bounded"),
            bytes: events.bytes() as u64,
            checkpoint: checkpoint.as_ref(),
        };
        segment::events_record(&mut buf, &head, events.data());
        let written = inner.write(&buf);
        inner.buf = buf;
        let loc = written?;
        let query = inner.queries.get_mut(id).expect("checked above");
        if !events.is_empty() {
            push_row(
                query,
                Row {
                    first_id: events.first_id(),
                    len: events.len(),
                    bytes: events.bytes(),
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
        inner.kept(Kept::Events {
            query: qid,
            first_id: events.first_id(),
            loc,
        });
        Ok(inner.written)
    }

    /// With [`Durability::Power`], returns once every byte up to `written`
    /// is on the disk: one `fdatasync` serves every caller waiting. Blocking.
    pub(crate) fn sync(&self, written: u64) -> Result<(), StoreErrorKind> {
        let mut synced = self.synced.lock().unwrap_or_else(|e| e.into_inner());
        if *synced >= written {
            return Ok(());
        }
        let (file, target, dir) = {
            let inner = self.inner();
            inner.check()?;
            (inner.active.file.clone(), inner.written, inner.dir.clone())
        };
        // Older segments were synced when the next one was started.
        file.sync_data().map_err(|e| io("cannot sync", &dir, e))?;
        *synced = target;
        Ok(())
    }

    /// A query just registered, reading the instants after `start_seq`.
    pub(crate) fn register(&self, id: &str, property: &PropertyPath, start_seq: u64) {
        let query = QueryLog::new(id, property.clone(), true, start_seq);
        self.inner().queries.insert(query.id.clone(), query);
    }

    /// A query's status changed.
    pub(crate) fn set_running(&self, id: &str, running: bool) {
        if let Some(query) = self.inner().queries.get_mut(id) {
            query.running = running;
        }
    }

    /// A query was deleted: its records are dead.
    pub(crate) fn forget(&self, id: &str) {
        self.inner().queries.remove(id);
    }

    /// A query's last event id, ring and checkpoint. Blocking.
    pub(crate) fn restored(&self, id: &str) -> Result<Option<Restored>, StoreErrorKind> {
        let inner = self.inner();
        let Some(query) = inner.queries.get(id) else {
            return Ok(None);
        };
        let mut ring = Vec::with_capacity(query.ring_len);
        let mut files = HashMap::new();
        for row in &query.ring {
            inner.read_batch(row.loc, &mut files, segment::TAG_EVENTS, |data| {
                batch::decode_events(data, row.first_id, |e| ring.push(e))
            })?;
        }
        trim(&mut ring, inner.bounds);
        Ok(Some(Restored {
            last_event_id: query.last_event_id,
            ring,
            checkpoint: query.checkpoint.clone(),
        }))
    }

    /// Up to `limit` instants of `property` logged after `after` and still
    /// kept (above its low-water mark), in order. Blocking.
    pub(crate) fn instants(
        &self,
        property: &PropertyPath,
        after: u64,
        limit: usize,
    ) -> Result<Vec<LoggedInstant>, StoreErrorKind> {
        let inner = self.inner();
        let Some(log) = inner.properties.get(property) else {
            return Ok(Vec::new());
        };
        let low = inner.low(property, log.last_logged);
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
            inner.read_batch(loc, &mut files, segment::TAG_INSTANTS, |data| {
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

    /// The bytes of the instants records of query `id`'s property that
    /// hold an instant logged after its checkpoint: what the journal keeps
    /// for it (a record is kept while any running query's checkpoint is
    /// below its end). `None` for a query it does not know. Read-only; walks
    /// those records under the lock, so call it now and then, not per
    /// ingest.
    pub(crate) fn pinned_bytes(&self, id: &str) -> Option<u64> {
        let inner = self.inner();
        let query = inner.queries.get(id)?;
        let after = query.checkpoint.after_seq;
        let Some(log) = inner.properties.get(&query.property) else {
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

    /// The records of a query's ring, and the events they hold.
    #[cfg(test)]
    pub(crate) fn ring_records(&self, id: &str) -> (usize, usize) {
        let inner = self.inner();
        inner
            .queries
            .get(id)
            .map_or((0, 0), |q| (q.ring.len(), q.ring_len))
    }

    /// Syncs what was written, with [`Durability::Power`]; at close.
    pub(crate) fn close(&self) {
        let inner = self.inner();
        if inner.durability == Durability::Power
            && let Err(e) = inner.active.file.sync_data()
        {
            tracing::error!("cannot sync the state store's journal at close: {e}");
        }
    }
}

impl Inner {
    fn check(&self) -> Result<(), StoreErrorKind> {
        match &self.broken {
            Some(why) => Err(StoreErrorKind::Unwritable(why.clone())),
            None => Ok(()),
        }
    }

    fn path(&self, loc: Loc) -> PathBuf {
        segment::path(&self.dir, loc.segment)
    }

    /// The payload of the record at `loc`, its segment opened once per
    /// read-back in `files`.
    fn read(&self, loc: Loc, files: &mut HashMap<u64, File>) -> Result<Vec<u8>, StoreErrorKind> {
        let path = self.path(loc);
        let file = if loc.segment == self.active.number {
            &*self.active.file
        } else {
            match files.entry(loc.segment) {
                std::collections::hash_map::Entry::Occupied(open) => open.into_mut(),
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(File::open(&path).map_err(|e| io("cannot open", &path, e))?)
                }
            }
        };
        segment::read_at(file, loc.offset, loc.len).map_err(|why| corrupt(&path, loc.offset, &why))
    }

    /// Reads the record at `loc`, which must have the tag `tag`, and hands
    /// its instants or events, still encoded, to `decode`; anything amiss is
    /// corruption at `loc`.
    fn read_batch(
        &self,
        loc: Loc,
        files: &mut HashMap<u64, File>,
        tag: u8,
        decode: impl FnOnce(&[u8]) -> Result<(), String>,
    ) -> Result<(), StoreErrorKind> {
        let payload = self.read(loc, files)?;
        let data = match segment::decode(&payload) {
            Ok(segment::Record::Instants { data, .. }) if tag == segment::TAG_INSTANTS => Ok(data),
            Ok(segment::Record::Events { data, .. }) if tag == segment::TAG_EVENTS => Ok(data),
            Ok(_) => Err("a record of another kind than the index says".to_owned()),
            Err(why) => Err(why),
        };
        data.and_then(decode)
            .map_err(|why: String| corrupt(&self.path(loc), loc.offset, &why))
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

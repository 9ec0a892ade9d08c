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

mod segment;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

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

/// What a scan of the segments found.
#[derive(Default)]
struct Found {
    segments: BTreeMap<u64, Segment>,
    base_seq: u64,
    /// Per property: first sequence number, count, where.
    instants: HashMap<PropertyPath, Vec<(u64, u64, Loc)>>,
    /// Per query, its events records.
    events: HashMap<String, Vec<FoundEvents>>,
}

/// An events record read back.
struct FoundEvents {
    first_id: u64,
    count: u64,
    bytes: u64,
    checkpoint: Option<Checkpoint>,
    loc: Loc,
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
            let payload = inner.read(row.loc, &mut files)?;
            let segment::Record::Events { data, .. } = segment::decode(&payload)
                .map_err(|why| corrupt(&inner.path(row.loc), row.loc.offset, &why))?
            else {
                return Err(corrupt(
                    &inner.path(row.loc),
                    row.loc.offset,
                    "an instants record where events were",
                ));
            };
            batch::decode_events(data, row.first_id, |e| ring.push(e))
                .map_err(|why| corrupt(&inner.path(row.loc), row.loc.offset, &why))?;
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
            let payload = inner.read(loc, &mut files)?;
            let segment::Record::Instants { data, .. } = segment::decode(&payload)
                .map_err(|why| corrupt(&inner.path(loc), loc.offset, &why))?
            else {
                return Err(corrupt(
                    &inner.path(loc),
                    loc.offset,
                    "an events record where instants were",
                ));
            };
            let mut seq = first;
            batch::decode(data, |instant| {
                if seq > after && out.len() < limit {
                    out.push(LoggedInstant { seq, instant });
                }
                seq += 1;
            })
            .map_err(|why| corrupt(&inner.path(loc), loc.offset, &why))?;
        }
        Ok(out)
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

/// Checks a query's next events and checkpoint; returns its last event id
/// after them.
fn check_events(
    query: &QueryLog,
    events: &EventBatch,
    checkpoint: Option<&Checkpoint>,
    next_seq: u64,
) -> Result<u64, StoreErrorKind> {
    if !events.is_empty() && events.first_id() != query.last_event_id + 1 {
        return Err(StoreErrorKind::EventOutOfOrder {
            query: query.id.to_string(),
            last: query.last_event_id,
            got: events.first_id(),
        });
    }
    let last_event_id = query.last_event_id + events.len() as u64;
    if let Some(cp) = checkpoint {
        let bad = |why: String| StoreErrorKind::BadCheckpoint {
            query: query.id.to_string(),
            why,
        };
        let old = &query.checkpoint;
        if cp.last_event_id > last_event_id {
            return Err(bad(format!(
                "it is at event {}, but the last event stored is {last_event_id}",
                cp.last_event_id
            )));
        }
        if cp.after_seq < old.after_seq || cp.last_event_id < old.last_event_id {
            return Err(bad(format!(
                "it moves back from instant {} and event {} to instant {} and event {}",
                old.after_seq, old.last_event_id, cp.after_seq, cp.last_event_id
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
    Ok(last_event_id)
}

/// Adds a record to a query's ring, then drops its oldest records while
/// the ones after them still hold every event the ring keeps; the newest
/// always stays. The records kept hold the ring and at most one more;
/// reading them back trims to the ring exactly.
fn push_row(query: &mut QueryLog, row: Row, bounds: Bounds) {
    query.ring.push_back(row);
    query.ring_len += row.len;
    query.ring_bytes += row.bytes;
    while query.ring.len() > 1 {
        let oldest = query.ring[0];
        let (len, bytes) = (query.ring_len - oldest.len, query.ring_bytes - oldest.bytes);
        if len < bounds.events && bytes < bounds.bytes {
            break;
        }
        query.ring.pop_front();
        query.ring_len = len;
        query.ring_bytes = bytes;
    }
}

/// The ring as its bounds say: the oldest events go while it is over a
/// bound, but the newest always stays.
fn trim(ring: &mut Vec<StoredEvent>, bounds: Bounds) {
    let mut bytes: usize = ring.iter().map(StoredEvent::size).sum();
    let mut drop = 0;
    while ring.len() - drop > 1 && (ring.len() - drop > bounds.events || bytes > bounds.bytes) {
        bytes -= ring[drop].size();
        drop += 1;
    }
    ring.drain(..drop);
}

impl QueryLog {
    fn new(id: &str, property: PropertyPath, running: bool, start_seq: u64) -> QueryLog {
        QueryLog {
            id: Arc::from(id),
            property,
            running,
            last_event_id: 0,
            checkpoint: Checkpoint {
                after_seq: start_seq,
                last_event_id: 0,
                state: None,
            },
            checkpoint_loc: None,
            ring: VecDeque::new(),
            ring_len: 0,
            ring_bytes: 0,
        }
    }
}

/// Reads every segment of `dir`, oldest first, cutting a torn end off the
/// newest.
fn scan(dir: &Path) -> Result<Found, StoreErrorKind> {
    let mut numbers = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io("cannot read", dir, e))? {
        let entry = entry.map_err(|e| io("cannot read", dir, e))?;
        if let Some(n) = entry.file_name().to_str().and_then(segment::number) {
            numbers.push(n);
        }
    }
    numbers.sort_unstable();
    let mut found = Found::default();
    for (i, &number) in numbers.iter().enumerate() {
        let newest = i + 1 == numbers.len();
        let path = segment::path(dir, number);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| io("cannot open", &path, e))?;
        let base_seq = match segment::read_header(&mut file) {
            Ok(base) => base,
            // A segment whose header was never finished holds nothing.
            Err(segment::ReadError::Header(_)) if newest && file_len(&file) < segment::HEADER => {
                tracing::warn!("removing an unfinished journal segment {}", path.display());
                std::fs::remove_file(&path).map_err(|e| io("cannot remove", &path, e))?;
                continue;
            }
            Err(segment::ReadError::Header(why)) => return Err(corrupt(&path, 0, &why)),
            Err(segment::ReadError::Version(v)) => {
                return Err(StoreErrorKind::Corrupt(format!(
                    "journal segment {} has format version {v}, but this mfstream reads \
                     version {}: use the mfstream that wrote it, or a new directory",
                    path.display(),
                    segment::VERSION
                )));
            }
            Err(segment::ReadError::Io(e)) => return Err(io("cannot read", &path, e)),
        };
        found.base_seq = found.base_seq.max(base_seq);
        let mut records = Vec::new();
        let end = segment::scan(&mut file, |framed| {
            let loc = Loc {
                segment: number,
                offset: framed.offset,
                len: framed.len,
            };
            found_record(&mut found, &mut records, &framed.payload, loc)
        })
        .map_err(|e| match e {
            segment::ReadError::Io(e) => io("cannot read", &path, e),
            segment::ReadError::Header(why) => corrupt(&path, 0, &why),
            segment::ReadError::Version(_) => corrupt(&path, 0, "unexpected version"),
        })?;
        let len = match end {
            segment::End::Clean => file_len(&file),
            segment::End::Torn { offset, why } if newest => {
                tracing::warn!(
                    "journal segment {}: {why} at byte {offset}, after the last whole \
                     record: an unfinished write, cut off",
                    path.display()
                );
                file.set_len(offset)
                    .map_err(|e| io("cannot cut", &path, e))?;
                offset
            }
            segment::End::Torn { offset, why } | segment::End::Bad { offset, why } => {
                return Err(corrupt(&path, offset, &why));
            }
        };
        found.segments.insert(number, Segment { len, records });
    }
    Ok(found)
}

fn file_len(file: &File) -> u64 {
    file.metadata().map_or(0, |m| m.len())
}

/// Notes one record read back.
fn found_record(
    found: &mut Found,
    records: &mut Vec<Kept>,
    payload: &[u8],
    loc: Loc,
) -> Result<(), String> {
    match segment::decode(payload)? {
        segment::Record::Instants {
            property,
            first_seq,
            count,
            ..
        } => {
            if count == 0 || first_seq == 0 {
                return Err("an instants record without instants".into());
            }
            records.push(Kept::Instants {
                property: Arc::new(property.clone()),
                first_seq,
                loc,
            });
            found
                .instants
                .entry(property)
                .or_default()
                .push((first_seq, u64::from(count), loc));
        }
        segment::Record::Events {
            query,
            first_id,
            count,
            bytes,
            checkpoint,
            ..
        } => {
            records.push(Kept::Events {
                query: Arc::from(query.as_str()),
                first_id,
                loc,
            });
            found.events.entry(query).or_default().push(FoundEvents {
                first_id,
                count: u64::from(count),
                bytes,
                checkpoint,
                loc,
            });
        }
    }
    Ok(())
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

    /// Appends one framed record to the newest segment (starting a new one
    /// first when it is full) and returns where it went. A write that fails
    /// is cut off again; if even that fails, the journal takes no more.
    /// When a new segment cannot be started (its directory was removed,
    /// the disk is full), the record goes to the newest one, which grows
    /// past its size until a later attempt succeeds.
    fn write(&mut self, record: &[u8]) -> Result<Loc, StoreErrorKind> {
        if self.active.len >= self.active.roll_at
            && let Err(e) = self.roll()
        {
            self.active.roll_at = self.active.len + (self.segment_bytes / 4).max(1);
            tracing::warn!(
                "cannot start a new journal segment ({e}): journal segment {} grows past \
                 its size meanwhile",
                self.active.number
            );
        }
        self.write_raw(record)
    }

    fn write_raw(&mut self, record: &[u8]) -> Result<Loc, StoreErrorKind> {
        let offset = self.active.len;
        let path = segment::path(&self.dir, self.active.number);
        if let Err(e) = self.active.file.write_all_at(record, offset) {
            if let Err(cut) = self.active.file.set_len(offset) {
                let why = format!(
                    "journal segment {}: a write failed ({e}) and could not be cut off ({cut})",
                    path.display()
                );
                tracing::error!("{why}");
                self.broken = Some(why);
            }
            return Err(io("cannot write", &path, e));
        }
        let len = record.len() as u64;
        self.active.len += len;
        self.written += len;
        if let Some(segment) = self.segments.get_mut(&self.active.number) {
            segment.len = self.active.len;
        }
        Ok(Loc {
            segment: self.active.number,
            offset,
            len,
        })
    }

    /// Starts the next segment, then looks at the older ones.
    fn roll(&mut self) -> Result<(), StoreErrorKind> {
        if self.durability == Durability::Power {
            let path = segment::path(&self.dir, self.active.number);
            self.active
                .file
                .sync_data()
                .map_err(|e| io("cannot sync", &path, e))?;
        }
        self.start_segment(self.active.number + 1)?;
        self.compact();
        Ok(())
    }

    fn start_segment(&mut self, number: u64) -> Result<(), StoreErrorKind> {
        let path = segment::path(&self.dir, number);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| io("cannot create", &path, e))?;
        file.write_all_at(&segment::header(self.next_seq), 0)
            .map_err(|e| io("cannot write", &path, e))?;
        if self.durability == Durability::Power {
            file.sync_all().map_err(|e| io("cannot sync", &path, e))?;
            File::open(&self.dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| io("cannot sync", &self.dir, e))?;
        }
        self.active = Active {
            number,
            file: Arc::new(file),
            len: segment::HEADER,
            roll_at: self.segment_bytes,
        };
        self.segments.insert(
            number,
            Segment {
                len: segment::HEADER,
                records: Vec::new(),
            },
        );
        Ok(())
    }

    /// Whether a record is still needed.
    fn live(&self, kept: &Kept) -> bool {
        match kept {
            Kept::Instants {
                property,
                first_seq,
                loc,
            } => self
                .properties
                .get(&**property)
                .and_then(|log| log.records.get(first_seq))
                .is_some_and(|&(_, at)| at == *loc),
            Kept::Events {
                query,
                first_id,
                loc,
            } => self.queries.get(query).is_some_and(|q| {
                q.checkpoint_loc == Some(*loc)
                    || q.ring
                        .binary_search_by_key(first_id, |row| row.first_id)
                        .is_ok_and(|i| q.ring[i].loc == *loc)
            }),
        }
    }

    /// Forgets the instants below each property's low-water mark, then
    /// deletes the older segments with nothing live and moves the live
    /// records of those at most half live into the newest.
    fn compact(&mut self) {
        let lows: Vec<(PropertyPath, u64)> = self
            .properties
            .iter()
            .map(|(p, log)| (p.clone(), self.low(p, log.last_logged)))
            .collect();
        for (property, low) in lows {
            if let Some(log) = self.properties.get_mut(&property) {
                log.records.retain(|_, &mut (last, _)| last > low);
            }
        }
        let older: Vec<u64> = self
            .segments
            .range(..self.active.number)
            .map(|(&n, _)| n)
            .collect();
        for number in older {
            let Some(segment) = self.segments.get(&number) else {
                continue;
            };
            let live: Vec<usize> = (0..segment.records.len())
                .filter(|&i| self.live(&segment.records[i]))
                .collect();
            let live_bytes: u64 = live
                .iter()
                .map(|&i| match &segment.records[i] {
                    Kept::Instants { loc, .. } | Kept::Events { loc, .. } => loc.len,
                })
                .sum();
            if live_bytes * 2 > segment.len {
                continue;
            }
            let Some(segment) = self.segments.remove(&number) else {
                continue;
            };
            if let Err(e) = self.move_live(&segment, &live) {
                // Nothing is lost: the segment stays, and so does its index.
                tracing::warn!("cannot compact journal segment {number}: {e}");
                self.segments.insert(number, segment);
                continue;
            }
            let path = segment::path(&self.dir, number);
            if let Err(e) = std::fs::remove_file(&path) {
                tracing::warn!("cannot remove journal segment {}: {e}", path.display());
            }
        }
    }

    /// Copies the records `live` of `segment` into the newest segment and
    /// points the index at the copies.
    fn move_live(&mut self, segment: &Segment, live: &[usize]) -> Result<(), StoreErrorKind> {
        let mut file = None;
        for &i in live {
            let kept = &segment.records[i];
            let old = match kept {
                Kept::Instants { loc, .. } | Kept::Events { loc, .. } => *loc,
            };
            let path = self.path(old);
            if file.is_none() {
                file = Some(File::open(&path).map_err(|e| io("cannot open", &path, e))?);
            }
            let file = file.as_ref().expect("opened above");
            let mut record = vec![0u8; old.len as usize];
            file.read_exact_at(&mut record, old.offset)
                .map_err(|e| io("cannot read", &path, e))?;
            let new = self.write_raw(&record)?;
            match kept {
                Kept::Instants {
                    property,
                    first_seq,
                    ..
                } => {
                    if let Some(entry) = self
                        .properties
                        .get_mut(&**property)
                        .and_then(|log| log.records.get_mut(first_seq))
                    {
                        entry.1 = new;
                    }
                    self.kept(Kept::Instants {
                        property: property.clone(),
                        first_seq: *first_seq,
                        loc: new,
                    });
                }
                Kept::Events {
                    query, first_id, ..
                } => {
                    if let Some(q) = self.queries.get_mut(query) {
                        if q.checkpoint_loc == Some(old) {
                            q.checkpoint_loc = Some(new);
                        }
                        for row in q.ring.iter_mut().filter(|row| row.loc == old) {
                            row.loc = new;
                        }
                    }
                    self.kept(Kept::Events {
                        query: query.clone(),
                        first_id: *first_id,
                        loc: new,
                    });
                }
            }
        }
        Ok(())
    }

    /// Builds the index from what the scan found and what the database
    /// holds.
    fn rebuild(&mut self, found: Found, registered: Vec<Registered>) {
        let Found {
            segments,
            instants,
            mut events,
            base_seq,
        } = found;
        let mut next_seq = base_seq.max(1);
        for (property, mut records) in instants {
            records.sort_by_key(|&(first, _, _)| first);
            records.dedup_by_key(|&mut (first, _, _)| first);
            let log = self.property(&property);
            for (first, count, loc) in records {
                let last = first + count - 1;
                log.records.insert(first, (last, loc));
                log.last_logged = log.last_logged.max(last);
                next_seq = next_seq.max(last + 1);
            }
        }
        for r in registered {
            let mut query = QueryLog::new(&r.id, r.property, r.running, r.start_seq);
            next_seq = next_seq.max(r.start_seq + 1);
            let mut records = events.remove(&r.id).unwrap_or_default();
            records.sort_by_key(|r| r.first_id);
            for found in records {
                let (first, count, loc) = (found.first_id, found.count, found.loc);
                if count > 0 && first > query.last_event_id {
                    let row = Row {
                        first_id: first,
                        len: count as usize,
                        bytes: found.bytes as usize,
                        loc,
                    };
                    push_row(&mut query, row, self.bounds);
                    query.last_event_id = first + count - 1;
                }
                if let Some(cp) = found.checkpoint
                    && (cp.last_event_id, cp.after_seq)
                        > (query.checkpoint.last_event_id, query.checkpoint.after_seq)
                {
                    next_seq = next_seq.max(cp.after_seq + 1);
                    query.checkpoint = cp;
                    query.checkpoint_loc = Some(loc);
                }
            }
            self.queries.insert(query.id.clone(), query);
        }
        self.segments = segments;
        self.next_seq = next_seq;
    }
}

//! Reading the journal back at open: every segment scanned, a torn end cut
//! off the newest, and the index rebuilt with the queries the database
//! holds.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::path::Path;
use std::sync::Arc;

use super::super::error::StoreErrorKind;
use super::super::record::{Checkpoint, PropertyPath};
use super::ring::push_row;
use super::{Inner, Kept, Loc, QueryLog, Registered, Row, Segment, corrupt, io, segment};

/// What a scan of the segments found.
#[derive(Default)]
pub(super) struct Found {
    segments: BTreeMap<u64, Segment>,
    pub(super) base_seq: u64,
    /// Per property: first sequence number, count, where.
    instants: HashMap<PropertyPath, Vec<(u64, u64, Loc)>>,
    /// Per query, its events records.
    events: HashMap<String, Vec<FoundEvents>>,
}

/// An events record read back.
pub(super) struct FoundEvents {
    first_id: u64,
    count: u64,
    bytes: u64,
    checkpoint: Option<Checkpoint>,
    loc: Loc,
}

/// Reads every segment of `dir`, oldest first, cutting a torn end off the
/// newest.
pub(super) fn scan(dir: &Path) -> Result<Found, StoreErrorKind> {
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

pub(super) fn file_len(file: &File) -> u64 {
    file.metadata().map_or(0, |m| m.len())
}

/// Notes one record read back.
pub(super) fn found_record(
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
    /// Builds the index from what the scan found and what the database
    /// holds.
    pub(super) fn rebuild(&mut self, found: Found, registered: Vec<Registered>) {
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

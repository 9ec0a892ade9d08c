//! Reading the journal back at open: every segment scanned, a torn end cut
//! off, damage refused, and the index rebuilt with the queries the database
//! holds.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use super::super::error::StoreErrorKind;
use super::super::frame::DecodeError;
use super::super::record::{Checkpoint, PropertyPath};
use super::ring::push_row;
use super::vfs::Vfs;
use super::{Inner, Kept, Loc, QueryLog, Registered, Row, Segment, io, manifest, segment};

/// What a scan of the segments found.
#[derive(Default)]
pub(super) struct Found {
    segments: BTreeMap<u64, Segment>,
    pub(super) base_seq: u64,
    /// Per property: first sequence number, count, where.
    instants: HashMap<PropertyPath, Vec<(u64, u64, Loc)>>,
    /// Per query, its events records.
    events: HashMap<String, Vec<FoundEvents>>,
    /// Unfinished writes cut off, and their bytes (for `GET /metrics`).
    pub(super) truncations: u64,
    pub(super) truncated_bytes: u64,
}

/// An events record read back.
pub(super) struct FoundEvents {
    first_id: u64,
    count: u64,
    bytes: u64,
    checkpoint: Option<Checkpoint>,
    loc: Loc,
}

/// The most bytes a segment whose header never reached the disk can hold:
/// the page its header was written to.
const UNFINISHED: u64 = 4096;

/// Reads every segment of `dir`, oldest first. What follows the last
/// record that checks of the newest segment, when nothing after it checks (zeros,
/// a record cut short or not matching its checksum: the remains of writes
/// never synced, so never acknowledged under `Power`), is cut off, the cut
/// synced and logged; any other damage is refused, naming the segment and
/// the offset.
pub(super) fn scan(vfs: &dyn Vfs, dir: &Path) -> Result<Found, StoreErrorKind> {
    let mut numbers: Vec<u64> = vfs
        .list(dir)
        .map_err(|e| io("read", dir, e))?
        .iter()
        .filter_map(|name| segment::number(name))
        .collect();
    numbers.sort_unstable();
    // Before anything is read or cut: a listed segment missing is refused
    // (an unfinished one is present, and removed below as holding nothing).
    let mut listed = manifest::read(vfs, dir)?;
    if let Some(listed) = &listed {
        manifest::check(dir, listed, &numbers)?;
    } else if !numbers.is_empty() {
        tracing::info!(
            journal = %dir.display(),
            "the journal has no manifest (written by an earlier mfstream): it is made from the \
             {} segments present",
            numbers.len()
        );
    }
    let mut found = Found::default();
    let newest = numbers.last().copied();
    for number in numbers {
        let path = segment::path(dir, number);
        let file = vfs.open(&path, false).map_err(|e| io("open", &path, e))?;
        let size = file.len().map_err(|e| io("read", &path, e))?;
        let base_seq = match segment::read_header(&*file, size) {
            Ok(base) => base,
            Err(segment::ReadError::Header(why)) => {
                // A segment whose header never reached the disk holds
                // nothing: it is the newest (each is synced with its
                // directory before it is used), no longer than the page
                // its header was written to, and nothing in it checks.
                // Anything else is damage, left for `state repair`.
                let any =
                    segment::next_record_in(&*file, size, 0).map_err(|e| io("read", &path, e))?;
                if let Some(at) = any {
                    return Err(StoreErrorKind::JournalDamaged {
                        segment: path,
                        offset: 0,
                        why: format!("{why}, with a record that checks at byte {at}"),
                    });
                }
                if newest != Some(number) || size > UNFINISHED {
                    return Err(StoreErrorKind::JournalDamaged {
                        segment: path,
                        offset: 0,
                        why,
                    });
                }
                tracing::warn!(
                    file = %path.display(),
                    bytes = size,
                    "removing an unfinished journal segment ({why}): nothing in it checks"
                );
                // Unlisted before it is removed, as compaction does: a
                // power cut in between must not leave it listed and absent.
                if let Some(numbers) = listed.as_mut().filter(|l| l.contains(&number)) {
                    numbers.retain(|&n| n != number);
                    manifest::write(vfs, dir, numbers)
                        .map_err(|e| io("write", &manifest::path(dir), e))?;
                }
                vfs.remove(&path)
                    .and_then(|()| vfs.sync_dir(dir))
                    .map_err(|e| io("remove", &path, e))?;
                found.truncations += 1;
                found.truncated_bytes += size;
                continue;
            }
            Err(segment::ReadError::Version(found)) => {
                return Err(StoreErrorKind::JournalVersion {
                    segment: path,
                    found,
                    expected: segment::VERSION,
                });
            }
            Err(segment::ReadError::Io(e)) => return Err(io("read", &path, e)),
        };
        found.base_seq = found.base_seq.max(base_seq);
        let mut records = Vec::new();
        let damage = segment::scan(&*file, size, false, |framed| {
            let loc = Loc {
                segment: number,
                offset: framed.offset,
                len: framed.len,
            };
            found_record(&mut found, &mut records, &framed.payload, loc)
        })
        .map_err(|e| io("read", &path, e))?;
        let len = match damage.first() {
            None => size,
            // Only the newest segment can end in an unfinished write: each
            // older one was synced before its successor was started (by
            // `roll`, or by `Journal::open` for the newest a run left), so
            // bytes that do not check at its end are damage, and cutting them
            // could drop acknowledged records.
            Some(d) if d.tail && newest == Some(number) => {
                tracing::warn!(
                    file = %path.display(),
                    offset = d.offset,
                    bytes = size - d.offset,
                    "journal segment {}: {} at byte {}, and nothing after it checks: the \
                     remains of a write never finished, {} bytes cut off",
                    path.display(),
                    d.why,
                    d.offset,
                    size - d.offset
                );
                file.set_len(d.offset)
                    .and_then(|()| file.sync())
                    .map_err(|e| io("cut", &path, e))?;
                found.truncations += 1;
                found.truncated_bytes += size - d.offset;
                d.offset
            }
            Some(d) => {
                let why = if d.tail {
                    format!(
                        "{}, at the end of a segment that is not the newest (it was synced \
                         before the next one was started)",
                        d.why
                    )
                } else {
                    d.why.clone()
                };
                return Err(StoreErrorKind::JournalDamaged {
                    segment: path,
                    offset: d.offset,
                    why,
                });
            }
        };
        found.segments.insert(number, Segment { len, records });
    }
    Ok(found)
}

/// Notes one record read back.
pub(super) fn found_record(
    found: &mut Found,
    records: &mut Vec<Kept>,
    payload: &[u8],
    loc: Loc,
) -> Result<(), DecodeError> {
    match segment::decode(payload)? {
        segment::Record::Instants {
            property,
            first_seq,
            count,
            ..
        } => {
            if count == 0 || first_seq == 0 {
                return Err(DecodeError::InstantsRange { count, first_seq });
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
            truncations,
            truncated_bytes,
        } = found;
        self.tally.truncations = truncations;
        self.tally.truncated_bytes = truncated_bytes;
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
            next_seq = next_seq.max(r.start_seq.saturating_add(1));
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

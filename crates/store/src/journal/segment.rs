//! The journal's files: segments of framed, checksummed records.
//!
//! A segment is a header and then records, appended and never changed in
//! place:
//!
//! ```text
//! header  "MFSJRNL\0"  version: u32  base_seq: u64  crc32(previous 20 bytes): u32
//! record  len: u32  crc32(payload): u32  payload: len bytes
//! ```
//!
//! Every integer is little endian. `base_seq` is the journal's next
//! sequence number when the segment was made, so that sequence numbers
//! never go back even once every instant has been trimmed. A payload is a
//! tag and its fields (strings and byte strings are a `u32` length and the
//! bytes):
//!
//! - [`TAG_INSTANTS`]: `first_seq: u64`, `count: u32`, the property's
//!   collection, feature and name, then the instants, encoded as the batch
//!   module says;
//! - [`TAG_EVENTS`]: the query id, `first_id: u64`, `count: u32`,
//!   `bytes: u64` (the events' kinds and data, for the ring's byte bound),
//!   a checkpoint (`0`, or `1`, `after_seq: u64`, `last_event_id: u64` and
//!   the state: `0`, or `1` and its bytes; or `2`, the same and then
//!   `skipped: u64`, the query's skipped total at that point, when it is
//!   not 0), then the events, encoded as the batch module says.
//!
//! A record's payload carries no position, so a record copied into a newer
//! segment (compaction) is the same record: reading it twice is harmless,
//! and the reader keeps one.

use std::path::{Path, PathBuf};

use super::super::batch;
use super::super::error::StoreErrorKind;
use super::super::frame::{DecodeError, put_bytes, take, take_array, take_bytes, take_str};
use super::super::record::{Checkpoint, PropertyPath};
use super::vfs::SegFile;

const MAGIC: &[u8; 8] = b"MFSJRNL\0";
/// The format this build reads and writes.
pub(super) const VERSION: u32 = 1;
/// The bytes of a segment's header.
pub(super) const HEADER: u64 = 24;
/// The bytes of a record's frame before its payload.
pub(super) const FRAME: u64 = 8;
/// The largest payload written or read: a length above it is damage, and
/// nothing is allocated for it. An ingest of `--max-body` (4 MiB by
/// default) makes a record of less than its body.
pub(super) const MAX_RECORD: u64 = 256 * 1024 * 1024;
/// The smallest payload: an instants record's tag, `first_seq`, `count`
/// and three empty strings (an events record's fields take more).
const MIN_RECORD: u64 = 1 + 8 + 4 + 3 * 4;
/// Sequence numbers and event ids read from disk are below this, so that
/// no sum of them overflows.
pub(super) const MAX_SEQ: u64 = 1 << 62;

pub(super) const TAG_INSTANTS: u8 = 1;
pub(super) const TAG_EVENTS: u8 = 2;

/// A segment's file name: its number, zero-padded so that names sort as
/// numbers do.
pub(super) fn path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:020}.seg"))
}

/// The number of a segment file name, or `None` for another file.
pub(super) fn number(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".seg")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

pub(super) fn header(base_seq: u64) -> [u8; HEADER as usize] {
    let mut h = [0u8; HEADER as usize];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..20].copy_from_slice(&base_seq.to_le_bytes());
    let crc = crc32fast::hash(&h[..20]);
    h[20..24].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Why a segment's header could not be read.
#[derive(Debug)]
pub(super) enum ReadError {
    Io(std::io::Error),
    /// Not a segment, or a damaged header.
    Header(String),
    /// Another format version.
    Version(u32),
}

/// Reads a segment's header: its `base_seq`.
pub(super) fn read_header(file: &dyn SegFile, size: u64) -> Result<u64, ReadError> {
    if size < HEADER {
        return Err(ReadError::Header("shorter than its header".into()));
    }
    let mut h = [0u8; HEADER as usize];
    file.read_at(&mut h, 0).map_err(ReadError::Io)?;
    if &h[..8] != MAGIC {
        return Err(ReadError::Header("not a journal segment".into()));
    }
    if crc32fast::hash(&h[..20]).to_le_bytes() != h[20..24] {
        return Err(ReadError::Header(
            "its header's checksum does not match".into(),
        ));
    }
    let version = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(ReadError::Version(version));
    }
    let base = u64::from_le_bytes(h[12..20].try_into().expect("8 bytes"));
    if base >= MAX_SEQ {
        return Err(ReadError::Header(format!(
            "a base sequence number of {base}"
        )));
    }
    Ok(base)
}

/// One record read back: where it starts, its whole length, its payload.
pub(super) struct Framed {
    pub offset: u64,
    pub len: u64,
    pub payload: Vec<u8>,
}

/// Bytes of a segment that are not whole records.
#[derive(Debug, Clone)]
pub(super) struct Damage {
    /// Where they start.
    pub offset: u64,
    /// Where they end: the next record that checks, or the end of the file.
    pub end: u64,
    pub why: String,
    /// Nothing that checks comes after them, and they are what an
    /// unfinished write leaves (a record cut short, zeros, a record that
    /// does not match its checksum), not a record that checks and makes no
    /// sense: they can be cut off.
    pub tail: bool,
}

/// Reads a file sequentially through a window, so that a scan costs a
/// `pread` per megabyte, not per record.
struct Reader<'a> {
    file: &'a dyn SegFile,
    size: u64,
    start: u64,
    buf: Vec<u8>,
}

const WINDOW: u64 = 1 << 20;

impl Reader<'_> {
    /// The `len` bytes at `offset`, which the caller checked are in the
    /// file.
    fn get(&mut self, offset: u64, len: u64) -> std::io::Result<&[u8]> {
        let end = offset + len;
        if offset < self.start || end > self.start + self.buf.len() as u64 {
            let want = len.max(WINDOW).min(self.size - offset);
            self.buf.resize(want as usize, 0);
            self.file.read_at(&mut self.buf, offset)?;
            self.start = offset;
        }
        let from = (offset - self.start) as usize;
        Ok(&self.buf[from..from + len as usize])
    }

    /// The offset of the first byte at or after `from` that is not zero,
    /// if any: a run of zeros is passed a window at a time (eight bytes to
    /// a test), so that a long zero tail, a sparse file's hole, costs a
    /// read per megabyte, not a record test per byte.
    fn next_nonzero(&mut self, from: u64) -> std::io::Result<Option<u64>> {
        let mut at = from;
        while at < self.size {
            let len = WINDOW.min(self.size - at);
            let window = self.get(at, len)?;
            let words = window.chunks_exact(8);
            let rest = words.remainder();
            let zero_words = words.take_while(|w| *w == [0u8; 8]).count();
            let skipped = zero_words * 8;
            let tail = if skipped + rest.len() == window.len() {
                rest
            } else {
                &window[skipped..]
            };
            if let Some(i) = tail.iter().position(|&b| b != 0) {
                return Ok(Some(at + (skipped + i) as u64));
            }
            at += len;
        }
        Ok(None)
    }
}

/// Why the bytes at an offset are not a record.
enum NotRecord {
    /// Cut short, or not matching its checksum: what an unfinished write
    /// leaves.
    Torn(String),
    Io(std::io::Error),
}

/// The record at `offset`, if its frame fits the file and its checksum
/// matches.
fn record_at(r: &mut Reader<'_>, offset: u64) -> Result<Framed, NotRecord> {
    let size = r.size;
    if size - offset < FRAME {
        return Err(NotRecord::Torn("a record's frame is cut short".into()));
    }
    let frame = r.get(offset, FRAME).map_err(NotRecord::Io)?;
    let len = u64::from(u32::from_le_bytes(frame[..4].try_into().expect("4 bytes")));
    let crc = u32::from_le_bytes(frame[4..].try_into().expect("4 bytes"));
    // The length is bounded, and checked against the file, before
    // anything is allocated for it.
    if !(MIN_RECORD..=MAX_RECORD).contains(&len) {
        return Err(NotRecord::Torn(format!("a record of {len} bytes")));
    }
    if len > size - offset - FRAME {
        return Err(NotRecord::Torn(format!(
            "a record of {len} bytes is cut short"
        )));
    }
    let payload = r.get(offset + FRAME, len).map_err(NotRecord::Io)?;
    if crc32fast::hash(payload) != crc {
        return Err(NotRecord::Torn(
            "a record does not match its checksum".into(),
        ));
    }
    Ok(Framed {
        offset,
        len: FRAME + len,
        payload: payload.to_vec(),
    })
}

/// The offset of the first record after `from` that checks (frame,
/// checksum and fields), if any: whether what lies at `from` is the end of
/// the segment or damage with records after it.
fn next_record(r: &mut Reader<'_>, from: u64) -> std::io::Result<Option<u64>> {
    let size = r.size;
    let mut at = from;
    while at + FRAME + MIN_RECORD <= size {
        // Cheap tests first: a length that fits and a known tag.
        let head = r.get(at, FRAME + 1)?;
        if head[..4] == [0u8; 4] {
            // A length of zero: no record starts here, nor anywhere before
            // three bytes ahead of the next byte that is not zero (a
            // record's length is at least `MIN_RECORD`).
            match r.next_nonzero(at + 4)? {
                Some(p) => {
                    at = p.saturating_sub(3).max(at + 1);
                    continue;
                }
                None => break,
            }
        }
        let len = u64::from(u32::from_le_bytes(head[..4].try_into().expect("4 bytes")));
        let tag = head[FRAME as usize];
        if (MIN_RECORD..=MAX_RECORD).contains(&len)
            && len <= size - at - FRAME
            && (tag == TAG_INSTANTS || tag == TAG_EVENTS)
        {
            match record_at(r, at) {
                Ok(framed) if decode(&framed.payload).is_ok() => return Ok(Some(at)),
                Ok(_) | Err(NotRecord::Torn(_)) => {}
                Err(NotRecord::Io(e)) => return Err(e),
            }
        }
        at += 1;
    }
    Ok(None)
}

/// The offset of the first record at or after `from` that checks, if any.
pub(super) fn next_record_in(
    file: &dyn SegFile,
    size: u64,
    from: u64,
) -> std::io::Result<Option<u64>> {
    let mut r = Reader {
        file,
        size,
        start: 0,
        buf: Vec::new(),
    };
    next_record(&mut r, from)
}

/// Reads every record after the header, in order, handing each to `each`
/// (which says why a record that checks makes no sense); returns the
/// damage found: the first only, unless `all`, when the scan goes on at
/// the next record that checks.
pub(super) fn scan(
    file: &dyn SegFile,
    size: u64,
    all: bool,
    each: impl FnMut(Framed) -> Result<(), DecodeError>,
) -> std::io::Result<Vec<Damage>> {
    scan_from(file, size, HEADER, all, each)
}

/// [`scan`] from `from` on.
pub(super) fn scan_from(
    file: &dyn SegFile,
    size: u64,
    from: u64,
    all: bool,
    mut each: impl FnMut(Framed) -> Result<(), DecodeError>,
) -> std::io::Result<Vec<Damage>> {
    let mut r = Reader {
        file,
        size,
        start: 0,
        buf: Vec::new(),
    };
    let mut damage = Vec::new();
    let mut offset = from;
    while offset < size {
        let (why, bad) = match record_at(&mut r, offset) {
            Ok(framed) => {
                let len = framed.len;
                match each(framed) {
                    Ok(()) => {
                        offset += len;
                        continue;
                    }
                    // It checks, so no unfinished write made it.
                    Err(why) => (why.to_string(), true),
                }
            }
            Err(NotRecord::Torn(why)) => (why, false),
            Err(NotRecord::Io(e)) => return Err(e),
        };
        let next = next_record(&mut r, offset + 1)?;
        damage.push(Damage {
            offset,
            end: next.unwrap_or(size),
            why,
            tail: next.is_none() && !bad,
        });
        match next {
            Some(next) if all => offset = next,
            _ => break,
        }
    }
    Ok(damage)
}

/// Reads the record of `len` bytes (frame included) at `offset` of the
/// segment `path`: a read that fails is an I/O error, a record that no
/// longer checks is damage at `offset`.
pub(super) fn read_at(
    file: &dyn SegFile,
    path: &Path,
    offset: u64,
    len: u64,
) -> Result<Vec<u8>, StoreErrorKind> {
    let damaged = |why: String| StoreErrorKind::JournalDamaged {
        segment: path.to_owned(),
        offset,
        why,
    };
    if !(FRAME..=FRAME + MAX_RECORD).contains(&len) {
        return Err(damaged(format!("a record at {offset} of {len} bytes")));
    }
    let mut buf = vec![0u8; len as usize];
    file.read_at(&mut buf, offset)
        .map_err(|e| StoreErrorKind::io("read", path, &e))?;
    let crc = u32::from_le_bytes(buf[4..8].try_into().expect("4 bytes"));
    if crc32fast::hash(&buf[FRAME as usize..]) != crc {
        return Err(damaged(format!(
            "the record at {offset} no longer matches its checksum"
        )));
    }
    buf.drain(..FRAME as usize);
    Ok(buf)
}

/// Frames `payload` (its length and checksum are written in front of it):
/// `out` holds the frame's room, then the payload.
pub(super) fn seal(out: &mut [u8]) {
    let (frame, payload) = out.split_at_mut(FRAME as usize);
    let len = u32::try_from(payload.len()).expect("records are bounded far below 4 GiB");
    frame[..4].copy_from_slice(&len.to_le_bytes());
    frame[4..].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
}

/// Starts a record in `out`: the frame's room and the tag.
pub(super) fn begin(out: &mut Vec<u8>, tag: u8) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0u8; FRAME as usize]);
    out.push(tag);
    start
}

pub(super) fn instants_record(
    out: &mut Vec<u8>,
    property: &PropertyPath,
    first_seq: u64,
    count: u32,
    data: &[u8],
) {
    let start = begin(out, TAG_INSTANTS);
    out.extend_from_slice(&first_seq.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    put_bytes(property.collection.as_bytes(), out);
    put_bytes(property.feature.as_bytes(), out);
    put_bytes(property.property.as_bytes(), out);
    out.extend_from_slice(data);
    seal(&mut out[start..]);
}

/// The fields of an events record, as [`events_record`] writes them.
pub(super) struct EventsHead<'a> {
    pub query: &'a str,
    pub first_id: u64,
    pub count: u32,
    pub bytes: u64,
    pub checkpoint: Option<&'a Checkpoint>,
}

pub(super) fn events_record(out: &mut Vec<u8>, head: &EventsHead<'_>, data: &[u8]) {
    let start = begin(out, TAG_EVENTS);
    put_bytes(head.query.as_bytes(), out);
    out.extend_from_slice(&head.first_id.to_le_bytes());
    out.extend_from_slice(&head.count.to_le_bytes());
    out.extend_from_slice(&head.bytes.to_le_bytes());
    match head.checkpoint {
        None => out.push(0),
        Some(cp) => {
            // Flag 2 adds the skipped total: a checkpoint with none is
            // written as before, so that an older build still reads it.
            out.push(if cp.skipped > 0 { 2 } else { 1 });
            out.extend_from_slice(&cp.after_seq.to_le_bytes());
            out.extend_from_slice(&cp.last_event_id.to_le_bytes());
            match &cp.state {
                None => out.push(0),
                Some(state) => {
                    out.push(1);
                    put_bytes(state, out);
                }
            }
            if cp.skipped > 0 {
                out.extend_from_slice(&cp.skipped.to_le_bytes());
            }
        }
    }
    out.extend_from_slice(data);
    seal(&mut out[start..]);
}

/// A record's payload, decoded; the instants or events stay encoded.
pub(super) enum Record<'a> {
    Instants {
        property: PropertyPath,
        first_seq: u64,
        count: u32,
        data: &'a [u8],
    },
    Events {
        query: String,
        first_id: u64,
        count: u32,
        bytes: u64,
        checkpoint: Option<Checkpoint>,
        data: &'a [u8],
    },
}

pub(super) fn decode(payload: &[u8]) -> Result<Record<'_>, DecodeError> {
    let mut data = payload;
    let tag = take(&mut data, 1)?[0];
    match tag {
        TAG_INSTANTS => {
            let first_seq = u64_of(&mut data)?;
            let count = u32::from_le_bytes(take_array(&mut data)?);
            let property = PropertyPath {
                collection: take_str(&mut data)?,
                feature: take_str(&mut data)?,
                property: take_str(&mut data)?,
            };
            // The count and numbers are checked against what the record
            // holds: nothing read back is sized by a number alone.
            if count == 0 || first_seq == 0 || first_seq >= MAX_SEQ - u64::from(count) {
                return Err(DecodeError::InstantsRange { count, first_seq });
            }
            let held = batch::count_instants(data)?;
            if held != u64::from(count) {
                return Err(DecodeError::InstantsCount { said: count, held });
            }
            Ok(Record::Instants {
                property,
                first_seq,
                count,
                data,
            })
        }
        TAG_EVENTS => {
            let query = take_str(&mut data)?;
            let first_id = u64_of(&mut data)?;
            let count = u32::from_le_bytes(take_array(&mut data)?);
            let bytes = u64_of(&mut data)?;
            let checkpoint = match take(&mut data, 1)?[0] {
                0 => None,
                flag @ (1 | 2) => Some(Checkpoint {
                    after_seq: u64_of(&mut data)?,
                    last_event_id: u64_of(&mut data)?,
                    state: match take(&mut data, 1)?[0] {
                        0 => None,
                        1 => Some(take_bytes(&mut data)?.to_vec()),
                        tag => {
                            return Err(DecodeError::UnknownTag {
                                what: "state flag",
                                tag,
                            });
                        }
                    },
                    skipped: if flag == 2 { u64_of(&mut data)? } else { 0 },
                }),
                tag => {
                    return Err(DecodeError::UnknownTag {
                        what: "checkpoint flag",
                        tag,
                    });
                }
            };
            if first_id >= MAX_SEQ - u64::from(count) || (count > 0 && first_id == 0) {
                return Err(DecodeError::EventsRange { count, first_id });
            }
            if let Some(cp) = &checkpoint
                && (cp.after_seq >= MAX_SEQ || cp.last_event_id >= MAX_SEQ)
            {
                return Err(DecodeError::CheckpointRange {
                    after_seq: cp.after_seq,
                    last_event_id: cp.last_event_id,
                });
            }
            let (held, held_bytes) = batch::count_events(data)?;
            if held != u64::from(count) || held_bytes != bytes {
                return Err(DecodeError::EventsCount {
                    said: count,
                    said_bytes: bytes,
                    held,
                    held_bytes,
                });
            }
            Ok(Record::Events {
                query,
                first_id,
                count,
                bytes,
                checkpoint,
                data,
            })
        }
        tag => Err(DecodeError::UnknownTag {
            what: "record tag",
            tag,
        }),
    }
}

fn u64_of(data: &mut &[u8]) -> Result<u64, DecodeError> {
    Ok(u64::from_le_bytes(take_array(data)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mfstream_model::Instant;
    use proptest::prelude::*;

    fn speed() -> PropertyPath {
        PropertyPath {
            collection: "ships".into(),
            feature: "a".into(),
            property: "speed".into(),
        }
    }

    /// Two instants, framed.
    fn instants(first_seq: u64) -> Vec<u8> {
        let mut data = Vec::new();
        batch::encode(
            &[Instant::number("t1", 1.5), Instant::number("t2", -2.0)],
            &mut data,
        );
        let mut out = Vec::new();
        instants_record(&mut out, &speed(), first_seq, 2, &data);
        out
    }

    fn events_with(cp: Option<&Checkpoint>) -> Vec<u8> {
        let mut batch = super::super::super::EventBatch::new(2);
        batch.push(mfstream_model::EventKind::Instant, b"{\"value\":1}");
        batch.push(mfstream_model::EventKind::Window, b"{}");
        let head = EventsHead {
            query: "q",
            first_id: 2,
            count: 2,
            bytes: batch.bytes() as u64,
            checkpoint: cp,
        };
        let mut out = Vec::new();
        events_record(&mut out, &head, batch.data());
        out
    }

    fn scan_all(bytes: &[u8]) -> (Vec<Vec<u8>>, Vec<Damage>) {
        let file = MemFile(bytes.to_vec());
        let mut seen = Vec::new();
        let damage = scan(&file, bytes.len() as u64, true, |r| {
            decode(&r.payload)?;
            seen.push(r.payload);
            Ok(())
        })
        .unwrap();
        (seen, damage)
    }

    /// A file in memory.
    #[derive(Debug)]
    struct MemFile(Vec<u8>);

    impl SegFile for MemFile {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
            let start = offset as usize;
            let src = self
                .0
                .get(start..start + buf.len())
                .ok_or(std::io::ErrorKind::UnexpectedEof)?;
            buf.copy_from_slice(src);
            Ok(())
        }
        fn write_at(&self, _: &[u8], _: u64) -> std::io::Result<()> {
            Err(std::io::ErrorKind::Unsupported.into())
        }
        fn set_len(&self, _: u64) -> std::io::Result<()> {
            Err(std::io::ErrorKind::Unsupported.into())
        }
        fn len(&self) -> std::io::Result<u64> {
            Ok(self.0.len() as u64)
        }
        fn sync(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn unlinked(&self) -> std::io::Result<bool> {
            Ok(false)
        }
    }

    #[test]
    fn a_record_after_a_run_of_zeros_of_any_length_and_alignment_is_still_found() {
        // Runs of zeros are passed eight bytes at a time: a record that
        // follows one, at any alignment and across a read window, must
        // still be found (damage with a record after it is refused, not
        // cut off as a tail).
        for zeros in [
            1usize,
            3,
            4,
            7,
            8,
            9,
            15,
            4093,
            (1 << 20) - 5,
            (1 << 20) + 3,
        ] {
            let mut bytes = header(5).to_vec();
            bytes.extend(instants(7));
            let first_end = bytes.len();
            bytes.extend(std::iter::repeat_n(0u8, zeros));
            let next = bytes.len();
            bytes.extend(instants(9));
            let (seen, damage) = scan_all(&bytes);
            assert_eq!(seen.len(), 2, "{zeros} zeros");
            assert_eq!(damage.len(), 1, "{zeros} zeros");
            assert_eq!(damage[0].offset, first_end as u64, "{zeros} zeros");
            assert_eq!(damage[0].end, next as u64, "{zeros} zeros");
            assert!(!damage[0].tail, "{zeros} zeros");
            // And with nothing after the zeros: a tail.
            bytes.truncate(next);
            let (seen, damage) = scan_all(&bytes);
            assert_eq!(seen.len(), 1, "{zeros} zeros");
            assert!(
                damage[0].tail && damage[0].end == next as u64,
                "{zeros} zeros"
            );
        }
    }

    #[test]
    fn records_round_trip_and_damage_is_told_from_a_torn_end() {
        let cp = Checkpoint {
            after_seq: 9,
            last_event_id: 3,
            state: Some(vec![1, 2]),
            skipped: 0,
        };
        let mut bytes = header(5).to_vec();
        bytes.extend(instants(7));
        let second = bytes.len();
        bytes.extend(events_with(Some(&cp)));
        let file = MemFile(bytes.clone());
        assert_eq!(read_header(&file, bytes.len() as u64).unwrap(), 5);
        let (seen, damage) = scan_all(&bytes);
        assert!(damage.is_empty(), "{damage:?}");
        assert!(matches!(
            decode(&seen[0]).unwrap(),
            Record::Instants { first_seq: 7, count: 2, ref property, .. } if *property == speed()
        ));
        match decode(&seen[1]).unwrap() {
            Record::Events {
                query,
                first_id,
                checkpoint,
                ..
            } => {
                assert_eq!((query.as_str(), first_id), ("q", 2));
                assert_eq!(checkpoint, Some(cp.clone()));
            }
            Record::Instants { .. } => panic!("an events record"),
        }
        // A checkpoint with a skipped total (flag 2) reads back with it;
        // one without is written as an older build wrote it (flag 1).
        for skipped in [0, 7] {
            let cp = Checkpoint {
                skipped,
                ..cp.clone()
            };
            let record = events_with(Some(&cp));
            let payload = &record[FRAME as usize..];
            // tag, query "q", first_id, count, bytes
            let flag = 1 + 4 + 1 + 8 + 4 + 8;
            assert_eq!(payload[flag], if skipped == 0 { 1 } else { 2 });
            match decode(payload).unwrap() {
                Record::Events { checkpoint, .. } => assert_eq!(checkpoint, Some(cp)),
                Record::Instants { .. } => panic!("an events record"),
            }
        }
        // A flipped bit in the last record, zeros after it: a torn end.
        let mut torn = bytes.clone();
        let last = torn.len() - 1;
        torn[last] ^= 1;
        torn.extend([0u8; 100]);
        let (seen, damage) = scan_all(&torn);
        assert_eq!(seen.len(), 1);
        assert_eq!(damage.len(), 1);
        assert!(
            damage[0].tail && damage[0].offset == second as u64,
            "{damage:?}"
        );
        // A flipped bit in the first record: the second still checks, so
        // this is damage, not an end.
        let mut middle = bytes.clone();
        middle[HEADER as usize + 12] ^= 1;
        let (seen, damage) = scan_all(&middle);
        assert_eq!(seen.len(), 1, "the record after the damage is read");
        assert!(!damage[0].tail && damage[0].offset == HEADER, "{damage:?}");
        assert_eq!(damage[0].end, second as u64);
    }

    #[test]
    fn a_count_that_does_not_match_the_record_is_refused_before_anything_is_sized_by_it() {
        let data = {
            let mut data = Vec::new();
            batch::encode(&[Instant::number("t", 1.0)], &mut data);
            data
        };
        for count in [0, 2, u32::MAX] {
            let mut out = Vec::new();
            instants_record(&mut out, &speed(), 1, count, &data);
            let err = decode(&out[FRAME as usize..]).err().expect("refused");
            assert!(
                matches!(
                    err,
                    DecodeError::InstantsRange { .. } | DecodeError::InstantsCount { .. }
                ),
                "{err}"
            );
            assert!(err.to_string().contains("instants"), "{err}");
        }
        let mut out = Vec::new();
        instants_record(&mut out, &speed(), MAX_SEQ - 1, 1, &data);
        assert!(decode(&out[FRAME as usize..]).is_err());
        let head = EventsHead {
            query: "q",
            first_id: 1,
            count: u32::MAX,
            bytes: 0,
            checkpoint: None,
        };
        let mut out = Vec::new();
        events_record(&mut out, &head, &[]);
        assert!(decode(&out[FRAME as usize..]).is_err());
    }

    #[test]
    fn only_segment_names_are_segments() {
        assert_eq!(number("00000000000000000042.seg"), Some(42));
        assert_eq!(number("42.seg"), None);
        assert_eq!(number("00000000000000000042.tmp"), None);
        assert_eq!(number("00000000000000000042.seg.24.damaged"), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Random bytes never panic the decoder, and whatever it accepts
        /// holds the instants or events it says.
        #[test]
        fn random_payloads_never_panic(payload in proptest::collection::vec(any::<u8>(), 0..256)) {
            if let Ok(record) = decode(&payload) {
                match record {
                    Record::Instants { count, data, .. } => {
                        let mut n = 0u32;
                        batch::decode(data, |_| n += 1).unwrap();
                        prop_assert_eq!(n, count);
                    }
                    Record::Events { count, data, first_id, .. } => {
                        let mut n = 0u32;
                        batch::decode_events(data, first_id, |_| n += 1).unwrap();
                        prop_assert_eq!(n, count);
                    }
                }
            }
        }

        /// Valid records with bytes changed, cut or added never panic the
        /// decoder nor the scan, and a scan never reads past its file.
        #[test]
        fn mutated_records_never_panic(
            edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
            cut in any::<usize>(),
            extra in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut bytes = header(1).to_vec();
            bytes.extend(instants(1));
            bytes.extend(events_with(None));
            bytes.extend(instants(3));
            for (at, value) in edits {
                let at = at % bytes.len();
                bytes[at] = value;
            }
            bytes.truncate(HEADER as usize + cut % (bytes.len() - HEADER as usize + 1));
            bytes.extend(extra);
            let file = MemFile(bytes.clone());
            let size = bytes.len() as u64;
            let _ = read_header(&file, size);
            let damage = scan(&file, size, true, |r| {
                assert!(r.offset + r.len <= size);
                decode(&r.payload).map(drop)
            }).unwrap();
            for d in damage {
                prop_assert!(d.offset < d.end && d.end <= size);
            }
            let payload = &bytes[(HEADER + FRAME).min(size) as usize..];
            let _ = decode(payload);
        }
    }
}

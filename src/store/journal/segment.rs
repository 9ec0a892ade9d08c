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
//!   the state: `0`, or `1` and its bytes), then the events, encoded as the
//!   batch module says.
//!
//! A record's payload carries no position, so a record copied into a newer
//! segment (compaction) is the same record: reading it twice is harmless,
//! and the reader keeps one.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::super::batch::{self, take, take_bytes, take_str};
use super::super::record::{Checkpoint, PropertyPath};

const MAGIC: &[u8; 8] = b"MFSJRNL\0";
/// The format this build reads and writes.
pub(crate) const VERSION: u32 = 1;
/// The bytes of a segment's header.
pub(crate) const HEADER: u64 = 24;
/// The bytes of a record's frame before its payload.
pub(crate) const FRAME: u64 = 8;

pub(crate) const TAG_INSTANTS: u8 = 1;
pub(crate) const TAG_EVENTS: u8 = 2;

/// A segment's file name: its number, zero-padded so that names sort as
/// numbers do.
pub(crate) fn path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:020}.seg"))
}

/// The number of a segment file name, or `None` for another file.
pub(crate) fn number(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".seg")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

pub(crate) fn header(base_seq: u64) -> [u8; HEADER as usize] {
    let mut h = [0u8; HEADER as usize];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..20].copy_from_slice(&base_seq.to_le_bytes());
    let crc = crc32fast::hash(&h[..20]);
    h[20..24].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Why a segment could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    Io(std::io::Error),
    /// Not a segment, or a damaged header.
    Header(String),
    /// Another format version.
    Version(u32),
}

/// Reads a segment's header: its `base_seq`.
pub(crate) fn read_header(file: &mut File) -> Result<u64, ReadError> {
    let mut h = [0u8; HEADER as usize];
    file.read_exact(&mut h).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => ReadError::Header("shorter than its header".into()),
        _ => ReadError::Io(e),
    })?;
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
    Ok(u64::from_le_bytes(h[12..20].try_into().expect("8 bytes")))
}

/// One record read back: where it starts, its whole length, its payload.
pub(crate) struct Framed {
    pub(crate) offset: u64,
    pub(crate) len: u64,
    pub(crate) payload: Vec<u8>,
}

/// How a scan of a segment ended.
pub(crate) enum End {
    /// At the end of the file.
    Clean,
    /// At `offset`, where a record is cut short or does not match its
    /// checksum: a write the process did not finish, or damage.
    Torn { offset: u64, why: String },
    /// At `offset`, a whole record that makes no sense: damage, never an
    /// unfinished write.
    Bad { offset: u64, why: String },
}

/// Reads every record after the header, in order, until the end or the
/// first record that is cut short or damaged.
pub(crate) fn scan(
    file: &mut File,
    mut each: impl FnMut(Framed) -> Result<(), String>,
) -> Result<End, ReadError> {
    let size = file.metadata().map_err(ReadError::Io)?.len();
    file.seek(SeekFrom::Start(HEADER)).map_err(ReadError::Io)?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let mut offset = HEADER;
    loop {
        if offset == size {
            return Ok(End::Clean);
        }
        let torn = |why: String| Ok(End::Torn { offset, why });
        if size - offset < FRAME {
            return torn("a record's frame is cut short".into());
        }
        let mut frame = [0u8; FRAME as usize];
        reader.read_exact(&mut frame).map_err(ReadError::Io)?;
        let len = u64::from(u32::from_le_bytes(frame[..4].try_into().expect("4 bytes")));
        let crc = u32::from_le_bytes(frame[4..].try_into().expect("4 bytes"));
        // The length is checked against the file before anything is
        // allocated for it.
        if len > size - offset - FRAME {
            return torn(format!("a record of {len} bytes is cut short"));
        }
        let mut payload = vec![0u8; len as usize];
        reader.read_exact(&mut payload).map_err(ReadError::Io)?;
        if crc32fast::hash(&payload) != crc {
            // An unfinished write is the last thing in the file; a record
            // with whole records after it was damaged.
            if offset + FRAME + len == size {
                return torn("the last record does not match its checksum".into());
            }
            return Ok(End::Bad {
                offset,
                why: "a record does not match its checksum".into(),
            });
        }
        let record = Framed {
            offset,
            len: FRAME + len,
            payload,
        };
        offset += FRAME + len;
        if let Err(why) = each(record) {
            return Ok(End::Bad {
                offset: offset - FRAME - len,
                why,
            });
        }
    }
}

/// Reads the record of `len` bytes (frame included) at `offset`.
pub(crate) fn read_at(file: &File, offset: u64, len: u64) -> Result<Vec<u8>, String> {
    let mut buf = vec![0u8; len as usize];
    file.read_exact_at(&mut buf, offset)
        .map_err(|e| format!("cannot read a record at {offset}: {e}"))?;
    if buf.len() < FRAME as usize {
        return Err(format!("a record at {offset} is cut short"));
    }
    let crc = u32::from_le_bytes(buf[4..8].try_into().expect("4 bytes"));
    if crc32fast::hash(&buf[FRAME as usize..]) != crc {
        return Err(format!(
            "the record at {offset} no longer matches its checksum"
        ));
    }
    buf.drain(..FRAME as usize);
    Ok(buf)
}

/// Frames `payload` (its length and checksum are written in front of it):
/// `out` holds the frame's room, then the payload.
pub(crate) fn seal(out: &mut [u8]) {
    let (frame, payload) = out.split_at_mut(FRAME as usize);
    let len = u32::try_from(payload.len()).expect("records are bounded far below 4 GiB");
    frame[..4].copy_from_slice(&len.to_le_bytes());
    frame[4..].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
}

/// Starts a record in `out`: the frame's room and the tag.
pub(crate) fn begin(out: &mut Vec<u8>, tag: u8) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0u8; FRAME as usize]);
    out.push(tag);
    start
}

pub(crate) fn instants_record(
    out: &mut Vec<u8>,
    property: &PropertyPath,
    first_seq: u64,
    count: u32,
    data: &[u8],
) {
    let start = begin(out, TAG_INSTANTS);
    out.extend_from_slice(&first_seq.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    batch::put_bytes(property.collection.as_bytes(), out);
    batch::put_bytes(property.feature.as_bytes(), out);
    batch::put_bytes(property.property.as_bytes(), out);
    out.extend_from_slice(data);
    seal(&mut out[start..]);
}

/// The fields of an events record, as [`events_record`] writes them.
pub(crate) struct EventsHead<'a> {
    pub(crate) query: &'a str,
    pub(crate) first_id: u64,
    pub(crate) count: u32,
    pub(crate) bytes: u64,
    pub(crate) checkpoint: Option<&'a Checkpoint>,
}

pub(crate) fn events_record(out: &mut Vec<u8>, head: &EventsHead<'_>, data: &[u8]) {
    let start = begin(out, TAG_EVENTS);
    batch::put_bytes(head.query.as_bytes(), out);
    out.extend_from_slice(&head.first_id.to_le_bytes());
    out.extend_from_slice(&head.count.to_le_bytes());
    out.extend_from_slice(&head.bytes.to_le_bytes());
    match head.checkpoint {
        None => out.push(0),
        Some(cp) => {
            out.push(1);
            out.extend_from_slice(&cp.after_seq.to_le_bytes());
            out.extend_from_slice(&cp.last_event_id.to_le_bytes());
            match &cp.state {
                None => out.push(0),
                Some(state) => {
                    out.push(1);
                    batch::put_bytes(state, out);
                }
            }
        }
    }
    out.extend_from_slice(data);
    seal(&mut out[start..]);
}

/// A record's payload, decoded; the instants or events stay encoded.
pub(crate) enum Record<'a> {
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

pub(crate) fn decode(payload: &[u8]) -> Result<Record<'_>, String> {
    let mut data = payload;
    let tag = take(&mut data, 1)?[0];
    match tag {
        TAG_INSTANTS => {
            let first_seq = u64_of(&mut data)?;
            let count = u32::from_le_bytes(take(&mut data, 4)?.try_into().expect("4 bytes"));
            let property = PropertyPath {
                collection: take_str(&mut data)?,
                feature: take_str(&mut data)?,
                property: take_str(&mut data)?,
            };
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
            let count = u32::from_le_bytes(take(&mut data, 4)?.try_into().expect("4 bytes"));
            let bytes = u64_of(&mut data)?;
            let checkpoint = match take(&mut data, 1)?[0] {
                0 => None,
                1 => Some(Checkpoint {
                    after_seq: u64_of(&mut data)?,
                    last_event_id: u64_of(&mut data)?,
                    state: match take(&mut data, 1)?[0] {
                        0 => None,
                        1 => Some(take_bytes(&mut data)?.to_vec()),
                        other => return Err(format!("unknown state flag {other}")),
                    },
                }),
                other => return Err(format!("unknown checkpoint flag {other}")),
            };
            Ok(Record::Events {
                query,
                first_id,
                count,
                bytes,
                checkpoint,
                data,
            })
        }
        other => Err(format!("unknown record tag {other}")),
    }
}

fn u64_of(data: &mut &[u8]) -> Result<u64, String> {
    Ok(u64::from_le_bytes(
        take(data, 8)?.try_into().expect("8 bytes"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_a_flipped_bit_is_caught() {
        let speed = PropertyPath {
            collection: "ships".into(),
            feature: "a".into(),
            property: "speed".into(),
        };
        let mut out = Vec::new();
        instants_record(&mut out, &speed, 7, 1, b"abc");
        let cp = Checkpoint {
            after_seq: 9,
            last_event_id: 3,
            state: Some(vec![1, 2]),
        };
        let head = EventsHead {
            query: "q",
            first_id: 2,
            count: 2,
            bytes: 10,
            checkpoint: Some(&cp),
        };
        events_record(&mut out, &head, b"xyz");
        let dir = std::env::temp_dir().join(format!("mfstream-seg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = path(&dir, 1);
        let mut bytes = header(5).to_vec();
        bytes.extend_from_slice(&out);
        std::fs::write(&file, &bytes).unwrap();
        let mut f = File::open(&file).unwrap();
        assert_eq!(read_header(&mut f).unwrap(), 5);
        let mut seen = Vec::new();
        let end = scan(&mut f, |r| {
            seen.push(r.payload);
            Ok(())
        })
        .unwrap();
        assert!(matches!(end, End::Clean));
        assert!(matches!(
            decode(&seen[0]).unwrap(),
            Record::Instants { first_seq: 7, count: 1, data: b"abc", ref property } if *property == speed
        ));
        match decode(&seen[1]).unwrap() {
            Record::Events {
                query,
                first_id,
                checkpoint,
                data,
                ..
            } => {
                assert_eq!((query.as_str(), first_id, data), ("q", 2, &b"xyz"[..]));
                assert_eq!(checkpoint, Some(cp));
            }
            Record::Instants { .. } => panic!("an events record"),
        }
        // A flipped bit in the second record: the scan stops before it.
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&file, &bytes).unwrap();
        let mut f = File::open(&file).unwrap();
        read_header(&mut f).unwrap();
        let mut n = 0;
        let end = scan(&mut f, |_| {
            n += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(n, 1);
        let second = HEADER + (FRAME + 1 + 8 + 4 + 3 * 4 + 5 + 1 + 5 + 3);
        assert!(matches!(end, End::Torn { offset, .. } if offset == second));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_segment_names_are_segments() {
        assert_eq!(number("00000000000000000042.seg"), Some(42));
        assert_eq!(number("42.seg"), None);
        assert_eq!(number("00000000000000000042.tmp"), None);
    }
}

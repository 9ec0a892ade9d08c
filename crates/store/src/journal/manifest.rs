//! The journal's manifest: which segments should exist.
//!
//! Compaction deletes segments from the middle of the numbering, so a gap
//! in the numbers says nothing; a segment deleted by hand (its acknowledged
//! instants and results with it) would be skipped at the next open without
//! a word. The manifest (`journal/MANIFEST`) lists the segment numbers the
//! journal keeps, and an open refuses a listed segment that is missing
//! ([`StoreErrorKind::SegmentMissing`]).
//!
//! ```text
//! "MFSMANI\0"  version: u32  count: u32  count × number: u64  crc32(all before): u32
//! ```
//!
//! Every integer is little endian. It is replaced whole: written to
//! `MANIFEST.tmp`, synced, renamed over `MANIFEST`, and the directory synced.
//! A segment is listed after it is created and unlisted before it is
//! deleted, so that a crash in between leaves a segment present and not
//! listed, which is read as any other (a record read twice is kept once),
//! never one listed and absent. A directory without a manifest (written by
//! an mfstream before it) is read as it is, and the manifest is made from
//! what is there.

use std::io;
use std::path::{Path, PathBuf};

use super::super::error::StoreErrorKind;
use super::vfs::Vfs;

/// The manifest's file name in the journal directory.
pub(super) const FILE: &str = "MANIFEST";
/// Where the next manifest is written before it is renamed into place.
const TMP: &str = "MANIFEST.tmp";
const MAGIC: &[u8; 8] = b"MFSMANI\0";
const VERSION: u32 = 1;
/// The most segments listed: at the default 16 MiB a segment, 16 TiB of
/// journal. A count above it is damage, and nothing is allocated for it.
const MAX_SEGMENTS: u64 = 1 << 20;

pub(super) fn path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

fn encode(numbers: &[u64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + numbers.len() * 8 + 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    let count = u32::try_from(numbers.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&count.to_le_bytes());
    for n in numbers.iter().take(count as usize) {
        out.extend_from_slice(&n.to_le_bytes());
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Why bytes are no manifest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum Damage {
    /// Fewer bytes than the header.
    #[error("{0} bytes, shorter than its header")]
    Short(usize),
    /// Another file's magic.
    #[error("not a journal manifest")]
    Magic,
    /// A format version this build does not read.
    #[error("format version {0}, but this mfstream reads version {VERSION}")]
    Version(u32),
    /// A length that does not fit the count of segments.
    #[error("{len} bytes for {count} segments (cut short, or not written whole)")]
    Length { len: usize, count: u64 },
    /// A checksum that does not match.
    #[error("its checksum does not match")]
    Checksum,
}

/// The numbers a manifest lists, or why its bytes are no manifest.
fn decode(bytes: &[u8]) -> Result<Vec<u64>, Damage> {
    if bytes.len() < 20 {
        return Err(Damage::Short(bytes.len()));
    }
    if &bytes[..8] != MAGIC {
        return Err(Damage::Magic);
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(Damage::Version(version));
    }
    let count = u64::from(u32::from_le_bytes(
        bytes[12..16].try_into().expect("4 bytes"),
    ));
    if count > MAX_SEGMENTS || bytes.len() as u64 != 16 + count * 8 + 4 {
        return Err(Damage::Length {
            len: bytes.len(),
            count,
        });
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    if crc32fast::hash(body).to_le_bytes() != crc {
        return Err(Damage::Checksum);
    }
    Ok(body[16..]
        .chunks_exact(8)
        .map(|n| u64::from_le_bytes(n.try_into().expect("8 bytes")))
        .collect())
}

/// The segment numbers `dir`'s manifest lists; `None` when it has none (a
/// journal written by an mfstream before manifests, or a new one).
pub(super) fn read(vfs: &dyn Vfs, dir: &Path) -> Result<Option<Vec<u64>>, StoreErrorKind> {
    let manifest = path(dir);
    let file = match vfs.open(&manifest, false) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreErrorKind::io("open", &manifest, &e)),
    };
    let len = file
        .len()
        .map_err(|e| StoreErrorKind::io("read", &manifest, &e))?;
    let damaged = |why: String| StoreErrorKind::ManifestDamaged {
        manifest: manifest.clone(),
        why,
    };
    if len > 16 + MAX_SEGMENTS * 8 + 4 {
        return Err(damaged(format!("{len} bytes, more than any manifest")));
    }
    let mut bytes = vec![0u8; len as usize];
    file.read_at(&mut bytes, 0)
        .map_err(|e| StoreErrorKind::io("read", &manifest, &e))?;
    decode(&bytes)
        .map(Some)
        .map_err(|damage| damaged(damage.to_string()))
}

/// Replaces `dir`'s manifest with one listing `numbers`: written aside,
/// synced, renamed into place, the directory synced.
pub(super) fn write(vfs: &dyn Vfs, dir: &Path, numbers: &[u64]) -> io::Result<()> {
    let tmp = dir.join(TMP);
    match vfs.remove(&tmp) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let file = vfs.open(&tmp, true)?;
    file.write_at(&encode(numbers), 0)?;
    file.sync()?;
    vfs.rename(&tmp, &path(dir))?;
    vfs.sync_dir(dir)
}

/// Refuses a segment the manifest lists that is not in `present`.
pub(super) fn check(dir: &Path, listed: &[u64], present: &[u64]) -> Result<(), StoreErrorKind> {
    match listed.iter().find(|n| present.binary_search(n).is_err()) {
        Some(&missing) => Err(StoreErrorKind::SegmentMissing {
            segment: super::segment::path(dir, missing),
            manifest: path(dir),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_round_trips_and_damage_is_named() {
        let bytes = encode(&[1, 4, 9]);
        assert_eq!(decode(&bytes).unwrap(), [1, 4, 9]);
        assert_eq!(decode(&encode(&[])).unwrap(), Vec::<u64>::new());
        let cut = decode(&bytes[..bytes.len() - 3]).unwrap_err().to_string();
        assert!(cut.contains("cut short"), "{cut}");
        let mut flipped = bytes.clone();
        flipped[17] ^= 1;
        assert!(
            decode(&flipped)
                .unwrap_err()
                .to_string()
                .contains("checksum")
        );
        assert!(
            decode(b"garbage that is long enough")
                .unwrap_err()
                .to_string()
                .contains("not a journal manifest")
        );
        // A count far past the bytes allocates nothing.
        let mut huge = bytes.clone();
        huge[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&huge).unwrap_err().to_string().contains("segments"));
    }

    #[test]
    fn a_listed_segment_that_is_absent_is_named_and_an_unlisted_one_is_not() {
        let dir = Path::new("/j");
        assert!(check(dir, &[1, 3], &[1, 2, 3, 4]).is_ok());
        let e = check(dir, &[1, 2, 3], &[1, 3]).unwrap_err();
        assert!(
            matches!(&e, StoreErrorKind::SegmentMissing { segment, .. }
                if *segment == super::super::segment::path(dir, 2)),
            "{e}"
        );
    }
}

//! `mfstream state check DIR` and `mfstream state repair DIR`: what an
//! operator runs when the server refuses a damaged journal.
//!
//! `check` reads every segment, changing nothing, and reports what it
//! found: the records that check, and every range of bytes that does not
//! (whether the server would cut it off at start, as the remains of an
//! unfinished write, or refuses it). `repair` keeps every record that
//! checks, in order, and moves each damaged range aside into a file next
//! to its segment (`<segment>.<offset>.damaged`), synced before the
//! segment is replaced, so that nothing is lost that an operator may want
//! to look at. It takes the directory's lock: never under a running server.

use std::fmt;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::super::error::{StoreError, StoreErrorKind};
use super::super::schema::JOURNAL_DIR;
use super::vfs::{OsFs, SegFile};
use super::{io, manifest, segment};

/// A range of a segment that does not check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamageReport {
    /// Where it starts.
    pub offset: u64,
    /// Its bytes.
    pub bytes: u64,
    /// What is wrong there.
    pub why: String,
    /// Nothing after it checks and it is what an unfinished write leaves:
    /// the server cuts it off at start. Otherwise the server refuses to
    /// start until it is repaired.
    pub tail: bool,
    /// Where `repair` moved it.
    pub moved_to: Option<PathBuf>,
}

/// One segment, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentReport {
    /// The file.
    pub path: PathBuf,
    /// Its bytes.
    pub bytes: u64,
    /// The records that check.
    pub records: u64,
    /// Its header is not a segment's (an unfinished segment when no record
    /// in it checks).
    pub bad_header: Option<String>,
    /// Another format version.
    pub version: Option<u32>,
    /// The ranges that do not check.
    pub damage: Vec<DamageReport>,
}

/// What `check` or `repair` found (and did).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateReport {
    /// The journal's directory.
    pub journal: PathBuf,
    /// Every segment, oldest first.
    pub segments: Vec<SegmentReport>,
    /// The segments the journal's manifest lists that are not there: the
    /// server refuses to start until they are restored, or the manifest
    /// removed (accepting their loss). `repair` cannot bring them back.
    pub missing: Vec<PathBuf>,
    /// Why the journal's manifest does not check, when it does not.
    pub manifest_damaged: Option<String>,
}

impl StateReport {
    /// Whether anything does not check.
    pub fn damaged(&self) -> bool {
        self.lost()
            || self
                .segments
                .iter()
                .any(|s| !s.damage.is_empty() || s.bad_header.is_some() || s.version.is_some())
    }

    /// Whether a segment the manifest lists is missing, or the manifest
    /// does not check: what `repair` cannot mend.
    pub fn lost(&self) -> bool {
        !self.missing.is_empty() || self.manifest_damaged.is_some()
    }

    /// Whether the server refuses to start on it as it is.
    pub fn refused(&self) -> bool {
        let last = self.segments.len().saturating_sub(1);
        self.lost()
            || self.segments.iter().enumerate().any(|(i, s)| {
                s.version.is_some()
                    || (s.bad_header.is_some() && (s.records > 0 || i != last))
                    || s.damage.iter().any(|d| !d.tail || i != last)
            })
    }

    /// The records that check, in every segment.
    pub fn records(&self) -> u64 {
        self.segments.iter().map(|s| s.records).sum()
    }

    /// The bytes that do not.
    pub fn damaged_bytes(&self) -> u64 {
        self.segments
            .iter()
            .flat_map(|s| &s.damage)
            .map(|d| d.bytes)
            .sum()
    }
}

impl fmt::Display for StateReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let last = self.segments.len().saturating_sub(1);
        for (i, s) in self.segments.iter().enumerate() {
            write!(
                f,
                "{}: {} bytes, {} records that check",
                s.path.display(),
                s.bytes,
                s.records
            )?;
            if let Some(v) = s.version {
                write!(
                    f,
                    ", format version {v} (this mfstream reads {})",
                    segment::VERSION
                )?;
            }
            if let Some(why) = &s.bad_header {
                write!(f, ", header damaged ({why})")?;
            }
            writeln!(f)?;
            for d in &s.damage {
                write!(
                    f,
                    "  damaged at byte {}: {} bytes ({}); {}",
                    d.offset,
                    d.bytes,
                    d.why,
                    if d.tail && i == last {
                        "nothing after it checks: cut off at start"
                    } else if d.tail {
                        "nothing after it checks, but a newer segment follows: the server \
                         refuses to start"
                    } else {
                        "records that check follow: the server refuses to start"
                    }
                )?;
                if let Some(to) = &d.moved_to {
                    write!(f, "; moved to {}", to.display())?;
                }
                writeln!(f)?;
            }
        }
        let manifest = manifest::path(&self.journal);
        for path in &self.missing {
            writeln!(
                f,
                "{}: missing, and the manifest {} lists it: restore it from a backup, or remove \
                 the manifest to accept the loss",
                path.display(),
                manifest.display()
            )?;
        }
        if let Some(why) = &self.manifest_damaged {
            writeln!(
                f,
                "{}: damaged ({why}): restore it from a backup, or remove it",
                manifest.display()
            )?;
        }
        let ranges: usize = self.segments.iter().map(|s| s.damage.len()).sum();
        write!(
            f,
            "{} segments, {} records that check, {} damaged ranges ({} bytes)",
            self.segments.len(),
            self.records(),
            ranges,
            self.damaged_bytes()
        )
    }
}

/// One segment read, with the records that check and where.
struct Read {
    report: SegmentReport,
    /// (offset, len) of each record that checks.
    kept: Vec<(u64, u64)>,
    header: Option<[u8; segment::HEADER as usize]>,
}

fn read_segment(path: &Path, file: &dyn SegFile) -> Result<Read, StoreErrorKind> {
    let size = file.len().map_err(|e| io("read", path, e))?;
    let mut report = SegmentReport {
        path: path.to_owned(),
        bytes: size,
        records: 0,
        bad_header: None,
        version: None,
        damage: Vec::new(),
    };
    let mut header = None;
    match segment::read_header(file, size) {
        Ok(_) => {
            let mut h = [0u8; segment::HEADER as usize];
            file.read_at(&mut h, 0).map_err(|e| io("read", path, e))?;
            header = Some(h);
        }
        Err(segment::ReadError::Version(v)) => {
            report.version = Some(v);
            return Ok(Read {
                report,
                kept: Vec::new(),
                header,
            });
        }
        Err(segment::ReadError::Header(why)) => report.bad_header = Some(why),
        Err(segment::ReadError::Io(e)) => return Err(io("read", path, e)),
    }
    let mut kept = Vec::new();
    if header.is_none() {
        // Records may follow a damaged header: find the first.
        let first = segment::next_record_in(file, size, 0).map_err(|e| io("read", path, e))?;
        match first {
            None => {
                report.damage.push(DamageReport {
                    offset: 0,
                    bytes: size,
                    why: report.bad_header.clone().unwrap_or_default(),
                    // Removed at start when it is the newest segment and
                    // no longer than a page (see `refused`).
                    tail: size <= 4096,
                    moved_to: None,
                });
                return Ok(Read {
                    report,
                    kept,
                    header,
                });
            }
            Some(at) => report.damage.push(DamageReport {
                offset: 0,
                bytes: at,
                why: report.bad_header.clone().unwrap_or_default(),
                tail: false,
                moved_to: None,
            }),
        }
    }
    let from = report.damage.first().map_or(segment::HEADER, |d| d.bytes);
    let damage = segment::scan_from(file, size, from, true, |framed| {
        segment::decode(&framed.payload)?;
        kept.push((framed.offset, framed.len));
        Ok(())
    })
    .map_err(|e| io("read", path, e))?;
    report.records = kept.len() as u64;
    report
        .damage
        .extend(damage.into_iter().map(|d| DamageReport {
            offset: d.offset,
            bytes: d.end - d.offset,
            why: d.why,
            tail: d.tail,
            moved_to: None,
        }));
    Ok(Read {
        report,
        kept,
        header,
    })
}

/// A new file, readable and writable by its owner only, as segments are.
fn create(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}

fn segments(journal: &Path) -> Result<Vec<PathBuf>, StoreErrorKind> {
    let mut numbers = Vec::new();
    match std::fs::read_dir(journal) {
        Ok(entries) => {
            for entry in entries {
                let entry = entry.map_err(|e| io("read", journal, e))?;
                if let Some(n) = entry.file_name().to_str().and_then(segment::number) {
                    numbers.push(n);
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("read", journal, e)),
    }
    numbers.sort_unstable();
    Ok(numbers
        .into_iter()
        .map(|n| segment::path(journal, n))
        .collect())
}

fn missing(dir: &Path) -> Result<(), StoreError> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(StoreError::new(dir, StoreErrorKind::NotADirectory)),
        Err(_) => Err(StoreError::new(dir, StoreErrorKind::Missing)),
    }
}

/// Reads every journal segment of the state directory `dir`, changing
/// nothing, and reports what checks and what does not.
pub fn check(dir: &Path) -> Result<StateReport, StoreError> {
    missing(dir)?;
    each_segment(dir, |_, _, _| Ok(()))
}

/// Keeps every record that checks of every journal segment of `dir`, in
/// order, and moves the damaged bytes aside, next to their segment;
/// reports what it found and did. Takes the directory's lock.
pub fn repair(dir: &Path) -> Result<StateReport, StoreError> {
    missing(dir)?;
    let options = super::super::StoreOptions {
        create: false,
        ..super::super::StoreOptions::default()
    };
    let _lock = super::super::schema::lock_dir(dir, &options)?;
    let mut removed = Vec::new();
    let report = each_segment(dir, |path, file, read| {
        if read.report.version.is_none() && !read.report.damage.is_empty() {
            rewrite(path, file, read)?;
            if read.kept.is_empty() {
                removed.extend(
                    path.file_name()
                        .and_then(|n| n.to_str())
                        .and_then(segment::number),
                );
            }
        }
        Ok(())
    })?;
    // A segment removed because nothing in it checks is no longer one the
    // journal should have: unlisted, so that the server opens.
    if !removed.is_empty() {
        let journal = dir.join(JOURNAL_DIR);
        let err = |kind| StoreError::new(dir, kind);
        if let Some(listed) = manifest::read(&OsFs, &journal).map_err(err)? {
            let kept: Vec<u64> = listed
                .into_iter()
                .filter(|n| !removed.contains(n))
                .collect();
            manifest::write(&OsFs, &journal, &kept)
                .map_err(|e| err(io("write", &manifest::path(&journal), e)))?;
        }
    }
    Ok(report)
}

/// Reads each journal segment of `dir` in order, hands it to `then` (which
/// may act on what was read), and gathers the segments' reports.
fn each_segment(
    dir: &Path,
    mut then: impl FnMut(&Path, &File, &mut Read) -> Result<(), StoreErrorKind>,
) -> Result<StateReport, StoreError> {
    let journal = dir.join(JOURNAL_DIR);
    let err = |kind| StoreError::new(dir, kind);
    let mut report = StateReport {
        journal: journal.clone(),
        segments: Vec::new(),
        missing: Vec::new(),
        manifest_damaged: None,
    };
    let paths = segments(&journal).map_err(err)?;
    match manifest::read(&OsFs, &journal) {
        Ok(Some(listed)) => {
            report.missing = listed
                .into_iter()
                .map(|n| segment::path(&journal, n))
                .filter(|p| !paths.contains(p))
                .collect();
        }
        Ok(None) => {}
        Err(StoreErrorKind::ManifestDamaged { why, .. }) => report.manifest_damaged = Some(why),
        Err(e) => return Err(err(e)),
    }
    for path in paths {
        let file = File::open(&path).map_err(|e| err(io("open", &path, e)))?;
        let mut read = read_segment(&path, &file).map_err(err)?;
        then(&path, &file, &mut read).map_err(err)?;
        report.segments.push(read.report);
    }
    Ok(report)
}

/// Moves the damaged ranges of a segment aside (synced), then replaces it
/// with its header and the records that check (synced, renamed into
/// place, the directory synced).
fn rewrite(path: &Path, file: &File, read: &mut Read) -> Result<(), StoreErrorKind> {
    let dir = path.parent().unwrap_or(Path::new("."));
    for d in &mut read.report.damage {
        let mut aside = path.with_extension(format!("seg.{}.damaged", d.offset));
        let mut n = 1;
        while aside.exists() {
            aside = path.with_extension(format!("seg.{}.damaged.{n}", d.offset));
            n += 1;
        }
        let mut out = create(&aside).map_err(|e| io("create", &aside, e))?;
        let mut at = d.offset;
        let end = d.offset + d.bytes;
        let mut buf = vec![0u8; 1 << 20];
        while at < end {
            let n = (end - at).min(buf.len() as u64) as usize;
            file.read_at(&mut buf[..n], at)
                .map_err(|e| io("read", path, e))?;
            out.write_all(&buf[..n])
                .map_err(|e| io("write", &aside, e))?;
            at += n as u64;
        }
        out.sync_all().map_err(|e| io("sync", &aside, e))?;
        d.moved_to = Some(aside);
    }
    let tmp = path.with_extension("seg.repair");
    let mut out = create(&tmp).map_err(|e| io("create", &tmp, e))?;
    if read.kept.is_empty() {
        // Nothing checks: the segment itself goes.
        drop(out);
        std::fs::remove_file(&tmp).map_err(|e| io("remove", &tmp, e))?;
        std::fs::remove_file(path).map_err(|e| io("remove", path, e))?;
    } else {
        let header = read.header.unwrap_or_else(|| segment::header(0));
        out.write_all(&header).map_err(|e| io("write", &tmp, e))?;
        for &(offset, len) in &read.kept {
            let mut record = vec![0u8; len as usize];
            file.read_at(&mut record, offset)
                .map_err(|e| io("read", path, e))?;
            out.write_all(&record).map_err(|e| io("write", &tmp, e))?;
        }
        out.sync_all().map_err(|e| io("sync", &tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| io("rename", &tmp, e))?;
    }
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io("sync", dir, e))
}

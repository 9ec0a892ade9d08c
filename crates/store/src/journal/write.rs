//! Writing the newest segment: a group's records appended, synced and
//! checked; the next segment started when it is full.

use std::sync::Arc;

use super::super::Durability;
use super::super::error::StoreErrorKind;
use super::{Active, Inner, Loc, Segment, WRITEBACK_BYTES, io, manifest, segment};

impl Inner {
    /// Appends a group's records to the newest segment (starting a new one
    /// first when it is full) with one write, syncs it with `Power`, and
    /// checks that the segment is still in the directory opened; returns
    /// where the group starts.
    ///
    /// Every caller of the group gets an error or none does, and a group
    /// answered with an error is never read back: a check that fails after
    /// the write cuts the group off again, and syncs the cut, before anyone
    /// is answered (the descriptor still takes writes when the directory's
    /// permissions no longer let it be looked at: without the cut, a write
    /// answered 503 would be replayed after a restart). Once a look failed
    /// so, the directory is looked at before each write too, and nothing is
    /// written until it can be looked at again. A write that fails is cut
    /// off too; if a cut fails, or the directory is gone, the journal takes
    /// no more.
    pub(super) fn write_group(&mut self, records: &[u8]) -> Result<u64, StoreErrorKind> {
        self.check()?;
        // The look before the write only while the last one failed: the
        // look after it is what keeps an error's write out of the log, and
        // one look per group is what the hot path pays.
        if self.unreachable {
            self.check_owned()?;
        }
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
        let loc = self.write_raw(records)?;
        let unflushed = self.active.len - self.active.flushed;
        if self.durability == Durability::Process && unflushed >= WRITEBACK_BYTES {
            self.active
                .file
                .start_writeback(self.active.flushed, unflushed);
            self.active.flushed = self.active.len;
        }
        if self.durability == Durability::Power
            && let Err(e) = self.sync_active()
        {
            // What a failed fsync left on the disk is unknown: take no more.
            let path = segment::path(&self.dir, self.active.number);
            let why = io("sync", &path, e);
            tracing::error!("{why}: the journal takes no more writes");
            self.set_broken(why.clone());
            return Err(why);
        }
        if let Err(why) = self.check_owned() {
            self.cut_off(loc.offset);
            return Err(why);
        }
        Ok(loc.offset)
    }

    /// Cuts the newest segment back to `offset` (what a group answered with
    /// an error had written from there), synced, so that no restart reads
    /// it back; the journal takes no more if the cut fails.
    fn cut_off(&mut self, offset: u64) {
        let path = segment::path(&self.dir, self.active.number);
        let file = &self.active.file;
        match file.set_len(offset).and_then(|()| file.sync()) {
            Ok(()) => {
                tracing::warn!(
                    "journal segment {}: {} bytes from byte {offset} cut off again: their writes \
                     were answered with an error",
                    path.display(),
                    self.active.len - offset
                );
                self.active.len = offset;
                self.active.flushed = self.active.flushed.min(offset);
                if let Some(segment) = self.segments.get_mut(&self.active.number) {
                    segment.len = offset;
                }
            }
            Err(e) => {
                let why = io("cut an unacknowledged write off", &path, e);
                tracing::error!(
                    "{why}: records answered with an error may be read back at the next start; \
                     the journal takes no more writes"
                );
                self.set_broken(why);
            }
        }
    }

    /// Fails when the segment written has no name left or the journal's
    /// directory was replaced (for good: what was just written would not
    /// be found at the next start, so it must not be acknowledged), or
    /// when the directory cannot be looked at for want of permission (not
    /// for good: [`StoreErrorKind::Unreachable`] until it can be, and is
    /// the directory opened).
    pub(super) fn check_owned(&mut self) -> Result<(), StoreErrorKind> {
        let path = segment::path(&self.dir, self.active.number);
        let why = match (self.active.file.unlinked(), self.vfs.id(&self.dir)) {
            (Ok(false), Ok(id)) if id == self.dir_id => {
                if std::mem::take(&mut self.unreachable) {
                    tracing::warn!(
                        "the journal directory {} can be reached again and is the one opened: \
                         writes resume",
                        self.dir.display()
                    );
                }
                return Ok(());
            }
            (Ok(true), _) => StoreErrorKind::SegmentDeleted { segment: path },
            (Ok(false), Ok(_)) => StoreErrorKind::JournalReplaced {
                journal: self.dir.clone(),
            },
            (Ok(false), Err(e)) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                let why = StoreErrorKind::Unreachable {
                    path: self.dir.clone(),
                    message: e.to_string(),
                };
                if !std::mem::replace(&mut self.unreachable, true) {
                    tracing::error!("the state directory's permissions changed: {why}");
                }
                return Err(why);
            }
            (_, Err(e)) | (Err(e), _) => StoreErrorKind::JournalGone {
                journal: self.dir.clone(),
                message: e.to_string(),
            },
        };
        tracing::error!("the state directory was deleted or replaced under the server: {why}");
        self.set_broken(why.clone());
        Err(why)
    }

    /// The journal takes no more writes, and says why to every caller.
    pub(super) fn set_broken(&mut self, why: StoreErrorKind) {
        let _ = self.broken.set(why);
    }

    pub(super) fn write_raw(&mut self, record: &[u8]) -> Result<Loc, StoreErrorKind> {
        let offset = self.active.len;
        let path = segment::path(&self.dir, self.active.number);
        if let Err(e) = self.active.file.write_at(record, offset) {
            if let Err(cut) = self.active.file.set_len(offset) {
                tracing::error!(
                    "journal segment {}: a write failed ({e}) and could not be cut off ({cut})",
                    path.display()
                );
                self.set_broken(StoreErrorKind::io("cut a failed write off", &path, &cut));
            }
            return Err(io("write", &path, e));
        }
        let len = record.len() as u64;
        self.active.len += len;
        if let Some(segment) = self.segments.get_mut(&self.active.number) {
            segment.len = self.active.len;
        }
        Ok(Loc {
            segment: self.active.number,
            offset,
            len,
        })
    }

    /// Starts the next segment, then looks at the older ones. The full
    /// segment is synced first, in both modes, so that a power cut never
    /// leaves a newer segment's records without an older one's (once per
    /// segment: cheap).
    pub(super) fn roll(&mut self) -> Result<(), StoreErrorKind> {
        let path = segment::path(&self.dir, self.active.number);
        self.sync_active().map_err(|e| io("sync", &path, e))?;
        // With `Process` the full segment's name is synced now (with
        // `Power`, when it was created): a segment with a successor is
        // never lost to a power cut, only the newest can be.
        if self.durability == Durability::Process {
            self.vfs
                .sync_dir(&self.dir)
                .map_err(|e| io("sync", &self.dir, e))?;
        }
        self.start_segment(self.active.number + 1)?;
        self.compact();
        Ok(())
    }

    /// Creates segment `number` (mode 0600), synced with its directory with
    /// `Power`.
    pub(super) fn start_segment(&mut self, number: u64) -> Result<(), StoreErrorKind> {
        let path = segment::path(&self.dir, number);
        let file = self
            .vfs
            .open(&path, true)
            .map_err(|e| io("create", &path, e))?;
        file.write_at(&segment::header(self.next_seq), 0)
            .map_err(|e| io("write", &path, e))?;
        // With `Power` an acknowledged write must be found after a power
        // cut: its segment's name too. With `Process` a power cut may take
        // the newest segment, a suffix of the journal, so the syncs are
        // left to compaction's copies (which sync the file and directory)
        // and to the segment's end (its data and name, before the next
        // one is started).
        if self.durability == Durability::Power {
            file.sync().map_err(|e| io("sync", &path, e))?;
            self.vfs
                .sync_dir(&self.dir)
                .map_err(|e| io("sync", &self.dir, e))?;
        }
        self.active = Active {
            number,
            file: Arc::clone(&file),
            len: segment::HEADER,
            roll_at: self.segment_bytes,
            flushed: segment::HEADER,
        };
        self.segments.insert(
            number,
            Segment {
                len: segment::HEADER,
                records: Vec::new(),
            },
        );
        // Listed once it exists (and with its name synced with the
        // manifest's): a crash before leaves it present and unlisted, which
        // is read as any other segment.
        let numbers: Vec<u64> = self.segments.keys().copied().collect();
        manifest::write(&*self.vfs, &self.dir, &numbers)
            .map_err(|e| io("write", &manifest::path(&self.dir), e))?;
        Ok(())
    }
}

//! Writing the newest segment: appending a record, starting the next
//! segment when it is full.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use super::super::Durability;
use super::super::error::StoreErrorKind;
use super::{Active, Inner, Loc, Segment, io, segment};

impl Inner {
    /// Appends one framed record to the newest segment (starting a new one
    /// first when it is full) and returns where it went. A write that fails
    /// is cut off again; if even that fails, the journal takes no more.
    /// When a new segment cannot be started (its directory was removed,
    /// the disk is full), the record goes to the newest one, which grows
    /// past its size until a later attempt succeeds.
    pub(super) fn write(&mut self, record: &[u8]) -> Result<Loc, StoreErrorKind> {
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

    pub(super) fn write_raw(&mut self, record: &[u8]) -> Result<Loc, StoreErrorKind> {
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
    pub(super) fn roll(&mut self) -> Result<(), StoreErrorKind> {
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

    pub(super) fn start_segment(&mut self, number: u64) -> Result<(), StoreErrorKind> {
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
}

//! What the journal keeps: which records are live, and the compaction of
//! the older segments (see the parent module's docs).

use super::super::error::StoreErrorKind;
use super::super::record::PropertyPath;
use super::{Inner, Kept, Segment, io, manifest, segment};

impl Inner {
    /// Whether a record is still needed.
    pub(super) fn live(&self, kept: &Kept) -> bool {
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

    /// Forgets the instants below each property's low-water mark (but its
    /// newest record), then
    /// deletes the older segments with nothing live and moves the live
    /// records of those at most half live into the newest.
    pub(super) fn compact(&mut self) {
        let lows: Vec<(PropertyPath, u64)> = self
            .properties
            .iter()
            .map(|(p, log)| (p.clone(), self.low(p, log.last_logged)))
            .collect();
        for (property, low) in lows {
            if let Some(log) = self.properties.get_mut(&property) {
                // A property's newest record is kept whatever the mark: an
                // at-least-once source (MQTT) that redelivers after a
                // crash compares with its last instant (`Journal::newest`).
                // One record per property: compaction moves it along.
                let newest = log.records.keys().next_back().copied();
                log.records
                    .retain(|&first, &mut (last, _)| last > low || Some(first) == newest);
            }
        }
        let older: Vec<u64> = self
            .segments
            .range(..self.active.number)
            .map(|(&n, _)| n)
            .collect();
        let mut gone = Vec::new();
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
            if let Err(e) = self
                .move_live(&segment, &live)
                .and_then(|()| self.sync_copies(&live))
            {
                // Nothing is lost: the segment stays, and so does its index.
                tracing::warn!("cannot compact journal segment {number}: {e}");
                self.segments.insert(number, segment);
                continue;
            }
            self.count_compaction();
            gone.push(number);
        }
        if gone.is_empty() {
            return;
        }
        // Unlisted before they are deleted: a crash in between leaves them
        // present and unlisted, read again as any segment (their live
        // records were copied and synced), never listed and absent.
        let numbers: Vec<u64> = self.segments.keys().copied().collect();
        if let Err(e) = manifest::write(&*self.vfs, &self.dir, &numbers) {
            tracing::warn!(
                "cannot write the journal's manifest {}: {e}; the compacted segments stay",
                manifest::path(&self.dir).display()
            );
            return;
        }
        for number in gone {
            let path = segment::path(&self.dir, number);
            if let Err(e) = self.vfs.remove(&path) {
                tracing::warn!("cannot remove journal segment {}: {e}", path.display());
            }
        }
    }

    /// Copies the records `live` of `segment` into the newest segment and
    /// points the index at the copies.
    pub(super) fn move_live(
        &mut self,
        segment: &Segment,
        live: &[usize],
    ) -> Result<(), StoreErrorKind> {
        let mut file = None;
        for &i in live {
            let kept = &segment.records[i];
            let old = match kept {
                Kept::Instants { loc, .. } | Kept::Events { loc, .. } => *loc,
            };
            let path = self.path(old);
            if file.is_none() {
                file = Some(
                    self.vfs
                        .open(&path, false)
                        .map_err(|e| io("open", &path, e))?,
                );
            }
            let file = file.as_ref().expect("opened above");
            let mut record = vec![0u8; old.len as usize];
            file.read_at(&mut record, old.offset)
                .map_err(|e| io("read", &path, e))?;
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

    /// The copies are on the disk, and so is the newest segment's name,
    /// before the segment they came from is deleted: in both modes, as a
    /// power cut would otherwise take both (once per segment compacted).
    fn sync_copies(&mut self, live: &[usize]) -> Result<(), StoreErrorKind> {
        if live.is_empty() {
            return Ok(());
        }
        let path = segment::path(&self.dir, self.active.number);
        self.sync_active().map_err(|e| io("sync", &path, e))?;
        self.vfs
            .sync_dir(&self.dir)
            .map_err(|e| io("sync", &self.dir, e))
    }
}

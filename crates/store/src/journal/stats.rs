//! What the journal tells `GET /metrics`: its size, how long the syncs of
//! its segments take, its compactions, and what its open cut off.
//!
//! The journal's thread owns these numbers like the rest of its state, in
//! plain fields: counting costs no atomic and no lock on the write path. A
//! scrape asks for a copy ([`Journal::stats`](super::Journal::stats))
//! through the same channel as every other call, so it waits at most for
//! the group commit under way.

use std::io;
use std::time::{Duration, Instant};

use super::Inner;

/// The upper bounds of the sync latency buckets, in seconds: from a fast
/// SSD's 100 µs to a stalled disk's seconds.
pub const SYNC_BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// A copy of the journal's numbers at one moment.
#[derive(Debug, Clone, Default)]
pub struct JournalStats {
    /// The bytes of its segment files.
    pub bytes: u64,
    /// Its segment files.
    pub segments: u64,
    /// The `fdatasync`s of its segments since the store was opened.
    pub syncs: SyncHistogram,
    /// The older segments compaction removed (their live records copied to
    /// the newest first) since the store was opened.
    pub compactions: u64,
    /// Unfinished writes the open cut off: the tail of the newest segment,
    /// or a newest segment whose header never reached the disk.
    pub truncations: u64,
    /// The bytes those cuts dropped.
    pub truncated_bytes: u64,
}

/// How long syncs took, in [`SYNC_BUCKETS`].
#[derive(Debug, Clone, Default)]
pub struct SyncHistogram {
    /// The syncs per bucket (not cumulative); the last is past every bound.
    pub counts: [u64; SYNC_BUCKETS.len() + 1],
    /// The time they took together.
    pub sum: Duration,
}

impl SyncHistogram {
    fn observe(&mut self, took: Duration) {
        let seconds = took.as_secs_f64();
        let bucket = SYNC_BUCKETS
            .iter()
            .position(|&bound| seconds <= bound)
            .unwrap_or(SYNC_BUCKETS.len());
        self.counts[bucket] += 1;
        self.sum += took;
    }

    /// The syncs counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// The counts the journal's thread keeps (the sizes it reads off its
/// index when asked).
#[derive(Debug, Default)]
pub(super) struct Tally {
    syncs: SyncHistogram,
    compactions: u64,
    pub(super) truncations: u64,
    pub(super) truncated_bytes: u64,
}

impl Inner {
    /// `fdatasync` of the newest segment, timed.
    pub(super) fn sync_active(&mut self) -> io::Result<()> {
        let start = Instant::now();
        let synced = self.active.file.sync();
        self.tally.syncs.observe(start.elapsed());
        synced
    }

    /// Counts one segment compacted away.
    pub(super) fn count_compaction(&mut self) {
        self.tally.compactions += 1;
    }

    /// See [`Journal::stats`](super::Journal::stats).
    pub(super) fn stats(&self) -> JournalStats {
        JournalStats {
            bytes: self.segments.values().map(|s| s.len).sum(),
            segments: self.segments.len() as u64,
            syncs: self.tally.syncs.clone(),
            compactions: self.tally.compactions,
            truncations: self.tally.truncations,
            truncated_bytes: self.tally.truncated_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sync_lands_in_the_first_bucket_whose_bound_it_is_within() {
        let mut h = SyncHistogram::default();
        h.observe(Duration::from_micros(100));
        h.observe(Duration::from_micros(101));
        h.observe(Duration::from_secs(3));
        assert_eq!(h.counts[0], 1, "100 µs is within the 100 µs bound");
        assert_eq!(h.counts[1], 1);
        assert_eq!(h.counts[SYNC_BUCKETS.len()], 1, "past every bound");
        assert_eq!(h.count(), 3);
        assert_eq!(h.sum, Duration::from_micros(3_000_201));
    }
}

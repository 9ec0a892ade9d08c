//! The record counts of a running query.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

/// Record counts of a running query.
#[derive(Debug, Default)]
pub struct Progress {
    records_in: AtomicU64,
    records_out: AtomicU64,
    restarts: AtomicU64,
    skipped: AtomicU64,
    /// CPU time spent on the query's in-process work, in nanoseconds
    /// (`compute`: its task's polls on the thread's CPU clock).
    cpu_nanos: AtomicU64,
    /// Skipped and not yet carried by an event: the next batch delivered
    /// carries them ([`QueryOutput::emit`]).
    ///
    /// [`QueryOutput::emit`]: super::QueryOutput::emit
    pub(super) unreported: AtomicU64,
}

/// Adds `n` to `counter`, stopping at `u64::MAX`: a skipped count can come
/// from a job's own numbers, which must not wrap it.
fn saturating_add(counter: &AtomicU64, n: u64) {
    let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
        Some(v.saturating_add(n))
    });
}

/// A copy of a query's [`Progress`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ProgressSnapshot {
    /// Instants read from the source.
    pub records_in: u64,
    /// Events delivered.
    pub records_out: u64,
    /// Times the engine restarted the query's job.
    pub restarts: u64,
    /// Records (or windows) skipped under `onError: skip`: with no result
    /// in their operation's domain, or no finite one.
    pub skipped: u64,
    /// CPU time spent on the query's in-process work, in nanoseconds: its
    /// task on the compute pool (transforms, windows, position measures,
    /// a bridge job's relay), or an in-process plugin's query thread. A
    /// bridge job's own process is not counted.
    pub cpu_nanos: u64,
}

impl ProgressSnapshot {
    /// [`cpu_nanos`](ProgressSnapshot::cpu_nanos) in seconds.
    pub fn cpu_seconds(&self) -> f64 {
        self.cpu_nanos as f64 / 1e9
    }
}

impl Progress {
    /// Counts `n` instants read.
    pub fn add_in(&self, n: usize) {
        self.records_in.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Counts `n` events delivered.
    pub fn add_out(&self, n: usize) {
        self.records_out.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Counts `n` records or windows skipped under `onError: skip`; the
    /// next event delivered carries them in its `skipped`.
    pub fn add_skipped(&self, n: u64) {
        self.count_skipped(n);
        self.carry_skipped(n);
    }

    /// Counts `n` skipped records or windows in the query's total only: an
    /// engine that stamps them on an event itself (the one right after
    /// them) counts them here.
    pub fn count_skipped(&self, n: u64) {
        if n > 0 {
            saturating_add(&self.skipped, n);
        }
    }

    /// Has the next event delivered carry `n` skipped records or windows,
    /// counted already ([`count_skipped`](Progress::count_skipped)): those
    /// an engine's events carried before the host windowed them.
    pub fn carry_skipped(&self, n: u64) {
        if n > 0 {
            saturating_add(&self.unreported, n);
        }
    }

    /// Counts `nanos` of CPU time spent on the query.
    pub fn add_cpu(&self, nanos: u64) {
        if nanos > 0 {
            saturating_add(&self.cpu_nanos, nanos);
        }
    }

    /// The CPU time spent on the query so far, in nanoseconds.
    pub fn cpu_nanos(&self) -> u64 {
        self.cpu_nanos.load(Ordering::Relaxed)
    }

    /// Counts one restart.
    pub fn add_restart(&self) {
        self.restarts.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now.
    pub fn snapshot(&self) -> ProgressSnapshot {
        ProgressSnapshot {
            records_in: self.records_in.load(Ordering::Relaxed),
            records_out: self.records_out.load(Ordering::Relaxed),
            restarts: self.restarts.load(Ordering::Relaxed),
            skipped: self.skipped.load(Ordering::Relaxed),
            cpu_nanos: self.cpu_nanos.load(Ordering::Relaxed),
        }
    }
}

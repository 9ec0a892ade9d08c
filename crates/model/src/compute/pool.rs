//! Where a query's task runs: a [`ComputePool`] of its own threads, or the
//! caller's runtime.

use std::future::Future;

use tokio::runtime::{Handle, Runtime};

use super::CpuLimit;
use super::slice::Sliced;

/// Threads that run queries' work and nothing else: a runtime of their
/// own, apart from the one that serves requests.
///
/// Dropping the pool ends it without waiting: the queries still on it end
/// as failed (their engine's task is gone). A server stops its queries
/// first.
#[derive(Debug)]
pub struct ComputePool {
    runtime: Option<Runtime>,
    threads: usize,
}

impl ComputePool {
    /// A pool of `threads` threads (at least one), named
    /// `mfstream-compute`.
    pub fn new(threads: usize) -> std::io::Result<ComputePool> {
        let threads = threads.max(1);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("mfstream-compute")
            // A bridge query's task restarts its job (a child process,
            // pipes) from the pool.
            .enable_all()
            .build()?;
        Ok(ComputePool {
            runtime: Some(runtime),
            threads,
        })
    }

    /// The default size: one thread per core the process may use.
    pub fn default_threads() -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }

    /// Its threads.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// What a query on this pool is handed.
    pub fn compute(&self) -> Compute {
        Compute {
            pool: self.runtime.as_ref().map(|r| r.handle().clone()),
            limit: None,
        }
    }
}

impl Drop for ComputePool {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which an async context forbids.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// How a query's in-process work is run: on a [`ComputePool`] or on the
/// caller's runtime (the default), within a [`CpuLimit`] or not (the
/// default). Either way its task runs in slices and its CPU is accounted.
#[derive(Debug, Clone, Default)]
pub struct Compute {
    pool: Option<Handle>,
    limit: Option<CpuLimit>,
}

/// Two are equal when they bound their queries alike: the pool a query
/// runs on does not change what it computes.
impl PartialEq for Compute {
    fn eq(&self, other: &Compute) -> bool {
        self.limit == other.limit
    }
}

impl Compute {
    /// On the caller's runtime (the one current when the query is
    /// submitted), unbounded.
    pub fn current() -> Compute {
        Compute::default()
    }

    /// The same, its queries bounded by `limit`.
    pub fn with_limit(mut self, limit: Option<CpuLimit>) -> Compute {
        self.limit = limit;
        self
    }

    /// The CPU bound of its queries, if any.
    pub fn limit(&self) -> Option<CpuLimit> {
        self.limit.clone()
    }

    /// Runs a query's task, `work`, in slices, each slice's CPU time (in
    /// nanoseconds) handed to `account` (a query's progress counters).
    ///
    /// # Panics
    ///
    /// Without a pool, outside a tokio runtime (as `tokio::spawn`).
    pub fn spawn<F, A>(&self, account: A, work: F)
    where
        F: Future<Output = ()> + Send + 'static,
        A: Fn(u64) + Send + Unpin + 'static,
    {
        let task = Sliced::new(work, account);
        match &self.pool {
            Some(pool) => drop(pool.spawn(task)),
            None => drop(tokio::spawn(task)),
        }
    }
}

//! Query work off the serving path: the compute pool, fair slices between
//! queries, and the CPU each query spends.
//!
//! A server has two kinds of threads. Its own runtime's threads accept
//! connections, read requests, run the sources (MQTT, Kafka) and write
//! SSE: they never compute a query's records. A query's in-process work
//! (the `local` engine's transforms and windows, position measures and
//! fences, a bridge query's relay and host windows, the replay of the log
//! at start-up) runs as a task on a [`ComputePool`], a runtime of its own
//! with `--compute-threads` threads. A tenant's expensive query then costs
//! that tenant, not the server's answers.
//!
//! Three parts, each in its file:
//!
//! - **the pool** ([`ComputePool`], [`Compute`]): where a query's task runs.
//!   A [`Compute`] is what a query is handed ([`QuerySpec::with_compute`]):
//!   a pool, or the caller's own runtime (the default, for a library caller
//!   and `mfstream run`), and the query's CPU bound if it has one.
//! - **slices** (`slice`): fairness between the queries of one pool, as
//!   Linux's scheduler and tokio's cooperative budget do it. Every poll of
//!   a query's task starts a slice; the record loops ask
//!   [`record_done`] after each record, and once the task has worked
//!   `SLICE` (500 µs) (or one record, when one record costs more) it yields,
//!   going to the back of the pool's queue. A query with cheap records
//!   then waits at most about one slice per busy query sharing its pool.
//! - **accounting** (`cpu`): every poll of a query's task is timed on the
//!   thread's CPU clock and added to the query's counters
//!   (`ProgressSnapshot::cpu_nanos` (`mfstream-engine`)); a [`CpuLimit`]
//!   (`--max-query-cpu`) fails a query that spends more than its share of
//!   a core over a window, alone.
//!
//! # Caveats
//!
//! A record is never cut: a query whose single record costs 90 ms (a
//! segment along many vertices of a comb-shaped fence) holds its thread
//! for 90 ms. Work that runs on threads of its own (an in-process plugin's
//! query thread, a bridge job's process) is scheduled by the system, not
//! sliced here; a plugin query's thread is still accounted.
//!
//! [`QuerySpec::with_compute`]: crate::QuerySpec::with_compute
//! [`record_done`]: slice::record_done

mod cpu;
mod pool;
mod slice;

pub use cpu::{CpuLimit, CpuLimitError};
pub use pool::{Compute, ComputePool};

pub use cpu::{CpuWindow, thread_cpu_nanos};
pub use slice::{record_done, yield_slice};

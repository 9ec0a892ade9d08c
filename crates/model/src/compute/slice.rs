//! Slices: a query's task gives its thread back after a bounded stretch
//! of work, so that the queries of a pool take turns.
//!
//! The slice is per poll: [`Sliced`] marks the start of each poll of a
//! query's task in a thread-local, and the record loops call
//! [`record_done`] after each record. Reading the clock after every record
//! would cost as much as a cheap record itself, so the check is spaced:
//! from the records done so far in the slice and the time they took, the
//! next check falls about halfway through what is left of the slice (every
//! record when records are slow, at most every [`MAX_STRIDE`] when they are
//! cheap).

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// The work a query's task does before it gives its thread back: a few
/// hundred microseconds, so that a query with cheap records waits about
/// this long per busy query sharing its pool, while a lone query loses
/// well under 1 % of its time to the hand-overs.
pub(super) const SLICE: Duration = Duration::from_micros(500);

/// The most records between two looks at the clock.
const MAX_STRIDE: u32 = 64;

/// The slice of the poll running on this thread.
#[derive(Clone, Copy)]
struct Current {
    /// When the poll started.
    start: Instant,
    /// Records done in it.
    records: u32,
    /// The record count at which the clock is read next.
    check_at: u32,
}

thread_local! {
    /// `None` outside a query's poll: [`record_done`] never asks for a
    /// yield there.
    static CURRENT: Cell<Option<Current>> = const { Cell::new(None) };
}

/// Whether the query being polled on this thread has worked its slice,
/// counting one more record done: it should then yield
/// ([`yield_slice`]). Always false outside a query's task (a plain
/// `tokio::spawn`, a test calling an engine's parts directly).
pub fn record_done() -> bool {
    CURRENT.with(|cell| {
        let Some(mut current) = cell.get() else {
            return false;
        };
        current.records += 1;
        if current.records < current.check_at {
            cell.set(Some(current));
            return false;
        }
        let elapsed = current.start.elapsed();
        if elapsed >= SLICE {
            return true;
        }
        // The records so far took `elapsed`: look again about halfway
        // through what is left.
        let per_record = elapsed.as_nanos() / u128::from(current.records);
        let left = (SLICE - elapsed).as_nanos();
        let stride = left
            .checked_div(2 * per_record)
            .unwrap_or(u128::from(MAX_STRIDE));
        current.check_at = current.records + stride.clamp(1, u128::from(MAX_STRIDE)) as u32;
        cell.set(Some(current));
        false
    })
}

/// Gives the thread back: the task goes to the back of its pool's queue,
/// and its next poll starts a new slice.
pub async fn yield_slice() {
    tokio::task::yield_now().await;
}

/// A query's task: each poll is a slice ([`record_done`]), timed on the
/// thread's CPU clock and reported to `account`.
pub(super) struct Sliced<F, A> {
    work: Pin<Box<F>>,
    account: A,
}

impl<F, A> Sliced<F, A> {
    pub(super) fn new(work: F, account: A) -> Sliced<F, A> {
        Sliced {
            work: Box::pin(work),
            account,
        }
    }
}

impl<F: Future, A: Fn(u64) + Unpin> Future for Sliced<F, A> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let cpu = super::thread_cpu_nanos();
        let outer = CURRENT.replace(Some(Current {
            start: Instant::now(),
            records: 0,
            check_at: 1,
        }));
        let poll = self.work.as_mut().poll(cx);
        CURRENT.set(outer);
        (self.account)(super::thread_cpu_nanos().saturating_sub(cpu));
        poll
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_a_querys_task_no_yield_is_asked() {
        for _ in 0..1000 {
            assert!(!record_done());
        }
    }

    #[test]
    fn a_slow_record_ends_the_slice_at_once() {
        let mut sliced = Sliced::new(
            async {
                // One record that takes longer than a slice.
                let start = Instant::now();
                while start.elapsed() <= SLICE {
                    std::hint::black_box(0);
                }
                record_done()
            },
            |_| {},
        );
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert_eq!(Pin::new(&mut sliced).poll(&mut cx), Poll::Ready(true));
    }

    #[test]
    fn cheap_records_run_for_about_a_slice_then_yield() {
        let mut sliced = Sliced::new(
            async {
                let mut records = 0u64;
                while !record_done() {
                    records += 1;
                    std::hint::black_box(records);
                }
                records
            },
            |_| {},
        );
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let start = Instant::now();
        let Poll::Ready(records) = Pin::new(&mut sliced).poll(&mut cx) else {
            panic!("the loop ends");
        };
        let elapsed = start.elapsed();
        assert!(records > 64, "{records} records");
        assert!(elapsed >= SLICE, "{elapsed:?}");
        // A look at the clock at most every MAX_STRIDE records: the slice
        // ends within a few strides of its time, on a loaded machine too.
        assert!(elapsed < SLICE * 20, "{elapsed:?}");
    }

    #[test]
    fn each_poll_is_accounted_on_the_threads_cpu_clock() {
        let spent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let account = {
            let spent = spent.clone();
            move |n| {
                spent.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            }
        };
        let mut sliced = Sliced::new(
            async {
                // Busy for 20 ms of CPU.
                let cpu = super::super::thread_cpu_nanos();
                while super::super::thread_cpu_nanos() - cpu < 20_000_000 {
                    std::hint::black_box(0);
                }
            },
            account,
        );
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(Pin::new(&mut sliced).poll(&mut cx).is_ready());
        let spent = spent.load(std::sync::atomic::Ordering::Relaxed);
        assert!((20_000_000..200_000_000).contains(&spent), "{spent} ns");
    }
}

//! The CPU a query spends: the thread's CPU clock, and the bound on a
//! query's share of a core over a window (`--max-query-cpu`).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::origin::Value;

/// The CPU time this thread has used, in nanoseconds
/// (`CLOCK_THREAD_CPUTIME_ID`): time the thread ran, not time it waited
/// for a core.
pub fn thread_cpu_nanos() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the call writes it and
    // reads nothing else. CLOCK_THREAD_CPUTIME_ID exists on every Linux and
    // on the BSDs; should it fail, `ts` stays zero and the poll counts 0.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// The most CPU one query may spend: `share` of one core over any
/// `window` (`--max-query-cpu SHARE`, `--query-cpu-window SECONDS`). Past
/// it the query fails alone, naming the option; the server and its other
/// queries go on.
///
/// The replay of the log at start-up (`--state`) is accounted but not
/// bounded: it is the server catching up on instants the query took live.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuLimit {
    share: f64,
    window: Duration,
    /// How a failure names the limit: as the share's origin names it.
    option: Arc<str>,
}

/// Why a [`CpuLimit`] cannot be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CpuLimitError {
    /// The share is not a number above 0.
    #[error(
        "a query's CPU share must be a number above 0 (a share of one core, such as 0.5), not {0}"
    )]
    Share(f64),
    /// The window is zero, or too long to count in.
    #[error("a CPU window must be between 1 s and 1 day, not {0:?}")]
    Window(Duration),
}

impl CpuLimit {
    /// At most `share` of a core (0.5: half a core; 2: two cores, on a pool
    /// that has them) over any `window`. A failure names the limit as the
    /// share's origin does (`--max-query-cpu` from the command line; a
    /// plain number is the embedding program's `max_query_cpu`).
    pub fn new(share: impl Into<Value<f64>>, window: Duration) -> Result<CpuLimit, CpuLimitError> {
        let share = share.into();
        let option = share.name("max_query_cpu").into();
        let share = share.value;
        if !(share.is_finite() && share > 0.0) {
            return Err(CpuLimitError::Share(share));
        }
        if window < Duration::from_secs(1) || window > Duration::from_secs(86_400) {
            return Err(CpuLimitError::Window(window));
        }
        Ok(CpuLimit {
            share,
            window,
            option,
        })
    }

    /// The share of one core.
    pub fn share(&self) -> f64 {
        self.share
    }

    /// The window.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// The CPU the query may spend in one window.
    fn allowance(&self) -> Duration {
        self.window.mul_f64(self.share)
    }
}

impl fmt::Display for CpuLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of a core over {} s",
            self.share,
            self.window.as_secs_f64()
        )
    }
}

/// The slots a window is counted in: the window slides one slot at a time.
const SLOTS: usize = 10;

/// A query's CPU over the last window, checked against its
/// [`CpuLimit`]: the window in `SLOTS` slots, each the CPU spent in a
/// tenth of it, so that the sum is the CPU of the last window to within
/// one slot.
#[derive(Debug)]
pub struct CpuWindow {
    limit: CpuLimit,
    origin: Instant,
    slot: Duration,
    /// The CPU spent in each slot, by slot number modulo [`SLOTS`].
    spent: [u64; SLOTS],
    /// The slot last counted in.
    current: u64,
    /// The query's CPU total when last counted.
    seen: u64,
}

impl CpuWindow {
    /// A window of `limit`, starting now with `total` nanoseconds already
    /// spent (not counted against it).
    pub fn new(limit: CpuLimit, total: u64) -> CpuWindow {
        CpuWindow {
            slot: limit.window / SLOTS as u32,
            limit,
            origin: Instant::now(),
            spent: [0; SLOTS],
            current: 0,
            seen: total,
        }
    }

    /// Counts the CPU spent since the last call, the query's total being
    /// `total` nanoseconds now; `bounded` false (a replay) accounts it
    /// without counting it against the limit. The reason to fail the
    /// query, when the last window holds more than the limit allows.
    pub fn charge(&mut self, total: u64, bounded: bool) -> Option<String> {
        self.charge_at(total, bounded, Instant::now())
    }

    fn charge_at(&mut self, total: u64, bounded: bool, now: Instant) -> Option<String> {
        let spent = total.saturating_sub(self.seen);
        self.seen = total;
        let slot = (now.saturating_duration_since(self.origin).as_nanos()
            / self.slot.as_nanos().max(1)) as u64;
        // Slots passed since the last call are empty.
        for passed in (self.current + 1)..=slot.min(self.current + SLOTS as u64) {
            self.spent[(passed % SLOTS as u64) as usize] = 0;
        }
        self.current = self.current.max(slot);
        if !bounded {
            return None;
        }
        let index = (self.current % SLOTS as u64) as usize;
        self.spent[index] = self.spent[index].saturating_add(spent);
        let window: u64 = self.spent.iter().sum();
        let allowance = self.limit.allowance();
        (window > allowance.as_nanos() as u64).then(|| {
            format!(
                "query CPU reached {} ({}): it spent {:.2} s of CPU in the last {} s; raise {} \
                 or make the query cheaper",
                self.limit.option,
                self.limit,
                window as f64 / 1e9,
                self.limit.window.as_secs_f64(),
                self.limit.option,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn a_bad_share_or_window_is_refused_naming_it() {
        for share in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let e = CpuLimit::new(share, Duration::from_secs(10)).unwrap_err();
            assert!(e.to_string().contains("above 0"), "{e}");
        }
        for window in [Duration::ZERO, Duration::from_secs(86_401)] {
            assert!(matches!(
                CpuLimit::new(0.5, window),
                Err(CpuLimitError::Window(_))
            ));
        }
    }

    #[test]
    fn a_query_within_its_share_goes_on_and_one_past_it_fails_naming_the_option() {
        let share = crate::origin::Value::new(0.5, crate::origin::Origin::flag("--max-query-cpu"));
        let limit = CpuLimit::new(share, Duration::from_secs(10)).unwrap();
        let mut window = CpuWindow::new(limit, 0);
        let t0 = window.origin;
        // A quarter of a core for 30 s: 2.5 s of CPU in any window, within
        // the 5 s allowed.
        let mut total = 0;
        for s in 1..=30u64 {
            total += SECOND / 4;
            let now = t0 + Duration::from_secs(s);
            assert_eq!(window.charge_at(total, true, now), None, "at {s} s");
        }
        // Then a whole core: the window holds 2.5 s + 0.75 s for each
        // second of it, past 5 s in the fourth.
        let mut failed = None;
        for s in 31..=45u64 {
            total += SECOND;
            let now = t0 + Duration::from_secs(s);
            if let Some(reason) = window.charge_at(total, true, now) {
                failed = Some((s, reason));
                break;
            }
        }
        let (at, reason) = failed.expect("the query fails");
        assert_eq!(at, 34, "failed at {at} s");
        assert!(
            reason.contains("--max-query-cpu (0.5 of a core over 10 s)")
                && reason.contains("raise --max-query-cpu or"),
            "{reason}"
        );
    }

    #[test]
    fn a_replay_is_accounted_but_not_bounded() {
        let limit = CpuLimit::new(0.1, Duration::from_secs(10)).unwrap();
        let mut window = CpuWindow::new(limit, 0);
        let t0 = window.origin;
        // 20 s of CPU in 2 s of replay: not counted.
        assert_eq!(
            window.charge_at(20 * SECOND, false, t0 + Duration::from_secs(2)),
            None
        );
        // Live again: 0.9 s within the allowance of 1 s, then past it.
        assert_eq!(
            window.charge_at(
                20 * SECOND + 9 * SECOND / 10,
                true,
                t0 + Duration::from_secs(3)
            ),
            None
        );
        assert!(
            window
                .charge_at(21 * SECOND + SECOND / 10, true, t0 + Duration::from_secs(4))
                .is_some()
        );
    }

    #[test]
    fn cpu_spent_long_ago_slides_out_of_the_window() {
        let limit = CpuLimit::new(0.5, Duration::from_secs(10)).unwrap();
        let mut window = CpuWindow::new(limit, 0);
        let t0 = window.origin;
        assert_eq!(window.charge_at(4 * SECOND, true, t0), None);
        // An hour later, 4 s more: the first 4 s have left the window.
        let later = t0 + Duration::from_secs(3600);
        assert_eq!(window.charge_at(8 * SECOND, true, later), None);
    }

    #[test]
    fn the_threads_cpu_clock_advances_with_work_not_with_waiting() {
        // Work until the clock shows 10 ms of it: on a loaded machine 20 ms
        // of wall time may hold little CPU, so the wall clock only bounds
        // the wait (a clock that does not move fails after 10 s).
        let before = thread_cpu_nanos();
        let start = Instant::now();
        while thread_cpu_nanos() - before < 10_000_000 && start.elapsed() < Duration::from_secs(10)
        {
            std::hint::black_box(0);
        }
        let busy = thread_cpu_nanos() - before;
        assert!(
            busy >= 10_000_000,
            "{busy} ns of CPU after up to 10 s of work"
        );
        let before = thread_cpu_nanos();
        std::thread::sleep(Duration::from_millis(50));
        let idle = thread_cpu_nanos() - before;
        assert!(idle < 5_000_000, "{idle} ns for 50 ms asleep");
    }
}

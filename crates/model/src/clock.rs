//! The wall clock of live queries, derived from tokio's clock.
//!
//! A live query (every query of `mfstream serve`, `mfstream run --live`)
//! advances event time on the wall clock as well as on its records, so that
//! a window closes on time when no later record comes. The clock is a base
//! [`SystemTime`] plus the time elapsed on tokio's clock since it was taken:
//! under `tokio::time::pause()` it advances only when the test advances it,
//! so tests of windows closing on time are deterministic. Engines never
//! poll it: they sleep until the next window's end (plus the grace).
//!
//! # Held clocks: replaying a log
//!
//! A clock can start *held* ([`WallClock::held`]): until its
//! [`ClockRelease`] is released, the query's event time advances from its
//! records alone, as for a query that is not live, and nothing waits on the
//! clock. `mfstream serve --state` holds a restored query's clock while it
//! replays the logged instants, which may be older than the wall clock's
//! watermark by then: counted in their windows, as they were before the
//! restart, not late. The release travels through the query's source after
//! the last replayed batch (`SourceSender::release_clock` (`mfstream-engine`)), so the engine
//! applies the clock again from exactly there: the windows the wall clock
//! has passed close at once, and the records after the replay are live.
//!

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant as Tick;

/// A wall clock: `base` at the tokio instant `origin`; possibly held
/// (see [`WallClock::held`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WallClock {
    base: SystemTime,
    origin: Tick,
    hold: Option<Hold>,
}

/// Whether a held clock is still held, shared by its copies and its
/// release.
#[derive(Debug, Clone)]
struct Hold(Arc<AtomicBool>);

impl PartialEq for Hold {
    fn eq(&self, other: &Hold) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Hold {}

/// The release of a held [`WallClock`], and of every copy of it.
///
/// Dropping it releases nothing: a held clock is released on purpose, at a
/// point of the query's input (`SourceSender::release_clock` (`mfstream-engine`)).
///
#[derive(Debug)]
pub struct ClockRelease(Arc<AtomicBool>);

impl ClockRelease {
    /// From now on the clock applies: [`WallClock::is_held`] is false.
    pub fn release(self) {
        self.0.store(false, Ordering::Release);
    }
}

impl WallClock {
    /// The system's clock, as of now.
    pub fn system() -> WallClock {
        WallClock::starting_at(SystemTime::now())
    }

    /// A clock that reads `base` now and advances with tokio's clock (for
    /// tests: with time paused, it moves only when the test advances it).
    pub fn starting_at(base: SystemTime) -> WallClock {
        WallClock {
            base,
            origin: Tick::now(),
            hold: None,
        }
    }

    /// This clock, held until the release returned is released: meanwhile
    /// a query on it advances event time from its records alone, and
    /// nothing waits on the clock. It reads the time all along
    /// ([`now`](WallClock::now)); the engines ask
    /// [`is_held`](WallClock::is_held) before they apply it. A query's
    /// clock is released in order with its input, by
    /// `SourceSender::release_clock` (`mfstream-engine`): `mfstream serve --state` holds a
    /// restored query's clock while it replays the log.
    ///
    /// `SourceSender::release_clock` (`mfstream-engine`): mfstream_engine::SourceSender::release_clock
    pub fn held(self) -> (WallClock, ClockRelease) {
        let hold = Arc::new(AtomicBool::new(true));
        let clock = WallClock {
            hold: Some(Hold(hold.clone())),
            ..self
        };
        (clock, ClockRelease(hold))
    }

    /// Whether the clock is held: a query on it must not apply it yet.
    pub fn is_held(&self) -> bool {
        self.hold
            .as_ref()
            .is_some_and(|hold| hold.0.load(Ordering::Acquire))
    }

    /// The time now.
    pub fn now(&self) -> SystemTime {
        self.base + self.origin.elapsed()
    }

    /// The time now, in milliseconds since the epoch (negative before it).
    pub fn now_millis(&self) -> i64 {
        millis_of(self.now())
    }

    /// The time now, in whole seconds since the epoch (floored).
    pub fn now_secs(&self) -> i64 {
        self.now_millis().div_euclid(1000)
    }

    /// The tokio instant at which the clock reads `secs` seconds since the
    /// epoch; now when that is past.
    pub fn instant_at(&self, secs: i64) -> Tick {
        let at = secs.saturating_mul(1000);
        let base = millis_of(self.base);
        match u64::try_from(at.saturating_sub(base)) {
            Ok(ahead) => self.origin + Duration::from_millis(ahead),
            Err(_) => self.origin,
        }
        .max(Tick::now())
    }
}

fn millis_of(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

/// `millis` since the epoch as an RFC 3339 UTC datetime with milliseconds:
/// `2026-12-03T14:00:05.123Z`.
pub fn rfc3339_millis(millis: i64) -> String {
    let secs = millis.div_euclid(1000);
    let ms = millis.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let day_secs = secs.rem_euclid(86_400);
    let (y, m, d) = crate::datetime::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        day_secs / 3600,
        day_secs / 60 % 60,
        day_secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watermarks_are_written_as_rfc3339_utc_with_milliseconds() {
        assert_eq!(rfc3339_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339_millis(1_796_306_405_123),
            "2026-12-03T14:00:05.123Z"
        );
        assert_eq!(rfc3339_millis(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(rfc3339_millis(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[tokio::test(start_paused = true)]
    async fn the_wall_clock_advances_with_tokio_time() {
        let clock = WallClock::starting_at(UNIX_EPOCH + Duration::from_secs(100));
        assert_eq!(clock.now_secs(), 100);
        tokio::time::advance(Duration::from_millis(2500)).await;
        assert_eq!(clock.now_millis(), 102_500);
        assert_eq!(clock.instant_at(105), clock.origin + Duration::from_secs(5));
        assert_eq!(clock.instant_at(50), Tick::now());
    }

    #[test]
    fn a_held_clock_and_its_copies_are_held_until_the_release() {
        let (clock, release) = WallClock::system().held();
        let copy = clock.clone();
        assert!(clock.is_held() && copy.is_held());
        assert!(!WallClock::system().is_held());
        release.release();
        assert!(!clock.is_held() && !copy.is_held());
    }
}

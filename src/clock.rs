//! The wall clock of live queries, derived from tokio's clock.
//!
//! A live query (every query of `mfstream serve`, `mfstream run --live`)
//! advances event time on the wall clock as well as on its records, so that
//! a window closes on time when no later record comes. The clock is a base
//! [`SystemTime`] plus the time elapsed on tokio's clock since it was taken:
//! under `tokio::time::pause()` it advances only when the test advances it,
//! so tests of windows closing on time are deterministic. Engines never
//! poll it: they sleep until the next window's end (plus the grace).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant as Tick;

/// A wall clock: `base` at the tokio instant `origin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WallClock {
    base: SystemTime,
    origin: Tick,
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
        }
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
pub(crate) fn rfc3339_millis(millis: i64) -> String {
    let secs = millis.div_euclid(1000);
    let ms = millis.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let day_secs = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        day_secs / 3600,
        day_secs / 60 % 60,
        day_secs % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01
/// (H. Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
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
}

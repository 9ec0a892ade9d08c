//! Resuming a time window (`TUMBLING` or `HOPPING`) after a restart,
//! without its open windows: the engine state of a durable checkpoint
//! (`mfstream serve --state`, see `server::durable`).
//!
//! - The **resume point** is the end `E` of the last window emitted, an
//!   epoch-aligned multiple of the hop. Every later window ends after `E`,
//!   so the earliest one starts at `E + hop − span` ([`Grid::next_start`]).
//! - A windower **resumed** at `E` ([`Windower::resumed_after`]) never emits
//!   a window ending at or before `E`, and counts as late only the records
//!   whose every window ends by then. Fed the records from the first one at
//!   or past `E + hop − span`, it emits exactly the windows after `E` that
//!   the running windower emitted, with the same records, values, bounds and
//!   late counts, provided no record older than `E + hop − span` came after
//!   that first one before `E` was emitted (the caller checks this order).
//! - An event names its window only through its records' datetimes (the
//!   first and last to arrive): [`closed`] finds the window's end from them
//!   and from the end of the window emitted before, when only one end fits.
//! - The resume point is kept as a few bytes ([`encode`], [`decode`]),
//!   versioned and checked when read back.
//!
//! [`Windower::resumed_after`]: super::Windower::resumed_after
//! [`Grid::next_start`]: super::Grid::next_start

use super::Grid;
use crate::datetime;
use crate::vocab::WindowEvent;

/// The first byte of an encoded resume point: what the state is.
const KIND: u8 = b'w';
/// The version of the encoding that follows.
const VERSION: u8 = 1;
/// Kind, version, and the end as a little-endian `i64`.
const ENCODED_LEN: usize = 10;
/// Beyond every datetime mfstream reads (years 0000 to 9999, with any
/// offset): a resume point past it is damage, not a window end.
const MAX_END: i64 = 400_000_000_000;

/// Which window an event closed, as far as its records tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// The window ending here, and no other, holds the event's records.
    Exactly(i64),
    /// Several windows could: the one ending here or a later one.
    AtLeast(i64),
}

/// The end of the window `event` closed, on the windows of `grid`, when the window emitted before it ends at or after `after`;
/// `None` when its datetimes do not parse or fit no window.
///
/// Every record of a window `[end − span, end)` lies in it, so `end` is
/// after the later of the first and last records and at most the earlier
/// plus `span`; windows are emitted in order, so it is after `after`. The
/// first boundary past both is the end when the next one is too far.
pub fn closed(event: &WindowEvent, grid: Grid, after: Option<i64>) -> Option<Closed> {
    let first = datetime::parse(&event.window_start)?.secs;
    let last = datetime::parse(&event.window_end)?.secs;
    let floor = after.map_or(first.max(last), |after| after.max(first).max(last));
    let end = grid.end_after(floor);
    let latest = first.min(last) + grid.span();
    if end > latest {
        return None;
    }
    Some(if end + grid.hop() > latest {
        Closed::Exactly(end)
    } else {
        Closed::AtLeast(end)
    })
}

/// The resume point `end` as a checkpoint state.
pub fn encode(end: i64) -> Vec<u8> {
    let mut state = Vec::with_capacity(ENCODED_LEN);
    state.push(KIND);
    state.push(VERSION);
    state.extend_from_slice(&end.to_le_bytes());
    state
}

/// Why a checkpoint's state is no resume point for the query read back
/// (a query's message after "could not be resumed after a restart: ").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// A resume point of another length.
    #[error(
        "its checkpoint state has {len} bytes, but a time window's resume point (version \
         {VERSION}) has {ENCODED_LEN}"
    )]
    Length {
        /// The state's length.
        len: usize,
    },
    /// A resume point past any datetime.
    #[error("its checkpoint resumes the windows at {end} s since the epoch, beyond any datetime")]
    Beyond {
        /// The resume point, in seconds since the epoch.
        end: i64,
    },
    /// A resume point that is not a window's end on the query's grid.
    #[error(
        "its checkpoint resumes the windows at {end} s since the epoch, which is no window's \
         end (a multiple of the hop, {hop} s)"
    )]
    NotAnEnd {
        /// The resume point, in seconds since the epoch.
        end: i64,
        /// The query's hop, in seconds.
        hop: i64,
    },
    /// Another version of the resume point.
    #[error(
        "its checkpoint holds version {version} of a time window's resume point, but this \
         mfstream reads version {VERSION}"
    )]
    Version {
        /// The state's version.
        version: u8,
    },
    /// Some other state.
    #[error("its checkpoint holds an engine state that is not a time window's resume point")]
    Foreign,
    /// A state for a query that keeps none.
    #[error(
        "its checkpoint holds an engine state, but only a time window on the local engine has one"
    )]
    Unexpected,
}

/// The resume point of a window on `grid`, read back from
/// a checkpoint state; why it is not one.
pub fn decode(state: &[u8], grid: Grid) -> Result<i64, StateError> {
    match state {
        [KIND, VERSION, end @ ..] => {
            let end: [u8; 8] = end
                .try_into()
                .map_err(|_| StateError::Length { len: state.len() })?;
            let end = i64::from_le_bytes(end);
            if !(-MAX_END..=MAX_END).contains(&end) {
                return Err(StateError::Beyond { end });
            }
            if !grid.is_end(end) {
                return Err(StateError::NotAnEnd {
                    end,
                    hop: grid.hop(),
                });
            }
            Ok(end)
        }
        [KIND, version, ..] => Err(StateError::Version { version: *version }),
        _ => Err(StateError::Foreign),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::vocab::{Aggregation, Value};

    fn g(span: i64, hop: i64) -> Grid {
        Grid::new(span, hop).expect("the tests' grids hop within their spans")
    }

    fn event(first: &str, last: &str) -> WindowEvent {
        WindowEvent {
            window_start: first.into(),
            window_end: last.into(),
            property: Arc::from("p"),
            aggregation: Aggregation::Count,
            value: Value::Number(1.0),
            count: 2,
            partial: false,
            late: 0,
            skipped: 0,
        }
    }

    const T0: &str = "1970-01-01T00:01:40Z"; // 100 s
    const T4: &str = "1970-01-01T00:01:44Z"; // 104 s
    const T9: &str = "1970-01-01T00:01:49.9Z"; // 109 s

    #[test]
    fn a_window_whose_records_fit_one_end_only_is_known_exactly() {
        // 10 s every 5 s: records at 100 s and 109 s share [100, 110) only.
        assert_eq!(
            closed(&event(T0, T9), g(10, 5), None),
            Some(Closed::Exactly(110))
        );
        // Tumbling: always exactly, from any one record.
        assert_eq!(
            closed(&event(T4, T4), g(10, 10), None),
            Some(Closed::Exactly(110))
        );
        assert_eq!(
            closed(&event(T9, T0), g(10, 10), Some(100)),
            Some(Closed::Exactly(110))
        );
    }

    #[test]
    fn a_window_whose_records_fit_several_ends_is_known_from_the_one_before() {
        // 100 s and 104 s are in [95, 105) and [100, 110).
        assert_eq!(
            closed(&event(T0, T4), g(10, 5), None),
            Some(Closed::AtLeast(105))
        );
        assert_eq!(
            closed(&event(T0, T4), g(10, 5), Some(105)),
            Some(Closed::Exactly(110))
        );
        // No window ending after 110 holds a record at 100 s.
        assert_eq!(closed(&event(T0, T4), g(10, 5), Some(110)), None);
        assert_eq!(closed(&event("yesterday", T4), g(10, 5), None), None);
    }

    #[test]
    fn a_resume_point_round_trips_and_damage_is_named() {
        assert_eq!(decode(&encode(-120), g(60, 60)), Ok(-120));
        assert_eq!(decode(&encode(1_767_225_600), g(5, 5)), Ok(1_767_225_600));
        let wrong = decode(&encode(7), g(5, 5)).unwrap_err();
        assert_eq!(wrong, StateError::NotAnEnd { end: 7, hop: 5 });
        let wrong = wrong.to_string();
        assert!(
            wrong.contains("no window's end") && wrong.contains("5 s"),
            "{wrong}"
        );
        let far = decode(&encode(i64::MAX), g(1, 1)).unwrap_err();
        assert_eq!(far, StateError::Beyond { end: i64::MAX });
        let far = far.to_string();
        assert!(far.contains("beyond any datetime"), "{far}");
        let short = decode(&encode(5)[..6], g(5, 5)).unwrap_err();
        assert_eq!(short, StateError::Length { len: 6 });
        let short = short.to_string();
        assert!(short.contains("6 bytes") && short.contains("10"), "{short}");
        let mut newer = encode(5);
        newer[1] = 2;
        let newer = decode(&newer, g(5, 5)).unwrap_err();
        assert_eq!(newer, StateError::Version { version: 2 });
        let newer = newer.to_string();
        assert!(
            newer.contains("version 2") && newer.contains("version 1"),
            "{newer}"
        );
        for other in [&b""[..], b"{}", &[0; 10]] {
            let e = decode(other, g(5, 5)).unwrap_err();
            assert_eq!(e, StateError::Foreign);
            let e = e.to_string();
            assert!(e.contains("not a time window's resume point"), "{e}");
        }
    }
}

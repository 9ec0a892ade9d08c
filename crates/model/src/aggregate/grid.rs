//! The boundaries of a time window (`TUMBLING` or `HOPPING`): windows
//! `[end − span, end)` whose ends are the epoch-aligned multiples of the
//! hop, in seconds since the epoch.
//!
//! The one home of this arithmetic: the windower, the watermarks a bridge
//! job is sent and the resume point of a durable query all read their
//! boundaries from a [`Grid`] (a window's is `Window::grid`), so they agree
//! on every window by construction (a `TUMBLING` window is the grid whose
//! hop is its span). A leaf: the window knows its grid, not the reverse.

/// The window ends of a time window: every multiple of `hop`, each closing
/// the window of the `span` seconds before it.
///
/// Its invariant, checked by its constructors: `0 < hop <= span`. An
/// instant `t` then lies in the windows ending in `(t, t + span]`, between
/// `span / hop` (rounded down) and `span / hop` (rounded up) of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    span: i64,
    hop: i64,
    /// gcd(span, hop): the width of the buckets every window is a union of.
    grain: i64,
}

impl Grid {
    /// The grid of windows of `span` seconds every `hop`; `None` unless
    /// `0 < hop <= span`.
    pub const fn new(span: i64, hop: i64) -> Option<Grid> {
        if span > 0 && 1 <= hop && hop <= span {
            Some(Grid {
                span,
                hop,
                grain: gcd(span, hop),
            })
        } else {
            None
        }
    }

    /// The grid nearest `span` and `hop`: a span of at least a second, a
    /// hop between a second and the span. For callers that hold a
    /// validated window (whose spans already are), so that they need no
    /// error path for what validation refused.
    pub fn clamped(span: i64, hop: i64) -> Grid {
        let span = span.max(1);
        let hop = hop.clamp(1, span);
        Grid {
            span,
            hop,
            grain: gcd(span, hop),
        }
    }

    /// The length of a window, in seconds.
    pub fn span(&self) -> i64 {
        self.span
    }

    /// The distance between two window ends, in seconds.
    pub fn hop(&self) -> i64 {
        self.hop
    }

    /// gcd(span, hop): every window is a union of whole buckets this wide,
    /// starting at its multiples.
    pub fn grain(&self) -> i64 {
        self.grain
    }

    /// The window end at or before `secs`.
    pub fn end_at_or_before(&self, secs: i64) -> i64 {
        secs - secs.rem_euclid(self.hop)
    }

    /// The first window end after `secs`: the end of the first window that
    /// holds an instant at `secs`.
    pub fn end_after(&self, secs: i64) -> i64 {
        self.end_at_or_before(secs) + self.hop
    }

    /// The end of the last window that holds an instant at `secs`.
    pub fn last_end(&self, secs: i64) -> i64 {
        self.end_at_or_before(secs + self.span)
    }

    /// Whether `secs` is a window end.
    pub fn is_end(&self, secs: i64) -> bool {
        secs.rem_euclid(self.hop) == 0
    }

    /// The start of the window after the one ending at `end`: the instants
    /// before it are in no window still to come.
    pub fn next_start(&self, end: i64) -> i64 {
        end + self.hop - self.span
    }

    /// The start of the bucket holding `secs`.
    pub fn bucket(&self, secs: i64) -> i64 {
        secs - secs.rem_euclid(self.grain)
    }
}

/// The greatest common divisor of two positive numbers.
const fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Grids up to a day, instants across a few centuries either side of
    /// the epoch (negative ones exercise the Euclidean rounding).
    fn grid() -> impl Strategy<Value = Grid> {
        (1i64..=86_400)
            .prop_flat_map(|span| (Just(span), 1..=span))
            .prop_map(|(span, hop)| Grid::new(span, hop).expect("0 < hop <= span by construction"))
    }

    const CENTURIES: i64 = 1 << 34;

    proptest! {
        /// Every instant lies in exactly the windows its first and last
        /// ends bound: `ceil(span / hop)` or `floor(span / hop)` of them,
        /// `span / hop` when the hop divides the span.
        #[test]
        fn every_instant_falls_in_span_over_hop_windows(g in grid(), t in -CENTURIES..CENTURIES) {
            let (first, last) = (g.end_after(t), g.last_end(t));
            prop_assert!(g.is_end(first) && g.is_end(last));
            // Each end in [first, last] closes a window holding t; the
            // ends just outside close windows without it.
            prop_assert!(first - g.span() <= t && t < first);
            prop_assert!(last - g.span() <= t && t < last);
            prop_assert!(!(first - g.hop() - g.span() <= t && t < first - g.hop()));
            prop_assert!(!(last + g.hop() - g.span() <= t && t < last + g.hop()));
            let windows = (last - first) / g.hop() + 1;
            let (span, hop) = (g.span(), g.hop());
            prop_assert!(windows == span / hop || windows == (span + hop - 1) / hop);
            if span % hop == 0 {
                prop_assert_eq!(windows, span / hop);
            }
        }

        /// The buckets tile the windows: every window's start and end is a
        /// bucket start, and an instant's bucket holds it.
        #[test]
        fn buckets_tile_every_window(g in grid(), t in -CENTURIES..CENTURIES) {
            let b = g.bucket(t);
            prop_assert!(b <= t && t < b + g.grain());
            let end = g.end_after(t);
            prop_assert_eq!(g.bucket(end), end);
            prop_assert_eq!(g.bucket(end - g.span()), end - g.span());
        }

        /// Resuming after the window ending at `end` needs exactly the
        /// instants whose last window ends after it.
        #[test]
        fn the_next_start_is_where_later_windows_begin(g in grid(), t in -CENTURIES..CENTURIES, e in -CENTURIES..CENTURIES) {
            let end = g.end_at_or_before(e);
            prop_assert_eq!(t >= g.next_start(end), g.last_end(t) > end);
        }
    }

    #[test]
    fn a_grid_needs_a_hop_within_its_span() {
        assert_eq!(Grid::new(0, 1), None);
        assert_eq!(Grid::new(10, 0), None);
        assert_eq!(Grid::new(10, 11), None);
        assert_eq!(Grid::new(10, 4).map(|g| g.grain()), Some(2));
        assert_eq!(Grid::clamped(0, 5), Grid::new(1, 1).expect("1 <= 1"));
        assert_eq!(Grid::clamped(10, 20), Grid::new(10, 10).expect("10 <= 10"));
    }
}

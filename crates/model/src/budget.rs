//! A query's state budget: the bytes one query may hold, counted where its
//! state grows and shrinks, so that one query over it fails alone instead
//! of taking the process down.
//!
//! A query holds four kinds of state, each counted by its owner:
//!
//! - its **geometry**: a position query's static GeoJSON (kept for `GET`)
//!   and what is built from it (a `distance` target's parts, a fence's
//!   edges and strip index), counted once when the query is registered,
//!   before it is built ([`StateBudget::hold_geometry`]): a registration
//!   whose geometry would pass its own limit or the server's total is
//!   refused;
//! - its **windows**: the open windows and buckets of its [`Windower`],
//!   with the distinct texts of `COUNT_DISTINCT` (the attacker's lever: a
//!   day-long window of distinct texts grows without end otherwise);
//! - its **pending** instants: handed to the query (in its source buffer)
//!   and not yet taken by its engine, and those a bridge job was sent and
//!   has not answered (the host's in-flight window and write buffer);
//! - its **replay** buffer: the results kept for subscribers.
//!
//! Each owner keeps its own count and publishes it here with one relaxed
//! atomic store per change (a record, a batch), never a walk over the
//! state. The windower and the source check the total when they grow and
//! fail the query with [`StateBudget::exceeded`]'s reason; the query's state
//! is then dropped with it.
//!
//! Bytes are an estimate of the heap held, not an allocator's exact figure:
//! a text counts its capacity plus `ENTRY_OVERHEAD` (its slot in a set,
//! the allocator's header), a bucket its size, an instant its size and its
//! strings' capacities.
//!
//! [`Windower`]: crate::aggregate::Windower

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::origin::Value;

/// What one entry of a set of texts costs beyond its bytes: the set's slot
/// (a `String`, 24 bytes, at a load of at least one half), its control byte
/// and the allocator's header of the text.
pub(crate) const ENTRY_OVERHEAD: u64 = 64;

/// The default budget: 64 MiB.
pub const DEFAULT_MAX_QUERY_STATE: u64 = 64 * 1024 * 1024;

/// The default bound on the state of every query together: 1 GiB.
pub const DEFAULT_MAX_TOTAL_QUERY_STATE: u64 = 1024 * 1024 * 1024;

/// How far a query's state may move before the total hears of it: the
/// total is then exact to this much per query, and a query's hot path
/// touches the shared counter once per this many bytes, not per record.
const REPORT_STEP: u64 = 64 * 1024;

/// The state of every query of a server together
/// (`--max-total-query-state`), so that many queries, each within its own
/// budget, cannot together exhaust the memory. Replay buffers are not
/// counted (`--replay-bytes` bounds each). Past it, a query that grows
/// while holding at least its share (the limit over the queries) fails:
/// the largest go first, the small ones are never failed for the others.
#[derive(Debug)]
pub struct StateTotal {
    limit: u64,
    /// How the limit is named in a failure: as its origin names it.
    option: String,
    used: AtomicU64,
    /// The budgets counted in it.
    budgets: AtomicU64,
}

impl StateTotal {
    /// A bound of `limit` bytes; failures name it as its origin does
    /// (`--max-total-query-state` from the command line; a plain number is
    /// the embedding program's `max_total_query_state`).
    pub fn new(limit: impl Into<Value<u64>>) -> StateTotal {
        let limit = limit.into();
        StateTotal {
            option: limit.name("max_total_query_state"),
            limit: limit.value,
            used: AtomicU64::new(0),
            budgets: AtomicU64::new(0),
        }
    }

    /// The bytes the queries hold now, as last reported.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }
}

/// The bytes of state one query may hold, and what it holds now.
///
/// Shared (`Arc`) between the query's parts: its windower, its source and
/// its replay buffer. Two budgets are equal when their limits are.
#[derive(Debug)]
pub struct StateBudget {
    limit: u64,
    /// How the limit is named in a failure: as its origin names it.
    option: String,
    /// A position query's static geometry, counted once at registration
    /// ([`StateBudget::hold_geometry`]).
    geometry: AtomicU64,
    windows: AtomicU64,
    pending: AtomicU64,
    in_flight: AtomicU64,
    ledger: AtomicU64,
    replay: AtomicU64,
    /// The server's total, and what this budget last reported to it.
    total: Option<Arc<StateTotal>>,
    reported: AtomicU64,
}

/// The part of a query's state a count is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Open windows, buckets and distinct sets.
    Windows,
    /// Instants handed to the query, not yet taken by its engine.
    Pending,
    /// Instants its engine took and has not answered, held by the host (a
    /// bridge job's in-flight window).
    InFlight,
    /// With `--state`: the instants fed since its checkpoint, which its
    /// ledger remembers to move the checkpoint.
    Ledger,
    /// Results kept for subscribers.
    Replay,
}

impl StateBudget {
    /// A budget of `limit` bytes; failures name it as its origin does
    /// (`--max-query-state` from the command line; a plain number is the
    /// embedding program's `max_query_state`).
    pub fn new(limit: impl Into<Value<u64>>) -> StateBudget {
        let limit = limit.into();
        StateBudget {
            option: limit.name("max_query_state"),
            limit: limit.value,
            geometry: AtomicU64::new(0),
            windows: AtomicU64::new(0),
            pending: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            ledger: AtomicU64::new(0),
            replay: AtomicU64::new(0),
            total: None,
            reported: AtomicU64::new(0),
        }
    }

    /// The same budget, counted in the server's `total` too.
    pub fn within(mut self, total: Arc<StateTotal>) -> StateBudget {
        total.budgets.fetch_add(1, Ordering::Relaxed);
        self.total = Some(total);
        self
    }

    /// What counts in the total: every part but the replay buffer.
    fn counted(&self) -> u64 {
        self.geometry
            .load(Ordering::Relaxed)
            .saturating_add(self.windows.load(Ordering::Relaxed))
            .saturating_add(self.waiting())
            .saturating_add(self.ledger.load(Ordering::Relaxed))
    }

    /// Tells the total, once the state has moved by [`REPORT_STEP`].
    fn report(&self) {
        let Some(total) = &self.total else {
            return;
        };
        let now = self.counted();
        let reported = self.reported.load(Ordering::Relaxed);
        if now.abs_diff(reported) < REPORT_STEP {
            return;
        }
        // One reporter applies each change.
        if self
            .reported
            .compare_exchange(reported, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            if now > reported {
                total.used.fetch_add(now - reported, Ordering::Relaxed);
            } else {
                total.used.fetch_sub(reported - now, Ordering::Relaxed);
            }
        }
    }

    /// The limit, in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The bytes held now, all parts together.
    pub fn used(&self) -> u64 {
        self.geometry
            .load(Ordering::Relaxed)
            .saturating_add(self.windows.load(Ordering::Relaxed))
            .saturating_add(self.waiting())
            .saturating_add(self.ledger.load(Ordering::Relaxed))
            .saturating_add(self.replay.load(Ordering::Relaxed))
    }

    /// Instants handed to the query and not yet answered.
    fn waiting(&self) -> u64 {
        self.pending
            .load(Ordering::Relaxed)
            .saturating_add(self.in_flight.load(Ordering::Relaxed))
    }

    fn counter(&self, part: Part) -> &AtomicU64 {
        match part {
            Part::Windows => &self.windows,
            Part::Pending => &self.pending,
            Part::InFlight => &self.in_flight,
            Part::Ledger => &self.ledger,
            Part::Replay => &self.replay,
        }
    }

    /// Sets what `part` holds now (its owner keeps the count).
    pub fn set(&self, part: Part, bytes: u64) {
        self.counter(part).store(bytes, Ordering::Relaxed);
        self.report();
    }

    /// Adds `bytes` to what `part` holds.
    pub fn add(&self, part: Part, bytes: u64) {
        self.counter(part).fetch_add(bytes, Ordering::Relaxed);
        self.report();
    }

    /// Takes `bytes` off what `part` holds.
    pub fn sub(&self, part: Part, bytes: u64) {
        // Never below zero, even if a count was reset meanwhile.
        let _ = self
            .counter(part)
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some(n.saturating_sub(bytes))
            });
        self.report();
    }

    /// Counts a query's static geometry, `bytes`, before the query is
    /// built: refused when they alone pass this budget's limit, or would
    /// take the server's total past its limit (the total is moved at once,
    /// not by `REPORT_STEP`s, so concurrent registrations cannot pass
    /// it together).
    pub fn hold_geometry(&self, bytes: u64) -> Result<(), GeometryRefused> {
        if bytes > self.limit {
            return Err(GeometryRefused::Query {
                bytes,
                limit: self.limit,
                option: self.option.clone(),
            });
        }
        if let Some(total) = &self.total {
            total
                .used
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                    let now = used.saturating_add(bytes);
                    (now <= total.limit).then_some(now)
                })
                .map_err(|used| GeometryRefused::Total {
                    bytes,
                    used,
                    limit: total.limit,
                    option: total.option.clone(),
                })?;
            self.reported.fetch_add(bytes, Ordering::Relaxed);
        }
        self.geometry.fetch_add(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// Counts a query's static geometry whatever the limits: a query
    /// registered before a restart is resumed, and its geometry counted,
    /// even when the limits were lowered meanwhile.
    pub fn count_geometry(&self, bytes: u64) {
        if let Some(total) = &self.total {
            total.used.fetch_add(bytes, Ordering::Relaxed);
            self.reported.fetch_add(bytes, Ordering::Relaxed);
        }
        self.geometry.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Why the query must fail, when it holds more than its limit: the
    /// reason names the limit, the option that sets it, and what holds the
    /// bytes.
    pub fn exceeded(&self) -> Option<String> {
        let used = self.used();
        if used <= self.limit {
            return self.total_exceeded();
        }
        let ledger = match self.ledger.load(Ordering::Relaxed) {
            0 => String::new(),
            n => format!(", instants remembered since its checkpoint {}", Bytes(n)),
        };
        let geometry = match self.geometry.load(Ordering::Relaxed) {
            0 => String::new(),
            n => format!(", its geometry {}", Bytes(n)),
        };
        Some(format!(
            "query state reached {} ({}): its windows hold {}, instants not yet answered \
             {}{ledger}{geometry} and its replay buffer {}; raise {} or use a shorter window",
            self.option,
            Bytes(self.limit),
            Bytes(self.windows.load(Ordering::Relaxed)),
            Bytes(self.waiting()),
            Bytes(self.replay.load(Ordering::Relaxed)),
            self.option,
        ))
    }
}

impl StateBudget {
    /// Why the query must fail when every query together holds more than
    /// the server's total: only a query holding at least its share.
    fn total_exceeded(&self) -> Option<String> {
        let total = self.total.as_ref()?;
        let used = total.used();
        if used <= total.limit {
            return None;
        }
        let share = total.limit / total.budgets.load(Ordering::Relaxed).max(1);
        let own = self.counted();
        if own < share {
            return None;
        }
        Some(format!(
            "the queries' state together reached {} ({}): this query holds {}, at least its \
             share ({}); raise {}, or delete queries",
            total.option,
            Bytes(total.limit),
            Bytes(own),
            Bytes(share),
            total.option,
        ))
    }
}

/// Why a query's geometry was refused at registration.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GeometryRefused {
    /// The geometry alone passes the query's own budget.
    #[error(
        "the geometry holds {} once parsed and indexed, more than the query's state may hold \
         ({option}, {}): simplify the geometry, or raise {option}",
        Bytes(*bytes),
        Bytes(*limit)
    )]
    Query {
        /// The geometry's bytes.
        bytes: u64,
        /// The query's limit.
        limit: u64,
        /// The option that sets it, as its origin names it.
        option: String,
    },
    /// The geometry would take the queries' state past the server's total.
    #[error(
        "the queries' state together would pass {option} ({}): they hold {} and this query's \
         geometry {} once parsed and indexed; delete queries, or raise {option}",
        Bytes(*limit),
        Bytes(*used),
        Bytes(*bytes)
    )]
    Total {
        /// The geometry's bytes.
        bytes: u64,
        /// What the queries hold now.
        used: u64,
        /// The server's total.
        limit: u64,
        /// The option that sets it, as its origin names it.
        option: String,
    },
}

impl Drop for StateBudget {
    fn drop(&mut self) {
        if let Some(total) = &self.total {
            total
                .used
                .fetch_sub(*self.reported.get_mut(), Ordering::Relaxed);
            total.budgets.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl PartialEq for StateBudget {
    fn eq(&self, other: &StateBudget) -> bool {
        self.limit == other.limit
    }
}

/// A byte count for people: `64 MiB`, `1.5 KiB`, `12 bytes`.
#[derive(Debug, Clone, Copy)]
pub struct Bytes(pub u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
        let n = self.0;
        if n < 1024 {
            return write!(f, "{n} bytes");
        }
        let mut value = n as f64 / 1024.0;
        let mut unit = 0;
        while value >= 1024.0 && unit + 1 < UNITS.len() {
            value /= 1024.0;
            unit += 1;
        }
        if value.fract() == 0.0 {
            write!(f, "{value} {}", UNITS[unit])
        } else {
            write!(f, "{value:.1} {}", UNITS[unit])
        }
    }
}

/// The heap an instant holds beyond its own size: its strings' capacities.
pub fn instant_bytes(instant: &crate::vocab::Instant) -> u64 {
    let text = match &instant.value {
        crate::vocab::Value::Text(s) => s.capacity() as u64,
        _ => 0,
    };
    std::mem::size_of::<crate::vocab::Instant>() as u64 + instant.datetime.capacity() as u64 + text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::origin::Origin;

    /// `bytes` from the command line's `flag`.
    fn flag(bytes: u64, flag: &'static str) -> Value<u64> {
        Value::new(bytes, Origin::flag(flag))
    }

    #[test]
    fn byte_counts_read_as_people_write_them() {
        assert_eq!(Bytes(12).to_string(), "12 bytes");
        assert_eq!(Bytes(64 * 1024 * 1024).to_string(), "64 MiB");
        assert_eq!(Bytes(1536).to_string(), "1.5 KiB");
        assert_eq!(Bytes(3 << 30).to_string(), "3 GiB");
    }

    #[test]
    fn past_the_total_only_queries_holding_their_share_fail_and_dropped_ones_leave_it() {
        let total = Arc::new(StateTotal::new(flag(1 << 20, "--max-total-query-state")));
        let big = StateBudget::new(u64::MAX).within(total.clone());
        let small = StateBudget::new(u64::MAX).within(total.clone());
        small.set(Part::Windows, 100 << 10);
        big.set(Part::Windows, 800 << 10);
        assert_eq!(total.used(), 900 << 10);
        assert_eq!(big.exceeded(), None);
        big.set(Part::Windows, 1000 << 10);
        // Reported by steps of 64 KiB: 1100 KiB of 1024.
        assert_eq!(total.used(), 1100 << 10);
        assert_eq!(small.exceeded(), None, "100 KiB is under its share");
        let reason = big.exceeded().expect("over the total, over its share");
        assert!(
            reason.starts_with("the queries' state together reached --max-total-query-state (1 MiB): this query holds 1000 KiB, at least its share (512 KiB)"),
            "{reason}"
        );
        drop(big);
        assert_eq!(total.used(), 100 << 10);
        assert_eq!(small.exceeded(), None);
    }

    #[test]
    fn a_geometry_is_refused_past_its_budget_or_the_total_and_given_back_with_its_query() {
        let total = Arc::new(StateTotal::new(flag(3 << 20, "--max-total-query-state")));
        let small = StateBudget::new(flag(1 << 20, "--max-query-state")).within(total.clone());
        let refused = small.hold_geometry(2 << 20).expect_err("2 MiB of 1 MiB");
        assert_eq!(
            refused.to_string(),
            "the geometry holds 2 MiB once parsed and indexed, more than the query's state may \
             hold (--max-query-state, 1 MiB): simplify the geometry, or raise --max-query-state"
        );
        assert_eq!((small.used(), total.used()), (0, 0), "nothing counted");
        let first = StateBudget::new(u64::MAX).within(total.clone());
        first.hold_geometry(2 << 20).expect("2 MiB of 3");
        assert_eq!((first.used(), total.used()), (2 << 20, 2 << 20));
        let second = StateBudget::new(u64::MAX).within(total.clone());
        let refused = second.hold_geometry(2 << 20).expect_err("4 MiB of 3");
        assert!(
            refused
                .to_string()
                .starts_with("the queries' state together would pass --max-total-query-state (3 MiB): they hold 2 MiB and this query's geometry 2 MiB"),
            "{refused}"
        );
        // Counted like any state: a small change later is not reported
        // twice, and the bytes go with the query.
        first.add(Part::Windows, 100);
        assert_eq!(first.used(), (2 << 20) + 100);
        drop(first);
        assert_eq!(total.used(), 0);
        second
            .hold_geometry(2 << 20)
            .expect("2 MiB of 3, the first gone");
        // A resumed query's geometry counts whatever the limits.
        let resumed = StateBudget::new(1).within(total.clone());
        resumed.count_geometry(2 << 20);
        assert_eq!(total.used(), 4 << 20);
        assert!(
            resumed
                .exceeded()
                .is_some_and(|r| r.contains("its geometry 2 MiB"))
        );
    }

    #[test]
    fn a_budget_is_exceeded_by_its_parts_together_and_names_its_option() {
        let budget = StateBudget::new(flag(1000, "--max-query-state"));
        budget.set(Part::Windows, 600);
        budget.add(Part::Pending, 300);
        assert_eq!(budget.exceeded(), None);
        budget.set(Part::Replay, 200);
        let reason = budget.exceeded().expect("1100 bytes of 1000");
        assert!(
            reason.starts_with(
                "query state reached --max-query-state (1000 bytes): its windows hold 600 bytes"
            ),
            "{reason}"
        );
        budget.sub(Part::Pending, 1000);
        assert_eq!(budget.used(), 800);
    }

    #[test]
    fn a_limit_the_embedding_program_set_is_named_by_its_field_not_a_flag() {
        let total = Arc::new(StateTotal::new(1 << 20));
        let budget = StateBudget::new(1000).within(total.clone());
        budget.set(Part::Windows, 1100);
        let reason = budget.exceeded().expect("1100 bytes of 1000");
        assert!(
            reason.starts_with(
                "query state reached the embedding program's max_query_state (1000 bytes)"
            ) && reason.contains("raise the embedding program's max_query_state or"),
            "{reason}"
        );
        let other = StateBudget::new(u64::MAX).within(total.clone());
        let refused = other.hold_geometry(2 << 20).expect_err("past the total");
        assert!(
            refused.to_string().starts_with(
                "the queries' state together would pass the embedding program's \
                 max_total_query_state (1 MiB)"
            ),
            "{refused}"
        );
    }
}

//! A query's replay ring in the journal, and the checks on its next
//! events and checkpoint.

use std::collections::VecDeque;
use std::sync::Arc;

use super::super::error::{CheckpointFault, StoreErrorKind};
use super::super::record::{Checkpoint, EventBatch, PropertyPath, StoredEvent};
use super::{Bounds, QueryLog, Row};

/// Checks a query's next events and checkpoint; returns its last event id
/// after them.
pub(super) fn check_events(
    query: &QueryLog,
    events: &EventBatch,
    checkpoint: Option<&Checkpoint>,
    next_seq: u64,
) -> Result<u64, StoreErrorKind> {
    if !events.is_empty() && events.first_id() != query.last_event_id + 1 {
        return Err(StoreErrorKind::EventOutOfOrder {
            query: query.id.to_string(),
            last: query.last_event_id,
            got: events.first_id(),
        });
    }
    let last_event_id = query.last_event_id + events.len() as u64;
    if let Some(cp) = checkpoint {
        let bad = |why: CheckpointFault| StoreErrorKind::BadCheckpoint {
            query: query.id.to_string(),
            why,
        };
        let old = &query.checkpoint;
        if cp.last_event_id > last_event_id {
            return Err(bad(CheckpointFault::PastEvents {
                at: cp.last_event_id,
                last: last_event_id,
            }));
        }
        if cp.after_seq < old.after_seq || cp.last_event_id < old.last_event_id {
            return Err(bad(CheckpointFault::Backwards {
                from_seq: old.after_seq,
                from_event: old.last_event_id,
                to_seq: cp.after_seq,
                to_event: cp.last_event_id,
            }));
        }
        if cp.after_seq >= next_seq {
            return Err(bad(CheckpointFault::PastInstants {
                after: cp.after_seq,
                last: next_seq - 1,
            }));
        }
    }
    Ok(last_event_id)
}

/// Adds a record to a query's ring, then drops its oldest records while
/// the ones after them still hold every event the ring keeps; the newest
/// always stays. The records kept hold the ring and at most one more;
/// reading them back trims to the ring exactly.
pub(super) fn push_row(query: &mut QueryLog, row: Row, bounds: Bounds) {
    query.ring.push_back(row);
    query.ring_len += row.len;
    query.ring_bytes += row.bytes;
    while query.ring.len() > 1 {
        let oldest = query.ring[0];
        let (len, bytes) = (query.ring_len - oldest.len, query.ring_bytes - oldest.bytes);
        if len < bounds.events && bytes < bounds.bytes {
            break;
        }
        query.ring.pop_front();
        query.ring_len = len;
        query.ring_bytes = bytes;
    }
}

/// The ring as its bounds say: the oldest events go while it is over a
/// bound, but the newest always stays.
pub(super) fn trim(ring: &mut Vec<StoredEvent>, bounds: Bounds) {
    let mut bytes: usize = ring.iter().map(StoredEvent::size).sum();
    let mut drop = 0;
    while ring.len() - drop > 1 && (ring.len() - drop > bounds.events || bytes > bounds.bytes) {
        bytes -= ring[drop].size();
        drop += 1;
    }
    ring.drain(..drop);
}

impl QueryLog {
    pub(super) fn new(id: &str, property: PropertyPath, running: bool, start_seq: u64) -> QueryLog {
        QueryLog {
            id: Arc::from(id),
            property,
            running,
            last_event_id: 0,
            checkpoint: Checkpoint {
                after_seq: start_seq,
                last_event_id: 0,
                state: None,
                skipped: 0,
            },
            checkpoint_loc: None,
            ring: VecDeque::new(),
            ring_len: 0,
            ring_bytes: 0,
        }
    }
}

//! The records the store keeps, as its callers see them.

use std::time::SystemTime;

use mfstream_model::{Event, EventKind, Instant, QueryStatus};

pub(crate) use mfstream_model::PropertyPath;

/// A query to register: what `POST …/queries` accepted.
#[derive(Debug, Clone)]
pub struct NewQuery {
    /// The query id.
    pub id: String,
    /// The property it reads.
    pub property: PropertyPath,
    /// The registration body (or the resolved spec) as JSON, verbatim.
    pub spec: String,
    /// The engine it runs on.
    pub engine: String,
    /// When it was registered.
    pub created: SystemTime,
}

/// One result event of a query, as it is sent: its id, its SSE event name
/// and its JSON data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    /// The event id (the SSE `id:`), from 1, without gaps.
    pub id: u64,
    /// The SSE event name: `instant`, `window`.
    pub kind: EventKind,
    /// The JSON data.
    pub data: String,
}

impl StoredEvent {
    /// The event `event` with the id `id`, rendered as the fan-out renders
    /// it.
    pub fn new(id: u64, event: &Event) -> StoredEvent {
        StoredEvent {
            id,
            kind: event.kind(),
            data: event.to_json(),
        }
    }

    /// The bytes the record takes in the replay ring's byte bound.
    pub fn size(&self) -> usize {
        self.kind.as_str().len() + self.data.len()
    }
}

/// A query's next results, encoded as the store keeps them (one journal
/// record per batch), built event by event from each event's kind and JSON data,
/// without a `String` per event. The ids are consecutive from the first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventBatch {
    first_id: u64,
    count: usize,
    /// The kinds' and data's bytes.
    bytes: usize,
    /// The largest event's.
    largest: usize,
    data: Vec<u8>,
}

impl EventBatch {
    /// An empty batch whose first event will have the id `first_id`.
    pub fn new(first_id: u64) -> EventBatch {
        EventBatch {
            first_id,
            ..EventBatch::default()
        }
    }

    /// Adds the next event: its kind (`instant`, `window`) and its JSON
    /// data (UTF-8, as JSON always is).
    pub fn push(&mut self, kind: EventKind, data: &[u8]) {
        let kind = kind.as_str();
        super::frame::put_bytes(kind.as_bytes(), &mut self.data);
        super::frame::put_bytes(data, &mut self.data);
        self.count += 1;
        self.bytes += kind.len() + data.len();
        self.largest = self.largest.max(kind.len() + data.len());
    }

    /// The id of the first event.
    pub fn first_id(&self) -> u64 {
        self.first_id
    }

    /// The number of events.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The bytes of the batch's events together.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The bytes of its largest event.
    pub fn largest(&self) -> usize {
        self.largest
    }

    /// The events, encoded.
    pub fn data(&self) -> &[u8] {
        &self.data
    }
}

/// A point a query can be resumed from after a restart.
///
/// It says: an engine put in `state` (a fresh engine when `None`) and fed
/// the property's instants with sequence numbers above `after_seq`, in order,
/// produces as its `k`-th result the event `last_event_id + k`. The
/// instants up to `after_seq` are no longer needed by this query (its
/// low-water mark).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Checkpoint {
    /// The last ingest sequence number reflected in the engine state.
    pub after_seq: u64,
    /// The id of the last event the engine had produced at that point.
    pub last_event_id: u64,
    /// The engine state at that point (open windows and watermark,
    /// serialised by the engine), or `None` for a fresh engine.
    pub state: Option<Vec<u8>>,
    /// The records (or windows) the query skipped under `onError: skip`
    /// whose count the events up to `last_event_id` carried: those not
    /// computed again after a restart, so that its total goes on from here.
    pub skipped: u64,
}

/// One ingested instant with its sequence number in the ingest log.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedInstant {
    /// The sequence number: increasing across all properties, never reused.
    pub seq: u64,
    /// The instant.
    pub instant: Instant,
}

/// A query as it was when the store was last written.
#[derive(Debug, Clone)]
pub struct RestoredQuery {
    /// The query id.
    pub id: String,
    /// The property it reads.
    pub property: PropertyPath,
    /// The registration as JSON, as given to [`Store::register`](super::Store::register).
    pub spec: String,
    /// The engine it runs on.
    pub engine: String,
    /// Its last recorded status.
    pub status: QueryStatus,
    /// When it was registered.
    pub created: SystemTime,
    /// The id of the last event stored (0 before the first).
    pub last_event_id: u64,
    /// The replay ring: the last events, oldest first, ending at
    /// `last_event_id`.
    pub ring: Vec<StoredEvent>,
    /// Where to resume its engine from.
    pub checkpoint: Checkpoint,
}

/// Gives a query's results their ids, skipping those stored before a
/// restart.
///
/// A new query starts at 1. A restored one is resumed at its checkpoint:
/// the engine's `k`-th result is the event `checkpoint.last_event_id + k`,
/// and every id up to the last stored one is a result that was stored (and
/// perhaps sent) before the restart, so it is neither stored nor sent again.
#[derive(Debug, Clone)]
pub struct EventIds {
    next: u64,
    stored: u64,
}

/// The id of the engine's next result, and whether it is new.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assigned {
    /// Stored (and perhaps sent) before the restart: drop it.
    Duplicate(u64),
    /// New: store it with this id, then send it.
    New(u64),
}

impl EventIds {
    /// The ids of a new query: 1, 2, …
    pub fn new() -> EventIds {
        EventIds { next: 1, stored: 0 }
    }

    /// The ids of a query resumed from its checkpoint.
    pub fn resume(query: &RestoredQuery) -> EventIds {
        EventIds {
            next: query.checkpoint.last_event_id + 1,
            stored: query.last_event_id,
        }
    }

    /// The id of the engine's next result.
    pub fn assign(&mut self) -> Assigned {
        let id = self.next;
        self.next += 1;
        if id <= self.stored {
            Assigned::Duplicate(id)
        } else {
            Assigned::New(id)
        }
    }

    /// The id of the last result assigned (0 before the first).
    pub fn last(&self) -> u64 {
        self.next - 1
    }
}

impl Default for EventIds {
    fn default() -> EventIds {
        EventIds::new()
    }
}

//! Fan-out: one query's results to every SSE subscriber, through a bounded
//! replay buffer.
//!
//! Each result is rendered once into its SSE frame (`id:`, `event:`,
//! `data:`) and kept in a ring of the last `replay` frames, and of no more
//! than `replay_bytes` bytes of them (the newest frame is always kept). A subscriber is a
//! cursor into that ring: it reads what it has not yet sent, as fast as its
//! connection takes it. So a subscriber's backlog is bounded by the ring, the
//! query never waits for a slow subscriber, and a subscriber whose cursor
//! fell off the ring's tail is told how many events it missed
//! (`event: lagged`) instead of skipping them silently. A reconnect with
//! `Last-Event-ID` puts the cursor back where the client left off.
//!
//! A `Last-Event-ID` past the query's last event is a history this server
//! does not have (the client saw events of a state directory since restored
//! from an older backup, or of another server): it is never taken as "up to
//! date". The stream opens with `event: reset` and
//! `data: {"lastEventId":N}`, N the query's last event id, and then goes on
//! as a new subscriber's does, from the oldest event kept. The reset frame
//! has no `id:`, so a client that reconnects before the next event sends
//! its old id again and is told again.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::sync::watch;

use mfstream_model::budget::{Part, StateBudget};
use mfstream_model::{Event, QueryStatus};
use mfstream_store::StoredEvent;

use super::metrics::QueryTally;
use super::wire::{EndEvent, LaggedEvent, ResetEvent, Status};

/// The most bytes one read of a subscriber takes from the ring at once.
const MAX_CHUNK: usize = 256 * 1024;

/// The results of one query, for its subscribers.
#[derive(Debug)]
pub(crate) struct Fanout {
    ring: Mutex<Ring>,
    /// The id of the next event; bumped on every push and at the end, so
    /// subscribers wake.
    changed: watch::Sender<u64>,
    subscribers: AtomicUsize,
    max_subscribers: usize,
    /// Its counts for `GET /metrics` that nothing else keeps.
    pub(crate) tally: QueryTally,
}

#[derive(Debug)]
struct Ring {
    frames: VecDeque<Bytes>,
    /// The bytes of `frames`.
    bytes: usize,
    /// The most bytes kept.
    max_bytes: usize,
    /// The id of `frames[0]` (ids start at 1).
    first: u64,
    /// The id the next event gets.
    next: u64,
    capacity: usize,
    /// The final `event: end` frame, once the query has ended.
    end: Option<Bytes>,
    /// The query's state budget, which the ring counts in.
    budget: Option<Arc<StateBudget>>,
}

impl Ring {
    /// Publishes what the ring holds to the query's budget: its frames and
    /// their slots.
    fn charge(&self) {
        if let Some(budget) = &self.budget {
            let slots = self.frames.len() * std::mem::size_of::<Bytes>();
            budget.set(Part::Replay, (self.bytes + slots) as u64);
        }
    }
}

/// Too many subscribers on one query.
#[derive(Debug)]
pub(crate) struct Full;

impl Fanout {
    pub(crate) fn new(replay: usize, replay_bytes: usize, max_subscribers: usize) -> Fanout {
        Fanout {
            ring: Mutex::new(Ring {
                // Grown as results come: a query that has few costs little.
                frames: VecDeque::with_capacity(replay.min(64)),
                bytes: 0,
                max_bytes: replay_bytes,
                first: 1,
                next: 1,
                capacity: replay.max(1),
                end: None,
                budget: None,
            }),
            changed: watch::channel(1).0,
            subscribers: AtomicUsize::new(0),
            max_subscribers,
            tally: QueryTally::default(),
        }
    }

    fn ring(&self) -> MutexGuard<'_, Ring> {
        // A panic while holding the lock cannot leave the ring inconsistent
        // (every update is a push or pop), so a poisoned lock is still usable.
        self.ring.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a batch of results. Only the query's pump calls this, so the
    /// ids can be read first and the frames rendered outside the lock.
    pub(crate) fn push(&self, events: &[Event]) {
        let first_id = self.ring().next;
        let mut buf = BytesMut::with_capacity(events.len() * 128);
        let mut frames = Vec::with_capacity(events.len());
        let mut json = Vec::with_capacity(128);
        for (id, event) in (first_id..).zip(events) {
            json.clear();
            event.write_json(&mut json);
            frames.push(frame(&mut buf, id, event.kind().as_str(), &json));
        }
        self.push_frames(frames);
    }

    /// Counts the ring in `budget`, the query's state budget, from now on.
    pub(crate) fn count_in(&self, budget: Arc<StateBudget>) {
        let mut ring = self.ring();
        ring.budget = Some(budget);
        ring.charge();
    }

    /// Renders stored results (each with its id) into their frames, outside
    /// any lock: hand them to [`Fanout::push_frames`] once stored.
    pub(crate) fn render(events: &[StoredEvent]) -> Vec<Bytes> {
        let size = events.iter().map(|e| e.data.len() + 32).sum();
        let mut buf = BytesMut::with_capacity(size);
        events
            .iter()
            .map(|e| frame(&mut buf, e.id, e.kind.as_str(), e.data.as_bytes()))
            .collect()
    }

    /// Adds rendered frames, the first with the id the ring expects next
    /// (the pump numbers them: [`mfstream_store::EventIds`]).
    pub(crate) fn push_frames(&self, frames: Vec<Bytes>) {
        let mut ring = self.ring();
        for frame in frames {
            ring.bytes += frame.len();
            ring.frames.push_back(frame);
            ring.next += 1;
            while ring.frames.len() > ring.capacity
                || (ring.bytes > ring.max_bytes && ring.frames.len() > 1)
            {
                if let Some(old) = ring.frames.pop_front() {
                    ring.bytes -= old.len();
                }
                ring.first += 1;
            }
        }
        ring.charge();
        let next = ring.next;
        drop(ring);
        self.changed.send_replace(next);
    }

    /// A fan-out restored from the state store: its ring holds `ring` (the
    /// last events stored, oldest first), and the next event's id is
    /// `last_event_id + 1`. A subscriber resuming from an id before the
    /// ring is told exactly how many it missed, as before the restart.
    pub(crate) fn restore(
        replay: usize,
        replay_bytes: usize,
        max_subscribers: usize,
        ring: &[StoredEvent],
        last_event_id: u64,
    ) -> Fanout {
        let fanout = Fanout::new(replay, replay_bytes, max_subscribers);
        // Events stored before the ring's first were trimmed off it.
        let first = ring.first().map_or(last_event_id + 1, |e| e.id);
        {
            let mut r = fanout.ring();
            r.first = first;
            r.next = first;
        }
        fanout.push_frames(Fanout::render(ring));
        let mut r = fanout.ring();
        if r.next != last_event_id + 1 {
            // A ring that does not end at the last id (it cannot happen with
            // a store the writer kept): start after the last id, so that no
            // id is ever given twice.
            tracing::warn!(
                next = r.next,
                last_event_id,
                "restored ring does not end at the last event"
            );
            r.frames.clear();
            r.bytes = 0;
            r.first = last_event_id + 1;
            r.next = last_event_id + 1;
        }
        drop(r);
        fanout
    }

    /// Ends the results with the query's final status; the first call
    /// wins (a shutdown may end them before the query's pump does).
    pub(crate) fn finish(&self, status: &QueryStatus) {
        let data = end_data(status);
        let mut ring = self.ring();
        if ring.end.is_some() {
            return;
        }
        let frame = format!("id: {}\nevent: end\ndata: {data}\n\n", ring.next - 1);
        ring.end = Some(Bytes::from(frame));
        let next = ring.next;
        drop(ring);
        self.changed.send_replace(next);
    }

    /// The number of events so far.
    pub(crate) fn events(&self) -> u64 {
        self.ring().next - 1
    }

    /// The subscribers now.
    pub(crate) fn subscribers(&self) -> usize {
        self.subscribers.load(Ordering::Relaxed)
    }

    /// The bytes of state of the query whose budget the ring counts in
    /// (its windows, waiting instants and this ring); 0 for a query that
    /// ended before this start (it has none).
    pub(crate) fn state_bytes(&self) -> u64 {
        self.ring()
            .budget
            .as_ref()
            .map_or(0, |budget| budget.used())
    }

    /// A new subscriber, starting after event `last_event_id` (from a
    /// reconnect's `Last-Event-ID`), else at the oldest event still kept;
    /// after an `event: reset` at the oldest kept when `last_event_id` is
    /// past the last event (see the module's docs).
    pub(crate) fn subscribe(
        self: &Arc<Self>,
        last_event_id: Option<u64>,
        keep_alive: Duration,
    ) -> Result<Subscriber, Full> {
        let taken = self
            .subscribers
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_subscribers).then_some(n + 1)
            });
        if taken.is_err() {
            return Err(Full);
        }
        let (cursor, reset) = {
            let ring = self.ring();
            let last = ring.next - 1;
            match last_event_id {
                Some(id) if id > last => (
                    ring.first,
                    Some(Bytes::from(format!(
                        "event: reset\ndata: {}\n\n",
                        data(&ResetEvent {
                            last_event_id: last
                        })
                    ))),
                ),
                Some(id) => (id + 1, None),
                None => (ring.first, None),
            }
        };
        Ok(Subscriber {
            fanout: self.clone(),
            changed: self.changed.subscribe(),
            cursor,
            reset,
            done: false,
            keep_alive,
        })
    }
}

/// One SSE frame: `id:`, `event:`, `data:`, split off `buf` (the frames of
/// a batch share one allocation).
pub(crate) fn frame(buf: &mut BytesMut, id: u64, kind: &str, json: &[u8]) -> Bytes {
    buf.extend_from_slice(b"id: ");
    buf.extend_from_slice(itoa::Buffer::new().format(id).as_bytes());
    buf.extend_from_slice(b"\nevent: ");
    buf.extend_from_slice(kind.as_bytes());
    buf.extend_from_slice(b"\ndata: ");
    buf.extend_from_slice(json);
    buf.extend_from_slice(b"\n\n");
    buf.split().freeze()
}

/// The `end` event's data: `{"status":"failed","reason":"…"}`.
pub(crate) fn end_data(status: &QueryStatus) -> String {
    data(&EndEvent {
        status: Status::from(status),
        reason: match status {
            QueryStatus::Failed { reason } => Some(reason.clone()),
            _ => None,
        },
    })
}

/// An event of the server's own as its frame's `data:`.
fn data(event: &impl serde::Serialize) -> String {
    serde_json::to_string(event).expect("an event of numbers and strings serialises")
}

/// One subscriber's cursor into a query's results.
#[derive(Debug)]
pub(crate) struct Subscriber {
    fanout: Arc<Fanout>,
    changed: watch::Receiver<u64>,
    /// The id of the next event to send.
    cursor: u64,
    /// The `reset` frame to send before anything else, if the client's
    /// `Last-Event-ID` was ahead of the query.
    reset: Option<Bytes>,
    done: bool,
    keep_alive: Duration,
}

impl Subscriber {
    /// The next bytes of the SSE stream: events, a `lagged` notice, a
    /// keep-alive comment when idle, and last the `end` event; `None` after
    /// that.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the cursor only moves when bytes are returned.
    pub(crate) async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            if self.done {
                return None;
            }
            // Marked seen before reading the ring, so that a push after the
            // read always wakes the wait below.
            self.changed.borrow_and_update();
            if let Some(chunk) = self.take() {
                return Some(chunk);
            }
            match tokio::time::timeout(self.keep_alive, self.changed.changed()).await {
                Err(_) => return Some(Bytes::from_static(b": keep-alive\n\n")),
                Ok(Ok(())) => {}
                // The fanout (and its sender) outlives every subscriber.
                Ok(Err(_)) => return None,
            }
        }
    }

    /// What is ready now, if anything.
    fn take(&mut self) -> Option<Bytes> {
        let ring = self.fanout.ring();
        let mut out = BytesMut::new();
        if let Some(reset) = self.reset.take() {
            out.extend_from_slice(&reset);
        }
        if self.cursor < ring.first {
            let missed = ring.first - self.cursor;
            self.fanout.tally.count_lag(missed);
            out.extend_from_slice(
                format!(
                    "id: {}\nevent: lagged\ndata: {}\n\n",
                    ring.first - 1,
                    data(&LaggedEvent { missed })
                )
                .as_bytes(),
            );
            self.cursor = ring.first;
        }
        let start = (self.cursor - ring.first) as usize;
        for frame in ring.frames.iter().skip(start) {
            if out.len() >= MAX_CHUNK {
                break;
            }
            out.extend_from_slice(frame);
            self.cursor += 1;
        }
        if self.cursor == ring.next
            && let Some(end) = &ring.end
        {
            out.extend_from_slice(end);
            self.done = true;
        }
        (!out.is_empty()).then(|| out.freeze())
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.fanout.subscribers.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mfstream_model::{InstantEvent, Value};

    fn event(i: u64) -> Event {
        Event::Instant(InstantEvent {
            datetime: format!("t{i}"),
            value: Value::Number(i as f64),
            property: "p".into(),
            operation: "abs".into(),
            skipped: 0,
        })
    }

    fn text(chunk: Option<Bytes>) -> String {
        String::from_utf8(chunk.expect("a chunk").to_vec()).unwrap()
    }

    const IDLE: Duration = Duration::from_secs(60);

    #[tokio::test]
    async fn a_subscriber_that_fell_off_the_ring_is_told_how_many_it_missed() {
        let fanout = Arc::new(Fanout::new(3, usize::MAX, 1));
        let mut sub = fanout.subscribe(None, IDLE).unwrap();
        fanout.push(&(1..=5).map(event).collect::<Vec<_>>());
        let chunk = text(sub.next_chunk().await);
        assert!(
            chunk.starts_with("id: 2\nevent: lagged\ndata: {\"missed\":2}\n\n"),
            "{chunk}"
        );
        assert!(chunk.contains("id: 3\nevent: instant\n"), "{chunk}");
        assert!(
            chunk.ends_with("\"t5\",\"value\":5,\"property\":\"p\",\"operation\":\"abs\"}\n\n")
        );
    }

    #[tokio::test]
    async fn the_ring_is_bounded_in_bytes_as_well_as_in_events() {
        let frame = {
            let fanout = Arc::new(Fanout::new(1, usize::MAX, 1));
            fanout.push(&[event(1)]);
            fanout.ring().bytes
        };
        // Room for three frames of that size, and for 100 events.
        let fanout = Arc::new(Fanout::new(100, 3 * frame + 1, 1));
        fanout.push(&(1..=9).map(event).collect::<Vec<_>>());
        let ring = fanout.ring();
        assert_eq!((ring.first, ring.frames.len()), (7, 3));
        assert!(ring.bytes <= 3 * frame + 1, "{}", ring.bytes);
        drop(ring);
        // A frame larger than the bound alone is still kept: the newest
        // result is never dropped before anyone could read it.
        let tiny = Arc::new(Fanout::new(100, 1, 1));
        tiny.push(&[event(1), event(2)]);
        assert_eq!(tiny.ring().frames.len(), 1);
    }

    #[tokio::test]
    async fn the_ring_counts_in_its_querys_budget_as_it_fills_and_trims() {
        let budget = Arc::new(StateBudget::new(1 << 20));
        let fanout = Arc::new(Fanout::new(2, usize::MAX, 1));
        fanout.count_in(budget.clone());
        assert_eq!(budget.used(), 0);
        fanout.push(&[event(1)]);
        let one = budget.used();
        assert!(one > 64, "a frame and its slot: {one}");
        fanout.push(&[event(2), event(3), event(4)]);
        assert_eq!(budget.used(), 2 * one, "two frames kept of four");
    }

    #[tokio::test]
    async fn the_first_end_wins() {
        let fanout = Arc::new(Fanout::new(10, usize::MAX, 1));
        fanout.finish(&QueryStatus::Stopped);
        fanout.finish(&QueryStatus::Failed {
            reason: "late".into(),
        });
        let mut sub = fanout.subscribe(None, IDLE).unwrap();
        assert!(text(sub.next_chunk().await).contains("\"stopped\""));
    }

    #[tokio::test]
    async fn last_event_id_resumes_after_that_event_and_the_end_comes_last() {
        let fanout = Arc::new(Fanout::new(10, usize::MAX, 2));
        fanout.push(&(1..=4).map(event).collect::<Vec<_>>());
        fanout.finish(&QueryStatus::Failed {
            reason: "boom".into(),
        });
        let mut sub = fanout.subscribe(Some(2), IDLE).unwrap();
        let chunk = text(sub.next_chunk().await);
        assert!(chunk.starts_with("id: 3\n"), "{chunk}");
        assert!(
            chunk.ends_with(
                "id: 4\nevent: end\ndata: {\"status\":\"failed\",\"reason\":\"boom\"}\n\n"
            ),
            "{chunk}"
        );
        assert!(sub.next_chunk().await.is_none());
    }

    #[tokio::test]
    async fn a_last_event_id_ahead_of_the_query_gets_a_reset_then_the_history() {
        let fanout = Arc::new(Fanout::new(2, usize::MAX, 3));
        fanout.push(&(1..=3).map(event).collect::<Vec<_>>());
        let mut ahead = fanout.subscribe(Some(9), IDLE).unwrap();
        let chunk = text(ahead.next_chunk().await);
        assert!(
            chunk.starts_with("event: reset\ndata: {\"lastEventId\":3}\n\nid: 2\n"),
            "{chunk}"
        );
        assert!(!chunk.contains("lagged"), "{chunk}");
        assert!(chunk.contains("id: 3\n"), "{chunk}");
        // Up to date is not ahead; and the reset comes once.
        let mut level = fanout.subscribe(Some(3), IDLE).unwrap();
        fanout.push(&[event(4)]);
        assert!(text(level.next_chunk().await).starts_with("id: 4\n"));
        assert!(text(ahead.next_chunk().await).starts_with("id: 4\n"));
        // A query with no event yet: the reset says 0.
        let empty = Arc::new(Fanout::new(2, usize::MAX, 1));
        empty.finish(&QueryStatus::Stopped);
        let mut sub = empty.subscribe(Some(1), IDLE).unwrap();
        let chunk = text(sub.next_chunk().await);
        assert!(
            chunk.starts_with("event: reset\ndata: {\"lastEventId\":0}\n\nid: 0\nevent: end"),
            "{chunk}"
        );
    }

    #[tokio::test]
    async fn subscribers_beyond_the_bound_are_refused_until_one_leaves() {
        let fanout = Arc::new(Fanout::new(10, usize::MAX, 1));
        let first = fanout.subscribe(None, IDLE).unwrap();
        assert!(fanout.subscribe(None, IDLE).is_err());
        drop(first);
        assert!(fanout.subscribe(None, IDLE).is_ok());
    }

    #[tokio::test]
    async fn an_idle_subscriber_gets_keep_alive_comments() {
        let fanout = Arc::new(Fanout::new(10, usize::MAX, 1));
        let mut sub = fanout.subscribe(None, Duration::from_millis(1)).unwrap();
        assert_eq!(text(sub.next_chunk().await), ": keep-alive\n\n");
    }
}

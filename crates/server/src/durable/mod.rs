//! The server's durable side (`mfstream serve --state DIR`): how each query
//! moves its checkpoint, and how its results are numbered, stored and only
//! then sent. The store itself, and the exactly-once argument, are in
//! [`mfstream_store`]; this module is the server's half of that table.
//!
//! # Checkpoints: replay from the oldest window still to come
//!
//! A checkpoint `(after_seq, last_event_id, state)` says that an engine
//! resumed at `state` (a fresh one when `None`) and fed the instants after
//! `after_seq` gives as its `k`-th result the event `last_event_id + k`. No
//! open window is serialised: the checkpoint is kept at an ingest sequence
//! number from which no result still to come needs an earlier instant, and
//! after a restart the engine is fed the logged instants from there;
//! results it had already stored get their old ids again and are dropped
//! ([`EventIds`]). Each query's [`Ledger`] keeps the sequence numbers (and,
//! for a time window, the event times) of the instants fed to it since its
//! checkpoint, and each result moves the checkpoint by the [`Rule`] of the
//! query's kind:
//!
//! - a transform gives one result per instant: the `k`-th result covers
//!   the `k`-th instant fed;
//! - a `COUNT n` window (of the instants or of a transform's outputs)
//!   covers `n` instants;
//! - a time window, `TUMBLING` or `HOPPING` (`span` seconds every `hop`;
//!   `TUMBLING` is `hop == span`): once the window `[end − span, end)` is
//!   emitted, every window still to come starts at or after
//!   `end + hop − span`. The instants fed before the first one at or past
//!   that start are in windows emitted, or were late (their count is in an
//!   event), so the checkpoint moves to just before that first one, with
//!   `end` as its state: an engine resumed at `end`
//!   ([`mfstream_model::aggregate::resume`]: it emits no window ending by `end`, and
//!   counts as late a record that only those hold) and fed the instants
//!   from there emits the windows after `end` that the running one emitted.
//!   Unless an instant before that start was fed after that first one (out
//!   of order, within a `grace` or late), which the resumed engine might
//!   count in a window rather than as late: then the checkpoint stays where
//!   it was (still valid, it only replays more) until a later window. An
//!   event names its window only through the datetimes of its first and
//!   last records: when they fit several (sparse records of a `HOPPING`
//!   window), the checkpoint waits for a later window whose end they tell;
//! - a query on a bridge or plugin engine (whose job or library may filter,
//!   or emit several results per instant) never moves its checkpoint: after
//!   a restart it is replayed from its registration. That is exactly once
//!   too, but its instants are kept in the log for as long as it runs.
//!
//! The checkpoint handed out with a batch of results names the event of
//! the result that moved it, which later results of the batch may follow.
//!
//! A window closed by the wall clock (`grace`, issue 12 part 1) is not a
//! function of the instants alone: the checkpoint moves past every instant
//! fed before it was emitted, with that window's end as its state, so a
//! restart neither loses nor doubles those. The replay runs on a held
//! clock (`restore`): the instants after the checkpoint fall in their
//! windows by their datetimes, as before the restart, whatever the
//! downtime. But a record that arrives later, for a window the clock had
//! passed with no record in it, may be counted in a window after a restart
//! rather than as late.

mod ledger;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use bytes::BytesMut;

use mfstream_model::budget::Bytes;
use mfstream_model::{Event, Instant};
use mfstream_store::{Assigned, EventBatch, EventIds, Store, StoreError, StoreErrorKind};

use super::fanout::Fanout;
use super::problem::Problem;

pub(crate) use self::ledger::{Ledger, Rule};

/// A query's results on their way to the store and then the fan-out.
#[derive(Debug)]
pub(crate) struct Keeper {
    pub(crate) store: Arc<Store>,
    pub(crate) ids: EventIds,
    pub(crate) ledger: Arc<Ledger>,
}

/// Whether an error of the store means the query was deleted meanwhile.
pub(crate) fn is_unknown(e: &StoreError) -> bool {
    matches!(e.kind(), mfstream_store::StoreErrorKind::UnknownQuery(_))
}

impl Keeper {
    /// Numbers a batch of results, drops those stored before a restart,
    /// stores the rest (with the checkpoint they reach), and only then hands
    /// them to the fan-out. While the state directory cannot be reached
    /// ([`StoreErrorKind::Unreachable`]: its permissions changed) it waits,
    /// offering them again now and then; any other error is the caller's.
    pub(crate) async fn keep(
        &mut self,
        query: &str,
        batch: &[Event],
        fanout: &Fanout,
    ) -> Result<(), StoreError> {
        self.ledger.results(batch);
        let mut new = None;
        let mut frames = Vec::with_capacity(batch.len());
        let mut buf = BytesMut::with_capacity(batch.len() * 160);
        let mut json = Vec::with_capacity(128);
        for event in batch {
            let Assigned::New(id) = self.ids.assign() else {
                continue;
            };
            json.clear();
            event.write_json(&mut json);
            new.get_or_insert_with(|| EventBatch::new(id))
                .push(event.kind(), &json);
            frames.push(super::fanout::frame(
                &mut buf,
                id,
                event.kind().as_str(),
                &json,
            ));
        }
        let Some(new) = new else {
            return Ok(());
        };
        let checkpoint = self.ledger.checkpoint(self.ids.last());
        let mut pause = FIRST_PAUSE;
        let mut waiting = false;
        // A state directory that cannot be reached for now (its permissions
        // changed) is waited for: the results are stored, then sent, once
        // it can be (the journal wrote nothing of them meanwhile). The
        // query's buffers fill meanwhile, and ingests on its property get
        // 503 once `--ingest-wait-ms` is up, as with a slow query.
        loop {
            match self
                .store
                .append_batch(query, new.clone(), checkpoint.clone())
                .await
            {
                Ok(()) => break,
                Err(e) if matches!(e.kind(), StoreErrorKind::Unreachable { .. }) => {
                    if !std::mem::replace(&mut waiting, true) {
                        tracing::warn!("the query's results wait for the state directory: {e}");
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(LAST_PAUSE);
                }
                Err(e) => return Err(e),
            }
        }
        if waiting {
            tracing::info!("the query's results are stored again");
        }
        fanout.push_frames(frames);
        Ok(())
    }
}

/// The first pause before a query's results are offered again to a state
/// directory that cannot be reached; it doubles up to [`LAST_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(10);
/// The longest pause between two offers.
const LAST_PAUSE: Duration = Duration::from_secs(1);

/// The journal bytes one query may keep from being released
/// (`--max-query-log`): the instants of its property logged after its
/// checkpoint. A query whose checkpoint never moves (on a bridge or plugin
/// engine, replayed from its registration after a restart; a `HOPPING`
/// window of sparse records, a long `COUNT` window for a while) would keep
/// every instant of its property, and the disk would fill. Past the cap the
/// query fails, naming it; a failed query keeps nothing, so the journal
/// releases those records at its next segment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LogCap {
    /// The most bytes.
    pub(crate) max: u64,
}

impl LogCap {
    /// How often the journal is asked: after about this many bytes logged
    /// for a query (an eighth of the cap, so the cap is overshot by at most
    /// that; asking walks the records kept).
    fn every(self) -> u64 {
        (self.max / 8).max(1)
    }

    /// Counts `instants`, just logged for query `id`, and, now and then,
    /// asks the journal what it keeps for the query: why the query must
    /// fail when that is over the cap.
    pub(crate) async fn check(
        self,
        store: &Store,
        id: &str,
        ledger: &Ledger,
        instants: &[Instant],
    ) -> Option<String> {
        let bytes = instants
            .iter()
            .map(mfstream_model::budget::instant_bytes)
            .sum();
        if !ledger.logged(bytes, self.every()) {
            return None;
        }
        let kept = store.pinned_bytes(id).await?;
        (kept > self.max).then(|| {
            format!(
                "query log reached --max-query-log ({}): the journal keeps {} of this property's \
                 instants for this query, logged after its checkpoint, which has not moved since \
                 (a query on a bridge or plugin engine is replayed from its registration); the \
                 query fails so that they can be released: raise --max-query-log, or run it on \
                 the local engine",
                Bytes(self.max),
                Bytes(kept)
            )
        })
    }
}

/// 503 for a write the state store refused or could not make: nothing of
/// the request was acknowledged.
pub(crate) fn unavailable(what: &str, e: &StoreError) -> Problem {
    Problem::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "StateStoreUnavailable",
        format!("{what}: {e}"),
    )
}

/// A registration being recorded: if the request is dropped before the
/// query is in the table (the client went away while the store was
/// committing), the record is deleted again, so that no query the client
/// never saw starts after a restart.
#[derive(Debug)]
pub(crate) struct Recording {
    store: Arc<Store>,
    id: String,
    armed: bool,
}

impl Recording {
    pub(crate) fn new(store: Arc<Store>, id: String) -> Recording {
        Recording {
            store,
            id,
            armed: true,
        }
    }

    /// The query is in the table: its record stays.
    pub(crate) fn done(mut self) {
        self.armed = false;
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let store = self.store.clone();
        let id = std::mem::take(&mut self.id);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(e) = store.delete(&id).await
                    && !is_unknown(&e)
                {
                    tracing::warn!("cannot forget an abandoned registration: {e}");
                }
            });
        }
    }
}

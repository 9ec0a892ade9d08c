//! The two ends of a running query: the caller's [`QueryHandle`] and the
//! engine's [`QueryOutput`].

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::{Progress, ProgressSnapshot};
use mfstream_model::{Event, QueryStatus};

/// The caller's side of a running query: its events, its status, and
/// [`stop`](QueryHandle::stop).
///
/// Dropping the handle stops the query.
#[derive(Debug)]
pub struct QueryHandle {
    id: String,
    engine: String,
    events: mpsc::Receiver<Vec<Event>>,
    pending: std::vec::IntoIter<Event>,
    status: watch::Receiver<QueryStatus>,
    progress: Arc<Progress>,
    stop: CancellationToken,
}

/// The engine's side of a running query: where it delivers events and its
/// final status.
///
/// If it is dropped before [`finish`](QueryOutput::finish) (the engine's task
/// panicked, say), the query fails rather than running forever.
#[derive(Debug)]
pub struct QueryOutput {
    events: Option<mpsc::Sender<Vec<Event>>>,
    status: watch::Sender<QueryStatus>,
    progress: Arc<Progress>,
    stop: CancellationToken,
}

/// The consumer of a query's events has gone; the query should end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerGone;

impl QueryHandle {
    /// A connected handle and output for a query `id` on `engine`, holding up
    /// to `capacity` event batches between them.
    pub fn new(id: &str, engine: &str, capacity: usize) -> (QueryHandle, QueryOutput) {
        let (events_tx, events_rx) = mpsc::channel(capacity.max(1));
        let (status_tx, status_rx) = watch::channel(QueryStatus::Running);
        let progress = Arc::new(Progress::default());
        let stop = CancellationToken::new();
        let handle = QueryHandle {
            id: id.to_owned(),
            engine: engine.to_owned(),
            events: events_rx,
            pending: Vec::new().into_iter(),
            status: status_rx,
            progress: progress.clone(),
            stop: stop.clone(),
        };
        let output = QueryOutput {
            events: Some(events_tx),
            status: status_tx,
            progress,
            stop,
        };
        (handle, output)
    }

    /// The query's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The engine running it.
    pub fn engine(&self) -> &str {
        &self.engine
    }

    /// The next batch of events; `None` once the query has ended and every
    /// event was delivered. The status is final by then.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn next_batch(&mut self) -> Option<Vec<Event>> {
        let rest: Vec<Event> = std::mem::take(&mut self.pending).collect();
        if !rest.is_empty() {
            return Some(rest);
        }
        self.events.recv().await
    }

    /// The next batch of events if one is ready now, without waiting.
    pub fn try_next_batch(&mut self) -> Option<Vec<Event>> {
        let rest: Vec<Event> = std::mem::take(&mut self.pending).collect();
        if !rest.is_empty() {
            return Some(rest);
        }
        self.events.try_recv().ok()
    }

    /// The next event; `None` once the query has ended.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.pending.next() {
                return Some(event);
            }
            self.pending = self.events.recv().await?.into_iter();
        }
    }

    /// The status now.
    pub fn status(&self) -> QueryStatus {
        self.status.borrow().clone()
    }

    /// A receiver that sees every change of status.
    pub fn watch_status(&self) -> watch::Receiver<QueryStatus> {
        self.status.clone()
    }

    /// The record counts now.
    pub fn progress(&self) -> ProgressSnapshot {
        self.progress.snapshot()
    }

    /// The live counters, for a control plane that shows them after it has
    /// handed the handle on.
    pub fn progress_counters(&self) -> Arc<Progress> {
        self.progress.clone()
    }

    /// Asks the query to stop, gracefully: the engine finishes what it can
    /// within its grace period, then ends. Events still arrive until then.
    /// Idempotent.
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Waits for the query to end, discarding events not yet read, and
    /// returns its final status.
    pub async fn wait(mut self) -> QueryStatus {
        self.pending = Vec::new().into_iter();
        while self.events.recv().await.is_some() {}
        let mut status = self.status.clone();
        if let Ok(s) = status.wait_for(QueryStatus::is_terminal).await {
            return s.clone();
        }
        // The output was dropped; its Drop set a final status first.
        self.status()
    }

    /// Stops the query and waits for its final status.
    pub async fn stop_and_wait(self) -> QueryStatus {
        self.stop();
        self.wait().await
    }
}

impl Drop for QueryHandle {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl QueryOutput {
    /// Delivers a batch of events, waiting while the consumer's buffer is full.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a dropped call may lose its batch.
    /// The first event carries the records skipped since the last batch
    /// ([`Progress::add_skipped`]), added to what it carries already.
    pub async fn emit(&self, mut batch: Vec<Event>) -> Result<(), ConsumerGone> {
        if batch.is_empty() {
            return Ok(());
        }
        if self.progress.unreported.load(Ordering::Relaxed) > 0 {
            let n = self.progress.unreported.swap(0, Ordering::Relaxed);
            batch[0].add_skipped(n);
        }
        let n = batch.len();
        let events = self.events.as_ref().ok_or(ConsumerGone)?;
        events.send(batch).await.map_err(|_| ConsumerGone)?;
        self.progress.add_out(n);
        Ok(())
    }

    /// The query's progress counters.
    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    /// Whether a stop was asked for.
    pub fn stop_requested(&self) -> bool {
        self.stop.is_cancelled()
    }

    /// Resolves once a stop is asked for (or the handle is dropped).
    pub fn stopping(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.stop.cancelled()
    }

    /// Ends the query with `status`, after every event was emitted.
    pub fn finish(mut self, status: QueryStatus) {
        self.set_final(status);
    }

    fn set_final(&mut self, status: QueryStatus) {
        debug_assert!(status.is_terminal());
        // The status is set before the events channel closes, so a consumer
        // that sees the end of the events sees the final status too.
        self.status.send_replace(status);
        self.events = None;
    }
}

impl Drop for QueryOutput {
    fn drop(&mut self) {
        if self.events.is_some() {
            self.set_final(QueryStatus::Failed {
                reason: "the engine ended the query without a status (it panicked)".into(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_dropped_output_fails_the_query_instead_of_hanging() {
        let (handle, output) = QueryHandle::new("q", "test", 1);
        drop(output);
        match handle.wait().await {
            QueryStatus::Failed { reason } => assert!(reason.contains("panicked"), "{reason}"),
            other => panic!("expected failed, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn the_final_status_is_visible_once_events_end() {
        let (mut handle, output) = QueryHandle::new("q", "test", 1);
        tokio::spawn(async move {
            let event = Event::Instant(mfstream_model::InstantEvent {
                datetime: "t".into(),
                value: mfstream_model::Value::Number(1.0),
                property: "p".into(),
                operation: "abs".into(),
                skipped: 0,
            });
            output.emit(vec![event]).await.unwrap();
            output.finish(QueryStatus::Completed);
        });
        assert!(handle.next().await.is_some());
        assert!(handle.next().await.is_none());
        assert_eq!(handle.status(), QueryStatus::Completed);
        assert_eq!(handle.progress().records_out, 1);
    }

    #[tokio::test]
    async fn dropping_the_handle_asks_the_engine_to_stop() {
        let (handle, output) = QueryHandle::new("q", "test", 1);
        drop(handle);
        output.stopping().await;
        assert!(output.stop_requested());
    }
}

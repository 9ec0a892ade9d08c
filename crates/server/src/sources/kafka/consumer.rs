//! The consumer: reads a batch, ingests it through the broker pipeline,
//! commits the offsets of what the ingest path took, reads the next.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use tokio_util::sync::CancellationToken;

use super::super::broker::pipeline::{self, Delivery, Marks};
use super::link;
use super::topic::Pattern;
use super::{BATCH, Kafka};
use crate::App;

/// The wait after a failed read before the next (one the error callback
/// did not take: librdkafka paces those).
const READ_RETRY: Duration = Duration::from_millis(500);

/// librdkafka's callbacks: the brokers' reachability to [`Link`] (one log
/// line per change), other errors and logs to `tracing` and `lastError`,
/// rebalances counted.
struct Context {
    kafka: Arc<Kafka>,
}

impl ClientContext for Context {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        // A connection that failed (`FAIL`) is also an error event, which
        // the link takes: logged when it changes the state only.
        if fac == "FAIL" {
            tracing::debug!("kafka: librdkafka {fac}: {message}");
            return;
        }
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => tracing::error!("kafka: librdkafka {fac}: {message}"),
            RDKafkaLogLevel::Warning => tracing::warn!("kafka: librdkafka {fac}: {message}"),
            _ => tracing::debug!("kafka: librdkafka {fac}: {message}"),
        }
    }

    fn stats_raw(&self, statistics: &[u8]) {
        if self.kafka.link.statistics(&self.kafka.brokers, statistics) {
            // Reachable again: the error that said they were not is past.
            self.kafka.stats.set_error(None);
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        let kafka = &self.kafka;
        let text = format!("{error}: {reason}");
        if let link::Report::LastError(text) = kafka.link.error(&kafka.brokers, &error, &text) {
            kafka.stats.set_error(Some(text));
        }
    }
}

impl ConsumerContext for Context {
    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let kafka = &self.kafka;
        match rebalance {
            Rebalance::Assign(partitions) => {
                let n = partitions.count() as u64;
                kafka.assigned.store(n, Relaxed);
                kafka.stats.subscribed.store(n > 0, Relaxed);
                kafka.stats.connects.fetch_add(1, Relaxed);
                kafka.stats.set_error(None);
                tracing::info!(group = %kafka.group, partitions = n, "kafka: assigned");
                if n > 0 {
                    kafka.assignments.send_modify(|k| *k += 1);
                }
            }
            Rebalance::Revoke(_) => {
                kafka.assigned.store(0, Relaxed);
                kafka.stats.subscribed.store(false, Relaxed);
            }
            Rebalance::Error(e) => {
                tracing::warn!(group = %kafka.group, "kafka: rebalance failed: {e}");
                kafka.stats.set_error(Some(format!("rebalance: {e}")));
            }
        }
    }
}

/// A record on its way from the consumer to its commit.
#[derive(Debug)]
struct Record {
    topic: String,
    partition: i32,
    offset: i64,
    payload: Vec<u8>,
}

impl Delivery for Record {
    fn topic(&self) -> &str {
        &self.topic
    }

    fn payload(&self) -> &[u8] {
        &self.payload
    }
}

/// Runs the Kafka ingest until `stop`: reads a batch, ingests it through
/// the pipeline, commits the offsets of what it took, and reads the next.
pub(super) async fn run(app: Arc<App>, kafka: Arc<Kafka>, stop: CancellationToken) {
    let context = Context {
        kafka: kafka.clone(),
    };
    let consumer: StreamConsumer<Context> = match kafka
        .config(*app.options.limits.max_inflight_bytes)
        .create_with_context(context)
    {
        Ok(consumer) => consumer,
        Err(e) => {
            tracing::error!("kafka: cannot make the consumer: {e}");
            kafka.stats.set_error(Some(e.to_string()));
            return;
        }
    };
    let regexes: Vec<String> = kafka.patterns.iter().map(Pattern::regex).collect();
    let regexes: Vec<&str> = regexes.iter().map(String::as_str).collect();
    if let Err(e) = consumer.subscribe(&regexes) {
        tracing::error!("kafka: cannot subscribe to {regexes:?}: {e}");
        kafka.stats.set_error(Some(e.to_string()));
        return;
    }
    let consumer = Arc::new(consumer);
    let mut marks = Marks::new();
    let mut commits = Commits::new(kafka.session_timeout);
    loop {
        let batch = tokio::select! {
            batch = read(&app, &kafka, &consumer, &mut commits) => batch,
            () = stop.cancelled() => break,
        };
        let complete = ingest(&app, &kafka, &consumer, &mut marks, &mut commits, batch).await;
        if !complete {
            // Shutting down (or an ingest task failed, a bug, logged):
            // what was not taken is read again at the next start, from the
            // last offset committed. Reading on would commit the offsets
            // after it, and lose it.
            break;
        }
    }
    commits.finish(&kafka, &consumer).await;
}

/// The next batch: waits for one record, then takes what is already
/// fetched, up to [`BATCH`] records and `--max-inflight-bytes`.
///
/// While it waits for the first, a commit still in flight (one that took
/// longer than [`Commits`]' bound) is seen to its end, and the offsets
/// taken meanwhile are committed after it.
async fn read(
    app: &App,
    kafka: &Arc<Kafka>,
    consumer: &Arc<StreamConsumer<Context>>,
    commits: &mut Commits,
) -> Vec<Record> {
    let mut batch = Vec::new();
    let mut bytes = 0;
    loop {
        let next = if batch.is_empty() {
            loop {
                let Some(in_flight) = commits.in_flight.as_mut() else {
                    break consumer.recv().await;
                };
                // All cancellation safe: `recv`, a join handle, a sleep.
                let late = !in_flight.reported;
                tokio::select! {
                    next = consumer.recv() => break next,
                    ended = &mut in_flight.task => {
                        let in_flight = commits.in_flight.take().expect("the commit just awaited");
                        settle(kafka, &in_flight, ended);
                        commits.start(consumer);
                    }
                    () = tokio::time::sleep_until(in_flight.deadline), if late => {
                        in_flight.report(kafka, commits.bound);
                    }
                }
            }
        } else {
            // Already fetched, or none: `recv` is cancellation safe.
            match tokio::time::timeout(Duration::ZERO, consumer.recv()).await {
                Ok(next) => next,
                Err(_) => return batch,
            }
        };
        match next {
            Ok(m) => {
                let payload = m.payload().unwrap_or_default().to_vec();
                bytes += payload.len();
                batch.push(Record {
                    topic: m.topic().to_owned(),
                    partition: m.partition(),
                    offset: m.offset(),
                    payload,
                });
                kafka.stats.messages.fetch_add(1, Relaxed);
                if batch.len() == BATCH || bytes >= *app.options.limits.max_inflight_bytes {
                    return batch;
                }
            }
            Err(e) => {
                if !batch.is_empty() {
                    return batch;
                }
                // The error callback took it first, and logged it if it
                // was news. librdkafka paces its own retries: the next is
                // read at once, or a backlog of old errors would grow (one
                // every 50 ms with every broker down) and tell of brokers
                // down long after they are back.
                if kafka.link.reported(&e) {
                    tracing::debug!(brokers = %kafka.brokers, "kafka: cannot read: {e}");
                    continue;
                }
                tracing::warn!(brokers = %kafka.brokers, "kafka: cannot read: {e}");
                kafka.stats.set_error(Some(format!("cannot read: {e}")));
                tokio::time::sleep(READ_RETRY).await;
            }
        }
    }
}

/// Ingests a batch and commits the offsets of the records taken (or
/// refused as bad); `false` when the server began shutting down before it
/// took them all.
async fn ingest(
    app: &Arc<App>,
    kafka: &Arc<Kafka>,
    consumer: &Arc<StreamConsumer<Context>>,
    marks: &mut Marks,
    commits: &mut Commits,
    batch: Vec<Record>,
) -> bool {
    // Each partition's offsets, in the order read.
    let mut order: Vec<(String, i32, i64)> = Vec::with_capacity(batch.len());
    let mut done: HashSet<(String, i32, i64)> = HashSet::with_capacity(batch.len());
    let mut good = Vec::with_capacity(batch.len());
    for record in batch {
        order.push((record.topic.clone(), record.partition, record.offset));
        if pipeline::over_max_body(app, &**kafka, &record.topic, record.payload.len(), "record") {
            done.insert((record.topic, record.partition, record.offset));
            continue;
        }
        good.push(record);
    }
    pipeline::take(app, kafka, marks, good.into_iter(), |record| {
        done.insert((record.topic, record.partition, record.offset));
    })
    .await;
    let complete = done.len() == order.len();
    commits.add(&order, &done);
    commits.commit(kafka, consumer).await;
    complete
}

/// The offsets to commit, and the one commit in flight.
///
/// A batch's offsets are committed before the next batch is read, waited
/// for up to the bound (the group's session timeout): librdkafka's commit
/// has no bound of its own, and a broker that dies with a commit in flight
/// could hold it (and, with it, the reading and the status) until it is
/// back. Past the bound the commit is left to finish on its own,
/// `lastError` says so, and reading goes on; the offsets taken meanwhile
/// are committed after it ends (one commit at a time, so that a later
/// offset is never overwritten by an earlier one). Nothing is lost either
/// way: a record is committed only after the ingest path took it, and one
/// read again is a duplicate.
struct Commits {
    /// Per partition, the next offset to read, not yet committed.
    pending: HashMap<(String, i32), i64>,
    /// The records those offsets cover.
    pending_records: u64,
    in_flight: Option<InFlight>,
    bound: Duration,
}

/// A commit handed to librdkafka and not yet answered.
struct InFlight {
    task: tokio::task::JoinHandle<rdkafka::error::KafkaResult<()>>,
    records: u64,
    /// When its wait passes the bound.
    deadline: tokio::time::Instant,
    /// Whether `lastError` says it is late.
    reported: bool,
}

impl InFlight {
    /// Says, once, that the commit is late.
    fn report(&mut self, kafka: &Kafka, bound: Duration) {
        if std::mem::replace(&mut self.reported, true) {
            return;
        }
        tracing::warn!(
            group = %kafka.group,
            "kafka: a commit has had no answer for {bound:?}; reading on"
        );
        kafka.stats.set_error(Some(format!(
            "commit: no answer from the group coordinator within {} ms (the session timeout); \
             reading on, the offsets are committed once it answers",
            bound.as_millis()
        )));
    }
}

impl Commits {
    fn new(bound: Duration) -> Commits {
        Commits {
            pending: HashMap::new(),
            pending_records: 0,
            in_flight: None,
            bound,
        }
    }

    /// Takes a batch's offsets: for each partition, the offset after the
    /// last record taken with every record before it.
    fn add(&mut self, order: &[(String, i32, i64)], done: &HashSet<(String, i32, i64)>) {
        // Per partition: the next offset to read, and whether a record not
        // taken stopped it.
        let mut next: HashMap<(&str, i32), (i64, bool)> = HashMap::new();
        for (topic, partition, offset) in order {
            let entry = next
                .entry((topic.as_str(), *partition))
                .or_insert((-1, false));
            if entry.1 {
                continue;
            }
            if done.contains(&(topic.clone(), *partition, *offset)) {
                entry.0 = offset + 1;
                self.pending_records += 1;
            } else {
                entry.1 = true;
            }
        }
        for ((topic, partition), (offset, _)) in next {
            if offset >= 0 {
                let at = self
                    .pending
                    .entry((topic.to_owned(), partition))
                    .or_insert(offset);
                *at = (*at).max(offset);
            }
        }
    }

    /// Hands the pending offsets to librdkafka, unless a commit is in
    /// flight (they go after it).
    fn start(&mut self, consumer: &Arc<StreamConsumer<Context>>) {
        if self.in_flight.is_some() || self.pending.is_empty() {
            return;
        }
        let mut list = TopicPartitionList::new();
        for ((topic, partition), offset) in self.pending.drain() {
            if let Err(e) = list.add_partition_offset(&topic, partition, Offset::Offset(offset)) {
                tracing::warn!("kafka: cannot commit {topic}[{partition}]: {e}");
            }
        }
        let records = std::mem::take(&mut self.pending_records);
        let consumer = consumer.clone();
        let task = tokio::task::spawn_blocking(move || consumer.commit(&list, CommitMode::Sync));
        self.in_flight = Some(InFlight {
            task,
            records,
            deadline: tokio::time::Instant::now() + self.bound,
            reported: false,
        });
    }

    /// Starts the commit of what is pending and waits for the one in
    /// flight, up to the bound.
    async fn commit(&mut self, kafka: &Arc<Kafka>, consumer: &Arc<StreamConsumer<Context>>) {
        self.start(consumer);
        let Some(in_flight) = self.in_flight.as_mut() else {
            return;
        };
        match tokio::time::timeout_at(in_flight.deadline, &mut in_flight.task).await {
            Ok(ended) => {
                let in_flight = self.in_flight.take().expect("the commit just awaited");
                settle(kafka, &in_flight, ended);
                // Offsets taken while an earlier commit was in flight.
                self.start(consumer);
            }
            Err(_) => in_flight.report(kafka, self.bound),
        }
    }

    /// At the end of the ingest: the commit in flight, then what is
    /// pending, each waited for up to the bound.
    async fn finish(&mut self, kafka: &Arc<Kafka>, consumer: &Arc<StreamConsumer<Context>>) {
        for _ in 0..2 {
            if self.in_flight.is_none() && self.pending.is_empty() {
                return;
            }
            self.commit(kafka, consumer).await;
        }
    }
}

/// Counts a commit's end: its records committed (and a late commit's
/// `lastError` cleared), or its error.
fn settle(
    kafka: &Kafka,
    commit: &InFlight,
    ended: Result<rdkafka::error::KafkaResult<()>, tokio::task::JoinError>,
) {
    match ended {
        Ok(Ok(())) => {
            kafka.stats.acked.fetch_add(commit.records, Relaxed);
            if commit.reported {
                kafka.stats.set_error(None);
            }
        }
        // The partitions moved to another member (a rebalance), or the
        // broker is gone: the records are read again from the last
        // commit, and the duplicate rule drops what was taken.
        Ok(Err(e)) => {
            tracing::warn!(group = %kafka.group, "kafka: cannot commit offsets: {e}");
            kafka.stats.set_error(Some(format!("commit: {e}")));
        }
        Err(e) => tracing::error!("kafka: the commit failed: {e}"),
    }
}

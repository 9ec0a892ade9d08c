//! `GET /metrics`: the server's metrics in the Prometheus text format
//! (version 0.0.4), behind the token like every route but `/`.
//!
//! Most numbers exist already where the work is done: a query's events
//! (its fan-out's ids), its engine's [`Progress`](mfstream_engine::Progress)
//! (instants read, events given, job restarts, records skipped), its
//! subscribers and its state budget, the bytes in flight, the streams and
//! connections open, the journal's segments. A scrape reads them
//! ([`Snapshot::take`]); the few that nothing kept are counted where their
//! event happens ([`tally`]), with relaxed atomics on the hot paths.
//!
//! A scrape builds a fresh `prometheus-client` registry around one
//! snapshot and encodes it: the server keeps no global registry, so two
//! servers in one process never mix their numbers.
//!
//! # Label cardinality
//!
//! Every label takes values from a bounded set: `query` (with `property`
//! and `engine`) one per query registered, at most `--max-queries` (1,024
//! by default; a deleted query's series go with it); `engine` the
//! registry's engines; `source`, `reason` and `status` fixed lists (a source's
//! `reason` too). So a scrape holds 13 series per query plus a few dozen.
//! The book's "Metrics" section (`docs/src/operating.md`) lists every metric.

mod tally;

use std::fmt;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, EncodeMetric, prometheus_text,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use mfstream_store::{JournalStats, SYNC_BUCKETS};

use self::tally::EngineTotals;
pub(crate) use self::tally::{
    EngineTally, Family, FamilyKind, IngestCounters, IngestTally, QueryTally, Reason,
};
// What a source registers: none does without the broker features.
#[cfg_attr(not(any(feature = "mqtt", feature = "kafka")), allow(unused_imports))]
pub(crate) use self::tally::SourceMetrics;

use super::App;
use super::problem::Problem;

/// How long a scrape waits for the journal's numbers: well within
/// Prometheus's default scrape timeout (10 s).
const STORE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The statuses a query's `mfstream_query_status` series name, one each.
const STATUSES: [&str; 4] = ["running", "completed", "stopped", "failed"];

/// `GET /metrics`.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "server",
    operation_id = "getMetrics",
    summary = "the server's metrics, in the Prometheus text format 0.0.4",
    responses(
        (status = 200, description = "the exposition", content_type = "text/plain; version=0.0.4; charset=utf-8", body = String),
    ),
)]
pub(crate) async fn serve(State(app): State<Arc<App>>) -> Result<Response, Problem> {
    let snapshot = Snapshot::take(&app).await;
    let mut text = String::with_capacity(4096 + snapshot.queries.len() * 2048);
    snapshot.encode_text(&mut text).map_err(|e| {
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "MetricsFailed",
            format!("cannot encode the metrics: {e}"),
        )
    })?;
    Ok((
        [(header::CONTENT_TYPE, prometheus_text::CONTENT_TYPE)],
        text,
    )
        .into_response())
}

/// Every number of one scrape, read at once.
#[derive(Debug, Default)]
struct Snapshot {
    queries: Vec<QueryRow>,
    engines: Vec<(String, EngineTotals)>,
    accepted: Vec<(&'static str, u64)>,
    refused: Vec<(&'static str, Reason, u64)>,
    inflight_bytes: u64,
    query_state_bytes: u64,
    connections: u64,
    connections_accepted: u64,
    streams: u64,
    /// With `--state`, when the journal answered.
    store: Option<JournalStats>,
    /// The sources' own families (those configured).
    sources: Vec<Family>,
}

#[derive(Debug)]
struct QueryRow {
    id: String,
    property: String,
    engine: String,
    status: &'static str,
    events: u64,
    records_in: u64,
    late: u64,
    skipped: u64,
    cpu_seconds: f64,
    subscribers: u64,
    lagged: u64,
    missed: u64,
    state_bytes: u64,
}

impl QueryRow {
    fn labels(&self) -> [(&'static str, &str); 3] {
        [
            ("query", &self.id),
            ("property", &self.property),
            ("engine", &self.engine),
        ]
    }
}

impl Snapshot {
    async fn take(app: &App) -> Snapshot {
        let queries = app
            .table
            .all()
            .iter()
            .map(|query| {
                let progress = query.progress.snapshot();
                let (lagged, missed) = query.fanout.tally.lags();
                QueryRow {
                    id: query.id.clone(),
                    property: query.key.href(),
                    engine: query.engine.clone(),
                    status: query.status().name(),
                    events: query.fanout.events(),
                    records_in: progress.records_in,
                    late: query.fanout.tally.late(),
                    skipped: progress.skipped,
                    cpu_seconds: progress.cpu_seconds(),
                    subscribers: query.fanout.subscribers() as u64,
                    lagged,
                    missed,
                    state_bytes: query.fanout.state_bytes(),
                }
            })
            .collect();
        // Every engine of the registry, and any that ran a query and has
        // since been reloaded away.
        let mut engines = app.table.engines.totals();
        for info in app.registry.engines() {
            engines.entry(info.name).or_default();
        }
        let ingest = &app.ingest_tally;
        // The journal answers between two group commits; one that does
        // not answer in time (a disk stalled) costs the scrape its store
        // series, not its answer.
        let store = match &app.store {
            Some(store) => match tokio::time::timeout(STORE_WAIT, store.stats()).await {
                Ok(Ok(stats)) => Some(stats),
                Ok(Err(e)) => {
                    tracing::warn!("the metrics have no store series: {e}");
                    None
                }
                Err(_) => {
                    tracing::warn!(
                        "the metrics have no store series: the journal did not answer within \
                         {STORE_WAIT:?}"
                    );
                    None
                }
            },
            None => None,
        };
        Snapshot {
            queries,
            engines: engines.into_iter().collect(),
            accepted: ingest
                .rows()
                .map(|(s, c)| (s, c.accepted_total()))
                .collect(),
            refused: ingest
                .rows()
                .flat_map(|(s, c)| Reason::ALL.iter().map(move |&r| (s, r, c.refused_for(r))))
                .collect(),
            inflight_bytes: app.inflight.used() as u64,
            query_state_bytes: app.state_total.used(),
            connections: app.connections.open() as u64,
            connections_accepted: app.connections.accepted(),
            streams: app.streams.open() as u64,
            store,
            sources: ingest.families(),
        }
    }

    /// The snapshot in the Prometheus text format.
    fn encode_text(self, text: &mut String) -> fmt::Result {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self));
        prometheus_text::encode(text, &registry)
    }

    fn encode_queries(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        let rows = &self.queries;
        let per_query = |f: fn(&QueryRow) -> u64| rows.iter().map(move |q| (q.labels(), f(q)));
        counter(
            enc,
            "mfstream_query_events",
            "Results the query delivered to its subscribers (its last event id).",
            per_query(|q| q.events),
        )?;
        counter(
            enc,
            "mfstream_query_records_in",
            "Instants the query's engine read since it started (or resumed).",
            per_query(|q| q.records_in),
        )?;
        counter(
            enc,
            "mfstream_query_late_records",
            "Records the query's windows skipped as late.",
            per_query(|q| q.late),
        )?;
        counter(
            enc,
            "mfstream_query_skipped",
            "Records or windows skipped for want of a finite result (onError: skip).",
            per_query(|q| q.skipped),
        )?;
        counter(
            enc,
            "mfstream_query_cpu_seconds",
            "CPU time spent on the query's in-process work (its task on the compute threads, or \
             an in-process plugin's thread; not a bridge job's own process), since it started \
             or resumed.",
            rows.iter().map(|q| (q.labels(), q.cpu_seconds)),
        )?;
        gauge(
            enc,
            "mfstream_query_subscribers",
            "SSE subscribers of the query now.",
            per_query(|q| q.subscribers),
        )?;
        counter(
            enc,
            "mfstream_query_lagged",
            "Lagged notices sent to the query's subscribers that fell off its replay buffer.",
            per_query(|q| q.lagged),
        )?;
        counter(
            enc,
            "mfstream_query_lagged_events",
            "Events those lagged subscribers missed.",
            per_query(|q| q.missed),
        )?;
        gauge(
            enc,
            "mfstream_query_state_bytes",
            "Bytes of state the query holds (windows, waiting instants, replay buffer).",
            per_query(|q| q.state_bytes),
        )?;
        let statuses = rows.iter().flat_map(|q| {
            let [query, property, engine] = q.labels();
            STATUSES.iter().map(move |&status| {
                (
                    [query, property, engine, ("status", status)],
                    u64::from(q.status == status),
                )
            })
        });
        gauge(
            enc,
            "mfstream_query_status",
            "1 for the query's status (running, completed, stopped, failed), 0 for the others.",
            statuses,
        )
    }

    fn encode_engines(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        let rows = &self.engines;
        let per_engine = |f: fn(&EngineTotals) -> u64| {
            rows.iter()
                .map(move |(name, t)| ([("engine", name.as_str())], f(t)))
        };
        gauge(
            enc,
            "mfstream_engine_queries",
            "Queries running on the engine.",
            per_engine(|t| t.running),
        )?;
        counter(
            enc,
            "mfstream_engine_job_starts",
            "Queries started on the engine (registered, or resumed at start-up): for a bridge \
             engine, its job processes started.",
            per_engine(|t| t.starts),
        )?;
        counter(
            enc,
            "mfstream_engine_job_restarts",
            "Times the engine restarted a query's job after it died (restart policy).",
            per_engine(|t| t.progress.restarts),
        )?;
        counter(
            enc,
            "mfstream_engine_job_failures",
            "Queries on the engine that ended failed.",
            per_engine(|t| t.failures),
        )?;
        counter(
            enc,
            "mfstream_engine_records_in",
            "Instants the engine's queries read: for a bridge engine, the records written to \
             its jobs.",
            per_engine(|t| t.progress.records_in),
        )?;
        counter(
            enc,
            "mfstream_engine_records_out",
            "Events the engine's queries gave: for a bridge engine, the results read from its \
             jobs.",
            per_engine(|t| t.progress.records_out),
        )?;
        counter(
            enc,
            "mfstream_engine_cpu_seconds",
            "CPU time spent on the engine's queries' in-process work (as \
             mfstream_query_cpu_seconds_total), ended queries included.",
            self.engines
                .iter()
                .map(|(name, t)| ([("engine", name.as_str())], t.progress.cpu_seconds())),
        )
    }

    fn encode_ingest(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        counter(
            enc,
            "mfstream_ingest_instants",
            "Instants accepted, by source.",
            self.accepted.iter().map(|(s, n)| ([("source", *s)], *n)),
        )?;
        counter(
            enc,
            "mfstream_ingest_refused",
            "Ingest bodies refused, by source and reason (one may follow a partial accept).",
            self.refused
                .iter()
                .map(|(s, r, n)| ([("source", *s), ("reason", r.name())], *n)),
        )?;
        gauge(
            enc,
            "mfstream_ingest_inflight_bytes",
            "Bytes of request bodies being received or ingested now (--max-inflight-bytes).",
            one(self.inflight_bytes),
        )
    }

    fn encode_store(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        let Some(store) = &self.store else {
            return Ok(());
        };
        gauge(
            enc,
            "mfstream_store_journal_bytes",
            "Bytes of the state store's journal segments.",
            one(store.bytes),
        )?;
        gauge(
            enc,
            "mfstream_store_journal_segments",
            "The state store's journal segment files.",
            one(store.segments),
        )?;
        let syncs = &store.syncs;
        let buckets: Vec<(f64, u64)> = SYNC_BUCKETS
            .iter()
            .copied()
            .zip(syncs.counts.iter().copied())
            .collect();
        enc.encode_descriptor(
            "mfstream_store_fsync_seconds",
            "Time each fdatasync of a journal segment took.",
            None,
            MetricType::Histogram,
        )?
        .encode_histogram::<[(&str, &str); 0]>(
            syncs.sum.as_secs_f64(),
            syncs.count(),
            &buckets,
            None,
        )?;
        counter(
            enc,
            "mfstream_store_compactions",
            "Journal segments compacted away (their live records copied forward first).",
            one(store.compactions),
        )?;
        counter(
            enc,
            "mfstream_store_recovery_truncations",
            "Unfinished writes cut off the journal when the store was opened.",
            one(store.truncations),
        )?;
        counter(
            enc,
            "mfstream_store_recovery_truncated_bytes",
            "Bytes those cuts dropped.",
            one(store.truncated_bytes),
        )
    }

    fn encode_server(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        gauge(
            enc,
            "mfstream_server_connections",
            "Connections open now (--max-connections).",
            one(self.connections),
        )?;
        counter(
            enc,
            "mfstream_server_connections_accepted",
            "Connections accepted.",
            one(self.connections_accepted),
        )?;
        gauge(
            enc,
            "mfstream_server_sse_streams",
            "SSE streams open now (--max-streams).",
            one(self.streams),
        )?;
        gauge(
            enc,
            "mfstream_server_query_state_bytes",
            "Bytes of state every query holds together, replay buffers aside (--max-total-query-state).",
            one(self.query_state_bytes),
        )
    }
}

impl Snapshot {
    /// The sources' own families (`mfstream_mqtt_…` with `--mqtt`, …);
    /// their instants and refusals are in the ingest families, by
    /// `source`.
    fn encode_sources(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        for family in &self.sources {
            let series = family.series.iter().map(|(labels, n)| (labels.clone(), *n));
            match family.kind {
                FamilyKind::Counter => counter(enc, family.name, family.help, series)?,
                FamilyKind::Gauge => gauge(enc, family.name, family.help, series)?,
            }
        }
        Ok(())
    }
}

impl Collector for Snapshot {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        self.encode_queries(&mut enc)?;
        self.encode_engines(&mut enc)?;
        self.encode_ingest(&mut enc)?;
        self.encode_store(&mut enc)?;
        self.encode_sources(&mut enc)?;
        self.encode_server(&mut enc)
    }
}

/// One series without labels.
fn one(value: u64) -> [([(&'static str, &'static str); 0], u64); 1] {
    [([], value)]
}

/// A counter family: `name` gets its `_total` from the encoder.
fn counter<L: EncodeLabelSet, N>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, N)>,
) -> fmt::Result
where
    ConstCounter<N>: EncodeMetric,
{
    let mut family = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in series {
        ConstCounter::new(value).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// A gauge family.
fn gauge<L: EncodeLabelSet>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, u64)>,
) -> fmt::Result {
    let mut family = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in series {
        ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

//! `GET /ingest/kafka`: the Kafka ingest's configuration and counters,
//! the broker pipeline's under Kafka's names.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::super::broker::stats::BadSample;
use super::{Kafka, NAME};
use crate::App;
use crate::problem::Problem;
use crate::wire::Answer;

/// `GET /ingest/kafka`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KafkaStatus {
    brokers: String,
    group: String,
    topics: Vec<String>,
    /// Partitions the group assigned to this server now.
    assigned_partitions: u64,
    /// Rebalances that assigned this server partitions.
    assignments: u64,
    /// Whether the brokers can be reached: `null` until a connection
    /// succeeded or every one failed. A change is logged once; the
    /// failures in between are counted in `brokerErrors`.
    reachable: Option<bool>,
    /// When `reachable` took its value (RFC 3339); `null` with it.
    reachable_since: Option<String>,
    /// Errors librdkafka reported about reaching the brokers (a refused
    /// connection, every broker down), since the start.
    broker_errors: u64,
    last_error: Option<String>,
    /// Records read, those read again included.
    records: u64,
    /// Records whose offsets were committed.
    committed: u64,
    instants: u64,
    duplicates: u64,
    retries: u64,
    /// Bad records, per reason.
    #[schema(value_type = Object)]
    bad: BTreeMap<&'static str, u64>,
    /// The last bad records, newest first.
    bad_samples: Vec<BadSample>,
}

impl KafkaStatus {
    /// The status of `kafka` now.
    pub(super) fn of(kafka: &Kafka) -> KafkaStatus {
        let counters = kafka.stats.snapshot();
        let link = kafka.link.snapshot();
        KafkaStatus {
            brokers: kafka.brokers.clone(),
            group: kafka.group.clone(),
            topics: kafka.patterns.iter().map(|p| p.text().to_owned()).collect(),
            assigned_partitions: kafka.assigned.load(Relaxed),
            assignments: counters.connects,
            reachable: link.reachable,
            reachable_since: link.since,
            broker_errors: link.errors,
            last_error: kafka.stats.last_error(),
            records: counters.messages,
            committed: counters.acked,
            instants: counters.instants,
            duplicates: counters.duplicates,
            retries: counters.retries,
            bad: counters.bad_by_reason(),
            bad_samples: kafka.stats.samples(),
        }
    }
}

/// `GET /ingest/kafka`: the Kafka ingest's configuration and counters.
#[utoipa::path(
    get,
    path = "/ingest/kafka",
    tag = "ingest",
    operation_id = "getKafkaIngest",
    summary = "the Kafka ingest (`--kafka`): brokers, group, topics, partitions, counters, last bad records",
    responses(
        (status = 200, description = "the Kafka ingest's state", body = KafkaStatus),
        (status = 404, description = "the server runs without `--kafka`", body = crate::wire::Exception),
    ),
)]
pub(crate) async fn status(State(app): State<Arc<App>>) -> Result<Answer<KafkaStatus>, Problem> {
    let kafka: &Kafka = super::super::configured(
        &app,
        NAME,
        "Kafka ingest is off: start the server with --kafka HOST:PORT",
    )?;
    Ok(Answer(KafkaStatus::of(kafka)))
}

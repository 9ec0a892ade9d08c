//! `GET /ingest/mqtt`: the MQTT ingest's configuration and counters.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::super::broker::stats::{BadSample, Stats};
use super::topic::Pattern;
use super::{Mqtt, NAME};
use crate::App;
use crate::problem::Problem;
use crate::wire::Answer;

/// `GET /ingest/mqtt`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MqttStatus {
    broker: String,
    client_id: String,
    topics: Vec<String>,
    connected: bool,
    subscribed: bool,
    connects: u64,
    last_error: Option<String>,
    messages: u64,
    acknowledged: u64,
    instants: u64,
    duplicates: u64,
    retries: u64,
    /// Bad messages, per reason.
    #[schema(value_type = Object)]
    bad: BTreeMap<&'static str, u64>,
    /// The last bad messages, newest first.
    bad_samples: Vec<BadSample>,
}

impl MqttStatus {
    /// The status of a connection to `broker` as `client_id`, subscribed to
    /// `topics`, whose counters are `stats`.
    pub(super) fn of(broker: &str, client_id: &str, topics: &[Pattern], stats: &Stats) -> Self {
        let counters = stats.snapshot();
        MqttStatus {
            broker: broker.to_owned(),
            client_id: client_id.to_owned(),
            topics: topics.iter().map(|p| p.text().to_owned()).collect(),
            connected: counters.connected,
            subscribed: counters.subscribed,
            connects: counters.connects,
            last_error: stats.last_error(),
            messages: counters.messages,
            acknowledged: counters.acked,
            instants: counters.instants,
            duplicates: counters.duplicates,
            retries: counters.retries,
            bad: counters.bad_by_reason(),
            bad_samples: stats.samples(),
        }
    }
}

/// `GET /ingest/mqtt`: the MQTT ingest's configuration and counters.
#[utoipa::path(
    get,
    path = "/ingest/mqtt",
    tag = "ingest",
    operation_id = "getMqttIngest",
    summary = "the MQTT ingest (`--mqtt`): broker, topics, connection, counters, last bad messages",
    responses(
        (status = 200, description = "the MQTT ingest's state", body = MqttStatus),
        (status = 404, description = "the server runs without `--mqtt`", body = crate::wire::Exception),
    ),
)]
pub(crate) async fn status(State(app): State<Arc<App>>) -> Result<Answer<MqttStatus>, Problem> {
    let mqtt: &Mqtt = super::super::configured(
        &app,
        NAME,
        "MQTT ingest is off: start the server with --mqtt mqtt://HOST:PORT",
    )?;
    Ok(Answer(MqttStatus::of(
        &mqtt.url,
        &mqtt.client_id,
        &mqtt.patterns,
        &mqtt.stats,
    )))
}

//! Kafka ingest (`serve --kafka BROKERS`): a source of instants like
//! `POST …/ingest` and `--mqtt`, through the same pipeline (grouping by
//! property, the duplicate rule, bad records counted per reason).
//!
//! Nothing lost, nothing doubled:
//!
//! - A consumer group (`--kafka-group`, default derived from the state
//!   directory, as MQTT's client id is), with automatic commits off: a
//!   record's offset is committed only once its instants are in the store
//!   (`--state`) or handed to the queries (memory only). A record refused
//!   as bad is counted, and committed with the others.
//! - After `serve` was killed (or its partitions moved to another member),
//!   the group's next reader starts at the last committed offset, so it
//!   reads again what was taken but not committed. The MQTT duplicate
//!   rule drops those: an instant at or before the last one its property
//!   took (after a restart: the last instant in its log) is a duplicate.
//!   Kafka keeps records in order within a partition only, so a
//!   property's records must be in one partition (one-partition topics, or
//!   records keyed by property, as Kafka's default partitioner does).
//! - Back-pressure: records are taken in batches of at most [`BATCH`] and
//!   `--max-inflight-bytes`; the next batch is read only once the last is
//!   ingested and committed. Meanwhile librdkafka pre-fetches at most
//!   `--max-inflight-bytes` (`queued.max.messages.kbytes`) and then stops
//!   fetching. A commit is waited for up to the session timeout: past it,
//!   `lastError` says so and reading goes on, one commit at a time.
//!
//! librdkafka (through rdkafka) is the client: the most used Kafka client
//! outside the JVM, with consumer groups, manual commits and a bounded
//! pre-fetch. It is built from the source rdkafka-sys vendors (2.12):
//! Debian 12's librdkafka 2.0.2 cannot parse the `ApiVersions` answer of
//! current brokers (tansu's, at least).

mod consumer;
mod link;
mod topic;

pub(crate) use consumer::run;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use serde_json::json;
use tokio::sync::watch;

use super::App;
use super::metrics::IngestSource;
use super::mqtt::pipeline::Counted;
use super::mqtt::stats::{Snapshot, Stats};
use super::problem::Problem;
use topic::Pattern;

/// The most records ingested together (one journal record per property).
pub(crate) const BATCH: usize = 1024;

/// The default `--kafka-session-timeout-ms`: how long the group waits
/// for a member gone silent (a killed `serve`) before its partitions go
/// to another, or to the same server restarted.
pub(crate) const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the topics are listed again: a new topic matching a pattern
/// is read within about this long.
const METADATA_REFRESH: Duration = Duration::from_secs(10);

/// Kafka ingest, as `serve --kafka` configures it.
#[derive(Debug, Clone, Default)]
pub struct KafkaIngest {
    /// The bootstrap brokers: `HOST:PORT[,HOST:PORT…]`.
    pub brokers: String,
    /// The consumer group (`--kafka-group`); `None`: derived from the
    /// state directory (or, without one, from the address bound), so it is
    /// the same at every restart.
    pub group: Option<String>,
    /// Topic patterns (`--kafka-topic`); empty: `mfapi.{cid}.{fid}.{pname}`.
    pub topics: Vec<String>,
    /// `--kafka-session-timeout-ms`; `None`: 10 seconds.
    pub session_timeout: Option<Duration>,
}

/// The Kafka ingest of a server: its checked configuration and counters.
#[derive(Debug)]
pub(crate) struct Kafka {
    brokers: String,
    group: String,
    patterns: Vec<Pattern>,
    session_timeout: Duration,
    pub(crate) stats: Stats,
    /// Whether the brokers can be reached, and since when.
    link: link::Link,
    /// Partitions assigned now.
    assigned: std::sync::atomic::AtomicU64,
    /// Counts the assignments the group made (one per rebalance that gave
    /// this member partitions).
    assignments: watch::Sender<u64>,
}

impl Counted for Kafka {
    fn stats(&self) -> &Stats {
        &self.stats
    }

    fn source(&self) -> IngestSource {
        IngestSource::Kafka
    }
}

/// Kafka's counters at one moment, for `GET /metrics`.
#[derive(Debug, Clone, Default)]
pub(crate) struct KafkaSnapshot {
    pub(crate) assigned: u64,
    pub(crate) counters: Snapshot,
}

/// Checks `BROKERS`: `HOST:PORT` entries separated by commas.
fn check_brokers(brokers: &str) -> Result<(), String> {
    let form = "give HOST:PORT[,HOST:PORT…], such as 127.0.0.1:9092";
    if brokers.is_empty() {
        return Err(format!("--kafka {brokers:?}: no broker: {form}"));
    }
    for entry in brokers.split(',') {
        let entry = entry.trim();
        let entry = entry
            .strip_prefix("PLAINTEXT://")
            .or_else(|| entry.strip_prefix("tcp://"))
            .unwrap_or(entry);
        let port = entry
            .rsplit_once(':')
            .map(|(host, port)| (host, port.parse::<u16>()));
        match port {
            Some((host, Ok(p))) if !host.is_empty() && p > 0 => {}
            _ => {
                return Err(format!(
                    "--kafka {brokers:?}: {entry:?} is not HOST:PORT: {form}"
                ));
            }
        }
    }
    Ok(())
}

impl Kafka {
    /// Checks `options`; `state` and `addr` seed the default group.
    pub(crate) fn new(
        options: &KafkaIngest,
        state: Option<&Path>,
        addr: std::net::SocketAddr,
    ) -> Result<Kafka, String> {
        check_brokers(&options.brokers)?;
        let patterns = super::mqtt::topic::parse_patterns(
            &options.topics,
            "--kafka-topic",
            topic::MAX_PATTERNS,
            topic::DEFAULT,
            Pattern::parse,
        )?;
        let group = match &options.group {
            Some(g) if g.is_empty() || g.len() > 255 => {
                return Err(format!("--kafka-group {g:?}: give 1 to 255 bytes"));
            }
            Some(g) => g.clone(),
            None => super::mqtt::derived_client_id(&match state {
                Some(dir) => std::fs::canonicalize(dir)
                    .unwrap_or_else(|_| dir.to_owned())
                    .display()
                    .to_string(),
                None => addr.to_string(),
            }),
        };
        let session_timeout = options.session_timeout.unwrap_or(DEFAULT_SESSION_TIMEOUT);
        if !(Duration::from_secs(1)..=Duration::from_secs(3600)).contains(&session_timeout) {
            return Err(format!(
                "--kafka-session-timeout-ms {}: give 1000 to 3600000 (the broker may narrow it: \
                 group.min.session.timeout.ms, group.max.session.timeout.ms)",
                session_timeout.as_millis()
            ));
        }
        Ok(Kafka {
            brokers: options.brokers.clone(),
            group,
            patterns,
            session_timeout,
            stats: Stats::labelled("kafka"),
            link: link::Link::default(),
            assigned: std::sync::atomic::AtomicU64::new(0),
            assignments: watch::Sender::new(0),
        })
    }

    /// Its counters now, for `GET /metrics`.
    pub(crate) fn snapshot(&self) -> KafkaSnapshot {
        KafkaSnapshot {
            assigned: self.assigned.load(Relaxed),
            counters: self.stats.snapshot(),
        }
    }

    /// Counts the assignments of partitions: it moves once per rebalance
    /// that gives this server partitions.
    pub(crate) fn assignments(&self) -> watch::Receiver<u64> {
        self.assignments.subscribe()
    }

    /// The brokers, as given.
    pub(crate) fn brokers(&self) -> &str {
        &self.brokers
    }

    /// The consumer's librdkafka configuration.
    fn config(&self, max_inflight_bytes: usize) -> ClientConfig {
        let session = self.session_timeout.as_millis();
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.brokers)
            .set("group.id", &self.group)
            .set("client.id", "mfstream")
            // Offsets are committed by hand, once the store has the
            // records: never by librdkafka on its clock.
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            // A new group reads the topics from their start.
            .set("auto.offset.reset", "earliest")
            .set("session.timeout.ms", session.to_string())
            .set("heartbeat.interval.ms", (session / 5).max(100).to_string())
            .set(
                "topic.metadata.refresh.interval.ms",
                METADATA_REFRESH.as_millis().to_string(),
            )
            // The pre-fetch queue's bound: librdkafka stops fetching past it.
            .set(
                "queued.max.messages.kbytes",
                (max_inflight_bytes / 1024).clamp(1, 2_097_151).to_string(),
            )
            .set("queued.min.messages", BATCH.to_string())
            // Says when a broker is up again (`link`).
            .set(
                "statistics.interval.ms",
                link::STATISTICS_INTERVAL.as_millis().to_string(),
            )
            .set_log_level(RDKafkaLogLevel::Warning);
        c
    }
}

impl Kafka {
    /// `GET /ingest/kafka`'s answer: MQTT's counters under Kafka's names.
    fn to_json(&self) -> serde_json::Value {
        let mut counters = self.stats.to_json();
        let take = |counters: &mut serde_json::Value, key: &str| {
            counters
                .as_object_mut()
                .and_then(|o| o.remove(key))
                .unwrap_or(serde_json::Value::Null)
        };
        let link = self.link.snapshot();
        json!({
            "brokers": self.brokers,
            "group": self.group,
            "reachable": link.reachable,
            "reachableSince": link.since,
            "brokerErrors": link.errors,
            "topics": self.patterns.iter().map(Pattern::text).collect::<Vec<_>>(),
            "assignedPartitions": self.assigned.load(Relaxed),
            "assignments": take(&mut counters, "connects"),
            "lastError": take(&mut counters, "lastError"),
            "records": take(&mut counters, "messages"),
            "committed": take(&mut counters, "acknowledged"),
            "instants": take(&mut counters, "instants"),
            "duplicates": take(&mut counters, "duplicates"),
            "retries": take(&mut counters, "retries"),
            "bad": take(&mut counters, "bad"),
            "badSamples": take(&mut counters, "badSamples"),
        })
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
        (status = 200, description = "the Kafka ingest's state", body = super::api::KafkaStatus),
        (status = 404, description = "the server runs without `--kafka`", body = super::api::Exception),
    ),
)]
pub(crate) async fn status(State(app): State<Arc<App>>) -> Response {
    match &app.kafka {
        Some(kafka) => Json(kafka.to_json()).into_response(),
        None => Problem::not_found("Kafka ingest is off: start the server with --kafka HOST:PORT")
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `GET /api`'s schema of this answer names exactly the fields it has.
    #[test]
    fn the_api_schema_of_the_status_names_its_fields() {
        use utoipa::PartialSchema;
        let addr = "127.0.0.1:0".parse().unwrap();
        let o = KafkaIngest {
            brokers: "127.0.0.1:9092".into(),
            ..KafkaIngest::default()
        };
        let kafka = Kafka::new(&o, None, addr).unwrap();
        let mut answer = kafka.to_json();
        let mut keys: Vec<String> = answer.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        let schema = serde_json::to_value(super::super::api::KafkaStatus::schema()).unwrap();
        let mut want: Vec<String> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        want.sort();
        assert_eq!(keys, want);
        assert!(
            answer["bad"]
                .take()
                .as_object()
                .unwrap()
                .contains_key("notJson")
        );
    }

    #[test]
    fn brokers_are_host_port_lists_and_bad_ones_say_the_form() {
        for good in [
            "127.0.0.1:9092",
            "a:1,b:2",
            "PLAINTEXT://h:9092",
            "[::1]:9092",
        ] {
            assert_eq!(check_brokers(good), Ok(()), "{good}");
        }
        for bad in ["", "host", "host:0", "host:x", ":9092", "a:1,,b:2"] {
            let err = check_brokers(bad).unwrap_err();
            assert!(
                err.contains("HOST:PORT") && err.contains("--kafka"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn the_default_group_is_stable_and_bad_options_name_the_flag() {
        let addr = "127.0.0.1:0".parse().unwrap();
        let o = KafkaIngest {
            brokers: "127.0.0.1:9092".into(),
            ..KafkaIngest::default()
        };
        let dir = std::env::temp_dir();
        let a = Kafka::new(&o, Some(&dir), addr).unwrap();
        let b = Kafka::new(&o, Some(&dir), addr).unwrap();
        assert_eq!(a.group, b.group);
        assert!(a.group.starts_with("mfstream-"));
        let bad = |o: KafkaIngest| Kafka::new(&o, None, addr).unwrap_err();
        assert!(
            bad(KafkaIngest {
                group: Some(String::new()),
                ..o.clone()
            })
            .contains("--kafka-group")
        );
        assert!(
            bad(KafkaIngest {
                session_timeout: Some(Duration::from_millis(10)),
                ..o.clone()
            })
            .contains("--kafka-session-timeout-ms")
        );
        assert!(
            bad(KafkaIngest {
                topics: vec!["a.{cid}".into()],
                ..o
            })
            .contains("{fid}")
        );
    }
}

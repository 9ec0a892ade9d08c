//! Kafka ingest (`serve --kafka BROKERS`): a source of instants like
//! `POST …/ingest` and `--mqtt`, through the same broker pipeline
//! ([`super::broker`]: grouping by property, the duplicate rule, bad
//! records counted per reason).
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
//!   reads again what was taken but not committed. The duplicate rule
//!   drops those: an instant at or before the last one its property
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
mod status;
mod topic;

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use utoipa_axum::routes;

use super::broker::pipeline::Broker;
use super::broker::stats::Stats;
use super::broker::topic::{PatternError, Route};
use super::{Config, Configured, Kind, Run, Site, Source};
use crate::metrics::{Family, FamilyKind, IngestCounters, IngestTally, SourceMetrics};
use crate::{App, ServeError, ServeOptions};
use topic::Pattern;

/// Kafka ingest's kind.
pub(crate) const KIND: Kind = Kind {
    name: NAME,
    configure,
    routes: |router| router.routes(routes!(status::status)),
};

const NAME: &str = "kafka";

/// `--kafka`'s options, checked: `None` without `--kafka`.
fn configure(options: &ServeOptions) -> Configured {
    let Some(o) = &options.kafka else {
        return Ok(None);
    };
    let config = Checked::new(o).map_err(|error| ServeError::Source {
        name: NAME,
        message: error.to_string(),
    })?;
    Ok(Some(Box::new(config)))
}

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

/// `--kafka`'s options, checked; the group, if not given, is derived once
/// the state directory is open.
#[derive(Debug)]
struct Checked {
    brokers: String,
    group: Option<String>,
    patterns: Vec<Pattern>,
    session_timeout: Duration,
}

/// The Kafka ingest of a server: its checked configuration and counters.
#[derive(Debug)]
pub(crate) struct Kafka {
    brokers: String,
    group: String,
    patterns: Vec<Pattern>,
    session_timeout: Duration,
    stats: Stats,
    /// Its rows of `mfstream_ingest_…{source="kafka"}`.
    counters: Arc<IngestCounters>,
    /// Whether the brokers can be reached, and since when.
    link: link::Link,
    /// Partitions assigned now.
    assigned: std::sync::atomic::AtomicU64,
    /// Counts the assignments the group made (one per rebalance that gave
    /// this member partitions).
    assignments: watch::Sender<u64>,
}

/// How brokers are written, ending the errors about them.
const BROKERS_FORM: &str = "give HOST:PORT[,HOST:PORT…], such as 127.0.0.1:9092";

/// Why `--kafka`'s options are refused: each names the option and says the
/// form expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum OptionError {
    /// No broker.
    #[error("--kafka {brokers:?}: no broker: {BROKERS_FORM}")]
    NoBroker { brokers: String },
    /// An entry that is not `HOST:PORT`.
    #[error("--kafka {brokers:?}: {entry:?} is not HOST:PORT: {BROKERS_FORM}")]
    Broker { brokers: String, entry: String },
    /// A group of no byte, or over 255.
    #[error("--kafka-group {group:?}: give 1 to 255 bytes")]
    Group { group: String },
    /// A session timeout out of 1 s to 1 h.
    #[error(
        "--kafka-session-timeout-ms {}: give 1000 to 3600000 (the broker may narrow it: \
         group.min.session.timeout.ms, group.max.session.timeout.ms)",
        timeout.as_millis()
    )]
    SessionTimeout { timeout: Duration },
    /// A bad `--kafka-topic`.
    #[error(transparent)]
    Pattern(#[from] PatternError),
}

/// Checks `BROKERS`: `HOST:PORT` entries separated by commas.
fn check_brokers(brokers: &str) -> Result<(), OptionError> {
    if brokers.is_empty() {
        return Err(OptionError::NoBroker {
            brokers: brokers.to_owned(),
        });
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
                return Err(OptionError::Broker {
                    brokers: brokers.to_owned(),
                    entry: entry.to_owned(),
                });
            }
        }
    }
    Ok(())
}

impl Checked {
    /// Checks `options`: the brokers, topics, group and session timeout;
    /// the error names the option and the form expected.
    fn new(options: &KafkaIngest) -> Result<Checked, OptionError> {
        check_brokers(&options.brokers)?;
        let patterns = super::broker::topic::parse_patterns(
            &options.topics,
            topic::FLAG,
            topic::MAX_PATTERNS,
            topic::DEFAULT,
            Pattern::parse,
        )?;
        if let Some(g) = &options.group
            && (g.is_empty() || g.len() > 255)
        {
            return Err(OptionError::Group { group: g.clone() });
        }
        let session_timeout = options.session_timeout.unwrap_or(DEFAULT_SESSION_TIMEOUT);
        if !(Duration::from_secs(1)..=Duration::from_secs(3600)).contains(&session_timeout) {
            return Err(OptionError::SessionTimeout {
                timeout: session_timeout,
            });
        }
        Ok(Checked {
            brokers: options.brokers.clone(),
            group: options.group.clone(),
            patterns,
            session_timeout,
        })
    }

    /// The Kafka ingest at `site`, counted in `counters`.
    fn kafka(self, site: Site<'_>, counters: Arc<IngestCounters>) -> Kafka {
        Kafka {
            group: self
                .group
                .unwrap_or_else(|| super::broker::default_id(site)),
            brokers: self.brokers,
            patterns: self.patterns,
            session_timeout: self.session_timeout,
            stats: Stats::new(NAME),
            counters,
            link: link::Link::default(),
            assigned: std::sync::atomic::AtomicU64::new(0),
            assignments: watch::Sender::new(0),
        }
    }
}

impl Config for Checked {
    fn build(self: Box<Self>, site: Site<'_>, tally: &mut IngestTally) -> Arc<dyn Source> {
        let kafka = Arc::new(self.kafka(site, tally.counters(NAME)));
        tally.register(kafka.clone());
        kafka
    }
}

impl Kafka {
    /// Counts the assignments of partitions: it moves once per rebalance
    /// that gives this server partitions.
    pub(crate) fn assignments(&self) -> watch::Receiver<u64> {
        self.assignments.subscribe()
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

impl Source for Kafka {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(self: Arc<Self>, app: Arc<App>, stop: CancellationToken) -> Run {
        Box::pin(consumer::run(app, self, stop))
    }

    fn ready(&self) -> Option<(String, watch::Receiver<u64>)> {
        Some((
            format!("kafka assigned on {}", self.brokers),
            self.assignments(),
        ))
    }
}

impl Broker for Kafka {
    fn name(&self) -> &'static str {
        NAME
    }

    fn stats(&self) -> &Stats {
        &self.stats
    }

    fn counters(&self) -> &IngestCounters {
        &self.counters
    }

    fn route(&self, topic: &str) -> Option<Route> {
        topic::route(&self.patterns, topic)
    }

    fn patterns(&self) -> String {
        let texts: Vec<&str> = self.patterns.iter().map(Pattern::text).collect();
        texts.join(", ")
    }
}

impl SourceMetrics for Kafka {
    /// Kafka's own families; its instants and refusals are in the ingest
    /// families, `source="kafka"`.
    fn families(&self) -> Vec<Family> {
        let c = self.stats.snapshot();
        vec![
            Family::gauge(
                "mfstream_kafka_assigned_partitions",
                "Partitions the consumer group assigned to this server now.",
                self.assigned.load(Relaxed),
            ),
            Family::counter(
                "mfstream_kafka_assignments",
                "Rebalances of the consumer group that assigned partitions to this server.",
                c.connects,
            ),
            Family::counter(
                "mfstream_kafka_records",
                "Kafka records read, those read again after a restart or a rebalance included.",
                c.messages,
            ),
            Family::counter(
                "mfstream_kafka_committed",
                "Kafka records whose offsets were committed (taken, or refused as bad).",
                c.acked,
            ),
            Family::counter(
                "mfstream_kafka_duplicates",
                "Kafka instants dropped as duplicates (at or before their property's last).",
                c.duplicates,
            ),
            Family::counter(
                "mfstream_kafka_retries",
                "Kafka ingests tried again (a query's buffer full, the store unavailable).",
                c.retries,
            ),
            Family::new(
                "mfstream_kafka_bad_records",
                "Bad Kafka records (committed and dropped), by reason.",
                FamilyKind::Counter,
                c.bad
                    .iter()
                    .map(|(r, n)| (vec![("reason", *r)], *n))
                    .collect(),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(state: Option<&std::path::Path>) -> Site<'_> {
        Site {
            state,
            addr: "127.0.0.1:0".parse().unwrap(),
        }
    }

    /// `GET /api`'s schema of this answer names exactly the fields it has.
    #[test]
    fn the_api_schema_of_the_status_names_its_fields() {
        use utoipa::PartialSchema;
        let o = KafkaIngest {
            brokers: "127.0.0.1:9092".into(),
            ..KafkaIngest::default()
        };
        let kafka = Checked::new(&o).unwrap().kafka(site(None), Arc::default());
        let mut answer =
            serde_json::to_value(status::KafkaStatus::of(&kafka)).expect("a status serialises");
        let mut keys: Vec<String> = answer.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        let schema = serde_json::to_value(status::KafkaStatus::schema()).unwrap();
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
            let err = check_brokers(bad).unwrap_err().to_string();
            assert!(
                err.contains("HOST:PORT") && err.contains("--kafka"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn the_default_group_is_stable_and_bad_options_name_the_flag() {
        let o = KafkaIngest {
            brokers: "127.0.0.1:9092".into(),
            ..KafkaIngest::default()
        };
        let dir = std::env::temp_dir();
        let kafka = || {
            Checked::new(&o)
                .unwrap()
                .kafka(site(Some(&dir)), Arc::default())
        };
        let (a, b) = (kafka(), kafka());
        assert_eq!(a.group, b.group);
        assert!(a.group.starts_with("mfstream-"));
        let bad = |o: KafkaIngest| Checked::new(&o).unwrap_err().to_string();
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

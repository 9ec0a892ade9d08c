//! What a broker source did: counters (per reason for bad messages), the
//! last bad messages, the connection's state. Read at `GET /ingest/mqtt`
//! (and, under Kafka's names, `GET /ingest/kafka`) and at `GET /metrics`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use utoipa::ToSchema;

use super::payload::cut;
use crate::metrics;

/// The bad messages kept as samples.
pub(crate) const SAMPLES: usize = 16;

/// At most one bad-message warning in the log per this (the others are
/// counted, and said in the next).
const LOG_EVERY: Duration = Duration::from_secs(1);

/// The bytes of a topic, a payload and a reason kept in a sample.
const SAMPLE_BYTES: usize = 256;

/// Why a message was refused (acknowledged, counted, not ingested).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// The payload is not JSON (or is empty).
    NotJson,
    /// JSON of another shape than an instant, an array of them or a number;
    /// or a value the property's type does not take.
    WrongType,
    /// A datetime that is not ISO-8601 (or over 64 bytes), or later than
    /// the server's clock plus `--max-datetime-ahead-ms`; in a feature's
    /// positions, one not after the one before it too.
    BadDatetime,
    /// A payload over `--max-body`, or (with `--state`) a text value over
    /// what the store keeps.
    TooLarge,
    /// A topic no topic pattern (`--mqtt-topic`, `--kafka-topic`) matches (an id that is empty,
    /// `.`, `..` or over 256 bytes).
    Topic,
    /// A feature's positions (`…/tgsequence`) that are JSON but not
    /// positions: not one of the forms, coordinates that are not two or
    /// three numbers or out of the lon/lat ranges, a `MovingPoint`'s `crs`
    /// not the feature's.
    BadPosition,
}

impl Reason {
    const ALL: [Reason; 6] = [
        Reason::NotJson,
        Reason::WrongType,
        Reason::BadDatetime,
        Reason::TooLarge,
        Reason::Topic,
        Reason::BadPosition,
    ];

    /// The reason's name in the counters.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Reason::NotJson => "notJson",
            Reason::WrongType => "wrongType",
            Reason::BadDatetime => "badDatetime",
            Reason::TooLarge => "tooLarge",
            Reason::Topic => "topic",
            Reason::BadPosition => "badPosition",
        }
    }

    /// The `reason` of `mfstream_ingest_refused_total{source}` for a
    /// message refused before the ingest path answered: the one an HTTP
    /// ingest of the same payload is refused for. (A message the ingest
    /// path refused counts by its answer, as an HTTP ingest does.)
    pub(crate) fn metric(self) -> metrics::Reason {
        match self {
            // JSON of another shape is `body` over HTTP too.
            Reason::NotJson | Reason::WrongType => metrics::Reason::Body,
            Reason::BadDatetime => metrics::Reason::Datetime,
            Reason::TooLarge => metrics::Reason::TooLarge,
            Reason::Topic => metrics::Reason::Topic,
            Reason::BadPosition => metrics::Reason::Invalid,
        }
    }
}

/// The counters at one moment, for `GET /metrics`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Snapshot {
    // MQTT's families read these; Kafka's have partitions instead.
    #[cfg_attr(not(feature = "mqtt"), allow(dead_code))]
    pub(crate) connected: bool,
    #[cfg_attr(not(feature = "mqtt"), allow(dead_code))]
    pub(crate) subscribed: bool,
    pub(crate) connects: u64,
    pub(crate) messages: u64,
    pub(crate) acked: u64,
    pub(crate) instants: u64,
    pub(crate) duplicates: u64,
    pub(crate) retries: u64,
    /// Bad messages by reason (its name), every reason once.
    pub(crate) bad: Vec<(&'static str, u64)>,
}

/// A bad MQTT message (or Kafka record).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = MqttBadSample)]
pub(crate) struct BadSample {
    at: String,
    topic: String,
    reason: &'static str,
    detail: String,
    payload: String,
}

/// The counters.
#[derive(Debug)]
pub(crate) struct Stats {
    pub(crate) connected: AtomicBool,
    pub(crate) subscribed: AtomicBool,
    pub(crate) connects: AtomicU64,
    /// Messages received (redeliveries included).
    pub(crate) messages: AtomicU64,
    /// Messages acknowledged to the broker.
    pub(crate) acked: AtomicU64,
    /// Instants handed to the ingest path (and taken).
    pub(crate) instants: AtomicU64,
    /// Instants dropped as duplicates (at or before the property's last).
    pub(crate) duplicates: AtomicU64,
    /// Ingests that had to be tried again (a query's buffer full, the
    /// store unavailable).
    pub(crate) retries: AtomicU64,
    bad: [AtomicU64; 6],
    samples: Mutex<VecDeque<BadSample>>,
    /// When a bad message was last logged, and how many were not since.
    log: Mutex<(Option<Instant>, u64)>,
    last_error: Mutex<Option<String>>,
    /// The source in the log's lines.
    label: &'static str,
}

impl Stats {
    /// Counters whose log lines name `label` (`mqtt`, `kafka`).
    pub(crate) fn new(label: &'static str) -> Stats {
        Stats {
            connected: AtomicBool::default(),
            subscribed: AtomicBool::default(),
            connects: AtomicU64::default(),
            messages: AtomicU64::default(),
            acked: AtomicU64::default(),
            instants: AtomicU64::default(),
            duplicates: AtomicU64::default(),
            retries: AtomicU64::default(),
            bad: Default::default(),
            samples: Mutex::default(),
            log: Mutex::default(),
            last_error: Mutex::default(),
            label,
        }
    }

    /// Counts a bad message, keeps it as a sample, and logs it (at most one
    /// line per second; the others are counted in the next).
    pub(crate) fn bad(&self, topic: &str, reason: Reason, detail: &str, payload: &[u8]) {
        self.bad[reason as usize].fetch_add(1, Relaxed);
        let sample = BadSample {
            at: now(),
            topic: cut(topic, SAMPLE_BYTES).to_owned(),
            reason: reason.name(),
            detail: cut(detail, SAMPLE_BYTES * 2).to_owned(),
            payload: String::from_utf8_lossy(&payload[..payload.len().min(SAMPLE_BYTES)])
                .into_owned(),
        };
        {
            let mut samples = lock(&self.samples);
            if samples.len() == SAMPLES {
                samples.pop_front();
            }
            samples.push_back(sample);
        }
        let mut log = lock(&self.log);
        match log.0 {
            Some(last) if last.elapsed() < LOG_EVERY => log.1 += 1,
            _ => {
                let suppressed = std::mem::take(&mut log.1);
                *log = (Some(Instant::now()), 0);
                tracing::warn!(
                    topic = %cut(topic, SAMPLE_BYTES),
                    reason = reason.name(),
                    suppressed,
                    "{}: bad message acknowledged and dropped: {}",
                    self.label,
                    cut(detail, SAMPLE_BYTES * 2)
                );
            }
        }
    }

    /// The counters now.
    pub(crate) fn snapshot(&self) -> Snapshot {
        Snapshot {
            connected: self.connected.load(Relaxed),
            subscribed: self.subscribed.load(Relaxed),
            connects: self.connects.load(Relaxed),
            messages: self.messages.load(Relaxed),
            acked: self.acked.load(Relaxed),
            instants: self.instants.load(Relaxed),
            duplicates: self.duplicates.load(Relaxed),
            retries: self.retries.load(Relaxed),
            bad: Reason::ALL
                .iter()
                .map(|r| (r.name(), self.bad[*r as usize].load(Relaxed)))
                .collect(),
        }
    }

    /// Remembers why the connection failed.
    pub(crate) fn set_error(&self, error: Option<String>) {
        *lock(&self.last_error) = error;
    }

    /// Why the connection last failed, if it did.
    pub(crate) fn last_error(&self) -> Option<String> {
        lock(&self.last_error).clone()
    }

    /// The last bad messages, newest first.
    pub(crate) fn samples(&self) -> Vec<BadSample> {
        lock(&self.samples).iter().rev().cloned().collect()
    }
}

impl Snapshot {
    /// The bad messages per reason, as the status answers show them.
    pub(crate) fn bad_by_reason(&self) -> BTreeMap<&'static str, u64> {
        self.bad.iter().copied().collect()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Counters and samples only: a poisoned one is still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn now() -> String {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    mfstream_model::clock::rfc3339_millis(millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_messages_are_counted_per_reason_and_the_last_ones_kept_newest_first() {
        let stats = Stats::new("mqtt");
        for i in 0..SAMPLES + 3 {
            stats.bad(&format!("t/{i}"), Reason::NotJson, "no", b"x");
        }
        stats.bad("t/last", Reason::Topic, "no pattern", &[0xff; 1000]);
        let j = serde_json::json!({
            "bad": stats.snapshot().bad_by_reason(),
            "badSamples": stats.samples(),
        });
        assert_eq!(j["bad"]["notJson"], SAMPLES + 3);
        assert_eq!(j["bad"]["topic"], 1);
        assert_eq!(j["bad"]["wrongType"], 0);
        let samples = j["badSamples"].as_array().unwrap();
        assert_eq!(samples.len(), SAMPLES);
        assert_eq!(samples[0]["topic"], "t/last");
        assert_eq!(samples[0]["reason"], "topic");
        assert!(samples[0]["payload"].as_str().unwrap().chars().count() <= SAMPLE_BYTES);
        assert_eq!(samples[1]["topic"], format!("t/{}", SAMPLES + 2));
    }
}

//! Whether the brokers can be reached: one log line per change, the rest
//! in `GET /ingest/kafka`.
//!
//! librdkafka retries an unreachable broker on its own, reporting every
//! attempt (a `FAIL` log line, a transport-failure error, an all-brokers-down
//! error, the same again at each `recv`): 36 lines in 8 s for one closed
//! port. Here they are counted (`brokerErrors`), the last is kept
//! (`lastError`), and the log says only when the state changes:
//! unreachable (a warning naming the cause) and reachable again (a line
//! naming how long it was not). MQTT's client logs the same way.
//!
//! librdkafka says when every broker is down (`AllBrokersDown`); it does not
//! say when one is up again. Its statistics do (`statistics.interval.ms`):
//! a broker in state `UP`.

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use serde::Deserialize;

/// How often librdkafka reports its statistics: a broker that comes back is
/// seen reachable within about this long of its connection.
pub(crate) const STATISTICS_INTERVAL: Duration = Duration::from_secs(1);

/// What an error says about the brokers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// No broker can be reached (librdkafka's `AllBrokersDown`).
    AllDown,
    /// One connection failed (refused, timed out, a name not resolved):
    /// others may still be up, and librdkafka tries it again.
    Transport,
    /// Anything else: not about reaching the brokers.
    Other,
}

impl Kind {
    /// The kind of a librdkafka error.
    fn of(error: &KafkaError) -> Kind {
        match error.rdkafka_error_code() {
            Some(RDKafkaErrorCode::AllBrokersDown) => Kind::AllDown,
            Some(RDKafkaErrorCode::BrokerTransportFailure | RDKafkaErrorCode::Resolve) => {
                Kind::Transport
            }
            _ => Kind::Other,
        }
    }
}

/// The brokers' reachability, as the consumer sees it.
#[derive(Debug, Default)]
pub(crate) struct Link {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// `None` until the first connection succeeds or every one failed.
    reachable: Option<bool>,
    /// When `reachable` took its value; `None` while it is.
    since: Option<(Instant, SystemTime)>,
    /// The last transport failure since the brokers were last reachable:
    /// the cause an all-brokers-down line names.
    cause: Option<String>,
    /// Errors about the brokers reported since the start.
    errors: u64,
    /// The last error of another kind that was logged: the same again is
    /// not logged again.
    logged: Option<String>,
    /// The code of the last error taken, which `recv` returns next.
    last_code: Option<RDKafkaErrorCode>,
}

/// What the status shows of a [`Link`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Snapshot {
    pub(crate) reachable: Option<bool>,
    /// RFC 3339, when `reachable` took its value; `None` until it has one.
    pub(crate) since: Option<String>,
    pub(crate) errors: u64,
}

/// What the caller must do with an error after [`Link::error`]: set it as
/// `lastError` or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Report {
    /// Keep this text as the last error.
    LastError(String),
    /// Nothing new (a repeat while the brokers are known down).
    Nothing,
}

impl Link {
    /// Takes an error of librdkafka's error callback, logging it only when
    /// it changes the state (the first all-brokers-down since they were
    /// reachable, or since the start) or, not about reaching the brokers,
    /// when it differs from the last one logged. `text` is the error as it
    /// should read in `lastError`.
    pub(crate) fn error(&self, brokers: &str, error: &KafkaError, text: &str) -> Report {
        let mut state = lock(&self.state);
        state.last_code = error.rdkafka_error_code();
        match Kind::of(error) {
            Kind::Transport => {
                state.errors += 1;
                state.cause = Some(text.to_owned());
                tracing::debug!(brokers, "kafka: {text}");
                Report::LastError(text.to_owned())
            }
            Kind::AllDown => {
                state.errors += 1;
                if state.reachable == Some(false) {
                    tracing::debug!(brokers, "kafka: {text}");
                    return Report::Nothing;
                }
                state.reachable = Some(false);
                state.since = Some((Instant::now(), SystemTime::now()));
                let cause = state.cause.clone().unwrap_or_else(|| text.to_owned());
                tracing::warn!(
                    brokers,
                    "kafka: cannot reach the brokers ({cause}); retrying, GET /ingest/kafka shows \
                     the last error and since when"
                );
                Report::LastError(cause)
            }
            Kind::Other => {
                if state.logged.as_deref() != Some(text) {
                    tracing::warn!(brokers, "kafka: {text}");
                    state.logged = Some(text.to_owned());
                } else {
                    tracing::debug!(brokers, "kafka: {text}");
                }
                Report::LastError(text.to_owned())
            }
        }
    }

    /// Whether `error`, returned by `recv`, is the one the error callback
    /// took last: librdkafka hands a consumer's errors to both, the
    /// callback first, with the more telling text.
    pub(crate) fn reported(&self, error: &KafkaError) -> bool {
        let code = error.rdkafka_error_code();
        code.is_some() && lock(&self.state).last_code == code
    }

    /// Takes librdkafka's statistics: a broker `UP` means the brokers are
    /// reachable. `true` when they were known unreachable: the caller
    /// clears the `lastError` that said why.
    pub(crate) fn statistics(&self, brokers: &str, json: &[u8]) -> bool {
        let up = match serde_json::from_slice::<Statistics>(json) {
            Ok(statistics) => statistics.any_up(),
            Err(e) => {
                tracing::debug!("kafka: librdkafka's statistics do not parse: {e}");
                return false;
            }
        };
        up && self.reachable(brokers)
    }

    /// The brokers answered: logs the change, if it is one.
    fn reachable(&self, brokers: &str) -> bool {
        let mut state = lock(&self.state);
        if state.reachable == Some(true) {
            return false;
        }
        let now = (Instant::now(), SystemTime::now());
        match (state.reachable, state.since) {
            (Some(false), Some((down, _))) => tracing::info!(
                brokers,
                "kafka: brokers reachable again, after {:.1} s",
                down.elapsed().as_secs_f64()
            ),
            _ => tracing::info!(brokers, "kafka: brokers reachable"),
        }
        let was_down = state.reachable == Some(false);
        state.reachable = Some(true);
        state.since = Some(now);
        state.cause = None;
        state.logged = None;
        was_down
    }

    /// What the status shows.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let state = lock(&self.state);
        Snapshot {
            reachable: state.reachable,
            since: state.since.map(|(_, at)| rfc3339(at)),
            errors: state.errors,
        }
    }
}

/// The part of librdkafka's statistics read here.
#[derive(Deserialize)]
struct Statistics {
    #[serde(default)]
    brokers: std::collections::HashMap<String, BrokerStatistics>,
}

#[derive(Deserialize)]
struct BrokerStatistics {
    #[serde(default)]
    source: String,
    #[serde(default)]
    state: String,
}

impl Statistics {
    /// A broker is connected: not librdkafka's internal one, always `UP`.
    fn any_up(&self) -> bool {
        self.brokers
            .values()
            .any(|b| b.state == "UP" && b.source != "internal")
    }
}

fn rfc3339(at: SystemTime) -> String {
    let millis = at
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    mfstream_model::clock::rfc3339_millis(millis)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A state of plain values: a poisoned one is still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statistics(states: &[(&str, &str)]) -> Vec<u8> {
        let brokers: serde_json::Map<String, serde_json::Value> = states
            .iter()
            .enumerate()
            .map(|(i, (source, state))| {
                (
                    format!("b{i}"),
                    serde_json::json!({"source": source, "state": state, "nodeid": i}),
                )
            })
            .collect();
        serde_json::to_vec(&serde_json::json!({"name": "c", "brokers": brokers})).unwrap()
    }

    fn global(code: RDKafkaErrorCode) -> KafkaError {
        KafkaError::Global(code)
    }

    #[test]
    fn repeated_failures_change_the_state_once_and_are_counted() {
        let link = Link::default();
        let transport = global(RDKafkaErrorCode::BrokerTransportFailure);
        let all_down = global(RDKafkaErrorCode::AllBrokersDown);
        assert_eq!(link.snapshot().reachable, None);
        let refused = "connect to 127.0.0.1:1 failed: connection refused";
        assert_eq!(
            link.error("b", &transport, refused),
            Report::LastError(refused.into())
        );
        // The first all-down names the transport failure before it.
        assert_eq!(
            link.error("b", &all_down, "1/1 brokers are down"),
            Report::LastError(refused.into())
        );
        let down = link.snapshot();
        assert_eq!(down.reachable, Some(false));
        assert!(down.since.is_some());
        for _ in 0..10 {
            assert_eq!(
                link.error("b", &all_down, "1/1 brokers are down"),
                Report::Nothing
            );
        }
        let still = link.snapshot();
        assert_eq!(still.since, down.since, "a repeat is no change");
        assert_eq!(still.errors, 12);
        // `recv` returns the same error next: already reported.
        assert!(link.reported(&KafkaError::MessageConsumption(
            RDKafkaErrorCode::AllBrokersDown
        )));
        assert!(!link.reported(&KafkaError::MessageConsumption(
            RDKafkaErrorCode::OffsetOutOfRange
        )));
    }

    #[test]
    fn statistics_with_a_broker_up_make_the_brokers_reachable_once() {
        let link = Link::default();
        // The internal broker is always UP: not a connection.
        assert!(!link.statistics("b", &statistics(&[("internal", "UP")])));
        assert_eq!(link.snapshot().reachable, None);
        assert!(!link.statistics("b", &statistics(&[("configured", "CONNECT")])));
        // Reachable from the start: no error to clear.
        assert!(!link.statistics("b", &statistics(&[("configured", "UP")])));
        assert_eq!(link.snapshot().reachable, Some(true));
        let all_down = global(RDKafkaErrorCode::AllBrokersDown);
        link.error("b", &all_down, "1/1 brokers are down");
        assert_eq!(link.snapshot().reachable, Some(false));
        assert!(link.statistics("b", &statistics(&[("learned", "UP")])));
        assert!(!link.statistics("b", &statistics(&[("learned", "UP")])));
        assert_eq!(link.snapshot().reachable, Some(true));
        assert!(!link.statistics("b", b"not json"));
    }

    #[test]
    fn another_error_is_the_last_error_each_time_and_no_broker_failure() {
        let link = Link::default();
        let denied = global(RDKafkaErrorCode::TopicAuthorizationFailed);
        for _ in 0..3 {
            assert_eq!(
                link.error("b", &denied, "topic authorization failed"),
                Report::LastError("topic authorization failed".into())
            );
        }
        assert_eq!(link.snapshot().errors, 0);
        assert_eq!(link.snapshot().reachable, None);
    }
}

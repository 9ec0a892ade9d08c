//! MQTT ingest (`serve --mqtt URL`): a source of instants like `POST
//! …/ingest`, through the same ingest path ([`crate::ingest::take`]) and
//! the broker pipeline it shares with Kafka ([`super::broker`]).
//!
//! Nothing lost, nothing doubled:
//!
//! - QoS 1 on a persistent session (clean session off, a stable client
//!   id), with manual acknowledgements: a message is acknowledged to the
//!   broker only once its instants are in the store (`--state`) or handed
//!   to the queries (memory only). A message the ingest cannot take now (a
//!   query's buffer full, the store unavailable) is tried again, unacked;
//!   one it refuses (a bad message) is acknowledged and counted.
//! - The client reconnects with backoff after a broker restart or a
//!   network cut, and subscribes again on every connection, whether the
//!   broker kept the session or not.
//! - Redeliveries (after a reconnect, or after `serve` was killed) are
//!   recognised: an instant at or before the last one the property took
//!   from MQTT (after a restart: the last instant in its log) is dropped
//!   and counted as a duplicate. See the pipeline
//!   ([`super::broker::pipeline`]).
//! - Back-pressure: at most [`MAX_INFLIGHT`] messages (and
//!   `--max-inflight-bytes` of payload) are held between the socket and
//!   their acknowledgement; past that the client stops reading the socket.
//!
//! rumqttc (bytebeam's, the most used Rust MQTT client) is the client, in
//! MQTT 5: manual acks (`set_manual_acks`), a session that outlives the
//! connection (clean start off, session expiry "never"), and the Receive
//! Maximum, which bounds the unacknowledged messages the broker sends.
//! (With MQTT 3.1.1 only the broker's own setting bounds them; past
//! rumqttc's request channel the acknowledgements would wait on a reader
//! that waits on them.)

mod acks;
mod status;
mod topic;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::{Filter, Packet, SubAck, SubscribeReasonCode};
use rumqttc::v5::{AsyncClient, Event, EventLoop, MqttOptions};
use rumqttc::{TlsConfiguration, Transport};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio_util::sync::CancellationToken;
use utoipa_axum::routes;

use super::broker::pipeline::{self, Broker, Delivery};
use super::broker::stats::Stats;
use super::broker::topic::{PatternError, Route};
use super::{Config, Configured, Kind, Run, Site, Source};
use crate::metrics::{Family, FamilyKind, IngestCounters, IngestTally, SourceMetrics};
use crate::{App, ServeError, ServeOptions};
use topic::Pattern;

/// MQTT ingest's kind.
pub(crate) const KIND: Kind = Kind {
    name: NAME,
    configure,
    routes: |router| router.routes(routes!(status::status)),
};

const NAME: &str = "mqtt";

/// `--mqtt`'s options, checked: `None` without `--mqtt`.
fn configure(options: &ServeOptions) -> Configured {
    let Some(o) = &options.mqtt else {
        return Ok(None);
    };
    let config = Checked::new(o).map_err(|error| ServeError::Source {
        name: NAME,
        message: error.to_string(),
    })?;
    Ok(Some(Box::new(config)))
}

/// The most messages held between the socket and their acknowledgement:
/// past it the client stops reading (the broker holds the rest).
pub(crate) const MAX_INFLIGHT: usize = 4096;

/// MQTT's largest packet (256 MiB).
const MAX_PACKET: u32 = 268_435_455;

/// rumqttc's request channel: every acknowledgement owed fits.
const REQUESTS: usize = 2 * MAX_INFLIGHT + 16;

/// The first wait before a reconnection, doubled after each failure up
/// to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The keep-alive: a broker gone silent is noticed within 1.5 times it.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// MQTT ingest, as `serve --mqtt` configures it.
#[derive(Debug, Clone, Default)]
pub struct MqttIngest {
    /// The broker: `mqtt://host[:port]` (port 1883) or `mqtts://host[:port]`
    /// (port 8883, with `ca`).
    pub url: String,
    /// With `mqtts://`: the PEM file of the CA that signed the broker's
    /// certificate.
    pub ca: Option<PathBuf>,
    /// Topic patterns (`--mqtt-topic`); empty: `mfapi/{cid}/{fid}/{pname}`.
    pub topics: Vec<String>,
    /// The client id; `None`: derived from the state directory (or, without
    /// one, from the address bound), so it is the same at every restart.
    pub client_id: Option<String>,
    /// The user name (`MFSTREAM_MQTT_USERNAME`), never a flag.
    pub username: Option<String>,
    /// The password (`MFSTREAM_MQTT_PASSWORD`), never a flag.
    pub password: Option<String>,
}

/// A broker address, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Address {
    tls: bool,
    host: String,
    port: u16,
}

/// How a broker URL is written, ending the errors about one.
const URL_FORM: &str =
    "give mqtt://HOST[:PORT] or mqtts://HOST[:PORT], such as mqtt://127.0.0.1:1883";

/// Why `--mqtt`'s options are refused: each names the option and says the
/// form expected.
#[derive(Debug, thiserror::Error)]
enum OptionError {
    /// A URL of another scheme.
    #[error("--mqtt {url:?}: not an MQTT URL: {URL_FORM}")]
    NotMqtt { url: String },
    /// A URL with a user or a password.
    #[error(
        "--mqtt {url:?}: credentials are not taken from the URL (a command line is visible to \
         every user): set MFSTREAM_MQTT_USERNAME and MFSTREAM_MQTT_PASSWORD"
    )]
    Credentials { url: String },
    /// A URL with a path, a query or a fragment.
    #[error("--mqtt {url:?}: a broker URL has no path: {URL_FORM}")]
    Path { url: String },
    /// An IPv6 host whose `[` is not closed.
    #[error("--mqtt {url:?}: an unclosed '[': {URL_FORM}")]
    Bracket { url: String },
    /// A URL without a host.
    #[error("--mqtt {url:?}: no host: {URL_FORM}")]
    NoHost { url: String },
    /// A port that is not 1 to 65535.
    #[error("--mqtt {url:?}: the port {port:?} is not 1 to 65535: {URL_FORM}")]
    Port { url: String, port: String },
    /// An `mqtts://` broker without `--mqtt-ca`.
    #[error(
        "--mqtt {url:?}: mqtts:// needs --mqtt-ca FILE, the CA that signed the broker's \
         certificate"
    )]
    NoCa { url: String },
    /// `--mqtt-ca` for an `mqtt://` broker.
    #[error("--mqtt-ca is only for mqtts:// brokers; --mqtt is {url:?}")]
    CaWithoutTls { url: String },
    /// A CA file that cannot be read.
    #[error(
        "--mqtt-ca {:?}: cannot read it ({error}): give the PEM file of the CA that signed the \
         broker's certificate",
        ca.display()
    )]
    CaUnreadable { ca: PathBuf, error: std::io::Error },
    /// A CA file whose PEM does not parse.
    #[error("--mqtt-ca {:?}: {error}", ca.display())]
    CaPem {
        ca: PathBuf,
        error: rustls::pki_types::pem::Error,
    },
    /// A CA certificate rustls does not take.
    #[error("--mqtt-ca {:?}: {error}", ca.display())]
    CaRefused { ca: PathBuf, error: rustls::Error },
    /// A CA file without a certificate.
    #[error(
        "--mqtt-ca {:?}: no PEM certificate in it: give the CA's certificate \
         (-----BEGIN CERTIFICATE-----)",
        ca.display()
    )]
    CaEmpty { ca: PathBuf },
    /// TLS that rustls cannot set up.
    #[error("TLS: {0}")]
    Tls(rustls::Error),
    /// A client id of no byte, or over MQTT's limit.
    #[error(
        "--mqtt-client-id {id:?}: give 1 to 65535 bytes (23 letters and digits fit every broker)"
    )]
    ClientId { id: String },
    /// A password without a user.
    #[error("MFSTREAM_MQTT_PASSWORD is set without MFSTREAM_MQTT_USERNAME: set both, or neither")]
    PasswordOnly,
    /// A bad `--mqtt-topic`.
    #[error(transparent)]
    Pattern(#[from] PatternError),
}

/// Parses `mqtt://host[:port]` or `mqtts://host[:port]`.
fn parse_url(url: &str) -> Result<Address, OptionError> {
    let owned = || url.to_owned();
    let (tls, rest) = if let Some(rest) = url.strip_prefix("mqtt://") {
        (false, rest)
    } else if let Some(rest) = url.strip_prefix("mqtts://") {
        (true, rest)
    } else {
        return Err(OptionError::NotMqtt { url: owned() });
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.contains('@') {
        return Err(OptionError::Credentials { url: owned() });
    }
    if rest.contains(['/', '?', '#']) {
        return Err(OptionError::Path { url: owned() });
    }
    let (host, port) = match rest.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((host, "")) => (host, None),
            Some((host, port)) => (host, Some(port.strip_prefix(':').unwrap_or(port))),
            None => return Err(OptionError::Bracket { url: owned() }),
        },
        None => match rest.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (rest, None),
        },
    };
    if host.is_empty() {
        return Err(OptionError::NoHost { url: owned() });
    }
    let port = match port {
        None => {
            if tls {
                8883
            } else {
                1883
            }
        }
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| OptionError::Port {
                url: owned(),
                port: p.to_owned(),
            })?,
    };
    Ok(Address {
        tls,
        host: host.to_owned(),
        port,
    })
}

/// The rustls configuration trusting the CA in `ca` (PEM).
fn tls_config(ca: &Path) -> Result<rustls::ClientConfig, OptionError> {
    let pem = std::fs::read(ca).map_err(|error| OptionError::CaUnreadable {
        ca: ca.to_owned(),
        error,
    })?;
    let mut roots = rustls::RootCertStore::empty();
    // The certificates only: a key or another section in the file is
    // passed over.
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|error| OptionError::CaPem {
            ca: ca.to_owned(),
            error,
        })?;
        roots.add(cert).map_err(|error| OptionError::CaRefused {
            ca: ca.to_owned(),
            error,
        })?;
    }
    if roots.is_empty() {
        return Err(OptionError::CaEmpty { ca: ca.to_owned() });
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(OptionError::Tls)?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// `--mqtt`'s options, checked; the client id, if not given, is derived
/// once the state directory is open.
#[derive(Debug)]
struct Checked {
    url: String,
    broker: Address,
    tls: Option<Arc<rustls::ClientConfig>>,
    patterns: Vec<Pattern>,
    client_id: Option<String>,
    credentials: Option<(String, String)>,
}

impl Checked {
    /// Checks `options`: the broker's URL, TLS, topics, client id and
    /// credentials; the error names the option and the form expected.
    fn new(options: &MqttIngest) -> Result<Checked, OptionError> {
        let broker = parse_url(&options.url)?;
        let tls = match (broker.tls, &options.ca) {
            (true, Some(ca)) => Some(Arc::new(tls_config(ca)?)),
            (true, None) => {
                return Err(OptionError::NoCa {
                    url: options.url.clone(),
                });
            }
            (false, Some(_)) => {
                return Err(OptionError::CaWithoutTls {
                    url: options.url.clone(),
                });
            }
            (false, None) => None,
        };
        let patterns = super::broker::topic::parse_patterns(
            &options.topics,
            topic::FLAG,
            topic::MAX_PATTERNS,
            topic::DEFAULT,
            Pattern::parse,
        )?;
        if let Some(id) = &options.client_id
            && (id.is_empty() || id.len() > 65_535)
        {
            return Err(OptionError::ClientId { id: id.clone() });
        }
        let credentials = match (&options.username, &options.password) {
            (Some(user), password) => Some((user.clone(), password.clone().unwrap_or_default())),
            (None, Some(_)) => return Err(OptionError::PasswordOnly),
            (None, None) => None,
        };
        Ok(Checked {
            url: options.url.clone(),
            broker,
            tls,
            patterns,
            client_id: options.client_id.clone(),
            credentials,
        })
    }
}

impl Config for Checked {
    fn build(self: Box<Self>, site: Site<'_>, tally: &mut IngestTally) -> Arc<dyn Source> {
        let checked = *self;
        let mqtt = Arc::new(Mqtt {
            client_id: checked
                .client_id
                .unwrap_or_else(|| super::broker::default_id(site)),
            url: checked.url,
            broker: checked.broker,
            tls: checked.tls,
            patterns: checked.patterns,
            credentials: checked.credentials,
            stats: Stats::new(NAME),
            counters: tally.counters(NAME),
            subscribed: watch::Sender::new(0),
        });
        tally.register(mqtt.clone());
        mqtt
    }
}

/// The MQTT ingest of a server: its checked configuration and counters.
#[derive(Debug)]
pub(crate) struct Mqtt {
    url: String,
    broker: Address,
    tls: Option<Arc<rustls::ClientConfig>>,
    patterns: Vec<Pattern>,
    client_id: String,
    credentials: Option<(String, String)>,
    stats: Stats,
    /// Its rows of `mfstream_ingest_…{source="mqtt"}`.
    counters: Arc<IngestCounters>,
    /// Counts the subscriptions the broker granted (one per connection).
    subscribed: watch::Sender<u64>,
}

impl Mqtt {
    /// Counts the subscriptions granted: it moves once per connection.
    pub(crate) fn subscriptions(&self) -> watch::Receiver<u64> {
        self.subscribed.subscribe()
    }

    fn options(&self) -> MqttOptions {
        let mut o = MqttOptions::new(&self.client_id, &self.broker.host, self.broker.port);
        o.set_clean_start(false)
            // The session outlives the connection: "never expires".
            .set_session_expiry_interval(Some(u32::MAX))
            // The broker sends at most this many unacknowledged messages:
            // the bound of what is held here, and of the acknowledgements
            // owed (the request channel holds them all).
            .set_receive_maximum(Some(MAX_INFLIGHT as u16))
            .set_manual_acks(true)
            .set_keep_alive(KEEP_ALIVE)
            // MQTT's own maximum, announced: a broker drops a message over
            // the size a client announces without a word, and rumqttc's
            // default (10 KiB) would end the connection on one, which the
            // broker then sends again at each reconnection. A payload over
            // --max-body is read, then refused (acknowledged, counted).
            .set_max_packet_size(Some(MAX_PACKET))
            .set_request_channel_capacity(REQUESTS);
        if let Some((user, password)) = &self.credentials {
            o.set_credentials(user, password);
        }
        if let Some(tls) = &self.tls {
            o.set_transport(Transport::tls_with_config(TlsConfiguration::Rustls(
                tls.clone(),
            )));
        }
        o
    }
}

/// A message on its way from the socket to its acknowledgement.
#[derive(Debug)]
struct Msg {
    publish: rumqttc::v5::mqttbytes::v5::Publish,
    /// Its topic (MQTT 5 carries it as bytes).
    topic: String,
    /// The connection it came on: an acknowledgement is sent only on it
    /// (after a reconnection the broker sends it again, with the same id).
    connection: u64,
    /// Its bytes of `--max-inflight-bytes`.
    _bytes: tokio::sync::OwnedSemaphorePermit,
}

/// Runs the MQTT ingest until `stop`: the connection task reads messages
/// into a bounded channel, the pipeline ingests and acknowledges them.
async fn run(app: Arc<App>, mqtt: Arc<Mqtt>, stop: CancellationToken) {
    let options = mqtt.options();
    let (client, eventloop) = AsyncClient::new(options, REQUESTS);
    let (tx, rx) = mpsc::channel(MAX_INFLIGHT);
    let connection = Arc::new(AtomicU64::new(0));
    let bytes = Arc::new(Semaphore::new(
        app.options
            .limits
            .max_inflight_bytes
            .clamp(1, Semaphore::MAX_PERMITS),
    ));
    let reader = connect(
        app.clone(),
        eventloop,
        client.clone(),
        tx,
        bytes,
        mqtt.clone(),
        connection.clone(),
    );
    let ingest = acks::run(app, mqtt, client, rx, connection);
    tokio::select! {
        () = reader => {}
        () = ingest => {}
        () = stop.cancelled() => {}
    }
}

/// Polls the connection: (re)connects with backoff, subscribes on every
/// connection, and sends each message to the pipeline, waiting (not
/// reading) while [`MAX_INFLIGHT`] messages or the bytes are held.
async fn connect(
    app: Arc<App>,
    mut eventloop: EventLoop,
    client: AsyncClient,
    tx: mpsc::Sender<Msg>,
    bytes: Arc<Semaphore>,
    mqtt: Arc<Mqtt>,
    connection: Arc<AtomicU64>,
) {
    let stats = &mqtt.stats;
    let filters: Vec<Filter> = mqtt
        .patterns
        .iter()
        .map(|p| Filter::new(p.filter(), QoS::AtLeastOnce))
        .collect();
    let mut backoff = MIN_BACKOFF;
    loop {
        match eventloop.poll().await {
            Ok(Event::Incoming(Packet::ConnAck(ack))) => {
                connection.fetch_add(1, Relaxed);
                stats.connects.fetch_add(1, Relaxed);
                stats.connected.store(true, Relaxed);
                stats.set_error(None);
                backoff = MIN_BACKOFF;
                tracing::info!(
                    broker = %mqtt.url,
                    client_id = %mqtt.client_id,
                    session_present = ack.session_present,
                    "mqtt: connected"
                );
                // Every time: a broker that lost the session (restarted
                // without persistence) would otherwise send nothing more.
                if client.subscribe_many(filters.clone()).await.is_err() {
                    return;
                }
            }
            Ok(Event::Incoming(Packet::SubAck(ack))) => subscribed(&mqtt, &ack),
            Ok(Event::Incoming(Packet::Publish(publish))) => {
                stats.messages.fetch_add(1, Relaxed);
                let topic = String::from_utf8_lossy(&publish.topic).into_owned();
                if pipeline::over_max_body(&app, &*mqtt, &topic, publish.payload.len(), "payload") {
                    if client.ack(&publish).await.is_err() {
                        return;
                    }
                    stats.acked.fetch_add(1, Relaxed);
                    continue;
                }
                let n = u32::try_from(publish.payload.len().max(1)).unwrap_or(u32::MAX);
                // Waits (not reading) while the bytes are held.
                let Ok(permit) = bytes.clone().acquire_many_owned(n).await else {
                    return;
                };
                let msg = Msg {
                    publish,
                    topic,
                    connection: connection.load(Relaxed),
                    _bytes: permit,
                };
                // Waits (not reading) while MAX_INFLIGHT are held.
                if tx.send(msg).await.is_err() {
                    return;
                }
            }
            Ok(_) => {}
            Err(e) => {
                disconnected(&mqtt, &e, backoff);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// The connection failed (or could not be made): says so, and why, before
/// the wait of `backoff`.
fn disconnected(mqtt: &Mqtt, e: &impl std::fmt::Display, backoff: Duration) {
    let stats = &mqtt.stats;
    let was = stats.connected.swap(false, Relaxed);
    stats.subscribed.store(false, Relaxed);
    let why = format!("{e}");
    if was {
        tracing::warn!(broker = %mqtt.url, "mqtt: connection lost ({why}): reconnecting");
    } else if backoff == MIN_BACKOFF {
        // The first failure of a series is worth a warning (a broker down
        // at start-up); the retries are not.
        tracing::warn!(broker = %mqtt.url, "mqtt: cannot connect ({why}): retrying");
    } else {
        tracing::debug!(broker = %mqtt.url, "mqtt: cannot connect ({why}): retrying in {backoff:?}");
    }
    stats.set_error(Some(why));
}

/// The broker's answer to the subscriptions: granted (counted, so the
/// line `mfstream: mqtt subscribed` is printed), or refused (an error,
/// and the reason in `lastError`).
fn subscribed(mqtt: &Mqtt, ack: &SubAck) {
    let refused = ack
        .return_codes
        .iter()
        .any(|c| !matches!(c, SubscribeReasonCode::Success(_)));
    if refused {
        let why = format!(
            "the broker refused the subscription to {}: check its ACL for this client or user",
            mqtt.patterns
                .iter()
                .map(Pattern::filter)
                .collect::<Vec<_>>()
                .join(", ")
        );
        tracing::error!("mqtt: {why}");
        mqtt.stats.set_error(Some(why));
    } else {
        mqtt.stats.subscribed.store(true, Relaxed);
        mqtt.subscribed.send_modify(|n| *n += 1);
        tracing::info!(broker = %mqtt.url, "mqtt: subscribed");
    }
}

impl Source for Mqtt {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(self: Arc<Self>, app: Arc<App>, stop: CancellationToken) -> Run {
        Box::pin(run(app, self, stop))
    }

    fn ready(&self) -> Option<(String, watch::Receiver<u64>)> {
        Some((
            format!("mqtt subscribed on {}", self.url),
            self.subscriptions(),
        ))
    }
}

impl Delivery for Msg {
    fn topic(&self) -> &str {
        &self.topic
    }

    fn payload(&self) -> &[u8] {
        &self.publish.payload
    }
}

impl Broker for Mqtt {
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

impl SourceMetrics for Mqtt {
    /// MQTT's own families; its instants and refusals are in the ingest
    /// families, `source="mqtt"`.
    fn families(&self) -> Vec<Family> {
        let c = self.stats.snapshot();
        vec![
            Family::gauge(
                "mfstream_mqtt_connected",
                "1 while connected to the MQTT broker, else 0.",
                u64::from(c.connected),
            ),
            Family::gauge(
                "mfstream_mqtt_subscribed",
                "1 while the broker has granted the subscriptions of this connection, else 0.",
                u64::from(c.subscribed),
            ),
            Family::counter(
                "mfstream_mqtt_connections",
                "Connections made to the MQTT broker: the first and each reconnection.",
                c.connects,
            ),
            Family::counter(
                "mfstream_mqtt_messages",
                "MQTT messages received, redeliveries included.",
                c.messages,
            ),
            Family::counter(
                "mfstream_mqtt_acknowledged",
                "MQTT messages acknowledged to the broker.",
                c.acked,
            ),
            Family::counter(
                "mfstream_mqtt_duplicates",
                "MQTT instants dropped as duplicates (at or before their property's last).",
                c.duplicates,
            ),
            Family::counter(
                "mfstream_mqtt_retries",
                "MQTT ingests tried again (a query's buffer full, the store unavailable).",
                c.retries,
            ),
            Family::new(
                "mfstream_mqtt_bad_messages",
                "Bad MQTT messages (acknowledged and dropped), by reason.",
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
    use super::super::broker::stats::Reason;
    use super::*;

    /// `GET /api`'s schema of this answer names exactly the fields it has
    /// (the served answer needs a broker: its keys are these).
    #[test]
    fn the_api_schema_of_the_status_names_its_fields() {
        use utoipa::PartialSchema;
        let keys = |v: &serde_json::Value| -> Vec<String> {
            let mut keys: Vec<String> = v.as_object().expect("an object").keys().cloned().collect();
            keys.sort();
            keys
        };
        let schema = |s: utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>| {
            serde_json::to_value(s).expect("a schema serialises")["properties"].clone()
        };
        let stats = Stats::new(NAME);
        stats.bad("mfapi/c/f", Reason::NotJson, "detail", b"payload");
        let answer = serde_json::to_value(status::MqttStatus::of("", "", &[], &stats))
            .expect("a status serialises");
        assert_eq!(keys(&answer), keys(&schema(status::MqttStatus::schema())));
        assert_eq!(
            keys(&answer["badSamples"][0]),
            keys(&schema(super::super::broker::stats::BadSample::schema()))
        );
    }

    #[test]
    fn broker_urls_are_parsed_with_their_default_ports_and_bad_ones_say_the_form() {
        let b = |tls, host: &str, port| Address {
            tls,
            host: host.into(),
            port,
        };
        assert_eq!(
            parse_url("mqtt://127.0.0.1:1884").unwrap(),
            b(false, "127.0.0.1", 1884)
        );
        assert_eq!(
            parse_url("mqtt://broker/").unwrap(),
            b(false, "broker", 1883)
        );
        assert_eq!(parse_url("mqtts://b").unwrap(), b(true, "b", 8883));
        assert_eq!(parse_url("mqtt://[::1]:99").unwrap(), b(false, "::1", 99));
        for (bad, says) in [
            ("http://b", "not an MQTT URL"),
            ("mqtt://u:p@b", "MFSTREAM_MQTT_USERNAME"),
            ("mqtt://b/topic", "no path"),
            ("mqtt://b:0", "1 to 65535"),
            ("mqtt://b:x", "\"x\""),
            ("mqtt://", "no host"),
        ] {
            let err = parse_url(bad).unwrap_err().to_string();
            assert!(
                err.contains(says) && err.contains("mqtt://"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn a_ca_file_without_a_certificate_is_refused_saying_what_it_needs() {
        let dir = std::env::temp_dir().join(format!("mfstream-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.pem");
        // A key alone: not a certificate, passed over.
        std::fs::write(
            &ca,
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        let err = tls_config(&ca).unwrap_err().to_string();
        assert!(err.contains("no PEM certificate"), "{err}");
        // A certificate section that does not end.
        std::fs::write(&ca, "-----BEGIN CERTIFICATE-----\nAAAA\n").unwrap();
        let err = tls_config(&ca).unwrap_err().to_string();
        assert!(err.starts_with("--mqtt-ca "), "{err}");
        let err = tls_config(&dir.join("absent.pem")).unwrap_err().to_string();
        assert!(err.contains("cannot read it"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn mqtts_needs_a_ca_and_a_ca_needs_mqtts_and_a_password_needs_a_user() {
        let mut o = MqttIngest {
            url: "mqtts://b".into(),
            ..MqttIngest::default()
        };
        assert!(
            Checked::new(&o)
                .unwrap_err()
                .to_string()
                .contains("--mqtt-ca")
        );
        o.url = "mqtt://b".into();
        o.ca = Some("/nonexistent".into());
        assert!(
            Checked::new(&o)
                .unwrap_err()
                .to_string()
                .contains("only for mqtts")
        );
        o.ca = None;
        o.password = Some("p".into());
        assert!(
            Checked::new(&o)
                .unwrap_err()
                .to_string()
                .contains("MFSTREAM_MQTT_USERNAME")
        );
        o.password = None;
        o.topics = vec!["a/{cid}".into()];
        assert!(Checked::new(&o).unwrap_err().to_string().contains("{fid}"));
    }
}

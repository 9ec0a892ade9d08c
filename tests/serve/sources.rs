//! The broker sources' conformance suite: cases written once and run
//! against each broker a test can start and publish to ([`TestBroker`]:
//! mosquitto for `--mqtt`, tansu for `--kafka`), with the helpers both
//! suites share. [`conformance!`] stamps one test per case in the module
//! of the broker it is given (`serve::mqtt::…`, `serve::kafka::…`), so
//! `cargo test mqtt` runs every case against mosquitto.
//!
//! A new broker source runs the same cases by implementing [`TestBroker`]
//! for its broker and invoking [`conformance!`] once.

use std::sync::mpsc;
use std::time::Duration;

use super::metrics::scrape_until;
use super::*;

/// A broker the test started, and how a server reads it.
pub(super) trait TestBroker: Sized {
    /// The source's name: the `source` label of the ingest metrics.
    const SOURCE: &'static str;
    /// The source's status route.
    const STATUS: &'static str;
    /// Its status's count of messages read (redeliveries included).
    const RECEIVED: &'static str;
    /// Its status's count of messages acknowledged (or committed).
    const ACKNOWLEDGED: &'static str;
    /// Its metric family of bad messages, by `reason`.
    const BAD_METRIC: &'static str;
    /// The most messages read and not yet acknowledged while the ingest
    /// is saturated: the rest waits at the broker.
    const MAX_HELD: u64;
    /// How long a delivery may take: a Kafka group may first have to wait
    /// for a killed member's session to time out.
    const PATIENCE: Duration;
    /// Topics the source reads whose ids are bad: one with an empty
    /// collection id, one with a feature id `..`. None where the
    /// subscription itself admits only good ids (Kafka's is a regular
    /// expression of letters, digits, `_` and `-`).
    const BAD_ID_TOPICS: Option<[&'static str; 2]>;

    /// A broker of the test's own, running, on which ship s1's topics
    /// ([`TestBroker::topic`]) can be published to.
    async fn start(name: &str) -> Self;

    /// The topic of ship s1's `property` (`speed`, `tgsequence`) by the
    /// default pattern.
    fn topic(property: &str) -> String;

    /// `serve` reading this broker with `args` and `env`, once it is ready
    /// (its line printed).
    fn serve(&self, name: &str, args: &[&str], env: &[(&str, String)]) -> Serve;

    /// Publishes `payloads` in order, one message each, to `topic`, on a
    /// task: its end means the broker has them all.
    fn send_to(&self, topic: &str, payloads: Vec<String>) -> tokio::task::JoinHandle<()>;

    /// Stops the broker and starts it again on the same port and storage.
    fn restart(&mut self);

    /// Publishes `payloads` to the topic of the property [`P`].
    fn send(&self, payloads: Vec<String>) -> tokio::task::JoinHandle<()> {
        self.send_to(&Self::topic("speed"), payloads)
    }
}

/// One test per conformance case, in the invoking module, for the broker
/// type given, each with the attributes given (an `#[ignore]` where the
/// broker needs a program CI installs).
macro_rules! conformance {
    ($source:literal, $broker:ty $(, #[$attr:meta])*) => {
        $crate::serve::sources::conformance!(@cases $source, $broker, [$(#[$attr])*],
            bad_records_are_acknowledged_counted_per_reason_and_sampled_behind_the_token,
            an_instant_stamped_past_the_servers_horizon_is_bad_and_later_ones_are_taken,
            positions_on_tgsequence_reach_position_queries_once_and_bad_ones_are_counted,
            positions_are_checked_in_the_reference_system_a_query_fixed,
            a_saturated_ingest_stops_the_reading_and_loses_nothing_once_it_drains,
            after_a_sigkill_of_serve_every_message_is_in_the_results_exactly_once,
            positions_after_a_sigkill_of_serve_are_each_in_the_results_exactly_once,
        );
    };
    (@cases $source:literal, $broker:ty, $attrs:tt, $($case:ident,)*) => {
        $($crate::serve::sources::conformance!(@case $source, $broker, $attrs, $case);)*
    };
    (@case $source:literal, $broker:ty, [$(#[$attr:meta])*], $case:ident) => {
        #[tokio::test]
        $(#[$attr])*
        async fn $case() {
            let name = concat!($source, "-", stringify!($case));
            $crate::serve::sources::$case::<$broker>(name).await;
        }
    };
}
pub(super) use conformance;

/// The topic of the property [`P`].
fn speed<B: TestBroker>() -> String {
    B::topic("speed")
}

/// The topic of ship s1's positions, [`S`].
fn positions<B: TestBroker>() -> String {
    B::topic("tgsequence")
}

/// The positions of ship s1.
const S: &str = "/collections/ships/items/s1/tgsequence";

/// Publishes `payloads` to `topic` and waits until the broker has them.
async fn deliver<B: TestBroker>(broker: &B, topic: &str, payloads: Vec<String>) {
    broker
        .send_to(topic, payloads)
        .await
        .expect("every message published");
}

/// The source's status once `done` holds ([`eventually`], within
/// [`TestBroker::PATIENCE`]).
pub(super) async fn status_until<B: TestBroker>(
    client: &mut Client,
    what: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let probe = async || client.get(B::STATUS).await.json();
    eventually(what, B::PATIENCE, probe, done).await
}

/// The source's status once it has acknowledged `n` messages: every one
/// published handled, bad ones included.
async fn acknowledged<B: TestBroker>(client: &mut Client, n: u64) -> serde_json::Value {
    let what = format!("{n} messages acknowledged");
    status_until::<B>(client, &what, |s| s[B::ACKNOWLEDGED] == n).await
}

/// A position at `secs` seconds into 2026.
pub(super) fn position(secs: u32, lon: f64, lat: f64) -> String {
    format!(r#"{{"datetime":"2026-01-01T00:00:{secs:02}Z","coordinates":[{lon},{lat}]}}"#)
}

/// An instant, an array of two and a bare number (stamped on receipt)
/// reach a query, in order. The server, still running, is returned for
/// the broker's own checks.
pub(super) async fn instants_arrays_and_bare_numbers_reach_the_queries<B: TestBroker>(
    broker: &B,
    name: &str,
    args: &[&str],
) -> Serve {
    let server = broker.serve(name, args, &[]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"mul","arg":2}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let payloads = vec![
        instant(1, "1"),
        format!("[{},{}]", instant(2, "2"), instant(3, "3")),
        " 4 ".to_owned(),
    ];
    deliver(broker, &speed::<B>(), payloads).await;
    let events = take(&mut sse, 4).await;
    assert_eq!(values(&events), [2.0, 4.0, 6.0, 8.0]);
    let datetimes: Vec<String> = events
        .iter()
        .map(|e| e.json()["datetime"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(datetimes[..3], [at(1), at(2), at(3)]);
    // The bare number is stamped on receipt: now, in UTC microseconds.
    assert!(
        datetimes[3].len() == "2026-01-01T00:00:00.000000Z".len() && datetimes[3] > at(3),
        "{}",
        datetimes[3]
    );
    server
}

/// Every kind of bad message is acknowledged (so never redelivered),
/// counted under its reason in the status and the metrics, and sampled
/// with its topic and why; the status is behind the token like every
/// route.
pub(super) async fn bad_records_are_acknowledged_counted_per_reason_and_sampled_behind_the_token<
    B: TestBroker,
>(
    name: &str,
) {
    let broker = B::start(name).await;
    let token = ("MFSTREAM_TOKEN", "sesame".to_owned());
    let server = broker.serve(name, &["--max-body", "1024"], &[token]);
    let mut client = server.client().with_token("sesame");
    let query = register(&mut client, P, r#"{"operation":"mul","arg":2}"#).await;
    let auth = [("Authorization", "Bearer sesame")];
    let mut sse = server.subscribe(&format!("{query}/stream"), &auth).await;
    let (topic, positions) = (speed::<B>(), positions::<B>());
    let payloads = vec![
        "nope".to_owned(),
        "\"12\"".to_owned(),
        r#"{"datetime":"soon","value":1}"#.to_owned(),
        " ".repeat(2000),
        // Text on a TReal property: refused by the ingest path itself.
        instant(2, "\"fast\""),
    ];
    deliver(&broker, &topic, payloads).await;
    deliver(&broker, &positions, vec!["[1,2]".to_owned()]).await;
    let empty_id = B::BAD_ID_TOPICS.map(|[empty_id, _]| empty_id);
    if let Some(empty_id) = empty_id {
        deliver(&broker, empty_id, vec![instant(1, "1")]).await;
    }
    // A good one after them.
    deliver(&broker, &topic, vec![instant(3, "3")]).await;
    assert_eq!(values(&take(&mut sse, 1).await), [6.0]);

    assert_eq!(
        server.client().get(B::STATUS).await.status,
        401,
        "behind the token like every route"
    );
    let bad_topics = u64::from(empty_id.is_some());
    let sent = 7 + bad_topics;
    let status = acknowledged::<B>(&mut client, sent).await;
    let bad = &status["bad"];
    assert_eq!(bad["notJson"], 1, "{status}");
    assert_eq!(bad["wrongType"], 2, "{status}");
    assert_eq!(bad["badDatetime"], 1, "{status}");
    assert_eq!(bad["topic"].as_u64().unwrap_or(0), bad_topics, "{status}");
    assert_eq!(bad["badPosition"], 1, "{status}");
    assert_eq!(bad["tooLarge"], 1, "{status}");
    assert_eq!(status[B::RECEIVED], sent, "{status}");
    let samples = status["badSamples"].as_array().unwrap();
    assert_eq!(samples.len() as u64, sent - 1, "{status}");
    // Each with its topic, reason and why. (In the order they were found
    // bad: a payload over --max-body as it is read, a value the property
    // refuses when its batch is ingested, the rest in between.)
    let sample = |reason: &str| {
        samples
            .iter()
            .find(|s| s["reason"] == reason)
            .unwrap_or_else(|| panic!("a {reason} sample: {status}"))
    };
    let says = |reason: &str, text: &str| {
        let detail = sample(reason)["detail"].as_str().unwrap().to_owned();
        assert!(detail.contains(text), "{reason}: {detail}");
    };
    if let Some(empty_id) = empty_id {
        assert_eq!(sample("topic")["topic"], empty_id);
    }
    assert_eq!(sample("badPosition")["topic"], positions.as_str());
    assert!(
        samples
            .iter()
            .filter(|s| s["reason"] != "topic" && s["reason"] != "badPosition")
            .all(|s| s["topic"] == topic.as_str()),
        "{status}"
    );
    assert_eq!(sample("notJson")["payload"], "nope");
    says("badPosition", "invalid type: integer");
    says("badDatetime", "\"soon\"");
    says("tooLarge", "at most --max-body (1024)");
    let refused = samples
        .iter()
        .find(|s| s["reason"] == "wrongType" && s["payload"].as_str().unwrap().contains("fast"))
        .unwrap_or_else(|| panic!("the text on a TReal property: {status}"));
    assert!(
        refused["detail"]
            .as_str()
            .unwrap()
            .contains("the property is TReal"),
        "{status}"
    );

    // The metrics say the same.
    let scrape = scrape_until(&mut client, "the bad messages counted", |s| {
        s.get(B::BAD_METRIC, &[("reason", "notJson")]) == 1.0
    })
    .await;
    for (reason, n) in [
        ("notJson", 1),
        ("wrongType", 2),
        ("badDatetime", 1),
        ("tooLarge", 1),
        ("badPosition", 1),
        ("topic", bad_topics),
    ] {
        assert_eq!(
            scrape.get(B::BAD_METRIC, &[("reason", reason)]),
            n as f64,
            "{reason}"
        );
    }
    let refused = |reason| {
        scrape.get(
            "mfstream_ingest_refused_total",
            &[("source", B::SOURCE), ("reason", reason)],
        )
    };
    // Not JSON, and JSON of another shape: on the property's topic and on
    // the positions' (`[1,2]`), as over HTTP.
    assert_eq!(refused("body"), 3.0);
    assert_eq!(refused("datetime"), 1.0);
    assert_eq!(refused("too_large"), 1.0);
    assert_eq!(refused("value"), 1.0);
}

/// One message stamped 9999-12-31 (a device with a broken clock) is a bad
/// message, `badDatetime`, on a property's topic and on a feature's
/// positions alike, and moves no duplicate mark: the instants after it are
/// taken. (Before, it was taken, and every later instant of its property
/// was dropped as a duplicate until a restart.) A topic with a
/// dot-segment id matches no pattern.
pub(super) async fn an_instant_stamped_past_the_servers_horizon_is_bad_and_later_ones_are_taken<
    B: TestBroker,
>(
    name: &str,
) {
    let broker = B::start(name).await;
    let server = broker.serve(name, &[], &[]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"mul","arg":2}"#).await;
    let echo = register(&mut client, S, r#"{"operation":"position"}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let (topic, on_positions) = (speed::<B>(), positions::<B>());
    let mut positions = server.subscribe(&format!("{echo}/stream"), &[]).await;
    let far = "9999-12-31T00:00:00Z";
    deliver(
        &broker,
        &topic,
        vec![format!(r#"{{"datetime":"{far}","value":1}}"#)],
    )
    .await;
    deliver(
        &broker,
        &on_positions,
        vec![format!(r#"{{"datetime":"{far}","coordinates":[1,2]}}"#)],
    )
    .await;
    let dot_id = B::BAD_ID_TOPICS.map(|[_, dot_id]| dot_id);
    if let Some(dot_id) = dot_id {
        deliver(&broker, dot_id, vec![instant(1, "5")]).await;
    }
    deliver(&broker, &topic, vec![instant(2, "3")]).await;
    deliver(&broker, &on_positions, vec![position(3, 4.0, 5.0)]).await;
    assert_eq!(values(&take(&mut sse, 1).await), [6.0]);
    let event = take(&mut positions, 1).await.remove(0);
    assert_eq!(event.json()["coordinates"], serde_json::json!([4, 5]));
    let bad_topics = u64::from(dot_id.is_some());
    let status = acknowledged::<B>(&mut client, 4 + bad_topics).await;
    assert_eq!(status["bad"]["badDatetime"], 2, "{status}");
    assert_eq!(
        status["bad"]["topic"].as_u64().unwrap_or(0),
        bad_topics,
        "{status}"
    );
    assert_eq!(status["duplicates"], 0, "{status}");
    let samples = status["badSamples"].as_array().unwrap();
    assert_eq!(samples.len() as u64, 2 + bad_topics, "{status}");
    for sample in samples {
        let detail = sample["detail"].as_str().unwrap();
        match sample["reason"].as_str().unwrap() {
            "badDatetime" => assert!(
                detail.contains(&format!("instant 1: \"{far}\" is after"))
                    && detail.contains("--max-datetime-ahead-ms (86400000)"),
                "{detail}"
            ),
            "topic" => assert!(detail.contains("`..`"), "{detail}"),
            other => panic!("{other}: {status}"),
        }
    }
}

/// Positions in each form of `POST S/ingest` reach a position query once,
/// in order; a position at or before the feature's last is a duplicate,
/// and every bad one is counted under its reason with why.
pub(super) async fn positions_on_tgsequence_reach_position_queries_once_and_bad_ones_are_counted<
    B: TestBroker,
>(
    name: &str,
) {
    let broker = B::start(name).await;
    let server = broker.serve(name, &[], &[]);
    let mut client = server.client();
    let echo = register(&mut client, S, r#"{"operation":"position"}"#).await;
    let mut sse = server.subscribe(&format!("{echo}/stream"), &[]).await;
    let (topic, on_positions) = (speed::<B>(), positions::<B>());
    let payloads = vec![
        // One instant, an array, a MovingPoint (the forms of POST S/ingest).
        position(0, 4.35, 50.85),
        format!(
            "[{},{}]",
            position(1, 4.36, 50.86),
            position(2, 4.37, 50.87)
        ),
        r#"{"type":"MovingPoint","coordinates":[[4.38,50.88],[4.39,50.89,12]],
            "datetimes":["2026-01-01T00:00:03Z","2026-01-01T00:00:04Z"],"interpolation":"Linear"}"#
            .to_owned(),
        // At or before the feature's last position: a duplicate.
        position(2, 4.37, 50.87),
        // Bad: out of range, not JSON, a property's instant, the wrong crs
        // (the feature's is geodetic), datetimes not increasing.
        position(5, 200.0, 0.0),
        "nope".to_owned(),
        instant(5, "1"),
        r#"{"type":"MovingPoint","coordinates":[[1,2]],"datetimes":["2026-01-01T00:00:05Z"],
            "crs":"EPSG:3857"}"#
            .to_owned(),
        format!("[{},{}]", position(6, 1.0, 2.0), position(6, 1.0, 3.0)),
    ];
    deliver(&broker, &on_positions, payloads).await;
    // A position on a property's topic is the wrong type.
    deliver(&broker, &topic, vec![position(5, 1.0, 2.0)]).await;
    deliver(&broker, &on_positions, vec![position(7, 4.4, 50.9)]).await;
    let events = take(&mut sse, 6).await;
    let got: Vec<(String, serde_json::Value)> = events
        .iter()
        .map(|e| {
            let j = e.json();
            assert_eq!(j["property"], "tgsequence", "{j}");
            (
                j["datetime"].as_str().unwrap().to_owned(),
                j["coordinates"].clone(),
            )
        })
        .collect();
    let want = |secs: u32, c: serde_json::Value| (format!("2026-01-01T00:00:{secs:02}Z"), c);
    use serde_json::json;
    assert_eq!(
        got,
        [
            want(0, json!([4.35, 50.85])),
            want(1, json!([4.36, 50.86])),
            want(2, json!([4.37, 50.87])),
            want(3, json!([4.38, 50.88])),
            want(4, json!([4.39, 50.89, 12])),
            want(7, json!([4.4, 50.9])),
        ]
    );
    let status = acknowledged::<B>(&mut client, 11).await;
    let bad = &status["bad"];
    assert_eq!(bad["badPosition"], 3, "{status}");
    // A datetime at fault is one, as on a property's topic.
    assert_eq!(bad["badDatetime"], 1, "{status}");
    assert_eq!(bad["notJson"], 1, "{status}");
    assert_eq!(bad["wrongType"], 1, "{status}");
    assert_eq!(status["duplicates"], 1, "{status}");
    let samples = status["badSamples"].as_array().unwrap();
    let detail = |text: &str| {
        samples
            .iter()
            .find(|s| s["detail"].as_str().unwrap().contains(text))
            .unwrap_or_else(|| panic!("a sample saying {text:?}: {status}"))
    };
    assert_eq!(detail("longitude 200")["reason"], "badPosition");
    assert_eq!(detail("longitude 200")["topic"], on_positions.as_str());
    assert_eq!(detail("EPSG:3857")["reason"], "badPosition");
    assert_eq!(detail("must increase")["reason"], "badDatetime");
    let wrong = detail("send it to /collections/ships/items/s1/tgsequence/ingest");
    assert_eq!(wrong["reason"], "wrongType");
    assert_eq!(wrong["topic"], topic.as_str());
}

/// A query that fixed a planar reference system has the feature's
/// positions checked in it: any finite coordinates, in metres; a
/// MovingPoint in another system is bad.
pub(super) async fn positions_are_checked_in_the_reference_system_a_query_fixed<B: TestBroker>(
    name: &str,
) {
    let broker = B::start(name).await;
    let server = broker.serve(name, &[], &[]);
    let mut client = server.client();
    let speed = register(&mut client, S, r#"{"operation":"speed","crs":"EPSG:3857"}"#).await;
    let mut sse = server.subscribe(&format!("{speed}/stream"), &[]).await;
    let payloads = vec![
        // Planar: any finite coordinates (out of the lon/lat ranges), metres.
        position(0, 500_000.0, 4_000_000.0),
        // A MovingPoint in another system than the feature's: bad.
        r#"{"type":"MovingPoint","coordinates":[[1,2]],"datetimes":["2026-01-01T00:00:05Z"],
            "crs":"EPSG:4326"}"#
            .to_owned(),
        position(10, 500_030.0, 4_000_040.0),
    ];
    deliver(&broker, &positions::<B>(), payloads).await;
    let events = take(&mut sse, 1).await;
    let event = events[0].json();
    assert_eq!(event["datetime"], "2026-01-01T00:00:10Z", "{event}");
    // 50 m in 10 s (a 3-4-5 triangle).
    assert_eq!(event["value"], 5.0, "{event}");
    let status = acknowledged::<B>(&mut client, 3).await;
    assert_eq!(status["bad"]["badPosition"], 1, "{status}");
    let detail = status["badSamples"][0]["detail"].as_str().unwrap();
    assert!(detail.contains("EPSG:3857"), "{detail}");
}

/// Instants `from..from + n`, value `i`, one per message.
pub(super) fn instants(from: usize, n: usize) -> Vec<String> {
    (from..from + n)
        .map(|i| instant(i, &i.to_string()))
        .collect()
}

/// Waits for `server`'s next line, which must be `want` ("the server
/// `what`"); a server that prints none is killed after `patience`, so the
/// wait ends and the assertion says so.
pub(super) fn assert_line(server: &mut Serve, want: &str, patience: Duration, what: &str) {
    let pid = server.pid() as i32;
    let (done, watch) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if watch.recv_timeout(patience) == Err(mpsc::RecvTimeoutError::Timeout) {
            // SAFETY: signalling the test's own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    let line = server.next_line();
    let _ = done.send(());
    watchdog.join().unwrap();
    assert_eq!(line.trim(), want, "the server {what}");
}

/// A free loopback port for a broker: bound and released.
pub(super) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The lines a broker writes to `pipe`, read on a thread of their own so
/// it never blocks on a full pipe (once nobody receives them, they are
/// read and dropped).
pub(super) fn read_lines(pipe: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

/// Events until the one whose value is `last` (each within `patience`);
/// every value before it.
pub(super) async fn until_value(sse: &mut Sse, last: f64, patience: Duration) -> Vec<f64> {
    let mut seen = Vec::new();
    loop {
        let event = tokio::time::timeout(patience, sse.next())
            .await
            .expect("an event in time")
            .expect("the stream goes on");
        if event.event != "instant" {
            continue;
        }
        let value = event.json()["value"].as_f64().unwrap();
        seen.push(value);
        if value == last {
            return seen;
        }
    }
}

/// `seen` is `0, 1, …, n - 1`: each value once, in order; else says
/// which are missing and which doubled (not the whole list).
pub(super) fn assert_each_once(seen: &[f64], n: usize) {
    let mut count = vec![0; n];
    for v in seen {
        count[*v as usize] += 1;
    }
    let missing: Vec<usize> = (0..n).filter(|&i| count[i] == 0).collect();
    let doubled: Vec<usize> = (0..n).filter(|&i| count[i] > 1).collect();
    assert!(
        missing.is_empty() && doubled.is_empty(),
        "{} results for {n} messages: missing {} (first {:?}), doubled {} (first {:?})",
        seen.len(),
        missing.len(),
        missing.first(),
        doubled.len(),
        doubled.first()
    );
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "in order");
}

/// The flags of a server that keeps a log and replays from it.
pub(super) fn with_state(dir: &str) -> [&str; 6] {
    [
        "--state",
        dir,
        "--replay",
        "100000",
        "--replay-bytes",
        "33554432",
    ]
}

/// `serve` with `--state` is SIGKILLed mid-stream while 20,000 messages
/// are published; started again on the same state directory (the same
/// client id or group, so the same session or offsets), it delivers every
/// message in the results exactly once, in order: what it took but did not
/// acknowledge comes again and is dropped as a duplicate.
pub(super) async fn after_a_sigkill_of_serve_every_message_is_in_the_results_exactly_once<
    B: TestBroker,
>(
    name: &str,
) {
    let broker = B::start(name).await;
    let state = TempDir::new(&format!("{name}-state"));
    let args = with_state(state.path().to_str().unwrap());
    let server = broker.serve(&format!("{name}-1"), &args, &[]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"mul","arg":1}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let n = 20_000;
    let publisher = broker.send(instants(0, n));
    // Mid-stream: some results out, the rest still coming.
    take(&mut sse, n / 10).await;
    server.signal(libc::SIGKILL);
    drop(sse);
    publisher.await.expect("every message published");
    drop(server);

    let server = broker.serve(&format!("{name}-2"), &args, &[]);
    broker
        .send(instants(n, 1))
        .await
        .expect("the last message published");
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let seen = until_value(&mut sse, n as f64, B::PATIENCE).await;
    assert_each_once(&seen, n + 1);
    // What the killed server took but did not acknowledge was read again,
    // and dropped as duplicates. (The event reaches the stream before the
    // ingest path counts its instant: waited for.)
    let mut client = server.client();
    status_until::<B>(
        &mut client,
        "every message read again taken or a duplicate",
        |s| {
            let count = |key: &str| s[key].as_u64().unwrap_or(0);
            count("instants") > 0 && count(B::RECEIVED) == count("instants") + count("duplicates")
        },
    )
    .await;
}

/// The same across a SIGKILL for a feature's positions (10,000 of them):
/// the feature's mark (its last position in the log) drops what the store
/// already had.
pub(super) async fn positions_after_a_sigkill_of_serve_are_each_in_the_results_exactly_once<
    B: TestBroker,
>(
    name: &str,
) {
    let broker = B::start(name).await;
    let state = TempDir::new(&format!("{name}-state"));
    let args = with_state(state.path().to_str().unwrap());
    let server = broker.serve(&format!("{name}-1"), &args, &[]);
    let mut client = server.client();
    let echo = register(&mut client, S, r#"{"operation":"position"}"#).await;
    let mut sse = server.subscribe(&format!("{echo}/stream"), &[]).await;
    // Position i at [i / 1000, 0], at [`at`]`(i)`.
    let point = |i: usize| {
        format!(
            r#"{{"datetime":"{}","coordinates":[{},0]}}"#,
            at(i),
            i as f64 / 1000.0
        )
    };
    let n = 10_000;
    let publisher = broker.send_to(&positions::<B>(), (0..n).map(point).collect());
    take(&mut sse, n / 10).await;
    server.signal(libc::SIGKILL);
    drop(sse);
    publisher.await.expect("every message published");
    drop(server);

    // The same state directory, the same session or group: what was not
    // acknowledged comes again, and the feature's mark drops what the
    // store already had.
    let server = broker.serve(&format!("{name}-2"), &args, &[]);
    deliver(&broker, &positions::<B>(), vec![point(n)]).await;
    let mut sse = server.subscribe(&format!("{echo}/stream"), &[]).await;
    let mut seen = Vec::new();
    loop {
        let event = tokio::time::timeout(B::PATIENCE, sse.next())
            .await
            .expect("an event in time")
            .expect("the stream goes on");
        if event.event != "instant" {
            continue;
        }
        let i = (event.json()["coordinates"][0].as_f64().unwrap() * 1000.0).round();
        seen.push(i);
        if i == n as f64 {
            break;
        }
    }
    assert_each_once(&seen, n + 1);
}

/// `broker`, whose storage outlives it, is restarted mid-stream: while the
/// server is stopped (SIGSTOP) the second half of 3,000 messages is
/// queued for it at the broker, some perhaps sent and not acknowledged;
/// once the server goes on it reads the broker again and delivers every
/// message exactly once, in order (what comes again is dropped as a
/// duplicate), and acknowledges every message read. The server and its
/// stream are returned for the broker's own checks, with the number of
/// messages sent.
pub(super) async fn a_broker_restart_mid_stream_loses_and_doubles_nothing<B: TestBroker>(
    broker: &mut B,
    name: &str,
) -> (Serve, Sse, usize) {
    let server = broker.serve(name, &["--replay", "100000"], &[]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"mul","arg":1}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let n = 3000;
    deliver(broker, &speed::<B>(), instants(0, n / 2)).await;
    let mut seen = until_value(&mut sse, (n / 2 - 1) as f64, B::PATIENCE).await;
    // Stopped with the first half acknowledged: a Kafka commit in flight at
    // the broker's end can block the consumer until it is back (the
    // **Tests** item of the book's Kafka ingest, docs/src/sources.md).
    acknowledged::<B>(&mut client, n as u64 / 2).await;
    // Stop reading: the broker queues the second half for the server (some
    // in flight, unacknowledged, some in the server's socket buffer).
    server.signal(libc::SIGSTOP);
    deliver(broker, &speed::<B>(), instants(n / 2, n / 2)).await;
    broker.restart();
    server.signal(libc::SIGCONT);
    // The server reads the broker again (MQTT: a new connection; Kafka:
    // the same assignment); the broker sends what it has no
    // acknowledgement for again (the duplicates are dropped), then the rest.
    seen.extend(until_value(&mut sse, (n - 1) as f64, B::PATIENCE).await);
    assert_each_once(&seen, n);
    // The event reaches the stream before the ingest path counts its
    // instant: waited for.
    status_until::<B>(
        &mut client,
        "each message taken once, every one read again a duplicate, all acknowledged",
        |s| {
            let count = |key: &str| s[key].as_u64().unwrap_or(0);
            count("instants") == n as u64
                && count(B::RECEIVED) == count("instants") + count("duplicates")
                && count(B::ACKNOWLEDGED) == count(B::RECEIVED)
        },
    )
    .await;
    (server, sse, n)
}

/// A query whose job never answers fills its source buffer, and the
/// ingest path holds the ingests back (503 after `--ingest-wait-ms`): the
/// source stops reading, holding at most [`TestBroker::MAX_HELD`] messages;
/// once the query is gone every message is taken and acknowledged, none
/// lost on the way.
pub(super) async fn a_saturated_ingest_stops_the_reading_and_loses_nothing_once_it_drains<
    B: TestBroker,
>(
    name: &str,
) {
    let broker = B::start(name).await;
    let server = broker.serve(name, &["--ingest-wait-ms", "50"], &[]);
    let mut client = server.client();
    let query = register(
        &mut client,
        P,
        r#"{"operation":"mul","arg":1,"engine":"hang"}"#,
    )
    .await;
    let n = 20_000;
    deliver(&broker, &speed::<B>(), instants(0, n)).await;
    let status = status_until::<B>(&mut client, "an ingest tried again", |status| {
        status["retries"].as_u64().unwrap() > 0
    })
    .await;
    let (received, acknowledged) = (B::RECEIVED, B::ACKNOWLEDGED);
    let held = status[received].as_u64().unwrap() - status[acknowledged].as_u64().unwrap();
    assert!(held <= B::MAX_HELD, "{held} held: {status}");
    assert!(
        status[received].as_u64().unwrap() < n as u64,
        "the rest waits at the broker: {status}"
    );
    // Once the query is gone, the property has none: every message is
    // taken (checked alone) and acknowledged.
    assert_eq!(client.delete(&query).await.status, 204);
    let status = status_until::<B>(&mut client, "every message acknowledged", |status| {
        status[acknowledged].as_u64().unwrap() >= n as u64
    })
    .await;
    assert_eq!(status[acknowledged], n, "{status}");
    assert_eq!(status[received], n, "{status}");
    assert_eq!(status["instants"], n, "{status}");
}

//! `GET /metrics`: the Prometheus exposition, checked by `promtool`, and
//! counters that move with the traffic they count.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::client::raw;

use super::*;

/// One scrape: every series (`name{labels}`, as printed) and its value.
pub(super) struct Scrape {
    text: String,
    series: BTreeMap<String, f64>,
}

/// As scraped: the exposition's text.
impl std::fmt::Debug for Scrape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "\n{}", self.text)
    }
}

impl Scrape {
    fn parse(text: String) -> Scrape {
        let series = text
            .lines()
            .filter(|line| !line.starts_with('#') && !line.is_empty())
            .map(|line| {
                let (name, value) = line.rsplit_once(' ').expect("`series value`");
                (name.to_owned(), value.parse().expect("a number"))
            })
            .collect();
        Scrape { text, series }
    }

    /// The value of `name` with `labels`; a failure if there is no such
    /// series.
    #[track_caller]
    pub(super) fn get(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let key = key(name, labels);
        *self
            .series
            .get(&key)
            .unwrap_or_else(|| panic!("no series {key} in\n{}", self.text))
    }

    fn has(&self, name: &str, labels: &[(&str, &str)]) -> bool {
        self.series.contains_key(&key(name, labels))
    }

    /// The metric families, as their `# TYPE` lines name them.
    pub(super) fn families(&self) -> Vec<String> {
        self.text
            .lines()
            .filter_map(|line| line.strip_prefix("# TYPE "))
            .map(|rest| rest.split(' ').next().unwrap().to_owned())
            .collect()
    }
}

fn key(name: &str, labels: &[(&str, &str)]) -> String {
    if labels.is_empty() {
        return name.to_owned();
    }
    let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    format!("{name}{{{}}}", labels.join(","))
}

async fn scrape(client: &mut Client) -> Scrape {
    let response = client.get("/metrics").await;
    assert_eq!(response.status, 200, "{response:?}");
    assert_eq!(
        response.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    Scrape::parse(response.body)
}

/// Scrapes until `done` holds (what it waits for happens on the server's
/// side after the client saw its cause: a stream's slot is given back after
/// its last bytes went out); a failure after [`PATIENCE`].
pub(super) async fn scrape_until(
    client: &mut Client,
    what: &str,
    done: impl Fn(&Scrape) -> bool,
) -> Scrape {
    eventually(what, PATIENCE, async || scrape(client).await, done).await
}

/// A query's labels, from its path.
fn query_labels<'a>(query: &'a str, engine: &'a str) -> [(&'a str, &'a str); 3] {
    let id = query.rsplit('/').next().unwrap();
    [("query", id), ("property", P), ("engine", engine)]
}

fn http_refused(reason: &str) -> [(&str, &str); 2] {
    [("source", "http"), ("reason", reason)]
}

const HTTP: [(&str, &str); 1] = [("source", "http")];

fn promtool() -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("promtool"))
            .find(|p| p.is_file())
    })
}

#[tokio::test]
#[ignore = "needs promtool: apt-get install --no-install-recommends prometheus"]
async fn the_exposition_passes_promtool_check_metrics_with_every_kind_of_series() {
    let promtool = require(
        promtool(),
        "promtool",
        "apt-get install --no-install-recommends prometheus",
    );
    let dir = TempDir::new("metrics-promtool-dir");
    let state = dir.join("state");
    let broker = super::mqtt::Broker::start("metrics-promtool");
    let server = super::mqtt::serve_on(
        "metrics-promtool",
        &broker,
        &["--state", state.to_str().unwrap(), "--durability", "power"],
        &[],
    );
    let mut client = server.client();
    // A query of each kind, one failed on its engine, results, a
    // subscriber, a refusal: every family has series, labels included.
    let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    register(
        &mut client,
        P,
        r#"{"aggregation":"AVG","window":{"type":"COUNT","size":2}}"#,
    )
    .await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    assert_eq!(
        client
            .post(&format!("{P}/ingest"), &lines(1, 4))
            .await
            .status,
        202
    );
    take(&mut sse, 4).await;
    assert_eq!(
        client.post(&format!("{P}/ingest"), "nope").await.status,
        400
    );
    // An MQTT message taken and a bad one.
    broker.publish(super::mqtt::TOPIC, "nope");
    broker.publish(super::mqtt::TOPIC, &instant(5, "5"));
    take(&mut sse, 1).await;
    let text = scrape(&mut client).await.text;
    assert!(text.contains("mfstream_store_fsync_seconds_bucket{le=\"+Inf\"}"));
    assert!(text.contains("mfstream_mqtt_bad_messages_total{reason=\"notJson\"} 1"));

    let mut check = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut check.stdin.take().unwrap(), text.as_bytes()).unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}\n{}{}\n{text}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn metrics_need_the_token_like_every_route_but_the_landing_page() {
    let server = Serve::start("metrics-token", &["--token", "s3cret"], &[]);
    assert_eq!(server.client().get("/metrics").await.status, 401);
    // The landing links name it.
    let landing = server.client().get("/?f=json").await.json();
    let metrics = landing["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|link| link["rel"] == "metrics")
        .expect("a metrics link");
    assert_eq!(metrics["href"], "/metrics");
    let mut client = server.client().with_token("s3cret");
    let scrape = scrape(&mut client).await;
    assert_eq!(scrape.get("mfstream_ingest_instants_total", &HTTP), 0.0);
    // Without --state there is no store, and no store series.
    assert!(!scrape.text.contains("mfstream_store_"), "{}", scrape.text);
}

#[tokio::test]
async fn ingest_counts_accepted_instants_and_refused_bodies_by_reason() {
    let server = Serve::start("metrics-ingest", &["--max-body", "4096"], &[]);
    let mut client = server.client();
    let ingest = format!("{P}/ingest");
    // Accepted whether or not a query reads the property.
    assert_eq!(client.post(&ingest, &lines(1, 3)).await.status, 202);
    register(&mut client, P, r#"{"operation":"abs"}"#).await;
    assert_eq!(client.post(&ingest, &lines(4, 5)).await.status, 202);
    let bad_datetime = r#"{"datetime":"soon","value":1}"#;
    assert_eq!(client.post(&ingest, bad_datetime).await.status, 400);
    assert_eq!(client.post(&ingest, "nope").await.status, 400);
    assert_eq!(client.post(&ingest, "nope").await.status, 400);
    let text = r#"{"datetime":"2026-01-01T00:00:01Z","value":"a"}"#;
    assert_eq!(client.post(&ingest, text).await.status, 400);
    let plain = client
        .request(
            "POST",
            &ingest,
            &[("Content-Type", "text/plain")],
            lines(9, 1).as_bytes(),
        )
        .await;
    assert_eq!(plain.status, 415);
    // Over --max-body by its Content-Length: refused before the route.
    let large = client.post(&ingest, &lines(10, 100)).await;
    assert_eq!(large.status, 413, "{large:?}");

    let scrape = scrape(&mut client).await;
    assert_eq!(scrape.get("mfstream_ingest_instants_total", &HTTP), 8.0);
    for (reason, n) in [
        ("datetime", 1.0),
        ("body", 2.0),
        ("value", 1.0),
        ("media_type", 1.0),
        ("busy", 0.0),
        ("too_large", 1.0),
    ] {
        assert_eq!(
            scrape.get("mfstream_ingest_refused_total", &http_refused(reason)),
            n,
            "{reason}"
        );
    }
}

#[tokio::test]
async fn mqtt_traffic_moves_the_ingest_series_and_mqtts_own() {
    use super::mqtt::{Broker, TOPIC, assert_subscribed, serve_on};
    let broker = &mut Broker::start("metrics-mqtt");
    let mut server = serve_on("metrics-mqtt", broker, &["--max-body", "1024"], &[]);
    let mut client = server.client();
    register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let positions = "/collections/ships/items/s1/tgsequence";
    register(&mut client, positions, r#"{"operation":"position"}"#).await;
    broker.publish(TOPIC, &format!("[{},{}]", instant(1, "1"), instant(2, "2")));
    broker.publish(TOPIC, &instant(2, "2")); // a duplicate
    broker.publish(TOPIC, "nope");
    broker.publish(TOPIC, r#"{"datetime":"soon","value":1}"#);
    broker.publish(TOPIC, &instant(3, "\"fast\"")); // text on a TReal property
    broker.publish(TOPIC, &" ".repeat(2000));
    broker.publish("mfapi//s1/speed", &instant(1, "1"));
    let position = |secs: u32, lon: u32| {
        format!(r#"{{"datetime":"2026-01-01T00:00:{secs:02}Z","coordinates":[{lon},1]}}"#)
    };
    broker.publish("mfapi/ships/s1/tgsequence", &position(1, 200));
    broker.publish("mfapi/ships/s1/tgsequence", &position(2, 1));
    // Every message handled: 3 instants taken, 6 messages refused (the
    // groups of a batch are ingested concurrently, so it is not enough
    // that the last one was taken).
    let total = |s: &Scrape, name: &str, wanted: &str| -> f64 {
        s.series
            .iter()
            .filter(|(key, _)| key.starts_with(name) && key.contains(wanted))
            .map(|(_, v)| v)
            .sum()
    };
    let seen = scrape_until(&mut client, "3 mqtt instants and 6 refused", |s| {
        total(s, "mfstream_ingest_instants_total{", "mqtt") == 3.0
            && total(s, "mfstream_ingest_refused_total{", "\"mqtt\"") == 6.0
            && total(s, "mfstream_mqtt_bad_messages_total{", "reason") == 6.0
    })
    .await;
    let refused = |reason| [("source", "mqtt"), ("reason", reason)];
    for (reason, n) in [
        ("body", 1.0),
        ("datetime", 1.0),
        ("value", 1.0),
        ("too_large", 1.0),
        ("topic", 1.0),
        ("invalid", 1.0),
        ("busy", 0.0),
    ] {
        assert_eq!(
            seen.get("mfstream_ingest_refused_total", &refused(reason)),
            n,
            "{reason}"
        );
    }
    // HTTP's counts are its own.
    assert_eq!(seen.get("mfstream_ingest_instants_total", &HTTP), 0.0);
    assert_eq!(
        seen.get("mfstream_ingest_refused_total", &http_refused("topic")),
        0.0
    );
    for (reason, n) in [
        ("notJson", 1.0),
        ("wrongType", 1.0),
        ("badDatetime", 1.0),
        ("tooLarge", 1.0),
        ("topic", 1.0),
        ("badPosition", 1.0),
    ] {
        assert_eq!(
            seen.get("mfstream_mqtt_bad_messages_total", &[("reason", reason)]),
            n,
            "{reason}"
        );
    }
    assert_eq!(seen.get("mfstream_mqtt_duplicates_total", &[]), 1.0);
    assert_eq!(seen.get("mfstream_mqtt_messages_total", &[]), 9.0);
    assert_eq!(seen.get("mfstream_mqtt_connected", &[]), 1.0);
    assert_eq!(seen.get("mfstream_mqtt_subscribed", &[]), 1.0);
    assert_eq!(seen.get("mfstream_mqtt_connections_total", &[]), 1.0);

    // A broker restart: disconnected, then connected again.
    broker.stop();
    scrape_until(&mut client, "disconnected", |s| {
        s.get("mfstream_mqtt_connected", &[]) == 0.0
            && s.get("mfstream_mqtt_subscribed", &[]) == 0.0
    })
    .await;
    broker.run();
    assert_subscribed(&mut server, broker);
    let again = scrape(&mut client).await;
    assert_eq!(again.get("mfstream_mqtt_connections_total", &[]), 2.0);
    assert_eq!(again.get("mfstream_mqtt_connected", &[]), 1.0);
    assert_eq!(again.get("mfstream_mqtt_subscribed", &[]), 1.0);
}

#[tokio::test]
async fn query_and_engine_series_follow_a_query_from_registration_to_deletion() {
    let server = Serve::start("metrics-query", &[], &[]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let labels = query_labels(&query, "local");
    let local = [("engine", "local")];
    let before = scrape(&mut client).await;
    assert_eq!(before.get("mfstream_query_events_total", &labels), 0.0);
    assert_eq!(before.get("mfstream_query_subscribers", &labels), 0.0);
    assert_eq!(before.get("mfstream_server_sse_streams", &[]), 0.0);
    assert_eq!(before.get("mfstream_engine_queries", &local), 1.0);
    assert_eq!(before.get("mfstream_engine_job_starts_total", &local), 1.0);
    // Every engine of the registry has its series, used or not.
    assert_eq!(
        before.get("mfstream_engine_queries", &[("engine", "echo")]),
        0.0
    );
    let running = [labels[0], labels[1], labels[2], ("status", "running")];
    let stopped = [labels[0], labels[1], labels[2], ("status", "stopped")];
    assert_eq!(before.get("mfstream_query_status", &running), 1.0);
    assert_eq!(before.get("mfstream_query_status", &stopped), 0.0);
    // As many series per query as the book (operating.md) says `--max-queries` bounds.
    let id = format!("query=\"{}\"", labels[0].1);
    let per_query = before.series.keys().filter(|k| k.contains(&id)).count();
    assert_eq!(per_query, 13, "{}", before.text);

    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    assert_eq!(
        client
            .post(&format!("{P}/ingest"), &lines(1, 5))
            .await
            .status,
        202
    );
    take(&mut sse, 5).await;
    let during = scrape(&mut client).await;
    assert_eq!(during.get("mfstream_query_events_total", &labels), 5.0);
    assert_eq!(during.get("mfstream_query_records_in_total", &labels), 5.0);
    assert_eq!(during.get("mfstream_query_subscribers", &labels), 1.0);
    assert_eq!(during.get("mfstream_server_sse_streams", &[]), 1.0);
    assert_eq!(during.get("mfstream_engine_records_in_total", &local), 5.0);
    assert_eq!(during.get("mfstream_engine_records_out_total", &local), 5.0);
    assert!(during.get("mfstream_query_state_bytes", &labels) > 0.0);

    // Deleted: its stream ends, its series go, its engine's totals stay.
    assert_eq!(client.delete(&query).await.status, 204);
    assert_eq!(take(&mut sse, 1).await[0].event, "end");
    let after = scrape_until(&mut client, "the stream closed", |s| {
        s.get("mfstream_server_sse_streams", &[]) == 0.0
            && s.get("mfstream_engine_queries", &local) == 0.0
    })
    .await;
    assert!(!after.has("mfstream_query_events_total", &labels));
    assert_eq!(after.get("mfstream_engine_job_starts_total", &local), 1.0);
    assert_eq!(after.get("mfstream_engine_records_in_total", &local), 5.0);
    assert_eq!(after.get("mfstream_engine_job_failures_total", &local), 0.0);
}

#[tokio::test]
async fn a_query_that_fails_on_its_engine_counts_as_a_job_failure() {
    let server = Serve::start("metrics-failure", &[], &[]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"abs","engine":"crash"}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    client.post(&format!("{P}/ingest"), &lines(1, 5)).await;
    let end = sse.until_end().await.pop().unwrap();
    assert_eq!(end.json()["status"], "failed", "{end:?}");
    let crash = [("engine", "crash")];
    let scrape = scrape_until(&mut client, "the job's failure counted", |s| {
        s.get("mfstream_engine_job_failures_total", &crash) == 1.0
    })
    .await;
    let labels = query_labels(&query, "crash");
    let failed = [labels[0], labels[1], labels[2], ("status", "failed")];
    assert_eq!(scrape.get("mfstream_query_status", &failed), 1.0);
    assert_eq!(scrape.get("mfstream_engine_queries", &crash), 0.0);
    assert_eq!(scrape.get("mfstream_engine_job_starts_total", &crash), 1.0);
}

#[tokio::test]
async fn late_records_and_lagging_subscribers_are_counted_per_query() {
    // Its instants are in 2100: past the default bound on how far ahead of
    // the server's clock a datetime may be.
    let args = ["--replay", "3", "--max-datetime-ahead-ms", "4000000000000"];
    let server = Serve::start("metrics-late", &args, &[]);
    let mut client = server.client();
    let window = register(
        &mut client,
        P,
        r#"{"aggregation":"COUNT","window":{"type":"TUMBLING","size":1,"unit":"SECONDS"}}"#,
    )
    .await;
    let mut sse = server.subscribe(&format!("{window}/stream"), &[]).await;
    // 0.5 s opens [0, 1); 1.5 s closes it; 0.2 s is then late; 2.5 s
    // closes [1, 2), whose event carries the late record. In 2100: a live
    // query's clock, now, closes no window of theirs.
    let body: String = ["00.5", "01.5", "00.2", "02.5"]
        .iter()
        .map(|s| format!("{{\"datetime\":\"2100-01-01T00:00:{s}Z\",\"value\":1}}\n"))
        .collect();
    assert_eq!(client.post(&format!("{P}/ingest"), &body).await.status, 202);
    let events = take(&mut sse, 2).await;
    assert_eq!(events[1].json()["late"], 1, "{events:?}");
    let labels = query_labels(&window, "local");
    let late = scrape(&mut client).await;
    assert_eq!(late.get("mfstream_query_late_records_total", &labels), 1.0);
    assert_eq!(late.get("mfstream_query_lagged_total", &labels), 0.0);

    // A subscriber resuming from event 1 of 10 when the buffer keeps the
    // last 3 is told it missed 6.
    let abs = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let mut first = server.subscribe(&format!("{abs}/stream"), &[]).await;
    client.post(&format!("{P}/ingest"), &lines(10, 10)).await;
    eventually(
        "event 10 of the resumed stream",
        PATIENCE,
        async || {
            let event = first.next().await.expect("the stream goes on");
            event.id.as_deref().unwrap().parse::<u64>().unwrap()
        },
        |id| *id >= 10,
    )
    .await;
    let abs_labels = query_labels(&abs, "local");
    let before = scrape(&mut client)
        .await
        .get("mfstream_query_lagged_events_total", &abs_labels);
    let mut behind = server
        .subscribe(&format!("{abs}/stream"), &[("Last-Event-ID", "1")])
        .await;
    let lagged = behind.next().await.unwrap();
    assert_eq!(lagged.event, "lagged");
    assert_eq!(lagged.json()["missed"], 6);
    let after = scrape(&mut client).await;
    assert_eq!(
        after.get("mfstream_query_lagged_events_total", &abs_labels) - before,
        6.0
    );
    assert!(after.get("mfstream_query_lagged_total", &abs_labels) >= 1.0);
}

/// The journal's newest segment.
fn newest_segment(state: &Path) -> std::path::PathBuf {
    let mut names: Vec<_> = std::fs::read_dir(state.join("journal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    names.sort();
    names.pop().expect("a segment")
}

#[tokio::test]
async fn store_series_report_the_journal_its_syncs_and_what_the_open_cut_off() {
    let dir = TempDir::new("metrics-store-dir");
    let state = dir.join("state");
    let args = ["--state", state.to_str().unwrap(), "--durability", "power"];
    let server = Serve::start("metrics-store-1", &args, &[]);
    let mut client = server.client();
    let before = scrape(&mut client).await;
    let bytes = before.get("mfstream_store_journal_bytes", &[]);
    let syncs = before.get("mfstream_store_fsync_seconds_count", &[]);
    register(&mut client, P, r#"{"operation":"abs"}"#).await;
    assert_eq!(
        client
            .post(&format!("{P}/ingest"), &lines(1, 20))
            .await
            .status,
        202
    );
    let after = scrape(&mut client).await;
    assert!(after.get("mfstream_store_journal_bytes", &[]) > bytes);
    // `power`: the ingest's group commit was synced before its 202.
    assert!(after.get("mfstream_store_fsync_seconds_count", &[]) > syncs);
    assert_eq!(
        after.get("mfstream_store_fsync_seconds_bucket", &[("le", "+Inf")]),
        after.get("mfstream_store_fsync_seconds_count", &[])
    );
    assert_eq!(
        after.get("mfstream_store_recovery_truncations_total", &[]),
        0.0
    );
    server.signal(libc::SIGKILL);
    drop(server);

    // What a power cut leaves at the end of the newest segment: zeros.
    let newest = newest_segment(&state);
    let mut segment = std::fs::OpenOptions::new()
        .append(true)
        .open(&newest)
        .unwrap();
    std::io::Write::write_all(&mut segment, &[0u8; 1000]).unwrap();
    drop(segment);
    let server = Serve::start("metrics-store-2", &args, &[]);
    let scrape = scrape(&mut server.client()).await;
    assert_eq!(
        scrape.get("mfstream_store_recovery_truncations_total", &[]),
        1.0
    );
    assert_eq!(
        scrape.get("mfstream_store_recovery_truncated_bytes_total", &[]),
        1000.0
    );
}

#[tokio::test]
async fn in_flight_bytes_and_connections_move_with_the_requests_open() {
    let server = Serve::start("metrics-inflight", &[], &[]);
    let mut client = server.client();
    let first = scrape(&mut client).await;
    assert_eq!(first.get("mfstream_ingest_inflight_bytes", &[]), 0.0);
    // The scrape's own connection is open.
    assert!(first.get("mfstream_server_connections", &[]) >= 1.0);
    let accepted = first.get("mfstream_server_connections_accepted_total", &[]);

    // A body that declares 1000 bytes holds them from its head on, and
    // sends 10: it is in flight until it completes.
    let mut slow = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let head = format!(
        "POST {P}/ingest HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: 1000\r\n\r\n{}",
        " ".repeat(10)
    );
    tokio::io::AsyncWriteExt::write_all(&mut slow, head.as_bytes())
        .await
        .unwrap();
    let held = scrape_until(&mut client, "the body held", |s| {
        s.get("mfstream_ingest_inflight_bytes", &[]) == 1000.0
    })
    .await;
    assert_eq!(
        held.get("mfstream_server_connections_accepted_total", &[]),
        accepted + 1.0
    );
    assert!(held.get("mfstream_server_connections", &[]) >= 2.0);
    drop(slow);
    scrape_until(&mut client, "the body let go", |s| {
        s.get("mfstream_ingest_inflight_bytes", &[]) == 0.0
    })
    .await;
    // A raw request is one more connection accepted.
    let response = raw(
        server.addr,
        b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(response.status, 200);
    let last = scrape(&mut client).await;
    assert_eq!(
        last.get("mfstream_server_connections_accepted_total", &[]),
        accepted + 2.0
    );
}

#[tokio::test]
async fn the_book_lists_every_metric_served_and_no_other() {
    // Every family is served: the store's with --state, MQTT's with --mqtt
    // (on a real mosquitto).
    let broker = super::mqtt::Broker::start("metrics-readme");
    let dir = TempDir::new("metrics-readme-dir");
    let state = dir.join("state");
    let server = super::mqtt::serve_on(
        "metrics-readme",
        &broker,
        &["--state", state.to_str().unwrap()],
        &[],
    );
    let served = scrape(&mut server.client()).await.families();
    let chapter = crate::util::book("operating.md");
    let section = chapter
        .split("\n## Metrics\n")
        .nth(1)
        .expect("operating.md has a ## Metrics section");
    let section = section.split("\n#").next().unwrap();
    let rows: Vec<(String, &str)> = section
        .lines()
        .filter_map(|line| line.strip_prefix("| `mfstream_"))
        .map(|rest| {
            let name = format!("mfstream_{}", rest.split('`').next().unwrap());
            let meaning = rest.rsplit(" | ").next().unwrap();
            (name, meaning)
        })
        .collect();
    // Kafka's are served with --kafka alone (checked by
    // serve::kafka against a real broker).
    let (kafka, rows): (Vec<_>, Vec<_>) = rows
        .into_iter()
        .partition(|(name, _)| name.starts_with("mfstream_kafka_"));
    for (name, meaning) in &kafka {
        assert!(meaning.starts_with("with `--kafka`"), "{name}: {meaning}");
    }
    let mut served_sorted = served.clone();
    served_sorted.sort();
    let mut listed_sorted: Vec<String> = rows.iter().map(|(name, _)| name.clone()).collect();
    listed_sorted.sort();
    assert_eq!(
        served_sorted, listed_sorted,
        "the book's Metrics table (operating.md) and GET /metrics (with --state and --mqtt) differ"
    );
    // The rows that say "with `--mqtt`" are MQTT's families, and a server
    // without --mqtt serves none of them.
    for (name, meaning) in &rows {
        assert_eq!(
            name.starts_with("mfstream_mqtt_"),
            meaning.starts_with("with `--mqtt`"),
            "{name}: {meaning}"
        );
    }
    let plain = Serve::start("metrics-readme-plain", &[], &[]);
    let families = scrape(&mut plain.client()).await.families();
    assert!(
        !families
            .iter()
            .any(|f| f.starts_with("mfstream_mqtt_") || f.starts_with("mfstream_kafka_")),
        "{families:?}"
    );
}

#[test]
#[ignore = "needs promtool: apt-get install --no-install-recommends prometheus"]
fn the_books_scrape_config_passes_promtool_check_config() {
    let promtool = require(
        promtool(),
        "promtool",
        "apt-get install --no-install-recommends prometheus",
    );
    let chapter = crate::util::book("operating.md");
    let section = chapter.split("\n## Metrics\n").nth(1).unwrap();
    let yaml = section
        .split("```yaml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a yaml block in the book's Metrics (operating.md)");
    let dir = TempDir::new("metrics-scrape-config");
    let file = dir.join("prometheus.yml");
    std::fs::write(&file, yaml).unwrap();
    let out = Command::new(promtool)
        .args(["check", "config"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool check config: {}\n{}{}\n{yaml}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

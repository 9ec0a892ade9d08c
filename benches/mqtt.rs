//! MQTT ingest against HTTP ingest, both durable (`--state`): instants
//! taken per second. Figures printed, never asserted, except that nothing
//! may be lost.
//!
//! ```text
//! cargo bench --bench mqtt                 # 200,000 messages on 4 properties
//! cargo bench --bench mqtt -- 1000000 8    # MESSAGES PROPERTIES
//! ```
//!
//! Needs mosquitto (Debian `mosquitto`). A mosquitto of its own runs on a loopback port.
//! The release `mfstream serve --state DIR --mqtt URL` subscribes once (so
//! the broker keeps a session for it) and is stopped; MESSAGES QoS-1
//! messages, one JSON instant each, spread over PROPERTIES topics, are
//! queued at the broker (by rumqttc clients, one per topic); the server is started again on the same
//! directory, and the time from its subscription to the last message
//! taken (`GET /ingest/mqtt`, polled every 10 ms) gives MQTT's rate: the
//! broker's delivery, the client, the ingest path and the journal, every
//! message acknowledged only once it is stored. Then the same number of
//! instants is posted over HTTP to the same server, by PROPERTIES feeders,
//! one instant per request (as MQTT's one per message) and then 256 per
//! request. Each property has a query (`mul 1`), so every instant is
//! logged.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant as Clock};

use mfstream_test_client::Client;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let messages = args.first().copied().unwrap_or(200_000);
    let properties = args.get(1).copied().unwrap_or(4).max(1);
    let dir = std::env::temp_dir().join(format!("mfstream-bench-mqtt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let broker = Broker::start(&dir);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let state = dir.join("state");

    // The session, and a query per property.
    let mut server = Serve::start(&state, &broker.url());
    runtime.block_on(async {
        let mut client = Client::new(server.addr);
        for p in 0..properties {
            let r = client
                .post(
                    &format!("{}/queries", path(p)),
                    r#"{"operation":"mul","arg":1}"#,
                )
                .await;
            assert_eq!(r.status, 201, "{r:?}");
        }
    });
    server.stop();

    println!("queueing {messages} QoS-1 messages on {properties} topics at the broker…");
    runtime.block_on(async {
        let publishers: Vec<_> = (0..properties)
            .map(|p| {
                let n = messages / properties + usize::from(p < messages % properties);
                tokio::spawn(publish(broker.port, p, n))
            })
            .collect();
        for publisher in publishers {
            publisher.await.unwrap();
        }
    });

    // From the start of the process: its restore and connection included.
    let start = Clock::now();
    let server = Serve::start(&state, &broker.url());
    runtime.block_on(wait_ingested(server.addr, messages as u64));
    let mqtt = start.elapsed();
    let mqtt_rate = messages as f64 / mqtt.as_secs_f64();
    println!(
        "mqtt, durable:  {messages} messages in {:.2} s: {:.0} msg/s (from the server's start)",
        mqtt.as_secs_f64(),
        mqtt_rate
    );

    for per_request in [1, 256] {
        let elapsed = runtime.block_on(post_all(server.addr, messages, properties, per_request));
        println!(
            "http, durable:  {messages} instants, {per_request} per request, {properties} feeders: \
             {:.2} s: {:.0} instants/s (mqtt / http = {:.2})",
            elapsed.as_secs_f64(),
            messages as f64 / elapsed.as_secs_f64(),
            mqtt_rate / (messages as f64 / elapsed.as_secs_f64())
        );
    }
    drop(server);
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}

fn path(p: usize) -> String {
    format!("/collections/bench/items/f/tproperties/p{p}")
}

fn datetime(i: usize) -> String {
    format!(
        "2026-01-01T{:02}:{:02}:{:02}.{:06}Z",
        i / 3_600_000_000 % 24,
        i / 60_000_000 % 60,
        i / 1_000_000 % 60,
        i % 1_000_000
    )
}

/// Polls `GET /ingest/mqtt` until `total` instants are taken.
async fn wait_ingested(addr: SocketAddr, total: u64) {
    let mut client = Client::new(addr);
    let mut last = (0, Clock::now());
    loop {
        let status = client.get("/ingest/mqtt").await.json();
        let taken = status["instants"].as_u64().unwrap_or(0);
        let bad = &status["bad"];
        assert!(
            bad.as_object().is_some_and(|b| b.values().all(|v| v == 0)),
            "bad messages: {status}"
        );
        if taken >= total {
            assert_eq!(taken, total, "every message once: {status}");
            return;
        }
        if taken != last.0 {
            last = (taken, Clock::now());
        }
        assert!(
            last.1.elapsed() < Duration::from_secs(30),
            "stuck at {taken} of {total}: {status}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Posts `total` instants over `feeders` connections, `per_request` at a
/// time, after the ones MQTT took (so none is older than its property's
/// last).
async fn post_all(addr: SocketAddr, total: usize, feeders: usize, per_request: usize) -> Duration {
    let start = Clock::now();
    let mut tasks = Vec::new();
    for p in 0..feeders {
        let n = total / feeders + usize::from(p < total % feeders);
        tasks.push(tokio::spawn(async move {
            let mut client = Client::new(addr);
            let mut i = 0;
            while i < n {
                let body: String = (i..(i + per_request).min(n))
                    .map(|j| {
                        format!(
                            "{{\"datetime\":\"{}\",\"value\":{j}}}\n",
                            datetime(total + j)
                        )
                    })
                    .collect();
                let r = client.post(&format!("{}/ingest", path(p)), &body).await;
                assert_eq!(r.status, 202, "{r:?}");
                i += per_request;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    start.elapsed()
}

struct Broker {
    child: Child,
    port: u16,
}

impl Broker {
    fn start(dir: &Path) -> Broker {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let conf = dir.join("mosquitto.conf");
        std::fs::write(
            &conf,
            format!(
                "listener {port} 127.0.0.1\nallow_anonymous true\npersistence true\n\
                 persistence_location {}/\nuser root\nmax_queued_messages 0\n\
                 max_queued_bytes 0\nmax_inflight_messages 0\n",
                dir.display()
            ),
        )
        .unwrap();
        let mut child = Command::new("mosquitto")
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("mosquitto runs: apt-get install mosquitto mosquitto-clients");
        let mut log = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        while !line.contains(" running") {
            line.clear();
            assert!(log.read_line(&mut line).unwrap() > 0, "mosquitto ended");
        }
        // Drained on a thread: a full pipe would block the broker.
        std::thread::spawn(move || std::io::copy(&mut log, &mut std::io::sink()));
        Broker { child, port }
    }

    fn url(&self) -> String {
        format!("mqtt://127.0.0.1:{}", self.port)
    }
}

/// `n` instants on property `p`'s topic, one QoS-1 message each, from a
/// rumqttc client of its own; returns once the broker acknowledged every
/// one (`mosquitto_pub -l` exits before its queue is sent).
async fn publish(port: u16, p: usize, n: usize) {
    use rumqttc::v5::mqttbytes::QoS;
    use rumqttc::v5::mqttbytes::v5::Packet;
    use rumqttc::v5::{AsyncClient, Event, MqttOptions};
    let options = MqttOptions::new(format!("bench-pub-{p}"), "127.0.0.1", port);
    let (client, mut eventloop) = AsyncClient::new(options, 1024);
    let sender = client.clone();
    tokio::spawn(async move {
        let topic = format!("mfapi/bench/f/p{p}");
        for i in 0..n {
            let payload = format!("{{\"datetime\":\"{}\",\"value\":{i}}}", datetime(i));
            sender
                .publish(topic.as_str(), QoS::AtLeastOnce, false, payload)
                .await
                .unwrap();
        }
    });
    let mut acked = 0;
    while acked < n {
        match eventloop.poll().await {
            Ok(Event::Incoming(Packet::PubAck(_))) => acked += 1,
            Ok(_) => {}
            Err(e) => panic!("publisher {p} failed after {acked} of {n}: {e}"),
        }
    }
    drop(client);
}

impl Drop for Broker {
    fn drop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

struct Serve {
    child: Child,
    addr: SocketAddr,
    _stdout: BufReader<ChildStdout>,
}

impl Serve {
    /// `mfstream serve --state STATE --mqtt URL`, once subscribed.
    fn start(state: &Path, url: &str) -> Serve {
        let binary = std::env::var("MFSTREAM_BENCH_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_mfstream").into());
        let mut child = Command::new(binary)
            .args(["serve", "--addr", "127.0.0.1:0", "--mqtt", url, "--state"])
            .arg(state)
            .env("RUST_LOG", "warn")
            .env_remove("MFSTREAM_CONFIG")
            .env_remove("MFAPI_STREAM_ENGINE")
            .stdout(Stdio::piped())
            .spawn()
            .expect("mfstream serve starts");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let addr = line
            .trim()
            .strip_prefix("mfstream: listening on http://")
            .expect("the listening line")
            .parse()
            .unwrap();
        line.clear();
        stdout.read_line(&mut line).unwrap();
        assert!(line.starts_with("mfstream: mqtt subscribed"), "{line:?}");
        Serve {
            child,
            addr,
            _stdout: stdout,
        }
    }

    /// SIGTERM, and the exit.
    fn stop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

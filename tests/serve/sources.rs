//! The broker sources' conformance suite: cases written once and run
//! against each broker a test can start and publish to ([`TestBroker`]:
//! mosquitto for `--mqtt`, tansu for `--kafka`), with the helpers both
//! suites share. Each broker's module runs each case under a test name of
//! its own (`serve::mqtt::…`, `serve::kafka::…`).
//!
//! A new broker source runs the same cases by implementing [`TestBroker`]
//! for its broker.

use std::sync::mpsc;
use std::time::Duration;

use super::*;

/// A broker the test started, and how a server reads it.
pub(super) trait TestBroker {
    /// The source's status route.
    const STATUS: &'static str;
    /// Its status's count of messages read (redeliveries included).
    const RECEIVED: &'static str;
    /// Its status's count of messages acknowledged (or committed).
    const ACKNOWLEDGED: &'static str;
    /// The most messages read and not yet acknowledged while the ingest
    /// is saturated: the rest waits at the broker.
    const MAX_HELD: u64;
    /// How long a delivery may take: a Kafka group may first have to wait
    /// for a killed member's session to time out.
    const PATIENCE: Duration;

    /// `serve` reading this broker with `args`, once it is ready (its line
    /// printed).
    fn serve(&self, name: &str, args: &[&str]) -> Serve;

    /// Publishes `payloads` in order, one message each, to the topic of
    /// the property [`P`], on a task: its end means the broker has them
    /// all.
    fn send(&self, payloads: Vec<String>) -> tokio::task::JoinHandle<()>;
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

/// `serve` with `--state` is SIGKILLed mid-stream while 20,000 messages
/// are published; started again on the same state directory (the same
/// client id or group, so the same session or offsets), it delivers every
/// message in the results exactly once, in order: what it took but did not
/// acknowledge comes again and is dropped as a duplicate. The second
/// server, still running, is returned for the broker's own checks, with
/// its state directory (dropped after it).
pub(super) async fn exactly_once_across_a_sigkill<B: TestBroker>(
    broker: &B,
    name: &str,
) -> (Serve, TempDir) {
    let state = TempDir::new(&format!("{name}-state"));
    let dir = state.path().to_str().unwrap();
    let args = [
        "--state",
        dir,
        "--replay",
        "100000",
        "--replay-bytes",
        "33554432",
    ];
    let server = broker.serve(&format!("{name}-1"), &args);
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

    let server = broker.serve(&format!("{name}-2"), &args);
    broker
        .send(instants(n, 1))
        .await
        .expect("the last message published");
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let seen = until_value(&mut sse, n as f64, B::PATIENCE).await;
    assert_each_once(&seen, n + 1);
    (server, state)
}

/// A query whose job never answers fills its source buffer, and the
/// ingest path holds the ingests back (503 after `--ingest-wait-ms`): the
/// source stops reading, holding at most [`TestBroker::MAX_HELD`] messages;
/// once the query is gone every message is taken and acknowledged, none
/// lost on the way.
pub(super) async fn a_saturated_ingest_stops_the_reading_and_loses_nothing<B: TestBroker>(
    broker: &B,
    name: &str,
) {
    let server = broker.serve(name, &["--ingest-wait-ms", "50"]);
    let mut client = server.client();
    let query = register(
        &mut client,
        P,
        r#"{"operation":"mul","arg":1,"engine":"hang"}"#,
    )
    .await;
    let n = 20_000;
    broker
        .send(instants(0, n))
        .await
        .expect("every message published");
    let status = eventually(
        "an ingest tried again",
        B::PATIENCE,
        async || client.get(B::STATUS).await.json(),
        |status| status["retries"].as_u64().unwrap() > 0,
    )
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
    let status = eventually(
        "every message acknowledged",
        B::PATIENCE,
        async || client.get(B::STATUS).await.json(),
        |status| status[acknowledged].as_u64().unwrap() >= n as u64,
    )
    .await;
    assert_eq!(status[acknowledged], n, "{status}");
    assert_eq!(status[received], n, "{status}");
    assert_eq!(status["instants"], n, "{status}");
}

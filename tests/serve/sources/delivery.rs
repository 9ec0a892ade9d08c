//! What is delivered, and how often: with the ingest saturated, across a
//! SIGKILL of serve, across a broker restart.

use super::super::metrics::scrape_until;
use super::*;

/// `serve` with `--state` is SIGKILLed mid-stream while 20,000 messages
/// are published; started again on the same state directory (the same
/// client id or group, so the same session or offsets), it delivers every
/// message in the results exactly once, in order: what it took but did not
/// acknowledge comes again and is dropped as a duplicate.
pub(in crate::serve) async fn after_a_sigkill_of_serve_every_message_is_in_the_results_exactly_once<
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
    // And the metrics say so.
    let read = format!("mfstream_{}_{}_total", B::SOURCE, B::RECEIVED);
    let duplicates = format!("mfstream_{}_duplicates_total", B::SOURCE);
    scrape_until(
        &mut client,
        "every message read again taken or a duplicate, in the metrics",
        |s| {
            let taken = s.get("mfstream_ingest_instants_total", &[("source", B::SOURCE)]);
            taken > 0.0 && s.get(&read, &[]) == taken + s.get(&duplicates, &[])
        },
    )
    .await;
}

/// The same across a SIGKILL for a feature's positions (10,000 of them):
/// the feature's mark (its last position in the log) drops what the store
/// already had.
pub(in crate::serve) async fn positions_after_a_sigkill_of_serve_are_each_in_the_results_exactly_once<
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
pub(in crate::serve) async fn a_broker_restart_mid_stream_loses_and_doubles_nothing<
    B: TestBroker,
>(
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
pub(in crate::serve) async fn a_saturated_ingest_stops_the_reading_and_loses_nothing_once_it_drains<
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

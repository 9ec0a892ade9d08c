//! Results over SSE: delivery, resume with Last-Event-ID, lagged subscribers.

use super::*;

#[tokio::test]
async fn a_query_streams_ingested_instants_and_ends_when_deleted() {
    let server = Serve::start("serve-e2e", &[], &[]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"mul","arg":2}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;

    // One instant, an array, and JSON lines: all accepted, in order.
    let one = client.post(&format!("{P}/ingest"), &instant(0, "0")).await;
    assert_eq!(one.status, 202, "{one:?}");
    assert_eq!(one.json()["accepted"], 1);
    assert_eq!(one.json()["queries"], 1);
    let array = format!("[{},{}]", instant(1, "1"), instant(2, "2"));
    assert_eq!(
        client.post(&format!("{P}/ingest"), &array).await.json()["accepted"],
        2
    );
    assert_eq!(
        client
            .post(&format!("{P}/ingest"), &lines(3, 3))
            .await
            .json()["accepted"],
        3
    );

    let events = take(&mut sse, 6).await;
    assert_eq!(values(&events), [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
    let ids: Vec<_> = events.iter().map(|e| e.id.clone().unwrap()).collect();
    assert_eq!(ids, ["1", "2", "3", "4", "5", "6"]);
    assert_eq!(
        events[0].json(),
        serde_json::json!({"datetime":at(0),"value":0,"property":"speed","operation":"mul"})
    );

    let status = client.get(&query).await.json();
    assert_eq!(status["status"], "running");
    assert_eq!(status["engine"], "local");
    assert_eq!(status["operation"], "mul");
    let listed = client.get(&format!("{P}/queries")).await.json();
    assert_eq!(listed["numberReturned"], 1);

    assert_eq!(client.delete(&query).await.status, 204);
    let end = take(&mut sse, 1).await.remove(0);
    assert_eq!(end.event, "end");
    assert_eq!(end.json(), serde_json::json!({"status":"stopped"}));
    assert!(sse.next().await.is_none(), "the stream ends after `end`");
    assert_eq!(client.get(&query).await.status, 404);
    assert_eq!(client.delete(&query).await.status, 404);
}

#[tokio::test]
async fn reconnecting_with_last_event_id_misses_nothing_still_in_the_buffer() {
    let server = Serve::start("serve-resume", &[], &[]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let stream = format!("{query}/stream");
    let mut sse = server.subscribe(&stream, &[]).await;
    client.post(&format!("{P}/ingest"), &lines(1, 100)).await;
    let first = take(&mut sse, 40).await;
    assert_eq!(first.last().unwrap().id.as_deref(), Some("40"));
    drop(sse); // the client drops the connection

    client.post(&format!("{P}/ingest"), &lines(101, 100)).await;
    let mut again = server.subscribe(&stream, &[("Last-Event-ID", "40")]).await;
    let rest = take(&mut again, 160).await;
    let expected: Vec<f64> = (41..=200).map(f64::from).collect();
    assert_eq!(values(&rest), expected);
    assert_eq!(rest[0].id.as_deref(), Some("41"));

    // A late subscriber gets what the replay buffer still holds: all of it.
    let mut late = server.subscribe(&stream, &[]).await;
    assert_eq!(take(&mut late, 200).await[0].id.as_deref(), Some("1"));
}

#[tokio::test]
async fn a_subscriber_that_falls_behind_is_told_how_many_events_it_missed() {
    let server = Serve::start("serve-lagged", &["--replay", "16"], &[]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    // Subscribed, but not reading while the results pile up far beyond the
    // socket buffers and the replay buffer.
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let total = 300_000;
    for chunk in 0..30 {
        let response = client
            .post(&format!("{P}/ingest"), &lines(chunk * 10_000 + 1, 10_000))
            .await;
        assert_eq!(response.status, 202, "{response:?}");
    }
    let (mut delivered, mut missed, mut lagged, mut next_id) = (0u64, 0u64, 0, 1u64);
    while next_id <= total as u64 {
        let event = take(&mut sse, 1).await.remove(0);
        let id: u64 = event.id.as_deref().unwrap().parse().unwrap();
        match event.event.as_str() {
            "instant" => {
                assert_eq!(id, next_id, "a silent gap");
                assert_eq!(event.json()["value"].as_f64(), Some(id as f64));
                delivered += 1;
                next_id += 1;
            }
            "lagged" => {
                let n = event.json()["missed"].as_u64().unwrap();
                // The lagged event's id is the last one missed.
                assert_eq!(id, next_id + n - 1);
                missed += n;
                lagged += 1;
                next_id += n;
            }
            other => panic!("unexpected event {other}"),
        }
    }
    assert!(lagged > 0, "the slow subscriber was never told it lagged");
    assert_eq!(delivered + missed, total as u64);
}

#[tokio::test]
async fn every_query_on_a_property_sees_concurrent_ingests_in_the_same_order() {
    let server = Serve::start("serve-order", &[], &[]);
    let mut client = server.client();
    let first = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let second = register(&mut client, P, r#"{"operation":"mul","arg":1}"#).await;
    let mut first_sse = server.subscribe(&format!("{first}/stream"), &[]).await;
    let mut second_sse = server.subscribe(&format!("{second}/stream"), &[]).await;
    // Two clients ingest at once, 20 requests each.
    let feeders: Vec<_> = [0usize, 1_000]
        .into_iter()
        .map(|base| {
            let mut client = server.client();
            tokio::spawn(async move {
                for i in 0..20 {
                    let body = lines(base + i * 10, 10);
                    let response = client.post(&format!("{P}/ingest"), &body).await;
                    assert_eq!(response.status, 202, "{response:?}");
                }
            })
        })
        .collect();
    for feeder in feeders {
        feeder.await.unwrap();
    }
    let a = values(&take(&mut first_sse, 400).await);
    let b = values(&take(&mut second_sse, 400).await);
    assert_eq!(a, b);
    // Each client's own instants keep their order.
    let own: Vec<f64> = a.iter().copied().filter(|v| *v < 1_000.0).collect();
    assert_eq!(own, (0..200).map(|v| v as f64).collect::<Vec<_>>());
}

#[tokio::test]
async fn an_idle_stream_gets_keep_alive_comments() {
    let server = Serve::start("serve-keepalive", &["--keep-alive-ms", "50"], &[]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    assert_eq!(sse.next_frame().await, Some(&b"retry: 1000"[..]));
    assert_eq!(sse.next_frame().await, Some(&b": keep-alive"[..]));
}

#[tokio::test]
async fn a_windowed_aggregate_streams_window_events() {
    let server = Serve::start("serve-window", &[], &[]);
    let mut client = server.client();
    let query = register(
        &mut client,
        P,
        r#"{"aggregation":"SUM","window":{"type":"COUNT","size":2}}"#,
    )
    .await;
    assert_eq!(client.get(&query).await.json()["kind"], "aggregate");
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    client.post(&format!("{P}/ingest"), &lines(1, 4)).await;
    let windows = take(&mut sse, 2).await;
    assert!(windows.iter().all(|w| w.event == "window"), "{windows:?}");
    let sums: Vec<_> = windows.iter().map(|w| w.json()["value"].clone()).collect();
    assert_eq!(sums, [serde_json::json!(3), serde_json::json!(7)]);
    assert_eq!(windows[1].id.as_deref(), Some("2"));

    let text = "/collections/ships/items/s1/tproperties/name";
    let avg = r#"{"aggregation":"AVG","window":{"type":"COUNT","size":2},"type":"TText"}"#;
    let refused = client.post(&format!("{text}/queries"), avg).await;
    assert_eq!(refused.status, 422, "{refused:?}");
    assert_eq!(refused.json()["field"], "aggregation");
}

#[tokio::test]
async fn the_replay_buffer_is_bounded_in_bytes_and_a_resuming_subscriber_is_told_what_it_missed() {
    let server = Serve::start("serve-ring-bytes", &["--replay-bytes", "2000"], &[]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let response = client.post(&format!("{P}/ingest"), &lines(1, 100)).await;
    assert_eq!(response.status, 202);
    eventually(
        "every result",
        PATIENCE,
        async || client.get(&query).await.json()["events"].clone(),
        |events| *events == 100,
    )
    .await;
    // Resuming from the start: what the buffer no longer holds is missed.
    let mut late = server
        .subscribe(&format!("{query}/stream"), &[("Last-Event-ID", "0")])
        .await;
    let lagged = take(&mut late, 1).await.remove(0);
    assert_eq!(lagged.event, "lagged");
    let missed = lagged.json()["missed"].as_u64().unwrap();
    // Each frame is over 100 bytes: 2,000 bytes keep fewer than 20.
    assert!((81..100).contains(&missed), "missed {missed}");
    let kept = take(&mut late, (100 - missed) as usize).await;
    assert_eq!(values(&kept).last(), Some(&100.0));
}

/// Real time: a TUMBLING window on a live query closes on the clock. Two
/// instants stamped now, no later ingest: the window comes over SSE once
/// the second it falls in has passed.
#[tokio::test]
async fn a_tumbling_window_is_emitted_on_time_without_a_later_ingest() {
    let server = Serve::start("serve-on-time", &[], &[]);
    let mut client = server.client();
    let body = r#"{"aggregation":"COUNT","window":{"type":"TUMBLING","size":1,"unit":"SECONDS"}}"#;
    let query = register(&mut client, P, body).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let now = rfc3339(std::time::SystemTime::now());
    let two =
        format!("{{\"datetime\":\"{now}\",\"value\":1}}\n{{\"datetime\":\"{now}\",\"value\":2}}\n");
    let ingested = client.post(&format!("{P}/ingest"), &two).await;
    assert_eq!(ingested.status, 202, "{ingested:?}");
    // The window ends within a second; PATIENCE bounds a failure.
    let event = tokio::time::timeout(PATIENCE, sse.next())
        .await
        .unwrap_or_else(|_| {
            panic!("no window within {PATIENCE:?} of ingesting two instants at {now}")
        })
        .expect("the stream goes on");
    assert_eq!(event.event, "window", "{event:?}");
    let window = event.json();
    assert_eq!(window["count"], 2, "{window}");
    assert_eq!(window["windowStart"], now.as_str());
    assert!(window.get("partial").is_none(), "{window}");
    assert_eq!(client.get(&query).await.json()["status"], "running");
}

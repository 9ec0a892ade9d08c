//! What one query, one tenant or one kind of request may hold: a query's
//! state (`--max-query-state`), the bytes of ingest in flight
//! (`--max-inflight-bytes`), the SSE streams (`--max-streams`), a hopping
//! window's events per record, and the journal a query pins
//! (`--max-query-log`).

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;

/// The server's resident memory, in bytes (`VmRSS` of /proc/PID/status).
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line");
    kib * 1024
}

/// The query at `path` once its status is no longer `running` (its last
/// records may still be on their way to it when the ingest is answered).
async fn ended(client: &mut Client, path: &str) -> serde_json::Value {
    eventually(
        &format!("{path} no longer running"),
        PATIENCE,
        async || client.get(path).await.json(),
        |link| link["status"] != "running",
    )
    .await
}

/// JSON lines of `n` distinct texts of 8 KiB, numbered from `from`, all at
/// `datetime`.
fn texts(datetime: &str, from: usize, n: usize) -> String {
    let filler = "x".repeat(8 * 1024 - 8);
    (from..from + n)
        .map(|i| format!("{{\"datetime\":\"{datetime}\",\"value\":\"{i:08}{filler}\"}}\n"))
        .collect()
}

#[tokio::test]
async fn a_query_over_its_state_budget_fails_alone_and_the_server_stays_small() {
    let server = Serve::start("serve-query-state", &[], &[]);
    let mut client = server.client();
    let names = "/collections/ships/items/s1/tproperties/name";
    let distinct = register(
        &mut client,
        names,
        r#"{"aggregation":"COUNT_DISTINCT","type":"TText","window":{"type":"TUMBLING","size":24,"unit":"HOURS"}}"#,
    )
    .await;
    let other = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let mut events = server.subscribe(&format!("{other}/stream"), &[]).await;
    // About 400 MB of distinct texts into one day-long window, in bodies
    // just under --max-body (4 MiB): 480 texts of 8 KiB each. Tomorrow's
    // window: the wall clock does not close it during the test.
    let tomorrow = rfc3339(std::time::SystemTime::now() + std::time::Duration::from_secs(86_400));
    let per_body = 480;
    let mut most = 0;
    for body in 0..100 {
        let response = client
            .post(
                &format!("{names}/ingest"),
                &texts(&tomorrow, body * per_body, per_body),
            )
            .await;
        assert_eq!(response.status, 202, "body {body}: {response:?}");
        most = most.max(rss(server.pid()));
    }
    let failed = ended(&mut client, &distinct).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    let reason = failed["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("query state reached --max-query-state (64 MiB)"),
        "{reason}"
    );
    // The other query keeps answering.
    let response = client.post(&format!("{P}/ingest"), &lines(0, 3)).await;
    assert_eq!(response.status, 202, "{response:?}");
    assert_eq!(values(&take(&mut events, 3).await), [0.0, 1.0, 2.0]);
    assert_eq!(client.get(&other).await.json()["status"], "running");
    assert!(
        most < 256 * 1024 * 1024,
        "the server grew to {} MiB",
        most >> 20
    );
}

/// The status of the next answer on `conn` (its head read, its body left).
async fn status_of(conn: &mut TcpStream) -> u16 {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(PATIENCE, conn.read(&mut byte))
            .await
            .expect("an answer in time")
            .unwrap();
        assert_eq!(n, 1, "closed before an answer: {head:?}");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    head.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The head of an ingest request to `P`, with `framing` headers.
fn ingest_head(framing: &str) -> String {
    format!(
        "POST {P}/ingest HTTP/1.1\r\nHost: localhost\r\n\
         Content-Type: application/x-ndjson\r\n{framing}\r\n"
    )
}

#[tokio::test]
async fn bodies_past_max_inflight_bytes_are_answered_503_until_those_held_are_done() {
    let server = Serve::start(
        "serve-inflight",
        &["--max-inflight-bytes", "3000000", "--max-body", "2000000"],
        &[],
    );
    // About 1.4 MB and 1.7 MB: either fits alone, not both.
    let held = lines(0, 25_000);
    let other = lines(0, 30_000);
    assert!(
        (1_400_000..1_500_000).contains(&held.len()),
        "{}",
        held.len()
    );
    assert!(
        (1_650_000..1_750_000).contains(&other.len()),
        "{}",
        other.len()
    );
    // A body declared whole holds its bytes once the server starts reading
    // it, which `100 Continue` says, and until its ingest is done.
    let mut declared = TcpStream::connect(server.addr).await.unwrap();
    let head = ingest_head(&format!(
        "Content-Length: {}\r\nExpect: 100-continue\r\n",
        held.len()
    ));
    declared.write_all(head.as_bytes()).await.unwrap();
    assert_eq!(status_of(&mut declared).await, 100);
    let mut client = server.client();
    let refused = client.post(&format!("{P}/ingest"), &other).await;
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.header("retry-after"), Some("1"), "{refused:?}");
    assert_eq!(refused.json()["code"], "TooManyBytesInFlight");
    assert!(
        refused.body.contains("--max-inflight-bytes (2.9 MiB)"),
        "{refused:?}"
    );
    declared.write_all(held.as_bytes()).await.unwrap();
    assert_eq!(status_of(&mut declared).await, 202);
    // Done: its bytes are free again.
    let response = server.client().post(&format!("{P}/ingest"), &other).await;
    assert_eq!(response.status, 202, "{response:?}");
}

#[tokio::test]
async fn a_chunked_body_holds_its_bytes_as_its_chunks_come() {
    let server = Serve::start(
        "serve-inflight-chunked",
        &["--max-inflight-bytes", "1000000", "--max-body", "2000000"],
        &[],
    );
    // 1.45 MB in chunks of 100 kB, no length declared: refused once the
    // chunks read pass 1 MB, before the body ends.
    let body = lines(0, 25_000);
    let mut chunked = TcpStream::connect(server.addr).await.unwrap();
    let head = ingest_head("Transfer-Encoding: chunked\r\n");
    chunked.write_all(head.as_bytes()).await.unwrap();
    for piece in body.as_bytes().chunks(100_000) {
        let chunk = format!("{:x}\r\n", piece.len());
        let sent = async {
            chunked.write_all(chunk.as_bytes()).await?;
            chunked.write_all(piece).await?;
            chunked.write_all(b"\r\n").await
        };
        // The server may close the connection once it has answered.
        if sent.await.is_err() {
            break;
        }
    }
    let _ = chunked.write_all(b"0\r\n\r\n").await;
    assert_eq!(status_of(&mut chunked).await, 503);
    // Gone with its connection: a body of 900 kB fits again.
    let response = server
        .client()
        .post(&format!("{P}/ingest"), &lines(0, 15_000))
        .await;
    assert_eq!(response.status, 202, "{response:?}");
}

#[tokio::test]
async fn streams_past_max_streams_are_refused_and_ingest_still_gets_a_connection() {
    // --max-streams defaults to 3/4 of --max-connections: 6 of 8.
    let server = Serve::start("serve-max-streams", &["--max-connections", "8"], &[]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let stream = format!("{query}/stream");
    let mut open = Vec::new();
    for _ in 0..6 {
        open.push(server.subscribe(&stream, &[]).await);
    }
    let refused = subscribe(server.addr, &stream, &[])
        .await
        .err()
        .expect("a seventh stream is refused");
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert!(
        refused
            .body
            .contains("6 streams open already (--max-streams)"),
        "{refused:?}"
    );
    // Ingest still gets a connection, and every stream its events.
    let response = client.post(&format!("{P}/ingest"), &lines(0, 2)).await;
    assert_eq!(response.status, 202, "{response:?}");
    for sse in &mut open {
        assert_eq!(values(&take(sse, 2).await), [0.0, 1.0]);
    }
    // A stream that ends gives its slot back (the server sees it gone when
    // it next writes to it).
    drop(open.pop());
    let mut next = 2;
    let mut again = None;
    eventually(
        "the stream's slot given back",
        PATIENCE,
        async || match subscribe(server.addr, &stream, &[]).await {
            Ok(sse) => {
                again = Some(sse);
                true
            }
            Err(response) => {
                assert_eq!(response.status, 503, "{response:?}");
                let response = client.post(&format!("{P}/ingest"), &lines(next, 1)).await;
                assert_eq!(response.status, 202, "{response:?}");
                next += 1;
                false
            }
        },
        |subscribed| *subscribed,
    )
    .await;
}

#[tokio::test]
async fn a_hop_that_would_turn_one_record_into_thousands_of_events_is_refused() {
    let server = Serve::start("serve-hop-cap", &[], &[]);
    let mut client = server.client();
    // 7,200 buckets (under the bucket cap), but every record in 7,200
    // windows: 7,200 events each.
    let response = client
        .post(
            &format!("{P}/queries"),
            r#"{"aggregation":"COUNT","window":{"type":"HOPPING","size":2,"unit":"HOURS","hop":1,"hopUnit":"SECONDS"}}"#,
        )
        .await;
    assert_eq!(response.status, 400, "{response:?}");
    let problem = response.json();
    assert_eq!(problem["field"], "window.hop");
    let description = problem["description"].as_str().unwrap();
    assert!(
        description.contains("puts each record in 7200 windows")
            && description.contains("at most 1000 windows per record"),
        "{description}"
    );
    // At the limit it is registered.
    register(
        &mut client,
        P,
        r#"{"aggregation":"COUNT","window":{"type":"HOPPING","size":1000,"unit":"SECONDS","hop":1}}"#,
    )
    .await;
}

/// The bytes of the journal's segments in the state directory.
fn journal_bytes(state: &TempDir) -> u64 {
    std::fs::read_dir(state.join("journal"))
        .unwrap()
        .map(|entry| entry.unwrap().metadata().unwrap().len())
        .sum()
}

#[tokio::test]
async fn a_query_whose_checkpoint_does_not_move_fails_past_max_query_log_and_the_journal_shrinks() {
    let state = TempDir::new("serve-query-log");
    let dir = state.path().to_str().unwrap();
    let server = Serve::start(
        "serve-query-log",
        &["--state", dir, "--max-query-log", "2000000"],
        &[],
    );
    let mut client = server.client();
    // A COUNT window a billion records long moves its checkpoint only
    // after a billion: every instant logged since it was registered is
    // kept for it, as for a query on a bridge or plugin engine.
    let pinning = register(
        &mut client,
        P,
        r#"{"aggregation":"COUNT","window":{"type":"COUNT","size":1000000000}}"#,
    )
    .await;
    // A transform moves its checkpoint with every result.
    let moving = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let mut sent = 0;
    // Bodies well under the cap: an ingest is one journal record, and the
    // record holding a query's checkpoint is kept for it whole.
    const BODY: usize = 10_000;
    let body = |from: usize| lines(from % 900_000, BODY);
    let reason = loop {
        assert!(sent < 2_000_000, "still running after {sent} instants");
        let response = client.post(&format!("{P}/ingest"), &body(sent)).await;
        assert_eq!(response.status, 202, "{response:?}");
        sent += BODY;
        let link = client.get(&pinning).await.json();
        if link["status"] == "failed" {
            break link["reason"].as_str().unwrap().to_owned();
        }
        assert_eq!(link["status"], "running", "{link}");
    };
    assert!(
        reason.starts_with("query log reached --max-query-log (1.9 MiB): the journal keeps "),
        "{reason}"
    );
    // Nothing keeps those instants now: the journal lets them go as its
    // segments (16 MiB) fill, however much more is ingested.
    for _ in 0..25 * 50_000 / BODY {
        let response = client.post(&format!("{P}/ingest"), &body(sent)).await;
        assert_eq!(response.status, 202, "{response:?}");
        sent += BODY;
    }
    assert_eq!(client.get(&moving).await.json()["status"], "running");
    let kept = journal_bytes(&state);
    // Without the cap: about 87 MiB, all of it kept for the COUNT query.
    assert!(kept < 40 << 20, "the journal holds {} MiB", kept >> 20);
}

#[tokio::test]
async fn the_state_budget_holds_for_windows_the_host_computes_for_a_bridge_engine() {
    let server = Serve::start(
        "serve-query-state-bridge",
        &["--max-query-state", "5000000", "--replay-bytes", "100000"],
        &[],
    );
    let mut client = server.client();
    let names = "/collections/ships/items/s1/tproperties/name";
    // No transform for the job: the host windows the instants.
    let query = register(
        &mut client,
        names,
        r#"{"engine":"echo","aggregation":"COUNT_DISTINCT","type":"TText","window":{"type":"TUMBLING","size":24,"unit":"HOURS"}}"#,
    )
    .await;
    let tomorrow = rfc3339(std::time::SystemTime::now() + std::time::Duration::from_secs(86_400));
    for body in 0..4 {
        let response = client
            .post(
                &format!("{names}/ingest"),
                &texts(&tomorrow, body * 240, 240),
            )
            .await;
        assert_eq!(response.status, 202, "{response:?}");
    }
    let link = ended(&mut client, &query).await;
    assert_eq!(link["status"], "failed", "{link}");
    assert_eq!(link["engine"], "echo");
    let reason = link["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("query state reached --max-query-state (4.8 MiB)"),
        "{reason}"
    );
}

#[tokio::test]
async fn queries_each_within_budget_cannot_together_pass_max_total_query_state() {
    let server = Serve::start(
        "serve-total-query-state",
        &["--max-total-query-state", "20000000"],
        &[],
    );
    let mut client = server.client();
    let names = "/collections/ships/items/s1/tproperties/name";
    let body = r#"{"aggregation":"COUNT_DISTINCT","type":"TText","window":{"type":"TUMBLING","size":24,"unit":"HOURS"}}"#;
    let mut distinct = Vec::new();
    for _ in 0..3 {
        distinct.push(register(&mut client, names, body).await);
    }
    let other = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let mut events = server.subscribe(&format!("{other}/stream"), &[]).await;
    // 12 MB of distinct texts: each query alone would hold them (under its
    // 64 MiB), the three together not (36 MB of 20).
    let tomorrow = rfc3339(std::time::SystemTime::now() + std::time::Duration::from_secs(86_400));
    for body in 0..3 {
        let response = client
            .post(
                &format!("{names}/ingest"),
                &texts(&tomorrow, body * 480, 480),
            )
            .await;
        assert_eq!(response.status, 202, "{response:?}");
    }
    // Until one has failed (their last records may still be on their way).
    let reasons = eventually(
        "one of the queries failed",
        PATIENCE,
        async || {
            let mut reasons = Vec::new();
            for query in &distinct {
                let link = client.get(query).await.json();
                if link["status"] == "failed" {
                    reasons.push(link["reason"].to_string());
                }
            }
            reasons
        },
        |reasons| !reasons.is_empty(),
    )
    .await;
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("together reached --max-total-query-state (19.1 MiB)")),
        "{reasons:?}"
    );
    // The transform on another property holds almost nothing: it goes on.
    let response = client.post(&format!("{P}/ingest"), &lines(0, 3)).await;
    assert_eq!(response.status, 202, "{response:?}");
    assert_eq!(values(&take(&mut events, 3).await), [0.0, 1.0, 2.0]);
}

/// `mfstream_server_query_state_bytes` of `GET /metrics`.
async fn total_state(client: &mut Client) -> f64 {
    let response = client.get("/metrics").await;
    assert_eq!(response.status, 200, "{response:?}");
    response
        .body
        .lines()
        .find_map(|l| l.strip_prefix("mfstream_server_query_state_bytes "))
        .and_then(|v| v.trim().parse().ok())
        .expect("a mfstream_server_query_state_bytes line")
}

/// A geofence body of `n` vertices: a circle, or a zigzag whose every edge
/// spans its height (the largest strip index).
fn fence_body(n: usize, zigzag: bool) -> String {
    let mut ring: Vec<[f64; 2]> = (0..n)
        .map(|i| {
            if zigzag {
                match i {
                    0 => [0.0, -1.0],
                    i if i == n - 1 => [1.0, -1.0],
                    i => [i as f64 / n as f64, if i % 2 == 0 { 0.0 } else { 10.0 }],
                }
            } else {
                let a = i as f64 / n as f64 * std::f64::consts::TAU;
                [10.0 + 0.5 * a.cos(), 45.0 + 0.5 * a.sin()]
            }
        })
        .collect();
    ring.push(ring[0]);
    serde_json::json!({"geofence": {"type": "Polygon", "coordinates": [ring]}}).to_string()
}

#[tokio::test]
async fn a_position_querys_geometry_counts_in_its_state_and_the_total_before_it_is_built() {
    // A 9,999-vertex circle holds about 1.5 MB once parsed and indexed
    // (crates/model/src/position/tests.rs measures it): two fit in 4 MB, not three.
    let server = Serve::start(
        "serve-geometry-state",
        &[
            "--max-query-state",
            "2000000",
            "--max-total-query-state",
            "4000000",
        ],
        &[],
    );
    let mut client = server.client();
    let seq = |feature: &str| format!("/collections/ships/items/{feature}/tgsequence");
    let circle = fence_body(9_999, false);
    // Alone over its own budget (a zigzag's index: about 5 MB): 413.
    let response = client
        .post(&format!("{}/queries", seq("z")), &fence_body(9_999, true))
        .await;
    assert_eq!(response.status, 413, "{response:?}");
    assert_eq!(response.json()["field"], "geofence", "{response:?}");
    let text = response.json()["description"].to_string();
    assert!(
        text.contains("more than the query's state may hold (--max-query-state, 1.9 MiB)"),
        "{text}"
    );
    assert_eq!(total_state(&mut client).await, 0.0, "nothing was kept");
    let first = register(&mut client, &seq("a"), &circle).await;
    let one = total_state(&mut client).await;
    assert!((1.4e6..1.6e6).contains(&one), "{one} bytes for one circle");
    register(&mut client, &seq("b"), &circle).await;
    assert_eq!(total_state(&mut client).await, 2.0 * one);
    // The third would take the queries past the total: 503, and nothing
    // of it kept.
    let response = client.post(&format!("{}/queries", seq("c")), &circle).await;
    assert_eq!(response.status, 503, "{response:?}");
    let text = response.json()["description"].to_string();
    assert!(
        text.contains("the queries' state together would pass --max-total-query-state (3.8 MiB)"),
        "{text}"
    );
    assert_eq!(total_state(&mut client).await, 2.0 * one);
    let queries = client.get(&format!("{}/queries", seq("c"))).await;
    assert!(
        queries.status == 404 || queries.json()["queries"] == serde_json::json!([]),
        "{queries:?}"
    );
    // A query deleted gives its geometry back: the third fits then.
    assert_eq!(client.delete(&first).await.status, 204);
    // Given back when its last part is dropped, just after the 204.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while total_state(&mut client).await != one {
        assert!(tokio::time::Instant::now() < deadline, "not given back");
        tokio::task::yield_now().await;
    }
    register(&mut client, &seq("c"), &circle).await;
    assert_eq!(total_state(&mut client).await, 2.0 * one);
}

#[tokio::test]
async fn a_resumed_querys_geometry_counts_again_whatever_the_limits_now() {
    let state = TempDir::new("serve-geometry-resumed");
    let dir = state.path().to_str().unwrap().to_owned();
    let seq = |feature: &str| format!("/collections/ships/items/{feature}/tgsequence");
    let circle = fence_body(9_999, false);
    let mut server = Serve::start("serve-geometry-resumed-1", &["--state", &dir], &[]);
    let mut client = server.client();
    let fence = register(&mut client, &seq("a"), &circle).await;
    let one = total_state(&mut client).await;
    assert!(one > 1.4e6, "{one}");
    assert!(server.terminate().success());
    // Restarted with a total below it: the query runs, its geometry
    // counted; a new one does not fit.
    let server = Serve::start(
        "serve-geometry-resumed-2",
        &["--state", &dir, "--max-total-query-state", "1000000"],
        &[],
    );
    let mut client = server.client();
    assert_eq!(client.get(&fence).await.json()["status"], "running");
    assert_eq!(total_state(&mut client).await, one);
    let response = client.post(&format!("{}/queries", seq("b")), &circle).await;
    assert_eq!(response.status, 503, "{response:?}");
}

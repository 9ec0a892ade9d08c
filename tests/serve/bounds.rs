//! What one query, one tenant or one kind of request may hold: a query's
//! state (`--max-query-state`), the bytes of ingest in flight
//! (`--max-inflight-bytes`), the SSE streams (`--max-streams`), a hopping
//! window's events per record, and the journal a query pins
//! (`--max-query-log`).

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
    let failed = client.get(&distinct).await.json();
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

//! The bounds: queries, subscribers, bodies, properties, connections and
//! the time a request may take to arrive.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::client::raw;

use super::*;

#[tokio::test]
async fn queries_subscribers_and_bodies_are_bounded() {
    let server = Serve::start(
        "serve-bounds",
        &[
            "--max-queries",
            "1",
            "--max-subscribers",
            "1",
            "--max-body",
            "1000",
        ],
        &[],
    );
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let second = client
        .post(&format!("{P}/queries"), r#"{"operation":"abs"}"#)
        .await;
    assert_eq!(second.status, 503, "{second:?}");
    assert!(second.body.contains("--max-queries"), "{second:?}");
    let _first = server.subscribe(&format!("{query}/stream"), &[]).await;
    let refused = subscribe(server.addr, &format!("{query}/stream"), &[]).await;
    assert_eq!(refused.err().map(|r| r.status), Some(429));
    let big = client.post(&format!("{P}/ingest"), &lines(0, 100)).await;
    assert_eq!(big.status, 413, "{big:?}");
    assert_eq!(big.json()["code"], "PayloadTooLarge");
    // A deleted query frees its slot at once.
    assert_eq!(client.delete(&query).await.status, 204);
    register(&mut client, P, r#"{"operation":"abs"}"#).await;
}

#[tokio::test]
async fn only_queries_hold_properties_so_failures_and_deletions_free_them() {
    let server = Serve::start("serve-properties", &["--max-properties", "1"], &[]);
    let mut client = server.client();
    let property = |name: &str| format!("/collections/c/items/f/tproperties/{name}");
    // Failed registrations, each on a property of its own, hold nothing.
    for (i, body) in [
        r#"{"operation":"nope"}"#,
        r#"{"operation":"abs","engine":"nope"}"#,
        r#"{"operation":"abs","engine":"absent"}"#,
        r#"{"operation":"abs","type":"TText"}"#,
    ]
    .iter()
    .enumerate()
    {
        let response = client
            .post(
                &format!("{}/queries", property(&format!("failed{i}"))),
                body,
            )
            .await;
        assert!(
            (400..=501).contains(&response.status),
            "{body}: {response:?}"
        );
    }
    // Nor do ingests to properties no query reads: checked, counted, not kept.
    for i in 0..20 {
        let response = client
            .post(
                &format!("{}/ingest", property(&format!("unread{i}"))),
                &lines(0, 3),
            )
            .await;
        assert_eq!(response.status, 202, "{response:?}");
        assert_eq!(response.json()["queries"], 0);
    }
    let first = register(&mut client, &property("a"), r#"{"operation":"abs"}"#).await;
    let full = client
        .post(
            &format!("{}/queries", property("b")),
            r#"{"operation":"abs"}"#,
        )
        .await;
    assert_eq!(full.status, 503, "{full:?}");
    assert!(full.body.contains("--max-properties"), "{full:?}");
    // A second query on a property already held needs no new slot.
    let second = register(&mut client, &property("a"), r#"{"operation":"ln"}"#).await;
    // The last query on a property frees it.
    assert_eq!(client.delete(&first).await.status, 204);
    let still = client
        .post(
            &format!("{}/queries", property("b")),
            r#"{"operation":"abs"}"#,
        )
        .await;
    assert_eq!(
        still.status, 503,
        "the second query still holds a: {still:?}"
    );
    assert_eq!(client.delete(&second).await.status, 204);
    register(&mut client, &property("b"), r#"{"operation":"abs"}"#).await;
}

#[tokio::test]
async fn parallel_registrations_never_exceed_max_queries() {
    let server = Serve::start("serve-parallel", &["--max-queries", "20"], &[]);
    let addr = server.addr;
    // Each on its own connection; a bridge engine, whose submit takes a
    // while (it starts a process), widens any race.
    let registrations: Vec<_> = (0..50)
        .map(|_| {
            tokio::spawn(async move {
                Client::new(addr)
                    .post(
                        &format!("{P}/queries"),
                        r#"{"operation":"abs","engine":"echo"}"#,
                    )
                    .await
                    .status
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for registration in registrations {
        statuses.push(registration.await.unwrap());
    }
    let created = statuses.iter().filter(|&&s| s == 201).count();
    let refused = statuses.iter().filter(|&&s| s == 503).count();
    assert_eq!((created, refused), (20, 30), "{statuses:?}");
    let listed = server.client().get(&format!("{P}/queries")).await.json();
    assert_eq!(listed["numberReturned"], 20);
}

/// The server's open file descriptors.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| dir.count())
        .unwrap_or(0)
}

/// Reads until the server closes the connection; false if it did not within
/// the patience.
async fn closed_by_server(conn: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    let read_to_end = async {
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(PATIENCE, read_to_end).await.is_ok()
}

#[tokio::test]
async fn half_sent_requests_are_closed_after_the_header_timeout_and_cannot_exhaust_descriptors() {
    let server = Serve::start(
        "serve-slowloris",
        &["--max-connections", "8", "--header-timeout-ms", "500"],
        &[],
    );
    let pid = server.pid();
    let baseline = open_fds(pid);
    let mut half_sent = Vec::new();
    for _ in 0..60 {
        let mut conn = TcpStream::connect(server.addr).await.unwrap();
        // The head never ends: no blank line.
        conn.write_all(b"GET /engines HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        half_sent.push(conn);
    }
    let mut most = open_fds(pid);
    // The server answers others all the same, once the timeout has closed
    // some of the half-sent.
    let engines = tokio::time::timeout(PATIENCE, server.client().get("/engines"))
        .await
        .expect("an answer while 60 half-sent requests wait");
    assert_eq!(engines.status, 200);
    for conn in &mut half_sent {
        most = most.max(open_fds(pid));
        assert!(
            closed_by_server(conn).await,
            "a half-sent request stayed open"
        );
    }
    // The listener, the accepted connections (8 at most) and a few more.
    assert!(
        most <= baseline + 8 + 4,
        "{most} descriptors open, {baseline} before the connections"
    );
}

#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_is_answered_408() {
    let server = Serve::start("serve-slow-body", &["--body-timeout-ms", "300"], &[]);
    let request = format!(
        "POST {P}/ingest HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: 100\r\n\r\n{{"
    );
    let response = tokio::time::timeout(PATIENCE, raw(server.addr, request.as_bytes()))
        .await
        .expect("an answer");
    assert_eq!(response.status, 408, "{response:?}");
    assert_eq!(response.json()["code"], "RequestTimeout");
    assert_eq!(response.header("connection"), Some("close"));
}

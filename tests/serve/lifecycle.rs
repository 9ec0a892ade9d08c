//! Backpressure, failing jobs, and shutdown.

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use std::os::unix::fs::PermissionsExt;

use crate::util::{entry, plugin_library, wait_gone};

use super::*;

#[tokio::test]
async fn ingest_answers_503_with_how_many_were_accepted_when_a_query_stays_full() {
    let server = Serve::start("serve-busy", &["--ingest-wait-ms", "300"], &[]);
    let mut client = server.client();
    // The job reads one record and never answers: its source fills up.
    register(&mut client, P, r#"{"operation":"abs","engine":"hang"}"#).await;
    let total = 50_000;
    let response = client.post(&format!("{P}/ingest"), &lines(0, total)).await;
    assert_eq!(response.status, 503, "{response:?}");
    assert_eq!(response.header("retry-after"), Some("1"));
    let body = response.json();
    let accepted = body["accepted"].as_u64().unwrap();
    assert!(accepted < total as u64, "{body}");
    assert!(
        body["description"]
            .as_str()
            .unwrap()
            .contains(&format!("accepted {accepted} of {total}")),
        "{body}"
    );
}

#[tokio::test]
async fn a_crashing_bridge_job_ends_the_stream_with_failed_and_the_reason() {
    let server = Serve::start("serve-crash", &[], &[("CRASH_AFTER", "3".into())]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"abs","engine":"crash"}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    client.post(&format!("{P}/ingest"), &lines(1, 10)).await;
    let events = tokio::time::timeout(PATIENCE, sse.until_end())
        .await
        .unwrap();
    let (end, results) = events.split_last().unwrap();
    assert_eq!(values(results), [1.0, 2.0, 3.0]);
    assert_eq!(end.event, "end");
    let data = end.json();
    assert_eq!(data["status"], "failed");
    let reason = data["reason"].as_str().unwrap();
    assert!(reason.contains("status 1"), "{reason}");
    let status = client.get(&query).await.json();
    assert_eq!(
        (status["status"].as_str(), status["reason"].as_str()),
        (Some("failed"), Some(reason))
    );
}

#[tokio::test]
async fn sigterm_ends_every_stream_with_its_end_event_and_leaves_no_job_behind() {
    let mut server = Serve::start("serve-sigterm", &[], &[]);
    let mut client = server.client();
    let local = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let bridge = register(&mut client, P, r#"{"operation":"abs","engine":"echo"}"#).await;
    let mut local_sse = server.subscribe(&format!("{local}/stream"), &[]).await;
    let mut bridge_sse = server.subscribe(&format!("{bridge}/stream"), &[]).await;
    client.post(&format!("{P}/ingest"), &lines(1, 5)).await;
    assert_eq!(
        values(&take(&mut bridge_sse, 5).await),
        [1.0, 2.0, 3.0, 4.0, 5.0]
    );
    assert_eq!(
        values(&take(&mut local_sse, 5).await),
        [1.0, 2.0, 3.0, 4.0, 5.0]
    );
    let jobs = children_of(server.child.as_ref().unwrap().id());
    assert!(
        !jobs.is_empty(),
        "the echo job runs as a child of the server"
    );

    let status = server.terminate();
    assert_eq!(status.code(), Some(0));
    for sse in [&mut local_sse, &mut bridge_sse] {
        let end = tokio::time::timeout(PATIENCE, sse.until_end())
            .await
            .unwrap();
        assert_eq!(end.last().unwrap().event, "end");
        assert_eq!(end.last().unwrap().json()["status"], "stopped");
    }
    for pid in jobs {
        assert!(wait_gone(pid, PATIENCE), "job {pid} outlived the server");
    }
}

/// The pids of the processes whose parent is `pid` (children are listed
/// under the thread that started them).
fn children_of(pid: u32) -> Vec<i32> {
    let mut children = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let path = task.unwrap().path().join("children");
        let text = std::fs::read_to_string(path).unwrap_or_default();
        children.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok()),
        );
    }
    children
}

#[tokio::test]
async fn sighup_reloads_engines_toml_and_a_bad_file_changes_nothing() {
    let mut server = Serve::start("serve-reload", &[], &[]);
    let mut client = server.client();
    let names = |engines: serde_json::Value| -> Vec<String> {
        engines
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let before = names(client.get("/engines").await.json());
    assert!(!before.contains(&"added".to_owned()));
    let running = register(&mut client, P, r#"{"operation":"abs","engine":"echo"}"#).await;

    let config = server.config();
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("{text}\n[[engine]]\nname = \"added\"\ncmd_env = \"TEST_ECHO_CMD\"\n"),
    )
    .unwrap();
    server.signal(libc::SIGHUP);
    assert!(server.next_line().starts_with("mfstream: reloaded "));
    assert!(names(client.get("/engines").await.json()).contains(&"added".to_owned()));
    register(&mut client, P, r#"{"operation":"abs","engine":"added"}"#).await;
    // The query started before the reload runs on.
    assert_eq!(client.get(&running).await.json()["status"], "running");

    std::fs::write(&config, "[[engine]]\nname = 7\n").unwrap();
    server.signal(libc::SIGHUP);
    assert!(server.next_line().contains("the engines are unchanged"));
    assert!(names(client.get("/engines").await.json()).contains(&"added".to_owned()));
}

#[tokio::test]
async fn sigterm_with_a_half_sent_request_and_a_stalled_subscriber_exits_within_the_grace() {
    let mut server = Serve::start(
        "serve-sigterm-stalled",
        &[
            "--shutdown-grace-ms",
            "500",
            "--replay",
            "1000000",
            "--replay-bytes",
            "100000000",
        ],
        &[],
    );
    let mut client = server.client();
    let busy = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let quiet_property = "/collections/ships/items/s2/tproperties/speed";
    let quiet = register(&mut client, quiet_property, r#"{"operation":"abs"}"#).await;
    // A subscriber that never reads, behind more results than the socket
    // buffers hold.
    let mut stalled = TcpStream::connect(server.addr).await.unwrap();
    stalled
        .write_all(format!("GET {busy}/stream HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let total = 200_000;
    for start in (0..total).step_by(10_000) {
        let response = client
            .post(&format!("{P}/ingest"), &lines(start, 10_000))
            .await;
        assert_eq!(response.status, 202, "{response:?}");
    }
    eventually(
        "every result",
        PATIENCE,
        async || client.get(&busy).await.json()["events"].clone(),
        |events| *events == total,
    )
    .await;
    // A subscriber that can be written to, read only after the signal.
    let mut writable = server.subscribe(&format!("{quiet}/stream"), &[]).await;
    // A request whose head never ends.
    let mut half_sent = TcpStream::connect(server.addr).await.unwrap();
    half_sent
        .write_all(b"POST /engines HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();

    let signalled = std::time::Instant::now();
    let status = server.terminate();
    let took = signalled.elapsed();
    assert_eq!(status.code(), Some(0));
    // The grace twice (queries, then connections), and some slack.
    assert!(took < Duration::from_secs(5), "took {took:?} to exit");
    let events = tokio::time::timeout(PATIENCE, writable.until_end())
        .await
        .unwrap();
    let end = events.last().expect("the end event");
    assert_eq!(
        (end.event.as_str(), end.json()["status"].as_str()),
        ("end", Some("stopped"))
    );
    drop(stalled);
}

/// Issue 11: a plugin file cut short in place (a half-finished copy, a full
/// disk) used to take the whole server down with SIGBUS on the next reload.
/// Now the reload lists the plugin's engine as not ready, with the reason,
/// and the query already running on the library it loaded goes on.
#[tokio::test]
async fn sighup_after_a_plugin_file_is_cut_short_keeps_the_server_and_its_queries() {
    let mut server = Serve::start("serve-reload-cut-plugin", &[], &[]);
    let mut client = server.client();
    let library = server.config().with_file_name("libscale.so");
    std::fs::copy(plugin_library("mfstream-plugin-scale"), &library).unwrap();
    std::fs::set_permissions(&library, std::fs::Permissions::from_mode(0o644)).unwrap();
    let config = server.config();
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("{text}\n{}", entry(&library))).unwrap();
    server.signal(libc::SIGHUP);
    assert!(server.next_line().starts_with("mfstream: reloaded "));
    let running = register(
        &mut client,
        P,
        r#"{"operation":"mul","arg":2,"engine":"scale"}"#,
    )
    .await;
    let mut sse = server.subscribe(&format!("{running}/stream"), &[]).await;

    // Cut the file where it lies: the loaded copy is the host's own.
    let bytes = std::fs::read(&library).unwrap();
    std::fs::write(&library, &bytes[..64 * 1024]).unwrap();
    server.signal(libc::SIGHUP);
    assert!(server.next_line().starts_with("mfstream: reloaded "));

    let engines = client.get("/engines").await.json();
    let scale = engines
        .as_array()
        .unwrap()
        .iter()
        // A library that cannot be loaded is listed under its path.
        .find(|e| e["name"].as_str().unwrap().ends_with("/libscale.so"))
        .unwrap_or_else(|| panic!("the plugin is listed: {engines}"));
    assert_eq!(scale["ready"], false, "{scale}");
    assert!(
        scale["reason"].as_str().unwrap().contains("cut short"),
        "{scale}"
    );
    // The running query still answers, on the library it loaded.
    let response = client.post(&format!("{P}/ingest"), &lines(3, 1)).await;
    assert_eq!(response.status, 202, "{response:?}");
    let events = take(&mut sse, 1).await;
    assert_eq!(values(&events), [6.0]);
    assert_eq!(client.get(&running).await.json()["status"], "running");
}

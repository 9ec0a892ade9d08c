//! `mfstream serve`: the control plane over HTTP and SSE, run as the real
//! binary on a loopback port.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use crate::client::{Client, Sse, SseEvent, subscribe};
use crate::util::*;

/// The property every test uses, unless it says otherwise.
const P: &str = "/collections/ships/items/s1/tproperties/speed";

/// Long enough for anything to happen; reached only on failure.
const PATIENCE: Duration = Duration::from_secs(20);

/// A running `mfstream serve`, killed when dropped.
pub struct Serve {
    child: Option<Child>,
    pub addr: SocketAddr,
    _dir: TempDir,
}

impl Serve {
    /// Starts the server with `args`, an engines.toml of test engines, and
    /// `env`, and waits for the line that says where it listens.
    pub fn start(name: &str, args: &[&str], env: &[(&str, String)]) -> Serve {
        let dir = TempDir::new(name);
        let config = dir.join("engines.toml");
        std::fs::write(&config, TEST_ENGINES).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mfstream"));
        cmd.current_dir(dir.path())
            .env_remove("MFSTREAM_CONFIG")
            .env_remove("MFAPI_STREAM_ENGINE")
            .env_remove("MFSTREAM_TOKEN")
            .env("RUST_LOG", "off")
            .env("TEST_ECHO_CMD", format!("sh {}", job("echo.sh")))
            .env("TEST_CRASH_CMD", format!("sh {}", job("crash_after.sh")))
            .env("TEST_HANG_CMD", format!("sh {}", job("hang.sh")))
            .args(["serve", "--addr", "127.0.0.1:0", "--config"])
            .arg(&config)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (key, value) in env {
            cmd.env(key, value);
        }
        let mut child = cmd.spawn().expect("mfstream serve starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("mfstream: listening on http://")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .parse()
            .unwrap();
        Serve {
            child: Some(child),
            addr,
            _dir: dir,
        }
    }

    pub fn client(&self) -> Client {
        Client::new(self.addr)
    }

    pub async fn subscribe(&self, path: &str, headers: &[(&str, &str)]) -> Sse {
        match subscribe(self.addr, path, headers).await {
            Ok(sse) => sse,
            Err(response) => panic!("cannot subscribe to {path}: {response:?}"),
        }
    }

    /// Sends SIGTERM and waits for the exit.
    pub fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        child.wait().unwrap()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

const TEST_ENGINES: &str = r#"
[[engine]]
name = "echo"
cmd_env = "TEST_ECHO_CMD"
stop_grace_ms = 200

[[engine]]
name = "crash"
cmd_env = "TEST_CRASH_CMD"
stop_grace_ms = 200

[[engine]]
name = "hang"
cmd_env = "TEST_HANG_CMD"
stop_grace_ms = 200
max_in_flight = 1

[[engine]]
name = "absent"
cmd_env = "TEST_ABSENT_CMD"
"#;

/// JSON lines of `n` instants, values `from..from + n`.
pub fn lines(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| format!("{{\"datetime\":\"2026-01-01T00:00:00.{i:06}Z\",\"value\":{i}}}\n"))
        .collect()
}

/// Registers `body` on `property` and returns the query's path.
pub async fn register(client: &mut Client, property: &str, body: &str) -> String {
    let response = client.post(&format!("{property}/queries"), body).await;
    assert_eq!(response.status, 201, "{response:?}");
    let link = response.json();
    assert_eq!(link["rel"], "cquery");
    assert_eq!(link["type"], "text/event-stream");
    let path = link["links"][0]["href"].as_str().unwrap().to_owned();
    assert_eq!(link["href"], format!("{path}/stream"));
    assert_eq!(response.header("location"), Some(path.as_str()));
    path
}

fn values(events: &[SseEvent]) -> Vec<f64> {
    events
        .iter()
        .filter(|e| e.event == "instant")
        .map(|e| e.json()["value"].as_f64().unwrap())
        .collect()
}

async fn take(sse: &mut Sse, n: usize) -> Vec<SseEvent> {
    let mut events = Vec::new();
    while events.len() < n {
        let event = tokio::time::timeout(PATIENCE, sse.next())
            .await
            .expect("an event in time")
            .expect("the stream goes on");
        events.push(event);
    }
    events
}

#[tokio::test]
async fn a_query_streams_ingested_instants_and_ends_when_deleted() {
    let server = Serve::start("serve-e2e", &[], &[]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"mul","arg":2}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;

    // One instant, an array, and JSON lines: all accepted, in order.
    let one = client
        .post(&format!("{P}/ingest"), r#"{"datetime":"t0","value":0}"#)
        .await;
    assert_eq!(one.status, 202, "{one:?}");
    assert_eq!(one.json()["accepted"], 1);
    assert_eq!(one.json()["queries"], 1);
    let array = r#"[{"datetime":"t1","value":1},{"datetime":"t2","value":2}]"#;
    assert_eq!(
        client.post(&format!("{P}/ingest"), array).await.json()["accepted"],
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
        serde_json::json!({"datetime":"t0","value":0,"property":"speed","operation":"mul"})
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
async fn errors_have_a_code_a_description_and_the_right_status() {
    let server = Serve::start("serve-errors", &[], &[]);
    let mut client = server.client();
    let queries = format!("{P}/queries");

    let bad_op = client.post(&queries, r#"{"operation":"nope"}"#).await;
    assert_eq!(bad_op.status, 400);
    let body = bad_op.json();
    assert_eq!(body["code"], "InvalidParameterValue");
    assert!(
        body["description"]
            .as_str()
            .unwrap()
            .starts_with("operation: ")
    );
    let bad_arg = client
        .post(&queries, r#"{"operation":"div","arg":0}"#)
        .await;
    assert_eq!(bad_arg.json()["field"], "arg");
    let not_json = client.post(&queries, "{").await;
    assert_eq!(
        (not_json.status, not_json.json()["field"].as_str()),
        (400, Some("body"))
    );

    let unknown = client
        .post(&queries, r#"{"operation":"ln","engine":"nope"}"#)
        .await;
    assert_eq!(unknown.status, 501);
    let description = unknown.json()["description"].as_str().unwrap().to_owned();
    assert!(
        description.contains("\"nope\"") && description.contains("local"),
        "{description}"
    );
    let not_ready = client
        .post(&queries, r#"{"operation":"ln","engine":"absent"}"#)
        .await;
    assert_eq!(not_ready.status, 501);
    let description = not_ready.json()["description"].as_str().unwrap().to_owned();
    assert!(
        description.contains("absent") && description.contains("TEST_ABSENT_CMD"),
        "{description}"
    );

    let text = "/collections/ships/items/s1/tproperties/name";
    let transform = client
        .post(
            &format!("{text}/queries"),
            r#"{"operation":"abs","type":"TText"}"#,
        )
        .await;
    assert_eq!(transform.status, 422, "{transform:?}");
    assert_eq!(transform.json()["code"], "UnprocessableEntity");
    // A type fixed by the first ingest counts too.
    let label = "/collections/ships/items/s1/tproperties/label";
    assert_eq!(
        client
            .post(
                &format!("{label}/ingest"),
                r#"{"datetime":"t","value":"a"}"#
            )
            .await
            .status,
        202
    );
    assert_eq!(
        client
            .post(&format!("{label}/queries"), r#"{"operation":"abs"}"#)
            .await
            .status,
        422
    );
    // And a number does not go into a text property.
    let wrong = client
        .post(&format!("{label}/ingest"), r#"{"datetime":"t","value":1}"#)
        .await;
    assert_eq!(
        (wrong.status, wrong.json()["field"].as_str()),
        (400, Some("value"))
    );

    let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let id = query.rsplit('/').next().unwrap();
    let elsewhere = format!("/collections/ships/items/s2/tproperties/speed/queries/{id}");
    assert_eq!(
        client.get(&elsewhere).await.status,
        404,
        "found under another path"
    );
    let missing = client
        .get(&format!("{queries}/0123456789abcdef0123456789abcdef"))
        .await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json()["code"], "NotFound");
    assert_eq!(client.get("/nowhere").await.status, 404);
    let bad_ingest = client
        .post(
            &format!("{P}/ingest"),
            "{\"datetime\":\"t\",\"value\":1}\nnope",
        )
        .await;
    assert!(
        bad_ingest.json()["description"]
            .as_str()
            .unwrap()
            .contains("line 2")
    );
}

#[tokio::test]
async fn a_token_protects_every_route_but_the_landing_page() {
    let server = Serve::start("serve-token", &[], &[("MFSTREAM_TOKEN", "s3cret".into())]);
    let mut anonymous = server.client();
    assert_eq!(anonymous.get("/").await.status, 200);
    for path in ["/engines", "/conformance", &format!("{P}/queries")] {
        let response = anonymous.get(path).await;
        assert_eq!(response.status, 401, "{path}");
        assert_eq!(response.header("www-authenticate"), Some("Bearer"));
    }
    let wrong = Client::new(server.addr)
        .with_token("guess")
        .get("/engines")
        .await;
    assert_eq!(wrong.status, 401);
    let mut client = Client::new(server.addr).with_token("s3cret");
    assert_eq!(client.get("/engines").await.status, 200);
    let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let refused = subscribe(server.addr, &format!("{query}/stream"), &[]).await;
    assert_eq!(refused.err().map(|r| r.status), Some(401));
    let ok = subscribe(
        server.addr,
        &format!("{query}/stream"),
        &[("Authorization", "Bearer s3cret")],
    )
    .await;
    assert!(ok.is_ok());
}

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
async fn queries_and_subscribers_are_bounded() {
    let server = Serve::start(
        "serve-bounds",
        &["--max-queries", "1", "--max-subscribers", "1"],
        &[],
    );
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let second = client
        .post(&format!("{P}/queries"), r#"{"operation":"abs"}"#)
        .await;
    assert_eq!(second.status, 503, "{second:?}");
    let _first = server.subscribe(&format!("{query}/stream"), &[]).await;
    let refused = subscribe(server.addr, &format!("{query}/stream"), &[]).await;
    assert_eq!(refused.err().map(|r| r.status), Some(429));
}

#[tokio::test]
async fn engines_conformance_and_landing_describe_the_server() {
    let server = Serve::start("serve-describe", &[], &[]);
    let mut client = server.client();
    let engines = client.get("/engines").await.json();
    let names: Vec<_> = engines
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["local", "echo", "crash", "hang", "absent"]);
    assert_eq!(engines[0]["default"], true);
    assert_eq!(engines[4]["ready"], false);
    let conformance = client.get("/conformance").await.json();
    assert!(
        conformance["conformsTo"]
            .to_string()
            .contains("conf/cquery")
    );
    let landing = client.get("/?f=json").await.json();
    assert!(landing["links"].to_string().contains("/conformance"));
    let page = client.get("/").await;
    assert!(
        page.header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
}

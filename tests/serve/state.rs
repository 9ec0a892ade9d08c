//! `mfstream serve --state DIR`: queries that survive a restart, a crash and
//! `kill -9`, with their results resumed exactly once.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::*;

/// The server on the state directory `state`.
/// [`timed`]'s instants are in 2100, past the server's default bound on
/// how far ahead of its clock a datetime may be: this takes them.
const YEAR_2100: [&str; 2] = ["--max-datetime-ahead-ms", "4000000000000"];

fn start(name: &str, state: &TempDir, args: &[&str]) -> Serve {
    let dir = state.path().to_str().unwrap().to_owned();
    let mut all = vec!["--state", dir.as_str()];
    all.extend_from_slice(&YEAR_2100);
    all.extend_from_slice(args);
    Serve::start(name, &all, &[])
}

async fn until_end(sse: &mut Sse) -> Vec<SseEvent> {
    tokio::time::timeout(PATIENCE, sse.until_end())
        .await
        .expect("the end in time")
}

fn ids(events: &[SseEvent]) -> Vec<u64> {
    events
        .iter()
        .map(|e| e.id.as_deref().unwrap().parse().unwrap())
        .collect()
}

#[test]
fn a_state_path_that_is_not_a_directory_is_refused_naming_it_with_exit_2() {
    let dir = TempDir::new("state-file");
    let file = dir.join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let output = serve_on_state_exits("state-file-serve", &file);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(file.to_str().unwrap()) && stderr.contains("not a directory"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "it never listened");
}

#[test]
fn durability_without_state_or_with_an_unknown_level_exits_2_naming_it() {
    let output = serve_exits("durability-alone", &["--durability", "power"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--state <DIR>") && stderr.contains("--durability"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "it never listened");

    let state = TempDir::new("durability-bad");
    let dir = state.path().to_str().unwrap();
    let output = serve_exits(
        "durability-bad-run",
        &["--state", dir, "--durability", "disk"],
    );
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("'disk'") && stderr.contains("--durability") && stderr.contains("power"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "it never listened");
}

#[tokio::test]
async fn a_query_registered_under_power_durability_survives_a_kill_and_a_restart() {
    let state = TempDir::new("state-power");
    let power = ["--durability", "power"];
    let server = start("state-power-1", &state, &power);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"mul","arg":2}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    client.post(&format!("{P}/ingest"), &lines(1, 2)).await;
    assert_eq!(values(&take(&mut sse, 2).await), [2.0, 4.0]);
    drop(sse);
    server.signal(libc::SIGKILL);
    drop(server);

    let server = start("state-power-2", &state, &power);
    let mut client = server.client();
    assert_eq!(client.get(&query).await.json()["status"], "running");
    let mut sse = server
        .subscribe(&format!("{query}/stream"), &[("Last-Event-ID", "2")])
        .await;
    client.post(&format!("{P}/ingest"), &lines(3, 1)).await;
    let next = take(&mut sse, 1).await;
    assert_eq!((ids(&next), values(&next)), (vec![3], vec![6.0]));
}

#[tokio::test]
async fn registrations_deletions_and_results_survive_a_restart() {
    let state = TempDir::new("state-restart");
    let mut server = start("state-restart-1", &state, &[]);
    let mut client = server.client();
    let kept = register(&mut client, P, r#"{"operation":"mul","arg":2}"#).await;
    let gone = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let other = "/collections/ships/items/s2/tproperties/course";
    let ended = register(&mut client, other, r#"{"operation":"abs"}"#).await;
    let mut sse = server.subscribe(&format!("{kept}/stream"), &[]).await;
    client.post(&format!("{P}/ingest"), &lines(1, 3)).await;
    assert_eq!(values(&take(&mut sse, 3).await), [2.0, 4.0, 6.0]);
    assert_eq!(client.delete(&gone).await.status, 204);
    drop(sse);
    assert!(server.terminate().success());

    let server = start("state-restart-2", &state, &[]);
    let mut client = server.client();
    let status = client.get(&kept).await.json();
    assert_eq!(status["status"], "running", "{status}");
    assert_eq!(status["operation"], "mul");
    assert_eq!(status["engine"], "local");
    assert_eq!(status["events"], 3);
    assert_eq!(client.get(&gone).await.status, 404, "a deletion is kept");
    assert_eq!(client.get(&ended).await.json()["status"], "running");
    let listed = client.get(&format!("{P}/queries")).await.json();
    assert_eq!(listed["numberReturned"], 1);

    // The results go on from where they were, under the next ids.
    let mut sse = server
        .subscribe(&format!("{kept}/stream"), &[("Last-Event-ID", "3")])
        .await;
    client.post(&format!("{P}/ingest"), &lines(4, 2)).await;
    let next = take(&mut sse, 2).await;
    assert_eq!(values(&next), [8.0, 10.0]);
    assert_eq!(ids(&next), [4, 5]);
    // A subscriber from the start gets the stored ring, then the new ones.
    let mut all = server.subscribe(&format!("{kept}/stream"), &[]).await;
    let every = take(&mut all, 5).await;
    assert_eq!(ids(&every), [1, 2, 3, 4, 5]);
    assert_eq!(values(&every), [2.0, 4.0, 6.0, 8.0, 10.0]);
}

#[tokio::test]
async fn an_ended_query_keeps_its_results_status_and_reason_after_a_restart() {
    let state = TempDir::new("state-ended");
    let dir = state.path().to_str().unwrap();
    let crash = [("CRASH_AFTER", "1".to_owned())];
    let mut server = Serve::start("state-ended-1", &["--state", dir], &crash);
    let mut client = server.client();
    // A job that answers one line, then exits 1: the query fails.
    let failing = register(&mut client, P, r#"{"operation":"abs","engine":"crash"}"#).await;
    let mut sse = server.subscribe(&format!("{failing}/stream"), &[]).await;
    client.post(&format!("{P}/ingest"), &lines(1, 3)).await;
    let events = until_end(&mut sse).await;
    let end = events.last().unwrap();
    assert_eq!(end.json()["status"], "failed", "{events:?}");
    assert_eq!(values(&events), [1.0]);
    let reason = end.json()["reason"].clone();
    drop(sse);
    assert!(server.terminate().success());

    let server = start("state-ended-2", &state, &[]);
    let mut client = server.client();
    let status = client.get(&failing).await.json();
    assert_eq!(status["status"], "failed", "{status}");
    assert_eq!(status["reason"], reason);
    let mut sse = server.subscribe(&format!("{failing}/stream"), &[]).await;
    let again = until_end(&mut sse).await;
    assert_eq!(again, events, "the same events and end, under the same ids");
    assert_eq!(client.delete(&failing).await.status, 204);
}

#[tokio::test]
async fn a_subscriber_resuming_after_a_restart_gets_the_events_after_its_id_or_lagged_with_the_exact_count()
 {
    let state = TempDir::new("state-lagged");
    let server = start("state-lagged-1", &state, &["--replay", "5"]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    // Five at a time: the subscriber keeps up with a ring of five.
    client.post(&format!("{P}/ingest"), &lines(1, 5)).await;
    assert_eq!(ids(&take(&mut sse, 5).await), [1, 2, 3, 4, 5]);
    client.post(&format!("{P}/ingest"), &lines(6, 5)).await;
    assert_eq!(ids(&take(&mut sse, 5).await), [6, 7, 8, 9, 10]);
    drop(sse);
    // kill -9: nothing is flushed on the way out.
    server.signal(libc::SIGKILL);
    drop(server);

    let server = start("state-lagged-2", &state, &["--replay", "5"]);
    let stream = format!("{query}/stream");
    let mut behind = server.subscribe(&stream, &[("Last-Event-ID", "2")]).await;
    let events = take(&mut behind, 6).await;
    assert_eq!(events[0].event, "lagged");
    assert_eq!(events[0].json(), serde_json::json!({"missed": 3}));
    assert_eq!(ids(&events[1..]), [6, 7, 8, 9, 10]);
    assert_eq!(values(&events[1..]), [6.0, 7.0, 8.0, 9.0, 10.0]);
    let mut close = server.subscribe(&stream, &[("Last-Event-ID", "8")]).await;
    let mut client = server.client();
    client.post(&format!("{P}/ingest"), &lines(11, 1)).await;
    let events = take(&mut close, 3).await;
    assert_eq!(ids(&events), [9, 10, 11]);
    assert_eq!(values(&events), [9.0, 10.0, 11.0]);
}

/// `n` JSON lines from instant `from` on, `step_ms` apart from 2100-01-01,
/// each with its index as its value. In the future: a live query's wall
/// clock never closes their windows, only the records do, so the results
/// are the same whenever the test runs (and however long a restart takes).
fn timed(from: usize, n: usize, step_ms: usize) -> String {
    (from..from + n)
        .map(|i| {
            let ms = i * step_ms;
            format!(
                "{{\"datetime\":\"2100-01-01T{:02}:{:02}:{:02}.{:03}Z\",\"value\":{i}}}\n",
                ms / 3_600_000,
                ms / 60_000 % 60,
                ms / 1000 % 60,
                ms % 1000
            )
        })
        .collect()
}

#[tokio::test]
async fn a_restart_mid_window_neither_loses_nor_double_counts_records() {
    let state = TempDir::new("state-window");
    let server = start("state-window-1", &state, &[]);
    let mut client = server.client();
    let tumbling = register(
        &mut client,
        P,
        r#"{"aggregation":"SUM","window":{"type":"TUMBLING","size":1,"unit":"SECONDS"}}"#,
    )
    .await;
    let count = register(
        &mut client,
        P,
        r#"{"aggregation":"SUM","window":{"type":"COUNT","size":7}}"#,
    )
    .await;
    let mut t = server.subscribe(&format!("{tumbling}/stream"), &[]).await;
    let mut c = server.subscribe(&format!("{count}/stream"), &[]).await;
    // 300 ms apart: windows of 3 or 4 records; the restart falls inside
    // the fourth second and inside the fourth COUNT window.
    client
        .post(&format!("{P}/ingest"), &timed(0, 12, 300))
        .await;
    let t_before = take(&mut t, 3).await;
    let c_before = take(&mut c, 1).await;
    drop((t, c));
    server.signal(libc::SIGKILL);
    drop(server);

    let server = start("state-window-2", &state, &[]);
    let mut client = server.client();
    let last_t = t_before.last().unwrap().id.clone().unwrap();
    let last_c = c_before.last().unwrap().id.clone().unwrap();
    let mut t = server
        .subscribe(&format!("{tumbling}/stream"), &[("Last-Event-ID", &last_t)])
        .await;
    let mut c = server
        .subscribe(&format!("{count}/stream"), &[("Last-Event-ID", &last_c)])
        .await;
    client
        .post(&format!("{P}/ingest"), &timed(12, 18, 300))
        .await;
    let t_after = take(&mut t, 5).await;
    let c_after = take(&mut c, 3).await;

    let all_t: Vec<_> = t_before.iter().chain(&t_after).collect();
    let all_c: Vec<_> = c_before.iter().chain(&c_after).collect();
    assert_eq!(
        all_t
            .iter()
            .map(|e| e.id.clone().unwrap())
            .collect::<Vec<_>>(),
        ["1", "2", "3", "4", "5", "6", "7", "8"]
    );
    // Second s holds the records i with 300 i in [1000 s, 1000 (s + 1)).
    let mut seconds: BTreeMap<usize, f64> = BTreeMap::new();
    for i in 0..30 {
        *seconds.entry(i * 300 / 1000).or_default() += i as f64;
    }
    let expected: Vec<f64> = seconds.values().take(8).copied().collect();
    let sums: Vec<f64> = all_t
        .iter()
        .map(|e| e.json()["value"].as_f64().unwrap())
        .collect();
    assert_eq!(sums, expected);
    let sums: Vec<f64> = all_c
        .iter()
        .map(|e| e.json()["value"].as_f64().unwrap())
        .collect();
    let expected: Vec<f64> = (0..4)
        .map(|w| (w * 7..w * 7 + 7).map(|i| i as f64).sum())
        .collect();
    assert_eq!(sums, expected);
    assert_eq!(all_c.last().unwrap().id.as_deref(), Some("4"));
}

/// The instants a server fed again from the log at start-up, from its
/// `log replayed` line (it logs at `info` with `RUST_LOG`), written before
/// the replays let go of their properties: ask once an ingest after the
/// restart has been answered with its events.
fn replayed(server: &Serve) -> u64 {
    let log = server.stderr();
    let line = log
        .lines()
        .find(|l| l.contains("log replayed"))
        .unwrap_or_else(|| panic!("no `log replayed` line in {log:?}"));
    let count = line
        .split("replayed=")
        .nth(1)
        .unwrap_or_else(|| panic!("{line}"));
    let digits: String = count.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap_or_else(|_| panic!("{line}"))
}

fn logging() -> [(&'static str, String); 2] {
    [
        ("RUST_LOG", "mfstream=info".into()),
        ("NO_COLOR", "1".into()),
    ]
}

/// SUM over 2 s hopping by 1 s: each record is in two windows.
const HOPPING: &str =
    r#"{"aggregation":"SUM","window":{"type":"HOPPING","size":2,"unit":"SECONDS","hop":1}}"#;

#[tokio::test]
async fn a_hopping_window_killed_mid_stream_resumes_from_its_checkpoint_with_an_uninterrupted_runs_events()
 {
    // The uninterrupted run: 30 records 300 ms apart (0 to 8.7 s) close the
    // windows ending at 1 s … 8 s.
    let whole = Serve::start("state-hop-whole", &YEAR_2100, &[]);
    let mut client = whole.client();
    let query = register(&mut client, P, HOPPING).await;
    let mut sse = whole.subscribe(&format!("{query}/stream"), &[]).await;
    client
        .post(&format!("{P}/ingest"), &timed(0, 30, 300))
        .await;
    let want = take(&mut sse, 8).await;
    drop((sse, whole));

    // The same, killed after 12 records (the windows ending at 1, 2 and 3 s
    // are out; 2 s to 4 s is open) and restarted.
    let state = TempDir::new("state-hop");
    let server = start("state-hop-1", &state, &[]);
    let mut client = server.client();
    let query = register(&mut client, P, HOPPING).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    client
        .post(&format!("{P}/ingest"), &timed(0, 12, 300))
        .await;
    let before = take(&mut sse, 3).await;
    drop(sse);
    server.signal(libc::SIGKILL);
    drop(server);

    let dir = state.path().to_str().unwrap();
    let server = Serve::start(
        "state-hop-2",
        &["--state", dir, YEAR_2100[0], YEAR_2100[1]],
        &logging(),
    );
    let mut client = server.client();
    let last = before.last().unwrap().id.clone().unwrap();
    let mut sse = server
        .subscribe(&format!("{query}/stream"), &[("Last-Event-ID", &last)])
        .await;
    client
        .post(&format!("{P}/ingest"), &timed(12, 18, 300))
        .await;
    let after = take(&mut sse, 5).await;
    // The checkpoint moved past the records no window still to come holds:
    // the next window starts at 2 s, and the first record at or past it is
    // the 8th (2.1 s). Without it, all 12 would be replayed.
    assert_eq!(replayed(&server), 12 - 7);

    // Each window once, under its id, byte for byte the uninterrupted run's.
    let got: Vec<SseEvent> = before.into_iter().chain(after).collect();
    assert_eq!(ids(&got), (1..=8).collect::<Vec<_>>());
    assert_eq!(got, want);
}

#[tokio::test]
async fn a_restart_that_outlasts_a_windows_end_and_grace_counts_its_records_in_it_not_late() {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    let state = TempDir::new("state-outlast");
    let server = start("state-outlast-1", &state, &[]);
    let mut client = server.client();
    let body = r#"{"aggregation":"COUNT","window":{"type":"TUMBLING","size":1,"unit":"SECONDS"},"grace":1}"#;
    let query = register(&mut client, P, body).await;
    // Three records of the next whole second's window: the wall clock
    // closes it at its end plus the grace, two seconds from its start,
    // well after the records are in and the server is killed.
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let start_secs = now.as_secs() + 1;
    let window_start = UNIX_EPOCH + Duration::from_secs(start_secs);
    let records: String = (1..=3)
        .map(|i| {
            let t = window_start + Duration::from_millis(100 * i);
            format!("{{\"datetime\":\"{}\",\"value\":{i}}}\n", rfc3339(t))
        })
        .collect();
    assert_eq!(
        client.post(&format!("{P}/ingest"), &records).await.status,
        202
    );
    assert_eq!(
        client.get(&query).await.json()["events"],
        0,
        "the window is open"
    );
    server.signal(libc::SIGKILL);
    drop(server);

    // Down past the window's end plus its grace (the point of the test).
    let closes = window_start + Duration::from_secs(2);
    if let Ok(left) = closes.duration_since(SystemTime::now()) {
        tokio::time::sleep(left + Duration::from_millis(50)).await;
    }

    // The log is replayed on event time alone, then the clock closes the
    // window at once: its records are in it, none late, under id 1.
    let server = start("state-outlast-2", &state, &[]);
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let event = take(&mut sse, 1).await.remove(0);
    let window = event.json();
    // An event names `late` only when some were.
    assert_eq!(
        (event.id.as_deref(), &window["count"], window.get("late")),
        (Some("1"), &3.into(), None),
        "{window}"
    );
    let mut client = server.client();
    assert_eq!(client.get(&query).await.json()["events"], 1, "once");
}

#[tokio::test]
async fn a_record_the_clock_made_late_stays_late_after_a_restart() {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    let state = TempDir::new("state-late");
    let server = start("state-late-1", &state, &[]);
    let mut client = server.client();
    let body = r#"{"aggregation":"COUNT","window":{"type":"TUMBLING","size":1,"unit":"SECONDS"}}"#;
    let query = register(&mut client, P, body).await;
    let at = |secs: u64, millis: u64| {
        let t = UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(millis);
        format!("{{\"datetime\":\"{}\",\"value\":1}}\n", rfc3339(t))
    };
    // Two records of the next whole second's window; the clock closes it.
    let next = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 1;
    let records = at(next, 100) + &at(next, 200);
    assert_eq!(
        client.post(&format!("{P}/ingest"), &records).await.status,
        202
    );
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let first = take(&mut sse, 1).await.remove(0);
    assert_eq!(
        (first.id.as_deref(), &first.json()["count"]),
        (Some("1"), &2.into())
    );
    // A record for that window after it was emitted: late.
    assert_eq!(
        client
            .post(&format!("{P}/ingest"), &at(next, 500))
            .await
            .status,
        202
    );
    assert_eq!(client.get(&query).await.json()["events"], 1);
    server.signal(libc::SIGKILL);
    drop(server);

    // After the restart the late record is replayed: it must not open its
    // window again (a second event for it, under a new id), but be counted
    // late in the next window, as it would have been without the restart.
    let server = start("state-late-2", &state, &[]);
    let mut client = server.client();
    let mut sse = server
        .subscribe(&format!("{query}/stream"), &[("Last-Event-ID", "1")])
        .await;
    let later = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 1;
    assert_eq!(
        client
            .post(&format!("{P}/ingest"), &at(later, 100))
            .await
            .status,
        202
    );
    let second = take(&mut sse, 1).await.remove(0);
    let window = second.json();
    assert_eq!(
        (second.id.as_deref(), &window["count"], &window["late"]),
        (Some("2"), &1.into(), &1.into()),
        "{window}"
    );
}

/// One ingest on a connection of its own: the status, or `None` when the
/// server went away before answering.
async fn ingest_once(addr: SocketAddr, path: &str, body: &str) -> Option<u16> {
    let mut conn = TcpStream::connect(addr).await.ok()?;
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await.ok()?;
    conn.write_all(body.as_bytes()).await.ok()?;
    let mut line = String::new();
    BufReader::new(conn).read_line(&mut line).await.ok()?;
    line.split(' ').nth(1)?.parse().ok()
}

/// What one loading client did to its property.
#[derive(Debug, Default)]
struct Load {
    /// Batches answered 202.
    acked: Vec<usize>,
    /// The batch whose answer never came (the server was killed), if any.
    unanswered: Option<usize>,
}

const CLIENTS: usize = 4;
const BATCHES: usize = 24;
const PER_BATCH: usize = 30;
/// 50 ms apart: a batch spans 1.5 s, so windows straddle batches.
const STEP_MS: usize = 50;

fn property(k: usize) -> String {
    format!("/collections/ships/items/s{k}/tproperties/speed")
}

/// Sends batches `from..to` to client `k`'s property, one at a time, each
/// acknowledgement counted on `acks`; stops at the first failure.
async fn load(
    addr: SocketAddr,
    k: usize,
    batches: std::ops::Range<usize>,
    acks: tokio::sync::mpsc::UnboundedSender<()>,
) -> Load {
    let mut done = Load::default();
    let path = format!("{}/ingest", property(k));
    for b in batches {
        match ingest_once(addr, &path, &timed(b * PER_BATCH, PER_BATCH, STEP_MS)).await {
            Some(202) => {
                done.acked.push(b);
                let _ = acks.send(());
            }
            Some(status) => panic!("batch {b} of client {k} answered {status}"),
            None => {
                done.unanswered = Some(b);
                break;
            }
        }
    }
    done
}

/// Events until the stream breaks (the server was killed).
async fn read_until_broken(mut sse: Sse) -> Vec<SseEvent> {
    let mut events = Vec::new();
    while let Ok(Some(event)) = tokio::time::timeout(PATIENCE, sse.next()).await {
        events.push(event);
    }
    events
}

async fn read_exactly(mut sse: Sse, n: usize) -> Vec<SseEvent> {
    take(&mut sse, n).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_under_load_loses_nothing_acknowledged_and_doubles_nothing() {
    let state = TempDir::new("state-kill");
    let server = start("state-kill-1", &state, &["--replay", "100000"]);
    let addr = server.addr;
    let mut client = server.client();
    let transform = r#"{"operation":"mul","arg":2}"#;
    let tumbling =
        r#"{"aggregation":"SUM","window":{"type":"TUMBLING","size":1,"unit":"SECONDS"}}"#;
    let mut queries = Vec::new();
    for k in 0..CLIENTS {
        let t = register(&mut client, &property(k), transform).await;
        let w = register(&mut client, &property(k), tumbling).await;
        let h = register(&mut client, &property(k), HOPPING).await;
        queries.push((t, w, h));
    }
    let mut readers = Vec::new();
    for (t, w, h) in &queries {
        for q in [t, w, h] {
            let sse = server.subscribe(&format!("{q}/stream"), &[]).await;
            readers.push(tokio::spawn(read_until_broken(sse)));
        }
    }

    // Load from every client at once; kill -9 once a third of it is
    // acknowledged, while the rest is in flight.
    let (acks, mut acked) = tokio::sync::mpsc::unbounded_channel();
    let loaders: Vec<_> = (0..CLIENTS)
        .map(|k| tokio::spawn(load(addr, k, 0..BATCHES, acks.clone())))
        .collect();
    for _ in 0..CLIENTS * BATCHES / 3 {
        tokio::time::timeout(PATIENCE, acked.recv())
            .await
            .expect("acknowledgements in time")
            .expect("loaders running");
    }
    server.signal(libc::SIGKILL);
    let mut loads = Vec::new();
    for loader in loaders {
        loads.push(
            tokio::time::timeout(PATIENCE, loader)
                .await
                .unwrap()
                .unwrap(),
        );
    }
    let mut before = Vec::new();
    for reader in readers {
        before.push(
            tokio::time::timeout(PATIENCE, reader)
                .await
                .unwrap()
                .unwrap(),
        );
    }
    drop(server);
    eprintln!(
        "acknowledged before the kill: {:?}; unanswered: {:?}; events received: {:?}",
        loads.iter().map(|l| l.acked.len()).collect::<Vec<_>>(),
        loads.iter().map(|l| l.unanswered).collect::<Vec<_>>(),
        before.iter().map(Vec::len).collect::<Vec<_>>()
    );
    assert!(
        loads.iter().any(|l| l.acked.len() < BATCHES),
        "the kill came mid-load: {loads:?}"
    );

    // Restart on the same directory, finish the load (not sending the
    // unanswered batch again), then one far-future record per property
    // that closes the last window.
    let server = start("state-kill-2", &state, &["--replay", "100000"]);
    let addr = server.addr;
    let mut sessions = Vec::new();
    for (i, (t, w, h)) in queries.iter().enumerate() {
        for (j, q) in [t, w, h].into_iter().enumerate() {
            let events = &before[3 * i + j];
            let last = events
                .last()
                .map_or("0".to_owned(), |e| e.id.clone().unwrap());
            let sse = server
                .subscribe(&format!("{q}/stream"), &[("Last-Event-ID", &last)])
                .await;
            sessions.push(sse);
        }
    }
    let (acks, _acked) = tokio::sync::mpsc::unbounded_channel();
    let mut finishers = Vec::new();
    for (k, done) in loads.iter().enumerate() {
        let next = done.unanswered.map_or(BATCHES, |b| b + 1);
        finishers.push(tokio::spawn(load(addr, k, next..BATCHES, acks.clone())));
    }
    let mut after_loads = Vec::new();
    for f in finishers {
        let done = tokio::time::timeout(PATIENCE, f).await.unwrap().unwrap();
        assert!(done.unanswered.is_none());
        after_loads.push(done);
    }
    let far = BATCHES * PER_BATCH * 10;
    for k in 0..CLIENTS {
        let status = ingest_once(
            addr,
            &format!("{}/ingest", property(k)),
            &timed(far, 1, STEP_MS),
        )
        .await;
        assert_eq!(status, Some(202));
    }

    // What each property was given: every acknowledged batch, and the
    // unanswered one if (and only if) the log had it, in batch order. The
    // transform's results say which: read them up to the far record's.
    let mut sessions = sessions.into_iter();
    for k in 0..CLIENTS {
        let t_sse = sessions.next().unwrap();
        let w_sse = sessions.next().unwrap();
        let h_sse = sessions.next().unwrap();
        let (t_before, w_before, h_before) =
            (&before[3 * k], &before[3 * k + 1], &before[3 * k + 2]);
        let t_after = read_until_value(t_sse, (far * 2) as f64).await;
        let all_t: Vec<&SseEvent> = t_before.iter().chain(&t_after).collect();
        let mut got: Vec<usize> = all_t
            .iter()
            .map(|e| e.json()["value"].as_f64().unwrap() as usize / 2)
            .collect();
        got.sort_unstable();
        let mut batches: Vec<usize> = loads[k]
            .acked
            .iter()
            .chain(&after_loads[k].acked)
            .copied()
            .collect();
        if let Some(b) = loads[k].unanswered
            && got.binary_search(&(b * PER_BATCH)).is_ok()
        {
            batches.push(b);
        }
        batches.sort_unstable();
        let given: Vec<usize> = batches
            .iter()
            .flat_map(|b| b * PER_BATCH..(b + 1) * PER_BATCH)
            .collect();
        let mut want = given.clone();
        want.push(far);
        assert_eq!(got, want, "client {k}: every instant given, exactly once");
        let t_ids: Vec<u64> = all_t
            .iter()
            .map(|e| e.id.as_deref().unwrap().parse().unwrap())
            .collect();
        assert_eq!(
            t_ids,
            (1..=want.len() as u64).collect::<Vec<_>>(),
            "client {k}"
        );

        // The windows: the sum of each second of what was given, each
        // exactly once, in order; the far record's window is still open.
        let mut seconds: BTreeMap<usize, f64> = BTreeMap::new();
        for &i in &given {
            *seconds.entry(i * STEP_MS / 1000).or_default() += i as f64;
        }
        each_window_once(w_before, w_sse, &seconds, &format!("client {k}, tumbling")).await;

        // The hopping windows: a record of second s is in the windows
        // ending at s + 1 and s + 2; the far record's are still open.
        let mut ends: BTreeMap<usize, f64> = BTreeMap::new();
        for &i in &given {
            let s = i * STEP_MS / 1000;
            *ends.entry(s + 1).or_default() += i as f64;
            *ends.entry(s + 2).or_default() += i as f64;
        }
        each_window_once(h_before, h_sse, &ends, &format!("client {k}, hopping")).await;
    }
}

/// The window events received before a kill, then the rest from `sse`
/// after the restart: ids 1, 2, … without a gap or a repeat, and each
/// window's sum as `expected` has it, in order.
async fn each_window_once(
    before: &[SseEvent],
    sse: Sse,
    expected: &BTreeMap<usize, f64>,
    what: &str,
) {
    assert!(before.len() <= expected.len(), "{what}: {before:?}");
    let after = read_exactly(sse, expected.len() - before.len()).await;
    let all: Vec<&SseEvent> = before.iter().chain(&after).collect();
    let ids: Vec<u64> = all
        .iter()
        .map(|e| e.id.as_deref().unwrap().parse().unwrap())
        .collect();
    assert_eq!(
        ids,
        (1..=expected.len() as u64).collect::<Vec<_>>(),
        "{what}"
    );
    let sums: Vec<f64> = all
        .iter()
        .map(|e| e.json()["value"].as_f64().unwrap())
        .collect();
    let want: Vec<f64> = expected.values().copied().collect();
    assert_eq!(sums, want, "{what}: each window exactly once");
}

/// Events up to the one whose value is `value` (included).
async fn read_until_value(mut sse: Sse, value: f64) -> Vec<SseEvent> {
    let mut events = Vec::new();
    loop {
        let event = tokio::time::timeout(PATIENCE, sse.next())
            .await
            .expect("an event in time")
            .expect("the stream goes on");
        assert_eq!(event.event, "instant", "{event:?}");
        let last = event.json()["value"].as_f64() == Some(value);
        events.push(event);
        if last {
            return events;
        }
    }
}

#[tokio::test]
async fn a_bridge_query_is_replayed_from_its_registration_and_keeps_its_ids() {
    let state = TempDir::new("state-bridge");
    let server = start("state-bridge-1", &state, &[]);
    let mut client = server.client();
    // A bridge engine's checkpoint never moves: after a restart its job is
    // fed every instant again, and the results already stored are dropped.
    let query = register(&mut client, P, r#"{"operation":"abs","engine":"echo"}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    client.post(&format!("{P}/ingest"), &lines(1, 3)).await;
    assert_eq!(ids(&take(&mut sse, 3).await), [1, 2, 3]);
    drop(sse);
    server.signal(libc::SIGKILL);
    drop(server);

    let server = start("state-bridge-2", &state, &[]);
    let mut client = server.client();
    let mut sse = server
        .subscribe(&format!("{query}/stream"), &[("Last-Event-ID", "3")])
        .await;
    client.post(&format!("{P}/ingest"), &lines(4, 2)).await;
    let next = take(&mut sse, 2).await;
    assert_eq!(ids(&next), [4, 5]);
    assert_eq!(values(&next), [4.0, 5.0]);
    assert_eq!(client.get(&query).await.json()["events"], 5);
}

#[tokio::test]
async fn a_query_whose_engine_is_gone_after_a_restart_comes_back_failed_with_the_reason() {
    let state = TempDir::new("state-gone");
    let mut server = start("state-gone-1", &state, &[]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"abs","engine":"echo"}"#).await;
    assert!(server.terminate().success());

    // The same server, but the echo engine's command variable is unset.
    let dir = state.path().to_str().unwrap();
    let server = Serve::start(
        "state-gone-2",
        &["--state", dir],
        &[("TEST_ECHO_CMD", String::new())],
    );
    let mut client = server.client();
    let status = client.get(&query).await.json();
    assert_eq!(status["status"], "failed", "{status}");
    let reason = status["reason"].as_str().unwrap();
    assert!(
        reason.contains("could not be resumed") && reason.contains("TEST_ECHO_CMD"),
        "{reason}"
    );
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let end = until_end(&mut sse).await;
    assert_eq!(end.last().unwrap().json()["status"], "failed");
}

#[tokio::test]
async fn skipped_records_move_the_checkpoint_and_the_policy_survives_a_restart() {
    let state = TempDir::new("state-on-error");
    let mut server = start("state-on-error-1", &state, &[]);
    let mut client = server.client();
    // ln skips (the default), and one asks to fail; SUM over COUNT 2 of
    // mul 1e308 skips the windows that overflow.
    let ln = register(&mut client, P, r#"{"operation":"ln"}"#).await;
    let fail = register(&mut client, P, r#"{"operation":"ln","onError":"fail"}"#).await;
    let body =
        r#"{"operation":"mul","arg":1e308,"aggregation":"SUM","window":{"type":"COUNT","size":2}}"#;
    let sums = register(&mut client, P, body).await;
    // On another property, fed only after the restart: its policy is kept.
    let course = "/collections/ships/items/s2/tproperties/course";
    let later = register(
        &mut client,
        course,
        r#"{"operation":"ln","onError":"fail"}"#,
    )
    .await;
    let mut sse = server.subscribe(&format!("{ln}/stream"), &[]).await;
    let mut windows = server.subscribe(&format!("{sums}/stream"), &[]).await;
    // ln: no result at 3 and 4. SUM: [1, 2] and [5, 6] overflow.
    let values = ["1", "1", "-1", "0", "1", "1"];
    let body: Vec<String> = values
        .iter()
        .enumerate()
        .map(|(i, v)| instant(i + 1, v))
        .collect();
    client.post(&format!("{P}/ingest"), &body.join("\n")).await;
    let first = take(&mut sse, 4).await;
    assert_eq!(first[2].json()["datetime"], at(5));
    assert_eq!(first[2].json()["skipped"], 2, "{first:?}");
    let window = take(&mut windows, 1).await.remove(0).json();
    assert_eq!(
        (&window["windowStart"], &window["skipped"]),
        (&at(3).into(), &2.into())
    );
    drop((sse, windows));
    assert!(server.terminate().success());

    let server = start("state-on-error-2", &state, &[]);
    let mut client = server.client();
    let failed = client.get(&fail).await.json();
    assert_eq!(failed["status"], "failed");
    assert!(
        failed["reason"].as_str().unwrap().contains(&at(3)),
        "{failed}"
    );
    assert_eq!(client.get(&ln).await.json()["status"], "running");
    let body = [instant(7, "1"), instant(8, "-1")];
    client.post(&format!("{P}/ingest"), &body.join("\n")).await;
    // Every result once, under consecutive ids: the checkpoints moved past
    // the skipped records, and nothing before them is computed again.
    let mut all = server.subscribe(&format!("{ln}/stream"), &[]).await;
    let every = take(&mut all, 5).await;
    let datetimes: Vec<&str> = every.iter().map(|e| e.data.as_str()).collect();
    for (event, i) in every.iter().zip([1, 2, 5, 6, 7]) {
        assert_eq!(event.json()["datetime"], at(i), "{datetimes:?}");
    }
    assert_eq!(ids(&every), [1, 2, 3, 4, 5]);
    let mut all = server.subscribe(&format!("{sums}/stream"), &[]).await;
    let every = take(&mut all, 2).await;
    assert_eq!(every[1].json()["windowStart"], at(7));
    assert_eq!(every[1].json()["skipped"], 2, "the window [5, 6]");
    assert_eq!(ids(&every), [1, 2]);
    let mut failing = server.subscribe(&format!("{later}/stream"), &[]).await;
    client
        .post(&format!("{course}/ingest"), &instant(9, "-1"))
        .await;
    let end = until_end(&mut failing).await.pop().unwrap().json();
    assert_eq!(end["status"], "failed", "{end}");
    assert!(end["reason"].as_str().unwrap().contains(&at(9)), "{end}");
}

#[tokio::test]
async fn a_querys_skipped_total_survives_a_kill_and_counts_each_record_once() {
    let state = TempDir::new("state-skipped");
    let server = start("state-skipped-1", &state, &[]);
    let mut client = server.client();
    // ln on the local engine (its checkpoint moves past the records each
    // result carries), a COUNT window over ln (likewise, by windows), and
    // ln through a bridge job (replayed from its registration).
    let queries = [
        register(&mut client, P, r#"{"operation":"ln"}"#).await,
        register(
            &mut client,
            P,
            r#"{"operation":"ln","aggregation":"SUM","window":{"type":"COUNT","size":2}}"#,
        )
        .await,
        register(&mut client, P, r#"{"operation":"ln","engine":"echo"}"#).await,
    ];
    // The last two are skipped after the last result: carried by no event
    // when the server is killed, so computed again after the restart.
    let before = ["1", "-1", "0", "2", "3", "-2", "4", "5", "0", "-7"];
    let after = ["-1", "6", "0", "7", "8"];
    let body = |from: usize, values: &[&str]| -> String {
        let lines: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(i, v)| instant(from + i, v))
            .collect();
        lines.join("\n")
    };
    // What ln has no result for, counted from the inputs alone.
    let non_positive = |values: &[&str]| {
        values
            .iter()
            .filter(|v| v.parse::<f64>().unwrap() <= 0.0)
            .count()
    };
    let mut streams = Vec::new();
    for query in &queries {
        streams.push(server.subscribe(&format!("{query}/stream"), &[]).await);
    }
    client.post(&format!("{P}/ingest"), &body(1, &before)).await;
    // ln gives a result per positive value, the COUNT window one per two.
    let positive = before.len() - non_positive(&before);
    let counts = [positive, positive / 2, positive];
    for (sse, n) in streams.iter_mut().zip(counts) {
        take(sse, n).await;
    }
    drop(streams);
    server.signal(libc::SIGKILL);
    drop(server);

    let server = start("state-skipped-2", &state, &[]);
    let mut client = server.client();
    let mut streams = Vec::new();
    for (query, n) in queries.iter().zip(counts) {
        let last = n.to_string();
        streams.push(
            server
                .subscribe(&format!("{query}/stream"), &[("Last-Event-ID", &last)])
                .await,
        );
    }
    client
        .post(&format!("{P}/ingest"), &body(before.len() + 1, &after))
        .await;
    let more = after.len() - non_positive(&after);
    let windows = (positive + more) / 2 - positive / 2;
    for ((query, sse), n) in queries.iter().zip(&mut streams).zip([more, windows, more]) {
        let events = take(sse, n).await;
        let last = events.last().unwrap().json();
        let end = if query == &queries[1] {
            &last["windowEnd"]
        } else {
            &last["datetime"]
        };
        assert_eq!(end, &at(before.len() + after.len()), "{query}: {events:?}");
        let status = client.get(query).await.json();
        let skipped = non_positive(&before) + non_positive(&after);
        assert_eq!(status["skipped"], skipped, "{query}: {status}");
    }
}

#[tokio::test]
async fn a_journal_segment_deleted_by_hand_is_refused_at_start_naming_it_and_the_fix() {
    let state = TempDir::new("state-segment-gone");
    // A bridge query never moves its checkpoint: every instant stays in
    // the journal. Each start begins a segment: three runs, three segments
    // with instants in them.
    let mut query = String::new();
    for run in 0..3 {
        let mut server = start(&format!("state-segment-gone-{run}"), &state, &[]);
        let mut client = server.client();
        if run == 0 {
            query = register(&mut client, P, r#"{"operation":"abs","engine":"echo"}"#).await;
        }
        let response = client
            .post(&format!("{P}/ingest"), &lines(run + 1, 1))
            .await;
        assert_eq!(response.status, 202, "{response:?}");
        assert!(server.terminate().success());
    }
    let journal = state.path().join("journal");
    let middle = journal.join(format!("{:020}.seg", 2));
    assert!(
        std::fs::metadata(&middle).unwrap().len() > 24,
        "the second run's instant is in the second segment"
    );
    std::fs::remove_file(&middle).unwrap();
    let output = serve_on_state_exits("state-segment-gone-refused", state.path());
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let manifest = journal.join("MANIFEST");
    assert!(
        stderr.contains(middle.to_str().unwrap())
            && stderr.contains("missing")
            && stderr.contains(manifest.to_str().unwrap()),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "it never listened");
    // `state check` says the same, with status 1 (damage found).
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_mfstream"))
        .args(["state", "check"])
        .arg(state.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        said.contains(middle.to_str().unwrap()) && said.contains("to accept the loss"),
        "{said}"
    );
    // Removing the manifest accepts the loss: the server starts, with the
    // query.
    std::fs::remove_file(&manifest).unwrap();
    let server = start("state-segment-gone-accepted", &state, &[]);
    let mut client = server.client();
    assert_eq!(client.get(&query).await.json()["status"], "running");
}

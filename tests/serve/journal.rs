//! `mfstream serve --state DIR` and what a power cut, damage on disk or an
//! operator's `rm -rf` leave of its journal; `mfstream state check|repair`.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;

fn start(name: &str, state: &Path, env: &[(&str, String)]) -> Serve {
    let dir = state.to_str().unwrap().to_owned();
    Serve::start(name, &["--state", dir.as_str()], env)
}

fn warnings() -> [(&'static str, String); 2] {
    [("RUST_LOG", "warn".into()), ("NO_COLOR", "1".into())]
}

/// The journal's segments, oldest first.
fn segments(state: &Path) -> Vec<PathBuf> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(state.join("journal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    names.sort();
    names
}

/// A segment's records as the format says (`len: u32, crc: u32, payload`
/// after a 24-byte header): each one's offset and payload.
fn records(bytes: &[u8]) -> Vec<(usize, &[u8])> {
    let mut out = Vec::new();
    let mut at = 24;
    while at + 8 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        if len == 0 || at + 8 + len > bytes.len() {
            break;
        }
        out.push((at, &bytes[at + 8..at + 8 + len]));
        at += 8 + len;
    }
    out
}

/// The counts of the instants records of every segment.
fn instants_records(state: &Path) -> Vec<u32> {
    let mut counts = Vec::new();
    for segment in segments(state) {
        let bytes = std::fs::read(segment).unwrap();
        for (_, payload) in records(&bytes) {
            if payload[0] == 1 {
                counts.push(u32::from_le_bytes(payload[9..13].try_into().unwrap()));
            }
        }
    }
    counts
}

fn mfstream(args: &[&str], state: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mfstream"))
        .args(args)
        .arg(state)
        .output()
        .unwrap()
}

#[tokio::test]
async fn sigkill_then_zeros_and_a_torn_record_at_the_end_restart_with_every_acknowledged_ingest_once()
 {
    let dir = TempDir::new("journal-e2e-torn-dir");
    let state = dir.join("state");
    let server = start("journal-e2e-torn-1", &state, &[]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"mul","arg":2}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    for i in 1..=3 {
        let response = client.post(&format!("{P}/ingest"), &lines(i, 1)).await;
        assert_eq!(response.status, 202, "{response:?}");
    }
    assert_eq!(values(&take(&mut sse, 3).await), [2.0, 4.0, 6.0]);
    drop(sse);
    server.signal(libc::SIGKILL);
    drop(server);

    // What a power cut leaves: a record cut short (the first bytes of a
    // real one, as a write half on the disk), then zeros.
    let newest = segments(&state).pop().unwrap();
    let mut bytes = std::fs::read(&newest).unwrap();
    let before = bytes.len();
    let (_, last) = *records(&bytes).last().unwrap();
    let torn: Vec<u8> = [
        &(last.len() as u32).to_le_bytes()[..],
        &[0xAB; 4],
        &last[..8],
    ]
    .concat();
    bytes.extend(&torn);
    bytes.extend([0u8; 4096]);
    std::fs::write(&newest, &bytes).unwrap();

    let server = start("journal-e2e-torn-2", &state, &warnings());
    let log = server.stderr();
    let name = newest.file_name().unwrap().to_str().unwrap();
    assert!(
        log.contains(name)
            && log.contains(&format!("at byte {before}"))
            && log.contains(&format!("{} bytes cut off", torn.len() + 4096)),
        "{log}"
    );
    assert_eq!(std::fs::metadata(&newest).unwrap().len(), before as u64);
    let mut client = server.client();
    assert_eq!(client.get(&query).await.json()["status"], "running");
    let mut sse = server
        .subscribe(&format!("{query}/stream"), &[("Last-Event-ID", "0")])
        .await;
    let response = client.post(&format!("{P}/ingest"), &lines(4, 1)).await;
    assert_eq!(response.status, 202, "{response:?}");
    // Every acknowledged ingest once, under its id, and the next after.
    let events = take(&mut sse, 4).await;
    let ids: Vec<&str> = events.iter().map(|e| e.id.as_deref().unwrap()).collect();
    assert_eq!(ids, ["1", "2", "3", "4"]);
    assert_eq!(values(&events), [2.0, 4.0, 6.0, 8.0]);
}

#[tokio::test]
async fn an_ingest_of_more_than_a_chunk_is_one_journal_record() {
    let dir = TempDir::new("journal-e2e-one-record-dir");
    let state = dir.join("state");
    let server = start("journal-e2e-one-record", &state, &[]);
    let mut client = server.client();
    register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let response = client.post(&format!("{P}/ingest"), &lines(1, 1000)).await;
    assert_eq!(response.status, 202, "{response:?}");
    server.signal(libc::SIGKILL);
    drop(server);
    // One record of 1,000: after a crash all of it is there, or none.
    assert_eq!(instants_records(&state), [1000]);
}

#[tokio::test]
async fn a_state_directory_deleted_under_the_server_fails_the_next_ingest_with_503() {
    let dir = TempDir::new("journal-e2e-rm-dir");
    let state = dir.join("state");
    let server = start("journal-e2e-rm", &state, &warnings());
    let mut client = server.client();
    register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let response = client.post(&format!("{P}/ingest"), &lines(1, 1)).await;
    assert_eq!(response.status, 202, "{response:?}");
    std::fs::remove_dir_all(&state).unwrap();
    for i in 2..4 {
        let response = client.post(&format!("{P}/ingest"), &lines(i, 1)).await;
        assert_eq!(response.status, 503, "{response:?}");
        assert!(response.body.contains("deleted"), "{response:?}");
    }
    let log = server.stderr();
    assert!(log.contains("ERROR") && log.contains("deleted"), "{log}");
}

#[tokio::test]
async fn damage_with_records_after_it_is_refused_checked_and_repaired() {
    let dir = TempDir::new("journal-e2e-repair-dir");
    let state = dir.join("state");
    let mut server = start("journal-e2e-repair-1", &state, &[]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"mul","arg":2}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    for i in 1..=3 {
        let response = client.post(&format!("{P}/ingest"), &lines(i, 1)).await;
        assert_eq!(response.status, 202, "{response:?}");
    }
    take(&mut sse, 3).await;
    drop(sse);
    assert!(server.terminate().success());

    let output = mfstream(&["state", "check"], &state);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("clean"));

    // A flipped bit in the checksum of the first record: records that
    // check follow, so it is damage, not an unfinished write.
    let segment = segments(&state).into_iter().next().unwrap();
    let mut bytes = std::fs::read(&segment).unwrap();
    let total = records(&bytes).len();
    bytes[24 + 4] ^= 0x10;
    std::fs::write(&segment, &bytes).unwrap();

    let output = serve_on_state_exits("journal-damaged-serve", &state);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let name = segment.file_name().unwrap().to_str().unwrap();
    assert!(
        stderr.contains(name)
            && stderr.contains("at byte 24")
            && stderr.contains("state repair")
            && !stderr.contains("corrupt"),
        "{stderr}"
    );

    let output = mfstream(&["state", "check"], &state);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("damaged at byte 24") && stdout.contains("refuses"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read(&segment).unwrap(),
        bytes,
        "check changes nothing"
    );

    let output = mfstream(&["state", "repair"], &state);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(&format!("{} records kept", total - 1)) && stdout.contains("moved aside"),
        "{stdout}"
    );
    let aside = segment.with_extension("seg.24.damaged");
    let first_len = records(&bytes)[1].0 - 24;
    assert_eq!(std::fs::read(&aside).unwrap(), bytes[24..24 + first_len]);
    let output = mfstream(&["state", "check"], &state);
    assert_eq!(output.status.code(), Some(0), "{output:?}");

    let server = start("journal-e2e-repair-2", &state, &[]);
    let mut client = server.client();
    assert_eq!(client.get(&query).await.json()["status"], "running");
}

/// What runs the server so that a `chmod` of its state directory stops it.
/// Root passes `chmod 000` (`CAP_DAC_OVERRIDE`), and tests and CI run as
/// root: there `setpriv` (util-linux) starts the server with every
/// capability dropped, still uid 0 and so still the owner of the
/// directory. Anyone else needs nothing.
fn unprivileged() -> Vec<&'static str> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Vec::new();
    }
    let found = Command::new("setpriv").arg("--version").output().ok();
    require(
        found.filter(|o| o.status.success()),
        "setpriv, to run the server as root without its capabilities",
        "install util-linux",
    );
    vec!["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--"]
}

fn start_unprivileged(name: &str, state: &Path, env: &[(&str, String)]) -> Serve {
    let dir = state.to_str().unwrap().to_owned();
    Serve::start_through(name, &unprivileged(), &["--state", dir.as_str()], env)
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A 503 that says the state directory cannot be reached, and that
/// nothing of the ingest was taken.
fn assert_refused_unreachable(response: &crate::client::Response) {
    assert_eq!(response.status, 503, "{response:?}");
    assert_eq!(response.json()["accepted"], 0, "{response:?}");
    assert!(
        response.body.contains("cannot be reached") && !response.body.contains("is gone"),
        "{response:?}"
    );
}

/// SUM over one hour: its checkpoint stays at the registration until the
/// hour closes, so a restart replays every instant logged for it.
const HOUR: &str = r#"{"aggregation":"SUM","window":{"type":"TUMBLING","size":1,"unit":"HOURS"}}"#;

#[tokio::test]
async fn an_ingest_refused_while_the_state_directory_is_unwritable_never_comes_back_after_a_restart()
 {
    let dir = TempDir::new("journal-e2e-chmod-dir");
    let state = dir.join("state");
    let server = start_unprivileged("journal-e2e-chmod-1", &state, &[]);
    let mut client = server.client();
    let query = register(&mut client, P, HOUR).await;
    let ingest = format!("{P}/ingest");
    let response = client.post(&ingest, &lines(0, 1000)).await;
    assert_eq!(response.status, 202, "{response:?}");

    chmod(&state, 0o000);
    // The client sends its next 1,000 and retries each refusal.
    for _ in 0..3 {
        assert_refused_unreachable(&client.post(&ingest, &lines(1000, 1000)).await);
    }
    chmod(&state, 0o700);
    let response = client.post(&ingest, &lines(1000, 1000)).await;
    assert_eq!(response.status, 202, "{response:?}");
    let response = client.post(&ingest, &lines(2000, 500)).await;
    assert_eq!(response.status, 202, "{response:?}");
    server.signal(libc::SIGKILL);
    drop(server);

    let server = start_unprivileged("journal-e2e-chmod-2", &state, &[]);
    let mut client = server.client();
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    // The next hour closes the first: it holds each instant answered 202
    // once (0 to 2,499), and none of the three refused ingests.
    let next = r#"{"datetime":"2026-01-01T01:00:00Z","value":0}"#;
    let response = client.post(&ingest, next).await;
    assert_eq!(response.status, 202, "{response:?}");
    let window = take(&mut sse, 1).await[0].json();
    assert_eq!(window["count"], 2500, "{window}");
    assert_eq!(
        window["value"].as_f64(),
        Some((0..2500).sum::<usize>() as f64),
        "{window}"
    );
}

#[tokio::test]
async fn once_the_state_directory_is_writable_again_the_server_takes_writes_without_a_restart() {
    let dir = TempDir::new("journal-e2e-chmod-resume-dir");
    let state = dir.join("state");
    let server = start_unprivileged("journal-e2e-chmod-resume", &state, &warnings());
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"mul","arg":2}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let ingest = format!("{P}/ingest");
    let response = client.post(&ingest, &lines(1, 1)).await;
    assert_eq!(response.status, 202, "{response:?}");
    assert_eq!(values(&take(&mut sse, 1).await), [2.0]);

    chmod(&state, 0o000);
    for _ in 0..3 {
        assert_refused_unreachable(&client.post(&ingest, &lines(2, 1)).await);
    }
    let response = client
        .post(&format!("{P}/queries"), r#"{"operation":"abs"}"#)
        .await;
    assert_eq!(response.status, 503, "{response:?}");
    assert!(response.body.contains("cannot be reached"), "{response:?}");
    chmod(&state, 0o700);

    // The same directory: taken again, and delivered.
    let response = client.post(&ingest, &lines(3, 1)).await;
    assert_eq!(response.status, 202, "{response:?}");
    let events = take(&mut sse, 1).await;
    assert_eq!(events[0].id.as_deref(), Some("2"));
    assert_eq!(values(&events), [6.0]);
    register(&mut client, P, r#"{"operation":"abs"}"#).await;

    let log = server.stderr();
    // Once when it starts, not once per refusal.
    assert_eq!(log.matches("permissions changed").count(), 1, "{log}");
    assert!(
        log.contains("cannot be reached") && !log.contains("ingest gave up"),
        "{log}"
    );
    assert!(log.contains("writes resume"), "{log}");
    assert!(
        !log.contains("is gone") && !log.contains("deleted"),
        "{log}"
    );
}

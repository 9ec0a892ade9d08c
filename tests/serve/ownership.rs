//! `mfstream serve --state DIR`: one server per state directory, and a
//! directory whose catalog is gone while its journal holds records is not
//! started on.

use super::*;
use crate::client::{Sse, SseEvent};

/// The server on the state directory `state`.
fn start(name: &str, state: &TempDir) -> Serve {
    let dir = state.path().to_str().unwrap().to_owned();
    Serve::start(name, &["--state", dir.as_str()], &[])
}

#[tokio::test]
async fn a_second_server_on_a_state_directory_exits_2_naming_it_and_the_holder_and_the_first_serves_on()
 {
    let state = TempDir::new("owned");
    let server = start("owned-1", &state);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;

    let output = serve_on_state_exits("owned-2", state.path());
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(state.path().to_str().unwrap())
            && stderr.contains("in use by another process")
            && stderr.contains(&format!("pid {}", server.pid())),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "it never listened");

    // The first goes on as if nothing happened.
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let response = client
        .post(&format!("{P}/ingest"), &instant(1, "-2.5"))
        .await;
    assert_eq!(response.status, 202, "{response:?}");
    assert_eq!(values(&take(&mut sse, 1).await), [2.5]);
    assert_eq!(client.get(&query).await.json()["status"], "running");
}

#[tokio::test]
async fn a_second_server_is_refused_even_after_the_lock_file_was_deleted_or_replaced() {
    let state = TempDir::new("lock-deleted");
    let server = start("lock-deleted-1", &state);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;

    // The lock is the directory's, not the name's: a lock file deleted (or
    // swapped for a new one) under the first server lets no second in.
    for replace in [false, true] {
        if replace {
            std::fs::write(state.join("lock"), "1\n").unwrap();
        } else {
            std::fs::remove_file(state.join("lock")).unwrap();
        }
        let output = serve_on_state_exits("lock-deleted-2", state.path());
        assert_eq!(output.status.code(), Some(2), "{output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("in use by another process"), "{stderr}");
        assert!(output.stdout.is_empty(), "it never listened");
    }

    let response = client.post(&format!("{P}/ingest"), &instant(1, "-2")).await;
    assert_eq!(response.status, 202, "{response:?}");
    assert_eq!(client.get(&query).await.json()["status"], "running");
}

#[tokio::test]
async fn a_state_directory_whose_catalog_is_gone_but_whose_journal_holds_records_is_refused_naming_the_file()
 {
    let state = TempDir::new("catalog-gone");
    let mut server = start("catalog-gone-1", &state);
    let mut client = server.client();
    register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let response = client.post(&format!("{P}/ingest"), &lines(1, 3)).await;
    assert_eq!(response.status, 202, "{response:?}");
    assert!(server.terminate().success());
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(state.join(&format!("state.sqlite3{suffix}")));
    }

    let output = serve_on_state_exits("catalog-gone-2", state.path());
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let catalog = state.join("state.sqlite3");
    assert!(
        stderr.contains(catalog.to_str().unwrap())
            && stderr.contains("missing or empty")
            && stderr.contains("journal"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "it never listened");
    assert!(!catalog.exists(), "no empty catalog was made in its place");
}

#[tokio::test]
async fn a_state_directory_whose_journal_is_gone_but_whose_catalog_holds_queries_is_refused_naming_it()
 {
    let state = TempDir::new("journal-gone");
    let mut server = start("journal-gone-1", &state);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let response = client.post(&format!("{P}/ingest"), &lines(1, 3)).await;
    assert_eq!(response.status, 202, "{response:?}");
    assert!(server.terminate().success());
    let journal = state.join("journal");

    // Emptied of its segments, or gone altogether: refused either way, and
    // the next try says the same (nothing was made in its place).
    for emptied in [true, false, false] {
        if emptied {
            for entry in std::fs::read_dir(&journal).unwrap() {
                std::fs::remove_file(entry.unwrap().path()).unwrap();
            }
        } else if journal.exists() {
            std::fs::remove_dir(&journal).unwrap();
        }
        let output = serve_on_state_exits("journal-gone-2", state.path());
        assert_eq!(output.status.code(), Some(2), "{output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(journal.to_str().unwrap())
                && stderr.contains("missing or empty")
                && stderr.contains("1 query"),
            "{stderr}"
        );
        assert!(output.stdout.is_empty(), "it never listened");
    }
    assert!(!journal.exists(), "no empty journal was made in its place");

    // Once its queries are gone too (a new directory), it starts.
    for entry in std::fs::read_dir(state.path()).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    let server = start("journal-gone-3", &state);
    assert_eq!(server.client().get(&query).await.status, 404);
}

#[tokio::test]
async fn a_catalog_file_deleted_under_the_server_acknowledges_no_more_registrations_or_deletions() {
    for file in ["state.sqlite3-wal", "state.sqlite3"] {
        let state = TempDir::new("catalog-deleted");
        let server = start("catalog-deleted-1", &state);
        let mut client = server.client();
        let kept = register(&mut client, P, r#"{"operation":"abs"}"#).await;
        let lost = state.join(file);
        std::fs::remove_file(&lost).unwrap();

        // SQLite would write on to the deleted file: nothing is answered
        // as recorded any more.
        let registration = client
            .post(&format!("{P}/queries"), r#"{"operation":"ceil"}"#)
            .await;
        assert_eq!(registration.status, 503, "{file}: {registration:?}");
        let problem = registration.json();
        let description = problem["description"].as_str().unwrap();
        assert!(
            description.contains(lost.to_str().unwrap())
                && description.contains("deleted or replaced"),
            "{file}: {problem}"
        );
        let deletion = client.delete(&kept).await;
        assert_eq!(deletion.status, 503, "{file}: {deletion:?}");
        assert_eq!(
            client.get(&kept).await.json()["status"],
            "running",
            "{file}"
        );
        let listed = client.get(&format!("{P}/queries")).await.json();
        assert_eq!(listed["numberReturned"], 1, "{file}: {listed}");
        server.signal(libc::SIGKILL);
        drop(server);

        // A lost log: what was committed to it was copied into the
        // database first, so the registration answered 201 is kept.
        if file.ends_with("-wal") {
            let server = start("catalog-deleted-2", &state);
            let mut client = server.client();
            assert_eq!(client.get(&kept).await.json()["status"], "running");
            let listed = client.get(&format!("{P}/queries")).await.json();
            assert_eq!(listed["numberReturned"], 1, "{listed}");
        }
    }
}

#[test]
fn a_store_file_planted_as_a_symbolic_link_is_refused_and_the_file_it_names_is_untouched() {
    use std::os::unix::fs::PermissionsExt;
    for name in ["lock", "state.sqlite3", "state.sqlite3-wal"] {
        // A directory others can write to (`--state /tmp/…`): one of them
        // plants a link under a store file's name.
        let state = TempDir::new("planted");
        let victim = TempDir::new("planted-victim");
        let precious = victim.join("precious");
        std::fs::write(&precious, "precious\n").unwrap();
        std::fs::set_permissions(&precious, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::os::unix::fs::symlink(&precious, state.join(name)).unwrap();

        let output = serve_on_state_exits("planted-2", state.path());
        assert_eq!(output.status.code(), Some(2), "{name}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(state.join(name).to_str().unwrap())
                && stderr.contains("is a symbolic link"),
            "{name}: {stderr}"
        );
        assert!(output.stdout.is_empty(), "{name}: it never listened");
        assert_eq!(std::fs::read_to_string(&precious).unwrap(), "precious\n");
        let mode = std::fs::metadata(&precious).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode, 0o644,
            "{name}: the file the link names keeps its mode"
        );
    }
}

#[test]
fn a_new_state_directory_is_made_for_its_owner_alone() {
    use std::os::unix::fs::PermissionsExt;
    let parent = TempDir::new("fresh-state");
    let state = parent.join("state");
    let dir = state.to_str().unwrap().to_owned();
    let mut server = Serve::start("fresh-state-1", &["--state", dir.as_str()], &[]);
    assert!(server.terminate().success());
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(&state.join("state.sqlite3")), 0o600);
    assert_eq!(mode(&state.join("lock")), 0o600);
}

#[tokio::test]
async fn an_acknowledged_delete_never_comes_back_after_a_kill() {
    let state = TempDir::new("delete-kill");
    let server = start("delete-kill-1", &state);
    let mut client = server.client();
    let gone = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let kept = register(&mut client, P, r#"{"operation":"ceil"}"#).await;
    assert_eq!(client.delete(&gone).await.status, 204);
    server.signal(libc::SIGKILL);
    drop(server);

    let server = start("delete-kill-2", &state);
    let mut client = server.client();
    assert_eq!(client.get(&gone).await.status, 404, "a 204 is for good");
    assert_eq!(client.get(&kept).await.json()["status"], "running");
    let listed = client.get(&format!("{P}/queries")).await.json();
    assert_eq!(listed["numberReturned"], 1, "{listed}");
}

/// Holds the catalog's write lock, as another writer would: the server's
/// writes to it fail (after SQLite's wait for a lock) until it is dropped.
fn hold_catalog(state: &TempDir) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(state.join("state.sqlite3")).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    conn
}

#[tokio::test]
async fn a_delete_the_store_cannot_record_is_503_and_the_query_runs_on_until_a_retry() {
    let state = TempDir::new("delete-refused");
    let mut server = start("delete-refused-1", &state);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;

    let held = hold_catalog(&state);
    let response = client.delete(&query).await;
    assert_eq!(response.status, 503, "{response:?}");
    let problem = response.json();
    let description = problem["description"].as_str().unwrap();
    assert!(
        description.contains("still registered and running") && description.contains("retry"),
        "{problem}"
    );
    assert_eq!(response.header("retry-after"), Some("1"));
    // Still registered, and still running: its results keep coming.
    assert_eq!(client.get(&query).await.json()["status"], "running");
    let ingest = client.post(&format!("{P}/ingest"), &instant(1, "-4")).await;
    assert_eq!(ingest.status, 202, "{ingest:?}");
    assert_eq!(values(&take(&mut sse, 1).await), [4.0]);

    drop(held);
    assert_eq!(client.delete(&query).await.status, 204);
    let end = until_end(&mut sse).await;
    assert_eq!(end.last().unwrap().json()["status"], "stopped", "{end:?}");
    assert_eq!(client.get(&query).await.status, 404);
    assert!(server.terminate().success());

    let server = start("delete-refused-2", &state);
    let mut client = server.client();
    assert_eq!(
        client.get(&query).await.status,
        404,
        "the retry is for good"
    );
}

async fn until_end(sse: &mut Sse) -> Vec<SseEvent> {
    tokio::time::timeout(PATIENCE, sse.until_end())
        .await
        .expect("the end in time")
}

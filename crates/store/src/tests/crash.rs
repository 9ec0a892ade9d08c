//! `kill -9` of a process writing to a store loses nothing it acknowledged.
//!
//! The test re-runs itself (this test binary, this test alone) as a child
//! that ingests instants and stores events from several tasks at once,
//! printing a line for each acknowledgement; the parent kills it with SIGKILL after two thousand
//! acknowledgements (while others are in flight), then reopens the store
//! and looks for every acknowledged record.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;

use super::{TempDir, event, query, register, speed};
use crate::{Store, StoreOptions};
use mfstream_model::{Instant, Value};

/// Where the child writes; unset outside the crash test.
const DIR_VAR: &str = "MFSTREAM_STORE_CRASH_DIR";

/// The acknowledgements the parent waits for before it kills the child:
/// enough instants (about 200,000, 8 MiB) that the journal has started
/// new segments and looked at the old ones.
const KILL_AFTER: usize = 2000;

/// Segments of 1 MiB: the child starts several and compacts the old ones
/// while it is killed.
fn options() -> StoreOptions {
    StoreOptions {
        segment_bytes: 1024 * 1024,
        ..StoreOptions::default()
    }
}

/// Ingesting tasks in the child.
const TASKS: u64 = 8;

/// Each task's bound on batches, so that an orphaned child still ends.
const MAX_BATCHES: u64 = 50_000;

fn datetime(task: u64, batch: u64, i: u64) -> String {
    format!("{task}-{batch}-{i}")
}

fn say(line: String) {
    let mut out = std::io::stdout().lock();
    // The parent reads the acknowledgements; if it is gone, so is the test.
    let _ = out.write_all(line.as_bytes());
    let _ = out.flush();
}

/// The child: the crash test re-run with `DIR_VAR` set, which writes to the
/// store at `dir` until it is killed. Not a test of its own, so nothing
/// passes without checking.
fn write_until_killed(dir: std::ffi::OsString) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("the child builds a runtime");
    runtime.block_on(async move {
        let store = Arc::new(Store::open(&dir, options()).expect("the store opens"));
        register(&store, query("q")).await.expect("q registers");
        let mut tasks = tokio::task::JoinSet::new();
        for task in 0..TASKS {
            let store = store.clone();
            tasks.spawn(async move {
                for batch in 0..MAX_BATCHES {
                    let n = batch % 200 + 1;
                    let instants: Vec<_> = (0..n)
                        .map(|i| {
                            Instant::number(datetime(task, batch, i), (batch * 100 + i) as f64)
                        })
                        .collect();
                    let seqs = store
                        .append_instants(&speed(), &instants)
                        .await
                        .expect("ingest");
                    say(format!("ACK {} {} {task} {batch}\n", seqs.start, seqs.end));
                }
            });
        }
        tasks.spawn(async move {
            for id in 1..=MAX_BATCHES {
                store
                    .append_events("q", vec![event(id)], None)
                    .await
                    .expect("events");
                say(format!("EVENT {id}\n"));
            }
        });
        tasks.join_all().await;
    });
}

#[test]
fn every_acknowledged_record_survives_sigkill_of_the_writing_process() {
    if let Some(dir) = std::env::var_os(DIR_VAR) {
        return write_until_killed(dir);
    }
    let dir = TempDir::new("crash");
    let name = format!(
        "{}::every_acknowledged_record_survives_sigkill_of_the_writing_process",
        module_path!().trim_start_matches("mfstream_store::")
    );
    let mut child = Command::new(std::env::current_exe().expect("the test binary's path"))
        .args([name.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(DIR_VAR, dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the child starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut acked = Vec::new();
    let mut last_event = 0;
    let mut killed = false;
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["ACK", start, end, task, batch] => {
                let n = |s: &str| s.parse::<u64>().expect("a number");
                acked.push((n(start), n(end), n(task), n(batch)));
            }
            ["EVENT", id] => last_event = id.parse::<u64>().expect("an event id"),
            _ => {}
        }
        if !killed && acked.len() >= KILL_AFTER {
            // Child::kill sends SIGKILL: no destructor, no flush, no close.
            child.kill().expect("SIGKILL");
            killed = true;
        }
    }
    let status = child.wait().expect("the child is reaped");
    let mut stderr = String::new();
    if let Some(mut err) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut err, &mut stderr);
    }
    assert!(
        killed,
        "the child ended before {KILL_AFTER} acks: {status}\n{stderr}"
    );
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{stderr}");
    }

    let store = Store::open(dir.path(), options()).expect("the store reopens");
    let mut logged = HashMap::new();
    let mut after = 0;
    loop {
        let page = store
            .instants(&speed(), after, 10_000)
            .expect("the log reads");
        let Some(last) = page.last() else { break };
        after = last.seq;
        for entry in page {
            logged.insert(entry.seq, entry.instant);
        }
    }
    // The log has no holes: every sequence number up to the last is there.
    assert_eq!(logged.len() as u64, after, "holes in the ingest log");
    for &(start, end, task, batch) in &acked {
        for (i, seq) in (start..end).enumerate() {
            let instant = logged
                .get(&seq)
                .unwrap_or_else(|| panic!("acknowledged instant {seq} is lost"));
            assert_eq!(instant.datetime, datetime(task, batch, i as u64));
            assert_eq!(
                instant.value,
                Value::Number((batch * 100 + i as u64) as f64)
            );
        }
    }
    let q = store.queries().expect("the queries read").remove(0);
    assert!(
        q.last_event_id >= last_event,
        "acknowledged events are lost"
    );
    assert_eq!(q.ring, (1..=q.last_event_id).map(event).collect::<Vec<_>>());
    store.close();
}

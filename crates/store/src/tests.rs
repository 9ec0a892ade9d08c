use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::SystemTime;

use super::*;

mod crash;
mod errors;
mod journal;
mod manifest;
mod ownership;
mod power;
mod unreachable;

/// A fresh directory under the system's temporary one, removed on drop.
pub(super) struct TempDir(PathBuf);

impl TempDir {
    pub(super) fn new(name: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("mfstream-store-{}-{n}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        TempDir(dir)
    }

    pub(super) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(super) fn speed() -> PropertyPath {
    PropertyPath {
        collection: "ships".into(),
        feature: "a b/c".into(),
        property: "speed".into(),
    }
}

pub(super) fn query(id: &str) -> NewQuery {
    NewQuery {
        id: id.into(),
        property: speed(),
        spec: r#"{"operation":"mul","arg":1.852}"#.into(),
        engine: "local".into(),
        created: SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_123),
    }
}

/// Registers `query` with its property's lock held, as the server does.
pub(super) async fn register(store: &Store, query: NewQuery) -> Result<Checkpoint, StoreError> {
    let lock = PropertyLock::new(query.property.clone(), ());
    let held = lock.lock().await;
    store.register(&held, query).await
}

/// A second property of the same feature as [`speed`].
pub(super) fn course() -> PropertyPath {
    PropertyPath {
        property: "course".into(),
        ..speed()
    }
}

/// [`query`] on `property`.
pub(super) fn query_on(id: &str, property: &PropertyPath) -> NewQuery {
    NewQuery {
        property: property.clone(),
        ..query(id)
    }
}

fn event(id: u64) -> StoredEvent {
    StoredEvent {
        id,
        kind: mfstream_model::EventKind::Instant,
        data: format!(r#"{{"datetime":"t{id}","value":{id}}}"#),
    }
}

pub(super) fn events(ids: std::ops::RangeInclusive<u64>) -> Vec<StoredEvent> {
    ids.map(event).collect()
}

fn open(dir: &TempDir) -> Store {
    Store::open(dir.path(), StoreOptions::default()).expect("the store opens")
}

pub(super) fn instant(i: usize) -> Instant {
    Instant::number(format!("2026-01-01T00:00:{i:02}Z"), i as f64)
}

#[tokio::test]
async fn registrations_statuses_and_rings_round_trip_through_a_reopen() {
    let dir = TempDir::new("round-trip");
    let store = open(&dir);
    let first = register(&store, query("q1")).await.unwrap();
    assert_eq!(first, Checkpoint::default());
    register(&store, query("q2")).await.unwrap();
    store
        .append_events("q1", events(1..=3), None)
        .await
        .unwrap();
    let failed = QueryStatus::Failed {
        reason: "exit 3: boom".into(),
    };
    store.set_status("q2", &failed).await.unwrap();
    store.close();

    let store = open(&dir);
    let queries = store.queries().unwrap();
    assert_eq!(queries.len(), 2);
    let q1 = &queries[0];
    assert_eq!(q1.id, "q1");
    assert_eq!(q1.property, speed());
    assert_eq!(q1.spec, query("q1").spec);
    assert_eq!(q1.engine, "local");
    assert_eq!(q1.status, QueryStatus::Running);
    assert_eq!(q1.created, query("q1").created);
    assert_eq!(q1.last_event_id, 3);
    assert_eq!(q1.ring, events(1..=3));
    assert_eq!(queries[1].status, failed);
    assert!(queries[1].ring.is_empty());
    store.close();
}

#[tokio::test]
async fn the_ring_is_trimmed_by_count_and_by_bytes_in_the_store_too() {
    let dir = TempDir::new("ring");
    let options = StoreOptions {
        ring_events: 4,
        ring_bytes: 3 * event(10).size(),
        ..StoreOptions::default()
    };
    let store = Store::open(dir.path(), options.clone()).unwrap();
    register(&store, query("q")).await.unwrap();
    store.append_events("q", events(1..=2), None).await.unwrap();
    store.append_events("q", events(3..=7), None).await.unwrap();
    // Four by count, then three by bytes (every event here has one size).
    assert_eq!(store.queries().unwrap()[0].ring, events(5..=7));
    store.close();

    let store = Store::open(dir.path(), options).unwrap();
    store.append_events("q", events(8..=8), None).await.unwrap();
    let q = store.queries().unwrap().remove(0);
    assert_eq!(q.ring, events(6..=8));
    assert_eq!(q.last_event_id, 8);
    store.close();
}

#[tokio::test]
async fn events_are_stored_one_row_per_call_and_the_rows_kept_stay_bounded() {
    let dir = TempDir::new("ring-rows");
    let options = StoreOptions {
        ring_events: 5,
        ..StoreOptions::default()
    };
    let store = Store::open(dir.path(), options.clone()).unwrap();
    register(&store, query("q")).await.unwrap();
    for call in 0..20u64 {
        let ids = call * 3 + 1..=call * 3 + 3;
        store.append_events("q", events(ids), None).await.unwrap();
        let rows = store.journal.ring_records("q");
        // The ring (5 events) and at most one row more.
        assert!(rows.0 <= 3 && rows.1 <= 8, "after call {call}: {rows:?}");
    }
    assert_eq!(store.queries().unwrap()[0].ring, events(56..=60));
    store.close();
    let store = Store::open(dir.path(), options).unwrap();
    store
        .append_events("q", events(61..=61), None)
        .await
        .unwrap();
    assert_eq!(store.queries().unwrap()[0].ring, events(57..=61));
    store.close();
}

#[tokio::test]
async fn an_event_larger_than_the_ring_keeps_only_itself() {
    let dir = TempDir::new("ring-one");
    let options = StoreOptions {
        ring_bytes: 1,
        ..StoreOptions::default()
    };
    let store = Store::open(dir.path(), options).unwrap();
    register(&store, query("q")).await.unwrap();
    store.append_events("q", events(1..=3), None).await.unwrap();
    assert_eq!(store.queries().unwrap()[0].ring, events(3..=3));
    store.close();
}

#[tokio::test]
async fn instants_of_every_value_type_round_trip_in_order_in_pages() {
    let dir = TempDir::new("instants");
    let store = open(&dir);
    let other = PropertyPath {
        property: "heading".into(),
        ..speed()
    };
    // Instants are kept while a running query may read them.
    register(&store, query("q")).await.unwrap();
    register(&store, query_on("h", &other)).await.unwrap();
    let batch = vec![
        Instant::number("t1", 3.0),
        Instant {
            datetime: "t2".into(),
            value: Value::Bool(true),
        },
        Instant {
            datetime: "t3".into(),
            value: Value::Text("ahead \u{1F6A2}".into()),
        },
        Instant {
            datetime: "t4".into(),
            value: Value::Bool(false),
        },
        Instant::number("t5", -0.25),
    ];
    assert_eq!(store.append_instants(&speed(), &batch).await.unwrap(), 1..6);
    assert_eq!(
        store.append_instants(&other, &[instant(9)]).await.unwrap(),
        6..7
    );
    assert_eq!(
        store
            .append_instants(&speed(), &[instant(7)])
            .await
            .unwrap(),
        7..8
    );
    store.close();

    let store = open(&dir);
    let page = store.instants(&speed(), 0, 3).unwrap();
    assert_eq!(page.iter().map(|i| i.seq).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(page[0].instant, batch[0]);
    assert_eq!(page[1].instant, batch[1]);
    assert_eq!(page[2].instant, batch[2]);
    let rest = store.instants(&speed(), 3, 100).unwrap();
    assert_eq!(rest.iter().map(|i| i.seq).collect::<Vec<_>>(), [4, 5, 7]);
    assert_eq!(rest[0].instant, batch[3]);
    assert_eq!(rest[1].instant, batch[4]);
    assert_eq!(store.instants(&other, 0, 100).unwrap()[0].seq, 6);
    let unknown = PropertyPath {
        property: "nope".into(),
        ..speed()
    };
    assert!(store.instants(&unknown, 0, 100).unwrap().is_empty());
    store.close();
}

#[tokio::test]
async fn instants_below_every_running_querys_checkpoint_are_trimmed() {
    let dir = TempDir::new("trim");
    let store = open(&dir);
    register(&store, query("q1")).await.unwrap();
    register(&store, query("q2")).await.unwrap();
    // One call each: the log is trimmed a whole call at a time.
    for i in 0..10 {
        let seqs = store
            .append_instants(&speed(), &[instant(i)])
            .await
            .unwrap();
        assert_eq!(seqs, i as u64 + 1..i as u64 + 2);
    }
    let checkpoint = |after_seq, last_event_id| Checkpoint {
        after_seq,
        last_event_id,
        state: None,
        skipped: 0,
    };
    store
        .append_events("q1", events(1..=6), Some(checkpoint(6, 6)))
        .await
        .unwrap();
    store
        .append_events("q2", events(1..=4), Some(checkpoint(4, 4)))
        .await
        .unwrap();
    // q2 still needs 5..: the smallest low-water mark wins.
    assert_eq!(store.instants(&speed(), 0, 100).unwrap()[0].seq, 5);
    // A stopped query needs nothing more.
    store.set_status("q2", &QueryStatus::Stopped).await.unwrap();
    assert_eq!(store.instants(&speed(), 0, 100).unwrap()[0].seq, 7);
    store.delete("q1").await.unwrap();
    assert!(store.instants(&speed(), 0, 100).unwrap().is_empty());
    store.close();

    // Sequence numbers are never reused, even with the log trimmed empty.
    let store = open(&dir);
    assert_eq!(
        store
            .append_instants(&speed(), &[instant(1)])
            .await
            .unwrap(),
        11..12
    );
    // A query registered now reads what comes after.
    let start = register(&store, query("q3")).await.unwrap();
    assert_eq!(start.after_seq, 11);
    store.close();
}

#[tokio::test]
async fn a_propertys_newest_instant_is_kept_past_every_checkpoint_and_a_reopen() {
    let dir = TempDir::new("newest");
    let store = open(&dir);
    assert!(store.newest_instant(&speed()).unwrap().is_none());
    register(&store, query("q1")).await.unwrap();
    store
        .append_instants(&speed(), &[instant(1), instant(2)])
        .await
        .unwrap();
    store
        .append_instants(&speed(), &[instant(3)])
        .await
        .unwrap();
    let checkpoint = Checkpoint {
        after_seq: 3,
        last_event_id: 3,
        state: None,
        skipped: 0,
    };
    store
        .append_events("q1", events(1..=3), Some(checkpoint))
        .await
        .unwrap();
    // Below the checkpoint: no query reads it again, but MQTT's duplicate
    // rule compares with it.
    assert!(store.instants(&speed(), 0, 100).unwrap().is_empty());
    store.close();
    let store = open(&dir);
    let newest = store.newest_instant(&speed()).unwrap().unwrap();
    assert_eq!((newest.seq, newest.instant), (3, instant(3)));
    assert!(store.newest_instant(&course()).unwrap().is_none());
    store.close();
}

#[tokio::test]
async fn an_idle_query_on_another_property_does_not_hold_the_log_back() {
    let dir = TempDir::new("trim-idle");
    let store = open(&dir);
    let course = course();
    // q1 reads speed; q2 reads course, which nobody ingests to.
    register(&store, query("q1")).await.unwrap();
    register(&store, query_on("q2", &course)).await.unwrap();
    for i in 0..10 {
        store
            .append_instants(&speed(), &[instant(i)])
            .await
            .unwrap();
    }
    let checkpoint = Checkpoint {
        after_seq: 8,
        last_event_id: 8,
        state: None,
        skipped: 0,
    };
    store
        .append_events("q1", events(1..=8), Some(checkpoint))
        .await
        .unwrap();
    assert_eq!(store.instants(&speed(), 0, 100).unwrap()[0].seq, 9);
    // Once course has instants after q2's checkpoint, q2 needs them.
    let seqs = store.append_instants(&course, &[instant(0)]).await.unwrap();
    store
        .append_events(
            "q1",
            events(9..=10),
            Some(Checkpoint {
                after_seq: 10,
                last_event_id: 10,
                state: None,
                skipped: 0,
            }),
        )
        .await
        .unwrap();
    assert_eq!(store.instants(&course, 0, 100).unwrap()[0].seq, seqs.start);
    store.close();
    // The same after a reopen, from what the database holds.
    let store = open(&dir);
    store.set_status("q1", &QueryStatus::Stopped).await.unwrap();
    assert_eq!(store.instants(&course, 0, 100).unwrap().len(), 1);
    store.close();
}

#[tokio::test]
async fn a_page_may_start_and_end_inside_one_ingest_call() {
    let dir = TempDir::new("pages");
    let store = open(&dir);
    register(&store, query("q")).await.unwrap();
    let other = PropertyPath {
        property: "heading".into(),
        ..speed()
    };
    let first: Vec<_> = (0..5).map(instant).collect();
    store.append_instants(&speed(), &first).await.unwrap();
    store.append_instants(&other, &first).await.unwrap();
    store.append_instants(&speed(), &first).await.unwrap();
    let mut seqs = Vec::new();
    let mut after = 0;
    loop {
        let page = store.instants(&speed(), after, 3).unwrap();
        let Some(last) = page.last() else { break };
        assert!(page.len() <= 3);
        after = last.seq;
        seqs.extend(page.iter().map(|i| i.seq));
    }
    assert_eq!(seqs, [1, 2, 3, 4, 5, 11, 12, 13, 14, 15]);
    let from_12 = store.instants(&speed(), 12, 100).unwrap();
    assert_eq!(from_12[0].seq, 13);
    assert_eq!(from_12[0].instant, instant(2));
    store.close();
}

#[tokio::test]
async fn events_with_a_gap_or_a_repeat_are_refused_and_fail_alone() {
    let dir = TempDir::new("order");
    let store = open(&dir);
    register(&store, query("q")).await.unwrap();
    store.append_events("q", events(1..=2), None).await.unwrap();
    let repeat = store.append_events("q", events(2..=3), None);
    let gap = store.append_events("q", events(4..=4), None);
    let (property, one) = (speed(), [instant(1)]);
    let good = store.append_instants(&property, &one);
    let (repeat, gap, good) = tokio::join!(repeat, gap, good);
    assert!(matches!(
        repeat.unwrap_err().kind(),
        StoreErrorKind::EventOutOfOrder {
            last: 2,
            got: 2,
            ..
        }
    ));
    assert!(matches!(
        gap.unwrap_err().kind(),
        StoreErrorKind::EventOutOfOrder {
            last: 2,
            got: 4,
            ..
        }
    ));
    assert_eq!(good.unwrap(), 1..2);
    let unknown = store.append_events("nope", events(1..=1), None).await;
    assert_eq!(
        unknown.unwrap_err().kind(),
        &StoreErrorKind::UnknownQuery("nope".into())
    );
    let twice = register(&store, query("q")).await.unwrap_err();
    assert_eq!(twice.kind(), &StoreErrorKind::DuplicateQuery("q".into()));
    assert_eq!(store.queries().unwrap()[0].ring, events(1..=2));
    store.close();
}

#[tokio::test]
async fn a_checkpoint_may_not_move_back_nor_past_its_events_or_the_log() {
    let dir = TempDir::new("checkpoint");
    let store = open(&dir);
    register(&store, query("q")).await.unwrap();
    let batch: Vec<_> = (0..4).map(instant).collect();
    store.append_instants(&speed(), &batch).await.unwrap();
    let cp = |after_seq, last_event_id| {
        Some(Checkpoint {
            after_seq,
            last_event_id,
            state: Some(vec![1, 2, 3]),
            skipped: 0,
        })
    };
    let past_events = store.append_events("q", events(1..=1), cp(2, 2)).await;
    assert!(matches!(
        past_events.unwrap_err().kind(),
        StoreErrorKind::BadCheckpoint {
            why: CheckpointFault::PastEvents { at: 2, last: 1 },
            ..
        }
    ));
    let past_log = store.append_events("q", events(1..=1), cp(5, 1)).await;
    assert!(matches!(
        past_log.unwrap_err().kind(),
        StoreErrorKind::BadCheckpoint {
            why: CheckpointFault::PastInstants { after: 5, .. },
            ..
        }
    ));
    store
        .append_events("q", events(1..=2), cp(3, 2))
        .await
        .unwrap();
    let back = store.append_events("q", vec![], cp(2, 2)).await;
    assert!(matches!(
        back.unwrap_err().kind(),
        StoreErrorKind::BadCheckpoint {
            why: CheckpointFault::Backwards {
                from_seq: 3,
                to_seq: 2,
                ..
            },
            ..
        }
    ));
    store.close();
    let store = open(&dir);
    let q = store.queries().unwrap().remove(0);
    assert_eq!(q.checkpoint, cp(3, 2).unwrap());
    assert_eq!(q.ring, events(1..=2));
    store.close();
}

#[tokio::test]
async fn a_resumed_query_gives_replayed_results_their_old_ids_and_drops_the_stored_ones() {
    let dir = TempDir::new("resume");
    let store = open(&dir);
    register(&store, query("q")).await.unwrap();
    let batch: Vec<_> = (0..6).map(instant).collect();
    store.append_instants(&speed(), &batch).await.unwrap();
    // Results 1..=5 stored, the checkpoint taken after the third instant,
    // then a crash before the sixth result was stored.
    let mut ids = EventIds::new();
    let mut stored = Vec::new();
    for _ in 0..5 {
        let Assigned::New(id) = ids.assign() else {
            panic!("a new query's ids are all new")
        };
        stored.push(event(id));
    }
    let cp = Checkpoint {
        after_seq: 3,
        last_event_id: 3,
        state: None,
        skipped: 0,
    };
    store.append_events("q", stored, Some(cp)).await.unwrap();
    store.close();

    let store = open(&dir);
    let q = store.queries().unwrap().remove(0);
    let replay = store
        .instants(&q.property, q.checkpoint.after_seq, 100)
        .unwrap();
    assert_eq!(replay.iter().map(|i| i.seq).collect::<Vec<_>>(), [4, 5, 6]);
    let mut ids = EventIds::resume(&q);
    let assigned: Vec<_> = replay.iter().map(|_| ids.assign()).collect();
    assert_eq!(
        assigned,
        [
            Assigned::Duplicate(4),
            Assigned::Duplicate(5),
            Assigned::New(6)
        ]
    );
    assert_eq!(ids.last(), 6);
    store.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_ingests_get_disjoint_ranges_that_cover_the_log() {
    let dir = TempDir::new("concurrent");
    let store = std::sync::Arc::new(open(&dir));
    register(&store, query("q")).await.unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..16 {
        let store = store.clone();
        tasks.spawn(async move {
            let mut ranges = Vec::new();
            for n in 0..20 {
                let batch: Vec<_> = (0..(t % 5 + 1))
                    .map(|i| Instant::number(format!("{t}-{n}-{i}"), i as f64))
                    .collect();
                let range = store.append_instants(&speed(), &batch).await.unwrap();
                assert_eq!(range.end - range.start, batch.len() as u64);
                ranges.push(range);
            }
            ranges
        });
    }
    let mut ranges: Vec<_> = tasks.join_all().await.into_iter().flatten().collect();
    ranges.sort_by_key(|r| r.start);
    let mut next = 1;
    for range in &ranges {
        assert_eq!(range.start, next, "ranges are contiguous and disjoint");
        next = range.end;
    }
    let logged = store.instants(&speed(), 0, usize::MAX).unwrap();
    assert_eq!(logged.len() as u64, next - 1);
    std::sync::Arc::into_inner(store).unwrap().close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_over_the_byte_budget_wait_their_turn_and_a_call_larger_than_it_goes_alone() {
    let dir = TempDir::new("budget");
    let options = StoreOptions {
        queue_bytes: 1000,
        ..StoreOptions::default()
    };
    let store = std::sync::Arc::new(Store::open(dir.path(), options).unwrap());
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..8u64 {
        let store = store.clone();
        tasks.spawn(async move {
            // About 2,000 bytes a registration: twice the writer's budget.
            let mut q = query(&format!("q{t}"));
            q.spec = format!(r#"{{"operation":"abs","pad":"{}"}}"#, "x".repeat(2000));
            register(&store, q).await.unwrap()
        });
    }
    assert_eq!(tasks.join_all().await.len(), 8);
    assert_eq!(store.queries().unwrap().len(), 8);
    std::sync::Arc::into_inner(store).unwrap().close();
}

#[tokio::test]
async fn a_deleted_query_is_gone_after_a_reopen_with_its_events() {
    let dir = TempDir::new("delete");
    let store = open(&dir);
    register(&store, query("q1")).await.unwrap();
    register(&store, query("q2")).await.unwrap();
    store
        .append_events("q1", events(1..=2), None)
        .await
        .unwrap();
    store.delete("q1").await.unwrap();
    assert_eq!(
        store.delete("q1").await.unwrap_err().kind(),
        &StoreErrorKind::UnknownQuery("q1".into())
    );
    store.close();
    let store = open(&dir);
    let queries = store.queries().unwrap();
    assert_eq!(queries.len(), 1);
    assert_eq!(queries[0].id, "q2");
    // The id is free again.
    register(&store, query("q1")).await.unwrap();
    assert!(store.queries().unwrap()[1].ring.is_empty());
    store.close();
}

#[test]
fn a_path_that_is_a_file_is_refused_naming_it() {
    let dir = TempDir::new("file");
    std::fs::write(dir.path(), b"not a directory").unwrap();
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    assert_eq!(err.kind(), &StoreErrorKind::NotADirectory);
    assert!(err.to_string().contains(&dir.path().display().to_string()));
    std::fs::remove_file(dir.path()).unwrap();
}

#[test]
fn a_missing_directory_is_created_or_refused_as_asked() {
    let dir = TempDir::new("missing");
    let strict = StoreOptions {
        create: false,
        ..StoreOptions::default()
    };
    let err = Store::open(dir.path().join("state"), strict).unwrap_err();
    assert_eq!(err.kind(), &StoreErrorKind::Missing);
    assert!(err.to_string().contains("state"), "{err}");
    let store = Store::open(dir.path().join("state"), StoreOptions::default()).unwrap();
    store.close();
}

#[test]
fn a_directory_under_a_file_cannot_be_created_and_says_where() {
    let dir = TempDir::new("under-file");
    std::fs::create_dir_all(dir.path()).unwrap();
    std::fs::write(dir.path().join("f"), b"").unwrap();
    let err = Store::open(dir.path().join("f/state"), StoreOptions::default()).unwrap_err();
    assert!(matches!(err.kind(), StoreErrorKind::Create(_)), "{err}");
    assert!(err.to_string().contains("f/state"), "{err}");
}

#[test]
fn an_unwritable_directory_is_refused() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // Root writes to any directory: the check runs as user nobody, in
        // this test re-run as a child, rather than passing unchecked.
        return as_nobody("an_unwritable_directory_is_refused");
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("unwritable");
    std::fs::create_dir_all(dir.path()).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o500)).unwrap();
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    assert!(
        matches!(
            err.kind(),
            StoreErrorKind::Io { kind: std::io::ErrorKind::PermissionDenied, path, .. }
                if path.starts_with(dir.path())
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("chown"),
        "the fix is suggested: {err}"
    );
}

/// Runs the test `name` of this module in a child as user nobody (65534),
/// and fails if it fails: what root must do to test permissions.
fn as_nobody(name: &str) {
    use std::os::unix::process::CommandExt;
    const NOBODY: u32 = 65534;
    use std::os::unix::fs::PermissionsExt;
    let built = std::env::current_exe().expect("the test binary's path");
    // A copy in a folder of its own under the temporary folder: the build's
    // folder may be one nobody cannot enter (a checkout under /root).
    let copy = TempDir::new("as-nobody");
    std::fs::create_dir_all(copy.path()).unwrap();
    std::fs::set_permissions(copy.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = copy.path().join("store-tests");
    std::fs::copy(&built, &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let test = format!(
        "{}::{name}",
        module_path!().trim_start_matches("mfstream_store::")
    );
    let output = std::process::Command::new(&exe)
        .args([test.as_str(), "--exact", "--test-threads=1"])
        .uid(NOBODY)
        .gid(NOBODY)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} as user nobody: {e}", exe.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{name} failed as user nobody (who must be able to run {}):\n{stdout}{}",
        exe.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn a_damaged_database_is_refused_as_corrupt_naming_the_path() {
    let dir = TempDir::new("corrupt");
    std::fs::create_dir_all(dir.path()).unwrap();
    let garbage: Vec<u8> = (0..8192u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(dir.path().join(schema::DB_FILE), garbage).unwrap();
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    assert!(matches!(err.kind(), StoreErrorKind::Corrupt(_)), "{err}");
    assert!(err.to_string().contains(&dir.path().display().to_string()));
}

#[test]
fn another_schema_version_is_refused_naming_both_versions() {
    let dir = TempDir::new("version");
    Store::open(dir.path(), StoreOptions::default())
        .unwrap()
        .close();
    let db = rusqlite::Connection::open(dir.path().join(schema::DB_FILE)).unwrap();
    db.execute("UPDATE schema_version SET version = 99", [])
        .unwrap();
    drop(db);
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    assert_eq!(
        err.kind(),
        &StoreErrorKind::SchemaVersion {
            found: 99,
            expected: schema::SCHEMA_VERSION
        }
    );
    assert!(err.to_string().contains("99"), "{err}");
}

#[test]
fn a_database_of_something_else_is_refused() {
    let dir = TempDir::new("foreign");
    std::fs::create_dir_all(dir.path()).unwrap();
    let db = rusqlite::Connection::open(dir.path().join(schema::DB_FILE)).unwrap();
    db.execute_batch("CREATE TABLE accounts (id INTEGER PRIMARY KEY)")
        .unwrap();
    drop(db);
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    assert_eq!(err.kind(), &StoreErrorKind::NotAStore);
}

#[test]
fn a_second_open_of_the_same_directory_is_refused_until_the_first_closes() {
    let dir = TempDir::new("locked");
    let first = open(&dir);
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    assert!(matches!(err.kind(), StoreErrorKind::Locked { .. }), "{err}");
    first.close();
    open(&dir).close();
}

#[tokio::test]
async fn oversized_and_invalid_records_are_refused_not_truncated() {
    let dir = TempDir::new("bounds");
    let options = StoreOptions {
        max_text_bytes: 16,
        max_event_bytes: 64,
        max_spec_bytes: 64,
        max_batch: 3,
        max_state_bytes: 4,
        ..StoreOptions::default()
    };
    let store = Store::open(dir.path(), options).unwrap();
    let too_large = |e: StoreError| matches!(e.kind(), StoreErrorKind::TooLarge { .. });
    let mut long_id = query("q");
    long_id.id = "x".repeat(17);
    assert!(too_large(register(&store, long_id).await.unwrap_err()));
    let mut long_spec = query("q");
    long_spec.spec = format!("[{}1]", "1,".repeat(40));
    assert!(too_large(register(&store, long_spec).await.unwrap_err()));
    let mut not_json = query("q");
    not_json.spec = "{nope".into();
    let err = register(&store, not_json).await.unwrap_err();
    assert!(
        matches!(err.kind(), StoreErrorKind::NotJson { query, .. } if query == "q"),
        "{err}"
    );
    register(&store, query("q")).await.unwrap();

    let four: Vec<_> = (0..4).map(instant).collect();
    assert!(too_large(
        store.append_instants(&speed(), &four).await.unwrap_err()
    ));
    let long_text = Instant {
        datetime: "t".into(),
        value: Value::Text("y".repeat(17)),
    };
    assert!(too_large(
        store
            .append_instants(&speed(), &[long_text])
            .await
            .unwrap_err()
    ));
    let nan = store
        .append_instants(&speed(), &[Instant::number("t", f64::NAN)])
        .await
        .unwrap_err();
    assert!(
        matches!(nan.kind(), StoreErrorKind::NotFinite { value, .. } if value.is_nan()),
        "{nan}"
    );
    let mut big = event(1);
    big.data = "z".repeat(64);
    assert!(too_large(
        store.append_events("q", vec![big], None).await.unwrap_err()
    ));
    let state = Checkpoint {
        after_seq: 0,
        last_event_id: 0,
        state: Some(vec![0; 5]),
        skipped: 0,
    };
    assert!(too_large(
        store
            .append_events("q", vec![], Some(state))
            .await
            .unwrap_err()
    ));
    // A long failure reason is cut, not refused: the status must be kept.
    let failed = QueryStatus::Failed {
        reason: "é".repeat(20),
    };
    store.set_status("q", &failed).await.unwrap();
    assert_eq!(
        store.queries().unwrap()[0].status,
        QueryStatus::Failed {
            reason: "é".repeat(8)
        }
    );
    assert!(store.instants(&speed(), 0, 10).unwrap().is_empty());
    store.close();
}

#[tokio::test]
async fn a_query_that_holds_its_property_back_does_not_hold_another_property_back() {
    let dir = TempDir::new("trim-per-property");
    let store = open(&dir);
    let course = course();
    // q1 reads speed and never moves its checkpoint (a HOPPING window, or a
    // bridge engine); q2 reads course and checkpoints after each result.
    register(&store, query("q1")).await.unwrap();
    register(&store, query_on("q2", &course)).await.unwrap();
    let mut last = 0;
    for i in 0..10 {
        store
            .append_instants(&speed(), &[instant(i)])
            .await
            .unwrap();
        last = store
            .append_instants(&course, &[instant(i)])
            .await
            .unwrap()
            .end
            - 1;
    }
    let checkpoint = Checkpoint {
        after_seq: last,
        last_event_id: 10,
        state: None,
        skipped: 0,
    };
    store
        .append_events("q2", events(1..=10), Some(checkpoint))
        .await
        .unwrap();
    // course is trimmed up to q2's checkpoint; speed is kept whole for q1.
    assert!(store.instants(&course, 0, 100).unwrap().is_empty());
    assert_eq!(store.instants(&speed(), 0, 100).unwrap().len(), 10);
    store.close();
    // The same after a reopen, from what the database holds: course's
    // trim point comes back, and speed is still whole.
    let store = open(&dir);
    store
        .append_instants(&course, &[instant(11)])
        .await
        .unwrap();
    assert_eq!(store.instants(&speed(), 0, 100).unwrap().len(), 10);
    assert_eq!(store.instants(&course, 0, 100).unwrap().len(), 1);
    store.close();
}

//! The journal's files: kept bounded while queries run, a torn end cut
//! off, damage refused, a record read twice kept once.

use super::{TempDir, course, event, events, instant, query, query_on, register, speed};
use crate::{Checkpoint, Durability, Store, StoreErrorKind, StoreOptions};
use mfstream_model::QueryStatus;

/// Segments of 4 KiB, a ring of 5 events: many segments quickly.
fn small() -> StoreOptions {
    StoreOptions {
        segment_bytes: 4096,
        ring_events: 5,
        ..StoreOptions::default()
    }
}

/// The journal's segment files and their total size.
fn segments(dir: &TempDir) -> (usize, u64) {
    let mut files = 0;
    let mut bytes = 0;
    for entry in std::fs::read_dir(dir.path().join("journal")).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name().to_string_lossy().ends_with(".seg") {
            files += 1;
            bytes += entry.metadata().unwrap().len();
        }
    }
    (files, bytes)
}

fn newest_segment(dir: &TempDir) -> std::path::PathBuf {
    let mut names: Vec<_> = std::fs::read_dir(dir.path().join("journal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    names.sort();
    names.pop().unwrap()
}

/// A store in `dir` with a query on speed and three instants of it, one
/// record each (sequence numbers 1 to 3), closed.
async fn three_instants(dir: &TempDir) {
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    register(&store, query("q")).await.unwrap();
    for i in 0..3 {
        store
            .append_instants(&speed(), &[instant(i)])
            .await
            .unwrap();
    }
    store.close();
}

#[tokio::test]
async fn old_segments_are_deleted_or_compacted_while_a_held_back_property_keeps_its_instants() {
    let dir = TempDir::new("journal-bounded");
    let store = Store::open(dir.path(), small()).unwrap();
    // q1 checkpoints after every result; q2 reads course and never moves
    // its checkpoint (a bridge engine's query): course's instants stay.
    register(&store, query("q1")).await.unwrap();
    register(&store, query_on("q2", &course())).await.unwrap();
    for i in 0..2000u64 {
        let seqs = store
            .append_instants(&speed(), &[instant(i as usize % 60)])
            .await
            .unwrap();
        let cp = Checkpoint {
            after_seq: seqs.start,
            last_event_id: i + 1,
            state: None,
            skipped: 0,
        };
        store
            .append_events("q1", events(i + 1..=i + 1), Some(cp))
            .await
            .unwrap();
        if i % 100 == 0 {
            store
                .append_instants(&course(), &[instant(i as usize % 60)])
                .await
                .unwrap();
        }
    }
    // About 200 KiB were written: what is kept is q1's ring and last
    // checkpoint and course's 20 instants, a few segments at most.
    let (files, bytes) = segments(&dir);
    assert!(
        files <= 4 && bytes <= 4 * 4096 + 2048,
        "{files} files, {bytes} bytes"
    );
    assert_eq!(store.instants(&course(), 0, 100).unwrap().len(), 20);
    assert!(store.instants(&speed(), 0, 100).unwrap().is_empty());
    // What `GET /metrics` reports, against the directory: its files and
    // bytes, the segments compacted away, a sync per segment filled.
    let stats = store.stats().await.unwrap();
    assert_eq!((stats.segments as usize, stats.bytes), (files, bytes));
    assert!(stats.compactions > 0, "{stats:?}");
    assert!(stats.syncs.count() >= stats.compactions, "{stats:?}");
    assert_eq!(stats.truncations, 0);
    store.close();
    let store = Store::open(dir.path(), small()).unwrap();
    let queries = store.queries().unwrap();
    assert_eq!(queries[0].ring, events(1996..=2000));
    assert_eq!(queries[0].checkpoint.last_event_id, 2000);
    assert_eq!(store.instants(&course(), 0, 100).unwrap().len(), 20);
    // Once q2 has stopped, nothing holds course back: the next segments
    // let the old ones go.
    store.set_status("q2", &QueryStatus::Stopped).await.unwrap();
    for i in 2001..=2200u64 {
        let seqs = store
            .append_instants(&speed(), &[instant(0)])
            .await
            .unwrap();
        let cp = Checkpoint {
            after_seq: seqs.start,
            last_event_id: i,
            state: None,
            skipped: 0,
        };
        store
            .append_events("q1", events(i..=i), Some(cp))
            .await
            .unwrap();
    }
    assert!(store.instants(&course(), 0, 100).unwrap().is_empty());
    let (files, _) = segments(&dir);
    assert!(files <= 4, "{files} files");
    store.close();
}

#[tokio::test]
async fn a_torn_record_at_the_end_is_cut_off_and_what_came_before_is_kept() {
    let dir = TempDir::new("journal-torn");
    three_instants(&dir).await;
    // The last record loses its last byte: a write the process never
    // finished (and so never acknowledged).
    let newest = newest_segment(&dir);
    let len = std::fs::metadata(&newest).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&newest)
        .unwrap()
        .set_len(len - 1)
        .unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let kept: Vec<u64> = store
        .instants(&speed(), 0, 10)
        .unwrap()
        .iter()
        .map(|i| i.seq)
        .collect();
    assert_eq!(kept, [1, 2]);
    // `GET /metrics` counts the cut: the bytes the file lost.
    let cut = store.stats().await.unwrap();
    let kept_len = std::fs::metadata(&newest).unwrap().len();
    assert_eq!(cut.truncations, 1, "{cut:?}");
    assert_eq!(cut.truncated_bytes, len - 1 - kept_len, "{cut:?}");
    // The journal goes on after the cut.
    assert_eq!(
        store
            .append_instants(&speed(), &[instant(9)])
            .await
            .unwrap(),
        3..4
    );
    store.close();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    assert_eq!(store.instants(&speed(), 0, 10).unwrap().len(), 3);
    assert_eq!(store.stats().await.unwrap().truncations, 0);
    store.close();
}

#[tokio::test]
async fn damage_before_the_end_is_refused_as_corrupt_naming_the_segment() {
    let dir = TempDir::new("journal-damage");
    three_instants(&dir).await;
    // A reopen starts a new segment: the one written is no longer the
    // newest, so damage in it is not an unfinished write.
    Store::open(dir.path(), StoreOptions::default())
        .unwrap()
        .close();
    let mut names: Vec<_> = std::fs::read_dir(dir.path().join("journal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    let first = &names[0];
    let mut bytes = std::fs::read(first).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(first, &bytes).unwrap();
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    assert!(
        matches!(err.kind(), StoreErrorKind::JournalDamaged { segment, .. } if segment == first),
        "{err}"
    );
    let message = err.to_string();
    assert!(message.contains("mfstream state repair"), "{message}");
    assert!(
        message.contains(&first.file_name().unwrap().to_string_lossy().to_string()),
        "{message}"
    );
}

#[tokio::test]
async fn a_record_read_twice_after_an_unfinished_compaction_is_kept_once() {
    let dir = TempDir::new("journal-twice");
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    register(&store, query("q")).await.unwrap();
    store
        .append_instants(&speed(), &[instant(1), instant(2)])
        .await
        .unwrap();
    store
        .append_events("q", vec![event(1), event(2)], None)
        .await
        .unwrap();
    store.close();
    // As if a compaction had copied the records into a newer segment and
    // was killed before it deleted the old one.
    let old = newest_segment(&dir);
    let copy = dir.path().join("journal").join(format!("{:020}.seg", 999));
    std::fs::copy(&old, &copy).unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    assert_eq!(store.instants(&speed(), 0, 10).unwrap().len(), 2);
    let q = &store.queries().unwrap()[0];
    assert_eq!(q.ring, vec![event(1), event(2)]);
    assert_eq!(q.last_event_id, 2);
    // Sequence numbers go on after every copy.
    assert_eq!(
        store
            .append_instants(&speed(), &[instant(3)])
            .await
            .unwrap(),
        3..4
    );
    store.close();
}

#[tokio::test]
async fn power_durability_syncs_and_reads_back() {
    let dir = TempDir::new("journal-power");
    let options = StoreOptions {
        durability: Durability::Power,
        segment_bytes: 1024,
        ..StoreOptions::default()
    };
    let store = Store::open(dir.path(), options.clone()).unwrap();
    register(&store, query("q")).await.unwrap();
    for i in 0..50u64 {
        store
            .append_instants(&speed(), &[instant(1)])
            .await
            .unwrap();
        store
            .append_events("q", events(i + 1..=i + 1), None)
            .await
            .unwrap();
    }
    store.close();
    let store = Store::open(dir.path(), options).unwrap();
    assert_eq!(store.instants(&speed(), 0, 100).unwrap().len(), 50);
    assert_eq!(store.queries().unwrap()[0].last_event_id, 50);
    store.close();
}

/// A small xorshift generator: the same damage on every run.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[tokio::test]
async fn a_damaged_newest_segment_never_panics_and_keeps_a_prefix_or_is_refused() {
    let dir = TempDir::new("journal-fuzz");
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    register(&store, query("q")).await.unwrap();
    for i in 0..20 {
        store
            .append_instants(&speed(), &[instant(i), instant(i + 1)])
            .await
            .unwrap();
        let id = i as u64 + 1;
        store
            .append_events("q", events(id..=id), None)
            .await
            .unwrap();
    }
    store.close();
    let newest = newest_segment(&dir);
    let pristine = std::fs::read(&newest).unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..200 {
        let mut bytes = pristine.clone();
        match round % 3 {
            // Cut anywhere (a write the process never finished).
            0 => bytes.truncate(next(&mut seed) as usize % bytes.len()),
            // Flip a few bits anywhere.
            1 => {
                for _ in 0..1 + next(&mut seed) % 4 {
                    let at = next(&mut seed) as usize % bytes.len();
                    bytes[at] ^= 1 << (next(&mut seed) % 8);
                }
            }
            // Garbage after the last record.
            _ => bytes.extend((0..next(&mut seed) % 64).map(|_| next(&mut seed) as u8)),
        }
        std::fs::write(&newest, &bytes).unwrap();
        // Every other segment goes: only the damaged one is read.
        for entry in std::fs::read_dir(dir.path().join("journal")).unwrap() {
            let path = entry.unwrap().path();
            if path != newest {
                std::fs::remove_file(path).unwrap();
            }
        }
        match Store::open(dir.path(), StoreOptions::default()) {
            Ok(store) => {
                // What is kept is a prefix of what was written, in order.
                let seqs: Vec<u64> = store
                    .instants(&speed(), 0, 100)
                    .unwrap()
                    .iter()
                    .map(|i| i.seq)
                    .collect();
                let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
                assert_eq!(seqs, expected, "round {round}");
                let q = &store.queries().unwrap()[0];
                let ids: Vec<u64> = q.ring.iter().map(|e| e.id).collect();
                assert!(
                    ids.windows(2).all(|w| w[1] == w[0] + 1),
                    "round {round}: {ids:?}"
                );
                store.close();
            }
            Err(e) => assert!(
                matches!(e.kind(), StoreErrorKind::JournalDamaged { .. }),
                "round {round}: {e}"
            ),
        }
    }
}

#[tokio::test]
async fn damage_with_whole_records_after_it_is_refused_even_in_the_newest_segment() {
    let dir = TempDir::new("journal-damage-newest");
    three_instants(&dir).await;
    let newest = newest_segment(&dir);
    let mut bytes = std::fs::read(&newest).unwrap();
    // A byte of the first record's payload: the two after it are whole,
    // so this is no unfinished write, and they must not be dropped.
    bytes[24 + 8 + 2] ^= 0x01;
    std::fs::write(&newest, &bytes).unwrap();
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            StoreErrorKind::JournalDamaged { offset: 24, .. }
        ),
        "{err}"
    );
    // Nothing was cut: the file is as it was.
    assert_eq!(std::fs::read(&newest).unwrap(), bytes);
}

#[tokio::test]
async fn a_state_directory_deleted_under_the_store_fails_the_next_write_for_good() {
    let dir = TempDir::new("journal-gone");
    let store = Store::open(dir.path(), small()).unwrap();
    register(&store, query("q")).await.unwrap();
    store
        .append_instants(&speed(), &[instant(1)])
        .await
        .unwrap();
    // An operator's `rm -rf`: the open segment has no name left, and what
    // is written to it would not be found at the next start.
    std::fs::remove_dir_all(dir.path().join("journal")).unwrap();
    for _ in 0..2 {
        let err = store
            .append_instants(&speed(), &[instant(2)])
            .await
            .unwrap_err();
        assert!(
            matches!(err.kind(), StoreErrorKind::SegmentDeleted { .. }),
            "{err}"
        );
    }
    let err = store
        .append_events("q", events(1..=1), None)
        .await
        .unwrap_err();
    assert!(
        matches!(err.kind(), StoreErrorKind::SegmentDeleted { .. }),
        "{err}"
    );
    store.close();
}

#[tokio::test]
async fn a_registration_after_the_state_directory_was_deleted_fails() {
    let dir = TempDir::new("journal-gone-register");
    let store = Store::open(dir.path(), small()).unwrap();
    std::fs::remove_dir_all(dir.path()).unwrap();
    let err = register(&store, query("q")).await.unwrap_err();
    assert!(
        matches!(err.kind(), StoreErrorKind::SegmentDeleted { .. }),
        "{err}"
    );
    assert!(store.check_writable().is_err());
    store.close();
}

#[tokio::test]
async fn a_state_directory_replaced_under_the_store_fails_the_next_write() {
    let dir = TempDir::new("journal-replaced");
    let store = Store::open(dir.path(), small()).unwrap();
    store
        .append_instants(&speed(), &[instant(1)])
        .await
        .unwrap();
    // Moved away and another put in its place (a restore from a backup
    // under a running server): the open segment still has a name, but in
    // the old directory.
    let journal = dir.path().join("journal");
    std::fs::rename(&journal, dir.path().join("journal.old")).unwrap();
    std::fs::create_dir(&journal).unwrap();
    let err = store
        .append_instants(&speed(), &[instant(2)])
        .await
        .unwrap_err();
    assert!(
        matches!(err.kind(), StoreErrorKind::JournalReplaced { .. }),
        "{err}"
    );
    store.close();
}

#[tokio::test]
async fn segments_are_created_readable_by_their_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("journal-mode");
    three_instants(&dir).await;
    let mode = std::fs::metadata(newest_segment(&dir))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let mode = std::fs::metadata(dir.path().join("journal"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
}

/// All segments, oldest first.
fn all_segments(dir: &TempDir) -> Vec<std::path::PathBuf> {
    let mut names: Vec<_> = std::fs::read_dir(dir.path().join("journal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    names.sort();
    names
}

fn append(path: &std::path::Path, bytes: &[u8]) {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

/// A framed record of `payload`, with its checksum right.
fn framed(payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_le_bytes().to_vec();
    out.extend(crc32fast::hash(payload).to_le_bytes());
    out.extend(payload);
    out
}

#[tokio::test]
async fn zeros_or_a_whole_record_whose_checksum_fails_at_the_end_of_the_newest_segment_are_cut_off()
{
    let dir = TempDir::new("journal-tails");
    let power = StoreOptions {
        durability: Durability::Power,
        ..StoreOptions::default()
    };
    three_instants(&dir).await;
    // A reopen starts a second segment; the first is no longer the newest.
    let store = Store::open(dir.path(), power.clone()).unwrap();
    store
        .append_instants(&speed(), &[instant(3)])
        .await
        .unwrap();
    store.close();
    let segments = all_segments(&dir);
    let (first, newest) = (&segments[0], &segments[segments.len() - 1]);
    let (first_len, newest_len) = (
        std::fs::metadata(first).unwrap().len(),
        std::fs::metadata(newest).unwrap().len(),
    );
    // The newest ends in a whole record whose checksum fails, then zeros
    // (a file whose length reached the disk and whose last pages did not).
    let mut bad = framed(b"\x01not what the checksum says, and long enough");
    bad[4] ^= 0xff;
    append(newest, &bad);
    append(newest, &[0u8; 4096]);
    let store = Store::open(dir.path(), power).unwrap();
    let kept: Vec<u64> = store
        .instants(&speed(), 0, 10)
        .unwrap()
        .iter()
        .map(|i| i.seq)
        .collect();
    assert_eq!(kept, [1, 2, 3, 4], "every acknowledged instant, once");
    assert_eq!(std::fs::metadata(first).unwrap().len(), first_len);
    assert_eq!(std::fs::metadata(newest).unwrap().len(), newest_len);
    store.close();
}

#[tokio::test]
async fn a_record_with_a_count_of_u32_max_is_refused_as_damage_without_allocating_for_it() {
    let dir = TempDir::new("journal-count");
    three_instants(&dir).await;
    // An events record of query q whose checksum matches but whose count
    // says 2^32 - 1 events in none: crafted, not torn. At the end of the
    // segment or before others, it is refused (naming where), never sized.
    let mut payload = vec![2u8];
    payload.extend(1u32.to_le_bytes());
    payload.extend(b"q");
    payload.extend(1u64.to_le_bytes());
    payload.extend(u32::MAX.to_le_bytes());
    payload.extend(u64::MAX.to_le_bytes());
    payload.push(0);
    let newest = newest_segment(&dir);
    let offset = std::fs::metadata(&newest).unwrap().len();
    append(&newest, &framed(&payload));
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    assert!(
        matches!(err.kind(), StoreErrorKind::JournalDamaged { offset: at, .. } if *at == offset),
        "{err}"
    );
    // A record that checks follows it: still refused, at the same place.
    let mut good = vec![1u8];
    good.extend(9u64.to_le_bytes());
    good.extend(1u32.to_le_bytes());
    for part in ["ships", "a", "speed"] {
        good.extend((part.len() as u32).to_le_bytes());
        good.extend(part.as_bytes());
    }
    good.extend(1u32.to_le_bytes());
    good.extend(b"t");
    good.push(2);
    append(&newest, &framed(&good));
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    assert!(
        matches!(err.kind(), StoreErrorKind::JournalDamaged { offset: at, .. } if *at == offset),
        "{err}"
    );
}

#[tokio::test]
async fn a_segment_of_another_version_is_refused_as_such_not_as_damage() {
    let dir = TempDir::new("journal-version");
    three_instants(&dir).await;
    let newest = newest_segment(&dir);
    let mut bytes = std::fs::read(&newest).unwrap();
    bytes[8..12].copy_from_slice(&7u32.to_le_bytes());
    let crc = crc32fast::hash(&bytes[..20]);
    bytes[20..24].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&newest, &bytes).unwrap();
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            StoreErrorKind::JournalVersion {
                found: 7,
                expected: 1,
                ..
            }
        ),
        "{err}"
    );
    assert!(!err.to_string().contains("corrupt"), "{err}");
}

#[tokio::test]
async fn check_reports_and_repair_keeps_every_record_that_checks_and_moves_the_rest_aside() {
    let dir = TempDir::new("journal-repair");
    three_instants(&dir).await;
    let report = crate::check_state(dir.path()).unwrap();
    assert!(!report.damaged(), "{report}");
    assert_eq!(report.records(), 3);
    let newest = newest_segment(&dir);
    let mut bytes = std::fs::read(&newest).unwrap();
    // The second record's length, flipped: it now points past the file.
    let first_len = u32::from_le_bytes(bytes[24..28].try_into().unwrap()) as usize + 8;
    let second = 24 + first_len;
    bytes[second + 3] ^= 0x01;
    std::fs::write(&newest, &bytes).unwrap();
    let report = crate::check_state(dir.path()).unwrap();
    assert!(report.damaged() && report.refused(), "{report}");
    assert_eq!(report.records(), 2);
    assert_eq!(
        std::fs::read(&newest).unwrap(),
        bytes,
        "check writes nothing"
    );
    let damage = &report.segments.last().unwrap().damage;
    assert_eq!(damage.len(), 1);
    assert_eq!(damage[0].offset, second as u64);
    assert!(!damage[0].tail);

    let repaired = crate::repair_state(dir.path()).unwrap();
    let moved = repaired.segments.last().unwrap().damage[0]
        .moved_to
        .clone()
        .unwrap();
    assert_eq!(
        std::fs::read(&moved).unwrap(),
        bytes[second..second + damage[0].bytes as usize]
    );
    assert!(!crate::check_state(dir.path()).unwrap().damaged());
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let kept: Vec<u64> = store
        .instants(&speed(), 0, 10)
        .unwrap()
        .iter()
        .map(|i| i.seq)
        .collect();
    assert_eq!(kept, [1, 3]);
    store.close();
}

#[tokio::test]
async fn repair_is_refused_while_a_store_holds_the_directory() {
    let dir = TempDir::new("journal-repair-locked");
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let err = crate::repair_state(dir.path()).unwrap_err();
    assert!(matches!(err.kind(), StoreErrorKind::Locked { .. }), "{err}");
    // A check reads only: it runs beside the server.
    assert!(!crate::check_state(dir.path()).unwrap().damaged());
    store.close();
    crate::repair_state(dir.path()).unwrap();
}

#[tokio::test]
async fn an_unfinished_newest_segment_is_removed_but_a_bad_header_elsewhere_is_refused() {
    let dir = TempDir::new("journal-headers");
    three_instants(&dir).await;
    let journal = dir.path().join("journal");
    // A segment created and never synced: 24 bytes of zeros, the newest.
    let unfinished = journal.join(format!("{:020}.seg", 900));
    std::fs::write(&unfinished, [0u8; 24]).unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    assert!(!unfinished.exists());
    assert_eq!(store.instants(&speed(), 0, 10).unwrap().len(), 3);
    store.close();
    // The same before other segments, or longer than a page: damage, left
    // for `state repair` to move aside, never deleted at start.
    let garbage = journal.join(format!("{:020}.seg", 0));
    std::fs::write(&garbage, [0u8; 24]).unwrap();
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    assert!(
        matches!(err.kind(), StoreErrorKind::JournalDamaged { offset: 0, segment, .. } if *segment == garbage),
        "{err}"
    );
    assert!(garbage.exists());
    let report = crate::check_state(dir.path()).unwrap();
    assert!(report.refused(), "{report}");
    crate::repair_state(dir.path()).unwrap();
    assert!(!garbage.exists());
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    assert_eq!(store.instants(&speed(), 0, 10).unwrap().len(), 3);
    store.close();
}

#[tokio::test]
async fn damage_at_the_end_of_an_older_segment_is_refused_not_cut_off() {
    // An older segment was synced before the next one was started: a last
    // record that no longer checks is damage to an acknowledged write, not
    // an unfinished one, and cutting it would lose that ingest.
    let dir = TempDir::new("journal-older-tail");
    three_instants(&dir).await;
    Store::open(dir.path(), StoreOptions::default())
        .unwrap()
        .close();
    let first = all_segments(&dir)[0].clone();
    let mut bytes = std::fs::read(&first).unwrap();
    // Walk the frames to the last record, and flip its checksum.
    let mut at = 24;
    let mut last = at;
    while at + 8 <= bytes.len() {
        last = at;
        at += 8 + u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    }
    bytes[last + 4] ^= 0xff;
    std::fs::write(&first, &bytes).unwrap();
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    assert!(
        matches!(err.kind(), StoreErrorKind::JournalDamaged { segment, offset, .. }
            if *segment == first && *offset == last as u64),
        "{err}"
    );
    assert_eq!(std::fs::read(&first).unwrap(), bytes, "nothing was cut");
    let report = crate::check_state(dir.path()).unwrap();
    assert!(report.refused(), "{report}");
}

#[tokio::test]
async fn a_deletion_after_the_journal_directory_was_replaced_fails_and_keeps_the_query() {
    let dir = TempDir::new("journal-replaced-delete");
    let store = Store::open(dir.path(), small()).unwrap();
    register(&store, query("q")).await.unwrap();
    // Only `journal/` replaced, the catalog left: nothing written to the
    // journal since, so only a check of the directory tells.
    let journal = dir.path().join("journal");
    std::fs::rename(&journal, dir.path().join("journal.old")).unwrap();
    std::fs::create_dir(&journal).unwrap();
    let err = store.delete("q").await.unwrap_err();
    assert!(
        matches!(err.kind(), StoreErrorKind::JournalReplaced { .. }),
        "{err}"
    );
    store.close();
    // Still registered in the catalog: the 503 left the query as it was.
    std::fs::remove_dir_all(&journal).unwrap();
    std::fs::rename(dir.path().join("journal.old"), &journal).unwrap();
    let store = Store::open(dir.path(), small()).unwrap();
    let ids: Vec<String> = store.queries().unwrap().into_iter().map(|q| q.id).collect();
    assert_eq!(ids, ["q"]);
    store.close();
}

//! The journal's manifest: a segment deleted by hand is refused, naming
//! it; a damaged manifest is refused; a journal without one (an earlier
//! mfstream's) gets one; compaction's gaps are no loss.

use std::path::PathBuf;

use super::{TempDir, course, events, instant, query, query_on, register, speed};
use crate::{Checkpoint, Store, StoreErrorKind, StoreOptions};

fn journal(dir: &TempDir) -> PathBuf {
    dir.path().join("journal")
}

fn manifest(dir: &TempDir) -> PathBuf {
    journal(dir).join("MANIFEST")
}

/// The journal's segment numbers, in order.
fn numbers(dir: &TempDir) -> Vec<u64> {
    let mut numbers: Vec<u64> = std::fs::read_dir(journal(dir))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".seg")?.parse().ok()
        })
        .collect();
    numbers.sort_unstable();
    numbers
}

fn segment(dir: &TempDir, number: u64) -> PathBuf {
    journal(dir).join(format!("{number:020}.seg"))
}

/// A store whose query never moves its checkpoint (a bridge engine's),
/// opened three times with an instant each: segments 1, 2 and 3 each hold
/// one, and the fourth open's is empty.
async fn three_segments(dir: &TempDir) {
    for i in 0..3 {
        let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
        if i == 0 {
            register(&store, query("q")).await.unwrap();
        }
        store
            .append_instants(&speed(), &[instant(i)])
            .await
            .unwrap();
        store.close();
    }
}

fn instants_back(dir: &TempDir) -> usize {
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let n = store.instants(&speed(), 0, 100).unwrap().len();
    store.close();
    n
}

#[tokio::test]
async fn a_segment_deleted_from_the_middle_is_refused_naming_it_until_the_manifest_is_removed() {
    let dir = TempDir::new("manifest-deleted");
    three_segments(&dir).await;
    assert_eq!(numbers(&dir), [1, 2, 3]);
    let middle = segment(&dir, 2);
    std::fs::remove_file(&middle).unwrap();
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    assert!(
        matches!(err.kind(), StoreErrorKind::SegmentMissing { segment, manifest: m }
            if *segment == middle && *m == manifest(&dir)),
        "{err}"
    );
    let message = err.to_string();
    assert!(
        message.contains(middle.to_str().unwrap())
            && message.contains("backup")
            && message.contains("remove"),
        "{message}"
    );
    // Refused again: the failed open changed nothing.
    assert!(Store::open(dir.path(), StoreOptions::default()).is_err());
    // Removing the manifest is the operator accepting the loss: the
    // journal opens with what is left.
    std::fs::remove_file(manifest(&dir)).unwrap();
    assert_eq!(instants_back(&dir), 2);
}

#[tokio::test]
async fn the_newest_segment_deleted_is_refused_too() {
    let dir = TempDir::new("manifest-newest");
    three_segments(&dir).await;
    std::fs::remove_file(segment(&dir, 3)).unwrap();
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    assert!(
        matches!(err.kind(), StoreErrorKind::SegmentMissing { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn a_manifest_cut_short_or_overwritten_is_refused_naming_it() {
    let dir = TempDir::new("manifest-damaged");
    three_segments(&dir).await;
    let good = std::fs::read(manifest(&dir)).unwrap();
    for bad in [
        &good[..good.len() - 5],
        b"not a manifest at all, just text\n",
    ] {
        std::fs::write(manifest(&dir), bad).unwrap();
        let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
        assert!(
            matches!(err.kind(), StoreErrorKind::ManifestDamaged { manifest: m, .. }
                if *m == manifest(&dir)),
            "{err}"
        );
        assert!(err.to_string().contains("remove it"), "{err}");
    }
    std::fs::write(manifest(&dir), &good).unwrap();
    assert_eq!(instants_back(&dir), 3);
}

#[tokio::test]
async fn a_journal_without_a_manifest_opens_and_then_has_one_listing_its_segments() {
    let dir = TempDir::new("manifest-migrated");
    three_segments(&dir).await;
    // As an earlier mfstream left it: segments, no manifest.
    std::fs::remove_file(manifest(&dir)).unwrap();
    assert_eq!(instants_back(&dir), 3);
    assert!(manifest(&dir).exists());
    // The manifest made lists them: a middle one deleted now is refused.
    std::fs::remove_file(segment(&dir, 2)).unwrap();
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    assert!(
        matches!(err.kind(), StoreErrorKind::SegmentMissing { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn compaction_leaves_gaps_in_the_numbering_that_are_not_reported() {
    let dir = TempDir::new("manifest-compaction");
    let options = || StoreOptions {
        segment_bytes: 1024,
        ring_events: 5,
        ..StoreOptions::default()
    };
    let store = Store::open(dir.path(), options()).unwrap();
    // q1 checkpoints after every result; q2's course instants are held
    // back, so that some old segments stay while the ones between go.
    register(&store, query("q1")).await.unwrap();
    register(&store, query_on("q2", &course())).await.unwrap();
    for i in 0..400u64 {
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
        if i % 50 == 0 {
            store
                .append_instants(&course(), &[instant(i as usize % 60)])
                .await
                .unwrap();
        }
    }
    store.close();
    let kept = numbers(&dir);
    let gaps = kept.windows(2).any(|w| w[1] != w[0] + 1);
    assert!(kept[0] > 1 && gaps, "segments kept: {kept:?}");
    let store = Store::open(dir.path(), options()).unwrap();
    assert_eq!(store.instants(&course(), 0, 100).unwrap().len(), 8);
    store.close();
}

#[tokio::test]
async fn a_segment_repair_removes_because_nothing_in_it_checks_is_unlisted() {
    let dir = TempDir::new("manifest-repair");
    three_segments(&dir).await;
    let middle = segment(&dir, 2);
    let mut bytes = std::fs::read(&middle).unwrap();
    bytes[24..].fill(0xff);
    std::fs::write(&middle, &bytes).unwrap();
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    assert!(
        matches!(err.kind(), StoreErrorKind::JournalDamaged { .. }),
        "{err}"
    );
    crate::repair_state(dir.path()).unwrap();
    assert!(!middle.exists(), "nothing in it checked");
    assert_eq!(instants_back(&dir), 2);
}

#[tokio::test]
async fn check_reports_a_missing_segment_and_a_damaged_manifest_as_refused() {
    let dir = TempDir::new("manifest-check");
    three_segments(&dir).await;
    let clean = crate::check_state(dir.path()).unwrap();
    assert!(!clean.damaged(), "{clean}");
    let middle = segment(&dir, 2);
    std::fs::remove_file(&middle).unwrap();
    let report = crate::check_state(dir.path()).unwrap();
    assert_eq!(report.missing, std::slice::from_ref(&middle));
    assert!(
        report.damaged() && report.refused() && report.lost(),
        "{report}"
    );
    assert!(
        report.to_string().contains(middle.to_str().unwrap()),
        "{report}"
    );
    std::fs::write(manifest(&dir), b"x").unwrap();
    let report = crate::check_state(dir.path()).unwrap();
    assert!(report.missing.is_empty() && report.manifest_damaged.is_some());
    assert!(report.refused(), "{report}");
}

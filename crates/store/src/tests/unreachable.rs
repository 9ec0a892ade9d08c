//! A journal directory that cannot be looked at for a while (a `chmod` of
//! the state directory under the running server): a write answered with
//! an error is never read back, and writes resume without a restart once
//! the directory is the one opened again.
//!
//! Tests run as root, whom `chmod 000` does not stop; a file system double
//! refuses the look at the directory instead, as the kernel does for
//! anyone else (the end-to-end test, `tests/serve/journal.rs`, drops the
//! server's capabilities and uses a real `chmod`).

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::super::journal::{Journal, OsFs, Registered, SegFile, Vfs};
use super::super::{StoreErrorKind, StoreOptions};
use super::{TempDir, speed};
use crate::batch;
use mfstream_model::Instant;

/// The real file system, except that looking at a directory
/// ([`Vfs::id`]) is refused with `EACCES` while denied.
#[derive(Debug, Clone, Default)]
struct Denying {
    denied: Arc<AtomicBool>,
}

impl Denying {
    /// Refuses every look from now on.
    fn deny(&self) {
        self.denied.store(true, Ordering::Relaxed);
    }

    /// Allows every look again.
    fn allow(&self) {
        self.denied.store(false, Ordering::Relaxed);
    }
}

impl Vfs for Denying {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        OsFs.create_dir_all(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        OsFs.list(dir)
    }
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn SegFile>> {
        OsFs.open(path, create)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        OsFs.remove(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        OsFs.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        OsFs.sync_dir(dir)
    }
    fn id(&self, dir: &Path) -> io::Result<(u64, u64)> {
        if self.denied.load(Ordering::Relaxed) {
            return Err(io::ErrorKind::PermissionDenied.into());
        }
        OsFs.id(dir)
    }
}

/// The query that holds `speed` back: every instant of it stays.
fn holder() -> Registered {
    Registered {
        id: "q".into(),
        property: speed(),
        running: true,
        start_seq: 0,
    }
}

fn open(dir: &TempDir, vfs: Arc<dyn Vfs>) -> Journal {
    Journal::open_on(vfs, dir.path(), &StoreOptions::default(), vec![holder()]).unwrap()
}

/// One instant of `speed` whose value is `v`.
async fn append(journal: &Journal, v: u32) -> Result<std::ops::Range<u64>, StoreErrorKind> {
    let mut data = Vec::new();
    batch::encode(
        &[Instant::number("2026-01-01T00:00:00Z", f64::from(v))],
        &mut data,
    );
    journal.append_instants(&speed(), 1, data).await
}

/// The values of `speed` a journal opened on `dir` reads back.
fn read_back(dir: &TempDir) -> Vec<f64> {
    let journal = open(dir, Arc::new(OsFs));
    let values = journal
        .instants(&speed(), 0, usize::MAX)
        .unwrap()
        .iter()
        .map(|i| i.instant.value.as_f64().unwrap())
        .collect();
    journal.close();
    values
}

fn assert_unreachable(result: Result<impl std::fmt::Debug, StoreErrorKind>) {
    let err = result.unwrap_err();
    assert!(
        matches!(&err, StoreErrorKind::Unreachable { message, .. } if message.contains("ermission")),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("cannot be reached") && text.contains("without a restart"),
        "{text}"
    );
}

#[tokio::test]
async fn an_append_refused_while_the_directory_cannot_be_looked_at_is_never_read_back_and_writes_resume()
 {
    let dir = TempDir::new("unreachable-resume");
    let fs = Denying::default();
    let journal = open(&dir, Arc::new(fs.clone()));
    append(&journal, 1).await.unwrap();
    fs.deny();
    assert_unreachable(append(&journal, 2).await);
    assert_unreachable(append(&journal, 2).await);
    // A registration is refused too (it asks for the next number first).
    assert_unreachable(journal.next_seq().await);
    // Not for good: the same directory again, and the retry is taken.
    fs.allow();
    append(&journal, 2).await.unwrap();
    assert!(journal.broken().is_ok());
    journal.close();
    assert_eq!(read_back(&dir), [1.0, 2.0]);
}

#[tokio::test]
async fn a_write_whose_check_after_it_fails_is_cut_off_before_anyone_is_answered() {
    let dir = TempDir::new("unreachable-cut");
    let fs = Denying::default();
    let journal = open(&dir, Arc::new(fs.clone()));
    append(&journal, 1).await.unwrap();
    let segment = |dir: &TempDir| {
        let mut names: Vec<_> = std::fs::read_dir(dir.path().join("journal"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "seg"))
            .collect();
        names.sort();
        let newest = names.pop().unwrap();
        std::fs::metadata(newest).unwrap().len()
    };
    let before = segment(&dir);
    // The first write after the chmod goes through the segment's open
    // descriptor, which still takes writes; the look after it is refused.
    fs.deny();
    assert_unreachable(append(&journal, 2).await);
    assert_eq!(segment(&dir), before, "the refused write is cut off");
    // From then on the directory is looked at first: nothing is written.
    assert_unreachable(append(&journal, 2).await);
    assert_eq!(segment(&dir), before);
    fs.allow();
    append(&journal, 3).await.unwrap();
    journal.close();
    assert_eq!(read_back(&dir), [1.0, 3.0]);
}

#[tokio::test]
async fn a_directory_replaced_while_it_could_not_be_looked_at_fails_for_good() {
    let dir = TempDir::new("unreachable-replaced");
    let fs = Denying::default();
    let journal = open(&dir, Arc::new(fs.clone()));
    append(&journal, 1).await.unwrap();
    fs.deny();
    assert_unreachable(append(&journal, 2).await);
    let path = dir.path().join("journal");
    std::fs::rename(&path, dir.path().join("journal.old")).unwrap();
    std::fs::create_dir(&path).unwrap();
    fs.allow();
    for _ in 0..2 {
        let err = append(&journal, 3).await.unwrap_err();
        assert!(
            matches!(err, StoreErrorKind::JournalReplaced { .. }),
            "{err}"
        );
    }
    assert!(journal.broken().is_err());
    journal.close();
}

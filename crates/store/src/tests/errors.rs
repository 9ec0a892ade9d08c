//! Each cause of a store error is its own variant, with its own message:
//! the tests trigger each and match it (the others are in the tests of
//! what they guard: `Locked`, `CatalogLost`, `JournalDamaged`,
//! `JournalVersion`, `Corrupt`, `SchemaVersion`, `NotAStore`, …).

use super::*;

#[test]
fn a_symbolic_link_in_place_of_the_catalog_is_refused_as_a_link() {
    let dir = TempDir::new("link");
    std::fs::create_dir_all(dir.path()).unwrap();
    let elsewhere = dir.path().join("elsewhere");
    std::fs::write(&elsewhere, b"").unwrap();
    let catalog = dir.path().join(schema::DB_FILE);
    std::os::unix::fs::symlink(&elsewhere, &catalog).unwrap();
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    assert!(
        matches!(err.kind(), StoreErrorKind::Link { path } if path == &catalog),
        "{err}"
    );
    assert!(err.to_string().contains("is a symbolic link"), "{err}");
}

#[test]
fn a_catalog_locked_by_another_connection_is_refused_as_busy_not_corrupt() {
    let dir = TempDir::new("busy");
    std::fs::create_dir_all(dir.path()).unwrap();
    // A tool holding the database in an exclusive transaction (its default
    // rollback journal: no reader gets past the lock).
    let tool = rusqlite::Connection::open(dir.path().join(schema::DB_FILE)).unwrap();
    tool.execute_batch("CREATE TABLE t (x); BEGIN EXCLUSIVE; INSERT INTO t VALUES (1);")
        .unwrap();
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    drop(tool);
    assert!(
        matches!(err.kind(), StoreErrorKind::CatalogBusy(_)),
        "{err}"
    );
    assert!(err.to_string().contains("close the tool"), "{err}");
}

#[tokio::test]
async fn a_journal_deleted_under_the_catalog_is_refused_as_lost() {
    let dir = TempDir::new("journal-lost");
    let store = open(&dir);
    register(&store, query("q")).await.unwrap();
    store.close();
    let journal = dir.path().join(schema::JOURNAL_DIR);
    std::fs::remove_dir_all(&journal).unwrap();
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    assert_eq!(
        err.kind(),
        &StoreErrorKind::JournalLost {
            journal,
            queries: 1
        }
    );
}

#[test]
fn a_journal_that_cannot_be_made_is_an_io_error_naming_its_path() {
    let dir = TempDir::new("journal-file");
    std::fs::create_dir_all(dir.path()).unwrap();
    let journal = dir.path().join(schema::JOURNAL_DIR);
    std::fs::write(&journal, b"not a directory").unwrap();
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    assert!(
        matches!(err.kind(), StoreErrorKind::Io { action: "create", path, .. } if path == &journal),
        "{err}"
    );
    assert!(err.to_string().contains("cannot create"), "{err}");
    assert!(!err.to_string().contains("database"), "{err}");
}

#[tokio::test]
async fn a_catalog_deleted_while_the_store_runs_fails_writes_as_gone() {
    let dir = TempDir::new("catalog-gone");
    let store = open(&dir);
    register(&store, query("q1")).await.unwrap();
    let catalog = dir.path().join(schema::DB_FILE);
    std::fs::remove_file(&catalog).unwrap();
    let err = register(&store, query("q2")).await.unwrap_err();
    assert!(
        matches!(err.kind(), StoreErrorKind::CatalogGone { path } if path == &catalog),
        "{err}"
    );
    store.close();
}

#[tokio::test]
async fn a_catalog_row_of_the_wrong_type_is_malformed_not_a_database_error() {
    let dir = TempDir::new("malformed-row");
    let store = open(&dir);
    register(&store, query("q")).await.unwrap();
    store.close();
    let db = rusqlite::Connection::open(dir.path().join(schema::DB_FILE)).unwrap();
    db.execute("UPDATE queries SET created_ms = 'soon'", [])
        .unwrap();
    drop(db);
    let err = match Store::open(dir.path(), StoreOptions::default()) {
        Err(err) => err,
        Ok(store) => {
            let err = store.queries().unwrap_err();
            store.close();
            err
        }
    };
    assert!(matches!(err.kind(), StoreErrorKind::Malformed(_)), "{err}");
}

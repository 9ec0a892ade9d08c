//! Who may use a state directory, and what a store refuses to start with:
//! the lock and its holder, the modes of the directory and its files, and
//! a catalog lost while the journal still holds records.

use std::os::unix::fs::PermissionsExt;

use super::*;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The database's files: the database, its log and its shared memory.
fn catalog_files(dir: &Path) -> [PathBuf; 3] {
    let db = schema::DB_FILE;
    [
        dir.join(db),
        dir.join(format!("{db}-wal")),
        dir.join(format!("{db}-shm")),
    ]
}

#[tokio::test]
async fn a_new_store_directory_is_its_owners_alone_and_so_are_its_files() {
    let dir = TempDir::new("modes");
    let store = open(&dir);
    // A registration makes SQLite write its log and shared memory.
    register(&store, query("q")).await.unwrap();
    assert_eq!(mode(dir.path()), 0o700);
    assert_eq!(mode(&dir.path().join("lock")), 0o600);
    for file in catalog_files(dir.path()) {
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }
    store.close();
}

#[tokio::test]
async fn an_existing_store_open_to_others_is_made_private_at_open() {
    let dir = TempDir::new("loose");
    let store = open(&dir);
    register(&store, query("q")).await.unwrap();
    // Files left behind open to everyone, as a copy or a restore may.
    let files = catalog_files(dir.path());
    for file in &files {
        chmod(file, 0o666);
    }
    chmod(&dir.path().join("lock"), 0o644);
    chmod(dir.path(), 0o755);
    store.close();
    let store = open(&dir);
    assert_eq!(mode(dir.path()), 0o700);
    assert_eq!(mode(&dir.path().join("lock")), 0o600);
    for file in &files {
        if file.exists() {
            assert_eq!(mode(file), 0o600, "{}", file.display());
        }
    }
    assert_eq!(store.queries().unwrap()[0].id, "q");
    store.close();
}

#[test]
fn a_second_open_names_the_process_that_holds_the_directory() {
    let dir = TempDir::new("holder");
    let first = open(&dir);
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    let pid = std::process::id();
    assert_eq!(err.kind(), &StoreErrorKind::Locked { pid: Some(pid) });
    let message = err.to_string();
    assert!(
        message.contains(&format!("pid {pid}"))
            && message.contains(dir.path().to_str().unwrap())
            && message.contains("another directory"),
        "{message}"
    );
    first.close();
    open(&dir).close();
}

/// A store with a query and an instant logged, closed.
async fn with_records(dir: &TempDir) {
    let store = open(dir);
    register(&store, query("q")).await.unwrap();
    store
        .append_instants(&speed(), &[instant(1)])
        .await
        .unwrap();
    store.close();
}

fn assert_catalog_lost(dir: &TempDir) {
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    let catalog = dir.path().join(schema::DB_FILE);
    assert!(
        matches!(err.kind(), StoreErrorKind::CatalogLost { catalog: c, .. } if c == &catalog),
        "{err}"
    );
    let message = err.to_string();
    assert!(
        message.contains(catalog.to_str().unwrap())
            && message.contains("missing or empty")
            && message.contains("restore the catalog from a backup"),
        "{message}"
    );
}

#[tokio::test]
async fn a_missing_catalog_beside_a_journal_with_records_is_refused_naming_it() {
    let dir = TempDir::new("catalog-missing");
    with_records(&dir).await;
    for file in catalog_files(dir.path()) {
        let _ = std::fs::remove_file(file);
    }
    assert_catalog_lost(&dir);
    // Refused without making an empty one: the next try says the same.
    assert!(!dir.path().join(schema::DB_FILE).exists());
    assert_catalog_lost(&dir);
}

#[tokio::test]
async fn an_empty_catalog_beside_a_journal_with_records_is_refused() {
    let dir = TempDir::new("catalog-empty");
    with_records(&dir).await;
    let [db, wal, shm] = catalog_files(dir.path());
    let _ = std::fs::remove_file(wal);
    let _ = std::fs::remove_file(shm);
    std::fs::write(&db, b"").unwrap();
    assert_catalog_lost(&dir);

    // A database with no tables at all is as empty.
    std::fs::remove_file(&db).unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("PRAGMA user_version = 7").unwrap();
    drop(conn);
    assert!(std::fs::metadata(&db).unwrap().len() > 0);
    assert_catalog_lost(&dir);
}

#[tokio::test]
async fn a_query_whose_property_row_is_gone_from_the_catalog_is_refused_not_forgotten() {
    let dir = TempDir::new("catalog-dangling");
    with_records(&dir).await;
    let conn = rusqlite::Connection::open(dir.path().join(schema::DB_FILE)).unwrap();
    conn.execute_batch("PRAGMA foreign_keys = OFF; DELETE FROM properties")
        .unwrap();
    drop(conn);
    let err = Store::open(dir.path(), StoreOptions::default()).unwrap_err();
    assert!(matches!(err.kind(), StoreErrorKind::Malformed(_)), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("\"q\"") && message.contains("a property the catalog does not hold"),
        "{message}"
    );
}

#[test]
fn a_missing_catalog_beside_a_journal_without_records_starts_empty() {
    let dir = TempDir::new("catalog-nothing");
    // Each open starts a segment with its header alone.
    open(&dir).close();
    std::fs::remove_file(dir.path().join(schema::DB_FILE)).unwrap();
    let store = open(&dir);
    assert!(store.queries().unwrap().is_empty());
    store.close();
}

#[tokio::test]
async fn a_registration_under_another_propertys_lock_is_refused() {
    let dir = TempDir::new("other-lock");
    let store = open(&dir);
    let lock = PropertyLock::new(course(), ());
    let err = store
        .register(&lock.lock().await, query("q"))
        .await
        .unwrap_err();
    assert!(
        matches!(err.kind(), StoreErrorKind::WrongLock { query, .. } if query == "q")
            && err.to_string().contains("own property's lock"),
        "{err}"
    );
    assert!(store.queries().unwrap().is_empty());
    store.close();
}

#[test]
fn a_directory_open_to_others_that_holds_other_files_is_left_as_it_is() {
    let dir = TempDir::new("shared");
    std::fs::create_dir_all(dir.path()).unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not the store's").unwrap();
    chmod(dir.path(), 0o1777);
    let store = open(&dir);
    assert_eq!(mode(dir.path()), 0o1777, "not the store's to change");
    // Its own files are private all the same.
    assert_eq!(mode(&dir.path().join("lock")), 0o600);
    assert_eq!(mode(&dir.path().join(schema::DB_FILE)), 0o600);
    store.close();
}

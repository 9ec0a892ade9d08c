//! The store's directory and database: the lock that keeps a second server
//! out, the connection settings, and the versioned schema.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use super::error::{StoreError, StoreErrorKind, classify};
use super::{Durability, StoreOptions};

/// The schema version this build reads and writes.
pub(crate) const SCHEMA_VERSION: i64 = 4;

/// The database file inside the store directory.
pub(crate) const DB_FILE: &str = "state.sqlite3";

/// The lock file inside the store directory.
const LOCK_FILE: &str = "lock";

/// Marks the database as mfstream's (`PRAGMA application_id`): "mfst".
const APPLICATION_ID: i64 = 0x6d66_7374;

const SCHEMA: &str = "
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE properties (
    id INTEGER PRIMARY KEY,
    collection TEXT NOT NULL,
    feature TEXT NOT NULL,
    property TEXT NOT NULL,
    UNIQUE (collection, feature, property)
);
-- The result events, checkpoints and ingested instants are in the journal
-- (the journal module); start_seq is the registration's checkpoint.
CREATE TABLE queries (
    id TEXT PRIMARY KEY,
    property INTEGER NOT NULL REFERENCES properties(id),
    spec TEXT NOT NULL,
    engine TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    created_ms INTEGER NOT NULL,
    start_seq INTEGER NOT NULL
) WITHOUT ROWID;
";

/// Holds the store directory for this process: a second server on the
/// same directory fails to open it instead of interleaving its writes.
#[derive(Debug)]
pub(crate) struct DirLock {
    _file: File,
}

/// Makes or checks the directory and takes its lock.
pub(crate) fn lock_dir(dir: &Path, options: &StoreOptions) -> Result<DirLock, StoreError> {
    let err = |kind| StoreError::new(dir, kind);
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return Err(err(StoreErrorKind::NotADirectory)),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            if !options.create {
                return Err(err(StoreErrorKind::Missing));
            }
            std::fs::create_dir_all(dir).map_err(|e| err(StoreErrorKind::Create(e.to_string())))?;
        }
        Err(e) => return Err(err(StoreErrorKind::Unwritable(e.to_string()))),
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(LOCK_FILE))
        .map_err(|e| err(StoreErrorKind::Unwritable(e.to_string())))?;
    // SAFETY: flock only reads the descriptor, which `file` keeps open for
    // the duration of the call.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return Err(err(if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            StoreErrorKind::Locked
        } else {
            StoreErrorKind::Unwritable(e.to_string())
        }));
    }
    Ok(DirLock { _file: file })
}

/// Opens the database for writing, creating or checking its schema.
pub(crate) fn open_writer(dir: &Path, options: &StoreOptions) -> Result<Connection, StoreError> {
    let err = |e: rusqlite::Error| StoreError::new(dir, classify(&e));
    let path = dir.join(DB_FILE);
    let conn = Connection::open_with_flags(
        &path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(err)?;
    // WAL: a commit appends to the log, readers never block the writer.
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
        .map_err(err)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::new(
            dir,
            StoreErrorKind::Unwritable(format!(
                "cannot use a write-ahead log (journal mode {mode})"
            )),
        ));
    }
    let synchronous = match options.durability {
        Durability::Process => "NORMAL",
        Durability::Power => "FULL",
    };
    // The savepoint of each job keeps its journal in memory. The database
    // holds the registrations only: SQLite's own checkpoints keep its log
    // short.
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {synchronous}; PRAGMA foreign_keys = OFF; \
         PRAGMA temp_store = MEMORY;"
    ))
    .map_err(err)?;
    check_or_create(&conn, dir)?;
    Ok(conn)
}

/// Opens a read-only connection for restoring.
pub(crate) fn open_reader(dir: &Path) -> Result<Connection, StoreError> {
    let err = |e: rusqlite::Error| StoreError::new(dir, classify(&e));
    let conn = Connection::open_with_flags(
        dir.join(DB_FILE),
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(err)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(err)?;
    Ok(conn)
}

fn check_or_create(conn: &Connection, dir: &Path) -> Result<(), StoreError> {
    let err = |e: rusqlite::Error| StoreError::new(dir, classify(&e));
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table'",
            [],
            |row| row.get(0),
        )
        .map_err(err)?;
    if tables == 0 {
        let ddl = format!(
            "BEGIN IMMEDIATE; {SCHEMA} \
             INSERT INTO schema_version (version) VALUES ({SCHEMA_VERSION}); \
             PRAGMA application_id = {APPLICATION_ID}; COMMIT;"
        );
        return conn.execute_batch(&ddl).map_err(err);
    }
    let application_id: i64 = conn
        .query_row("PRAGMA application_id", [], |row| row.get(0))
        .map_err(err)?;
    if application_id != APPLICATION_ID {
        return Err(StoreError::new(dir, StoreErrorKind::NotAStore));
    }
    let found: i64 = conn
        .query_row("SELECT max(version) FROM schema_version", [], |row| {
            row.get::<_, Option<i64>>(0)
        })
        .map_err(err)?
        .ok_or_else(|| StoreError::new(dir, StoreErrorKind::NotAStore))?;
    if found != SCHEMA_VERSION {
        return Err(StoreError::new(
            dir,
            StoreErrorKind::SchemaVersion {
                found,
                expected: SCHEMA_VERSION,
            },
        ));
    }
    Ok(())
}

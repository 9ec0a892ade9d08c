//! The store's directory and database: the lock that keeps a second server
//! out, the connection settings, and the versioned schema.

use std::fs::{File, Permissions};
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use super::error::{StoreError, StoreErrorKind, classify};
use super::{Durability, StoreOptions};

/// The schema version this build reads and writes.
pub(crate) const SCHEMA_VERSION: i64 = 4;

/// The database file inside the store directory.
pub(crate) const DB_FILE: &str = "state.sqlite3";

/// The lock file inside the store directory.
const LOCK_FILE: &str = "lock";

/// The journal's directory inside the store directory. Here, with the
/// other names in it, so that the journal reads it from this module and not
/// the reverse (the journal's check and repair take the directory's lock).
pub(crate) const JOURNAL_DIR: &str = "journal";

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
///
/// An advisory `flock(2)` on the directory itself, released by the kernel
/// when the process ends however it ends (no stale lock after `kill -9`,
/// unlike a pid file). On the directory, not on the lock file alone: a lock
/// file deleted or replaced under a running server would let a second one
/// lock the new file and write the same journal. The lock file is locked
/// too (what an older build, or a tool, checks) and holds the holder's pid.
/// `libc` is a dependency already and the call is a few lines; `std`'s
/// `File::try_lock` would do the same but needs Rust 1.89, past this
/// crate's `rust-version`, and cannot lock a directory.
#[derive(Debug)]
pub(crate) struct DirLock {
    _dir: File,
    _file: File,
}

/// The mode of the store directory: its owner's alone.
pub(crate) const DIR_MODE: u32 = 0o700;

/// The mode of the store's files (the lock file, and the database with its
/// `-wal` and `-shm` files).
pub(crate) const FILE_MODE: u32 = 0o600;

/// Makes or checks the directory (its owner's alone) and takes its lock.
pub(crate) fn lock_dir(dir: &Path, options: &StoreOptions) -> Result<DirLock, StoreError> {
    let err = |kind| StoreError::new(dir, kind);
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => tighten_dir(dir, meta.permissions().mode()),
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
            create_private_dir(dir).map_err(|e| err(StoreErrorKind::Create(e.to_string())))?;
        }
        Err(e) => return Err(err(StoreErrorKind::io("read", dir, &e))),
    }
    let path = dir.join(LOCK_FILE);
    let locked = |e: std::io::Error| {
        err(if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            // Read, never created: a refused server leaves the file alone.
            StoreErrorKind::Locked {
                pid: File::open(&path).ok().and_then(|mut f| holder(&mut f)),
            }
        } else {
            StoreErrorKind::io("lock", &path, &e)
        })
    };
    let dir_file = File::open(dir).map_err(|e| err(StoreErrorKind::io("open", dir, &e)))?;
    match try_lock(&dir_file) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => return Err(locked(e)),
        // A file system that cannot lock a directory (some network ones):
        // the lock file's lock alone, as before.
        Err(e) => tracing::warn!(
            "cannot lock the state directory {} itself ({e}): only its lock file is locked, so \
             deleting that file under the server would let a second one in",
            dir.display()
        ),
    }
    let file = private_file(&path).map_err(err)?;
    try_lock(&file).map_err(locked)?;
    // Who holds it, for the message a second server gets. Best effort: the
    // lock, not this text, is what keeps it out.
    let pid = format!("{}\n", std::process::id());
    if let Err(e) = file
        .set_len(0)
        .and_then(|()| file.write_all_at(pid.as_bytes(), 0))
    {
        tracing::debug!("cannot write the process id into {}: {e}", path.display());
    }
    Ok(DirLock {
        _dir: dir_file,
        _file: file,
    })
}

/// Takes an exclusive `flock(2)` on `file` (a file or a directory), without
/// waiting.
fn try_lock(file: &File) -> std::io::Result<()> {
    // SAFETY: flock only reads the descriptor, which `file` keeps open for
    // the duration of the call.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The process id the holder of a lock file wrote into it, if readable.
fn holder(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.take(32).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// Creates `dir` (and its missing parents, with the default mode), the
/// directory itself with [`DIR_MODE`] whatever the umask.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::DirBuilder::new().mode(DIR_MODE).create(dir) {
        Ok(()) => {}
        // Made meanwhile by someone else: checked (and tightened) as any
        // existing directory.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    // The umask may have taken bits off the mode; never added any.
    std::fs::set_permissions(dir, Permissions::from_mode(DIR_MODE))
}

/// An existing store directory that others may read or enter is made its
/// owner's alone, with a warning: the store holds every ingested value.
/// Only when it holds nothing but a store's files: a directory with other
/// things in it (`/tmp`, a home directory) is not the store's to change,
/// and gets a warning alone, as does one whose mode cannot be changed (a
/// directory of another user, a file system without modes).
fn tighten_dir(dir: &Path, mode: u32) {
    let mode = mode & 0o7777;
    if mode & 0o077 == 0 {
        return;
    }
    let tight = mode & 0o700;
    if !holds_only_a_store(dir) {
        tracing::warn!(
            "the state directory {} is open to other users (mode {mode:o}) and holds other \
             files than the store's, so it is left as it is: give --state a directory of its \
             own, or restrict it with chmod 700",
            dir.display()
        );
        return;
    }
    match std::fs::set_permissions(dir, Permissions::from_mode(tight)) {
        Ok(()) => tracing::warn!(
            "the state directory {} was open to other users (mode {mode:o}): made it {tight:o}",
            dir.display()
        ),
        Err(e) => tracing::warn!(
            "the state directory {} is open to other users (mode {mode:o}) and cannot be made \
             private ({e}): restrict it with chmod 700",
            dir.display()
        ),
    }
}

/// Whether `dir` is empty or holds only what a store makes.
fn holds_only_a_store(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let wal = format!("{DB_FILE}-wal");
    let shm = format!("{DB_FILE}-shm");
    entries.flatten().all(|entry| {
        let name = entry.file_name();
        [LOCK_FILE, DB_FILE, &wal, &shm, JOURNAL_DIR]
            .iter()
            .any(|ours| name == std::ffi::OsStr::new(ours))
    })
}

/// Opens (creating it when missing) a file of the store with
/// [`FILE_MODE`], whatever the umask and whatever its mode was. Never
/// through a symbolic link ([`refuse_link`]).
fn private_file(path: &Path) -> Result<File, StoreErrorKind> {
    refuse_link(path)?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(FILE_MODE)
        // A link made between the look above and the open is refused too.
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => StoreErrorKind::Link {
                path: path.to_owned(),
            },
            _ => StoreErrorKind::io("open", path, &e),
        })?;
    restrict(path);
    Ok(file)
}

/// Refuses a file of the store that is a symbolic link: in a directory
/// others can write to (`--state` under `/tmp`), a link planted under a
/// store file's name would have the server truncate, write and chmod the
/// file it points to (another user's), or keep the state there.
fn refuse_link(path: &Path) -> Result<(), StoreErrorKind> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Err(StoreErrorKind::Link {
            path: path.to_owned(),
        }),
        _ => Ok(()),
    }
}

/// Sets a file of the store to [`FILE_MODE`] when it exists with another
/// mode. A failure is a warning: whether the file can be used is for its
/// open to say. A symbolic link is left alone (never the file it names).
fn restrict(path: &Path) {
    let mode = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => return,
        Ok(meta) => meta.permissions().mode() & 0o7777,
        Err(_) => return,
    };
    if mode == FILE_MODE {
        return;
    }
    if let Err(e) = std::fs::set_permissions(path, Permissions::from_mode(FILE_MODE)) {
        tracing::warn!(
            "{} has mode {mode:o} and cannot be made {FILE_MODE:o} ({e}): restrict it with \
             chmod 600",
            path.display()
        );
    }
}

/// The bytes of a journal segment's header (`journal/segment.rs`): a
/// segment no longer than this holds no record. (Each open starts a new,
/// empty segment.)
const SEGMENT_HEADER: u64 = 24;

/// A journal segment that holds records, if any: a store whose database is
/// missing or empty must not start with it (see [`check_catalog`]).
fn journal_records(dir: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir.join(JOURNAL_DIR)).ok()?;
    entries.flatten().map(|entry| entry.path()).find(|path| {
        path.extension().is_some_and(|e| e == "seg")
            && std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() > SEGMENT_HEADER)
    })
}

/// Refuses a database that is missing, or empty, while the journal holds
/// records: opening it would make an empty one, and every query registered
/// (the journal's results and instants with them) would be forgotten
/// without a word. A new directory (no journal) starts as always.
pub(crate) fn check_catalog(dir: &Path) -> Result<(), StoreError> {
    let catalog = dir.join(DB_FILE);
    let empty = match std::fs::metadata(&catalog) {
        Ok(meta) => meta.len() == 0,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => {
            return Err(StoreError::new(
                dir,
                StoreErrorKind::io("read", &catalog, &e),
            ));
        }
    };
    if !empty {
        return Ok(());
    }
    match journal_records(dir) {
        Some(segment) => Err(StoreError::new(
            dir,
            StoreErrorKind::CatalogLost { catalog, segment },
        )),
        None => Ok(()),
    }
}

/// Refuses a journal that is gone (no directory, or nothing in it) while
/// the catalog holds `queries` queries: every open of a store leaves a
/// segment (compaction never removes the newest; a repair that drops a
/// whole segment leaves its damaged bytes beside it), and a query is
/// registered only once the store is open, so this is a journal deleted
/// under the catalog, and opening it would make an empty one.
pub(crate) fn check_journal(dir: &Path, queries: usize) -> Result<(), StoreError> {
    if queries == 0 {
        return Ok(());
    }
    let journal = dir.join(JOURNAL_DIR);
    let holds_anything =
        std::fs::read_dir(&journal).is_ok_and(|mut entries| entries.next().is_some());
    if holds_anything {
        return Ok(());
    }
    Err(StoreError::new(
        dir,
        StoreErrorKind::JournalLost { journal, queries },
    ))
}

/// Makes the database's files (creating the database file when missing)
/// [`FILE_MODE`]: SQLite makes its `-wal` and `-shm` files with the
/// database file's mode.
fn private_database(dir: &Path) -> Result<(), StoreError> {
    let db = dir.join(DB_FILE);
    private_file(&db).map_err(|kind| StoreError::new(dir, kind))?;
    for suffix in ["-wal", "-shm"] {
        let path = dir.join(format!("{DB_FILE}{suffix}"));
        // SQLite opens them by name, following a link.
        refuse_link(&path).map_err(|kind| StoreError::new(dir, kind))?;
        restrict(&path);
    }
    Ok(())
}

/// Opens the database for writing, creating or checking its schema.
pub(crate) fn open_writer(dir: &Path, options: &StoreOptions) -> Result<Connection, StoreError> {
    let err = |e: rusqlite::Error| StoreError::new(dir, classify(&e));
    check_catalog(dir)?;
    private_database(dir)?;
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
        return Err(StoreError::new(dir, StoreErrorKind::NoWal { mode }));
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
        // A database with no tables is as empty as none.
        if let Some(segment) = journal_records(dir) {
            let catalog = dir.join(DB_FILE);
            return Err(StoreError::new(
                dir,
                StoreErrorKind::CatalogLost { catalog, segment },
            ));
        }
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

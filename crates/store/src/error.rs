//! Why the store could not do what it was asked: always with the store's
//! path, so that a message on its own says which directory to look at.

use std::io;
use std::path::{Path, PathBuf};

/// An error of the store: the store's directory and what went wrong there.
#[derive(Debug, Clone, thiserror::Error)]
#[error("state store {}: {kind}", path.display())]
pub struct StoreError {
    path: PathBuf,
    kind: StoreErrorKind,
}

impl StoreError {
    /// The error `kind` about the file or directory `path`.
    pub fn new(path: &Path, kind: StoreErrorKind) -> StoreError {
        StoreError {
            path: path.to_owned(),
            kind,
        }
    }

    /// The store's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What went wrong.
    pub fn kind(&self) -> &StoreErrorKind {
        &self.kind
    }
}

/// What went wrong in a store.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// The directory does not exist and the store was opened without
    /// `create`.
    #[error("no such directory: create it, or start once with a new store")]
    Missing,
    /// The path exists but is not a directory.
    #[error("not a directory: give --state a directory")]
    NotADirectory,
    /// The directory could not be created.
    #[error("cannot create the directory: {0}")]
    Create(String),
    /// Another process holds the store (its directory is locked).
    #[error(
        "in use by another process{}: only one server may use a state directory; stop that \
         one, or give --state another directory",
        pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    Locked {
        /// The holder's process id, as it wrote it in the lock file.
        pid: Option<u32>,
    },
    /// The database is missing or empty while the journal holds records:
    /// opening it would forget every query without a word.
    #[error(
        "the catalog {} is missing or empty, but the journal holds records ({}): starting \
         would forget every query; restore the catalog from a backup, or move the journal \
         directory aside to start without its queries and instants",
        catalog.display(),
        segment.display()
    )]
    CatalogLost {
        /// The database file.
        catalog: PathBuf,
        /// A journal segment that holds records.
        segment: PathBuf,
    },
    /// The journal is gone (no directory, or nothing in it) while the
    /// catalog holds queries: opening it would make an empty one, and their
    /// results, checkpoints and instants would be forgotten without a word.
    #[error(
        "the journal {} is missing or empty, but the catalog holds {queries} \
         quer{}: starting would forget their results and every instant ingested for them; \
         restore the journal from a backup, or give --state a new directory to start without \
         them",
        journal.display(),
        if *queries == 1 { "y" } else { "ies" }
    )]
    JournalLost {
        /// The journal's directory.
        journal: PathBuf,
        /// How many queries the catalog holds.
        queries: usize,
    },
    /// A file of the catalog (the database or its `-wal`) was deleted or
    /// replaced while the store ran: SQLite writes on through its open
    /// descriptors, to a file no restart reads, so nothing more is
    /// recorded.
    #[error(
        "{} was deleted or replaced while the server ran: nothing more is recorded; restart \
         the server (restore the catalog from a backup if it is gone)",
        path.display()
    )]
    CatalogGone {
        /// The file.
        path: PathBuf,
    },
    /// A file or directory of the store could not be read, written or
    /// synced (permissions, a full disk, a read-only file system, an I/O
    /// error): the operation and the path say which.
    #[error("cannot {action} {}: {message}{}", path.display(), io_hint(*kind))]
    Io {
        /// What was being done: `read`, `write`, `sync`, `create`, …
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The kind of the I/O error.
        kind: io::ErrorKind,
        /// The I/O error's text.
        message: String,
    },
    /// A file of the store is a symbolic link: in a directory others can
    /// write to, a planted link would have the store write the file it
    /// names.
    #[error(
        "{} is a symbolic link: the store's files must be its own; remove the link, or give \
         --state a directory of its own",
        path.display()
    )]
    Link {
        /// The link.
        path: PathBuf,
    },
    /// SQLite could not open or write the database (permissions, a full
    /// disk, a read-only file system).
    #[error("cannot open or write the database: {0}")]
    Unwritable(String),
    /// The database is locked by another connection (a tool that has it
    /// open in a transaction): SQLite's own lock, not the directory's.
    #[error(
        "the database is locked by another connection ({0}): close the tool that holds it open, \
         then start again"
    )]
    CatalogBusy(String),
    /// The file system cannot hold SQLite's write-ahead log (some network
    /// file systems).
    #[error(
        "the database cannot use a write-ahead log (its journal mode stays {mode:?}): give \
         --state a directory on a local file system"
    )]
    NoWal {
        /// The journal mode SQLite kept.
        mode: String,
    },
    /// The database file is damaged or is not a database.
    #[error("the database is corrupt ({0}): restore it from a backup or move it away")]
    Corrupt(String),
    /// The database was written by a version of mfstream with another
    /// schema.
    #[error(
        "the database has schema version {found}, but this mfstream reads version {expected}: \
         use the mfstream that wrote it, or a new directory"
    )]
    SchemaVersion {
        /// The version found.
        found: i64,
        /// The version this build reads and writes.
        expected: i64,
    },
    /// The database holds something else.
    #[error("the database is not an mfstream state store: give --state a directory of its own")]
    NotAStore,
    /// A record is over its bound.
    #[error("{what} is {size} bytes or items, more than the {max} allowed")]
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// Its size.
        size: usize,
        /// The bound.
        max: usize,
    },
    /// A query registered with the lock of another property than its own.
    #[error(
        "query {query:?} reads {property:?}, but the lock held is {held:?}'s: register it with \
         its own property's lock"
    )]
    WrongLock {
        /// The query.
        query: String,
        /// The property it reads, `collection/feature/property`.
        property: String,
        /// The property of the lock held.
        held: String,
    },
    /// A registration body that is not JSON.
    #[error("the registration of query {query:?} is not JSON: {message}")]
    NotJson {
        /// The query.
        query: String,
        /// The JSON parser's error.
        message: String,
    },
    /// An instant whose number is not finite (NaN, an infinity).
    #[error("the instant at {datetime} has the value {value}: only finite numbers are kept")]
    NotFinite {
        /// The instant's datetime.
        datetime: String,
        /// Its value.
        value: f64,
    },
    /// An instant whose position has a coordinate that is not finite.
    #[error(
        "the instant at {datetime} has the coordinates {coordinates}: only finite numbers are kept"
    )]
    NotFinitePosition {
        /// The instant's datetime.
        datetime: String,
        /// Its coordinates, as JSON.
        coordinates: String,
    },
    /// An instant whose value is an extent: a window's result, never an
    /// instant's.
    #[error(
        "the instant at {0} has an extent as its value: an extent is a window's result, never an \
         instant's"
    )]
    ExtentInstant(String),
    /// No query has this id.
    #[error("no query {0:?}")]
    UnknownQuery(String),
    /// A query with this id is registered already.
    #[error("the query {0:?} is registered already")]
    DuplicateQuery(String),
    /// Events must continue a query's ids without a gap or a repeat.
    #[error(
        "the events of query {query:?} continue from event {last}, but the next given is {got}"
    )]
    EventOutOfOrder {
        /// The query.
        query: String,
        /// The last event id stored.
        last: u64,
        /// The id given.
        got: u64,
    },
    /// A checkpoint may not move backwards or past the events stored.
    #[error("checkpoint of query {query:?} rejected: {why}")]
    BadCheckpoint {
        /// The query.
        query: String,
        /// Why.
        why: CheckpointFault,
    },
    /// A stored row could not be read back.
    #[error("a stored record is malformed: {0}")]
    Malformed(String),
    /// The database failed.
    #[error("database error: {0}")]
    Database(String),
    /// A journal segment is damaged where no unfinished write could have
    /// left it (records that check follow the damage, or a record checks
    /// but makes no sense): refused rather than cut, so that no record
    /// that checks is dropped unseen.
    #[error(
        "journal segment {} is damaged at byte {offset} ({why}), and it is not an unfinished \
         write: see `mfstream state check` on the directory, then `mfstream state repair` keeps \
         every record that checks and moves the damaged bytes aside",
        segment.display()
    )]
    JournalDamaged {
        /// The segment file.
        segment: PathBuf,
        /// Where the damage starts.
        offset: u64,
        /// What is wrong there.
        why: String,
    },
    /// A journal segment of another format version.
    #[error(
        "journal segment {} has format version {found}, but this mfstream reads version \
         {expected}: use the mfstream that wrote it, or a new directory",
        segment.display()
    )]
    JournalVersion {
        /// The segment file.
        segment: PathBuf,
        /// The version found.
        found: u32,
        /// The version this build reads and writes.
        expected: u32,
    },
    /// A segment the journal's manifest lists is not in its directory (it
    /// was deleted by hand, or lost): opening without it would lose the
    /// acknowledged instants and results it held without a word.
    #[error(
        "journal segment {} is missing: the journal's manifest {} lists it, and the instants and \
         results it held were acknowledged; restore it from a backup of the state directory, or, \
         to accept their loss, remove {} (the journal then opens with the segments present and \
         lists them anew)",
        segment.display(),
        manifest.display(),
        manifest.display()
    )]
    SegmentMissing {
        /// The segment file that should be there.
        segment: PathBuf,
        /// The manifest that lists it.
        manifest: PathBuf,
    },
    /// The journal's manifest does not check (cut short, overwritten): the
    /// segments that should exist are not known.
    #[error(
        "the journal's manifest {} is damaged ({why}): restore it from a backup of the state \
         directory, or remove it to open the journal with the segments present (a segment \
         deleted by hand would then go unnoticed: check that none is missing first)",
        manifest.display()
    )]
    ManifestDamaged {
        /// The manifest file.
        manifest: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The open journal segment was deleted under the running store (the
    /// state directory removed): nothing more is acknowledged.
    #[error(
        "journal segment {} was deleted: nothing more is written; restart the server on a \
         state directory",
        segment.display()
    )]
    SegmentDeleted {
        /// The segment.
        segment: PathBuf,
    },
    /// The journal directory was replaced by another under the running
    /// store (a restore from a backup): nothing more is acknowledged.
    #[error(
        "the journal directory {} was replaced by another: nothing more is written; restart the \
         server on a state directory",
        journal.display()
    )]
    JournalReplaced {
        /// The journal directory.
        journal: PathBuf,
    },
    /// The journal directory cannot be looked at any more: nothing more is
    /// acknowledged.
    #[error(
        "the journal directory {} is gone ({message}): nothing more is written; restart the \
         server on a state directory",
        journal.display()
    )]
    JournalGone {
        /// The journal directory.
        journal: PathBuf,
        /// Why it cannot be looked at.
        message: String,
    },
    /// The journal directory or a catalog file cannot be looked at for
    /// want of permission (a `chmod` of the state directory or one above
    /// it): whether it is still the one opened is unknown, so nothing is
    /// written (or acknowledged) until it can be looked at again. Not for
    /// good: once it can, and it is the directory opened (same device and
    /// inode), writes resume without a restart.
    #[error(
        "{} cannot be reached ({message}): nothing is written meanwhile; give the server's user \
         access to the state directory again (chmod/chown it), and writes resume without a \
         restart",
        path.display()
    )]
    Unreachable {
        /// The directory or file that cannot be looked at.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// A thread of the store could not be started or stopped before
    /// finishing its work.
    #[error("the store's {name} thread could not run: {message}")]
    Thread {
        /// Which thread: `writer`, `journal`, `restore`.
        name: &'static str,
        /// Why.
        message: String,
    },
    /// The store's writer has stopped (the store was closed, or its
    /// database failed for good).
    #[error("the store is closed")]
    Closed,
}

/// Why a checkpoint was rejected ([`StoreErrorKind::BadCheckpoint`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointFault {
    /// It is past the events stored.
    #[error("it is at event {at}, but the last event stored is {last}")]
    PastEvents {
        /// The checkpoint's last event id.
        at: u64,
        /// The last event id stored (with the events given).
        last: u64,
    },
    /// It moves backwards.
    #[error(
        "it moves back from instant {from_seq} and event {from_event} to instant {to_seq} and \
         event {to_event}"
    )]
    Backwards {
        /// The stored checkpoint's instant.
        from_seq: u64,
        /// The stored checkpoint's event.
        from_event: u64,
        /// The new checkpoint's instant.
        to_seq: u64,
        /// The new checkpoint's event.
        to_event: u64,
    },
    /// It is past the instants logged.
    #[error("it is after instant {after}, but the last instant logged is {last}")]
    PastInstants {
        /// The checkpoint's instant.
        after: u64,
        /// The last instant logged.
        last: u64,
    },
}

impl StoreErrorKind {
    /// `action` on `path` failed with `e`.
    pub fn io(action: &'static str, path: &Path, e: &io::Error) -> StoreErrorKind {
        StoreErrorKind::Io {
            action,
            path: path.to_owned(),
            kind: e.kind(),
            message: e.to_string(),
        }
    }
}

/// What to do about an I/O error of `kind`, when there is something to
/// suggest.
fn io_hint(kind: io::ErrorKind) -> &'static str {
    match kind {
        io::ErrorKind::PermissionDenied => {
            ": the state directory and its files must be the server's user's (chmod/chown them)"
        }
        io::ErrorKind::StorageFull => ": free some space on its file system",
        io::ErrorKind::ReadOnlyFilesystem => ": give --state a directory on a writable file system",
        _ => "",
    }
}

/// The kind of a SQLite error: damage, permissions, another connection's
/// lock, a row that does not read back as written, or anything else.
pub(crate) fn classify(e: &rusqlite::Error) -> StoreErrorKind {
    use rusqlite::ErrorCode as C;
    if matches!(
        e,
        rusqlite::Error::InvalidColumnType(..)
            | rusqlite::Error::FromSqlConversionFailure(..)
            | rusqlite::Error::IntegralValueOutOfRange(..)
    ) {
        return StoreErrorKind::Malformed(e.to_string());
    }
    match e.sqlite_error_code() {
        Some(C::NotADatabase | C::DatabaseCorrupt) => StoreErrorKind::Corrupt(e.to_string()),
        Some(C::DatabaseBusy | C::DatabaseLocked) => StoreErrorKind::CatalogBusy(e.to_string()),
        Some(
            C::ReadOnly | C::CannotOpen | C::PermissionDenied | C::DiskFull | C::SystemIoFailure,
        ) => StoreErrorKind::Unwritable(e.to_string()),
        _ => StoreErrorKind::Database(e.to_string()),
    }
}

//! The writer: one thread owns the database connection and commits the
//! registrations, statuses and deletions queued (group commit), then
//! acknowledges each caller. The hot records (instants, events,
//! checkpoints) go to the journal instead, without this thread.
//!
//! The queue is bounded, so callers wait (backpressure) instead of memory
//! growing. The writer keeps the ids of the queries it holds, to refuse a
//! duplicate or an unknown one without reading the database back. A job is
//! written inside a savepoint (so that one bad job fails alone); if a
//! commit fails, every job of the batch gets the error and the ids are
//! reloaded from the database.
//!
//! A commit is acknowledged only while the catalog's files are still the
//! ones opened ([`CatalogFiles`]): one deleted or replaced under the store
//! would take every later commit along, unseen. A file that cannot be
//! looked at for want of permission (a `chmod` of the state directory) is
//! not taken for lost: the batch is refused before anything is written
//! ([`StoreErrorKind::Unreachable`]), and the writer takes jobs again once
//! the files can be looked at and are the ones opened.

use std::collections::HashSet;
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use rusqlite::{Connection, params};
use tokio::sync::{mpsc, oneshot};

use super::error::{StoreErrorKind, classify};
use super::record::{NewQuery, PropertyPath};
use mfstream_model::QueryStatus;

/// The most jobs one transaction takes.
const MAX_JOBS_PER_COMMIT: usize = 4096;

/// The answer to one job.
pub(crate) type Ack<T> = oneshot::Sender<Result<T, StoreErrorKind>>;

/// One request to the writer.
#[derive(Debug)]
pub(crate) enum Job {
    /// A new query, reading the instants logged after `start_seq`.
    Register {
        query: NewQuery,
        start_seq: u64,
        ack: Ack<()>,
    },
    Status {
        id: String,
        status: QueryStatus,
        ack: Ack<()>,
    },
    Delete {
        id: String,
        ack: Ack<()>,
    },
}

impl Job {
    /// About the bytes the job holds and writes.
    pub(crate) fn size(&self) -> usize {
        match self {
            Job::Register { query, .. } => query.spec.len() + 128,
            Job::Status { .. } | Job::Delete { .. } => 128,
        }
    }

    fn ack(self) -> Ack<()> {
        match self {
            Job::Register { ack, .. } | Job::Status { ack, .. } | Job::Delete { ack, .. } => ack,
        }
    }
}

pub(crate) struct Writer {
    conn: Connection,
    queries: HashSet<String>,
    files: CatalogFiles,
    /// Set once a file of the catalog is lost: every later job fails.
    gone: Option<StoreErrorKind>,
    /// Whether a file could not be looked at, at the last look: said in
    /// the log once when it starts, once when it ends.
    unreachable: bool,
}

/// Why the catalog's files are not, or not known to be, the ones opened.
enum Trouble {
    /// A file cannot be looked at for now: nothing is written meanwhile.
    Unreachable(StoreErrorKind),
    /// A file was deleted or replaced, for good; `rescued` when everything
    /// committed so far is in the database as named all the same.
    Lost { kind: StoreErrorKind, rescued: bool },
}

/// The catalog's database and its `-wal`, as opened (device, inode).
///
/// SQLite writes through the descriptors it opened: a database or log
/// deleted (or replaced by another file) while it runs takes every later
/// commit to a file no restart reads, and a lost `-wal` takes the commits
/// not yet copied into the database too.
#[derive(Debug)]
pub(crate) struct CatalogFiles {
    db: PathBuf,
    wal: PathBuf,
    db_id: Option<(u64, u64)>,
    /// `None` until the log exists.
    wal_id: Option<(u64, u64)>,
    /// While set, looking at a file is refused with `EACCES`, as the
    /// kernel does for anyone but root after a `chmod 000` of the
    /// directory (tests run as root).
    #[cfg(test)]
    denied: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl CatalogFiles {
    /// The files of the database at `db`, as they are now.
    pub(crate) fn new(db: PathBuf) -> CatalogFiles {
        let mut wal = db.clone().into_os_string();
        wal.push("-wal");
        let wal = PathBuf::from(wal);
        CatalogFiles {
            db_id: file_id(&db).ok(),
            wal_id: file_id(&wal).ok(),
            db,
            wal,
            #[cfg(test)]
            denied: Default::default(),
        }
    }

    /// The identity of `path`, as it is now.
    fn id(&self, path: &std::path::Path) -> std::io::Result<(u64, u64)> {
        #[cfg(test)]
        if self.denied.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(ErrorKind::PermissionDenied.into());
        }
        file_id(path)
    }

    /// The file no longer the one opened, if any (`Ok`), or the file that
    /// cannot be looked at for want of permission and why (`Err`).
    fn lost(&mut self) -> Result<Option<&PathBuf>, (&PathBuf, std::io::Error)> {
        match self.id(&self.db) {
            Err(e) if e.kind() == ErrorKind::PermissionDenied => return Err((&self.db, e)),
            now if now.as_ref().ok() != self.db_id.as_ref() => return Ok(Some(&self.db)),
            _ => {}
        }
        match (self.wal_id, self.id(&self.wal)) {
            (_, Err(e)) if e.kind() == ErrorKind::PermissionDenied => return Err((&self.wal, e)),
            (None, now) => self.wal_id = now.ok(),
            (Some(then), now) if now.as_ref().ok() != Some(&then) => return Ok(Some(&self.wal)),
            _ => {}
        }
        Ok(None)
    }
}

fn file_id(path: &std::path::Path) -> std::io::Result<(u64, u64)> {
    std::fs::metadata(path).map(|m| (m.dev(), m.ino()))
}

fn db(e: rusqlite::Error) -> StoreErrorKind {
    classify(&e)
}

impl Writer {
    /// A writer on `conn` (whose files are `files`), with the ids of the
    /// queries it holds.
    pub(crate) fn new(conn: Connection, files: CatalogFiles) -> Result<Writer, StoreErrorKind> {
        let mut writer = Writer {
            conn,
            queries: HashSet::new(),
            files,
            gone: None,
            unreachable: false,
        };
        writer.load()?;
        Ok(writer)
    }

    fn load(&mut self) -> Result<(), StoreErrorKind> {
        let mut stmt = self.conn.prepare("SELECT id FROM queries").map_err(db)?;
        let ids = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(db)?
            .collect::<Result<HashSet<_>, _>>()
            .map_err(db)?;
        drop(stmt);
        self.queries = ids;
        Ok(())
    }

    /// Commits batches until every sender is gone.
    pub(crate) fn run(mut self, mut jobs: mpsc::Receiver<Job>) {
        let mut batch = Vec::new();
        while let Some(first) = jobs.blocking_recv() {
            batch.push(first);
            while batch.len() < MAX_JOBS_PER_COMMIT {
                match jobs.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
            self.commit(&mut batch);
        }
        // Leave a small WAL behind: the next open starts quickly.
        if let Err(e) = self.conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)") {
            tracing::debug!("no checkpoint of the state store's log at close: {e}");
        }
    }

    /// Looks at the catalog's files. When one was lost since the last look,
    /// the writer is done for good, and when the database itself is still
    /// the one opened (the log alone was lost), a checkpoint copies what was
    /// committed into it. A file that cannot be looked at is reported, not
    /// taken for lost.
    fn look(&mut self) -> Result<(), Trouble> {
        let path = match self.files.lost() {
            Ok(None) => {
                if std::mem::take(&mut self.unreachable) {
                    tracing::warn!(
                        "the catalog {} can be reached again and is the one opened: writes resume",
                        self.files.db.display()
                    );
                }
                return Ok(());
            }
            Ok(Some(path)) => path.clone(),
            Err((path, e)) => {
                let kind = StoreErrorKind::Unreachable {
                    path: path.clone(),
                    message: e.to_string(),
                };
                if !std::mem::replace(&mut self.unreachable, true) {
                    tracing::error!("the state directory's permissions changed: {kind}");
                }
                return Err(Trouble::Unreachable(kind));
            }
        };
        let db_kept = path != self.files.db;
        let kind = StoreErrorKind::CatalogGone { path };
        tracing::error!("the state store: {kind}");
        let rescued = db_kept
            && match self
                .conn
                .query_row("PRAGMA wal_checkpoint(FULL)", [], |r| r.get::<_, i64>(0))
            {
                Ok(0) => true,
                Ok(_) => false,
                Err(e) => {
                    tracing::error!("cannot copy the lost log into the catalog: {e}");
                    false
                }
            };
        if rescued {
            tracing::warn!(
                "what was committed to the lost log is copied into {}",
                self.files.db.display()
            );
        }
        self.gone = Some(kind.clone());
        Err(Trouble::Lost { kind, rescued })
    }

    /// Writes `batch` in one transaction, then answers every job.
    fn commit(&mut self, batch: &mut Vec<Job>) {
        let refused = self.gone.clone().or_else(|| match self.look() {
            Ok(()) => None,
            Err(Trouble::Unreachable(e) | Trouble::Lost { kind: e, .. }) => Some(e),
        });
        if let Some(e) = refused {
            for job in batch.drain(..) {
                let _ = job.ack().send(Err(e.clone()));
            }
            return;
        }
        if let Err(e) = self.conn.execute_batch("BEGIN IMMEDIATE") {
            let e = db(e);
            for job in batch.drain(..) {
                let _ = job.ack().send(Err(e.clone()));
            }
            return;
        }
        let mut answers = Vec::with_capacity(batch.len());
        for job in batch.drain(..) {
            answers.push(self.apply_in_savepoint(job));
        }
        match self.conn.execute_batch("COMMIT").map_err(db) {
            Ok(()) => {
                // Lost during the commit: acknowledged only if the commit
                // still reached the database as named. One that cannot be
                // looked at now was the one opened just before `BEGIN`: the
                // commit went to it, and is acknowledged (answering an
                // error would be untrue: it is read back at the next start).
                let lost = match self.look() {
                    Err(Trouble::Lost {
                        kind,
                        rescued: false,
                    }) => Some(kind),
                    Err(Trouble::Lost { rescued: true, .. } | Trouble::Unreachable(_)) | Ok(()) => {
                        None
                    }
                };
                for (ack, result) in answers {
                    let result = match &lost {
                        Some(e) => Err(e.clone()),
                        None => result,
                    };
                    // A caller that gave up waiting no longer wants the answer.
                    let _ = ack.send(result);
                }
            }
            Err(e) => {
                tracing::error!("the state store could not commit: {e}");
                let _ = self.conn.execute_batch("ROLLBACK");
                if let Err(reload) = self.load() {
                    tracing::error!("the state store could not reload its cache: {reload}");
                }
                for (ack, _) in answers {
                    let _ = ack.send(Err(e.clone()));
                }
            }
        }
    }

    fn apply_in_savepoint(&mut self, job: Job) -> (Ack<()>, Result<(), StoreErrorKind>) {
        if let Err(e) = self.run_cached("SAVEPOINT job") {
            return (job.ack(), Err(db(e)));
        }
        let (ack, result) = match job {
            Job::Register {
                query,
                start_seq,
                ack,
            } => (ack, self.register(query, start_seq)),
            Job::Status { id, status, ack } => (ack, self.status(&id, &status)),
            Job::Delete { id, ack } => (ack, self.delete(&id)),
        };
        if result.is_err()
            && let Err(e) = self.run_cached("ROLLBACK TO job")
        {
            tracing::warn!("the state store could not roll back a failed job: {e}");
        }
        if let Err(e) = self.run_cached("RELEASE job") {
            tracing::warn!("the state store could not release a savepoint: {e}");
        }
        (ack, result)
    }

    /// Runs a statement without parameters, prepared once.
    fn run_cached(&self, sql: &str) -> Result<(), rusqlite::Error> {
        self.conn.prepare_cached(sql)?.execute([]).map(drop)
    }

    fn property_id(&mut self, p: &PropertyPath) -> Result<i64, StoreErrorKind> {
        self.conn
            .prepare_cached(
                "INSERT OR IGNORE INTO properties (collection, feature, property) VALUES (?1, ?2, ?3)",
            )
            .and_then(|mut s| s.execute(params![p.collection, p.feature, p.property]))
            .map_err(db)?;
        self.conn
            .prepare_cached(
                "SELECT id FROM properties WHERE collection = ?1 AND feature = ?2 AND property = ?3",
            )
            .and_then(|mut s| {
                s.query_row(params![p.collection, p.feature, p.property], |r| r.get(0))
            })
            .map_err(db)
    }

    fn register(&mut self, query: NewQuery, start_seq: u64) -> Result<(), StoreErrorKind> {
        if self.queries.contains(&query.id) {
            return Err(StoreErrorKind::DuplicateQuery(query.id));
        }
        let property = self.property_id(&query.property)?;
        let created_ms = query
            .created
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        self.conn
            .prepare_cached(
                "INSERT INTO queries (id, property, spec, engine, status, reason, created_ms, \
                 start_seq) VALUES (?1, ?2, ?3, ?4, 'running', NULL, ?5, ?6)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    query.id,
                    property,
                    query.spec,
                    query.engine,
                    created_ms,
                    start_seq
                ])
            })
            .map_err(db)?;
        self.queries.insert(query.id);
        Ok(())
    }

    fn status(&mut self, id: &str, status: &QueryStatus) -> Result<(), StoreErrorKind> {
        if !self.queries.contains(id) {
            return Err(StoreErrorKind::UnknownQuery(id.to_owned()));
        }
        let reason = match status {
            QueryStatus::Failed { reason } => Some(reason.as_str()),
            _ => None,
        };
        self.conn
            .prepare_cached("UPDATE queries SET status = ?1, reason = ?2 WHERE id = ?3")
            .and_then(|mut s| s.execute(params![status.name(), reason, id]))
            .map(drop)
            .map_err(db)
    }

    fn delete(&mut self, id: &str) -> Result<(), StoreErrorKind> {
        if !self.queries.contains(id) {
            return Err(StoreErrorKind::UnknownQuery(id.to_owned()));
        }
        self.conn
            .prepare_cached("DELETE FROM queries WHERE id = ?1")
            .and_then(|mut s| s.execute([id]))
            .map(drop)
            .map_err(db)?;
        self.queries.remove(id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::StoreOptions;
    use crate::schema;
    use crate::tests::{TempDir, query};

    /// Commits one job and gives its answer.
    fn commit(writer: &mut Writer, job: impl FnOnce(Ack<()>) -> Job) -> Result<(), StoreErrorKind> {
        let (ack, mut answer) = oneshot::channel();
        writer.commit(&mut vec![job(ack)]);
        answer.try_recv().expect("answered at the commit")
    }

    fn status(writer: &Writer) -> String {
        writer
            .conn
            .query_row("SELECT status FROM queries WHERE id = 'q'", [], |r| {
                r.get(0)
            })
            .unwrap()
    }

    #[test]
    fn a_catalog_that_cannot_be_looked_at_refuses_jobs_until_it_can_and_is_not_taken_for_lost() {
        let dir = TempDir::new("writer-unreachable");
        std::fs::create_dir_all(dir.path()).unwrap();
        let conn = schema::open_writer(dir.path(), &StoreOptions::default()).unwrap();
        let files = CatalogFiles::new(dir.path().join(schema::DB_FILE));
        let denied = files.denied.clone();
        let mut writer = Writer::new(conn, files).unwrap();
        commit(&mut writer, |ack| Job::Register {
            query: query("q"),
            start_seq: 0,
            ack,
        })
        .unwrap();

        denied.store(true, Ordering::Relaxed);
        let stopped = |ack| Job::Status {
            id: "q".into(),
            status: QueryStatus::Stopped,
            ack,
        };
        let err = commit(&mut writer, stopped).unwrap_err();
        assert!(
            matches!(&err, StoreErrorKind::Unreachable { path, .. } if path.ends_with(schema::DB_FILE)),
            "{err}"
        );
        assert_eq!(status(&writer), "running", "nothing was written");

        denied.store(false, Ordering::Relaxed);
        commit(&mut writer, stopped).unwrap();
        assert_eq!(status(&writer), "stopped");
        assert!(writer.gone.is_none());
    }
}

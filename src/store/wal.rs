//! Keeping the write-ahead log short without stalling the writer.
//!
//! SQLite's automatic checkpoint runs inside the commit that crosses its
//! threshold: it copies the log into the database and fsyncs both, while
//! every caller waits for that commit. Measured here, that cost durable
//! ingest two thirds of its throughput. So the writer's automatic
//! checkpoint is off, and a checkpointer thread with its own connection
//! runs `PASSIVE` checkpoints (which never block the writer) whenever the
//! writer says it has committed. Under a steady load a passive checkpoint
//! may never catch up with the log's end, and SQLite only rewinds a log
//! that was copied whole; so once the log passes [`REWIND_FRAMES`] the
//! writer itself runs a `RESTART` checkpoint, which has little left to copy
//! and lets the log start over. The log stays bounded either way.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;

use rusqlite::{Connection, OpenFlags};

use super::error::{StoreError, StoreErrorKind, classify};
use super::schema::DB_FILE;

/// The log's length, in pages, past which the writer rewinds it.
pub(crate) const REWIND_FRAMES: i64 = 4096;

/// The bytes committed between two wake-ups of the checkpointer: fewer,
/// larger checkpoints cost fewer fsyncs than one per commit.
const WAKE_EVERY_BYTES: usize = 4 * 1024 * 1024;

/// The writer's side of the checkpointer.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    wake: Option<SyncSender<()>>,
    /// The log's length in pages, as the last checkpoint saw it.
    frames: Arc<AtomicI64>,
    thread: Option<JoinHandle<()>>,
    /// Bytes committed since the last wake-up.
    pending: usize,
}

impl Checkpointer {
    /// Starts the checkpointer on its own connection to the database in
    /// `dir`.
    pub(crate) fn start(dir: &Path) -> Result<Checkpointer, StoreError> {
        let err = |e: rusqlite::Error| StoreError::new(dir, classify(&e));
        let conn = Connection::open_with_flags(
            dir.join(DB_FILE),
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(err)?;
        conn.execute_batch("PRAGMA wal_autocheckpoint = 0")
            .map_err(err)?;
        let (wake, woken) = sync_channel::<()>(1);
        let frames = Arc::new(AtomicI64::new(0));
        let seen = frames.clone();
        let thread = std::thread::Builder::new()
            .name("mfstream-store-checkpoint".into())
            .spawn(move || {
                while woken.recv().is_ok() {
                    let result = conn
                        .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get::<_, i64>(1));
                    match result {
                        Ok(log) => seen.store(log, Ordering::Relaxed),
                        Err(e) => tracing::debug!("passive checkpoint skipped: {e}"),
                    }
                }
            })
            .map_err(|e| StoreError::new(dir, StoreErrorKind::Database(e.to_string())))?;
        Ok(Checkpointer {
            wake: Some(wake),
            frames,
            thread: Some(thread),
            pending: 0,
        })
    }

    /// After a commit of about `bytes` of records: wakes the checkpointer
    /// when enough has been committed since it last ran, and rewinds the log
    /// from the writer's connection when it has grown past its bound.
    pub(crate) fn committed(&mut self, conn: &Connection, bytes: usize) {
        self.pending += bytes;
        if self.pending >= WAKE_EVERY_BYTES
            && let Some(wake) = &self.wake
        {
            self.pending = 0;
            match wake.try_send(()) {
                // Full: a wake-up is pending already.
                Ok(()) | Err(TrySendError::Full(())) => {}
                Err(TrySendError::Disconnected(())) => {
                    tracing::warn!("the state store's checkpointer has stopped");
                }
            }
        }
        if self.frames.load(Ordering::Relaxed) >= REWIND_FRAMES {
            match conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |r| r.get::<_, i64>(1)) {
                Ok(log) => self.frames.store(log, Ordering::Relaxed),
                Err(e) => tracing::debug!("log rewind skipped: {e}"),
            }
        }
    }

    /// Stops the checkpointer and waits for it.
    pub(crate) fn stop(&mut self) {
        self.wake = None;
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("the state store's checkpointer panicked");
        }
    }
}

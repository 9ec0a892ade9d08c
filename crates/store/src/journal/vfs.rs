//! The journal's view of the file system: a small trait, so that a test
//! double can stand in for the disk and lose what was never synced, as a
//! power cut would (SQLite's crash tests do the same with their VFS).
//!
//! Only what the journal does is here: segment files read and written at
//! offsets, cut, synced; a directory listed, synced, and recognised.

use std::fmt::Debug;
use std::io;
use std::path::Path;
use std::sync::Arc;

/// A segment file, open for reading and writing.
pub(crate) trait SegFile: Send + Sync + Debug {
    /// Fills `buf` from `offset`; an error when the file ends before.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `buf` at `offset`.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Cuts (or extends with zeros) the file to `len` bytes.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// The file's length.
    fn len(&self) -> io::Result<u64>;
    /// `fdatasync`: what was written is on the disk.
    fn sync(&self) -> io::Result<()>;
    /// Starts writing `len` bytes from `offset` back to the disk without
    /// waiting (`sync_file_range(SYNC_FILE_RANGE_WRITE)`), so that the
    /// sync that follows has little left to wait for. A hint: its failure
    /// changes nothing.
    fn start_writeback(&self, _offset: u64, _len: u64) {}
    /// Whether the file has no name left (its directory was deleted, or
    /// it was): a write to it would be lost at the next start.
    fn unlinked(&self) -> io::Result<bool>;
}

/// A directory of segment files.
pub(crate) trait Vfs: Send + Sync + Debug {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// The names in `dir`.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Opens `path` for reading and writing; with `create`, a new file
    /// (an error if it exists), readable and writable by its owner only.
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn SegFile>>;
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Renames `from` to `to`, replacing it.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Syncs `dir`'s entries: a file created or removed stays so.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// What identifies the directory at `dir` (device and inode): another
    /// directory put in its place has another.
    fn id(&self, dir: &Path) -> io::Result<(u64, u64)>;
}

/// The real file system.
#[derive(Debug, Default)]
pub(crate) struct OsFs;

impl SegFile for std::fs::File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(self, buf, offset)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        std::fs::File::set_len(self, len)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }

    fn sync(&self) -> io::Result<()> {
        self.sync_data()
    }

    fn start_writeback(&self, offset: u64, len: u64) {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
                return;
            };
            // SAFETY: sync_file_range only reads the descriptor, which
            // `self` keeps open for the duration of the call; it touches
            // no memory of ours.
            unsafe {
                libc::sync_file_range(self.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE);
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (offset, len);
    }

    fn unlinked(&self) -> io::Result<bool> {
        use std::os::unix::fs::MetadataExt;
        Ok(self.metadata()?.nlink() == 0)
    }
}

impl Vfs for OsFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        // The journal holds every ingest: its owner's alone.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            if let Some(name) = entry?.file_name().to_str() {
                names.push(name.to_owned());
            }
        }
        Ok(names)
    }

    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn SegFile>> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(create)
            .mode(0o600)
            .open(path)?;
        Ok(Arc::new(file))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::File::open(dir)?.sync_all()
    }

    fn id(&self, dir: &Path) -> io::Result<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(dir)?;
        Ok((meta.dev(), meta.ino()))
    }
}

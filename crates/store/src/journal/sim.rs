//! A file system that loses power, for the journal's crash tests (as
//! SQLite's crash tests do with their VFS): it keeps, per file, what was
//! synced and what was written since; at a chosen operation it "loses
//! power" (that operation and every later one fail), and its image after
//! the cut keeps what was synced plus a random part of what was not: a
//! prefix, a prefix followed by zeros, or a prefix followed by garbage in
//! its last page. Names created or removed since the directory was last
//! synced are kept or lost at random.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::vfs::{SegFile, Vfs};

/// A small seeded generator (xorshift64*): the same cut on every run.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const PAGE: usize = 4096;

#[derive(Debug, Default)]
struct Data {
    current: Vec<u8>,
    synced: Vec<u8>,
}

#[derive(Debug, Default)]
struct State {
    /// The names as they are.
    names: BTreeMap<PathBuf, Arc<Mutex<Data>>>,
    /// The names as of the last sync of their directory.
    durable: BTreeMap<PathBuf, Arc<Mutex<Data>>>,
    /// Operations that change something, so far.
    ops: u64,
    /// The operation at which the power goes.
    cut_at: Option<u64>,
    cut: bool,
}

/// The file system; clones share it.
#[derive(Debug, Clone, Default)]
pub(crate) struct SimFs {
    state: Arc<Mutex<State>>,
}

fn lost() -> io::Error {
    io::Error::other("simulated power loss")
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl SimFs {
    /// A file system whose power goes at its `at`-th changing operation.
    pub(crate) fn cut_at(at: u64) -> SimFs {
        let fs = SimFs::default();
        lock(&fs.state).cut_at = Some(at);
        fs
    }

    /// Makes the power go at the `at`-th changing operation from now.
    pub(crate) fn cut_after(&self, at: u64) {
        let mut s = lock(&self.state);
        s.cut_at = Some(s.ops + at);
    }

    /// Cuts the power now.
    pub(crate) fn cut(&self) {
        lock(&self.state).cut = true;
    }

    /// The process dies and a new one starts on the same machine, the power
    /// on: what was written stays (the kernel has it), synced or not.
    pub(crate) fn restart_process(&self) {
        let mut s = lock(&self.state);
        s.cut = false;
        s.cut_at = None;
    }

    /// Counts a changing operation; fails once the power is gone.
    fn op(&self) -> io::Result<()> {
        let mut s = lock(&self.state);
        s.ops += 1;
        if s.cut_at.is_some_and(|at| s.ops >= at) {
            s.cut = true;
        }
        if s.cut { Err(lost()) } else { Ok(()) }
    }

    fn alive(&self) -> io::Result<()> {
        if lock(&self.state).cut {
            Err(lost())
        } else {
            Ok(())
        }
    }

    /// What the disk holds after the cut, as a new file system with
    /// power: synced bytes, and a random part of the rest.
    pub(crate) fn image(&self, rng: &mut Rng) -> SimFs {
        let s = lock(&self.state);
        let mut names = BTreeMap::new();
        // A name synced stays unless it was removed since (which may or
        // may not have reached the disk); a name not synced may be there.
        for (path, data) in &s.durable {
            if !s.names.contains_key(path) && rng.below(2) == 0 {
                continue;
            }
            names.insert(path.clone(), data.clone());
        }
        for (path, data) in &s.names {
            if !s.durable.contains_key(path) && rng.below(2) == 0 {
                names.insert(path.clone(), data.clone());
            }
        }
        let mut files = BTreeMap::new();
        for (path, data) in names {
            let bytes = crashed(&lock(&data), rng);
            files.insert(
                path,
                Arc::new(Mutex::new(Data {
                    current: bytes.clone(),
                    synced: bytes,
                })),
            );
        }
        SimFs {
            state: Arc::new(Mutex::new(State {
                durable: files.clone(),
                names: files,
                ..State::default()
            })),
        }
    }
}

/// A file's bytes after a cut: what was synced, and what was written since
/// in part (a prefix; then zeros, or garbage up to the end of its page).
fn crashed(data: &Data, rng: &mut Rng) -> Vec<u8> {
    let (synced, current) = (&data.synced, &data.current);
    let common = synced
        .iter()
        .zip(current)
        .take_while(|(a, b)| a == b)
        .count();
    if current.len() <= common {
        // Cut since the sync: the cut reached the disk, or not.
        return if rng.below(2) == 0 {
            current.clone()
        } else {
            synced.clone()
        };
    }
    if synced.len() > common {
        // Rewritten in place (the journal never does): keep the synced.
        return synced.clone();
    }
    let unsynced = (current.len() - common) as u64;
    let keep = common + rng.below(unsynced + 1) as usize;
    let mut out = current[..keep].to_vec();
    match rng.below(4) {
        // A prefix only.
        0 | 1 => {}
        // The file's length reached the disk, its last pages did not.
        2 => out.resize(current.len(), 0),
        // Garbage to the end of the page.
        _ => {
            let end = (keep / PAGE + 1) * PAGE;
            let end = end.min(current.len()).max(keep);
            out.extend((keep..end).map(|_| rng.next() as u8));
        }
    }
    out
}

#[derive(Debug)]
struct SimFile {
    fs: SimFs,
    path: PathBuf,
    data: Arc<Mutex<Data>>,
}

impl SegFile for SimFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let d = lock(&self.data);
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        let end = start
            .checked_add(buf.len())
            .filter(|&end| end <= d.current.len())
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(&d.current[start..end]);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.fs.op()?;
        let mut d = lock(&self.data);
        let start = offset as usize;
        if d.current.len() < start + buf.len() {
            d.current.resize(start + buf.len(), 0);
        }
        d.current[start..start + buf.len()].copy_from_slice(buf);
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.fs.op()?;
        lock(&self.data).current.resize(len as usize, 0);
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(lock(&self.data).current.len() as u64)
    }

    fn sync(&self) -> io::Result<()> {
        self.fs.op()?;
        let mut d = lock(&self.data);
        d.synced = d.current.clone();
        Ok(())
    }

    fn unlinked(&self) -> io::Result<bool> {
        self.fs.alive()?;
        let s = lock(&self.fs.state);
        Ok(!s
            .names
            .get(&self.path)
            .is_some_and(|d| Arc::ptr_eq(d, &self.data)))
    }
}

impl Vfs for SimFs {
    fn create_dir_all(&self, _dir: &Path) -> io::Result<()> {
        self.alive()
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.alive()?;
        let s = lock(&self.state);
        Ok(s.names
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
            .collect())
    }

    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn SegFile>> {
        if create {
            self.op()?;
        } else {
            self.alive()?;
        }
        let mut s = lock(&self.state);
        let data = match (s.names.get(path), create) {
            (Some(_), true) => return Err(io::ErrorKind::AlreadyExists.into()),
            (Some(data), false) => data.clone(),
            (None, false) => return Err(io::ErrorKind::NotFound.into()),
            (None, true) => {
                let data = Arc::new(Mutex::new(Data::default()));
                s.names.insert(path.to_owned(), data.clone());
                data
            }
        };
        Ok(Arc::new(SimFile {
            fs: self.clone(),
            path: path.to_owned(),
            data,
        }))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.op()?;
        lock(&self.state)
            .names
            .remove(path)
            .map(drop)
            .ok_or_else(|| io::ErrorKind::NotFound.into())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.op()?;
        let mut s = lock(&self.state);
        let data = s.names.remove(from).ok_or(io::ErrorKind::NotFound)?;
        s.names.insert(to.to_owned(), data);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.op()?;
        let mut s = lock(&self.state);
        s.durable.retain(|p, _| p.parent() != Some(dir));
        let now: Vec<_> = s
            .names
            .iter()
            .filter(|(p, _)| p.parent() == Some(dir))
            .map(|(p, d)| (p.clone(), d.clone()))
            .collect();
        s.durable.extend(now);
        Ok(())
    }

    fn id(&self, _dir: &Path) -> io::Result<(u64, u64)> {
        self.alive()?;
        Ok((0, 1))
    }
}

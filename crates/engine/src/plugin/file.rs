//! The plugin file, before any of it is mapped: who could change it, whether
//! it is a whole shared library, and the private copy that is loaded.
//!
//! `dlopen` maps a library's segments straight from its file, so a file cut
//! short (a copy still being written, a full disk) kills the process with
//! `SIGBUS` when the missing page is first touched, with no message. And it
//! caches libraries by path, so a library rebuilt at the same path would
//! never be loaded again. The host therefore reads the file once, checks
//! those bytes ([`read_library`]), writes them to a private copy under a name
//! of its own ([`PrivateCopy`]) and loads that: what is mapped is exactly
//! what was checked, nobody else can change it, and every load is a new
//! library. The copy is removed as soon as it is loaded (the mapping keeps
//! its data).
//!
//! # Caveats
//!
//! - The copy lives in the temporary folder (`$TMPDIR`, else `/tmp`), so a
//!   plugin that finds its own dependencies through an `$ORIGIN` run path
//!   finds them there, not next to the original: give such dependencies an
//!   absolute run path or `LD_LIBRARY_PATH`. A temporary folder mounted
//!   `noexec` cannot hold the copy: point `TMPDIR` elsewhere.

use std::fs::{File, Metadata};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::error::{ElfError, PluginErrorKind};

/// The largest plugin file read.
const MAX_LIBRARY: u64 = 1 << 30;

/// Checks who could change the file at `path` or the folders that hold it,
/// then reads it and checks that it is a whole shared library.
///
/// The file must be a regular file not writable by group or others, owned
/// by root or the user running mfstream; so must every folder above it,
/// except that a folder with the sticky bit (`/tmp`) may be writable by
/// others when the entry in it is owned by root or this user (nobody else
/// can rename or remove it then).
pub(crate) fn read_library(path: &Path) -> Result<Vec<u8>, PluginErrorKind> {
    let (mut file, meta) = open_checked(path)?;
    let len = meta.len();
    if len > MAX_LIBRARY {
        return Err(PluginErrorKind::Load(format!(
            "the file is {len} bytes, more than the {MAX_LIBRARY} a plugin may have"
        )));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    Read::by_ref(&mut file)
        .take(MAX_LIBRARY + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| PluginErrorKind::Missing(e.to_string()))?;
    check_elf(&bytes).map_err(PluginErrorKind::Elf)?;
    Ok(bytes)
}

/// Opens the file after checking it and its folders; the file's own
/// metadata comes from the opened file, so it is the file that is read.
pub(crate) fn open_checked(path: &Path) -> Result<(File, Metadata), PluginErrorKind> {
    let missing = |e: io::Error| PluginErrorKind::Missing(e.to_string());
    let file = File::open(path).map_err(missing)?;
    let meta = file.metadata().map_err(missing)?;
    if !meta.is_file() {
        return Err(PluginErrorKind::NotAFile);
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(PluginErrorKind::Writable {
            mode,
            path: path.display().to_string(),
        });
    }
    if !trusted_owner(meta.uid()) {
        return Err(PluginErrorKind::Owner {
            what: "file",
            path: path.display().to_string(),
            uid: meta.uid(),
        });
    }
    check_folders(path)?;
    Ok((file, meta))
}

/// Root, or the user mfstream runs as.
fn trusted_owner(uid: u32) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    uid == 0 || uid == unsafe { libc::geteuid() }
}

/// Every folder above the (resolved) file: owned by root or this user, and
/// not writable by group or others unless sticky with a trusted entry.
fn check_folders(path: &Path) -> Result<(), PluginErrorKind> {
    let resolved = path
        .canonicalize()
        .map_err(|e| PluginErrorKind::Missing(e.to_string()))?;
    let mut entry_uid = std::fs::metadata(&resolved)
        .map_err(|e| PluginErrorKind::Missing(e.to_string()))?
        .uid();
    for folder in resolved.ancestors().skip(1) {
        let meta =
            std::fs::metadata(folder).map_err(|e| PluginErrorKind::Missing(e.to_string()))?;
        let mode = meta.permissions().mode() & 0o7777;
        let sticky = mode & 0o1000 != 0;
        if mode & 0o022 != 0 && !(sticky && trusted_owner(entry_uid)) {
            return Err(PluginErrorKind::WritableFolder {
                mode,
                folder: folder.display().to_string(),
            });
        }
        if !trusted_owner(meta.uid()) {
            return Err(PluginErrorKind::Owner {
                what: "folder",
                path: folder.display().to_string(),
                uid: meta.uid(),
            });
        }
        entry_uid = meta.uid();
    }
    Ok(())
}

/// A private copy of a checked library, removed on drop.
#[derive(Debug)]
pub(crate) struct PrivateCopy {
    path: PathBuf,
}

impl PrivateCopy {
    /// Writes `bytes` to a new file that only this user can read, under a
    /// name no other load uses.
    ///
    /// A process that dies while `dlopen` runs the library's initialisers
    /// (the point of loading it in a child first) cannot remove its copy, so
    /// each load first removes the copies of processes that are gone.
    pub(crate) fn new(bytes: &[u8], original: &Path) -> io::Result<PrivateCopy> {
        static LOADS: AtomicU64 = AtomicU64::new(0);
        let folder = std::env::temp_dir();
        remove_orphans(&folder);
        let load = LOADS.fetch_add(1, Ordering::Relaxed);
        let salt = getrandom::u64().unwrap_or(0);
        let stem = original
            .file_name()
            .map_or_else(|| "plugin".into(), |n| n.to_string_lossy().into_owned());
        let path = folder.join(format!(
            "{COPY_PREFIX}{}-{load}-{salt:016x}-{stem}",
            std::process::id()
        ));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o700)
            .open(&path)?;
        let copy = PrivateCopy { path };
        file.write_all(bytes)?;
        Ok(copy)
    }

    /// Where the copy is.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// How private copies are named: the prefix, the pid of the process that
/// loads it, then a load number, a random salt and the original name.
const COPY_PREFIX: &str = ".mfstream-";

/// Removes the private copies in `folder` of this user's processes that
/// have gone (best effort: a folder that cannot be read is left alone).
fn remove_orphans(folder: &Path) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(COPY_PREFIX)) else {
            continue;
        };
        let Some(pid) = rest
            .split('-')
            .next()
            .and_then(|p| p.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        let ours = entry
            .metadata()
            .is_ok_and(|m| m.is_file() && trusted_owner(m.uid()));
        if ours && pid > 0 && !process_exists(pid) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether process `pid` exists (a process of another user counts).
fn process_exists(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 checks for the process without sending anything.
    let alive = unsafe { libc::kill(pid, 0) } == 0;
    alive || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

impl Drop for PrivateCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `PT_LOAD`: a segment mapped from the file.
const PT_LOAD: u32 = 1;
/// `ET_DYN`: a shared object.
const ET_DYN: u16 = 3;

/// Checks that `bytes` are an ELF shared object of this machine's class and
/// byte order that holds every segment and header it names: what `dlopen`
/// would map, so that it never maps past the end of the file.
pub(crate) fn check_elf(bytes: &[u8]) -> Result<(), ElfError> {
    let elf = Elf::identify(bytes)?;
    let len = bytes.len() as u64;
    let cut = |what: &str, end: Option<u64>| ElfError::Cut {
        what: what.to_owned(),
        end: end.unwrap_or(u64::MAX),
        len,
    };
    let header = elf
        .header()
        .ok_or_else(|| cut("the ELF header", Some(elf.header_size())))?;
    if header.kind != ET_DYN {
        return Err(not_library("the ELF file is not a shared object"));
    }
    let min_phentsize = if elf.wide { 56 } else { 32 };
    if header.phnum == 0 || usize::from(header.phentsize) < min_phentsize {
        return Err(not_library("the ELF file has no program headers"));
    }
    let table_end = |off: u64, size: u16, n: u16| off.checked_add(u64::from(size) * u64::from(n));
    let ph_end = table_end(header.phoff, header.phentsize, header.phnum);
    if ph_end.is_none_or(|end| end > len) {
        return Err(cut("the program header table", ph_end));
    }
    // The section headers are not mapped, but sit at the very end of a
    // linked file: a file that lacks them was cut.
    if header.shoff != 0 && header.shnum != 0 {
        let sh_end = table_end(header.shoff, header.shentsize, header.shnum);
        if sh_end.is_none_or(|end| end > len) {
            return Err(cut("the section header table", sh_end));
        }
    }
    for i in 0..u64::from(header.phnum) {
        let at = (header.phoff + i * u64::from(header.phentsize)) as usize;
        let (kind, offset, filesz) = elf
            .program_header(at)
            .ok_or_else(|| cut("the program header table", ph_end))?;
        let end = offset.checked_add(filesz);
        if kind == PT_LOAD && end.is_none_or(|end| end > len) {
            return Err(cut(&format!("loadable segment #{}", i + 1), end));
        }
    }
    Ok(())
}

fn not_library(why: &'static str) -> ElfError {
    ElfError::NotLibrary(why)
}

/// The fields of an ELF header that say what the file must hold.
struct Header {
    kind: u16,
    phoff: u64,
    phentsize: u16,
    phnum: u16,
    shoff: u64,
    shentsize: u16,
    shnum: u16,
}

/// Fields of an ELF file in the host's byte order (checked by the caller).
struct Elf<'a> {
    bytes: &'a [u8],
    wide: bool,
}

impl<'a> Elf<'a> {
    /// The file's identification, checked against this machine's.
    fn identify(bytes: &'a [u8]) -> Result<Elf<'a>, ElfError> {
        if bytes.len() < 16 || &bytes[..4] != b"\x7fELF" {
            return Err(not_library("the file does not start with the ELF magic"));
        }
        let wide = match bytes[4] {
            1 => false,
            2 => true,
            _ => return Err(not_library("unknown ELF class")),
        };
        if wide != cfg!(target_pointer_width = "64") {
            return Err(not_library("built for a machine of another word size"));
        }
        let little = match bytes[5] {
            1 => true,
            2 => false,
            _ => return Err(not_library("unknown ELF byte order")),
        };
        if little != cfg!(target_endian = "little") {
            return Err(not_library("built for a machine of another byte order"));
        }
        Ok(Elf { bytes, wide })
    }

    fn header_size(&self) -> u64 {
        if self.wide { 64 } else { 52 }
    }

    /// The header, `None` if the file is shorter.
    fn header(&self) -> Option<Header> {
        if (self.bytes.len() as u64) < self.header_size() {
            return None;
        }
        Some(if self.wide {
            Header {
                kind: self.u16(16)?,
                phoff: self.u64(32)?,
                phentsize: self.u16(54)?,
                phnum: self.u16(56)?,
                shoff: self.u64(40)?,
                shentsize: self.u16(58)?,
                shnum: self.u16(60)?,
            }
        } else {
            Header {
                kind: self.u16(16)?,
                phoff: self.u32(28)?.into(),
                phentsize: self.u16(42)?,
                phnum: self.u16(44)?,
                shoff: self.u32(32)?.into(),
                shentsize: self.u16(46)?,
                shnum: self.u16(48)?,
            }
        })
    }

    /// The type, file offset and file size of the program header at `at`.
    fn program_header(&self, at: usize) -> Option<(u32, u64, u64)> {
        if self.wide {
            Some((self.u32(at)?, self.u64(at + 8)?, self.u64(at + 32)?))
        } else {
            let offset = self.u32(at + 4)?.into();
            Some((self.u32(at)?, offset, self.u32(at + 16)?.into()))
        }
    }

    fn field<const N: usize>(&self, at: usize) -> Option<[u8; N]> {
        self.bytes.get(at..at.checked_add(N)?)?.try_into().ok()
    }

    fn u16(&self, at: usize) -> Option<u16> {
        self.field(at).map(u16::from_ne_bytes)
    }

    fn u32(&self, at: usize) -> Option<u32> {
        self.field(at).map(u32::from_ne_bytes)
    }

    fn u64(&self, at: usize) -> Option<u64> {
        debug_assert!(self.wide, "64-bit fields exist only in 64-bit ELF files");
        self.field(at).map(u64::from_ne_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_running_binary_is_a_whole_elf_file_and_any_cut_of_it_is_not() {
        // The test binary is a position-independent executable: ET_DYN.
        let exe = std::env::current_exe().expect("the test binary's path");
        let bytes = std::fs::read(exe).expect("the test binary is readable");
        assert_eq!(check_elf(&bytes), Ok(()));
        for cut in [0, 3, 20, 63, 64, 4096, 100_000, bytes.len() - 1] {
            let error = check_elf(&bytes[..cut]).expect_err("a cut file is refused");
            assert!(
                matches!(error, ElfError::Cut { .. } | ElfError::NotLibrary(_)),
                "{cut}: {error}"
            );
            let error = error.to_string();
            assert!(
                error.contains("cut short") || error.contains("not a shared library"),
                "{cut}: {error}"
            );
        }
    }

    #[test]
    fn a_text_file_is_not_a_shared_library() {
        let error = check_elf(b"not a library\n").unwrap_err();
        assert!(matches!(error, ElfError::NotLibrary(_)), "{error}");
        assert!(error.to_string().contains("ELF magic"), "{error}");
    }
}

//! Loading a plugin library, checking everything before trusting it.
//!
//! The checks, in order; the first that fails is the error:
//!
//! 1. the file exists and is a regular file;
//! 2. it is not writable by group or others (anyone who can write it can run
//!    code in mfstream): the error says to run `chmod go-w`; nor is any
//!    folder above it (sticky folders like `/tmp` aside), and the file and
//!    its folders belong to root or the user running mfstream;
//! 3. it is a whole ELF shared library: every segment it would map is in
//!    the file (`file`), so a file cut short is an error, not a `SIGBUS`;
//! 4. a private copy of it loads (`dlopen`): see `file` for why a copy;
//! 5. it exports the entry symbol, `mfstream_plugin`;
//! 6. the descriptor's first two fields, read before anything else, say ABI
//!    version 1 and the struct size of this mfstream's `MfsPlugin`;
//! 7. every engine has the expected struct size, all three functions, a
//!    UTF-8 name of the form `[a-z][a-z0-9_-]{0,62}` unique in the plugin,
//!    and a UTF-8 description.
//!
//! Clashes with the names of other engines are checked by the registry,
//! which knows them.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mfstream_plugin::abi::{
    ABI_VERSION, CloseFn, ENTRY_SYMBOL, EntryFn, MIN_ABI_VERSION, MfsEngine, MfsPlugin, MfsStr,
    OpenFn, ProcessFn, ReadyFn,
};

use super::error::{PluginError, PluginErrorKind};
use super::file::{PrivateCopy, read_library};
use crate::engine::{Serves, is_engine_name};

/// Engines a plugin may export, at most.
const MAX_ENGINES: usize = 1024;

/// A loaded, checked library. Dropping the last `Arc` unloads it, so every
/// engine and every query from it holds one.
pub(crate) struct Library {
    /// Unloaded on drop.
    _library: libloading::Library,
    /// The library's path.
    pub path: PathBuf,
    /// The plugin's name and version, for messages.
    pub name: String,
    pub version: String,
}

impl fmt::Debug for Library {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Library")
            .field("path", &self.path)
            .field("name", &self.name)
            .field("version", &self.version)
            .finish()
    }
}

/// One engine of a loaded plugin: copies of its descriptor's fields.
#[derive(Debug, Clone)]
pub(crate) struct EngineFns {
    pub name: String,
    pub description: String,
    /// What it declared it serves (bits this host does not know left out).
    pub serves: Serves,
    /// The plugin's ABI version: 1 has no per-record error (`MfsHost::error`).
    pub abi_version: u32,
    pub open: OpenFn,
    pub process: ProcessFn,
    pub close: CloseFn,
    pub ready: Option<ReadyFn>,
}

/// A loaded plugin: its library and its engines.
#[derive(Debug)]
pub(crate) struct Loaded {
    pub library: Arc<Library>,
    pub engines: Vec<EngineFns>,
}

/// Checks the file at `path` (and who could change it) and that it is a
/// whole shared library, without mapping any of it.
pub(crate) fn check_file(path: &Path) -> Result<(), PluginError> {
    read_library(path)
        .map(drop)
        .map_err(|kind| PluginError::new(path, kind))
}

/// Loads a private copy of the library at `path` after checking the file,
/// then checks its descriptor.
pub(crate) fn load(path: &Path) -> Result<Loaded, PluginError> {
    let error = |kind| PluginError::new(path, kind);
    let bytes = read_library(path).map_err(error)?;
    let copy = PrivateCopy::new(&bytes, path).map_err(|e| {
        error(PluginErrorKind::Load(format!(
            "cannot write a private copy of the library to load: {e}"
        )))
    })?;
    drop(bytes);
    // SAFETY: loading a library runs its initialisers; the copy holds the
    // bytes that passed the checks above, which is as far as a file can be
    // trusted before it runs, and only this user can change it.
    // `libloading` uses RTLD_NOW, so missing symbols fail here, not later.
    let library = unsafe { libloading::Library::new(copy.path()) }.map_err(|e| {
        // The copy's name means nothing to the user: name the original.
        let text = e
            .to_string()
            .replace(&*copy.path().to_string_lossy(), &path.to_string_lossy());
        error(PluginErrorKind::Load(text))
    })?;
    // Mapped: the copy's name is no longer needed.
    drop(copy);
    // SAFETY: the symbol's type is the ABI's entry type; a library that
    // exports the name with another type breaks the ABI's first rule, which
    // no check can detect.
    let entry: EntryFn = match unsafe { library.get::<EntryFn>(ENTRY_SYMBOL) } {
        Ok(symbol) => *symbol,
        Err(_) => return Err(error(PluginErrorKind::NoEntry)),
    };
    // SAFETY: calling the entry is what the ABI asks of the host; it returns
    // a pointer to a static descriptor.
    let descriptor = unsafe { entry() };
    if descriptor.is_null() {
        return Err(error(PluginErrorKind::NullDescriptor));
    }
    // The first two fields are read alone, before the rest of the struct is
    // trusted to have this version's layout.
    let head = descriptor.cast::<u32>();
    // SAFETY: every ABI version starts the descriptor with two u32s.
    let (struct_size, abi_version) = unsafe { (head.read(), head.add(1).read()) };
    if !(MIN_ABI_VERSION..=ABI_VERSION).contains(&abi_version) {
        return Err(error(PluginErrorKind::AbiVersion {
            found: abi_version,
            expected: ABI_VERSION,
        }));
    }
    let expected = size_of::<MfsPlugin>() as u32;
    if struct_size != expected {
        return Err(error(PluginErrorKind::StructSize {
            what: "MfsPlugin",
            found: struct_size,
            expected,
        }));
    }
    // SAFETY: version and size match (`MfsPlugin` is the same in every
    // version spoken): the descriptor is an `MfsPlugin`, static while the
    // library is loaded (we hold it).
    let plugin = unsafe { &*descriptor };
    let (name, version, engines) = read_descriptor(plugin).map_err(error)?;
    Ok(Loaded {
        library: Arc::new(Library {
            _library: library,
            path: path.to_owned(),
            name,
            version,
        }),
        engines,
    })
}

type Descriptor = (String, String, Vec<EngineFns>);

fn read_descriptor(plugin: &MfsPlugin) -> Result<Descriptor, PluginErrorKind> {
    let bad = |text: String| PluginErrorKind::Descriptor(text);
    // SAFETY: the descriptor's strings are static (ABI contract).
    let name =
        unsafe { utf8(plugin.name) }.ok_or_else(|| bad("the plugin name is not UTF-8".into()))?;
    // SAFETY: as above.
    let version = unsafe { utf8(plugin.version) }
        .ok_or_else(|| bad("the plugin version is not UTF-8".into()))?;
    let count = plugin.engine_count;
    if count == 0 {
        return Err(bad("the plugin exports no engines".into()));
    }
    if count > MAX_ENGINES || plugin.engines.is_null() {
        return Err(bad(format!(
            "the plugin's engine list is invalid ({count} engines at {:p})",
            plugin.engines
        )));
    }
    // SAFETY: `engines` points to `engine_count` static engines (contract).
    let raw = unsafe { std::slice::from_raw_parts(plugin.engines, count) };
    let mut engines: Vec<EngineFns> = Vec::with_capacity(count);
    for (i, engine) in raw.iter().enumerate() {
        let at = |what: &str| bad(format!("engine #{} of the plugin: {what}", i + 1));
        let expected = size_of::<MfsEngine>() as u32;
        if engine.struct_size != expected {
            return Err(PluginErrorKind::StructSize {
                what: "MfsEngine",
                found: engine.struct_size,
                expected,
            });
        }
        // SAFETY: static strings (contract).
        let name = unsafe { utf8(engine.name) }.ok_or_else(|| at("the name is not UTF-8"))?;
        if !is_engine_name(&name) {
            return Err(at(&format!(
                "invalid engine name {name:?}: use 1 to 63 lowercase letters, digits, '_' or '-', \
                 starting with a letter"
            )));
        }
        if engines.iter().any(|e| e.name == name) {
            return Err(at(&format!("engine name {name:?} is exported twice")));
        }
        // SAFETY: static strings (contract).
        let description = unsafe { utf8(engine.description) }
            .ok_or_else(|| at("the description is not UTF-8"))?;
        let declared = super::serves::from_abi(engine.serves);
        if !declared.known.contains(Serves::TRANSFORM) {
            return Err(at(&format!(
                "engine {name:?} serves no transforms (serves = {}): this mfstream runs \
                 transforms on plugins and computes windows itself",
                engine.serves
            )));
        }
        if declared.unknown != 0 {
            // A newer plugin's kinds: tolerated (this host never asks for
            // them), as a newer plugin on an older host is expected, not a
            // fault: said at `info` (`RUST_LOG=info`) for its author.
            tracing::info!(
                "plugin engine {name:?} declares serves bits {:#x} this mfstream does not \
                 know: ignored",
                declared.unknown
            );
        }
        let (Some(open), Some(process), Some(close)) = (engine.open, engine.process, engine.close)
        else {
            return Err(at(&format!(
                "engine {name:?} lacks one of its open, process and close functions"
            )));
        };
        engines.push(EngineFns {
            name,
            description,
            serves: declared.known,
            abi_version: plugin.abi_version,
            open,
            process,
            close,
            ready: engine.ready,
        });
    }
    Ok((name, version, engines))
}

/// A static string of a descriptor, if UTF-8.
///
/// # Safety
///
/// `s` points to `len` bytes valid while the library is loaded.
unsafe fn utf8(s: MfsStr) -> Option<String> {
    // SAFETY: the caller's guarantee.
    let bytes = unsafe { s.as_bytes() };
    std::str::from_utf8(bytes).ok().map(str::to_owned)
}

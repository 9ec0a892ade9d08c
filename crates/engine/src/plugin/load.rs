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
//! 6. the descriptor's first two fields, read before anything else, say an
//!    ABI version this mfstream speaks (1 to 3) and the struct size of its
//!    `MfsPlugin`;
//! 7. every engine has the struct size of its version (`abi::v2::MfsEngine`
//!    for versions 1 and 2), all three functions, a UTF-8 name of the form
//!    `[a-z][a-z0-9_-]{0,62}` unique in the plugin, and a UTF-8
//!    description; a version-3 engine that declares positions has
//!    `open_positions`.
//!
//! Clashes with the names of other engines are checked by the registry,
//! which knows them.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mfstream_plugin::abi::{
    ABI_VERSION, CloseFn, ENTRY_SYMBOL, EntryFn, MIN_ABI_VERSION, MfsEngine, MfsPlugin, MfsStr,
    OpenFn, OpenPositionsFn, ProcessFn, ReadyFn, v2,
};

use super::error::{PluginError, PluginErrorKind};
use super::file::{PrivateCopy, read_library};
use crate::{Serves, is_engine_name};

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
    /// Whether it runs position queries (version 3, `MFS_SERVES_POSITIONS`
    /// with `open_positions`).
    pub positions: bool,
    /// The plugin's ABI version: 1 has no per-record error (`MfsHost::error`).
    pub abi_version: u32,
    /// Its functions, of its version's types.
    pub fns: Fns,
}

/// An engine's functions: a version-1 or version-2 plugin takes and gives
/// the `abi::v2` layouts, a version-3 one this version's.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Fns {
    V2 {
        open: v2::OpenFn,
        process: v2::ProcessFn,
        close: v2::CloseFn,
        ready: Option<v2::ReadyFn>,
    },
    V3 {
        open: OpenFn,
        process: ProcessFn,
        close: CloseFn,
        ready: Option<ReadyFn>,
        open_positions: Option<OpenPositionsFn>,
    },
}

/// The fields of an engine every version has, and its functions.
struct RawEngine {
    struct_size: (u32, u32),
    serves: u32,
    name: MfsStr,
    description: MfsStr,
    fns: Option<Fns>,
    /// `open_positions` is set (version 3).
    opens_positions: bool,
}

impl RawEngine {
    fn v2(e: &v2::MfsEngine) -> RawEngine {
        let fns = match (e.open, e.process, e.close) {
            (Some(open), Some(process), Some(close)) => Some(Fns::V2 {
                open,
                process,
                close,
                ready: e.ready,
            }),
            _ => None,
        };
        RawEngine {
            struct_size: (e.struct_size, size_of::<v2::MfsEngine>() as u32),
            serves: e.serves,
            name: e.name,
            description: e.description,
            fns,
            opens_positions: false,
        }
    }

    fn v3(e: &MfsEngine) -> RawEngine {
        let fns = match (e.open, e.process, e.close) {
            (Some(open), Some(process), Some(close)) => Some(Fns::V3 {
                open,
                process,
                close,
                ready: e.ready,
                open_positions: e.open_positions,
            }),
            _ => None,
        };
        RawEngine {
            struct_size: (e.struct_size, size_of::<MfsEngine>() as u32),
            serves: e.serves,
            name: e.name,
            description: e.description,
            fns,
            opens_positions: e.open_positions.is_some(),
        }
    }
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
            version: abi_version,
            found: struct_size,
            expected,
        }));
    }
    // SAFETY: version and size match (`MfsPlugin` is the same in every
    // version spoken): the descriptor is an `MfsPlugin`, static while the
    // library is loaded (we hold it).
    let plugin = unsafe { &*descriptor };
    let (name, version, engines) = read_descriptor(plugin, abi_version).map_err(error)?;
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

fn read_descriptor(plugin: &MfsPlugin, abi_version: u32) -> Result<Descriptor, PluginErrorKind> {
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
    // The engines of a plugin of version 1 or 2 have that version's
    // layout, and so the array's stride.
    let raw: Vec<RawEngine> = if abi_version < 3 {
        let engines = plugin.engines.cast::<v2::MfsEngine>();
        // SAFETY: `engines` points to `engine_count` static engines
        // (contract), of the layout of the plugin's version.
        let engines = unsafe { std::slice::from_raw_parts(engines, count) };
        engines.iter().map(RawEngine::v2).collect()
    } else {
        // SAFETY: as above.
        let engines = unsafe { std::slice::from_raw_parts(plugin.engines, count) };
        engines.iter().map(RawEngine::v3).collect()
    };
    let mut engines: Vec<EngineFns> = Vec::with_capacity(count);
    for (i, engine) in raw.iter().enumerate() {
        let at = |what: &str| bad(format!("engine #{} of the plugin: {what}", i + 1));
        let (found, expected) = engine.struct_size;
        if found != expected {
            return Err(PluginErrorKind::StructSize {
                what: "MfsEngine",
                version: abi_version,
                found,
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
        let declared = super::serves::from_abi(engine.serves, abi_version);
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
        let Some(fns) = engine.fns else {
            return Err(at(&format!(
                "engine {name:?} lacks one of its open, process and close functions"
            )));
        };
        if declared.positions && !engine.opens_positions {
            return Err(at(&format!(
                "engine {name:?} declares MFS_SERVES_POSITIONS but has no open_positions \
                 function: set it, or drop the bit"
            )));
        }
        if engine.opens_positions && !declared.positions {
            tracing::info!(
                "plugin engine {name:?} has open_positions but does not declare \
                 MFS_SERVES_POSITIONS: it is not asked for positions"
            );
        }
        engines.push(EngineFns {
            name,
            description,
            serves: declared.known,
            positions: declared.positions,
            abi_version,
            fns,
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

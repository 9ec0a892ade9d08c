//! Why a plugin was refused: the errors of every check `load` and `file`
//! make, and of running a plugin out of process. A leaf, so the checks
//! can share it without importing one another.

use std::path::{Path, PathBuf};

use mfstream_plugin::abi::MIN_ABI_VERSION;

/// A plugin that could not be loaded or trusted: the file, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plugin {}: {kind}", path.display())]
pub struct PluginError {
    /// The library's path.
    pub path: PathBuf,
    /// The line of its `[[plugin]]` entry in `engines.toml`, when known.
    pub line: Option<usize>,
    /// Why it was refused.
    pub kind: PluginErrorKind,
}

impl PluginError {
    /// The plugin at `path` was refused for `kind`; the line is not known
    /// yet (the registry, which read the entry, adds it).
    pub(crate) fn new(path: &Path, kind: PluginErrorKind) -> PluginError {
        PluginError {
            path: path.to_owned(),
            line: None,
            kind,
        }
    }
}

/// Why a plugin was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PluginErrorKind {
    /// The file is not there (or cannot be looked at).
    #[error("cannot read the file: {0}")]
    Missing(String),
    /// The path is a folder or a special file.
    #[error("not a regular file: name the library's .so file")]
    NotAFile,
    /// Group or others may write the file.
    #[error(
        "the file is writable by group or others (mode {mode:o}), so anyone could put code into \
         mfstream: run `chmod go-w {path}`"
    )]
    Writable {
        /// The file's permission bits.
        mode: u32,
        /// The path to give `chmod`.
        path: String,
    },
    /// A folder above the file is writable by group or others.
    #[error(
        "the folder {folder} is writable by group or others (mode {mode:o}), so anyone could \
         replace the plugin: run `chmod go-w {folder}` (or set its sticky bit, as /tmp has)"
    )]
    WritableFolder {
        /// The folder's permission bits.
        mode: u32,
        /// The folder.
        folder: String,
    },
    /// The file or a folder above it belongs to another user.
    #[error(
        "the {what} {path} belongs to user {uid}, who could change the plugin: it must belong \
         to root or to the user running mfstream"
    )]
    Owner {
        /// `file` or `folder`.
        what: &'static str,
        /// The file or folder.
        path: String,
        /// Its owner.
        uid: u32,
    },
    /// `dlopen` refused it.
    #[error("cannot load the library: {0}")]
    Load(String),
    /// It is not a whole shared library of this machine (checked before
    /// `dlopen` maps it).
    #[error("cannot load the library: {0}")]
    Elf(ElfError),
    /// No entry symbol.
    #[error(
        "the library exports no `mfstream_plugin` symbol, so it is not an mfstream plugin \
         (a Rust plugin uses mfstream_plugin::export_plugin!, a C plugin defines \
         `const MfsPlugin *mfstream_plugin(void)`)"
    )]
    NoEntry,
    /// The entry returned null.
    #[error("`mfstream_plugin()` returned a null descriptor")]
    NullDescriptor,
    /// Another ABI version.
    #[error(
        "the plugin speaks ABI version {found}, but this mfstream speaks versions {MIN_ABI_VERSION} \
         to {expected}: rebuild the plugin against mfstream-plugin (or mfstream_plugin.h) of ABI \
         version {expected}"
    )]
    AbiVersion {
        /// The plugin's.
        found: u32,
        /// Ours.
        expected: u32,
    },
    /// A struct of another size.
    #[error(
        "the plugin's {what} is {found} bytes, but ABI version {version} has {expected}: \
         the plugin was built against a different mfstream_plugin.h or for another platform"
    )]
    StructSize {
        /// Which struct.
        what: &'static str,
        /// The ABI version the plugin declares.
        version: u32,
        /// The plugin's.
        found: u32,
        /// Ours.
        expected: u32,
    },
    /// Something else wrong with the descriptor.
    #[error("{0}")]
    Descriptor(String),
    /// An engine's name is taken.
    #[error("engine {name:?} clashes with {other}: rename one of them")]
    Clash {
        /// The name.
        name: String,
        /// The engine that has it, and where it is defined.
        other: String,
    },
    /// The plugin could not be run out of process.
    #[error("{0}")]
    Isolation(String),
    /// The child that loads an isolated plugin refused it, in its words.
    #[error("{0}")]
    Child(String),
}

/// Why a file is not a whole ELF shared library of this machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ElfError {
    /// Not a shared library at all, or one of another machine.
    #[error("not a shared library: {0}")]
    NotLibrary(&'static str),
    /// A part the file names ends past its end.
    #[error(
        "the file is cut short: {what} ends at byte {end} but the file has {len} bytes (was it \
         copied while still being written?)"
    )]
    Cut {
        /// The part: the ELF header, a header table, a loadable segment.
        what: String,
        /// Where it ends (`u64::MAX` when that overflows).
        end: u64,
        /// The file's length.
        len: u64,
    },
}

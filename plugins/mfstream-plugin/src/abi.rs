//! ABI v2: the C types a plugin and the host exchange, in one place.
//!
//! `include/mfstream_plugin.h` declares the same types for C; the tests of
//! the host compile a C program against it that checks every size and
//! offset agrees with these.
//!
//! # The contract
//!
//! - The library exports one symbol, [`ENTRY_SYMBOL`] (`mfstream_plugin`),
//!   an `extern "C" fn() -> *const MfsPlugin` ([`EntryFn`]). The host calls
//!   it once after loading. The descriptor it returns, and everything it
//!   points to (names, the engines array), is owned by the plugin and must
//!   stay valid and unchanged while the library is loaded. The host never
//!   unloads a library while an engine or query from it lives.
//! - [`MfsPlugin`]'s first two fields, `struct_size` and `abi_version`, keep
//!   their place in every ABI version. The host reads them before anything
//!   else and refuses a library whose version is not one it speaks
//!   ([`MIN_ABI_VERSION`] to [`ABI_VERSION`]) or whose `struct_size` is not
//!   `sizeof(MfsPlugin)` of that version. Every [`MfsEngine`] carries its
//!   own `struct_size`, checked the same way.
//! - Strings ([`MfsStr`]) are a pointer and a length in bytes, UTF-8, not
//!   NUL-terminated. A string the host passes is borrowed for the duration of
//!   the call only; a string the plugin passes to a host callback is copied by
//!   the host before the callback returns.
//! - Per query the host calls `open` once, then `process` for each batch of
//!   instants, then `close` exactly once (also after `process` failed, and
//!   when the query is stopped). `close` flushes (emits what is still held,
//!   such as open windows) and frees the state, whatever it returns.
//! - `ready`, when not null, is called when the registry is built (at start
//!   and on reload), before any query: an engine that needs something it
//!   cannot find says so there, and is listed as not ready with the reason.
//! - One query's state is used by one thread at a time, but not always the
//!   same thread. `open` may be called on several threads at once for
//!   different queries.
//! - Results go through [`MfsHost::emit`], as many times and with as many
//!   events as the plugin likes, during `process` or `close`. The host copies
//!   the events before `emit` returns. `emit` returns [`MFS_OK`], or
//!   [`MFS_STOP`] when the query is ending: the plugin should return soon.
//! - A function that fails returns [`MFS_ERROR`] after calling
//!   [`MfsHost::fail`] with the reason; the query fails with that text.
//! - (Version 2.) A record the plugin cannot compute (outside its
//!   operation's domain: `ln` of -1; or with no finite result: `exp` of
//!   1000) is reported through [`MfsHost::error`] with its datetime and a
//!   message, instead of an event, and `process` goes on with the next
//!   record. The host applies the query's `onError`: under `skip` it counts
//!   the record and `error` returns [`MFS_OK`]; under `fail` the query
//!   fails naming the record and `error` returns [`MFS_STOP`] (the plugin
//!   should return soon; what it returns then does not matter). A NaN or
//!   infinite number emitted is taken the same way, in either version.
//! - No unwinding may cross the boundary: a Rust plugin catches its panics
//!   (the export macro does) and a C++ plugin its exceptions.
//!
//! # Versioning
//!
//! Any change to a type, a field, a function's signature or the meaning of a
//! call bumps [`ABI_VERSION`]. The host loads every version from
//! [`MIN_ABI_VERSION`] on:
//!
//! - **1**: the types below without [`MfsHost::error`]. A version-1 plugin
//!   never reads that field (the host passes it to every plugin; it is the
//!   last one, so the fields a version-1 plugin reads keep their place).
//!   It fails a query on a record it cannot compute, or emits NaN; so under
//!   `onError: skip` the host never hands it a record the operation
//!   catalogue says has no result, and skips its non-finite results.
//! - **2**: adds [`MfsHost::error`], a per-record error. Nothing else
//!   changed: a version-1 plugin's descriptor, engines and functions are
//!   read the same way.

use std::ffi::c_void;

/// The ABI version this crate describes, and the newest the host speaks.
pub const ABI_VERSION: u32 = 2;

/// The oldest ABI version the host still loads.
pub const MIN_ABI_VERSION: u32 = 1;

/// The name of the symbol every plugin exports, NUL-terminated.
pub const ENTRY_SYMBOL: &[u8] = b"mfstream_plugin\0";

/// A call succeeded.
pub const MFS_OK: i32 = 0;
/// A call failed; the plugin called [`MfsHost::fail`] first.
pub const MFS_ERROR: i32 = 1;
/// Returned by [`MfsHost::emit`]: the query is ending, stop emitting.
pub const MFS_STOP: i32 = 2;

/// [`MfsValue::kind`] of a number (`TReal`, `TInteger`), in `number`.
pub const MFS_NUMBER: u32 = 0;
/// [`MfsValue::kind`] of a text (`TText`), in `text`.
pub const MFS_TEXT: u32 = 1;
/// [`MfsValue::kind`] of a boolean (`TBoolean`), in `number`: 0 or 1.
pub const MFS_BOOL: u32 = 2;

/// [`MfsEngine::serves`] bit: the engine runs transforms. Required in v1:
/// the host computes windowed aggregates itself, over the engine's
/// transformed outputs (or over the instants, with no transform).
pub const MFS_SERVES_TRANSFORM: u32 = 1;
/// [`MfsEngine::serves`] bit, reserved: the engine could compute windowed
/// aggregates itself. v1 hosts never ask it to (an event has no window
/// bounds in v1); they window its transformed outputs.
pub const MFS_SERVES_AGGREGATE: u32 = 2;

/// A UTF-8 string: a pointer and a length in bytes, not NUL-terminated.
/// `ptr` may be null when `len` is 0. Who owns it is said where it is used.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MfsStr {
    /// The first byte.
    pub ptr: *const u8,
    /// The length in bytes.
    pub len: usize,
}

impl MfsStr {
    /// An empty string.
    pub const EMPTY: MfsStr = MfsStr {
        ptr: std::ptr::null(),
        len: 0,
    };

    /// A string borrowing `s`; it must outlive every use of the result.
    pub const fn new(s: &str) -> MfsStr {
        MfsStr {
            ptr: s.as_ptr(),
            len: s.len(),
        }
    }

    /// The bytes.
    ///
    /// # Safety
    ///
    /// `ptr` points to `len` readable bytes (or `len` is 0) that stay valid
    /// and unchanged for `'a`.
    pub unsafe fn as_bytes<'a>(self) -> &'a [u8] {
        if self.len == 0 || self.ptr.is_null() {
            return &[];
        }
        // SAFETY: the caller guarantees `len` readable bytes at `ptr` for 'a.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// The value of an instant or event. `kind` says which field holds it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MfsValue {
    /// [`MFS_NUMBER`], [`MFS_TEXT`] or [`MFS_BOOL`].
    pub kind: u32,
    /// The number, or the boolean as 0 or 1.
    pub number: f64,
    /// The text.
    pub text: MfsStr,
}

/// One stream record the host passes in. Borrowed for the call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MfsInstant {
    /// The ISO-8601 datetime, verbatim as the source wrote it.
    pub datetime: MfsStr,
    /// The value.
    pub value: MfsValue,
}

/// One result the plugin emits. The host adds the query's property and
/// operation. Copied by the host during [`MfsHost::emit`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MfsEvent {
    /// The result's datetime (for a transform, its input's).
    pub datetime: MfsStr,
    /// The result; a number must be finite.
    pub value: MfsValue,
}

/// Delivers events: `ctx`, a pointer to `n` events. Returns [`MFS_OK`] or
/// [`MFS_STOP`].
pub type EmitFn = unsafe extern "C" fn(ctx: *mut c_void, events: *const MfsEvent, n: usize) -> i32;
/// Records why the current call fails: `ctx` and the reason.
pub type FailFn = unsafe extern "C" fn(ctx: *mut c_void, message: MfsStr);
/// (Version 2.) Reports that the record at `datetime` has no result, with a
/// message for people: `ctx`, the record's datetime (as the host passed
/// it), the message. Returns [`MFS_OK`] (go on with the next record) or
/// [`MFS_STOP`] (the query is ending: return soon).
pub type ErrorFn = unsafe extern "C" fn(ctx: *mut c_void, datetime: MfsStr, message: MfsStr) -> i32;

/// The host's callbacks, passed to every call. Owned by the host, valid for
/// the duration of the call only.
#[repr(C)]
#[derive(Debug)]
pub struct MfsHost {
    /// The host's context; pass it back to the callbacks.
    pub ctx: *mut c_void,
    /// Delivers events.
    pub emit: EmitFn,
    /// Records why the current call fails.
    pub fail: FailFn,
    /// (Version 2; always set by the host.) Reports a record with no
    /// result. The last field, so a version-1 plugin, which does not know
    /// it, reads the others where they always were.
    pub error: ErrorFn,
}

/// Opens a query: `spec` is the query as JSON (the `MFSTREAM_QUERY` object of
/// the bridge protocol), borrowed for the call. On [`MFS_OK`] `*state` holds
/// the plugin's state for the query (the plugin owns it until `close`).
pub type OpenFn =
    unsafe extern "C" fn(spec: MfsStr, host: *const MfsHost, state: *mut *mut c_void) -> i32;
/// Processes `n` instants (borrowed for the call), emitting results through
/// `host`.
pub type ProcessFn = unsafe extern "C" fn(
    state: *mut c_void,
    batch: *const MfsInstant,
    n: usize,
    host: *const MfsHost,
) -> i32;
/// Flushes what the query still holds through `host`, then frees `state`,
/// whatever it returns. Called exactly once per opened query.
pub type CloseFn = unsafe extern "C" fn(state: *mut c_void, host: *const MfsHost) -> i32;
/// Says whether the engine can run queries now (a library it needs is
/// there, say): [`MFS_OK`], or [`MFS_ERROR`] after [`MfsHost::fail`] with
/// the reason, which `mfstream engines` shows. Called when the registry is
/// built (at start and on reload); it emits nothing.
pub type ReadyFn = unsafe extern "C" fn(host: *const MfsHost) -> i32;

/// One engine a plugin exports. Owned by the plugin, static.
#[repr(C)]
#[derive(Debug)]
pub struct MfsEngine {
    /// `sizeof(MfsEngine)`.
    pub struct_size: u32,
    /// [`MFS_SERVES_TRANSFORM`] and/or [`MFS_SERVES_AGGREGATE`].
    pub serves: u32,
    /// The registry name: `[a-z][a-z0-9_-]{0,62}`, unique in the registry.
    pub name: MfsStr,
    /// A line for people.
    pub description: MfsStr,
    /// Opens a query.
    pub open: Option<OpenFn>,
    /// Processes a batch.
    pub process: Option<ProcessFn>,
    /// Flushes and frees.
    pub close: Option<CloseFn>,
    /// Whether the engine can run queries now; null when it always can.
    pub ready: Option<ReadyFn>,
}

/// What the entry symbol returns. Owned by the plugin, static.
#[repr(C)]
#[derive(Debug)]
pub struct MfsPlugin {
    /// `sizeof(MfsPlugin)`. Always the first field.
    pub struct_size: u32,
    /// [`ABI_VERSION`]. Always the second field.
    pub abi_version: u32,
    /// The plugin's name, for messages.
    pub name: MfsStr,
    /// The plugin's version, for messages.
    pub version: MfsStr,
    /// `engine_count` engines.
    pub engines: *const MfsEngine,
    /// How many engines `engines` points to.
    pub engine_count: usize,
}

/// The entry symbol's type.
pub type EntryFn = unsafe extern "C" fn() -> *const MfsPlugin;

// SAFETY: a descriptor is immutable, and the strings and engines it points to
// are static and immutable too (the contract above), so sharing references
// between threads is sound. Needed for descriptors held in `static`s.
unsafe impl Sync for MfsPlugin {}
// SAFETY: as for `MfsPlugin`: immutable, pointing to static immutable data.
unsafe impl Sync for MfsEngine {}

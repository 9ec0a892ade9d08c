//! ABI v3: the C types a plugin and the host exchange, in one place.
//!
//! `include/mfstream_plugin.h` declares the same types for C; the tests of
//! the host compile a C program against it that checks every size and
//! offset agrees with these. [`v2`] keeps the layouts of versions 1 and 2
//! that changed in 3, so the host can still speak to such plugins.
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
//!   own `struct_size`, checked the same way (against [`v2::MfsEngine`]
//!   for a version-1 or version-2 plugin).
//! - Strings ([`MfsStr`]) are a pointer and a length in bytes, UTF-8, not
//!   NUL-terminated. A string the host passes is borrowed for the duration of
//!   the call only; a string the plugin passes to a host callback is copied by
//!   the host before the callback returns.
//! - Per query the host calls `open` (or, for a position query,
//!   `open_positions`) once, then `process` for each batch of instants,
//!   then `close` exactly once (also after `process` failed, and when the
//!   query is stopped). `close` flushes (emits what is still held, such as
//!   open windows) and frees the state, whatever it returns.
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
//! # Positions (version 3)
//!
//! An engine that declares [`MFS_SERVES_POSITIONS`] runs the per-instant
//! part of a position query (a feature's `TGeogPoint`/`TGeomPoint`
//! instants); the host does the rest (windows, the checks of each
//! position). It must then set [`MfsEngine::open_positions`], which the
//! host calls instead of `open` with an [`MfsPositionSpec`]: the step
//! ([`MFS_STEP_SPEED`] …), the reference system, the geometry (GeoJSON
//! text) and the detect set. The instants it then gets in `process` are
//! points ([`MFS_POINT`], in [`MfsValue::point`], with [`MfsInstant::micros`]
//! set), one feature's, checked by the host: finite, longitude and latitude
//! in range for a geodetic system, times strictly increasing. Per instant
//! the engine emits, with the instant's datetime:
//!
//! - a measure step: one number, or nothing where the measure is undefined
//!   (`speed` and `azimuth` at the first instant; `azimuth` of a segment
//!   of zero length). `speed` is the length of the segment ending at the
//!   instant over its duration (m/s on the WGS84 ellipsoid when geodetic,
//!   units/s when planar); `azimuth` that segment's direction in degrees
//!   clockwise from north, in [0, 360); `cumulativeLength` the length
//!   travelled since the first instant (0 there); `distance` the distance
//!   from the instant to the geometry (metres on the ellipsoid, or units);
//! - [`MFS_STEP_POSITION`]: the instant's point itself ([`MFS_POINT`],
//!   with its z when it has one);
//! - [`MFS_STEP_GEOFENCE`]: 0..n [`MFS_DETECT`] events, in time order:
//!   the crossings of the segment ending at the instant (`enter`, `exit`,
//!   or `cross` for a pass with both ends outside), each at the crossing
//!   point and its linearly interpolated time (set [`MfsEvent::micros`] and
//!   leave the datetime empty: the host writes it), then `inside` or
//!   `outside` at the instant. Only the kinds in the detect set. Edges and
//!   segments are straight lines in x/y (lon/lat), as GeoJSON and Tile38
//!   draw them; the boundary is inside.
//!
//! # Versioning
//!
//! Any change to a type, a field, a function's signature or the meaning of a
//! call bumps [`ABI_VERSION`]. The host loads every version from
//! [`MIN_ABI_VERSION`] on:
//!
//! - **1**: the [`v2`] layouts without [`MfsHost::error`]. A version-1
//!   plugin never reads that field (the host passes it to every plugin; it
//!   is the last one, so the fields a version-1 plugin reads keep their
//!   place). It fails a query on a record it cannot compute, or emits NaN;
//!   so under `onError: skip` the host never hands it a record the
//!   operation catalogue says has no result, and skips its non-finite
//!   results.
//! - **2**: adds [`MfsHost::error`], a per-record error. Nothing else
//!   changed: a version-1 plugin's descriptor, engines and functions are
//!   read the same way.
//! - **3**: positions. [`MfsValue`] gains `flags` (in what was padding) and
//!   `point`, [`MfsInstant`] and [`MfsEvent`] gain `micros`, [`MfsEngine`]
//!   gains `open_positions` (its last field); new value kinds
//!   [`MFS_POINT`] and [`MFS_DETECT`], the serves bit
//!   [`MFS_SERVES_POSITIONS`] and [`MfsPositionSpec`]. A version-1 or
//!   version-2 plugin gets and emits the [`v2`] layouts and numbers only
//!   (it never sees a position query); its `serves` bit 4, unknown then,
//!   is ignored.

use std::ffi::c_void;

/// The ABI version this crate describes, and the newest the host speaks.
pub const ABI_VERSION: u32 = 3;

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
/// (Version 3.) [`MfsValue::kind`] of a position (`TGeogPoint`,
/// `TGeomPoint`), in `point`: lon/lat in degrees (geodetic) or x/y in the
/// reference system's units; `z` only with [`MFS_HAS_Z`] in `flags`.
pub const MFS_POINT: u32 = 3;
/// (Version 3.) [`MfsValue::kind`] of a geofence detection, emitted only:
/// where in `point`, what in `text` (`enter`, `exit`, `inside`, `outside`
/// or `cross`).
pub const MFS_DETECT: u32 = 4;

/// (Version 3.) [`MfsValue::flags`] bit: the point has a height in `z`.
pub const MFS_HAS_Z: u32 = 1;

/// (Version 3.) [`MfsInstant::micros`] of an instant whose time the host
/// did not read (the instants of a numeric query), and [`MfsEvent::micros`]
/// of an event that carries its datetime as text.
pub const MFS_NO_TIME: i64 = i64::MIN;

/// (Version 3.) [`MfsPositionSpec::step`]: the speed of the segment ending
/// at each instant.
pub const MFS_STEP_SPEED: u32 = 1;
/// The azimuth of the segment ending at each instant, in degrees.
pub const MFS_STEP_AZIMUTH: u32 = 2;
/// The length travelled since the first instant.
pub const MFS_STEP_CUMULATIVE_LENGTH: u32 = 3;
/// The distance from each instant to [`MfsPositionSpec::geometry`].
pub const MFS_STEP_DISTANCE: u32 = 4;
/// The instant itself.
pub const MFS_STEP_POSITION: u32 = 5;
/// The detections of the geofence [`MfsPositionSpec::geometry`].
pub const MFS_STEP_GEOFENCE: u32 = 6;

/// (Version 3.) [`MfsPositionSpec::detect`] bit: crossing the boundary
/// inwards.
pub const MFS_DETECT_ENTER: u32 = 1;
/// Crossing the boundary outwards.
pub const MFS_DETECT_EXIT: u32 = 2;
/// An instant inside (or on the boundary).
pub const MFS_DETECT_INSIDE: u32 = 4;
/// An instant outside.
pub const MFS_DETECT_OUTSIDE: u32 = 8;
/// A segment with both ends outside that passes through the fence.
pub const MFS_DETECT_CROSS: u32 = 16;

/// [`MfsEngine::serves`] bit: the engine runs transforms. Required in v1:
/// the host computes windowed aggregates itself, over the engine's
/// transformed outputs (or over the instants, with no transform).
pub const MFS_SERVES_TRANSFORM: u32 = 1;
/// [`MfsEngine::serves`] bit, reserved: the engine could compute windowed
/// aggregates itself. Hosts never ask it to (an event has no window
/// bounds); they window its transformed outputs.
pub const MFS_SERVES_AGGREGATE: u32 = 2;
/// (Version 3.) [`MfsEngine::serves`] bit: the engine runs the per-instant
/// part of position queries; it sets [`MfsEngine::open_positions`].
pub const MFS_SERVES_POSITIONS: u32 = 4;

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

/// (Version 3.) A position's coordinates.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MfsPoint {
    /// Longitude in degrees (geodetic), or easting.
    pub x: f64,
    /// Latitude in degrees (geodetic), or northing.
    pub y: f64,
    /// The height, when [`MFS_HAS_Z`] is in the value's `flags`; else 0.
    pub z: f64,
}

/// The value of an instant or event. `kind` says which field holds it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MfsValue {
    /// [`MFS_NUMBER`], [`MFS_TEXT`], [`MFS_BOOL`], [`MFS_POINT`] or
    /// [`MFS_DETECT`].
    pub kind: u32,
    /// (Version 3; padding before.) [`MFS_HAS_Z`] for a point with a
    /// height; 0 otherwise.
    pub flags: u32,
    /// The number, or the boolean as 0 or 1.
    pub number: f64,
    /// The text; a detection's kind.
    pub text: MfsStr,
    /// (Version 3.) A point's, or a detection's, coordinates.
    pub point: MfsPoint,
}

/// One stream record the host passes in. Borrowed for the call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MfsInstant {
    /// The ISO-8601 datetime, verbatim as the source wrote it.
    pub datetime: MfsStr,
    /// The value.
    pub value: MfsValue,
    /// (Version 3.) The datetime in microseconds since 1970-01-01 UTC, as
    /// the host read it, for the instants of a position query;
    /// [`MFS_NO_TIME`] otherwise.
    pub micros: i64,
}

/// One result the plugin emits. The host adds the query's property and
/// operation. Copied by the host during [`MfsHost::emit`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MfsEvent {
    /// The result's datetime (for a transform, its input's). (Version 3.)
    /// When empty, the host writes `micros` as ISO-8601 instead.
    pub datetime: MfsStr,
    /// The result; a number must be finite.
    pub value: MfsValue,
    /// (Version 3.) The result's time in microseconds since 1970-01-01 UTC,
    /// read when `datetime` is empty (an interpolated geofence crossing);
    /// [`MFS_NO_TIME`] otherwise.
    pub micros: i64,
}

/// (Version 3.) What a position query asks of an engine, passed to
/// [`MfsEngine::open_positions`]; borrowed for the call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MfsPositionSpec {
    /// `sizeof(MfsPositionSpec)`: a plugin may check it.
    pub struct_size: u32,
    /// [`MFS_STEP_SPEED`] … [`MFS_STEP_GEOFENCE`].
    pub step: u32,
    /// For [`MFS_STEP_GEOFENCE`], the `MFS_DETECT_*` bits to emit (never
    /// 0); 0 otherwise.
    pub detect: u32,
    /// 1 for geodetic lon/lat on the WGS84 ellipsoid (`TGeogPoint`), 0 for
    /// planar x/y (`TGeomPoint`).
    pub geodetic: u32,
    /// The reference system's EPSG code: 4326 when geodetic.
    pub srid: i32,
    /// The reference system as the query names it, canonical: `EPSG:4326`.
    pub crs: MfsStr,
    /// For [`MFS_STEP_DISTANCE`] and [`MFS_STEP_GEOFENCE`], the geometry as
    /// GeoJSON text (checked by the host: a valid geometry; a Polygon or
    /// MultiPolygon for a fence); empty otherwise.
    pub geometry: MfsStr,
    /// The whole query as JSON, for what the fields above do not say.
    pub spec: MfsStr,
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
/// (Version 3.) Opens a position query: `spec` (borrowed for the call)
/// says what to compute. As [`OpenFn`] otherwise.
pub type OpenPositionsFn = unsafe extern "C" fn(
    spec: *const MfsPositionSpec,
    host: *const MfsHost,
    state: *mut *mut c_void,
) -> i32;
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
    /// [`MFS_SERVES_TRANSFORM`], and [`MFS_SERVES_AGGREGATE`] or
    /// [`MFS_SERVES_POSITIONS`].
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
    /// (Version 3.) Opens a position query; set exactly when `serves` has
    /// [`MFS_SERVES_POSITIONS`].
    pub open_positions: Option<OpenPositionsFn>,
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

/// The layouts of versions 1 and 2 of the types version 3 changed, frozen
/// (`tests/plugins/c/v2/mfstream_plugin.h` is their C header): the host
/// passes and reads these to and from such plugins. [`MfsStr`],
/// [`MfsPlugin`] and the `MFS_*` constants of those versions are version
/// 3's.
pub mod v2 {
    use std::ffi::c_void;

    use super::MfsStr;

    /// A version-2 value: a number, a text or a boolean.
    #[repr(C)]
    #[derive(Debug, Clone, Copy)]
    pub struct MfsValue {
        /// [`MFS_NUMBER`](super::MFS_NUMBER), [`MFS_TEXT`](super::MFS_TEXT)
        /// or [`MFS_BOOL`](super::MFS_BOOL).
        pub kind: u32,
        /// The number, or the boolean as 0 or 1.
        pub number: f64,
        /// The text.
        pub text: MfsStr,
    }

    /// A version-2 instant.
    #[repr(C)]
    #[derive(Debug, Clone, Copy)]
    pub struct MfsInstant {
        /// The ISO-8601 datetime, verbatim.
        pub datetime: MfsStr,
        /// The value.
        pub value: MfsValue,
    }

    /// A version-2 event.
    #[repr(C)]
    #[derive(Debug, Clone, Copy)]
    pub struct MfsEvent {
        /// The result's datetime.
        pub datetime: MfsStr,
        /// The result.
        pub value: MfsValue,
    }

    /// Delivers version-2 events.
    pub type EmitFn =
        unsafe extern "C" fn(ctx: *mut c_void, events: *const MfsEvent, n: usize) -> i32;

    /// The host's callbacks for a version-1 or version-2 plugin (version 1
    /// never reads `error`).
    #[repr(C)]
    #[derive(Debug)]
    pub struct MfsHost {
        /// The host's context.
        pub ctx: *mut c_void,
        /// Delivers events.
        pub emit: EmitFn,
        /// Records why the current call fails.
        pub fail: super::FailFn,
        /// (Version 2.) Reports a record with no result.
        pub error: super::ErrorFn,
    }

    /// Opens a query.
    pub type OpenFn =
        unsafe extern "C" fn(spec: MfsStr, host: *const MfsHost, state: *mut *mut c_void) -> i32;
    /// Processes a batch.
    pub type ProcessFn = unsafe extern "C" fn(
        state: *mut c_void,
        batch: *const MfsInstant,
        n: usize,
        host: *const MfsHost,
    ) -> i32;
    /// Flushes and frees.
    pub type CloseFn = unsafe extern "C" fn(state: *mut c_void, host: *const MfsHost) -> i32;
    /// Whether the engine can run queries now.
    pub type ReadyFn = unsafe extern "C" fn(host: *const MfsHost) -> i32;

    /// A version-1 or version-2 engine: version 3's without
    /// `open_positions`, with these function types.
    #[repr(C)]
    #[derive(Debug)]
    pub struct MfsEngine {
        /// `sizeof` this struct.
        pub struct_size: u32,
        /// `MFS_SERVES_*` bits of version 2 (transform, aggregate).
        pub serves: u32,
        /// The registry name.
        pub name: MfsStr,
        /// A line for people.
        pub description: MfsStr,
        /// Opens a query.
        pub open: Option<OpenFn>,
        /// Processes a batch.
        pub process: Option<ProcessFn>,
        /// Flushes and frees.
        pub close: Option<CloseFn>,
        /// Whether the engine can run queries now.
        pub ready: Option<ReadyFn>,
    }

    // SAFETY: as for version 3's `MfsEngine`: static and immutable.
    unsafe impl Sync for MfsEngine {}
}

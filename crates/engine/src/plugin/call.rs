//! Calls into a plugin: an opened query's state, and the host callbacks
//! that gather what the plugin emits during a call.
//!
//! Used by the in-process engine (`query`) and by the child that runs a
//! plugin out of process (`child`): each gives the collector a sink for
//! events.

use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use mfstream_plugin::abi::{
    MFS_BOOL, MFS_DETECT, MFS_ERROR, MFS_HAS_Z, MFS_NO_TIME, MFS_NUMBER, MFS_OK, MFS_POINT,
    MFS_STOP, MFS_TEXT, MfsEvent, MfsHost, MfsInstant, MfsPoint, MfsPositionSpec, MfsStr, MfsValue,
    v2,
};

use super::load::{EngineFns, Fns, Library};
use crate::BATCH;
use mfstream_model::{DetectEvent, Event, Instant, InstantEvent, Point, Value};

/// Where a collector hands full batches of events; `false` means the
/// consumer has gone.
pub(crate) type Sink<'a> = &'a mut dyn FnMut(Vec<Event>) -> bool;

/// What a collector does with a record the plugin found no result for
/// (`MfsHost::error`, or a NaN or infinite number emitted).
pub(crate) enum NoResult<'a> {
    /// Counted, and the call goes on (`onError: skip`).
    Skip,
    /// The call fails naming the record (`onError: fail`).
    Fail,
    /// Handed on with its datetime and message, after the events before
    /// it: an isolated plugin's child writes it as a protocol-2 error line,
    /// and the host applies the policy. `false` means the consumer has gone.
    Report(&'a mut dyn FnMut(&str, &str) -> bool),
}

/// An opened query's state in the plugin. Closed exactly once: by
/// [`State::close`], or on drop.
pub(crate) struct State {
    ptr: *mut c_void,
    fns: EngineFns,
    /// The ABI view of the batch being processed, of the plugin's version
    /// (kept for its allocation).
    raw: RawBatch,
    /// Opened by `open_positions`: its instants are positions.
    positions: bool,
    /// Keeps the plugin's code loaded while the state lives.
    _library: Arc<Library>,
}

/// A batch as the plugin's ABI version lays it out.
enum RawBatch {
    V2(Vec<v2::MfsInstant>),
    V3(Vec<MfsInstant>),
}

/// (ABI version 3.) What a position query asks of a plugin engine, owned
/// by the host: the ABI's `MfsPositionSpec` borrows from it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PositionSpec {
    /// `MFS_STEP_*`.
    pub step: u32,
    /// `MFS_DETECT_*` bits, for a fence.
    pub detect: u32,
    /// Geodetic (lon/lat on WGS84), else planar.
    pub geodetic: bool,
    /// The EPSG code.
    pub srid: i32,
    /// `EPSG:4326`.
    pub crs: String,
    /// The geometry as GeoJSON text, or empty.
    pub geometry: String,
    /// The whole query as JSON.
    pub json: String,
}

// SAFETY: the ABI lets a query's state be used from any thread, one at a
// time; `State` is owned by one thread and its methods take `&mut self`.
unsafe impl Send for State {}

/// What a call's callbacks gathered.
pub(crate) struct Collector<'a> {
    /// Where full batches go; `None` discards events (a close after failure).
    pub sink: Option<Sink<'a>>,
    events: Vec<Event>,
    failure: Option<CallError>,
    /// The consumer has gone.
    pub gone: bool,
    property: Arc<str>,
    operation: Arc<str>,
    no_result: NoResult<'a>,
    /// Records with no result skipped, not yet taken.
    skipped: u64,
    /// Skipped, to be carried by the next event (the one right after).
    carry: u64,
    /// A position query's: points and detections are results.
    pub positions: bool,
}

impl Collector<'_> {
    fn host(&mut self) -> MfsHost {
        MfsHost {
            ctx: (self as *mut Collector<'_>).cast::<c_void>(),
            emit: emit_callback,
            fail: fail_callback,
            error: error_callback,
        }
    }

    /// The callbacks for a version-1 or version-2 plugin.
    fn host_v2(&mut self) -> v2::MfsHost {
        v2::MfsHost {
            ctx: (self as *mut Collector<'_>).cast::<c_void>(),
            emit: emit_callback_v2,
            fail: fail_callback,
            error: error_callback,
        }
    }

    /// Counts a record the host skipped before the plugin saw it: the
    /// next event carries it, as one the plugin found no result for.
    pub(crate) fn skip_one(&mut self) {
        self.skipped += 1;
        self.carry += 1;
    }

    /// The records with no result skipped since the last call, for the
    /// query's `skipped` total (the event after each carries it).
    pub(crate) fn take_skipped(&mut self) -> u64 {
        std::mem::take(&mut self.skipped)
    }

    /// A record at `datetime` with no result, for `why`: skipped, the
    /// call's failure, or reported. Returns what the plugin is told:
    /// [`MFS_OK`] to go on, [`MFS_STOP`] to return soon.
    fn no_result(&mut self, datetime: &str, why: &str) -> i32 {
        if matches!(self.no_result, NoResult::Report(_)) {
            // The events before it go first, in order.
            self.deliver();
        }
        match &mut self.no_result {
            NoResult::Skip => {
                self.skipped += 1;
                self.carry += 1;
            }
            NoResult::Fail => {
                self.failure.get_or_insert_with(|| CallError::NoResult {
                    datetime: datetime.to_owned(),
                    why: why.to_owned(),
                });
                return MFS_STOP;
            }
            NoResult::Report(report) => {
                if !self.gone && !report(datetime, why) {
                    self.gone = true;
                }
            }
        }
        if self.gone { MFS_STOP } else { MFS_OK }
    }

    /// Delivers the gathered events, waiting while the consumer is slow.
    pub(crate) fn deliver(&mut self) {
        let events = std::mem::replace(&mut self.events, Vec::with_capacity(BATCH));
        if let Some(sink) = self.sink.as_mut() {
            if !self.gone && !events.is_empty() && !sink(events) {
                self.gone = true;
            }
        }
    }

    fn take(&mut self, raw: &MfsEvent) -> Result<(), CallError> {
        // SAFETY: the plugin's events are valid for the emit call.
        let datetime = unsafe { raw.datetime.as_bytes() };
        let datetime = std::str::from_utf8(datetime).map_err(|_| CallError::DatetimeNotUtf8)?;
        // (Version 3.) An event at a time no instant had (a fence's
        // crossing) gives its time in microseconds, which the host writes.
        let written;
        let datetime = match (datetime.is_empty(), raw.micros) {
            (false, _) => datetime,
            (true, MFS_NO_TIME) => return Err(CallError::NoDatetime),
            (true, micros) => {
                written = mfstream_model::datetime::format_micros(micros);
                written.as_str()
            }
        };
        let point = |v: &MfsValue| {
            Point::with_z(
                v.point.x,
                v.point.y,
                (v.flags & MFS_HAS_Z != 0).then_some(v.point.z),
            )
        };
        let value = match raw.value.kind {
            MFS_POINT if self.positions => Value::Point(point(&raw.value)),
            MFS_DETECT if self.positions => {
                // SAFETY: as the datetime.
                let text = unsafe { raw.value.text.as_bytes() };
                let detect = std::str::from_utf8(text)
                    .ok()
                    .and_then(|t| mfstream_model::geo::Detect::parse(t).ok());
                let Some(detect) = detect.map(mfstream_model::geo::Detect::name) else {
                    return Err(CallError::UnknownDetect {
                        datetime: datetime.to_owned(),
                        detect: message(text),
                    });
                };
                self.events.push(Event::Detect(DetectEvent {
                    datetime: datetime.to_owned(),
                    value: Value::Point(point(&raw.value)),
                    detect,
                    property: self.property.clone(),
                    skipped: std::mem::take(&mut self.carry),
                }));
                return Ok(());
            }
            // Not finite: taken as a record with no result before this.
            MFS_NUMBER => Value::Number(raw.value.number),
            MFS_BOOL => Value::Bool(raw.value.number != 0.0),
            MFS_TEXT => {
                // SAFETY: as the datetime.
                let text = unsafe { raw.value.text.as_bytes() };
                let text = std::str::from_utf8(text).map_err(|_| CallError::TextNotUtf8 {
                    datetime: datetime.to_owned(),
                })?;
                Value::Text(text.to_owned())
            }
            kind => return Err(CallError::UnknownKind { kind }),
        };
        self.events.push(Event::Instant(InstantEvent {
            datetime: datetime.to_owned(),
            value,
            property: self.property.clone(),
            operation: self.operation.clone(),
            skipped: std::mem::take(&mut self.carry),
        }));
        Ok(())
    }
}

/// A message from the plugin, as a failure reason quotes it: lossy UTF-8,
/// at most 200 bytes.
fn message(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]);
    text.trim().to_owned()
}

/// The host's `emit`: copies the events, delivering full batches.
unsafe extern "C" fn emit_callback(ctx: *mut c_void, events: *const MfsEvent, n: usize) -> i32 {
    // SAFETY: `ctx` is the `Collector` of the call in progress on this thread.
    let collector = unsafe { &mut *ctx.cast::<Collector<'_>>() };
    let raw = if n == 0 || events.is_null() {
        &[][..]
    } else {
        // SAFETY: the plugin passes `n` events valid for the call.
        unsafe { std::slice::from_raw_parts(events, n) }
    };
    // Nothing here should panic, but no unwinding may cross into the plugin.
    let result = catch_unwind(AssertUnwindSafe(|| {
        for event in raw {
            if event.value.kind == MFS_NUMBER && !event.value.number.is_finite() {
                // SAFETY: the plugin's events are valid for the emit call.
                let datetime = message(unsafe { event.datetime.as_bytes() });
                let why = "the plugin emitted a value that is not a finite number";
                if collector.no_result(&datetime, why) == MFS_STOP {
                    return MFS_STOP;
                }
                continue;
            }
            if let Err(reason) = collector.take(event) {
                collector.failure.get_or_insert(reason);
                return MFS_STOP;
            }
            if collector.events.len() >= BATCH {
                collector.deliver();
            }
        }
        if collector.gone { MFS_STOP } else { MFS_OK }
    }));
    result.unwrap_or(MFS_STOP)
}

/// The host's `emit` for a version-1 or version-2 plugin: its events, of
/// that layout, as version 3's.
unsafe extern "C" fn emit_callback_v2(
    ctx: *mut c_void,
    events: *const v2::MfsEvent,
    n: usize,
) -> i32 {
    let raw = if n == 0 || events.is_null() {
        &[][..]
    } else {
        // SAFETY: the plugin passes `n` events valid for the call.
        unsafe { std::slice::from_raw_parts(events, n) }
    };
    let events: Vec<MfsEvent> = raw
        .iter()
        .map(|e| MfsEvent {
            datetime: e.datetime,
            value: MfsValue {
                kind: e.value.kind,
                flags: 0,
                number: e.value.number,
                text: e.value.text,
                point: MfsPoint::default(),
            },
            micros: MFS_NO_TIME,
        })
        .collect();
    // SAFETY: `ctx` is the plugin's, passed on; the events are valid for the call.
    unsafe { emit_callback(ctx, events.as_ptr(), events.len()) }
}

/// The host's `error` (ABI version 2): a record with no result.
unsafe extern "C" fn error_callback(ctx: *mut c_void, datetime: MfsStr, why: MfsStr) -> i32 {
    // SAFETY: `ctx` is the `Collector` of the call in progress on this thread.
    let collector = unsafe { &mut *ctx.cast::<Collector<'_>>() };
    // SAFETY: the strings are valid for the call.
    let (datetime, why) = unsafe { (message(datetime.as_bytes()), message(why.as_bytes())) };
    // Nothing here should panic, but no unwinding may cross into the plugin.
    catch_unwind(AssertUnwindSafe(|| collector.no_result(&datetime, &why))).unwrap_or(MFS_STOP)
}

/// The host's `fail`: records the reason.
unsafe extern "C" fn fail_callback(ctx: *mut c_void, message: MfsStr) {
    // SAFETY: `ctx` is the `Collector` of the call in progress on this thread.
    let collector = unsafe { &mut *ctx.cast::<Collector<'_>>() };
    // SAFETY: the message is valid for the call.
    let text = String::from_utf8_lossy(unsafe { message.as_bytes() }).into_owned();
    collector.failure = Some(CallError::Failed(text));
}

/// Why a call into a plugin engine failed: the query's failure reason (or,
/// for `ready`, why the engine is not ready).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The plugin's own reason, given to the host's `fail`.
    #[error("{0}")]
    Failed(String),
    /// A record with no result, under `onError: fail`.
    #[error("record at {datetime}: {why}")]
    NoResult {
        /// The record's datetime.
        datetime: String,
        /// Why it has no result, as the plugin said.
        why: String,
    },
    /// `MFS_ERROR` without a reason.
    #[error("the {engine} plugin engine reported an error without a reason")]
    NoReason {
        /// The engine.
        engine: String,
    },
    /// A status the ABI does not define.
    #[error("the {engine} plugin engine returned the unknown status {status}")]
    Status {
        /// The engine.
        engine: String,
        /// The status returned.
        status: i32,
    },
    /// An event whose datetime is not UTF-8.
    #[error("the plugin emitted a datetime that is not UTF-8")]
    DatetimeNotUtf8,
    /// An event whose text is not UTF-8.
    #[error("the plugin emitted a text that is not UTF-8 at {datetime}")]
    TextNotUtf8 {
        /// The event's datetime.
        datetime: String,
    },
    /// An event whose value kind the ABI does not define, or a point in a
    /// query that is not over positions.
    #[error("the plugin emitted a value of unknown kind {kind}")]
    UnknownKind {
        /// The `MfsValue::kind` emitted.
        kind: u32,
    },
    /// (Version 3.) An event with neither a datetime nor a time.
    #[error("the plugin emitted an event with an empty datetime and no micros: set one of them")]
    NoDatetime,
    /// (Version 3.) A detection of a kind that does not exist.
    #[error(
        "the plugin emitted a detection {detect:?} at {datetime}: expected \"enter\", \"exit\", \
         \"inside\", \"outside\" or \"cross\""
    )]
    UnknownDetect {
        /// The event's datetime.
        datetime: String,
        /// What it said.
        detect: String,
    },
    /// (Version 3.) A position query on an engine that does not serve them.
    #[error("the {engine} plugin engine serves no position queries")]
    NoPositions {
        /// The engine.
        engine: String,
    },
}

/// The outcome of a plugin call.
fn outcome(engine: &str, status: i32, collector: &mut Collector<'_>) -> Result<(), CallError> {
    match (status, collector.failure.take()) {
        (MFS_OK, None) => Ok(()),
        (MFS_OK | MFS_ERROR, Some(reason)) => Err(reason),
        (MFS_ERROR, None) => Err(CallError::NoReason {
            engine: engine.to_owned(),
        }),
        (status, _) => Err(CallError::Status {
            engine: engine.to_owned(),
            status,
        }),
    }
}

/// Asks the engine whether it can run queries now: `Err` says why not.
pub(crate) fn ready(fns: &EngineFns) -> Result<(), CallError> {
    let mut collector = Collector::detached();
    // SAFETY: `ready` is called per the ABI with a host valid for the call.
    let status = match fns.fns {
        Fns::V2 {
            ready: Some(ready), ..
        } => unsafe { ready(&collector.host_v2()) },
        Fns::V3 {
            ready: Some(ready), ..
        } => unsafe { ready(&collector.host()) },
        _ => return Ok(()),
    };
    outcome(&fns.name, status, &mut collector)
}

impl State {
    /// Opens a query with `spec` (JSON).
    pub(crate) fn open(
        library: Arc<Library>,
        fns: EngineFns,
        spec: &str,
    ) -> Result<State, CallError> {
        let mut collector = Collector::detached();
        let mut ptr = std::ptr::null_mut();
        let spec = MfsStr::new(spec);
        // SAFETY: open is called per the ABI with a borrowed spec, a host
        // valid for the call and a place for the state.
        let status = match fns.fns {
            Fns::V2 { open, .. } => unsafe { open(spec, &collector.host_v2(), &mut ptr) },
            Fns::V3 { open, .. } => unsafe { open(spec, &collector.host(), &mut ptr) },
        };
        outcome(&fns.name, status, &mut collector)?;
        Ok(State::new(ptr, fns, library))
    }

    /// (ABI version 3.) Opens a position query with `spec`.
    pub(crate) fn open_positions(
        library: Arc<Library>,
        fns: EngineFns,
        spec: &PositionSpec,
    ) -> Result<State, CallError> {
        let no_positions = || CallError::NoPositions {
            engine: fns.name.clone(),
        };
        let open = match fns.fns {
            Fns::V3 {
                open_positions: Some(open),
                ..
            } if fns.positions => open,
            _ => return Err(no_positions()),
        };
        let raw = MfsPositionSpec {
            struct_size: size_of::<MfsPositionSpec>() as u32,
            step: spec.step,
            detect: spec.detect,
            geodetic: spec.geodetic.into(),
            srid: spec.srid,
            crs: MfsStr::new(&spec.crs),
            geometry: MfsStr::new(&spec.geometry),
            spec: MfsStr::new(&spec.json),
        };
        let mut collector = Collector::detached();
        let mut ptr = std::ptr::null_mut();
        // SAFETY: open_positions is called per the ABI with a spec borrowing
        // `spec`'s strings, a host valid for the call and a place for the
        // state.
        let status = unsafe { open(&raw, &collector.host(), &mut ptr) };
        outcome(&fns.name, status, &mut collector)?;
        let mut state = State::new(ptr, fns, library);
        state.positions = true;
        Ok(state)
    }

    fn new(ptr: *mut c_void, fns: EngineFns, library: Arc<Library>) -> State {
        let raw = match fns.fns {
            Fns::V2 { .. } => RawBatch::V2(Vec::new()),
            Fns::V3 { .. } => RawBatch::V3(Vec::new()),
        };
        State {
            ptr,
            fns,
            raw,
            positions: false,
            _library: library,
        }
    }

    /// Hands `batch` to the plugin, its events to `collector`.
    pub(crate) fn process(
        &mut self,
        batch: &[Instant],
        collector: &mut Collector<'_>,
    ) -> Result<(), CallError> {
        let status = match (&mut self.raw, self.fns.fns) {
            (RawBatch::V2(raw), Fns::V2 { process, .. }) => {
                raw.extend(batch.iter().map(to_raw_v2));
                let host = collector.host_v2();
                // SAFETY: the state is open; the batch (of the plugin's
                // layout) and host are valid for the call.
                let status = unsafe { process(self.ptr, raw.as_ptr(), raw.len(), &host) };
                raw.clear();
                status
            }
            (RawBatch::V3(raw), Fns::V3 { process, .. }) => {
                raw.extend(batch.iter().map(|i| to_raw(i, self.positions)));
                let host = collector.host();
                // SAFETY: as above.
                let status = unsafe { process(self.ptr, raw.as_ptr(), raw.len(), &host) };
                raw.clear();
                status
            }
            // `State::new` pairs the buffer with the functions' version.
            _ => MFS_ERROR,
        };
        outcome(&self.fns.name, status, collector)
    }

    pub(crate) fn close(&mut self, collector: &mut Collector<'_>) -> Result<(), CallError> {
        let ptr = std::mem::replace(&mut self.ptr, std::ptr::null_mut());
        if ptr.is_null() {
            return Ok(());
        }
        // SAFETY: the state is open and closed only here, once (ptr is
        // nulled above).
        let status = match self.fns.fns {
            Fns::V2 { close, .. } => unsafe { close(ptr, &collector.host_v2()) },
            Fns::V3 { close, .. } => unsafe { close(ptr, &collector.host()) },
        };
        outcome(&self.fns.name, status, collector)
    }
}

impl Drop for State {
    fn drop(&mut self) {
        let mut collector = Collector::detached();
        let _ = self.close(&mut collector);
    }
}

impl<'a> Collector<'a> {
    /// A collector handing events for `property` and `operation` to `sink`,
    /// and records with no result to `no_result`.
    pub(crate) fn new(
        sink: Sink<'a>,
        property: Arc<str>,
        operation: Arc<str>,
        no_result: NoResult<'a>,
    ) -> Collector<'a> {
        Collector {
            sink: Some(sink),
            events: Vec::new(),
            failure: None,
            gone: false,
            property,
            operation,
            no_result,
            skipped: 0,
            carry: 0,
            positions: false,
        }
    }

    /// A collector that discards events.
    fn detached() -> Collector<'a> {
        Collector {
            sink: None,
            events: Vec::new(),
            failure: None,
            gone: false,
            property: "".into(),
            operation: "".into(),
            no_result: NoResult::Skip,
            skipped: 0,
            carry: 0,
            positions: false,
        }
    }
}

/// The version-3 ABI view of an instant, borrowing its strings; with its
/// time in microseconds for a position query's point.
fn to_raw(instant: &Instant, positions: bool) -> MfsInstant {
    let mut value = MfsValue {
        kind: MFS_NUMBER,
        flags: 0,
        number: 0.0,
        text: MfsStr::EMPTY,
        point: MfsPoint::default(),
    };
    let mut micros = MFS_NO_TIME;
    match &instant.value {
        Value::Number(x) => value.number = *x,
        Value::Bool(b) => {
            value.kind = MFS_BOOL;
            value.number = if *b { 1.0 } else { 0.0 };
        }
        Value::Text(s) => {
            value.kind = MFS_TEXT;
            value.text = MfsStr::new(s);
        }
        // The host checked a position query's instants (a point of the
        // reference system, a datetime after the previous one) before
        // handing them over.
        Value::Point(p) if positions => {
            value.kind = MFS_POINT;
            value.flags = if p.z().is_some() { MFS_HAS_Z } else { 0 };
            value.point = MfsPoint {
                x: p.x,
                y: p.y,
                z: p.z().unwrap_or(0.0),
            };
            micros = mfstream_model::datetime::parse(&instant.datetime)
                .map_or(MFS_NO_TIME, |t| t.micros());
        }
        // A numeric query never gets a position (the typed source ends a
        // query on a scalar property at its first); were one to come, it
        // reaches the plugin as a value it refuses (a NaN number), never as
        // another record's value.
        Value::Point(_) | Value::BBox(_) => value.number = f64::NAN,
    }
    MfsInstant {
        datetime: MfsStr::new(&instant.datetime),
        value,
        micros,
    }
}

/// The version-2 ABI view of an instant (numbers, texts, booleans only).
fn to_raw_v2(instant: &Instant) -> v2::MfsInstant {
    let value = match &instant.value {
        Value::Number(x) => v2::MfsValue {
            kind: MFS_NUMBER,
            number: *x,
            text: MfsStr::EMPTY,
        },
        Value::Bool(b) => v2::MfsValue {
            kind: MFS_BOOL,
            number: if *b { 1.0 } else { 0.0 },
            text: MfsStr::EMPTY,
        },
        Value::Text(s) => v2::MfsValue {
            kind: MFS_TEXT,
            number: 0.0,
            text: MfsStr::new(s),
        },
        // Versions 1 and 2 have no position: such a plugin is never
        // planned a position query. Were one to come, it reaches the plugin
        // as a value it refuses (a NaN number).
        Value::Point(_) | Value::BBox(_) => v2::MfsValue {
            kind: MFS_NUMBER,
            number: f64::NAN,
            text: MfsStr::EMPTY,
        },
    };
    v2::MfsInstant {
        datetime: MfsStr::new(&instant.datetime),
        value,
    }
}

//! The safe side of the ABI for Rust authors: borrowed views of the host's
//! batches, an [`Emitter`] for results, and the `extern "C"` glue the export
//! macro points the descriptor at.

use std::any::Any;
use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::Engine;
use crate::abi::{
    MFS_BOOL, MFS_DETECT, MFS_DETECT_CROSS, MFS_DETECT_ENTER, MFS_DETECT_EXIT, MFS_DETECT_INSIDE,
    MFS_DETECT_OUTSIDE, MFS_ERROR, MFS_HAS_Z, MFS_NO_TIME, MFS_NUMBER, MFS_OK, MFS_POINT,
    MFS_STEP_AZIMUTH, MFS_STEP_CUMULATIVE_LENGTH, MFS_STEP_DISTANCE, MFS_STEP_GEOFENCE,
    MFS_STEP_POSITION, MFS_STEP_SPEED, MFS_STOP, MFS_TEXT, MfsEvent, MfsHost, MfsInstant, MfsPoint,
    MfsPositionSpec, MfsStr, MfsValue,
};

/// Events buffered by an [`Emitter`] before they are handed to the host.
const EMIT_BATCH: usize = 1024;

/// The value of an instant or event.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Value<'a> {
    /// A `TReal` or `TInteger` value.
    Number(f64),
    /// A `TText` value.
    Text(&'a str),
    /// A `TBoolean` value.
    Bool(bool),
    /// A position (`TGeogPoint`, `TGeomPoint`).
    Point(Point),
    /// A geofence detection, emitted only: what and where.
    Detect(Detect, Point),
}

/// A position: lon/lat in degrees (geodetic) or x/y (planar), and its
/// height if it has one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Longitude in degrees, or easting.
    pub x: f64,
    /// Latitude in degrees, or northing.
    pub y: f64,
    /// The height, if given.
    pub z: Option<f64>,
}

impl Point {
    /// A 2D point.
    pub const fn new(x: f64, y: f64) -> Point {
        Point { x, y, z: None }
    }

    fn from_abi(value: &MfsValue) -> Point {
        Point {
            x: value.point.x,
            y: value.point.y,
            z: (value.flags & MFS_HAS_Z != 0).then_some(value.point.z),
        }
    }
}

/// A geofence detect kind (Tile38's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Detect {
    /// The position crossed the boundary inwards.
    Enter,
    /// The position crossed the boundary outwards.
    Exit,
    /// The instant is inside (or on the boundary).
    Inside,
    /// The instant is outside.
    Outside,
    /// A segment with both ends outside passed through the fence.
    Cross,
}

impl Detect {
    /// Every kind.
    pub const ALL: [Detect; 5] = [
        Detect::Enter,
        Detect::Exit,
        Detect::Inside,
        Detect::Outside,
        Detect::Cross,
    ];

    /// The name events carry: `enter`, `exit`, `inside`, `outside`, `cross`.
    pub const fn name(self) -> &'static str {
        match self {
            Detect::Enter => "enter",
            Detect::Exit => "exit",
            Detect::Inside => "inside",
            Detect::Outside => "outside",
            Detect::Cross => "cross",
        }
    }

    /// Its `MFS_DETECT_*` bit.
    pub const fn bit(self) -> u32 {
        match self {
            Detect::Enter => MFS_DETECT_ENTER,
            Detect::Exit => MFS_DETECT_EXIT,
            Detect::Inside => MFS_DETECT_INSIDE,
            Detect::Outside => MFS_DETECT_OUTSIDE,
            Detect::Cross => MFS_DETECT_CROSS,
        }
    }
}

/// What a position query computes per instant (`MFS_STEP_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// The speed of the segment ending at each instant.
    Speed,
    /// The azimuth of the segment ending at each instant, in degrees.
    Azimuth,
    /// The length travelled since the first instant.
    CumulativeLength,
    /// The distance to the geometry.
    Distance,
    /// The instant itself.
    Position,
    /// The geofence's detections.
    Geofence,
}

impl Step {
    /// The step of an `MFS_STEP_*` code.
    pub const fn from_abi(code: u32) -> Option<Step> {
        Some(match code {
            MFS_STEP_SPEED => Step::Speed,
            MFS_STEP_AZIMUTH => Step::Azimuth,
            MFS_STEP_CUMULATIVE_LENGTH => Step::CumulativeLength,
            MFS_STEP_DISTANCE => Step::Distance,
            MFS_STEP_POSITION => Step::Position,
            MFS_STEP_GEOFENCE => Step::Geofence,
            _ => return None,
        })
    }
}

/// A position query, as [`Engine::open_positions`](crate::Engine::open_positions)
/// gets it (ABI version 3; the contract is in [`abi`](crate::abi)'s docs).
#[derive(Debug, Clone, Copy)]
pub struct PositionSpec<'a> {
    /// What to compute per instant.
    pub step: Step,
    /// Geodetic lon/lat on the WGS84 ellipsoid (`TGeogPoint`), else planar
    /// (`TGeomPoint`).
    pub geodetic: bool,
    /// The EPSG code of the reference system: 4326 when geodetic.
    pub srid: i32,
    /// The reference system, `EPSG:4326`.
    pub crs: &'a str,
    /// The geometry of `distance` or the fence, as GeoJSON text.
    pub geometry: Option<&'a str>,
    /// The `MFS_DETECT_*` bits a fence emits (0 when not a fence).
    pub detect: u32,
    /// The whole query as JSON.
    pub json: &'a str,
}

impl PositionSpec<'_> {
    /// Whether a fence emits `detect`.
    pub fn detects(&self, detect: Detect) -> bool {
        self.detect & detect.bit() != 0
    }
}

/// One instant of a batch, borrowed from the host for the call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Instant<'a> {
    /// The ISO-8601 datetime, verbatim.
    pub datetime: &'a str,
    /// The datetime in microseconds since 1970-01-01 UTC, for the instants
    /// of a position query (ABI version 3).
    pub micros: Option<i64>,
    /// The value.
    pub value: Value<'a>,
}

/// A batch of instants, borrowed from the host for the call.
#[derive(Debug, Clone, Copy)]
pub struct Batch<'a> {
    raw: &'a [MfsInstant],
}

impl<'a> Batch<'a> {
    /// The number of instants.
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// The instants, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Instant<'a>> + 'a {
        self.raw.iter().map(|raw| Instant {
            // SAFETY: the host passes strings valid for the call ('a).
            datetime: unsafe { host_str(raw.datetime) },
            micros: (raw.micros != MFS_NO_TIME).then_some(raw.micros),
            value: match raw.value.kind {
                MFS_TEXT => {
                    // SAFETY: as for the datetime.
                    Value::Text(unsafe { host_str(raw.value.text) })
                }
                MFS_BOOL => Value::Bool(raw.value.number != 0.0),
                MFS_POINT => Value::Point(Point::from_abi(&raw.value)),
                _ => Value::Number(raw.value.number),
            },
        })
    }
}

/// A string from the host: valid UTF-8 (the host's strings are Rust
/// `String`s), borrowed for the call.
///
/// # Safety
///
/// `s` is valid for `'a`.
unsafe fn host_str<'a>(s: MfsStr) -> &'a str {
    // SAFETY: the caller guarantees validity for 'a; the bytes are UTF-8
    // because the host only passes Rust strings. A lossy check would cost a
    // scan of every datetime of every batch.
    unsafe { std::str::from_utf8_unchecked(s.as_bytes()) }
}

/// A buffered event: its strings as ranges of the emitter's text.
struct Pending {
    datetime: (usize, usize),
    micros: i64,
    kind: u32,
    flags: u32,
    number: f64,
    text: (usize, usize),
    point: MfsPoint,
}

/// Where an engine emits its results. Events are buffered and handed to the
/// host in batches.
pub struct Emitter<'h> {
    host: &'h MfsHost,
    /// The datetimes and texts of the buffered events, back to back.
    text: Vec<u8>,
    /// The buffered events.
    events: Vec<Pending>,
    /// The ABI view of `events`, rebuilt at each flush (kept for its
    /// allocation).
    raw: Vec<MfsEvent>,
    stopped: bool,
}

impl std::fmt::Debug for Emitter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emitter")
            .field("buffered", &self.events.len())
            .field("stopped", &self.stopped)
            .finish()
    }
}

impl<'h> Emitter<'h> {
    /// An emitter sized for about `n` events.
    fn new(host: &'h MfsHost, n: usize) -> Emitter<'h> {
        let n = n.min(EMIT_BATCH);
        Emitter {
            host,
            // A datetime is about 24 bytes.
            text: Vec::with_capacity(n * 32),
            events: Vec::with_capacity(n),
            raw: Vec::with_capacity(n),
            stopped: false,
        }
    }

    /// Emits one result. A number should be finite: the host takes NaN or
    /// infinity for a record with no result, as [`no_result`](Emitter::no_result).
    pub fn emit(&mut self, datetime: &str, value: Value<'_>) {
        self.push(datetime, MFS_NO_TIME, value);
    }

    /// Emits one result at `micros` (microseconds since 1970-01-01 UTC),
    /// which the host writes as ISO-8601: for a time no instant had, such
    /// as a geofence crossing's (ABI version 3).
    pub fn emit_at(&mut self, micros: i64, value: Value<'_>) {
        self.push("", micros, value);
    }

    fn push(&mut self, datetime: &str, micros: i64, value: Value<'_>) {
        if self.stopped {
            return;
        }
        let start = self.text.len();
        self.text.extend_from_slice(datetime.as_bytes());
        let end = self.text.len();
        let mut event = Pending {
            datetime: (start, end),
            micros,
            kind: MFS_NUMBER,
            flags: 0,
            number: 0.0,
            text: (end, end),
            point: MfsPoint::default(),
        };
        let point = |event: &mut Pending, p: Point| {
            event.point = MfsPoint {
                x: p.x,
                y: p.y,
                z: p.z.unwrap_or(0.0),
            };
            event.flags = if p.z.is_some() { MFS_HAS_Z } else { 0 };
        };
        match value {
            Value::Number(x) => event.number = x,
            Value::Bool(b) => {
                event.kind = MFS_BOOL;
                event.number = if b { 1.0 } else { 0.0 };
            }
            Value::Text(s) => {
                self.text.extend_from_slice(s.as_bytes());
                event.kind = MFS_TEXT;
                event.text = (end, self.text.len());
            }
            Value::Point(p) => {
                event.kind = MFS_POINT;
                point(&mut event, p);
            }
            Value::Detect(d, p) => {
                self.text.extend_from_slice(d.name().as_bytes());
                event.kind = MFS_DETECT;
                event.text = (end, self.text.len());
                point(&mut event, p);
            }
        }
        self.events.push(event);
        if self.events.len() >= EMIT_BATCH {
            self.flush();
        }
    }

    /// Reports that the record at `datetime` has no result (ABI version 2:
    /// `ln` of -1, an `exp` that overflows), with a message for people, in
    /// place of its event. The host applies the query's `onError`: under
    /// `skip` the record is counted and the batch goes on; under `fail` the
    /// query fails naming it, and the emitter stops ([`is_stopped`]).
    ///
    /// [`is_stopped`]: Emitter::is_stopped
    pub fn no_result(&mut self, datetime: &str, message: &str) {
        if self.stopped {
            return;
        }
        // The events before it reach the host first, in order.
        self.flush();
        // SAFETY: the callback and context are valid for the call this
        // emitter lives in (the host always sets `error`: a host that loads
        // a version-2 plugin has it); the strings are copied before it
        // returns.
        let answer = unsafe {
            (self.host.error)(self.host.ctx, MfsStr::new(datetime), MfsStr::new(message))
        };
        if answer == MFS_STOP {
            self.stopped = true;
        }
    }

    /// Whether the host asked to stop: the query is ending, and later events
    /// are dropped. A long computation may check it to return early.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Hands the buffered events to the host.
    fn flush(&mut self) {
        if self.events.is_empty() {
            return;
        }
        let base = self.text.as_ptr();
        let at = |start: usize, end: usize| MfsStr {
            // SAFETY: start <= text.len(), so the pointer stays in bounds.
            ptr: unsafe { base.add(start) },
            len: end - start,
        };
        let raw = &mut self.raw;
        raw.clear();
        raw.extend(self.events.iter().map(|e| MfsEvent {
            datetime: at(e.datetime.0, e.datetime.1),
            value: MfsValue {
                kind: e.kind,
                flags: e.flags,
                number: e.number,
                text: at(e.text.0, e.text.1),
                point: e.point,
            },
            micros: e.micros,
        }));
        // SAFETY: the host's callback and context are valid for the call this
        // emitter lives in; the events point into `self.text`, which is not
        // touched until the callback returns, and the host copies them.
        let answer = unsafe { (self.host.emit)(self.host.ctx, raw.as_ptr(), raw.len()) };
        raw.clear();
        if answer == MFS_STOP {
            self.stopped = true;
        }
        self.events.clear();
        self.text.clear();
    }
}

/// Tells the host why the current call fails.
fn fail(host: &MfsHost, message: &str) -> i32 {
    // SAFETY: the callback and context are valid for the call; the host
    // copies the message before returning.
    unsafe { (host.fail)(host.ctx, MfsStr::new(message)) };
    MFS_ERROR
}

/// The text of a panic's payload.
fn panic_message(payload: &(dyn Any + Send)) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic with a non-string payload");
    format!("the plugin panicked: {text}")
}

/// Runs `f`, turning an `Err` or a panic into a failure reported to `host`.
fn guarded(host: &MfsHost, f: impl FnOnce() -> Result<(), String>) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => MFS_OK,
        Ok(Err(message)) => fail(host, &message),
        Err(payload) => {
            let message = panic_message(&*payload);
            // Dropping a payload can itself panic; leak it rather than risk
            // unwinding out of this `extern "C"` function.
            std::mem::forget(payload);
            fail(host, &message)
        }
    }
}

/// `open` for engine `E`.
///
/// # Safety
///
/// Called by the host under the ABI's contract (`abi` module docs).
#[doc(hidden)]
pub unsafe extern "C" fn __open<E: Engine>(
    spec: MfsStr,
    host: *const MfsHost,
    state: *mut *mut c_void,
) -> i32 {
    // SAFETY: the host passes a valid host for the duration of the call.
    let host = unsafe { &*host };
    // SAFETY: the spec is borrowed for the call.
    let spec = unsafe { spec.as_bytes() };
    let Ok(spec) = std::str::from_utf8(spec) else {
        return fail(host, "the query spec is not UTF-8");
    };
    guarded(host, || {
        let engine = E::open(spec)?;
        // SAFETY: `state` is a valid place for the result, per the ABI.
        unsafe { *state = Box::into_raw(Box::new(engine)).cast::<c_void>() };
        Ok(())
    })
}

/// `open_positions` for engine `E` (ABI version 3).
///
/// # Safety
///
/// Called by the host under the ABI's contract (`abi` module docs).
#[doc(hidden)]
pub unsafe extern "C" fn __open_positions<E: Engine>(
    spec: *const MfsPositionSpec,
    host: *const MfsHost,
    state: *mut *mut c_void,
) -> i32 {
    // SAFETY: the host passes a valid host for the duration of the call.
    let host = unsafe { &*host };
    if spec.is_null() {
        return fail(host, "the host passed no position spec");
    }
    // SAFETY: the host passes a spec valid for the call.
    let raw = unsafe { &*spec };
    let Some(step) = Step::from_abi(raw.step) else {
        return fail(
            host,
            &format!(
                "this plugin does not know position step {} (built against an older \
                 mfstream-plugin): rebuild it",
                raw.step
            ),
        );
    };
    // SAFETY: the strings are borrowed for the call.
    let text = |s: MfsStr| std::str::from_utf8(unsafe { s.as_bytes() });
    let (Ok(crs), Ok(geometry), Ok(json)) = (text(raw.crs), text(raw.geometry), text(raw.spec))
    else {
        return fail(host, "the position spec is not UTF-8");
    };
    let spec = PositionSpec {
        step,
        geodetic: raw.geodetic != 0,
        srid: raw.srid,
        crs,
        geometry: (!geometry.is_empty()).then_some(geometry),
        detect: raw.detect,
        json,
    };
    guarded(host, || {
        let engine = E::open_positions(&spec)?;
        // SAFETY: `state` is a valid place for the result, per the ABI.
        unsafe { *state = Box::into_raw(Box::new(engine)).cast::<c_void>() };
        Ok(())
    })
}

/// `process` for engine `E`.
///
/// # Safety
///
/// Called by the host under the ABI's contract, with a state `__open::<E>`
/// made and `close` has not freed.
#[doc(hidden)]
pub unsafe extern "C" fn __process<E: Engine>(
    state: *mut c_void,
    batch: *const MfsInstant,
    n: usize,
    host: *const MfsHost,
) -> i32 {
    // SAFETY: the host passes a valid host for the duration of the call.
    let host = unsafe { &*host };
    // SAFETY: `state` is the live `Box<E>` made by `__open::<E>`, used by
    // this thread alone for the call.
    let engine = unsafe { &mut *state.cast::<E>() };
    let raw = if n == 0 || batch.is_null() {
        &[][..]
    } else {
        // SAFETY: the host passes `n` instants borrowed for the call.
        unsafe { std::slice::from_raw_parts(batch, n) }
    };
    let mut out = Emitter::new(host, raw.len());
    let status = guarded(host, || engine.process(Batch { raw }, &mut out));
    // What was emitted before a failure is delivered, then the failure.
    out.flush();
    status
}

/// `ready` for engine `E`.
///
/// # Safety
///
/// Called by the host under the ABI's contract.
#[doc(hidden)]
pub unsafe extern "C" fn __ready<E: Engine>(host: *const MfsHost) -> i32 {
    // SAFETY: the host passes a valid host for the duration of the call.
    let host = unsafe { &*host };
    guarded(host, E::ready)
}

/// `close` for engine `E`: flushes and frees.
///
/// # Safety
///
/// Called by the host once per state `__open::<E>` made.
#[doc(hidden)]
pub unsafe extern "C" fn __close<E: Engine>(state: *mut c_void, host: *const MfsHost) -> i32 {
    // SAFETY: the host passes a valid host for the duration of the call.
    let host = unsafe { &*host };
    // SAFETY: `state` is the `Box<E>` made by `__open::<E>`; the host calls
    // close once, so ownership is taken back exactly once.
    let engine = unsafe { Box::from_raw(state.cast::<E>()) };
    let mut out = Emitter::new(host, 0);
    let status = guarded(host, || engine.close(&mut out));
    out.flush();
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Seen {
        events: Vec<(String, f64)>,
        error: Option<String>,
        no_result: Vec<(String, String)>,
    }

    unsafe extern "C" fn no_result(ctx: *mut c_void, datetime: MfsStr, message: MfsStr) -> i32 {
        // SAFETY: the test passes a `Seen`; the strings are valid for the call.
        let (seen, dt, text) = unsafe {
            (
                &mut *ctx.cast::<Seen>(),
                datetime.as_bytes(),
                message.as_bytes(),
            )
        };
        let dt = String::from_utf8_lossy(dt).into_owned();
        // The events before it were handed over first.
        assert_eq!(seen.events.len(), seen.no_result.len() + 1, "{dt}");
        seen.no_result
            .push((dt, String::from_utf8_lossy(text).into_owned()));
        MFS_OK
    }

    unsafe extern "C" fn emit(ctx: *mut c_void, events: *const MfsEvent, n: usize) -> i32 {
        // SAFETY: the test passes a `Seen` and `n` events.
        let (seen, events) = unsafe {
            (
                &mut *ctx.cast::<Seen>(),
                std::slice::from_raw_parts(events, n),
            )
        };
        for e in events {
            // SAFETY: the emitter's strings are valid for the call.
            let dt = String::from_utf8(unsafe { e.datetime.as_bytes() }.to_vec()).unwrap();
            seen.events.push((dt, e.value.number));
        }
        MFS_OK
    }

    unsafe extern "C" fn record_failure(ctx: *mut c_void, message: MfsStr) {
        // SAFETY: the test passes a `Seen`; the message is valid for the call.
        let (seen, text) = unsafe { (&mut *ctx.cast::<Seen>(), message.as_bytes()) };
        seen.error = Some(String::from_utf8_lossy(text).into_owned());
    }

    struct Halve;

    impl Engine for Halve {
        const NAME: &'static str = "halve";
        const DESCRIPTION: &'static str = "";
        fn open(spec: &str) -> Result<Self, String> {
            match spec {
                "panic" => panic!("asked to panic"),
                "refuse" => Err("refused".into()),
                _ => Ok(Halve),
            }
        }
        fn process(&mut self, batch: Batch<'_>, out: &mut Emitter<'_>) -> Result<(), String> {
            for i in batch.iter() {
                match i.value {
                    Value::Number(x) if x.is_nan() => out.no_result(i.datetime, "not a number"),
                    Value::Number(x) if x < 0.0 => panic!("negative at {}", i.datetime),
                    Value::Number(x) => out.emit(i.datetime, Value::Number(x / 2.0)),
                    _ => return Err("not a number".into()),
                }
            }
            Ok(())
        }
    }

    fn host(seen: &mut Seen) -> MfsHost {
        MfsHost {
            ctx: (seen as *mut Seen).cast(),
            emit,
            fail: record_failure,
            error: no_result,
        }
    }

    fn instant(dt: &'static str, x: f64) -> MfsInstant {
        MfsInstant {
            datetime: MfsStr::new(dt),
            value: MfsValue {
                kind: MFS_NUMBER,
                flags: 0,
                number: x,
                text: MfsStr::EMPTY,
                point: MfsPoint::default(),
            },
            micros: MFS_NO_TIME,
        }
    }

    #[test]
    fn a_panic_in_process_becomes_an_error_after_earlier_events() {
        let mut seen = Seen::default();
        let host = host(&mut seen);
        let mut state = std::ptr::null_mut();
        // SAFETY: the calls follow the ABI: open, process, close.
        unsafe {
            assert_eq!(
                __open::<Halve>(MfsStr::new("{}"), &host, &mut state),
                MFS_OK
            );
            let batch = [instant("a", 4.0), instant("b", -1.0)];
            assert_eq!(
                __process::<Halve>(state, batch.as_ptr(), 2, &host),
                MFS_ERROR
            );
            assert_eq!(__close::<Halve>(state, &host), MFS_OK);
        }
        assert_eq!(seen.events, [("a".to_owned(), 2.0)]);
        assert_eq!(
            seen.error.as_deref(),
            Some("the plugin panicked: negative at b")
        );
    }

    #[test]
    fn a_record_with_no_result_is_reported_in_order_and_the_batch_goes_on() {
        let mut seen = Seen::default();
        let host = host(&mut seen);
        let mut state = std::ptr::null_mut();
        // SAFETY: the calls follow the ABI: open, process, close.
        unsafe {
            assert_eq!(
                __open::<Halve>(MfsStr::new("{}"), &host, &mut state),
                MFS_OK
            );
            let batch = [instant("a", 4.0), instant("b", f64::NAN), instant("c", 2.0)];
            assert_eq!(__process::<Halve>(state, batch.as_ptr(), 3, &host), MFS_OK);
            assert_eq!(__close::<Halve>(state, &host), MFS_OK);
        }
        assert_eq!(seen.events, [("a".to_owned(), 2.0), ("c".to_owned(), 1.0)]);
        assert_eq!(
            seen.no_result,
            [("b".to_owned(), "not a number".to_owned())]
        );
        assert_eq!(seen.error, None);
    }

    #[test]
    fn open_errors_and_panics_are_reported_not_unwound() {
        for (spec, expected) in [
            ("refuse", "refused"),
            ("panic", "the plugin panicked: asked to panic"),
        ] {
            let mut seen = Seen::default();
            let host = host(&mut seen);
            let mut state = std::ptr::null_mut();
            // SAFETY: open with a valid host and state slot.
            let status = unsafe { __open::<Halve>(MfsStr::new(spec), &host, &mut state) };
            assert_eq!(status, MFS_ERROR);
            assert_eq!(seen.error.as_deref(), Some(expected));
        }
    }

    /// Echoes each position, and a detection 1 µs after it.
    struct Echo;

    impl Engine for Echo {
        const NAME: &'static str = "echo";
        const DESCRIPTION: &'static str = "";
        const SERVES: u32 = crate::abi::MFS_SERVES_TRANSFORM | crate::abi::MFS_SERVES_POSITIONS;
        fn open(_: &str) -> Result<Self, String> {
            Err("positions only".into())
        }
        fn open_positions(spec: &PositionSpec<'_>) -> Result<Self, String> {
            assert_eq!(spec.step, Step::Geofence);
            assert_eq!(
                (spec.geodetic, spec.srid, spec.crs),
                (true, 4326, "EPSG:4326")
            );
            assert_eq!(spec.geometry, Some("{\"type\":\"Polygon\"}"));
            assert!(spec.detects(Detect::Enter) && !spec.detects(Detect::Inside));
            Ok(Echo)
        }
        fn process(&mut self, batch: Batch<'_>, out: &mut Emitter<'_>) -> Result<(), String> {
            for i in batch.iter() {
                let Value::Point(p) = i.value else {
                    return Err("not a point".into());
                };
                out.emit(i.datetime, Value::Point(p));
                let micros = i.micros.ok_or("no micros")?;
                out.emit_at(
                    micros + 1,
                    Value::Detect(Detect::Enter, Point::new(p.y, p.x)),
                );
            }
            Ok(())
        }
    }

    #[derive(Default)]
    struct SeenRaw {
        events: Vec<(String, i64, u32, u32, MfsPoint, String)>,
    }

    unsafe extern "C" fn emit_raw(ctx: *mut c_void, events: *const MfsEvent, n: usize) -> i32 {
        // SAFETY: the test passes a `SeenRaw` and `n` events valid for the call.
        let (seen, events) = unsafe {
            (
                &mut *ctx.cast::<SeenRaw>(),
                std::slice::from_raw_parts(events, n),
            )
        };
        for e in events {
            // SAFETY: the emitter's strings are valid for the call.
            let (dt, text) = unsafe { (e.datetime.as_bytes(), e.value.text.as_bytes()) };
            seen.events.push((
                String::from_utf8(dt.to_vec()).unwrap(),
                e.micros,
                e.value.kind,
                e.value.flags,
                e.value.point,
                String::from_utf8(text.to_vec()).unwrap(),
            ));
        }
        MFS_OK
    }

    #[test]
    fn a_position_engine_gets_its_spec_and_points_and_emits_points_and_detections() {
        use crate::abi::*;
        let mut seen = SeenRaw::default();
        let host = MfsHost {
            ctx: (&mut seen as *mut SeenRaw).cast(),
            emit: emit_raw,
            fail: record_failure,
            error: no_result,
        };
        let geometry = "{\"type\":\"Polygon\"}";
        let spec = MfsPositionSpec {
            struct_size: size_of::<MfsPositionSpec>() as u32,
            step: MFS_STEP_GEOFENCE,
            detect: MFS_DETECT_ENTER | MFS_DETECT_EXIT,
            geodetic: 1,
            srid: 4326,
            crs: MfsStr::new("EPSG:4326"),
            geometry: MfsStr::new(geometry),
            spec: MfsStr::new("{}"),
        };
        let point = MfsInstant {
            datetime: MfsStr::new("2026-01-01T00:00:00Z"),
            value: MfsValue {
                kind: MFS_POINT,
                flags: MFS_HAS_Z,
                number: 0.0,
                text: MfsStr::EMPTY,
                point: MfsPoint {
                    x: 1.0,
                    y: 2.0,
                    z: 3.0,
                },
            },
            micros: 1_767_225_600_000_000,
        };
        let mut state = std::ptr::null_mut();
        // SAFETY: the calls follow the ABI: open_positions, process, close.
        unsafe {
            assert_eq!(__open_positions::<Echo>(&spec, &host, &mut state), MFS_OK);
            assert_eq!(__process::<Echo>(state, &point, 1, &host), MFS_OK);
            assert_eq!(__close::<Echo>(state, &host), MFS_OK);
        }
        let xyz = MfsPoint {
            x: 1.0,
            y: 2.0,
            z: 3.0,
        };
        let flipped = MfsPoint {
            x: 2.0,
            y: 1.0,
            z: 0.0,
        };
        assert_eq!(
            seen.events,
            [
                (
                    "2026-01-01T00:00:00Z".to_owned(),
                    MFS_NO_TIME,
                    MFS_POINT,
                    MFS_HAS_Z,
                    xyz,
                    String::new()
                ),
                (
                    String::new(),
                    1_767_225_600_000_001,
                    MFS_DETECT,
                    0,
                    flipped,
                    "enter".to_owned()
                ),
            ]
        );
    }

    crate::export_plugin!(name: "t", version: "0", engines: [Halve, Echo]);

    #[test]
    fn the_export_macro_sets_open_positions_exactly_for_engines_that_serve_positions() {
        // SAFETY: the descriptor is static.
        let plugin = unsafe { &*mfstream_plugin() };
        assert_eq!(plugin.abi_version, crate::abi::ABI_VERSION);
        // SAFETY: `engines` points to `engine_count` engines.
        let engines = unsafe { std::slice::from_raw_parts(plugin.engines, plugin.engine_count) };
        assert!(engines[0].open_positions.is_none());
        assert!(engines[1].open_positions.is_some());
        assert_ne!(engines[1].serves & crate::abi::MFS_SERVES_POSITIONS, 0);
    }
}

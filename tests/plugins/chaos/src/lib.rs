//! Engines that misbehave on purpose, for mfstream's tests:
//!
//! - `panicky` answers records (value × 1) until it meets a value of 13,
//!   then panics with `unlucky record at <datetime>`;
//! - `aborter` answers records until it meets a value of 13, then aborts the
//!   process (SIGABRT), as a plugin with a fatal bug would;
//! - `segv` does the same with a segmentation fault;
//! - `refuser` refuses every query in `open`;
//! - `whereami` answers each record with the name of the thread that runs it
//!   (as the kernel knows it: `/proc/thread-self/comm`);
//! - `nan` answers each record with NaN, which the host takes for a record
//!   with no result (skipped, or the query's failure under `onError: fail`);
//! - `newer` answers records (value × 1) and declares, beside
//!   `MFS_SERVES_TRANSFORM`, a `serves` bit no host knows yet, as a plugin
//!   built for a newer ABI would;
//! - `tracker` serves positions (ABI version 3): for `position` it answers
//!   each point, for a geofence an `enter` at the point with x and y
//!   swapped, 1 µs after the instant, and for `speed` the point's x, but
//!   it panics on a point whose x is 13.

use mfstream_plugin::{Batch, Detect, Emitter, Engine, Point, PositionSpec, Step, Value, abi};

/// What an engine does on a record of 13.
fn process(
    batch: Batch<'_>,
    out: &mut Emitter<'_>,
    on_13: impl Fn(&str) -> Result<(), String>,
) -> Result<(), String> {
    for instant in batch.iter() {
        if instant.value == Value::Number(13.0) {
            on_13(instant.datetime)?;
        }
        out.emit(instant.datetime, instant.value);
    }
    Ok(())
}

/// Panics on 13.
pub struct Panicky;

impl Engine for Panicky {
    const NAME: &'static str = "panicky";
    const DESCRIPTION: &'static str = "panics on a value of 13 (test fixture)";

    fn open(_spec: &str) -> Result<Self, String> {
        Ok(Panicky)
    }

    fn process(&mut self, batch: Batch<'_>, out: &mut Emitter<'_>) -> Result<(), String> {
        quiet_deliberate_panics();
        process(batch, out, |datetime| panic!("{UNLUCKY} at {datetime}"))
    }
}

/// The start of the message of `panicky`'s panic.
const UNLUCKY: &str = "unlucky record";

/// The start of the message of `tracker`'s panic.
const UNLUCKY_POSITION: &str = "unlucky position";

/// Keeps `panicky`'s and `tracker`'s deliberate panics out of the test output: the default
/// hook would print its message and, under `RUST_BACKTRACE`, a backtrace on
/// stderr, which the test harness does not capture (the panic is on a query
/// thread). Every other panic is reported as usual. The hook is this
/// library's own (a cdylib has its own std), so the host's is untouched.
fn quiet_deliberate_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info.payload().downcast_ref::<String>();
            if !message.is_some_and(|m| m.starts_with(UNLUCKY) || m.starts_with(UNLUCKY_POSITION)) {
                report(info);
            }
        }));
    });
}

/// Aborts on 13.
pub struct Aborter;

impl Engine for Aborter {
    const NAME: &'static str = "aborter";
    const DESCRIPTION: &'static str = "aborts the process on a value of 13 (test fixture)";

    fn open(_spec: &str) -> Result<Self, String> {
        Ok(Aborter)
    }

    fn process(&mut self, batch: Batch<'_>, out: &mut Emitter<'_>) -> Result<(), String> {
        process(batch, out, |_| std::process::abort())
    }
}

/// Segfaults on 13.
pub struct Segv;

impl Engine for Segv {
    const NAME: &'static str = "segv";
    const DESCRIPTION: &'static str = "segfaults on a value of 13 (test fixture)";

    fn open(_spec: &str) -> Result<Self, String> {
        Ok(Segv)
    }

    fn process(&mut self, batch: Batch<'_>, out: &mut Emitter<'_>) -> Result<(), String> {
        process(batch, out, |_| {
            let null = std::hint::black_box(std::ptr::null_mut::<u8>());
            // SAFETY: not safe at all, on purpose: the point of this fixture
            // is a plugin that crashes with SIGSEGV.
            unsafe { null.write_volatile(1) };
            Ok(())
        })
    }
}

/// Refuses every query.
pub struct Refuser;

impl Engine for Refuser {
    const NAME: &'static str = "refuser";
    const DESCRIPTION: &'static str = "refuses every query (test fixture)";

    fn open(spec: &str) -> Result<Self, String> {
        Err(format!("this engine opens no query, not even {spec}"))
    }

    fn process(&mut self, _batch: Batch<'_>, _out: &mut Emitter<'_>) -> Result<(), String> {
        Err("never opened".into())
    }
}

/// Answers with the running thread's name.
pub struct WhereAmI;

impl Engine for WhereAmI {
    const NAME: &'static str = "whereami";
    const DESCRIPTION: &'static str = "answers with the thread's name (test fixture)";

    fn open(_spec: &str) -> Result<Self, String> {
        Ok(WhereAmI)
    }

    fn process(&mut self, batch: Batch<'_>, out: &mut Emitter<'_>) -> Result<(), String> {
        let name = std::fs::read_to_string("/proc/thread-self/comm").map_err(|e| e.to_string())?;
        for instant in batch.iter() {
            out.emit(instant.datetime, Value::Text(name.trim()));
        }
        Ok(())
    }
}

/// Answers NaN.
pub struct Nan;

impl Engine for Nan {
    const NAME: &'static str = "nan";
    const DESCRIPTION: &'static str = "answers NaN (test fixture)";

    fn open(_spec: &str) -> Result<Self, String> {
        Ok(Nan)
    }

    fn process(&mut self, batch: Batch<'_>, out: &mut Emitter<'_>) -> Result<(), String> {
        for instant in batch.iter() {
            out.emit(instant.datetime, Value::Number(f64::NAN));
        }
        Ok(())
    }
}

/// Declares a `serves` bit of a newer ABI.
pub struct Newer;

impl Engine for Newer {
    const NAME: &'static str = "newer";
    const DESCRIPTION: &'static str = "declares an unknown serves bit (test fixture)";
    const SERVES: u32 = abi::MFS_SERVES_TRANSFORM | 1 << 8;

    fn open(_spec: &str) -> Result<Self, String> {
        Ok(Newer)
    }

    fn process(&mut self, batch: Batch<'_>, out: &mut Emitter<'_>) -> Result<(), String> {
        process(batch, out, |_| Ok(()))
    }
}

/// Serves positions, simply (and panics on x = 13).
pub struct Tracker {
    step: Step,
}

impl Engine for Tracker {
    const NAME: &'static str = "tracker";
    const DESCRIPTION: &'static str = "echoes positions, panics on x = 13 (test fixture)";
    const SERVES: u32 = abi::MFS_SERVES_TRANSFORM | abi::MFS_SERVES_POSITIONS;

    fn open(_spec: &str) -> Result<Self, String> {
        Err("tracker serves positions only".into())
    }

    fn open_positions(spec: &PositionSpec<'_>) -> Result<Self, String> {
        if spec.step == Step::Geofence && (spec.geometry.is_none() || spec.detect == 0) {
            return Err("a fence without its geometry or detect set".into());
        }
        Ok(Tracker { step: spec.step })
    }

    fn process(&mut self, batch: Batch<'_>, out: &mut Emitter<'_>) -> Result<(), String> {
        quiet_deliberate_panics();
        for instant in batch.iter() {
            let Value::Point(p) = instant.value else {
                return Err(format!("record at {} is not a point", instant.datetime));
            };
            if p.x == 13.0 {
                panic!("{UNLUCKY_POSITION} at {}", instant.datetime);
            }
            match self.step {
                Step::Geofence => {
                    let micros = instant.micros.ok_or("a position without micros")?;
                    let swapped = Point::new(p.y, p.x);
                    out.emit_at(micros + 1, Value::Detect(Detect::Enter, swapped));
                }
                Step::Speed => out.emit(instant.datetime, Value::Number(p.x)),
                _ => out.emit(instant.datetime, Value::Point(p)),
            }
        }
        Ok(())
    }
}

mfstream_plugin::export_plugin!(
    name: "chaos",
    version: "0.0.0",
    engines: [Panicky, Aborter, Segv, Refuser, WhereAmI, Nan, Newer, Tracker],
);

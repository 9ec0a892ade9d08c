//! `meos`: an mfstream plugin whose engine applies the lifted operations
//! through MobilityDB's MEOS library, the counterpart of the Go tier's
//! `meos-local` engine.
//!
//! libmeos is loaded at run time from `$MFSTREAM_MEOS_LIB`: the library file
//! or the folder holding it (`pip install pymeos-cffi==1.3.0` ships one in
//! `site-packages/pymeos_cffi.libs/`). Its dependencies are looked for next
//! to it, so `LD_LIBRARY_PATH` need not be set. Without it, the engine is
//! listed as not ready, with the reason.
//!
//! Each value becomes a MEOS `tfloat` instant, the operation is MEOS's own
//! (`tfloat_ln`, `mult_tfloat_float`, …) and the result is read back with
//! `tfloat_start_value`. MEOS is initialised once per process (UTC), with an
//! error handler that records the error instead of exiting: a domain error
//! fails the query with MEOS's message. MEOS keeps global state, so calls
//! into it are serialised.
//!
//! MEOS 1.3 has no lifted `sin`, `cos` or `tan`, but it exports `pg_dsin`
//! and `pg_dcos`, its adaptation of PostgreSQL's float8 sine and cosine:
//! `sin` and `cos` are those, applied to the value (an infinite one is an
//! error through MEOS's handler), and `tan`, for want of a `pg_dtan`, is the
//! quotient `pg_dsin(x) / pg_dcos(x)`, which may be 2 ulps from libm's `tan`
//! (the book, docs/src/plugins.md).
//!
//! The engine also serves positions (plugin ABI version 3): `speed`,
//! `azimuth`, `cumulativeLength`, `distance`, `position` and geofences,
//! each on MEOS's `tgeogpoint`/`tgeompoint` functions (`track`), a second
//! implementation the tests compare with the `local` engine's. MEOS's
//! table of reference systems (`spatial_ref_sys.csv`, which geographies
//! need) is looked for next to libmeos and where pymeos-cffi's wheel puts
//! it.

mod meos;
mod track;

use mfstream_plugin::{Batch, Emitter, Engine, PositionSpec, Value, abi};
use serde::Deserialize;

use crate::meos::{Meos, MeosOp};
use crate::track::Track;

/// The variable naming libmeos (the file or its folder).
pub const MEOS_LIB_VAR: &str = "MFSTREAM_MEOS_LIB";

#[derive(Deserialize)]
struct Spec {
    operation: Option<String>,
    arg: Option<f64>,
}

/// One query on MEOS: a lifted operation on numbers, or a position query.
pub enum MeosEngine {
    /// A lifted operation on numbers.
    Lifted {
        /// libmeos.
        meos: &'static Meos,
        /// The operation.
        op: MeosOp,
        /// Its name, for messages.
        name: String,
    },
    /// A position query on `tgeogpoint`/`tgeompoint` (ABI version 3).
    Track(Box<Track>),
}

impl Engine for MeosEngine {
    const NAME: &'static str = "meos";
    const DESCRIPTION: &'static str =
        "lifted operations and positions through MobilityDB's MEOS (plugin)";
    const SERVES: u32 = abi::MFS_SERVES_TRANSFORM | abi::MFS_SERVES_POSITIONS;

    fn open_positions(spec: &PositionSpec<'_>) -> Result<Self, String> {
        let meos = Meos::get()?;
        Ok(MeosEngine::Track(Box::new(Track::open(meos, spec)?)))
    }

    fn ready() -> Result<(), String> {
        Meos::get().map(|_| ())
    }

    fn open(spec: &str) -> Result<Self, String> {
        let spec: Spec =
            serde_json::from_str(spec).map_err(|e| format!("invalid query spec: {e}"))?;
        let name = spec
            .operation
            .ok_or("the meos engine serves transforms only: the query has no `operation`")?;
        let op = MeosOp::new(&name, spec.arg)?;
        let meos = Meos::get()?;
        Ok(MeosEngine::Lifted { meos, op, name })
    }

    fn process(&mut self, batch: Batch<'_>, out: &mut Emitter<'_>) -> Result<(), String> {
        let (meos, op, name) = match self {
            MeosEngine::Lifted { meos, op, name } => (*meos, *op, name),
            MeosEngine::Track(track) => {
                let _serial = Meos::get()?.lock();
                for instant in batch.iter() {
                    track.push(&instant, out)?;
                    if out.is_stopped() {
                        break;
                    }
                }
                return Ok(());
            }
        };
        let _serial = meos.lock();
        for instant in batch.iter() {
            let Value::Number(x) = instant.value else {
                return Err(format!(
                    "record at {} is not a number, but {name} takes numbers",
                    instant.datetime
                ));
            };
            match meos.apply(op, x) {
                Ok(y) => out.emit(instant.datetime, Value::Number(y)),
                // MEOS found no result for this record: the host applies
                // `onError` (skip it, or fail naming it) and the batch goes on.
                Err(e) => out.no_result(instant.datetime, &format!("MEOS {name}: {e}")),
            }
            if out.is_stopped() {
                break;
            }
        }
        Ok(())
    }
}

mfstream_plugin::export_plugin!(
    name: "meos",
    version: env!("CARGO_PKG_VERSION"),
    engines: [MeosEngine],
);

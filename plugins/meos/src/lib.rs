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
//! (README.md, "Plugins").

mod meos;

use mfstream_plugin::{Batch, Emitter, Engine, Value};
use serde::Deserialize;

use crate::meos::{Meos, MeosOp};

/// The variable naming libmeos (the file or its folder).
pub const MEOS_LIB_VAR: &str = "MFSTREAM_MEOS_LIB";

#[derive(Deserialize)]
struct Spec {
    operation: Option<String>,
    arg: Option<f64>,
}

/// One query on MEOS.
pub struct MeosEngine {
    meos: &'static Meos,
    op: MeosOp,
    name: String,
}

impl Engine for MeosEngine {
    const NAME: &'static str = "meos";
    const DESCRIPTION: &'static str = "lifted operations through MobilityDB's MEOS (plugin)";

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
        Ok(MeosEngine { meos, op, name })
    }

    fn process(&mut self, batch: Batch<'_>, out: &mut Emitter<'_>) -> Result<(), String> {
        let _serial = self.meos.lock();
        for instant in batch.iter() {
            let Value::Number(x) = instant.value else {
                return Err(format!(
                    "record at {} is not a number, but {} takes numbers",
                    instant.datetime, self.name
                ));
            };
            match self.meos.apply(self.op, x) {
                Ok(y) => out.emit(instant.datetime, Value::Number(y)),
                // MEOS found no result for this record: the host applies
                // `onError` (skip it, or fail naming it) and the batch goes on.
                Err(e) => out.no_result(instant.datetime, &format!("MEOS {}: {e}", self.name)),
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

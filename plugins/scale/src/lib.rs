//! `scale`: an example mfstream plugin. Its one engine, `scale`, applies the
//! lifted operations (`ln`, `mul 1.852`, …) in process, with the catalogue's
//! semantics, so its results equal the built-in `local` engine's.
//!
//! The operations are the catalogue's: the `mfstream-ops` crate
//! (`crates/ops`), which the host, the native bridge job (`jobs/fastjob`) and
//! this plugin all read.

use mfstream_plugin::{Batch, Emitter, Engine, Value};
use serde::Deserialize;

use mfstream_ops::Transform;

/// The fields of the query spec this engine reads.
#[derive(Deserialize)]
struct Spec {
    operation: Option<String>,
    arg: Option<f64>,
}

/// One transform query.
pub struct Scale {
    transform: Transform,
}

impl Engine for Scale {
    const NAME: &'static str = "scale";
    const DESCRIPTION: &'static str = "lifted operations in a native plugin (example)";

    fn open(spec: &str) -> Result<Self, String> {
        let spec: Spec =
            serde_json::from_str(spec).map_err(|e| format!("invalid query spec: {e}"))?;
        let op = spec
            .operation
            .ok_or("the scale engine serves transforms only: the query has no `operation`")?;
        // `{x}` is the shortest form that parses back to the same number.
        let arg = spec.arg.map(|x| format!("{x}"));
        let transform = Transform::from_args(&op, arg.as_deref()).map_err(|e| e.to_string())?;
        Ok(Scale { transform })
    }

    fn process(&mut self, batch: Batch<'_>, out: &mut Emitter<'_>) -> Result<(), String> {
        for instant in batch.iter() {
            let Value::Number(x) = instant.value else {
                return Err(format!(
                    "record at {} is not a number, but {} takes numbers",
                    instant.datetime,
                    self.transform.name()
                ));
            };
            match self.transform.apply(x) {
                Ok(y) => out.emit(instant.datetime, Value::Number(y)),
                // No result for this record: the host applies `onError`
                // (skip it, or fail the query naming it) and the batch goes on.
                Err(why) => {
                    let message = format!("{} {why}, got {x}", self.transform.name());
                    out.no_result(instant.datetime, &message);
                }
            }
            if out.is_stopped() {
                break;
            }
        }
        Ok(())
    }
}

mfstream_plugin::export_plugin!(
    name: "scale",
    version: env!("CARGO_PKG_VERSION"),
    engines: [Scale],
);

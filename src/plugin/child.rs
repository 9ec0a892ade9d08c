//! The child side of `isolation = "process"`: the `mfstream` binary run as
//! `mfstream plugin-host …` loads the plugin in a process of its own.
//!
//! - `describe LIB` loads and checks the library and prints its descriptor
//!   as JSON, so that a library that crashes on load takes only the child
//!   with it.
//! - `run LIB ENGINE` serves one query as a bridge job in `json` framing
//!   (`jobs/README.md`): the spec in `MFSTREAM_QUERY`, one JSON instant per
//!   line in, one `{"datetime","value"}` per line out, flushed whenever no
//!   more input is ready. A failure is reported on stderr with a non-zero
//!   exit; a crash of the plugin ends the child with its signal, which the
//!   host's bridge puts in the query's failure reason.

use std::cell::RefCell;
use std::io::{BufWriter, Read, Write};
use std::path::Path;

use mfstream_plugin::abi::MfsInstant;

use super::call::{Collector, State, to_raw};
use super::load::load;
use crate::engine::BATCH;
use crate::plan::{Plan, engine_spec, plan};
use crate::spec::QuerySpec;
use crate::vocab::{Event, Instant, write_json_str};

/// Bytes read from stdin at once.
const READ_CHUNK: usize = 64 * 1024;
/// The longest input line accepted.
const MAX_LINE: usize = 1024 * 1024;

/// The descriptor of the library at `path` as JSON, or why it was refused
/// (without the path: the host adds it).
pub fn describe(path: &Path) -> Result<String, String> {
    let loaded = load(path).map_err(|e| e.kind.to_string())?;
    let engines: Vec<serde_json::Value> = loaded
        .engines
        .iter()
        .map(|e| {
            serde_json::json!({
                "name": e.name,
                "description": e.description,
                "serves": e.serves,
                "not_ready": super::call::ready(e).err(),
            })
        })
        .collect();
    let descriptor = serde_json::json!({
        "name": loaded.library.name,
        "version": loaded.library.version,
        "engines": engines,
    });
    Ok(descriptor.to_string())
}

/// Serves one query of `engine` of the library at `path` on stdin and
/// stdout; the spec comes from `MFSTREAM_QUERY`.
pub fn serve(path: &Path, engine: &str) -> Result<(), String> {
    let loaded = load(path).map_err(|e| e.to_string())?;
    let fns = loaded
        .engines
        .iter()
        .find(|e| e.name == engine)
        .cloned()
        .ok_or_else(|| format!("plugin {} has no engine {engine:?}", path.display()))?;
    let query = std::env::var("MFSTREAM_QUERY")
        .map_err(|_| "MFSTREAM_QUERY is not set: the host passes the query there".to_owned())?;
    let spec = QuerySpec::from_json(&query)
        .map_err(|e| format!("MFSTREAM_QUERY is not a query ({e}): {query}"))?;
    // The host windows the outputs of an aggregate query; the plugin is
    // asked for the transform alone, planned as in process.
    let spec = match plan(&spec).map_err(|e| e.to_string())? {
        Plan::Engine { transform, .. } => engine_spec(&spec, transform).to_json(),
        Plan::Host(_) => return Err("the query has no transform for the plugin to run".into()),
    };
    let mut state = State::open(loaded.library.clone(), fns, &spec)?;
    let stdout = RefCell::new(BufWriter::with_capacity(
        READ_CHUNK,
        std::io::stdout().lock(),
    ));
    let mut sink = |events: Vec<Event>| write_events(&stdout, &events).is_ok();
    let mut collector = Collector::new(&mut sink, "".into(), "".into());
    let mut stdin = std::io::stdin().lock();
    let mut chunk = vec![0u8; READ_CHUNK];
    let mut carry: Vec<u8> = Vec::new();
    let mut line_no = 0u64;
    let mut batch: Vec<Instant> = Vec::with_capacity(BATCH);
    let mut raw: Vec<MfsInstant> = Vec::with_capacity(BATCH);
    loop {
        let n = match stdin.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("cannot read stdin: {e}")),
        };
        carry.extend_from_slice(&chunk[..n]);
        let complete = carry.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        for line in carry[..complete].split(|&b| b == b'\n') {
            if line.is_empty() {
                continue;
            }
            line_no += 1;
            let instant = Instant::from_json(line).map_err(|e| {
                format!(
                    "input line {line_no} is not an instant ({e}): {}",
                    String::from_utf8_lossy(line)
                )
            })?;
            batch.push(instant);
        }
        carry.drain(..complete);
        if carry.len() > MAX_LINE {
            return Err(format!(
                "input line {} is longer than {MAX_LINE} bytes",
                line_no + 1
            ));
        }
        // One call per chunk read: the whole chunk is one batch.
        raw.extend(batch.iter().map(to_raw));
        let result = state.process(&raw, &mut collector);
        raw.clear();
        batch.clear();
        collector.deliver();
        result?;
        // Flushed whenever the next read may block.
        if collector.gone || stdout.borrow_mut().flush().is_err() {
            return Ok(());
        }
    }
    state.close(&mut collector)?;
    collector.deliver();
    stdout
        .borrow_mut()
        .flush()
        .map_err(|e| format!("cannot write stdout: {e}"))
}

/// Writes events as json-framing lines.
fn write_events(out: &RefCell<impl Write>, events: &[Event]) -> std::io::Result<()> {
    let mut line = Vec::with_capacity(64);
    let mut out = out.borrow_mut();
    for event in events {
        line.clear();
        line.extend_from_slice(b"{\"datetime\":");
        write_json_str(event.datetime(), &mut line);
        line.extend_from_slice(b",\"value\":");
        event.value().write_json(&mut line);
        line.extend_from_slice(b"}\n");
        out.write_all(&line)?;
    }
    Ok(())
}

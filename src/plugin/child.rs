//! The child side of `isolation = "process"`: the `mfstream` binary run as
//! `mfstream plugin-host …` loads the plugin in a process of its own.
//!
//! - `describe LIB` loads and checks the library and prints its descriptor
//!   as JSON, so that a library that crashes on load takes only the child
//!   with it.
//! - `run LIB ENGINE` serves one query as a bridge job in `json` framing
//!   (`jobs/README.md`): the spec in `MFSTREAM_QUERY`, one JSON instant per
//!   line in, one `{"datetime","value"}` per line out, and (protocol 2) a
//!   `{"datetime","error"}` line for a record the plugin found no result
//!   for (`MfsHost::error`, or a NaN emitted): the host applies the
//!   query's `onError`. The plugin gets
//!   batches of at most [`BATCH`] records, and its events are flushed batch
//!   by batch, so a plugin that crashes has delivered what it emitted in
//!   earlier batches. A failure is reported on stderr with a non-zero
//!   exit; a crash of the plugin ends the child with its signal, which the
//!   host's bridge puts in the query's failure reason.

use std::cell::RefCell;
use std::io::{BufWriter, Write};
use std::path::Path;

use mfstream_plugin::abi::MfsInstant;

use super::call::{Collector, NoResult, State, to_raw};
use super::isolated::{DESCRIBE_PROTOCOL, Described, DescribedEngine};
use super::load::load;
use crate::engine::BATCH;
use crate::lines::{LineReader, quote};
use crate::plan::{Plan, engine_spec, plan};
use crate::spec::QuerySpec;
use crate::vocab::{Event, Instant, write_json_str};

/// The descriptor of the library at `path` as JSON (the host reads it as
/// `isolated::Described`), or why it was refused (without the path: the
/// host adds it).
pub fn describe(path: &Path) -> Result<String, String> {
    let loaded = load(path).map_err(|e| e.kind.to_string())?;
    let described = Described {
        protocol: DESCRIBE_PROTOCOL,
        name: loaded.library.name.clone(),
        version: loaded.library.version.clone(),
        engines: loaded
            .engines
            .iter()
            .map(|e| DescribedEngine {
                name: e.name.clone(),
                description: e.description.clone(),
                serves: super::serves::to_abi(e.serves),
                not_ready: super::call::ready(e).err(),
                abi_version: e.abi_version,
            })
            .collect(),
    };
    serde_json::to_string(&described).map_err(|e| format!("cannot write the descriptor: {e}"))
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
        64 * 1024,
        std::io::stdout().lock(),
    ));
    // Every batch of events is flushed as soon as it is written, so what the
    // plugin produced before it crashed has reached the host.
    let mut sink = |events: Vec<Event>| {
        write_events(&stdout, &events).is_ok() && stdout.borrow_mut().flush().is_ok()
    };
    let mut report = |datetime: &str, why: &str| {
        write_error(&stdout, datetime, why).is_ok() && stdout.borrow_mut().flush().is_ok()
    };
    let no_result = NoResult::Report(&mut report);
    let mut collector = Collector::new(&mut sink, "".into(), "".into(), no_result);
    let mut stdin = std::io::stdin().lock();
    let mut lines = LineReader::default();
    let mut batch: Vec<Instant> = Vec::with_capacity(BATCH);
    let mut at_end = false;
    while !at_end {
        at_end = lines
            .read_from(&mut stdin)
            .map_err(|e| format!("cannot read stdin: {e}"))?
            == 0;
        loop {
            let next = match lines.next_line() {
                Ok(Some(line)) => Some(line),
                Ok(None) if at_end => lines.finish(),
                Ok(None) => None,
                Err(e) => return Err(format!("input {e}")),
            };
            let Some((line_no, line)) = next else {
                break;
            };
            if line.is_empty() {
                continue;
            }
            let instant = Instant::from_json(line).map_err(|e| {
                format!(
                    "input line {line_no} is not an instant ({e}): {}",
                    quote(line)
                )
            })?;
            batch.push(instant);
            if batch.len() == BATCH && !process(&mut state, &mut batch, &mut collector)? {
                return Ok(());
            }
        }
        // What was read is processed before the next read, which may block.
        if !process(&mut state, &mut batch, &mut collector)? {
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

/// Hands `batch` to the plugin and delivers its events: `Ok(false)` when
/// the host has gone.
fn process(
    state: &mut State,
    batch: &mut Vec<Instant>,
    collector: &mut Collector<'_>,
) -> Result<bool, String> {
    if batch.is_empty() {
        return Ok(!collector.gone);
    }
    let raw: Vec<MfsInstant> = batch.iter().map(to_raw).collect();
    let result = state.process(&raw, collector);
    drop(raw);
    batch.clear();
    // Results before a failing record are delivered, then the failure.
    collector.deliver();
    result?;
    Ok(!collector.gone)
}

/// Writes a protocol-2 error line: the record at `datetime` has no result.
fn write_error(out: &RefCell<impl Write>, datetime: &str, why: &str) -> std::io::Result<()> {
    let mut line = Vec::with_capacity(64);
    line.extend_from_slice(b"{\"datetime\":");
    write_json_str(datetime, &mut line);
    line.extend_from_slice(b",\"error\":");
    write_json_str(why, &mut line);
    line.extend_from_slice(b"}\n");
    out.borrow_mut().write_all(&line)
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

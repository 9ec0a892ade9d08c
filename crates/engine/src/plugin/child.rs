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
use std::path::{Path, PathBuf};

use super::call::{CallError, Collector, NoResult, State};
use super::error::{PluginError, PluginErrorKind};
use super::isolated::{DESCRIBE_PROTOCOL, Described, DescribedEngine};
use super::load::load;
use crate::BATCH;
use crate::lines::{LineReader, LineTooLong, quote};
use crate::plan::{Plan, engine_spec, plan};
use mfstream_model::QuerySpec;
use mfstream_model::SpecError;
use mfstream_model::json::{value_key, write_json_str};
use mfstream_model::{Event, Instant};

/// Why the child side of an isolated plugin stopped: its message goes to
/// stderr, and the host puts it in the plugin's or the query's error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PluginHostError {
    /// `describe`: the library was refused (without its path: the host
    /// adds it).
    #[error("{0}")]
    Refused(PluginErrorKind),
    /// `run`: the library was refused.
    #[error("{0}")]
    Load(PluginError),
    /// The descriptor could not be written as JSON.
    #[error("cannot write the descriptor: {0}")]
    Descriptor(serde_json::Error),
    /// The library exports no engine of that name.
    #[error("plugin {} has no engine {engine:?}", path.display())]
    NoEngine {
        /// The library.
        path: PathBuf,
        /// The engine asked for.
        engine: String,
    },
    /// `MFSTREAM_QUERY` is not set.
    #[error("MFSTREAM_QUERY is not set: the host passes the query there")]
    NoQuery,
    /// `MFSTREAM_QUERY` is not a query.
    #[error("MFSTREAM_QUERY is not a query ({error}): {query}")]
    BadQuery {
        /// Why.
        error: SpecError,
        /// Its value.
        query: String,
    },
    /// The query cannot run.
    #[error("{0}")]
    Plan(SpecError),
    /// The query has no transform (the host windows; the plugin
    /// transforms).
    #[error("the query has no transform for the plugin to run")]
    NoTransform,
    /// Reading stdin failed.
    #[error("cannot read stdin: {0}")]
    Stdin(std::io::Error),
    /// An input line over the bound.
    #[error("input {0}")]
    LineTooLong(LineTooLong),
    /// An input line that is not an instant.
    #[error("input line {line} is not an instant ({error}): {text}")]
    NotInstant {
        /// The line's 1-based number.
        line: u64,
        /// Why.
        error: serde_json::Error,
        /// The line, quoted and shortened.
        text: String,
    },
    /// The plugin failed the query.
    #[error("{0}")]
    Call(#[from] CallError),
    /// Writing stdout failed.
    #[error("cannot write stdout: {0}")]
    Stdout(std::io::Error),
}

/// The descriptor of the library at `path` as JSON (the host reads it as
/// `isolated::Described`), or why it was refused (without the path: the
/// host adds it).
pub fn describe(path: &Path) -> Result<String, PluginHostError> {
    let loaded = load(path).map_err(|e| PluginHostError::Refused(e.kind))?;
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
                serves: super::serves::to_abi(e.serves, e.positions),
                not_ready: super::call::ready(e).err().map(|e| e.to_string()),
                abi_version: e.abi_version,
            })
            .collect(),
    };
    serde_json::to_string(&described).map_err(PluginHostError::Descriptor)
}

/// Serves one query of `engine` of the library at `path` on stdin and
/// stdout; the spec comes from `MFSTREAM_QUERY`.
pub fn serve(path: &Path, engine: &str) -> Result<(), PluginHostError> {
    let loaded = load(path).map_err(PluginHostError::Load)?;
    let fns = loaded
        .engines
        .iter()
        .find(|e| e.name == engine)
        .cloned()
        .ok_or_else(|| PluginHostError::NoEngine {
            path: path.to_owned(),
            engine: engine.to_owned(),
        })?;
    let query = std::env::var("MFSTREAM_QUERY").map_err(|_| PluginHostError::NoQuery)?;
    let spec = match QuerySpec::from_json(&query) {
        Ok(spec) => spec,
        Err(error) => return Err(PluginHostError::BadQuery { error, query }),
    };
    // The host windows the outputs of an aggregate query; the plugin is
    // asked for the transform alone, planned as in process.
    let spec = match plan(&spec).map_err(PluginHostError::Plan)? {
        Plan::Engine { transform, .. } => engine_spec(&spec, transform).to_json(),
        Plan::Host(_) => return Err(PluginHostError::NoTransform),
        // ABI versions 1 and 2 carry no position, and a version-3 engine
        // may not serve them.
        Plan::Position { .. } if !fns.positions => {
            return Err(PluginHostError::Plan(crate::plan::unserved(engine, &spec)));
        }
        Plan::Position { crs, step, .. } => {
            let open = super::positions::spec_of(&spec, crs, &step);
            let state = State::open_positions(loaded.library.clone(), fns, &open)?;
            return serve_positions(state, super::positions::Checker::new(crs));
        }
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
            .map_err(PluginHostError::Stdin)?
            == 0;
        loop {
            let next = match lines.next_line() {
                Ok(Some(line)) => Some(line),
                Ok(None) if at_end => lines.finish(),
                Ok(None) => None,
                Err(e) => return Err(PluginHostError::LineTooLong(e)),
            };
            let Some((line_no, line)) = next else {
                break;
            };
            if line.is_empty() {
                continue;
            }
            let instant =
                Instant::from_json(line).map_err(|error| PluginHostError::NotInstant {
                    line: line_no,
                    error,
                    text: quote(line),
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
    stdout.borrow_mut().flush().map_err(PluginHostError::Stdout)
}

/// Serves a position query (ABI version 3) in the bridge protocol's
/// position pairing (`jobs/README.md`, "Positions"): one record at a time,
/// its detections (`detect` lines), then exactly one line that ends it: its
/// answer, an error line (a position the host's checks or the plugin
/// refuse), or `{"datetime"}` alone (no answer).
fn serve_positions(
    mut state: State,
    mut checker: super::positions::Checker,
) -> Result<(), PluginHostError> {
    let stdout = RefCell::new(BufWriter::with_capacity(
        64 * 1024,
        std::io::stdout().lock(),
    ));
    // Whether the record being served was ended (an answer, or an error).
    let ended = std::cell::Cell::new(false);
    let mut sink = |events: Vec<Event>| {
        if events.iter().any(|e| !matches!(e, Event::Detect(_))) {
            ended.set(true);
        }
        write_events(&stdout, &events).is_ok()
    };
    let mut report = |datetime: &str, why: &str| {
        ended.set(true);
        write_error(&stdout, datetime, why).is_ok()
    };
    let no_result = NoResult::Report(&mut report);
    let mut collector = Collector::new(&mut sink, "".into(), "".into(), no_result);
    collector.positions = true;
    let mut stdin = std::io::stdin().lock();
    let mut lines = LineReader::default();
    let mut at_end = false;
    while !at_end {
        at_end = lines
            .read_from(&mut stdin)
            .map_err(PluginHostError::Stdin)?
            == 0;
        loop {
            let next = match lines.next_line() {
                Ok(Some(line)) => Some(line),
                Ok(None) if at_end => lines.finish(),
                Ok(None) => None,
                Err(e) => return Err(PluginHostError::LineTooLong(e)),
            };
            let Some((line_no, line)) = next else {
                break;
            };
            if line.is_empty() {
                continue;
            }
            let instant =
                Instant::from_json(line).map_err(|error| PluginHostError::NotInstant {
                    line: line_no,
                    error,
                    text: quote(line),
                })?;
            ended.set(false);
            match checker.admit(&instant) {
                Err(reason) => {
                    write_error(&stdout, &instant.datetime, &reason.to_string())
                        .map_err(PluginHostError::Stdout)?;
                }
                Ok(()) => {
                    let datetime = instant.datetime.clone();
                    let mut batch = vec![instant];
                    if !process(&mut state, &mut batch, &mut collector)? {
                        return Ok(());
                    }
                    if !ended.get() {
                        write_end(&stdout, &datetime).map_err(PluginHostError::Stdout)?;
                    }
                }
            }
        }
        // Each read's answers reach the host before the next read blocks.
        stdout
            .borrow_mut()
            .flush()
            .map_err(PluginHostError::Stdout)?;
    }
    state.close(&mut collector)?;
    collector.deliver();
    stdout.borrow_mut().flush().map_err(PluginHostError::Stdout)
}

/// Writes `{"datetime"}` alone: the record at `datetime` has no answer.
fn write_end(out: &RefCell<impl Write>, datetime: &str) -> std::io::Result<()> {
    let mut line = Vec::with_capacity(48);
    line.extend_from_slice(b"{\"datetime\":");
    write_json_str(datetime, &mut line);
    line.extend_from_slice(b"}\n");
    out.borrow_mut().write_all(&line)
}

/// Hands `batch` to the plugin and delivers its events: `Ok(false)` when
/// the host has gone.
fn process(
    state: &mut State,
    batch: &mut Vec<Instant>,
    collector: &mut Collector<'_>,
) -> Result<bool, CallError> {
    if batch.is_empty() {
        return Ok(!collector.gone);
    }
    let result = state.process(batch, collector);
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

/// Writes events as json-framing lines: a number's `value`, a point's
/// `coordinates`, a detection's `coordinates` and `detect`.
fn write_events(out: &RefCell<impl Write>, events: &[Event]) -> std::io::Result<()> {
    let mut line = Vec::with_capacity(64);
    let mut out = out.borrow_mut();
    for event in events {
        line.clear();
        line.extend_from_slice(b"{\"datetime\":");
        write_json_str(event.datetime(), &mut line);
        line.extend_from_slice(value_key(event.value()));
        event.value().write_json(&mut line);
        if let Event::Detect(d) = event {
            line.extend_from_slice(b",\"detect\":");
            write_json_str(d.detect, &mut line);
        }
        line.extend_from_slice(b"}\n");
        out.write_all(&line)?;
    }
    Ok(())
}

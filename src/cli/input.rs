//! The input of `mfstream run`: JSON instants, one per line, read on a thread
//! of its own and fed to the query in batches.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use mfstream_engine::lines::{LineReader, quote};
use mfstream_engine::{BATCH, SourceError, SourceSender};
use mfstream_model::Instant;

/// Opens `path` (stdin for `None` or `-`). A directory is refused here, as
/// a missing file is, rather than failing the query at its first read.
pub(super) fn open(path: Option<&Path>) -> io::Result<Box<dyn Read + Send>> {
    match path {
        None => Ok(Box::new(io::stdin())),
        Some(p) if p.as_os_str() == "-" => Ok(Box::new(io::stdin())),
        Some(p) => {
            let file = File::open(p)?;
            if file.metadata()?.is_dir() {
                return Err(io::Error::new(
                    io::ErrorKind::IsADirectory,
                    "it is a directory: name a file of JSON instants, or - for stdin",
                ));
            }
            Ok(Box::new(file))
        }
    }
}

/// Reads instants from `input` into `sender` until the end of input, the end
/// of the query, or a bad line (which fails the query, naming the line).
///
/// Each read's complete lines go out as soon as they are parsed, so a live
/// feed is not held back waiting for a full batch. Blank lines are skipped.
pub(super) fn feed(mut input: Box<dyn Read + Send>, sender: SourceSender) {
    let mut lines = LineReader::default();
    let mut batch = Vec::with_capacity(BATCH);
    let mut at_end = false;
    while !at_end {
        at_end = match lines.read_from(&mut input) {
            Ok(n) => n == 0,
            Err(e) => {
                sender.blocking_fail(SourceError(format!("reading the input failed: {e}")));
                return;
            }
        };
        loop {
            let next = match lines.next_line() {
                Ok(Some(line)) => Some(line),
                Ok(None) if at_end => lines.finish(),
                Ok(None) => None,
                Err(e) => return fail(sender, &mut batch, SourceError(format!("input {e}"))),
            };
            let Some((line_no, line)) = next else {
                break;
            };
            match parse(line, line_no) {
                Ok(Some(instant)) => batch.push(instant),
                Ok(None) => {}
                Err(e) => return fail(sender, &mut batch, e),
            }
            if batch.len() == BATCH {
                let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                if sender.blocking_send_batch(full).is_err() {
                    return;
                }
            }
        }
        let ready = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
        if sender.blocking_send_batch(ready).is_err() {
            return;
        }
    }
}

/// Fails the query with `error`, after delivering the instants before it.
fn fail(sender: SourceSender, batch: &mut Vec<Instant>, error: SourceError) {
    let _ = sender.blocking_send_batch(std::mem::take(batch));
    sender.blocking_fail(error);
}

/// One line: an instant, `None` for a blank line, or an error naming it.
fn parse(line: &[u8], line_no: u64) -> Result<Option<Instant>, SourceError> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    Instant::from_json(line).map(Some).map_err(|e| {
        // serde_json ends its message with "at line 1 column C" (the line is
        // always 1 here): say the position once, as the input's.
        let message = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let why = message.strip_suffix(&suffix).unwrap_or(&message);
        SourceError(format!(
            "input line {line_no}, column {}: not a JSON instant ({why}): {}",
            e.column(),
            quote(line)
        ))
    })
}

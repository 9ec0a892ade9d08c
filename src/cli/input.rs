//! The input of `mfstream run`: JSON instants, one per line, read on a thread
//! of its own and fed to the query in batches.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use mfstream::{BATCH, Instant, SourceError, SourceSender};

/// Bytes read at once.
const CHUNK: usize = 64 * 1024;
/// The longest input line accepted.
const MAX_LINE: usize = 1024 * 1024;

/// Opens `path` (stdin for `None` or `-`).
pub fn open(path: Option<&Path>) -> io::Result<Box<dyn Read + Send>> {
    match path {
        None => Ok(Box::new(io::stdin())),
        Some(p) if p.as_os_str() == "-" => Ok(Box::new(io::stdin())),
        Some(p) => Ok(Box::new(File::open(p)?)),
    }
}

/// Reads instants from `input` into `sender` until the end of input, the end
/// of the query, or a bad line (which fails the query, naming the line).
///
/// Each read's complete lines go out as soon as they are parsed, so a live
/// feed is not held back waiting for a full batch. Blank lines are skipped.
pub fn feed(mut input: Box<dyn Read + Send>, sender: SourceSender) {
    let mut chunk = vec![0u8; CHUNK];
    let mut carry: Vec<u8> = Vec::new();
    let mut line_no: u64 = 0;
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        let n = match input.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                sender.blocking_fail(SourceError(format!("reading the input failed: {e}")));
                return;
            }
        };
        let mut rest = &chunk[..n];
        while let Some(nl) = memchr::memchr(b'\n', rest) {
            line_no += 1;
            let parsed = if carry.is_empty() {
                parse(&rest[..nl], line_no)
            } else {
                carry.extend_from_slice(&rest[..nl]);
                let line = std::mem::take(&mut carry);
                parse(&line, line_no)
            };
            rest = &rest[nl + 1..];
            match parsed {
                Ok(Some(instant)) => batch.push(instant),
                Ok(None) => {}
                Err(e) => {
                    // Instants before the bad line are still delivered.
                    let _ = sender.blocking_send_batch(std::mem::take(&mut batch));
                    sender.blocking_fail(e);
                    return;
                }
            }
            if batch.len() == BATCH {
                let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                if sender.blocking_send_batch(full).is_err() {
                    return;
                }
            }
        }
        carry.extend_from_slice(rest);
        if carry.len() > MAX_LINE {
            let _ = sender.blocking_send_batch(std::mem::take(&mut batch));
            sender.blocking_fail(SourceError(format!(
                "input line {} is longer than {MAX_LINE} bytes",
                line_no + 1
            )));
            return;
        }
        let ready = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
        if sender.blocking_send_batch(ready).is_err() {
            return;
        }
    }
    if !carry.is_empty() {
        match parse(&carry, line_no + 1) {
            Ok(Some(instant)) => batch.push(instant),
            Ok(None) => {}
            Err(e) => {
                let _ = sender.blocking_send_batch(batch);
                sender.blocking_fail(e);
                return;
            }
        }
    }
    let _ = sender.blocking_send_batch(batch);
}

/// One line: an instant, `None` for a blank line, or an error naming it.
fn parse(line: &[u8], line_no: u64) -> Result<Option<Instant>, SourceError> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    Instant::from_json(line).map(Some).map_err(|e| {
        let shown = String::from_utf8_lossy(&line[..line.len().min(200)]);
        // serde_json ends its message with "at line 1 column C" (the line is
        // always 1 here): say the position once, as the input's.
        let message = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let why = message.strip_suffix(&suffix).unwrap_or(&message);
        SourceError(format!(
            "input line {line_no}, column {}: not a JSON instant ({why}): {shown:?}",
            e.column()
        ))
    })
}

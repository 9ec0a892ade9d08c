//! `mfstream-fastjob`: a native bridge job that applies one lifted operation
//! to a stream at pipe speed.
//!
//! ```text
//! MFSTREAM_FRAMING=value mfstream-fastjob mul 1.852 < speeds.txt
//! ```
//!
//! It speaks the bridge job protocol (`jobs/README.md`): the operation and its
//! argument come from the command line, the framing from `MFSTREAM_FRAMING`
//! (`value`, the default, or `json`). In value framing each input line is a
//! number and each output line its result; in json framing each line is an
//! instant, `{"datetime":"…","value":1.5}`, answered by an event with the same
//! datetime. Exactly one output per input, in order. Bad usage and a line
//! that does not parse are each reported on stderr (with the line number)
//! and end the job with status 2; an I/O error ends it with status 1. A
//! value with no result (outside the operation's domain, or an overflow) is
//! answered with an error line when the host speaks protocol 2
//! (`MFSTREAM_PROTOCOL` ≥ 2: `!` and the message in value framing,
//! `{"datetime":…,"error":…}` in json framing), and the job goes on; with
//! protocol 1 it ends the job with status 2 as a bad line does.
//! `MFSTREAM_QUERY` is not read: the command line says everything a
//! transform needs (the host applies the query's `onError`).
//!
//! How it stays fast: stdin is read in 64 KiB chunks into one reused buffer,
//! lines are parsed in place (no allocation per line), results go to a 64 KiB
//! buffer over stdout, and floats are written with `ryu`. How it stays live:
//! stdout is flushed before every read of stdin, that is exactly when a read
//! might block. Bulk input arrives in whole chunks, so that is one flush per
//! chunk; a trickle of single records is answered record by record.

mod instant;

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::os::fd::AsFd;
use std::process::ExitCode;

use mfstream_ops::Transform;

/// Bytes asked of each read, and the output buffer's size.
const CHUNK: usize = 64 * 1024;
/// The longest line accepted; input lines are bounded like every buffer.
const MAX_LINE: usize = 1024 * 1024;

const USAGE: &str = "usage: mfstream-fastjob OP [ARG]   (MFSTREAM_FRAMING=value|json)";

/// Why the job ended early.
#[derive(Debug)]
enum Failure {
    /// The command line or environment is wrong; nothing was read.
    Usage(String),
    /// An input line does not parse, or its value is outside the domain.
    Line { number: u64, message: String },
    /// Reading stdin or writing stdout failed.
    Io(io::Error),
}

impl Failure {
    fn exit_code(&self) -> u8 {
        match self {
            Failure::Usage(_) | Failure::Line { .. } => 2,
            Failure::Io(_) => 1,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Usage(message) => write!(f, "{message}\n{USAGE}"),
            Failure::Line { number, message } => write!(f, "line {number}: {message}"),
            Failure::Io(e) => write!(f, "i/o error: {e}"),
        }
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        Failure::Io(e)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Framing {
    Value,
    Json,
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        // The host stopped reading our answers: it no longer wants them.
        Err(Failure::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("mfstream-fastjob: {failure}");
            ExitCode::from(failure.exit_code())
        }
    }
}

fn run() -> Result<(), Failure> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let transform = match args.as_slice() {
        [op] => Transform::from_args(op, None).map_err(|e| e.to_string()),
        [op, arg] => Transform::from_args(op, Some(arg)).map_err(|e| e.to_string()),
        _ => Err(format!(
            "expected an operation and at most one argument, got {args:?}"
        )),
    }
    .map_err(Failure::Usage)?;
    // Protocol 2: a value with no result is answered with an error line.
    let v2 = std::env::var("MFSTREAM_PROTOCOL")
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .is_some_and(|v| v >= 2);
    let framing = match std::env::var("MFSTREAM_FRAMING") {
        Err(std::env::VarError::NotPresent) => Framing::Value,
        Ok(v) if v == "value" => Framing::Value,
        Ok(v) if v == "json" => Framing::Json,
        Ok(v) => {
            return Err(Failure::Usage(format!(
                "MFSTREAM_FRAMING must be \"value\" or \"json\", got {v:?}"
            )));
        }
        Err(e) => return Err(Failure::Usage(format!("MFSTREAM_FRAMING: {e}"))),
    };

    // Our own descriptors, so neither Rust's buffered stdin nor its
    // line-buffered stdout sits between the pipes and our buffers.
    let input = File::from(io::stdin().as_fd().try_clone_to_owned()?);
    let output = File::from(io::stdout().as_fd().try_clone_to_owned()?);
    // On a failure, dropping `out` still flushes the answers given before the
    // bad line, so the host sees every good result.
    let mut out = BufWriter::with_capacity(CHUNK, output);
    match framing {
        Framing::Value => pump(input, &mut out, |line, out| {
            value_line(transform, v2, line, out)
        }),
        Framing::Json => pump(input, &mut out, |line, out| {
            json_line(transform, v2, line, out)
        }),
    }
}

/// An error in one line: its text for the message, or an I/O error writing
/// the answer.
enum LineError {
    Bad(String),
    Io(io::Error),
}

impl From<io::Error> for LineError {
    fn from(e: io::Error) -> LineError {
        LineError::Io(e)
    }
}

/// Feeds every line of `input` (without its newline) to `handle`, which
/// writes the answers to `out`; flushes `out` before each read of `input`.
///
/// A last line without a newline is still a line.
fn pump<R: Read, W: Write>(
    mut input: R,
    out: &mut W,
    mut handle: impl FnMut(&[u8], &mut W) -> Result<(), LineError>,
) -> Result<(), Failure> {
    let mut buf = vec![0u8; CHUNK];
    // `buf[start..end]` is read but not yet handled: at most one partial line.
    let (mut start, mut end) = (0, 0);
    let mut number = 0u64;
    let mut handle_line = |line: &[u8], out: &mut W, number: u64| {
        handle(line, out).map_err(|e| match e {
            LineError::Bad(message) => Failure::Line { number, message },
            LineError::Io(e) => Failure::Io(e),
        })
    };
    loop {
        buf.copy_within(start..end, 0);
        end -= start;
        start = 0;
        if end == buf.len() {
            if buf.len() >= MAX_LINE {
                return Err(Failure::Line {
                    number: number + 1,
                    message: format!("no end of line within {MAX_LINE} bytes"),
                });
            }
            buf.resize(buf.len() * 2, 0);
        }
        // The read may block, so what is answered must reach the host now.
        out.flush()?;
        let n = match input.read(&mut buf[end..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Failure::Io(e)),
        };
        // The carried partial line has no newline: scan only the new bytes.
        let mut scan = end;
        end += n;
        while let Some(k) = buf[scan..end].iter().position(|&b| b == b'\n') {
            number += 1;
            handle_line(&buf[start..scan + k], out, number)?;
            start = scan + k + 1;
            scan = start;
        }
    }
    if start < end {
        handle_line(&buf[start..end], out, number + 1)?;
    }
    out.flush()?;
    Ok(())
}

/// Answers one number with its result; with protocol 2 (`v2`), a value with
/// no result with `!` and why.
fn value_line(t: Transform, v2: bool, line: &[u8], out: &mut impl Write) -> Result<(), LineError> {
    let text = line.trim_ascii();
    let x = parse_value(text)
        .ok_or_else(|| LineError::Bad(format!("not a number: {}", quote(line))))?;
    let y = match t.apply(x) {
        Ok(y) => y,
        Err(why) => {
            // `text` parsed as a float: it is short and plain.
            let message = format!("{} {why}, got {}", t.name(), String::from_utf8_lossy(text));
            if !v2 {
                return Err(LineError::Bad(message));
            }
            writeln!(out, "!{message}")?;
            return Ok(());
        }
    };
    write_f64(out, y)?;
    out.write_all(b"\n")?;
    Ok(())
}

/// Answers one JSON instant with the event for its result; with protocol 2
/// (`v2`), a value with no result with `{"datetime":…,"error":…}`.
fn json_line(t: Transform, v2: bool, line: &[u8], out: &mut impl Write) -> Result<(), LineError> {
    let i = instant::parse(line)
        .map_err(|e| LineError::Bad(format!("not a JSON instant ({e}): {}", quote(line))))?;
    let y = match t.apply(i.value) {
        Ok(y) => y,
        Err(why) => {
            // A float's Display has no quote or backslash: no escaping.
            let message = format!("{} {why}, got {}", t.name(), i.value);
            if !v2 {
                return Err(LineError::Bad(message));
            }
            out.write_all(b"{\"datetime\":")?;
            out.write_all(i.datetime)?;
            writeln!(out, ",\"error\":\"{message}\"}}")?;
            return Ok(());
        }
    };
    out.write_all(b"{\"datetime\":")?;
    out.write_all(i.datetime)?;
    out.write_all(b",\"value\":")?;
    write_f64(out, y)?;
    out.write_all(b"}\n")?;
    Ok(())
}

/// A line for a message, cut short: the host keeps the tail of stderr, and
/// the line number must not scroll out of it behind a megabyte of garbage.
fn quote(line: &[u8]) -> String {
    const SHOWN: usize = 200;
    let shown = String::from_utf8_lossy(&line[..line.len().min(SHOWN)]);
    let more = if line.len() > SHOWN { "…" } else { "" };
    format!("{shown:?}{more}")
}

/// A value-framing number: Rust's float syntax, which includes `nan` and
/// `inf` (they then fail as domain errors, with the value in the message).
fn parse_value(text: &[u8]) -> Option<f64> {
    std::str::from_utf8(text).ok()?.parse().ok()
}

/// Writes a finite float in its shortest round-trip form (`18.52`, `3.0`,
/// `1e300`), which is also a valid JSON number.
fn write_f64(out: &mut impl Write, y: f64) -> io::Result<()> {
    out.write_all(ryu::Buffer::new().format_finite(y).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `input` through the job, returning its output or the failure's
    /// message.
    fn job(op: &str, arg: Option<&str>, framing: Framing, input: &str) -> Result<String, String> {
        let t = Transform::from_args(op, arg).unwrap();
        let mut out = Vec::new();
        let result = match framing {
            Framing::Value => pump(input.as_bytes(), &mut out, |l, o| {
                value_line(t, false, l, o)
            }),
            Framing::Json => pump(input.as_bytes(), &mut out, |l, o| json_line(t, false, l, o)),
        };
        result
            .map(|()| String::from_utf8(out).unwrap())
            .map_err(|f| f.to_string())
    }

    #[test]
    fn value_framing_answers_each_line_in_shortest_form() {
        let out = job("mul", Some("1.852"), Framing::Value, "10\n1\r\n 0.5 \n2").unwrap();
        assert_eq!(out, "18.52\n1.852\n0.926\n3.704\n");
        let out = job("abs", None, Framing::Value, "-1e300\n3\n").unwrap();
        assert_eq!(out, "1e300\n3.0\n");
    }

    #[test]
    fn every_output_parses_back_to_the_same_float() {
        for y in [0.1, -2.5e-300, 1.7976931348623157e308, 123456789.0, 5e-324] {
            let mut out = Vec::new();
            write_f64(&mut out, y).unwrap();
            let text = String::from_utf8(out).unwrap();
            assert_eq!(text.parse::<f64>().unwrap(), y, "{text}");
        }
    }

    #[test]
    fn domain_error_names_the_line_and_value() {
        let err = job("ln", None, Framing::Value, "1\n0\n5\n").unwrap_err();
        assert_eq!(err, "line 2: ln is defined for positive values only, got 0");
        let err = job("mul", Some("2"), Framing::Value, "1\nnan\n").unwrap_err();
        assert_eq!(err, "line 2: mul has no finite result, got nan");
    }

    #[test]
    fn with_protocol_2_a_value_with_no_result_is_an_error_line_and_the_job_goes_on() {
        let t = Transform::from_args("ln", None).unwrap();
        let mut out = Vec::new();
        pump("1\n-1\n1\n".as_bytes(), &mut out, |l, o| {
            value_line(t, true, l, o)
        })
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "0.0\n!ln is defined for positive values only, got -1\n0.0\n"
        );
        let t = Transform::from_args("exp", None).unwrap();
        let mut out = Vec::new();
        let input = concat!(
            r#"{"datetime":"a","value":1000}"#,
            "\n",
            r#"{"datetime":"b","value":0}"#,
            "\n"
        );
        pump(input.as_bytes(), &mut out, |l, o| json_line(t, true, l, o)).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            concat!(
                r#"{"datetime":"a","error":"exp has no finite result, got 1000"}"#,
                "\n",
                r#"{"datetime":"b","value":1.0}"#,
                "\n"
            )
        );
    }

    #[test]
    fn unparsable_line_fails_with_its_number_and_text() {
        let err = job("abs", None, Framing::Value, "1\n2\nx1\n").unwrap_err();
        assert_eq!(err, "line 3: not a number: \"x1\"");
        let err = job("abs", None, Framing::Value, "1\n\n").unwrap_err();
        assert_eq!(err, "line 2: not a number: \"\"");
        let long = format!("1\n{}\n", "x".repeat(10_000));
        let err = job("abs", None, Framing::Value, &long).unwrap_err();
        assert!(
            err.starts_with("line 2: not a number: \"xxx") && err.len() < 250,
            "{err}"
        );
    }

    #[test]
    fn json_framing_keeps_the_datetime_verbatim() {
        let input = concat!(
            r#"{"datetime":"2026-01-01T00:00:00Z","value":10}"#,
            "\n",
            r#"{"value":-1,"datetime":"t\"1"}"#,
            "\n"
        );
        let out = job("mul", Some("1.852"), Framing::Json, input).unwrap();
        assert_eq!(
            out,
            concat!(
                r#"{"datetime":"2026-01-01T00:00:00Z","value":18.52}"#,
                "\n",
                r#"{"datetime":"t\"1","value":-1.852}"#,
                "\n"
            )
        );
    }

    #[test]
    fn json_framing_rejects_other_shapes_naming_the_line() {
        let input = "{\"datetime\":\"t\",\"value\":1}\n{\"datetime\":\"t\"}\n";
        let err = job("abs", None, Framing::Json, input).unwrap_err();
        assert!(
            err.starts_with("line 2: not a JSON instant (missing key \"value\")"),
            "{err}"
        );
    }

    #[test]
    fn lines_longer_than_a_chunk_are_read_whole() {
        let line = format!("{}1\n", " ".repeat(3 * CHUNK));
        assert_eq!(job("abs", None, Framing::Value, &line).unwrap(), "1.0\n");
    }

    #[test]
    fn lines_beyond_the_bound_are_refused() {
        let line = " ".repeat(MAX_LINE + 1);
        let err = job("abs", None, Framing::Value, &line).unwrap_err();
        assert!(err.contains("no end of line"), "{err}");
    }

    /// A reader that hands out one piece per read and records how much
    /// output had been flushed before each read.
    struct Trickle<'a> {
        pieces: std::vec::IntoIter<&'a str>,
        flushed: std::rc::Rc<std::cell::RefCell<Vec<String>>>,
        seen: std::rc::Rc<std::cell::RefCell<Vec<String>>>,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.seen.borrow_mut().push(self.flushed.borrow().concat());
            let piece = self.pieces.next().unwrap_or("");
            buf[..piece.len()].copy_from_slice(piece.as_bytes());
            Ok(piece.len())
        }
    }

    /// A writer that records what reached it through `flush`.
    struct Recorder {
        pending: Vec<u8>,
        flushed: std::rc::Rc<std::cell::RefCell<Vec<String>>>,
    }

    impl Write for Recorder {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.pending.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            let text = String::from_utf8(std::mem::take(&mut self.pending)).unwrap();
            self.flushed.borrow_mut().push(text);
            Ok(())
        }
    }

    #[test]
    fn answers_are_flushed_before_each_read_not_per_line() {
        let flushed = std::rc::Rc::default();
        let seen = std::rc::Rc::default();
        let input = Trickle {
            pieces: vec!["1\n2\n", "3", "\n"].into_iter(),
            flushed: std::rc::Rc::clone(&flushed),
            seen: std::rc::Rc::clone(&seen),
        };
        let mut out = Recorder {
            pending: Vec::new(),
            flushed: std::rc::Rc::clone(&flushed),
        };
        let t = Transform::from_args("abs", None).unwrap();
        pump(input, &mut out, |l, o| value_line(t, false, l, o)).unwrap();
        // Before each read, everything answered so far has been flushed, and
        // the two lines of the first read went out in one flush.
        assert_eq!(
            *seen.borrow(),
            ["", "1.0\n2.0\n", "1.0\n2.0\n", "1.0\n2.0\n3.0\n"]
        );
        assert_eq!(flushed.borrow().iter().filter(|f| !f.is_empty()).count(), 2);
    }
}

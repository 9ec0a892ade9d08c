//! The bridge line protocol's two framings: encoding instants for a job's
//! stdin and decoding the lines of its stdout.

use serde::Deserialize;

use super::Framing;
use crate::lines::LineTooLong;
use mfstream_model::{Instant, Point, Value};

/// Appends `instant` to `out` as one line in `framing`.
///
/// With `value` framing only numbers can be sent; the caller validated the
/// query, so a non-number here is sent as JSON and the job will reject it.
#[inline]
pub(crate) fn encode(framing: Framing, instant: &Instant, out: &mut Vec<u8>) {
    match (framing, &instant.value) {
        (Framing::Value, Value::Number(v)) => {
            out.extend_from_slice(ryu::Buffer::new().format(*v).as_bytes());
        }
        (Framing::Value, other) => other.write_json(out),
        (Framing::Json, _) => instant.write_json(out),
    }
    out.push(b'\n');
}

/// A `value`-framing output line, answering one record.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ValueAnswer {
    /// A number, finite or not (`NaN`, `inf`: the record has no result).
    Number(f64),
    /// Protocol 2: `!` and a message: the job found no result for the
    /// record.
    Error(String),
}

/// Parses a `value`-framing output line: a number, or (protocol 2) `!`
/// and a message; `None` when it is neither.
#[inline]
pub(crate) fn decode_value(line: &[u8]) -> Option<ValueAnswer> {
    if let Some(message) = line.strip_prefix(b"!") {
        return Some(ValueAnswer::Error(short(&String::from_utf8_lossy(message))));
    }
    let text = std::str::from_utf8(line).ok()?.trim();
    text.parse::<f64>().ok().map(ValueAnswer::Number)
}

/// Whether a `json`-framing output line is an error line (protocol 2): an
/// object with an `error` key. A cheap look before the full decode.
pub(crate) fn is_error(line: &[u8]) -> bool {
    memchr::memmem::find(line, b"\"error\"").is_some()
}

/// A job's message for one record, as a failure reason quotes it: trimmed,
/// at most 200 bytes (the whole line is bounded already, by the reader).
pub(crate) fn short(message: &str) -> String {
    let message = message.trim();
    let mut end = message.len().min(200);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message[..end].to_owned()
}

/// A protocol-2 `json` error line: the job found no result for the record
/// at `datetime` (`{"datetime":"…","error":"…"}`), or for the window from
/// `windowStart` to `windowEnd` of a job that aggregates, holding `count`
/// records.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct JobError {
    pub error: String,
    #[serde(default)]
    pub datetime: Option<String>,
    #[serde(default)]
    pub window_start: Option<String>,
    #[serde(default)]
    pub window_end: Option<String>,
    /// The records of a window with no result; 1 when absent.
    #[serde(default)]
    pub count: Option<u64>,
}

impl JobError {
    /// The records skipped with it: a window's `count`, else 1.
    pub(crate) fn records(&self) -> u64 {
        self.count.unwrap_or(1)
    }

    /// What had no result: `record at …` or `the window from … to …`.
    pub(crate) fn at(&self) -> String {
        match (&self.datetime, &self.window_start, &self.window_end) {
            (Some(datetime), _, _) => format!("record at {datetime}"),
            (None, Some(start), Some(end)) => format!("the window from {start} to {end}"),
            _ => "a record".to_owned(),
        }
    }
}

/// Why a `json` output line does not decode.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LineError {
    /// Not the JSON object expected.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// A number that is not finite.
    #[error("the value is not a finite number")]
    NotFinite,
    /// A position query's line that is not one of its shapes.
    #[error("{0}")]
    Position(String),
    /// An error line naming neither a record nor a window.
    #[error(
        "an error line names a `datetime`, or a `windowStart`, a `windowEnd` and optionally the \
         window's `count`"
    )]
    ErrorNamesNothing,
}

/// Why a job's output fails its query: each names the line, quoted.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OutputError {
    /// A line over the bound.
    #[error("job output {0}")]
    TooLong(LineTooLong),
    /// A `value`-framing line that is not a number.
    #[error("job output line {line} is not a finite number: {text}")]
    NotNumber { line: u64, text: String },
    /// More results than records sent.
    #[error(
        "job output line {line} answers no record: the job wrote more results than it was sent \
         records ({text})"
    )]
    Unasked { line: u64, text: String },
    /// A line of a job that aggregates that is not a window result.
    #[error("job output line {line} is not a JSON window result ({error}): {text}")]
    NotWindow {
        line: u64,
        error: LineError,
        text: String,
    },
    /// A `json`-framing line that is not an event.
    #[error("job output line {line} is not a JSON event ({error}): {text}")]
    NotEvent {
        line: u64,
        error: LineError,
        text: String,
    },
    /// A position query's line that is not the answer its step gives.
    #[error("job output line {line} is not a {step} answer ({expected}): {text}")]
    WrongAnswer {
        line: u64,
        step: &'static str,
        expected: &'static str,
        text: String,
    },
    /// A position query's line that ends another record than the next one
    /// awaiting its answers: the job lost, added or reordered records.
    #[error(
        "job output line {line} ends the record at {datetime}, but the record awaiting its \
         answers is at {expected}: a job answers each record in order ({text})"
    )]
    NotItsRecord {
        line: u64,
        datetime: String,
        expected: String,
        text: String,
    },
    /// A geofence job's detections of one record over what its fence
    /// allows: held until the record ends, so bounded.
    #[error(
        "job output line {line} is detection {} of the record at {datetime}, over the {max} a \
         record can have on this fence (two per vertex, and two more): a job writes a record's \
         detections, then the line that ends it",
        max + 1
    )]
    TooManyDetections {
        line: u64,
        max: usize,
        datetime: String,
    },
    /// A restarted position job found no result for the record it was
    /// primed with, which its predecessor had measured: its state would
    /// not be its predecessor's.
    #[error(
        "job output line {line}: the restarted job found no result for the record at {datetime}, \
         which it was sent again so as to resume where the job before it was, and which that job \
         had measured; a job must answer the same records alike ({text})"
    )]
    PrimerRefused {
        line: u64,
        datetime: String,
        text: String,
    },
    /// A transformed instant where window results were expected.
    #[error("a transformed instant at {datetime} reached a query whose job aggregates")]
    InstantFromAggregatingJob { datetime: String },
}

/// Parses a protocol-2 `json` error line; it names a record or a window.
pub(crate) fn decode_error(line: &[u8]) -> Result<JobError, LineError> {
    let mut error: JobError = serde_json::from_slice(line)?;
    error.error = short(&error.error);
    match (&error.datetime, &error.window_start, &error.window_end) {
        (Some(_), None, None) if error.count.is_none() => Ok(error),
        (None, Some(_), Some(_)) => Ok(error),
        _ => Err(LineError::ErrorNamesNothing),
    }
}

/// A `json`-framing output line: an event with its own datetime.
#[derive(Debug, Deserialize)]
pub(crate) struct JobEvent {
    pub datetime: String,
    pub value: Value,
}

/// A window result written by a job that aggregates.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JobWindow {
    pub window_start: String,
    pub window_end: String,
    pub value: Value,
    pub count: u64,
    #[serde(default)]
    pub partial: bool,
    #[serde(default)]
    pub late: u64,
    /// Records the job skipped (protocol 2) since its previous line.
    #[serde(default)]
    pub skipped: u64,
}

/// Parses a window result line of a job that aggregates.
pub(crate) fn decode_window(line: &[u8]) -> Result<JobWindow, LineError> {
    let window: JobWindow = serde_json::from_slice(line)?;
    if let Value::Number(v) = window.value {
        if !v.is_finite() {
            return Err(LineError::NotFinite);
        }
    }
    Ok(window)
}

/// A line of a job answering a position query (`json` framing;
/// jobs/README.md, "Positions").
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PositionLine {
    /// `{"datetime","coordinates","detect"}`: a geofence's event, one of
    /// its record's; more lines of the record may follow.
    Detect {
        datetime: String,
        point: Point,
        detect: &'static str,
    },
    /// Any other line ends its record: `{"datetime","value"}` (a measure),
    /// `{"datetime","coordinates"}` (a position), or `{"datetime"}` alone
    /// (no answer: an undefined measure, a fence step that detected
    /// nothing).
    End {
        datetime: String,
        value: Option<Value>,
    },
}

/// A position line as written, before its shape is checked.
#[derive(Deserialize)]
struct RawPositionLine {
    datetime: String,
    #[serde(default)]
    value: Option<f64>,
    #[serde(default)]
    coordinates: Option<Vec<f64>>,
    #[serde(default)]
    detect: Option<String>,
}

/// Parses a line of a job answering a position query.
pub(crate) fn decode_position(line: &[u8]) -> Result<PositionLine, LineError> {
    let raw: RawPositionLine = serde_json::from_slice(line)?;
    let shape = |why: &str| LineError::Position(why.to_owned());
    let point = match &raw.coordinates {
        Some(c) => {
            Some(Point::from_coordinates(c).map_err(|why| shape(&format!("coordinates: {why}")))?)
        }
        None => None,
    };
    match (raw.value, point, raw.detect) {
        (Some(_), Some(_), _) => Err(shape("a line has `value` or `coordinates`, not both")),
        (Some(v), None, None) if v.is_finite() => Ok(PositionLine::End {
            datetime: raw.datetime,
            value: Some(Value::Number(v)),
        }),
        (Some(_), None, None) => Err(LineError::NotFinite),
        (None, point, None) => Ok(PositionLine::End {
            datetime: raw.datetime,
            value: point.map(Value::Point),
        }),
        (None, Some(point), Some(name)) => {
            let detect = mfstream_model::geo::Detect::parse(&name)
                .map_err(|e| shape(&e.to_string()))?
                .name();
            Ok(PositionLine::Detect {
                datetime: raw.datetime,
                point,
                detect,
            })
        }
        (_, None, Some(_)) => Err(shape("a `detect` line has `coordinates` (and no `value`)")),
    }
}

/// Parses a `json`-framing output line.
pub(crate) fn decode_json(line: &[u8]) -> Result<JobEvent, LineError> {
    let event: JobEvent = serde_json::from_slice(line)?;
    if let Value::Number(v) = event.value {
        if !v.is_finite() {
            return Err(LineError::NotFinite);
        }
    }
    Ok(event)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_framing_sends_the_shortest_round_trip_number() {
        let mut out = Vec::new();
        encode(Framing::Value, &Instant::number("t", 1.852), &mut out);
        encode(Framing::Value, &Instant::number("t", 1e-7), &mut out);
        let text = String::from_utf8(out).unwrap();
        let parsed: Vec<f64> = text.lines().map(|l| l.parse().unwrap()).collect();
        assert_eq!(parsed, [1.852, 1e-7]);
    }

    #[test]
    fn json_framing_sends_the_instant_verbatim() {
        let mut out = Vec::new();
        encode(
            Framing::Json,
            &Instant::number("2026-01-01 00:00:00+00", 2.0),
            &mut out,
        );
        assert_eq!(
            out,
            b"{\"datetime\":\"2026-01-01 00:00:00+00\",\"value\":2}\n"
        );
    }

    #[test]
    fn value_lines_are_numbers_or_protocol_2_errors() {
        let number = |line: &[u8]| match decode_value(line) {
            Some(ValueAnswer::Number(x)) => Some(x),
            _ => None,
        };
        assert_eq!(number(b" 2.5\r"), Some(2.5));
        assert_eq!(number(b"3"), Some(3.0));
        // Not finite: parsed, for the host to skip or fail on.
        assert!(number(b"NaN").unwrap().is_nan());
        assert_eq!(number(b"inf"), Some(f64::INFINITY));
        assert_eq!(decode_value(b"not-a-number"), None);
        assert_eq!(decode_value(b""), None);
        assert_eq!(
            decode_value(b"!ln is defined for positive values only\r"),
            Some(ValueAnswer::Error(
                "ln is defined for positive values only".into()
            ))
        );
    }

    #[test]
    fn json_error_lines_name_a_record_or_a_window() {
        let line = br#"{"datetime":"t","error":"ln of -1"}"#;
        assert!(is_error(line));
        assert_eq!(decode_error(line).unwrap().at(), "record at t");
        let window = br#"{"windowStart":"a","windowEnd":"b","count":3,"error":"overflow"}"#;
        let window = decode_error(window).unwrap();
        assert_eq!(
            (window.at().as_str(), window.records()),
            ("the window from a to b", 3)
        );
        assert_eq!(decode_error(line).unwrap().records(), 1);
        assert!(matches!(
            decode_error(br#"{"error":"x"}"#),
            Err(LineError::ErrorNamesNothing)
        ));
        assert!(matches!(
            decode_error(br#"{"datetime":"t","error":"x","value":1}"#),
            Err(LineError::Json(_))
        ));
        assert!(!is_error(br#"{"datetime":"t","value":1}"#));
    }

    #[test]
    fn json_lines_need_a_datetime_and_a_value() {
        let event = decode_json(br#"{"datetime":"t","value":1.5,"extra":1}"#).unwrap();
        assert_eq!(
            (event.datetime.as_str(), event.value),
            ("t", Value::Number(1.5))
        );
        assert!(decode_json(br#"{"value":1.5}"#).is_err());
        assert!(decode_json(b"1.5").is_err());
    }

    #[test]
    fn position_lines_are_detects_or_end_their_record() {
        let end = |line: &[u8]| match decode_position(line) {
            Ok(PositionLine::End { datetime, value }) => (datetime, value),
            other => panic!("{}: {other:?}", String::from_utf8_lossy(line)),
        };
        assert_eq!(
            end(br#"{"datetime":"t","value":2.5}"#),
            ("t".into(), Some(Value::Number(2.5)))
        );
        assert_eq!(
            end(br#"{"coordinates":[1,2,3],"datetime":"t"}"#),
            (
                "t".into(),
                Some(Value::Point(Point::with_z(1.0, 2.0, Some(3.0))))
            )
        );
        assert_eq!(end(br#"{"datetime":"t"}"#), ("t".into(), None));
        assert_eq!(
            decode_position(br#"{"datetime":"u","coordinates":[1,2],"detect":"enter"}"#).unwrap(),
            PositionLine::Detect {
                datetime: "u".into(),
                point: Point::new(1.0, 2.0),
                detect: "enter"
            }
        );
        for bad in [
            &br#"{"datetime":"t","value":1,"coordinates":[1,2]}"#[..],
            br#"{"datetime":"t","detect":"enter"}"#,
            br#"{"datetime":"t","coordinates":[1,2],"detect":"near"}"#,
            br#"{"datetime":"t","coordinates":[1]}"#,
            br#"{"datetime":"t","value":1e400}"#,
            br#"{"value":1}"#,
        ] {
            assert!(
                decode_position(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn window_lines_need_start_end_value_and_count() {
        let line = br#"{"windowStart":"a","windowEnd":"b","value":true,"count":3,"partial":true}"#;
        let window = decode_window(line).unwrap();
        assert_eq!(
            (window.window_start.as_str(), window.window_end.as_str()),
            ("a", "b")
        );
        assert_eq!((window.value, window.count), (Value::Bool(true), 3));
        assert!(window.partial);
        assert_eq!(window.late, 0);
        assert!(decode_window(br#"{"windowStart":"a","windowEnd":"b","value":1}"#).is_err());
        assert!(decode_window(br#"{"datetime":"a","value":1}"#).is_err());
        let negative = br#"{"windowStart":"a","windowEnd":"b","value":1,"count":-1}"#;
        assert!(decode_window(negative).is_err());
    }
}

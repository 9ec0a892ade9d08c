//! The bridge line protocol's two framings: encoding instants for a job's
//! stdin and decoding the lines of its stdout.

use serde::Deserialize;

use super::Framing;
use crate::vocab::{Instant, Value};

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

/// Parses a `value`-framing output line: one finite number.
#[inline]
pub(crate) fn decode_value(line: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(line).ok()?.trim();
    text.parse::<f64>().ok().filter(|v| v.is_finite())
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
}

/// Parses a window result line of a job that aggregates.
pub(crate) fn decode_window(line: &[u8]) -> Result<JobWindow, String> {
    let window: JobWindow = serde_json::from_slice(line).map_err(|e| e.to_string())?;
    if let Value::Number(v) = window.value {
        if !v.is_finite() {
            return Err("the value is not a finite number".into());
        }
    }
    Ok(window)
}

/// Parses a `json`-framing output line.
pub(crate) fn decode_json(line: &[u8]) -> Result<JobEvent, String> {
    let event: JobEvent = serde_json::from_slice(line).map_err(|e| e.to_string())?;
    if let Value::Number(v) = event.value {
        if !v.is_finite() {
            return Err("the value is not a finite number".into());
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
    fn value_lines_must_be_finite_numbers() {
        assert_eq!(decode_value(b" 2.5\r"), Some(2.5));
        assert_eq!(decode_value(b"3"), Some(3.0));
        assert_eq!(decode_value(b"NaN"), None);
        assert_eq!(decode_value(b"inf"), None);
        assert_eq!(decode_value(b"not-a-number"), None);
        assert_eq!(decode_value(b""), None);
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

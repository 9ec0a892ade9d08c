//! How mfstream writes JSON by hand, on its hot paths: numbers as Go and
//! JavaScript write them, strings escaped, an instant's value under its
//! key. Every event, error message and line protocol record goes through
//! here, so that every engine and the server write one form.

use crate::vocab::Value;

/// Appends a finite number as JSON, never with a `.0`:
///
/// - an integral number below 1e21 in magnitude in plain digits, exactly
///   (`3`, `9007199254740993`, `-0` as `0`);
/// - any other number in the shortest form that round-trips, as
///   `serde_json` writes it (zmij's): `2.5`, `1e-7`, and the integral
///   numbers from 1e21 up in exponent form (`1e+21`, `1e+300`,
///   `1.7976931348623157e+308`), as Go and JavaScript write them.
///
/// Every number mfstream writes (events, error messages) goes through here.
pub fn write_number(v: f64, out: &mut Vec<u8>) {
    if is_plain_integer(v) {
        out.extend_from_slice(itoa::Buffer::new().format(v as i128).as_bytes());
    } else if v.is_finite() {
        out.extend_from_slice(zmij::Buffer::new().format_finite(v).as_bytes());
    } else {
        // JSON has no NaN or infinity; engines never emit them, but a value
        // read from elsewhere must still serialise to valid JSON.
        out.extend_from_slice(b"null");
    }
}

/// A number as [`write_number`] writes it, for messages: briefly, so that
/// an error quoting a client's `1e308` says `1e+308`, not 309 digits (as
/// `{}` of an `f64` would). Not finite: `NaN`, `inf`, `-inf`. Every error
/// that quotes a number goes through here.
pub fn number(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    let mut out = Vec::with_capacity(24);
    write_number(v, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Appends `s` as a JSON string literal.
pub fn write_json_str(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x00..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if escape.is_empty() {
            out.extend_from_slice(format!("\\u{b:04x}").as_bytes());
        } else {
            out.extend_from_slice(escape);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// `,"coordinates":` before a point, `,"value":` before any other value.
pub fn value_key(value: &Value) -> &'static [u8] {
    match value {
        Value::Point(_) => b",\"coordinates\":",
        _ => b",\"value\":",
    }
}

/// From this magnitude up an integral number is written in exponent form
/// (`1e+21`), below it in plain digits: where Go's `encoding/json` and
/// JavaScript switch too.
const PLAIN_DIGITS_BELOW: f64 = 1e21;

/// Whether `v` is written in plain digits: integral and below 1e21 in
/// magnitude. Every such `f64` is an `i128` exactly (1e21 < 2^70).
pub(crate) fn is_plain_integer(v: f64) -> bool {
    v.fract() == 0.0 && v.abs() < PLAIN_DIGITS_BELOW
}

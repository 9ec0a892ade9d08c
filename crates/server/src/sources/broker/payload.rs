//! A message's payload: one JSON instant, a JSON array of them, or a bare
//! JSON number (a value without a datetime: it is stamped at its ingest).
//! Anything else is a bad message, with its reason.

use mfstream_model::Instant;

use super::stats::Reason;
use crate::ingest::{Horizon, MAX_DATETIME};

/// What a payload holds.
#[derive(Debug, PartialEq)]
pub(crate) enum Payload {
    /// Instants, each with a datetime that parses.
    Instants(Vec<Instant>),
    /// A bare number.
    Number(f64),
}

/// Parses `payload`; why not, when it is not one of the forms (or a
/// datetime is past `horizon`).
pub(crate) fn parse(payload: &[u8], horizon: &Horizon) -> Result<Payload, (Reason, String)> {
    let trimmed = payload.trim_ascii();
    let instants = match trimmed.first() {
        None => return Err((Reason::NotJson, "the payload is empty".into())),
        Some(b'{') => Instant::from_json(trimmed).map(|i| vec![i]),
        Some(b'[') => serde_json::from_slice::<Vec<Instant>>(trimmed),
        Some(_) => match serde_json::from_slice::<f64>(trimmed) {
            Ok(v) => return Ok(Payload::Number(v)),
            Err(e) => Err(e),
        },
    };
    let instants = instants.map_err(|e| {
        // Valid JSON of another shape is the wrong type; the rest is not
        // JSON at all.
        if serde_json::from_slice::<serde::de::IgnoredAny>(trimmed).is_ok() {
            (
                Reason::WrongType,
                format!(
                    "{e}: send one JSON instant {{\"datetime\":…,\"value\":…}}, an array of \
                     them, or a bare number"
                ),
            )
        } else {
            (Reason::NotJson, e.to_string())
        }
    })?;
    if instants.is_empty() {
        return Err((Reason::WrongType, "an empty array holds no instant".into()));
    }
    for (i, instant) in instants.iter().enumerate() {
        let datetime = &instant.datetime;
        let at = (datetime.len() <= MAX_DATETIME)
            .then(|| mfstream_model::datetime::parse(datetime))
            .flatten();
        let Some(at) = at else {
            return Err((
                Reason::BadDatetime,
                format!(
                    "instant {}: {:?} is not an ISO-8601 datetime of at most {MAX_DATETIME} \
                     bytes, such as 2026-01-01T00:00:00Z",
                    i + 1,
                    cut(datetime, MAX_DATETIME)
                ),
            ));
        };
        horizon
            .check(i + 1, datetime, at)
            .map_err(|why| (Reason::BadDatetime, why.to_string()))?;
    }
    Ok(Payload::Instants(instants))
}

/// `text` cut to at most `max` bytes, on a character boundary.
pub(crate) fn cut(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use mfstream_model::Value;

    /// A payload parsed as the server does by default.
    fn parse(payload: &[u8]) -> Result<Payload, (Reason, String)> {
        let horizon = Horizon::from_now(crate::ingest::DEFAULT_MAX_DATETIME_AHEAD);
        super::parse(payload, &horizon)
    }

    #[test]
    fn an_instant_an_array_and_a_bare_number_are_taken() {
        let one = parse(br#" {"datetime":"2026-01-01T00:00:00Z","value":1.5} "#).unwrap();
        assert_eq!(
            one,
            Payload::Instants(vec![Instant::number("2026-01-01T00:00:00Z", 1.5)])
        );
        let many = parse(
            br#"[{"datetime":"2026-01-01T00:00:00Z","value":"a"},{"datetime":"2026-01-01T00:00:01Z","value":true}]"#,
        )
        .unwrap();
        let Payload::Instants(many) = many else {
            panic!("{many:?}")
        };
        assert_eq!(many[1].value, Value::Bool(true));
        assert_eq!(parse(b"42.5\n").unwrap(), Payload::Number(42.5));
        assert_eq!(parse(b"-1e3").unwrap(), Payload::Number(-1000.0));
    }

    #[test]
    fn each_bad_payload_has_its_reason() {
        for (payload, reason, says) in [
            (&b""[..], Reason::NotJson, "empty"),
            (b"nope", Reason::NotJson, "expected"),
            (b"{\"datetime\":", Reason::NotJson, "EOF"),
            (b"\"12\"", Reason::WrongType, "bare number"),
            (b"{\"value\":1}", Reason::WrongType, "datetime"),
            (b"[]", Reason::WrongType, "empty array"),
            (b"[1,2]", Reason::WrongType, "instant"),
            (
                b"{\"datetime\":\"2026-01-01T00:00:00Z\",\"value\":[1]}",
                Reason::WrongType,
                "value",
            ),
            (
                b"{\"datetime\":\"soon\",\"value\":1}",
                Reason::BadDatetime,
                "instant 1: \"soon\"",
            ),
            (
                b"[{\"datetime\":\"2026-01-01T00:00:00Z\",\"value\":1},{\"datetime\":\"9999-12-31T00:00:00Z\",\"value\":1}]",
                Reason::BadDatetime,
                "instant 2: \"9999-12-31T00:00:00Z\" is after",
            ),
        ] {
            let (got, why) = parse(payload).unwrap_err();
            assert_eq!(got, reason, "{payload:?}: {why}");
            assert!(why.contains(says), "{payload:?}: {why}");
        }
    }
}

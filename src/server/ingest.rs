//! Live ingest: the instants of a `POST …/ingest` body, checked against the
//! property's type and handed to every query on the property, in order.
//!
//! Nothing is dropped silently. Each chunk of instants goes to every query
//! or to none: room is reserved in every query's source buffer first, then
//! the chunk is sent. A full buffer holds the request back (backpressure) up
//! to the ingest wait; then the request fails with 503, saying how many
//! instants every query did receive.

use std::time::Duration;

use tokio::time::Instant as Clock;

use crate::engine::SourcePermit;
use crate::vocab::{Instant, PropertyType, Value};

use super::problem::Problem;
use super::table::Property;

/// Instants sent to a query at once.
const CHUNK: usize = 256;

/// Parses a body: one JSON instant, a JSON array of instants, or JSON lines.
pub(crate) fn parse(body: &[u8]) -> Result<Vec<Instant>, Problem> {
    let trimmed = body.trim_ascii();
    if trimmed.is_empty() {
        return Err(Problem::invalid(
            "body",
            "no instants: send one JSON instant, an array of them, or one per line",
        ));
    }
    if trimmed.starts_with(b"[") {
        return serde_json::from_slice(trimmed).map_err(|e| Problem::invalid("body", e));
    }
    if let Ok(instant) = Instant::from_json(trimmed) {
        return Ok(vec![instant]);
    }
    let mut instants = Vec::new();
    for (i, line) in trimmed.split(|&b| b == b'\n').enumerate() {
        if line.trim_ascii().is_empty() {
            continue;
        }
        let instant = Instant::from_json(line).map_err(|e| {
            Problem::invalid("body", format!("line {} is not a JSON instant: {e}", i + 1))
        })?;
        instants.push(instant);
    }
    Ok(instants)
}

/// The type an instant's value suggests, for a property's first ingest.
pub(crate) fn type_of(value: &Value) -> PropertyType {
    match value {
        Value::Number(_) => PropertyType::TReal,
        Value::Text(_) => PropertyType::TText,
        Value::Bool(_) => PropertyType::TBoolean,
    }
}

fn fits(value: &Value, property_type: PropertyType) -> bool {
    match value {
        Value::Number(v) => match property_type {
            PropertyType::TReal => true,
            PropertyType::TInteger => v.fract() == 0.0,
            _ => false,
        },
        Value::Text(_) => property_type == PropertyType::TText,
        Value::Bool(_) => property_type == PropertyType::TBoolean,
    }
}

/// What an ingest did.
#[derive(Debug)]
pub(crate) struct Delivered {
    pub(crate) accepted: usize,
    pub(crate) queries: usize,
}

/// Hands `instants` to every running query on `property`, in order, holding
/// back up to `wait` while a query's buffer is full.
pub(crate) async fn deliver(
    property: &Property,
    instants: Vec<Instant>,
    wait: Duration,
) -> Result<Delivered, Problem> {
    let deadline = Clock::now() + wait;
    let total = instants.len();
    let busy = |accepted| Problem::ingest_busy(accepted, total, wait.as_millis());
    // The lock orders concurrent ingests: every query sees the same order.
    let mut state = tokio::time::timeout_at(deadline, property.state.lock())
        .await
        .map_err(|_| busy(0))?;
    let property_type = match (state.property_type, instants.first()) {
        (Some(t), _) => t,
        (None, Some(first)) => type_of(&first.value),
        (None, None) => {
            return Ok(Delivered {
                accepted: 0,
                queries: 0,
            });
        }
    };
    if let Some((i, bad)) = instants
        .iter()
        .enumerate()
        .find(|(_, instant)| !fits(&instant.value, property_type))
    {
        return Err(Problem::invalid(
            "value",
            format!(
                "instant {} has the value {}, but the property is {property_type}",
                i + 1,
                bad.value
            ),
        ));
    }
    state.property_type = Some(property_type);
    let feeds: Vec<_> = state
        .feeds
        .iter()
        .filter(|feed| !feed.stop.is_cancelled())
        .collect();
    let mut accepted = 0;
    for chunk in instants.chunks(CHUNK) {
        let mut permits: Vec<SourcePermit<'_>> = Vec::with_capacity(feeds.len());
        for feed in &feeds {
            let reserve = async {
                tokio::select! {
                    permit = feed.sender.reserve() => permit.ok(),
                    // Deleted meanwhile: it takes no more instants.
                    () = feed.stop.cancelled() => None,
                }
            };
            match tokio::time::timeout_at(deadline, reserve).await {
                Ok(Some(permit)) => permits.push(permit),
                // The query has ended or is stopping: it takes no more.
                Ok(None) => {}
                Err(_elapsed) => {
                    tracing::warn!(
                        query = %feed.query_id,
                        accepted,
                        total,
                        "ingest gave up: the query's buffer stayed full"
                    );
                    return Err(busy(accepted));
                }
            }
        }
        for permit in permits {
            permit.send_batch(chunk.to_vec());
        }
        accepted += chunk.len();
    }
    Ok(Delivered {
        accepted,
        queries: feeds.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_one_instant_an_array_or_json_lines() {
        let one = parse(br#" {"datetime":"t","value":1} "#).unwrap();
        assert_eq!(one.len(), 1);
        let array = parse(br#"[{"datetime":"t","value":1},{"datetime":"u","value":2}]"#).unwrap();
        assert_eq!(array.len(), 2);
        let lines =
            parse(b"{\"datetime\":\"t\",\"value\":1}\n\n{\"datetime\":\"u\",\"value\":2}\n")
                .unwrap();
        assert_eq!(lines[1].datetime, "u");
    }

    #[test]
    fn a_bad_line_is_named() {
        let err = parse(b"{\"datetime\":\"t\",\"value\":1}\nnope\n").unwrap_err();
        assert!(format!("{err:?}").contains("line 2"), "{err:?}");
    }

    #[test]
    fn values_must_fit_the_property_type() {
        assert!(fits(&Value::Number(2.0), PropertyType::TInteger));
        assert!(!fits(&Value::Number(2.5), PropertyType::TInteger));
        assert!(!fits(&Value::Text("a".into()), PropertyType::TReal));
        assert!(fits(&Value::Bool(true), PropertyType::TBoolean));
    }
}

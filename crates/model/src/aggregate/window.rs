//! The windows of an aggregate (`COUNT`, `TUMBLING`, `HOPPING`) and the
//! checks of a registration's `window` object.

use std::fmt;

use serde::Serialize;

use super::{Grid, list};
use crate::spec_error::{SpecError, SpecErrorKind};

/// The unit of a window's size or hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum TimeUnit {
    /// Seconds.
    Seconds,
    /// Minutes.
    Minutes,
    /// Hours.
    Hours,
}

impl TimeUnit {
    const ALL: [TimeUnit; 3] = [TimeUnit::Seconds, TimeUnit::Minutes, TimeUnit::Hours];

    /// The registration name: `SECONDS`, `MINUTES` or `HOURS`.
    pub fn name(self) -> &'static str {
        match self {
            TimeUnit::Seconds => "SECONDS",
            TimeUnit::Minutes => "MINUTES",
            TimeUnit::Hours => "HOURS",
        }
    }

    /// The unit's length in seconds.
    pub fn seconds(self) -> u64 {
        match self {
            TimeUnit::Seconds => 1,
            TimeUnit::Minutes => 60,
            TimeUnit::Hours => 3600,
        }
    }
}

impl fmt::Display for TimeUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A window over the stream, as OGC API – MF Part 4 registers it.
///
/// Parsed by [`Window::from_json`] (the one parser, naming the field at
/// fault); serialised in the same shape for bridge jobs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "UPPERCASE")]
#[non_exhaustive]
pub enum Window {
    /// A result every `size` records.
    Count {
        /// Records per window.
        size: u64,
    },
    /// Fixed, epoch-aligned spans of `size` units.
    Tumbling {
        /// The span.
        size: u64,
        /// The span's unit.
        unit: TimeUnit,
    },
    /// Spans of `size` units, advancing by `hop` units.
    Hopping {
        /// The span.
        size: u64,
        /// The span's unit.
        unit: TimeUnit,
        /// The advance.
        hop: u64,
        /// The advance's unit.
        #[serde(rename = "hopUnit")]
        hop_unit: TimeUnit,
    },
}

/// The most buckets a `HOPPING` window may keep: its span divided by
/// `gcd(span, hop)`, in seconds. It bounds the windower's state and its
/// work per record: a record falls in `span / hop` windows, never more than
/// this many, so a record emits at most this many events, however far it
/// is from the one before. A registration over it is refused, naming it.
pub const MAX_WINDOW_BUCKETS: u64 = 10_000;

/// The most windows one record of a `HOPPING` window may fall in
/// (`span / hop`, rounded up): each is an event, so a tiny hop over a long
/// span would turn one record into thousands of events. A registration
/// over it is refused, naming `window.hop` and the limit. With it, one
/// record yields at most this many events, and one instant (a record far
/// ahead, or the clock) closes only windows holding records, at most
/// `(span + grace) / hop + 1` of them.
pub const MAX_WINDOWS_PER_RECORD: u64 = 1_000;

/// The longest span or hop accepted: about 100 years, so that every
/// boundary computed in seconds fits an `i64` with room to spare.
const MAX_SECONDS: u64 = 100 * 366 * 86_400;

impl Window {
    /// Parses the `window` object of a registration body, naming the field
    /// at fault (`window.type`, `window.size`, …) and what it allows.
    pub fn from_json(value: &serde_json::Value) -> Result<Window, SpecError> {
        let obj = value.as_object().ok_or_else(|| {
            SpecError::new(
                "window",
                SpecErrorKind::Malformed,
                format!(r#"expected an object such as {{"type":"COUNT","size":10}}, got {value}"#),
            )
        })?;
        let kind = match obj.get("type") {
            Some(serde_json::Value::String(s)) => s.to_ascii_uppercase(),
            Some(other) => return Err(bad_type(&other.to_string())),
            None => return Err(bad_type("nothing")),
        };
        let window = match kind.as_str() {
            "COUNT" => {
                only_keys(obj, &kind, &["type", "size"])?;
                Window::Count {
                    size: positive(obj, "size")?,
                }
            }
            "TUMBLING" => {
                only_keys(obj, &kind, &["type", "size", "unit"])?;
                Window::Tumbling {
                    size: positive(obj, "size")?,
                    unit: unit(obj, "unit")?,
                }
            }
            "HOPPING" => {
                only_keys(obj, &kind, &["type", "size", "unit", "hop", "hopUnit"])?;
                let size = positive(obj, "size")?;
                let unit = self::unit(obj, "unit")?;
                Window::Hopping {
                    size,
                    unit,
                    hop: positive(obj, "hop")?,
                    hop_unit: match obj.get("hopUnit") {
                        Some(_) => self::unit(obj, "hopUnit")?,
                        None => unit,
                    },
                }
            }
            _ => return Err(bad_type(&format!("{kind:?}"))),
        };
        window.validate()?;
        Ok(window)
    }

    /// Checks sizes are positive, spans not absurdly long, and a hop no
    /// longer than its window.
    pub fn validate(&self) -> Result<(), SpecError> {
        match *self {
            Window::Count { size: 0 } => Err(SpecError::new(
                "window.size",
                SpecErrorKind::OutOfRange,
                "must be a positive integer, got 0",
            )),
            Window::Count { .. } => Ok(()),
            Window::Tumbling { size, unit } => span("window.size", size, unit).map(drop),
            Window::Hopping {
                size,
                unit,
                hop,
                hop_unit,
            } => {
                let span = span("window.size", size, unit)?;
                let hop_span = self::span("window.hop", hop, hop_unit)?;
                if hop_span > span {
                    return Err(SpecError::new(
                        "window.hop",
                        SpecErrorKind::OutOfRange,
                        format!(
                            "the hop ({hop} {hop_unit}) must not be longer than the window \
                             ({size} {unit})"
                        ),
                    ));
                }
                let buckets = span / Grid::clamped(span as i64, hop_span as i64).grain() as u64;
                if buckets > MAX_WINDOW_BUCKETS {
                    return Err(SpecError::new(
                        "window.hop",
                        SpecErrorKind::OutOfRange,
                        format!(
                            "a window of {size} {unit} hopping by {hop} {hop_unit} keeps \
                             {buckets} buckets (the span over gcd(span, hop), in seconds): \
                             at most {MAX_WINDOW_BUCKETS} are allowed; use a longer hop or a \
                             shorter window"
                        ),
                    ));
                }
                let windows = span.div_ceil(hop_span);
                if windows > MAX_WINDOWS_PER_RECORD {
                    return Err(SpecError::new(
                        "window.hop",
                        SpecErrorKind::OutOfRange,
                        format!(
                            "a window of {size} {unit} hopping by {hop} {hop_unit} puts each \
                             record in {windows} windows, so one record would emit {windows} \
                             events: at most {MAX_WINDOWS_PER_RECORD} windows per record are \
                             allowed; use a longer hop or a shorter window"
                        ),
                    ));
                }
                Ok(())
            }
        }
    }

    /// The window's span and hop in seconds (a tumbling window hops by its
    /// span); `None` for a `COUNT` window.
    pub fn spans(&self) -> Option<(i64, i64)> {
        // Validated spans fit an i64 (MAX_SECONDS).
        let secs = |n: u64, u: TimeUnit| n.saturating_mul(u.seconds()).min(MAX_SECONDS) as i64;
        match *self {
            Window::Count { .. } => None,
            Window::Tumbling { size, unit } => Some((secs(size, unit), secs(size, unit))),
            Window::Hopping {
                size,
                unit,
                hop,
                hop_unit,
            } => Some((secs(size, unit), secs(hop, hop_unit))),
        }
    }

    /// The grid of a time window (clamped as [`Grid::clamped`]); `None` for
    /// a `COUNT` window, which has no boundaries in time.
    pub fn grid(&self) -> Option<Grid> {
        let (span, hop) = self.spans()?;
        Some(Grid::clamped(span, hop))
    }
}

/// Refuses a key that a `kind` window does not have.
fn only_keys(obj: &Object, kind: &str, keys: &[&str]) -> Result<(), SpecError> {
    match obj.keys().find(|k| !keys.contains(&k.as_str())) {
        Some(key) => Err(SpecError::new(
            "window",
            SpecErrorKind::Unknown,
            format!(
                "a {kind} window has no `{key}`: its keys are {}",
                list(keys)
            ),
        )),
        None => Ok(()),
    }
}

fn bad_type(got: &str) -> SpecError {
    SpecError::new(
        "window.type",
        SpecErrorKind::Unknown,
        format!("expected COUNT, TUMBLING or HOPPING, got {got}"),
    )
}

fn span(field: &'static str, n: u64, unit: TimeUnit) -> Result<u64, SpecError> {
    if n == 0 {
        return Err(SpecError::new(
            field,
            SpecErrorKind::OutOfRange,
            "must be a positive integer, got 0",
        ));
    }
    match n.checked_mul(unit.seconds()) {
        Some(s) if s <= MAX_SECONDS => Ok(s),
        _ => Err(SpecError::new(
            field,
            SpecErrorKind::OutOfRange,
            format!("{n} {unit} is too long: at most {MAX_SECONDS} seconds (about 100 years)"),
        )),
    }
}

type Object = serde_json::Map<String, serde_json::Value>;

fn field_name(key: &str) -> &'static str {
    match key {
        "size" => "window.size",
        "hop" => "window.hop",
        "unit" => "window.unit",
        _ => "window.hopUnit",
    }
}

fn positive(obj: &Object, key: &str) -> Result<u64, SpecError> {
    match obj.get(key) {
        Some(v) => match v.as_u64() {
            Some(n) if n > 0 => Ok(n),
            _ => Err(SpecError::new(
                field_name(key),
                // An integer, but not positive; else not an integer at all.
                if v.as_i64().is_some() {
                    SpecErrorKind::OutOfRange
                } else {
                    SpecErrorKind::Malformed
                },
                format!("must be a positive integer, got {v}"),
            )),
        },
        None => Err(SpecError::new(
            field_name(key),
            SpecErrorKind::Missing,
            format!("missing: `{key}` is a positive integer"),
        )),
    }
}

fn unit(obj: &Object, key: &str) -> Result<TimeUnit, SpecError> {
    let allowed = list(&TimeUnit::ALL);
    let got = match obj.get(key) {
        Some(serde_json::Value::String(s)) => {
            if let Some(u) = TimeUnit::ALL
                .into_iter()
                .find(|u| u.name().eq_ignore_ascii_case(s))
            {
                return Ok(u);
            }
            format!("{s:?}")
        }
        Some(other) => other.to_string(),
        None => "nothing".into(),
    };
    Err(SpecError::new(
        field_name(key),
        SpecErrorKind::Unknown,
        format!("expected {allowed}, got {got}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn windows_parse_in_the_part_4_shape() {
        let w = |v| Window::from_json(&v);
        assert_eq!(
            w(json!({"type":"COUNT","size":3})),
            Ok(Window::Count { size: 3 })
        );
        assert_eq!(
            w(json!({"type":"hopping","size":3,"unit":"seconds","hop":1})),
            Ok(Window::Hopping {
                size: 3,
                unit: TimeUnit::Seconds,
                hop: 1,
                hop_unit: TimeUnit::Seconds
            })
        );
        let tumbling = w(json!({"type":"TUMBLING","size":2,"unit":"MINUTES"})).unwrap();
        assert_eq!(tumbling.spans(), Some((120, 120)));
        assert_eq!(
            serde_json::to_value(&tumbling).unwrap(),
            json!({"type":"TUMBLING","size":2,"unit":"MINUTES"})
        );
    }

    #[test]
    fn bad_windows_name_the_field_and_what_is_allowed() {
        let field = |v| Window::from_json(&v).unwrap_err();
        let e = field(json!({"type":"SLIDING","size":3}));
        assert_eq!(e.field, "window.type");
        assert!(e.message.contains("COUNT, TUMBLING or HOPPING"), "{e}");
        assert_eq!(field(json!({"type":"COUNT","size":0})).field, "window.size");
        assert_eq!(
            field(json!({"type":"COUNT","size":1.5})).field,
            "window.size"
        );
        assert_eq!(
            field(json!({"type":"COUNT","size":-2})).field,
            "window.size"
        );
        let e = field(json!({"type":"TUMBLING","size":1,"unit":"DAYS"}));
        assert_eq!(e.field, "window.unit");
        assert!(e.message.contains("SECONDS, MINUTES or HOURS"), "{e}");
        let e = field(json!({"type":"HOPPING","size":1,"unit":"SECONDS","hop":2}));
        assert_eq!(e.field, "window.hop");
        assert_eq!(
            field(json!({"type":"HOPPING","size":1,"unit":"SECONDS","hop":0})).field,
            "window.hop"
        );
        assert_eq!(
            field(json!({"type":"HOPPING","size":1,"unit":"HOURS","hop":1,"hopUnit":"DAYS"})).field,
            "window.hopUnit"
        );
        assert_eq!(
            field(json!({"type":"COUNT","size":1,"unit":"SECONDS"})).field,
            "window"
        );
        assert_eq!(
            field(json!({"type":"TUMBLING","size":u64::MAX,"unit":"HOURS"})).field,
            "window.size"
        );
    }

    #[test]
    fn a_hop_that_puts_a_record_in_more_than_1000_windows_is_refused_naming_the_limit() {
        let w = |size: u64, hop: u64| {
            Window::from_json(&json!({"type":"HOPPING","size":size,"unit":"SECONDS","hop":hop}))
        };
        assert!(w(1000, 1).is_ok());
        assert!(w(3000, 3).is_ok());
        // 1001 windows per record, 1001 buckets: under the bucket cap.
        let e = w(1001, 1).unwrap_err();
        assert_eq!(e.field, "window.hop");
        assert!(
            e.message.contains("puts each record in 1001 windows")
                && e.message.contains("at most 1000 windows per record"),
            "{e}"
        );
        // Rounded up: 2001 / 2 is 1000.5 windows.
        assert_eq!(w(2001, 2).unwrap_err().field, "window.hop");
    }
}

//! Events: the results of a query, a transformed instant or a window's
//! aggregate, and their JSON shapes (the Go tier's).

use std::sync::Arc;

use super::{Aggregation, Value, value_key, write_json_str, write_number};

/// One result of a query.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// A transformed instant.
    Instant(InstantEvent),
    /// The aggregate of a window.
    Window(WindowEvent),
    /// A geofence's detection: a position entered, left, crossed, is
    /// inside or outside a fence.
    Detect(DetectEvent),
}

/// A geofence's detection, as Tile38 reports one:
/// `{"datetime","coordinates","detect","property","operation":"geofence"}`,
/// then `"skipped":n` as for an instant. For `enter`, `exit` and `cross`
/// the datetime and coordinates are those of the crossing, interpolated
/// along the segment between two samples; for `inside` and `outside` the
/// sample's.
#[derive(Debug, Clone, PartialEq)]
pub struct DetectEvent {
    /// When, as ISO-8601.
    pub datetime: String,
    /// Where: a [`Value::Point`].
    pub value: Value,
    /// What: `enter`, `exit`, `cross`, `inside` or `outside`.
    pub detect: &'static str,
    /// The property the query reads (`tgsequence` on the server).
    pub property: Arc<str>,
    /// Records skipped since the previous event.
    pub skipped: u64,
}

/// A transformed instant: `{"datetime","value","property","operation"}`,
/// then `"skipped":n` when records were skipped (`onError: skip`) since the
/// previous event.
#[derive(Debug, Clone, PartialEq)]
pub struct InstantEvent {
    /// The source instant's datetime, verbatim.
    pub datetime: String,
    /// The result.
    pub value: Value,
    /// The property the query reads.
    pub property: Arc<str>,
    /// The operation that produced it.
    pub operation: Arc<str>,
    /// Records skipped (no result, `onError: skip`) since the previous event.
    pub skipped: u64,
}

/// The aggregate of one window:
/// `{"windowStart","windowEnd","property","aggregation","value","count"}`,
/// then `"partial":true` for a window flushed at the end of the source,
/// `"late":n` when records were skipped as late and `"skipped":n` when
/// records or windows had no finite result (`onError: skip`) since the
/// previous event.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowEvent {
    /// The datetime of the window's first record, verbatim.
    pub window_start: String,
    /// The datetime of the window's last record, verbatim.
    pub window_end: String,
    /// The property the query reads.
    pub property: Arc<str>,
    /// The aggregation.
    pub aggregation: Aggregation,
    /// The result: a number, or a boolean for `ANY` and `ALL`.
    pub value: Value,
    /// The records in the window.
    pub count: u64,
    /// Whether the window was still open when the source ended.
    pub partial: bool,
    /// The records skipped as late since the previous event.
    pub late: u64,
    /// The records or windows skipped for want of a finite result
    /// (`onError: skip`) since the previous event.
    pub skipped: u64,
}

/// The kind of an event, its SSE event name: `instant`, `window` or `detect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventKind {
    /// A transformed instant ([`Event::Instant`]).
    Instant,
    /// The aggregate of a window ([`Event::Window`]).
    Window,
    /// A geofence detection ([`Event::Detect`]).
    Detect,
}

impl EventKind {
    /// Every kind.
    pub const ALL: [EventKind; 3] = [EventKind::Instant, EventKind::Window, EventKind::Detect];

    /// Its name: `instant`, `window` or `detect`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Instant => "instant",
            EventKind::Window => "window",
            EventKind::Detect => "detect",
        }
    }

    /// The kind named `name`, if any.
    pub fn from_name(name: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Event {
    /// The event's kind: `instant` or `window`.
    pub fn kind(&self) -> EventKind {
        match self {
            Event::Instant(_) => EventKind::Instant,
            Event::Window(_) => EventKind::Window,
            Event::Detect(_) => EventKind::Detect,
        }
    }

    /// The event's datetime (for a window, its last record's).
    pub fn datetime(&self) -> &str {
        match self {
            Event::Instant(e) => &e.datetime,
            Event::Window(e) => &e.window_end,
            Event::Detect(e) => &e.datetime,
        }
    }

    /// Adds `n` to the records skipped that the event carries.
    pub fn add_skipped(&mut self, n: u64) {
        match self {
            Event::Instant(e) => e.skipped = e.skipped.saturating_add(n),
            Event::Window(e) => e.skipped = e.skipped.saturating_add(n),
            Event::Detect(e) => e.skipped = e.skipped.saturating_add(n),
        }
    }

    /// The records (or windows) skipped since the previous event that the
    /// event carries.
    pub fn skipped(&self) -> u64 {
        match self {
            Event::Instant(e) => e.skipped,
            Event::Window(e) => e.skipped,
            Event::Detect(e) => e.skipped,
        }
    }

    /// The event's value (a detection's: its position).
    pub fn value(&self) -> &Value {
        match self {
            Event::Instant(e) => &e.value,
            Event::Window(e) => &e.value,
            Event::Detect(e) => &e.value,
        }
    }

    /// Appends the event as one JSON object to `out` (no newline).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Event::Instant(e) => {
                out.extend_from_slice(b"{\"datetime\":");
                write_json_str(&e.datetime, out);
                out.extend_from_slice(value_key(&e.value));
                e.value.write_json(out);
                out.extend_from_slice(b",\"property\":");
                write_json_str(&e.property, out);
                out.extend_from_slice(b",\"operation\":");
                write_json_str(&e.operation, out);
                write_skipped(e.skipped, out);
                out.push(b'}');
            }
            Event::Window(e) => {
                out.extend_from_slice(b"{\"windowStart\":");
                write_json_str(&e.window_start, out);
                out.extend_from_slice(b",\"windowEnd\":");
                write_json_str(&e.window_end, out);
                out.extend_from_slice(b",\"property\":");
                write_json_str(&e.property, out);
                out.extend_from_slice(b",\"aggregation\":\"");
                out.extend_from_slice(e.aggregation.name().as_bytes());
                out.extend_from_slice(b"\",\"value\":");
                e.value.write_json(out);
                out.extend_from_slice(b",\"count\":");
                write_number(e.count as f64, out);
                if e.partial {
                    out.extend_from_slice(b",\"partial\":true");
                }
                if e.late > 0 {
                    out.extend_from_slice(b",\"late\":");
                    out.extend_from_slice(itoa::Buffer::new().format(e.late).as_bytes());
                }
                write_skipped(e.skipped, out);
                out.push(b'}');
            }
            Event::Detect(e) => {
                out.extend_from_slice(b"{\"datetime\":");
                write_json_str(&e.datetime, out);
                out.extend_from_slice(b",\"coordinates\":");
                e.value.write_json(out);
                out.extend_from_slice(b",\"detect\":\"");
                out.extend_from_slice(e.detect.as_bytes());
                out.extend_from_slice(b"\",\"property\":");
                write_json_str(&e.property, out);
                out.extend_from_slice(b",\"operation\":\"geofence\"");
                write_skipped(e.skipped, out);
                out.push(b'}');
            }
        }
    }

    /// The event as a JSON string.
    pub fn to_json(&self) -> String {
        let mut out = Vec::with_capacity(96);
        self.write_json(&mut out);
        String::from_utf8(out).expect("the JSON writer emits UTF-8 only")
    }
}

/// `,"skipped":n` when `n` is not 0.
fn write_skipped(n: u64, out: &mut Vec<u8>) {
    if n > 0 {
        out.extend_from_slice(b",\"skipped\":");
        out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_json_matches_the_go_tier_shape() {
        let event = Event::Instant(InstantEvent {
            datetime: "2026-01-01T00:00:00Z".into(),
            value: Value::Number(2.5),
            property: "speed".into(),
            operation: "mul".into(),
            skipped: 0,
        });
        assert_eq!(event.kind(), EventKind::Instant);
        assert_eq!(event.kind().to_string(), "instant");
        let parsed: serde_json::Value = serde_json::from_str(&event.to_json()).unwrap();
        assert_eq!(
            parsed,
            serde_json::json!({"datetime":"2026-01-01T00:00:00Z","value":2.5,"property":"speed","operation":"mul"})
        );
    }

    fn window(partial: bool, late: u64) -> Event {
        Event::Window(WindowEvent {
            window_start: "2026-01-01T00:00:00Z".into(),
            window_end: "2026-01-01T00:00:02Z".into(),
            property: "speed".into(),
            aggregation: Aggregation::Avg,
            value: Value::Number(4.0),
            count: 3,
            partial,
            late,
            skipped: 0,
        })
    }

    #[test]
    fn window_json_has_the_go_tier_keys_in_order() {
        assert_eq!(window(false, 0).kind(), EventKind::Window);
        assert_eq!(EventKind::from_name("window"), Some(EventKind::Window));
        assert_eq!(EventKind::from_name("Window"), None);
        assert_eq!(
            window(false, 0).to_json(),
            r#"{"windowStart":"2026-01-01T00:00:00Z","windowEnd":"2026-01-01T00:00:02Z","property":"speed","aggregation":"AVG","value":4,"count":3}"#
        );
    }

    #[test]
    fn partial_and_late_appear_only_when_set() {
        let json = window(true, 2).to_json();
        assert!(
            json.ends_with(r#""count":3,"partial":true,"late":2}"#),
            "{json}"
        );
    }

    #[test]
    fn skipped_appears_only_when_set_after_the_other_fields() {
        let mut event = window(false, 1);
        event.add_skipped(2);
        assert!(event.to_json().ends_with(r#""late":1,"skipped":2}"#));
        let mut instant = Event::Instant(InstantEvent {
            datetime: "t".into(),
            value: Value::Number(1.0),
            property: "p".into(),
            operation: "ln".into(),
            skipped: 0,
        });
        assert!(!instant.to_json().contains("skipped"));
        instant.add_skipped(3);
        assert!(
            instant
                .to_json()
                .ends_with(r#""operation":"ln","skipped":3}"#)
        );
        assert_eq!(instant.skipped(), 3);
    }
}

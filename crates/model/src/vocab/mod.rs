//! The vocabulary every part of mfstream speaks: instants in, events out, the
//! query that maps one to the other, and the status of a running query.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

mod aggregation;
mod event;
mod fast;
mod property;

use crate::json::{is_plain_integer, value_key, write_json_str, write_number};

pub use self::aggregation::Aggregation;
pub use self::event::{DetectEvent, Event, EventKind, InstantEvent, WindowEvent};
pub use self::property::PropertyPath;

/// The value of one temporal-property instant.
///
/// Numbers serve `TReal` and `TInteger` properties, text serves `TText`,
/// booleans serve `TBoolean` and points a feature's positions
/// (`TGeogPoint`, `TGeomPoint`). Transforms take numbers only.
#[derive(Debug, Clone, PartialEq)]
// Exhaustive on purpose: every engine and the server match it whole,
// so that a new kind is handled everywhere (the compiler lists where).
pub enum Value {
    /// A `TReal` or `TInteger` value.
    Number(f64),
    /// A `TText` value.
    Text(String),
    /// A `TBoolean` value.
    Bool(bool),
    /// A position (`TGeogPoint`, `TGeomPoint`), written as its
    /// `coordinates`.
    Point(Point),
    /// The extent of positions (`EXTENT`), `[minx, miny, maxx, maxy]`: a
    /// window's result, never an instant's. Boxed: it is rare (one per
    /// window at most), and inline its 32 bytes would make every `Value`
    /// 40 bytes.
    BBox(Box<[f64; 4]>),
}

// `Value` is moved and copied for every instant of every query; at 40 bytes
// (an inline extent, a point with an `Option<f64>` height) a numeric
// TUMBLING AVG ran 4.6% more instructions than at 32. A point is therefore
// 24 bytes (no height is a NaN, see `Point`) and an extent boxed; keep it
// so.
const _: () = assert!(std::mem::size_of::<Value>() <= 32);

/// A position's coordinates: `[x, y]` or `[x, y, z]`, as MF-JSON writes
/// them (lon/lat in degrees for a geodetic point).
///
/// The height `z` ([`Point::z`]) is carried through (stored, and echoed by
/// `position`), and ignored by every measure: distances, speeds, azimuths,
/// fences and aggregates are computed on `x` and `y` alone, as MEOS does for
/// a 2D `tgeogpoint`.
#[derive(Clone, Copy)]
pub struct Point {
    /// Longitude (geodetic) or easting (planar).
    pub x: f64,
    /// Latitude (geodetic) or northing (planar).
    pub y: f64,
    /// The height; the NaN `NO_Z` when there is none. A sentinel rather
    /// than an `Option<f64>` keeps a point at 24 bytes and so `Value` at 32
    /// (see the size assertion by `Value`). One NaN payload, not every NaN,
    /// so that any other height, a NaN from a plugin included, is carried
    /// as it was.
    z: f64,
}

/// The bits of [`Point`]'s "no height": a quiet NaN with a payload no
/// arithmetic or parser here makes (0x6e6f7a is "noz").
const NO_Z: u64 = 0x7ff8_0000_006e_6f7a;

/// Why numbers are not a point's coordinates ([`Point::from_coordinates`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CoordinatesError {
    /// Not two or three numbers: how many there were.
    #[error("expected 2 or 3 numbers ([x, y] or [x, y, z]), got {0}")]
    Count(usize),
    /// A number that is not finite.
    #[error("every coordinate must be a finite number")]
    NotFinite,
}

impl Point {
    /// A 2D point.
    pub const fn new(x: f64, y: f64) -> Point {
        Point {
            x,
            y,
            z: f64::from_bits(NO_Z),
        }
    }

    /// A point with a height if `z` is `Some`, else a 2D point. (A height
    /// with exactly the bits of the internal "no height" NaN reads as none.)
    pub const fn with_z(x: f64, y: f64, z: Option<f64>) -> Point {
        Point {
            x,
            y,
            z: match z {
                Some(z) => z,
                None => f64::from_bits(NO_Z),
            },
        }
    }

    /// The height, if given.
    pub const fn z(&self) -> Option<f64> {
        if self.z.to_bits() == NO_Z {
            None
        } else {
            Some(self.z)
        }
    }

    /// The coordinates from a JSON array's numbers: two or three, all
    /// finite; else why not (for a message naming `coordinates`).
    pub fn from_coordinates(c: &[f64]) -> Result<Point, CoordinatesError> {
        let point = match *c {
            [x, y] => Point::new(x, y),
            [x, y, z] => Point::with_z(x, y, Some(z)),
            _ => return Err(CoordinatesError::Count(c.len())),
        };
        if c.iter().all(|v| v.is_finite()) {
            Ok(point)
        } else {
            Err(CoordinatesError::NotFinite)
        }
    }

    /// Appends the coordinates as a JSON array to `out`.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        out.push(b'[');
        write_number(self.x, out);
        out.push(b',');
        write_number(self.y, out);
        if let Some(z) = self.z() {
            out.push(b',');
            write_number(z, out);
        }
        out.push(b']');
    }
}

// By hand rather than derived, so that a point reads and compares as if its
// height were the `Option<f64>` it stands for: two 2D points are equal
// (the sentinel is a NaN, and NaN != NaN would make them not), and Debug
// shows `z: None`, not NaN.
impl PartialEq for Point {
    fn eq(&self, other: &Point) -> bool {
        self.x == other.x && self.y == other.y && self.z() == other.z()
    }
}

impl fmt::Debug for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Point")
            .field("x", &self.x)
            .field("y", &self.y)
            .field("z", &self.z())
            .finish()
    }
}

impl Value {
    /// The number, if this is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(v) => Some(*v),
            _ => None,
        }
    }

    /// Appends the value as JSON to `out`.
    ///
    /// Integral numbers are written without a fraction (`3`, not `3.0`), as
    /// the Go tier writes them.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Value::Number(v) => write_number(*v, out),
            Value::Text(s) => write_json_str(s, out),
            Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
            Value::Point(p) => p.write_json(out),
            Value::BBox(b) => {
                for (i, v) in b.iter().enumerate() {
                    out.push(if i == 0 { b'[' } else { b',' });
                    write_number(*v, out);
                }
                out.push(b']');
            }
        }
    }

    /// The point, if this is a point.
    pub fn as_point(&self) -> Option<Point> {
        match self {
            Value::Point(p) => Some(*p),
            _ => None,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = Vec::new();
        self.write_json(&mut out);
        f.write_str(&String::from_utf8_lossy(&out))
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ValueVisitor;

        impl Visitor<'_> for ValueVisitor {
            type Value = Value;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number, a string or a boolean")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
                Ok(Value::Number(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
                Ok(Value::Number(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
                Ok(Value::Number(v as f64))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
                Ok(Value::Bool(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
                Ok(Value::Text(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
                Ok(Value::Text(v))
            }
        }

        deserializer.deserialize_any(ValueVisitor)
    }
}

impl Serialize for Value {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            // As `write_number` writes it.
            Value::Number(v) if is_plain_integer(*v) => match i64::try_from(*v as i128) {
                Ok(n) => serializer.serialize_i64(n),
                Err(_) => serializer.serialize_i128(*v as i128),
            },
            Value::Number(v) => serializer.serialize_f64(*v),
            Value::Text(s) => serializer.serialize_str(s),
            Value::Bool(b) => serializer.serialize_bool(*b),
            Value::Point(p) => {
                use serde::ser::SerializeSeq;
                let mut seq = serializer.serialize_seq(Some(2 + usize::from(p.z().is_some())))?;
                for v in [Some(p.x), Some(p.y), p.z()].into_iter().flatten() {
                    seq.serialize_element(&Value::Number(v))?;
                }
                seq.end()
            }
            Value::BBox(b) => b.map(Value::Number).serialize(serializer),
        }
    }
}

/// One stream record: a datetime and a value.
///
/// The datetime is carried verbatim, as the source wrote it, so that it
/// round-trips without a parse and format step. In JSON a position's value
/// is its `coordinates` (`{"datetime":…,"coordinates":[x,y]}`), any other
/// its `value`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Instant {
    /// The ISO-8601 datetime, verbatim.
    pub datetime: String,
    /// The value at that datetime.
    pub value: Value,
}

impl Instant {
    /// A numeric instant.
    pub fn number(datetime: impl Into<String>, value: f64) -> Instant {
        Instant {
            datetime: datetime.into(),
            value: Value::Number(value),
        }
    }

    /// Parses one instant from a JSON object such as
    /// `{"datetime":"2026-01-01T00:00:00Z","value":1.5}`.
    ///
    /// The common shapes (a number `value` or `coordinates`, no escapes)
    /// are read by hand, to the same bits as serde reads them; anything
    /// else, and every error, is serde's.
    pub fn from_json(line: &[u8]) -> Result<Instant, serde_json::Error> {
        match fast::parse(line) {
            Some(instant) => Ok(instant),
            None => serde_json::from_slice(line),
        }
    }

    /// Appends the instant as one JSON object to `out` (no newline).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"datetime\":");
        write_json_str(&self.datetime, out);
        out.extend_from_slice(value_key(&self.value));
        self.value.write_json(out);
        out.push(b'}');
    }
}

/// An instant as JSON has it: a `value`, or a position's `coordinates`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInstant {
    datetime: String,
    value: Option<Value>,
    coordinates: Option<Coordinates>,
}

/// A JSON array of numbers, at most [`MAX_COORDINATES`] read: any
/// element that is no number is named as a coordinate.
struct Coordinates(Vec<f64>);

/// Past this many elements an array is refused unread (positions have 2 or 3).
const MAX_COORDINATES: usize = 4;

impl<'de> Deserialize<'de> for Coordinates {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Numbers;
        impl<'de> Visitor<'de> for Numbers {
            type Value = Coordinates;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("coordinates: an array of 2 or 3 numbers")
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Coordinates, A::Error> {
                let mut out = Vec::with_capacity(3);
                while let Some(Coordinate(v)) = seq.next_element()? {
                    if out.len() == MAX_COORDINATES {
                        return Err(de::Error::custom(
                            "coordinates: expected 2 or 3 numbers ([x, y] or [x, y, z]), got more",
                        ));
                    }
                    out.push(v);
                }
                Ok(Coordinates(out))
            }
        }
        deserializer.deserialize_seq(Numbers)
    }
}

/// One coordinate: a number.
struct Coordinate(f64);

impl<'de> Deserialize<'de> for Coordinate {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Number;
        impl Visitor<'_> for Number {
            type Value = Coordinate;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a coordinate (a number)")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Coordinate, E> {
                Ok(Coordinate(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Coordinate, E> {
                Ok(Coordinate(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Coordinate, E> {
                Ok(Coordinate(v as f64))
            }
        }
        deserializer.deserialize_f64(Number)
    }
}

impl<'de> Deserialize<'de> for Instant {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = RawInstant::deserialize(deserializer)?;
        let value = match (raw.value, raw.coordinates) {
            (Some(value), None) => value,
            (None, Some(Coordinates(c))) => Value::Point(
                Point::from_coordinates(&c)
                    .map_err(|why| de::Error::custom(format!("coordinates: {why}")))?,
            ),
            (None, None) => return Err(de::Error::missing_field("value")),
            (Some(_), Some(_)) => {
                return Err(de::Error::custom(
                    "an instant has a `value` or `coordinates` (a position), not both",
                ));
            }
        };
        Ok(Instant {
            datetime: raw.datetime,
            value,
        })
    }
}

/// The type of a temporal property, as MF-JSON names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize)]
// Exhaustive on purpose: every engine and the server match it whole,
// so that a new kind is handled everywhere (the compiler lists where).
pub enum PropertyType {
    /// Real numbers (the default).
    #[default]
    TReal,
    /// Integers.
    TInteger,
    /// Text.
    TText,
    /// Booleans.
    TBoolean,
    /// Geodetic positions: lon/lat in degrees on the WGS84 ellipsoid
    /// (MEOS `tgeogpoint`).
    TGeogPoint,
    /// Planar positions in a projected reference system's units (MEOS
    /// `tgeompoint`).
    TGeomPoint,
}

impl PropertyType {
    /// Every property type, in documentation order.
    pub const ALL: [PropertyType; 6] = [
        PropertyType::TReal,
        PropertyType::TInteger,
        PropertyType::TText,
        PropertyType::TBoolean,
        PropertyType::TGeogPoint,
        PropertyType::TGeomPoint,
    ];

    /// The MF-JSON name (`TReal`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            PropertyType::TReal => "TReal",
            PropertyType::TInteger => "TInteger",
            PropertyType::TText => "TText",
            PropertyType::TBoolean => "TBoolean",
            PropertyType::TGeogPoint => "TGeogPoint",
            PropertyType::TGeomPoint => "TGeomPoint",
        }
    }

    /// Whether values of this type are positions.
    pub fn is_point(self) -> bool {
        matches!(self, PropertyType::TGeogPoint | PropertyType::TGeomPoint)
    }

    /// Whether values of this type are numbers.
    pub fn is_numeric(self) -> bool {
        matches!(self, PropertyType::TReal | PropertyType::TInteger)
    }
}

impl fmt::Display for PropertyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for PropertyType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PropertyType::ALL
            .into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                format!(
                    "unknown property type {s:?}: expected one of TReal, TInteger, TText, \
                     TBoolean, TGeogPoint, TGeomPoint"
                )
            })
    }
}

/// The status of a query.
///
/// Exhaustive, unlike the vocabulary that grows: how a query ended decides
/// what its caller does (the binary's exit code), so a new status must
/// fail to compile where that is decided rather than fall into a wildcard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryStatus {
    /// Still running.
    Running,
    /// The source ended and every result was delivered.
    Completed,
    /// Asked to stop, and stopped.
    Stopped,
    /// Failed, in the engine's own words.
    Failed {
        /// Why: the exit status, the tail of stderr, the offending line.
        reason: String,
    },
}

impl QueryStatus {
    /// Whether the query has ended.
    pub fn is_terminal(&self) -> bool {
        !matches!(self, QueryStatus::Running)
    }

    /// The status's name: `running`, `completed`, `stopped` or `failed`.
    pub fn name(&self) -> &'static str {
        match self {
            QueryStatus::Running => "running",
            QueryStatus::Completed => "completed",
            QueryStatus::Stopped => "stopped",
            QueryStatus::Failed { .. } => "failed",
        }
    }
}

impl fmt::Display for QueryStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueryStatus::Failed { reason } => write!(f, "failed: {reason}"),
            other => f.write_str(other.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::number;

    #[test]
    fn a_point_reads_and_compares_as_if_its_height_were_an_option() {
        let flat = Point::new(4.35, 50.85);
        assert_eq!(flat.z(), None);
        assert_eq!(flat, Point::with_z(4.35, 50.85, None));
        assert_eq!(format!("{flat:?}"), "Point { x: 4.35, y: 50.85, z: None }");
        let high = Point::with_z(4.35, 50.85, Some(12.5));
        assert_eq!(high.z(), Some(12.5));
        assert_ne!(flat, high);
        assert_eq!(
            format!("{high:?}"),
            "Point { x: 4.35, y: 50.85, z: Some(12.5) }"
        );
        // Any NaN other than the sentinel is a height, as `Some(NaN)` was.
        let nan = Point::with_z(0.0, 0.0, Some(f64::NAN));
        assert!(nan.z().is_some_and(f64::is_nan));
        assert_ne!(nan, nan, "NaN != NaN, as for Option<f64>");
    }

    #[test]
    fn an_extent_writes_its_four_numbers() {
        let b = Value::BBox(Box::new([1.0, -2.0, 3.5, 4.0]));
        assert_eq!(b.to_string(), "[1,-2,3.5,4]");
        assert_eq!(serde_json::to_string(&b).unwrap(), "[1,-2,3.5,4]");
    }

    #[test]
    fn integral_numbers_print_without_fraction() {
        let mut out = Vec::new();
        write_number(3.0, &mut out);
        out.push(b' ');
        write_number(2.5, &mut out);
        out.push(b' ');
        write_number(-0.0, &mut out);
        assert_eq!(out, b"3 2.5 0");
    }

    #[test]
    fn integral_numbers_from_2_pow_53_print_in_plain_digits_then_exponent_form_never_with_dot_0() {
        let two_53 = 9_007_199_254_740_992.0;
        let cases: [(f64, &str); 12] = [
            // Regression: 2^53 and up were written `9007199254740992.0`.
            (two_53, "9007199254740992"),
            (-two_53, "-9007199254740992"),
            (two_53 * 2.0 + 4.0, "18014398509481988"),
            (1e16, "10000000000000000"),
            (2f64.powi(60), "1152921504606846976"),
            (1e20, "100000000000000000000"),
            (999_999_999_999_999_900_000.0, "999999999999999868928"),
            (1e21, "1e+21"),
            (-1e21, "-1e+21"),
            (1e300, "1e+300"),
            (f64::MAX, "1.7976931348623157e+308"),
            (1e-7, "1e-7"),
        ];
        for (v, want) in cases {
            assert_eq!(number(v), want, "{v:e}");
            // The serde form of a value is the same.
            let serde = serde_json::to_string(&Value::Number(v)).unwrap();
            assert_eq!(serde, want, "serde, {v:e}");
            assert_eq!(serde_json::from_str::<f64>(want).unwrap(), v, "round trip");
        }
        assert_eq!(number(-0.0), "0");
        // Not JSON, so not `null` in a message.
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(f64::NEG_INFINITY), "-inf");
        assert_eq!(serde_json::to_string(&Value::Number(-0.0)).unwrap(), "0");
        assert_eq!(Value::Number(-0.0).to_string(), "0");
    }

    #[test]
    fn json_strings_escape_quotes_and_controls() {
        let mut out = Vec::new();
        write_json_str("a\"b\\c\nd\u{1}", &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), r#""a\"b\\c\nd\u0001""#);
    }

    #[test]
    fn instants_parse_every_value_kind() {
        let n = Instant::from_json(br#"{"datetime":"t","value":1.5}"#).unwrap();
        assert_eq!(n.value, Value::Number(1.5));
        let t = Instant::from_json(br#"{"datetime":"t","value":"a"}"#).unwrap();
        assert_eq!(t.value, Value::Text("a".into()));
        let b = Instant::from_json(br#"{"datetime":"t","value":true}"#).unwrap();
        assert_eq!(b.value, Value::Bool(true));
        assert!(Instant::from_json(br#"{"datetime":"t"}"#).is_err());
        assert!(Instant::from_json(br#"{"datetime":"t","value":1,"x":2}"#).is_err());
    }

    #[test]
    fn a_position_is_its_coordinates_two_or_three_finite_numbers() {
        let p = Instant::from_json(br#"{"datetime":"t","coordinates":[4.35,50.85]}"#).unwrap();
        assert_eq!(p.value, Value::Point(Point::new(4.35, 50.85)));
        let mut out = Vec::new();
        p.write_json(&mut out);
        assert_eq!(out, br#"{"datetime":"t","coordinates":[4.35,50.85]}"#);
        let z = Instant::from_json(br#"{"datetime":"t","coordinates":[1,2,3]}"#).unwrap();
        assert_eq!(z.value.to_string(), "[1,2,3]");
        assert_eq!(serde_json::to_string(&z.value).unwrap(), "[1,2,3]");
        for bad in [
            r#"{"datetime":"t","coordinates":[1]}"#,
            r#"{"datetime":"t","coordinates":[1,2,3,4]}"#,
            r#"{"datetime":"t","coordinates":[1,2,3,4,5]}"#,
            r#"{"datetime":"t","coordinates":{"x":1}}"#,
            r#"{"datetime":"t","coordinates":[1,"2"]}"#,
            r#"{"datetime":"t","coordinates":[1,1e400]}"#,
            r#"{"datetime":"t","coordinates":[1,2],"value":3}"#,
        ] {
            let e = Instant::from_json(bad.as_bytes()).unwrap_err().to_string();
            assert!(
                e.contains("coordinates") || e.contains("number"),
                "{bad}: {e}"
            );
        }
        let e = Instant::from_json(br#"{"datetime":"t","coordinates":[1]}"#).unwrap_err();
        assert!(e.to_string().contains("expected 2 or 3 numbers"), "{e}");
    }
}

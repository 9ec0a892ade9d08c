//! A fast path for the common shape of an instant line.
//!
//! Almost every line a source sends is one of
//! `{"datetime":"…","value":<number>}` and
//! `{"datetime":"…","coordinates":[<x>,<y>(,<z>)]}`, in either key order,
//! with JSON whitespace anywhere JSON allows it. Parsing such a line through
//! serde's derived visitor is most of what a geofence or a lifted operation
//! costs per record (callgrind: 69% of a geofence run's instructions), so
//! [`parse`] reads exactly these shapes by hand and answers `None` for
//! anything else (an escape in a string, a text or boolean value, a third
//! key, a number out of range, a coordinate count other than 2 or 3, bytes
//! that are not UTF-8, …), which the caller hands to serde unchanged.
//!
//! The fast path may only ever accept what serde accepts, and give what
//! serde gives to the bit: numbers are checked against JSON's grammar and
//! read with [`str::parse::<f64>`], correctly rounded as serde_json's
//! `float_roundtrip` parser is, and as its integer path is after its
//! `u64`/`i64` → `f64` cast (both round to nearest). The tests hold the two
//! paths to the same answer on seeded random lines and on edge cases.

use super::{Instant, Point, Value};

/// Parses `line` when it has one of the common shapes; `None` otherwise,
/// including every line serde would refuse.
pub(super) fn parse(line: &[u8]) -> Option<Instant> {
    let mut at = Cursor { line, at: 0 };
    at.skip_ws();
    at.eat(b'{')?;
    let mut datetime = None;
    let mut value = None;
    for member in 0..2 {
        if member == 1 {
            at.skip_ws();
            at.eat(b',')?;
        }
        at.skip_ws();
        let key = at.plain_string()?;
        at.skip_ws();
        at.eat(b':')?;
        at.skip_ws();
        match key {
            b"datetime" if datetime.is_none() => datetime = Some(at.plain_string()?),
            b"value" if value.is_none() => value = Some(Value::Number(at.number()?)),
            b"coordinates" if value.is_none() => value = Some(Value::Point(at.coordinates()?)),
            _ => return None,
        }
    }
    at.skip_ws();
    at.eat(b'}')?;
    at.skip_ws();
    if at.at != line.len() {
        return None;
    }
    let datetime = datetime?;
    let datetime = if datetime.is_ascii() {
        // SAFETY: ASCII is UTF-8; `is_ascii` reads a word at a time, where
        // `from_utf8` costs a loop per byte on strings this short.
        unsafe { String::from_utf8_unchecked(datetime.to_vec()) }
    } else {
        std::str::from_utf8(datetime).ok()?.to_owned()
    };
    Some(Instant {
        datetime,
        value: value?,
    })
}

/// A position in the line.
struct Cursor<'a> {
    line: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.line.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// JSON's whitespace: space, tab, line feed, carriage return.
    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// A string with no escape and no control character (serde refuses
    /// control characters in strings; escapes are left to it), its bytes
    /// between the quotes. UTF-8 is checked by the caller where it matters.
    fn plain_string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let rest = &self.line[self.at..];
        // The first quote or backslash (SIMD), then no control character
        // before it (a fold, not a short-circuit, so that it vectorises).
        let end = memchr::memchr2(b'"', b'\\', rest)?;
        let body = &rest[..end];
        if rest[end] != b'"' || body.iter().fold(false, |c, &b| c | (b < 0x20)) {
            return None;
        }
        self.at += end + 1;
        Some(body)
    }

    /// A JSON number, `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`,
    /// that is finite as an `f64` (serde refuses one out of range).
    ///
    /// Most numbers are read in the one pass that checks the grammar, by
    /// Clinger's fast path: with at most 15 digits in all the digits are an
    /// integer `m < 2^53`, exact in an `f64`, as is `10^e` for `e <= 22`, so
    /// `m * 10^e` or `m / 10^e` is one correctly rounded operation, the
    /// nearest `f64` to the decimal. Any other number is read by
    /// [`str::parse::<f64>`], correctly rounded too.
    fn number(&mut self) -> Option<f64> {
        let start = self.at;
        let negative = self.eat(b'-').is_some();
        let mut mantissa: u64 = 0;
        let mut digits = 0usize;
        match self.peek()? {
            b'0' => self.at += 1,
            b'1'..=b'9' => self.digits(&mut mantissa, &mut digits),
            _ => return None,
        }
        let mut scale: i64 = 0;
        if self.eat(b'.').is_some() {
            let before = digits;
            self.digits(&mut mantissa, &mut digits);
            if digits == before {
                return None;
            }
            scale = -((digits - before) as i64);
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            let minus = self.peek() == Some(b'-');
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            let (mut exponent, mut n) = (0u64, 0usize);
            self.digits(&mut exponent, &mut n);
            if n == 0 {
                return None;
            }
            // Past 15 digits `exponent` is not used (the slow path reads it).
            let exponent = if n > 15 {
                i64::MAX / 2
            } else {
                exponent as i64
            };
            scale = if minus {
                scale - exponent
            } else {
                scale + exponent
            };
        }
        // A digit right after the number (`01`) is no JSON.
        if matches!(self.peek(), Some(b'0'..=b'9')) {
            return None;
        }
        const POW10: [f64; 23] = [
            1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
            1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
        ];
        let value = if digits <= 15 && scale.unsigned_abs() < POW10.len() as u64 {
            let m = mantissa as f64;
            let p = POW10[scale.unsigned_abs() as usize];
            let v = if scale < 0 { m / p } else { m * p };
            if negative { -v } else { v }
        } else {
            // Only ASCII digits, signs, dots and exponents were taken.
            let text = std::str::from_utf8(&self.line[start..self.at]).ok()?;
            text.parse::<f64>().ok()?
        };
        value.is_finite().then_some(value)
    }

    /// ASCII digits, accumulated into `value` (wrapping: only used when
    /// `count` stays within 15) and counted in `count`.
    fn digits(&mut self, value: &mut u64, count: &mut usize) {
        while let Some(&b) = self.line.get(self.at) {
            if !b.is_ascii_digit() {
                break;
            }
            *value = value.wrapping_mul(10).wrapping_add(u64::from(b - b'0'));
            *count += 1;
            self.at += 1;
        }
    }

    /// `[x, y]` or `[x, y, z]`, each a finite number.
    fn coordinates(&mut self) -> Option<Point> {
        self.eat(b'[')?;
        let mut c = [0.0; 3];
        let mut n = 0;
        loop {
            self.skip_ws();
            if n == c.len() {
                return None;
            }
            c[n] = self.number()?;
            n += 1;
            self.skip_ws();
            match self.peek()? {
                b',' => self.at += 1,
                b']' => break,
                _ => return None,
            }
        }
        self.at += 1;
        Point::from_coordinates(&c[..n]).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What serde makes of the line, as bits, for comparing to the fast
    /// path's answer.
    fn serde(line: &str) -> Option<Instant> {
        serde_json::from_str::<Instant>(line).ok()
    }

    fn bits(instant: &Instant) -> (String, Vec<u64>) {
        let values = match &instant.value {
            Value::Number(v) => vec![v.to_bits()],
            Value::Point(p) => [Some(p.x), Some(p.y), p.z()]
                .into_iter()
                .flatten()
                .map(f64::to_bits)
                .collect(),
            other => panic!("the fast path gave a {other:?}"),
        };
        (instant.datetime.clone(), values)
    }

    /// The fast path accepted `line`: serde must accept it too, and give
    /// the same datetime and the same bits.
    fn agrees(line: &str) -> bool {
        match (parse(line.as_bytes()), serde(line)) {
            (Some(fast), Some(slow)) => {
                assert_eq!(bits(&fast), bits(&slow), "{line}");
                true
            }
            (Some(fast), None) => {
                panic!("the fast path took {line:?} as {fast:?}, serde refuses it")
            }
            (None, _) => false,
        }
    }

    #[test]
    fn the_common_shapes_take_the_fast_path_and_give_what_serde_gives() {
        for line in [
            r#"{"datetime":"2026-01-01T00:00:00Z","value":1.5}"#,
            r#"{"datetime":"2026-01-01T00:00:00Z","coordinates":[4.35,50.85]}"#,
            r#"{"datetime":"t","coordinates":[1,2,3]}"#,
            r#"{"value":-0,"datetime":"t"}"#,
            r#"{"coordinates":[ -180 , 90 ],"datetime":"t"}"#,
            " \t{ \"datetime\" : \"t\" , \"value\" : 1e3 } \r\n",
            r#"{"datetime":"2026-01-01T00:00:00+02:00","value":12345678901234567890}"#,
            r#"{"datetime":"t","value":-9223372036854775808}"#,
            r#"{"datetime":"t","value":9007199254740993}"#,
            r#"{"datetime":"t","value":123456789012345678901234567890}"#,
            r#"{"datetime":"t","value":2.2250738585072011e-308}"#,
            r#"{"datetime":"t","value":4.9e-324}"#,
            r#"{"datetime":"t","value":1e-400}"#,
            r#"{"datetime":"t","value":0.1000000000000000055511151231257827}"#,
            r#"{"datetime":"t","value":1.7976931348623157e308}"#,
            r#"{"datetime":"t","value":0E+0}"#,
            r#"{"datetime":"ünïcødé","value":1}"#,
        ] {
            assert!(agrees(line), "not taken by the fast path: {line}");
        }
        // -0 keeps its sign, as serde keeps it.
        let zero = parse(br#"{"value":-0,"datetime":"t"}"#).expect("a plain line");
        assert_eq!(zero.value, Value::Number(-0.0));
        assert!(matches!(zero.value, Value::Number(v) if v.is_sign_negative()));
    }

    #[test]
    fn anything_else_is_left_to_serde() {
        for line in [
            r#"{"datetime":"t","value":"text"}"#,
            r#"{"datetime":"t","value":true}"#,
            r#"{"datetime":"t\u0041","value":1}"#,
            r#"{"datetime":"t","value":1,"x":2}"#,
            r#"{"datetime":"t","datetime":"u"}"#,
            r#"{"datetime":"t","value":1,"coordinates":[1,2]}"#,
            r#"{"datetime":"t"}"#,
            r#"{"datetime":"t","value":01}"#,
            r#"{"datetime":"t","value":1.}"#,
            r#"{"datetime":"t","value":.5}"#,
            r#"{"datetime":"t","value":+1}"#,
            r#"{"datetime":"t","value":1e}"#,
            r#"{"datetime":"t","value":1e400}"#,
            r#"{"datetime":"t","value":-1e400}"#,
            r#"{"datetime":"t","value":NaN}"#,
            r#"{"datetime":"t","value":Infinity}"#,
            r#"{"datetime":"t","coordinates":[1]}"#,
            r#"{"datetime":"t","coordinates":[1,2,3,4]}"#,
            r#"{"datetime":"t","coordinates":[1,2,]}"#,
            r#"{"datetime":"t","coordinates":[]}"#,
            r#"{"datetime":"t","coordinates":[1e400,2]}"#,
            r#"{"datetime":"t","value":1} x"#,
            r#"{"datetime":"t","value":1}}"#,
            r#"{"datetime":"t" "value":1}"#,
            r#"{"datetime":t,"value":1}"#,
            "{\"datetime\":\"t\u{1}\",\"value\":1}",
            r#"["t",1]"#,
            "",
            "{",
        ] {
            assert!(
                parse(line.as_bytes()).is_none(),
                "the fast path took {line}"
            );
        }
        // Bytes that are no UTF-8 in the datetime.
        assert!(parse(b"{\"datetime\":\"\xff\",\"value\":1}").is_none());
    }

    #[test]
    fn numbers_at_the_edges_of_the_exact_fast_path_read_as_serde_reads_them() {
        // 1 to 18 significant digits with exponents around ±22, both edges
        // of Clinger's fast path, as integers, fractions and exponents.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut taken = 0;
        for digits in 1..=18u32 {
            for exponent in -26..=26i32 {
                for _ in 0..20 {
                    // `digits` digits, the first not 0.
                    let low = 10u64.pow(digits - 1);
                    let m = low + next() % (9 * low);
                    let text = m.to_string();
                    let (int, frac) = text.split_at(1);
                    for number in [
                        format!("{text}e{exponent}"),
                        format!("-{int}.{frac}E{exponent:+}"),
                        format!("{m}"),
                        format!("0.{text}"),
                    ] {
                        if frac.is_empty() && number.contains('.') {
                            continue;
                        }
                        let line = format!(r#"{{"datetime":"t","value":{number}}}"#);
                        assert!(agrees(&line), "not taken: {line}");
                        taken += 1;
                    }
                }
            }
        }
        assert!(taken > 50_000, "{taken}");
    }

    #[test]
    fn a_hostile_number_of_many_digits_reads_as_serde_reads_it() {
        // 100,000 digits in the mantissa, the fraction or the exponent:
        // past the exact fast path, read by `str::parse` to serde's bits.
        let digits = "7".repeat(100_000);
        for number in [
            digits.clone(),
            format!("0.{digits}"),
            format!("1e-{digits}"),
            format!("1.5e-0000000000000000000000000000001{}", &digits[..10]),
        ] {
            let line = format!(r#"{{"datetime":"t","value":{number}}}"#);
            match (parse(line.as_bytes()), serde(&line)) {
                (Some(fast), Some(slow)) => assert_eq!(bits(&fast), bits(&slow)),
                (None, _) => {}
                (Some(fast), None) => panic!("taken as {fast:?}, refused by serde"),
            }
        }
        // Out of range: refused by both (serde: "number out of range").
        let line = format!(r#"{{"datetime":"t","value":1e{digits}}}"#);
        assert!(parse(line.as_bytes()).is_none());
        assert!(serde(&line).is_none());
    }

    /// A JSON number's text from its parts (and some that are no JSON).
    fn number_text() -> impl Strategy<Value = String> {
        let json = (
            any::<bool>(),
            prop_oneof!["0", "[1-9][0-9]{0,24}"],
            proptest::option::of("[0-9]{1,20}"),
            proptest::option::of(("[eE]", "[+-]?", "[0-9]{1,3}")),
        )
            .prop_map(|(negative, int, frac, exp)| {
                let mut s = String::new();
                if negative {
                    s.push('-');
                }
                s += &int;
                if let Some(frac) = frac {
                    s = s + "." + &frac;
                }
                if let Some((e, sign, digits)) = exp {
                    s = s + &e + &sign + &digits;
                }
                s
            });
        prop_oneof![
            8 => json,
            1 => "[-+0-9.eE]{1,12}",
            1 => any::<f64>().prop_map(|v| format!("{v:e}")),
            1 => any::<f64>().prop_map(|v| v.to_string()),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        #[test]
        fn random_numbers_read_as_serde_reads_them(v in number_text(), w in number_text()) {
            let value = format!(r#"{{"datetime":"2026-01-01T00:00:00Z","value":{v}}}"#);
            let point = format!(r#"{{"coordinates":[{v}, {w}],"datetime":"t"}}"#);
            let accepted = agrees(&value);
            agrees(&point);
            // Every well-formed, finite number takes the fast path.
            if let Ok(n) = serde_json::from_str::<serde_json::Value>(&v) {
                if n.as_f64().is_some_and(f64::is_finite) {
                    prop_assert!(accepted, "{v} left the fast path");
                }
            }
        }

        #[test]
        fn mutated_lines_are_never_taken_unless_serde_takes_them_alike(
            base in 0..4usize,
            edits in proptest::collection::vec((any::<prop::sample::Index>(), 0..3u8, r#"[ {}\[\]",:0-9.eE\-\\]"#), 1..4)
        ) {
            let mut line = [
                r#"{"datetime":"2026-01-01T00:00:00Z","value":-12.5e-3}"#,
                r#"{"datetime":"2026-01-01T00:00:00Z","coordinates":[4.35,50.85]}"#,
                r#"{ "coordinates" : [ 1 , 2 , 3 ] , "datetime" : "t" }"#,
                r#"{"value":0,"datetime":"t"}"#,
            ][base].as_bytes().to_vec();
            // Insert, replace or delete a byte, up to three times.
            for (at, how, byte) in edits {
                let byte = byte.as_bytes()[0];
                match how {
                    0 => line.insert(at.index(line.len() + 1), byte),
                    1 if !line.is_empty() => { let i = at.index(line.len()); line[i] = byte }
                    _ if !line.is_empty() => { line.remove(at.index(line.len())); }
                    _ => {}
                }
            }
            agrees(&String::from_utf8(line).expect("ASCII edits"));
        }
    }
}

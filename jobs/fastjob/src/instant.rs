//! One JSON instant, `{"datetime":"2026-01-01T00:00:00Z","value":1.5}`, read
//! without allocating.
//!
//! The parser knows exactly this shape: an object with a string `datetime`
//! and a number `value`, in either order, with any JSON whitespace. Anything
//! else (another key, a missing or repeated key, a value of another type,
//! trailing text) is an error, so a host speaking a different dialect fails
//! loudly instead of being half understood. Keys are matched as written: a
//! key spelled with escapes (`"d\u0061tetime"`) counts as unknown.

/// A parsed instant.
#[derive(Debug, PartialEq)]
pub struct Instant<'a> {
    /// The datetime as its JSON string token, quotes and escapes included, so
    /// that it is written back verbatim without unescaping.
    pub datetime: &'a [u8],
    /// The value.
    pub value: f64,
}

/// Parses one line (without its newline).
pub fn parse(line: &[u8]) -> Result<Instant<'_>, String> {
    let mut p = Parser { s: line, i: 0 };
    let mut datetime = None;
    let mut value = None;
    p.expect(b'{')?;
    loop {
        let key = p.string().map_err(|e| format!("expected a key: {e}"))?;
        p.expect(b':')?;
        match key {
            b"\"datetime\"" if datetime.is_none() => {
                datetime = Some(p.string().map_err(|e| format!("\"datetime\": {e}"))?);
            }
            b"\"value\"" if value.is_none() => {
                value = Some(p.number().map_err(|e| format!("\"value\": {e}"))?);
            }
            b"\"datetime\"" | b"\"value\"" => {
                return Err(format!("key {} is repeated", String::from_utf8_lossy(key)));
            }
            _ => {
                return Err(format!(
                    "unknown key {}: an instant has only \"datetime\" and \"value\"",
                    String::from_utf8_lossy(key)
                ));
            }
        }
        match p.next_token() {
            Some(b',') => continue,
            Some(b'}') => break,
            _ => return Err(p.unexpected("',' or '}'")),
        }
    }
    if p.next_token().is_some() {
        return Err(p.unexpected("the end of the line"));
    }
    match (datetime, value) {
        (Some(datetime), Some(value)) => Ok(Instant { datetime, value }),
        (None, _) => Err("missing key \"datetime\"".to_owned()),
        (_, None) => Err("missing key \"value\"".to_owned()),
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Parser<'a> {
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\r' | b'\n') = self.s.get(self.i) {
            self.i += 1;
        }
    }

    /// The next byte after whitespace, consumed.
    fn next_token(&mut self) -> Option<u8> {
        self.skip_ws();
        let b = self.s.get(self.i).copied();
        self.i += 1;
        b
    }

    fn expect(&mut self, want: u8) -> Result<(), String> {
        if self.next_token() == Some(want) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("'{}'", want as char)))
        }
    }

    /// Describes what sits where the last token was read.
    fn unexpected(&self, want: &str) -> String {
        let at = self.i.saturating_sub(1);
        match self.s.get(at) {
            Some(&b) => format!(
                "expected {want} at column {}, found {:?}",
                at + 1,
                b as char
            ),
            None => format!("expected {want}, found the end of the line"),
        }
    }

    /// A string token, checked against JSON's rules, returned with its
    /// quotes and escapes.
    fn string(&mut self) -> Result<&'a [u8], String> {
        self.skip_ws();
        let start = self.i;
        if self.s.get(start) != Some(&b'"') {
            return Err("expected a string".to_owned());
        }
        let mut i = start + 1;
        loop {
            match self.s.get(i) {
                None => return Err("unterminated string".to_owned()),
                Some(b'"') => break,
                Some(b'\\') => match self.s.get(i + 1) {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                    Some(b'u')
                        if self.s.len() > i + 5
                            && self.s[i + 2..i + 6].iter().all(u8::is_ascii_hexdigit) =>
                    {
                        i += 6
                    }
                    _ => return Err(format!("bad escape at column {}", i + 1)),
                },
                Some(&b) if b < 0x20 => {
                    return Err(format!("unescaped control character at column {}", i + 1));
                }
                Some(_) => i += 1,
            }
        }
        self.i = i + 1;
        let token = &self.s[start..self.i];
        std::str::from_utf8(token).map_err(|_| "string is not valid UTF-8".to_owned())?;
        Ok(token)
    }

    /// A number token, checked against JSON's grammar (which is narrower than
    /// Rust's: no `inf`, `nan`, leading `+` or bare `.5`).
    fn number(&mut self) -> Result<f64, String> {
        self.skip_ws();
        let start = self.i;
        let digits = |s: &[u8], mut i: usize| {
            let from = i;
            while s.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            (i, i > from)
        };
        let mut i = start;
        if self.s.get(i) == Some(&b'-') {
            i += 1;
        }
        let (mut i, int) = match self.s.get(i) {
            Some(b'0') => (i + 1, true),
            _ => digits(self.s, i),
        };
        let mut ok = int;
        if self.s.get(i) == Some(&b'.') {
            let (j, frac) = digits(self.s, i + 1);
            (i, ok) = (j, ok && frac);
        }
        if let Some(b'e' | b'E') = self.s.get(i) {
            i += 1;
            if let Some(b'+' | b'-') = self.s.get(i) {
                i += 1;
            }
            let (j, exp) = digits(self.s, i);
            (i, ok) = (j, ok && exp);
        }
        let token = &self.s[start..i];
        if !ok {
            return Err("expected a number".to_owned());
        }
        self.i = i;
        // The grammar above admits only ASCII, and every JSON number is a
        // valid Rust float literal.
        let text = std::str::from_utf8(token).map_err(|e| e.to_string())?;
        text.parse().map_err(|_| format!("bad number {text}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(line: &str) -> (String, f64) {
        let i = parse(line.as_bytes()).unwrap();
        (String::from_utf8(i.datetime.to_vec()).unwrap(), i.value)
    }

    fn err(line: &str) -> String {
        parse(line.as_bytes()).unwrap_err()
    }

    #[test]
    fn instants_parse_in_any_key_order_and_spacing() {
        let want = ("\"2026-01-01T00:00:00Z\"".to_owned(), 1.5);
        assert_eq!(
            ok(r#"{"datetime":"2026-01-01T00:00:00Z","value":1.5}"#),
            want
        );
        assert_eq!(
            ok(r#" { "value" : 1.5 , "datetime" : "2026-01-01T00:00:00Z" } "#),
            want
        );
        assert_eq!(ok(r#"{"datetime":"t","value":-0.25e+2}"#).1, -25.0);
        assert_eq!(ok(r#"{"datetime":"t","value":0}"#).1, 0.0);
    }

    #[test]
    fn escaped_datetimes_are_kept_verbatim() {
        let line = r#"{"datetime":"a\"b\\c\u00e9\/","value":1}"#;
        assert_eq!(ok(line).0, r#""a\"b\\c\u00e9\/""#);
        assert_eq!(ok(r#"{"datetime":"é","value":1}"#).0, "\"é\"");
    }

    #[test]
    fn other_shapes_are_rejected_with_the_reason() {
        assert!(err(r#"{"datetime":"t"}"#).contains("missing key \"value\""));
        assert!(err(r#"{"value":1}"#).contains("missing key \"datetime\""));
        assert!(err(r#"{"datetime":"t","value":1,"x":2}"#).contains("unknown key \"x\""));
        assert!(err(r#"{"datetime":"t","value":1,"value":2}"#).contains("repeated"));
        assert!(err(r#"{"datetime":"t","value":"1"}"#).contains("expected a number"));
        assert!(err(r#"{"datetime":1,"value":1}"#).contains("expected a string"));
        assert!(err(r#"{"datetime":"t","value":1} x"#).contains("end of the line"));
        assert!(err(r#"{"datetime":"t","value":1"#).contains("found the end"));
        assert!(err(r#"{"datetime":"t\q","value":1}"#).contains("bad escape"));
        assert!(err(r#"{"datetime":"t\u12","value":1}"#).contains("bad escape"));
        assert!(err("{\"datetime\":\"t\tx\",\"value\":1}").contains("control character"));
        assert!(err(r#"{"datetime":"t"#).contains("unterminated"));
        assert!(err("[1]").contains("expected '{'"));
        assert!(err("").contains("end of the line"));
        assert!(err("{}").contains("expected a key"));
    }

    #[test]
    fn only_json_numbers_are_accepted() {
        for bad in [
            "NaN", "inf", "+1", ".5", "1.", "01x", "1e", "-", "true", "null",
        ] {
            let line = format!(r#"{{"datetime":"t","value":{bad}}}"#);
            assert!(parse(line.as_bytes()).is_err(), "{bad} was accepted");
        }
    }
}

//! Event time: the instants' ISO-8601 datetimes, parsed to seconds since the
//! epoch for windowing.
//!
//! Every form MobilityDB and MF-JSON produce is accepted:
//! `2026-01-01T00:00:00Z`, `2026-01-01T00:00:00+00:00`,
//! `2026-01-01 00:00:00+00`, `2026-01-01T00:00:00 +00`, other offsets
//! (`+05:30`, `-03`, `+0530`), fractional seconds (`.5`, up to nanoseconds;
//! further digits are ignored), and a datetime without a zone, which is taken
//! as UTC. The separator between date and time is `T`, `t` or a space.
//! Seconds may be left out (`2026-01-01T00:00Z`).
//!
//! A hand-written parser rather than a crate: it runs once per record on
//! the hot path of every time window, and the grammar is small.

/// A moment: whole seconds since 1970-01-01T00:00:00Z, and nanoseconds
/// within that second. Ordered in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timestamp {
    /// Seconds since the epoch (floored: before the epoch they are negative).
    pub secs: i64,
    /// Nanoseconds within the second, `0..1_000_000_000`.
    pub nanos: u32,
}

/// Parses an ISO-8601 datetime; `None` when `text` is not one.
pub fn parse(text: &str) -> Option<Timestamp> {
    parse_utc(text.as_bytes()).or_else(|| parse_any(text))
}

/// The common form, `YYYY-MM-DDTHH:MM:SS`, an optional fraction of up to
/// nine digits, then `Z`, read in one pass over fixed places: `None` for
/// anything else, which [`parse_any`] reads (or refuses). Every record's
/// datetime is parsed on the hot path of a window or a position query; the
/// tests hold the two to the same answer.
fn parse_utc(b: &[u8]) -> Option<Timestamp> {
    let (head, tail) = b.split_first_chunk::<19>()?;
    let digit = |i: usize| {
        let d = head[i].wrapping_sub(b'0');
        (d < 10).then_some(i64::from(d))
    };
    let two = |i: usize| Some(digit(i)? * 10 + digit(i + 1)?);
    let year = two(0)? * 100 + two(2)?;
    let (month, day) = (two(5)?, two(8)?);
    let (hour, minute, second) = (two(11)?, two(14)?, two(17)?);
    if head[4] != b'-'
        || head[7] != b'-'
        || head[10] != b'T'
        || head[13] != b':'
        || head[16] != b':'
    {
        return None;
    }
    let (zone, fraction) = tail.split_last()?;
    if *zone != b'Z' || fraction.len() > 10 {
        return None;
    }
    let mut nanos = 0u32;
    if let Some((dot, digits)) = fraction.split_first() {
        if *dot != b'.' || digits.is_empty() {
            return None;
        }
        for &c in digits {
            let d = c.wrapping_sub(b'0');
            if d >= 10 {
                return None;
            }
            nanos = nanos * 10 + u32::from(d);
        }
        // A table, not `pow`: a loop of squarings per record.
        const SCALE: [u32; 10] = [
            1_000_000_000,
            100_000_000,
            10_000_000,
            1_000_000,
            100_000,
            10_000,
            1_000,
            100,
            10,
            1,
        ];
        nanos *= SCALE[digits.len()];
    }
    moment([year, month, day, hour, minute, second], 0, nanos)
}

/// The moment of a civil date and time at `offset` seconds east of UTC;
/// `None` when a field is out of its range (a leap second, 60, is taken).
fn moment(fields: [i64; 6], offset: i64, nanos: u32) -> Option<Timestamp> {
    let [year, month, day, hour, minute, second] = fields;
    if !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let secs =
        days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset;
    Some(Timestamp { secs, nanos })
}

/// Every form the module names (see its documentation).
fn parse_any(text: &str) -> Option<Timestamp> {
    let b = text.as_bytes();
    let year = digits(b, 0, 4)?;
    let month = digits(b, 5, 2)?;
    let day = digits(b, 8, 2)?;
    let hour = digits(b, 11, 2)?;
    let minute = digits(b, 14, 2)?;
    if b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') || b[13] != b':' {
        return None;
    }
    let mut i = 16;
    let mut second = 0;
    if b.get(i) == Some(&b':') {
        second = digits(b, i + 1, 2)?;
        i += 3;
    }
    let mut nanos = 0u32;
    if matches!(b.get(i), Some(b'.' | b',')) {
        i += 1;
        let start = i;
        while let Some(d) = b.get(i).filter(|c| c.is_ascii_digit()) {
            if i - start < 9 {
                nanos = nanos * 10 + u32::from(d - b'0');
            }
            i += 1;
        }
        if i == start {
            return None;
        }
        nanos *= 10u32.pow(9u32.saturating_sub((i - start) as u32));
    }
    let offset = offset(&b[i..])?;
    moment([year, month, day, hour, minute, second], offset, nanos)
}

/// The zone at the end of a datetime, as seconds east of UTC: nothing (UTC),
/// `Z`, or `±HH`, `±HH:MM`, `±HHMM`, optionally after one space.
fn offset(b: &[u8]) -> Option<i64> {
    let b = b.strip_prefix(b" ").unwrap_or(b);
    let sign = match b.first() {
        None => return Some(0),
        Some(b'Z' | b'z') if b.len() == 1 => return Some(0),
        Some(b'+') => 1,
        Some(b'-') => -1,
        _ => return None,
    };
    let hours = digits(b, 1, 2)?;
    let minutes = match b.len() {
        3 => 0,
        5 => digits(b, 3, 2)?,
        6 if b[3] == b':' => digits(b, 4, 2)?,
        _ => return None,
    };
    if hours > 23 || minutes > 59 {
        return None;
    }
    Some(sign * (hours * 3600 + minutes * 60))
}

/// The decimal number in `b[at..at + n]`, all digits.
fn digits(b: &[u8], at: usize, n: usize) -> Option<i64> {
    let field = b.get(at..at + n)?;
    field.iter().try_fold(0i64, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
    })
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`): the one calendar of mfstream and its tests.
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

impl Timestamp {
    /// Microseconds since the epoch (floored), as [`crate::geo`] counts
    /// time.
    pub fn micros(self) -> i64 {
        self.secs
            .saturating_mul(1_000_000)
            .saturating_add(i64::from(self.nanos / 1000))
    }
}

/// Formats microseconds since the epoch as an RFC 3339 UTC datetime, with
/// as many fraction digits as it needs (none, 3 or 6):
/// `2026-01-01T00:00:01Z`, `2026-01-01T00:00:01.500Z`,
/// `2026-01-01T00:00:01.250001Z`. A moment mfstream computed (a geofence's
/// crossing) is written so; a record's own datetime is carried verbatim.
pub fn format_micros(micros: i64) -> String {
    let secs = micros.div_euclid(1_000_000);
    let fraction = micros.rem_euclid(1_000_000);
    let (days, of_day) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    let mut out = format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60
    );
    if fraction % 1000 == 0 && fraction != 0 {
        out.push_str(&format!(".{:03}", fraction / 1000));
    } else if fraction != 0 {
        out.push_str(&format!(".{fraction:06}"));
    }
    out.push('Z');
    out
}

/// The proleptic Gregorian date `(year, month, day)` of a day since
/// 1970-01-01 (Howard Hinnant's `civil_from_days`): the inverse of
/// [`days_from_civil`].
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatted_micros_parse_back_to_the_same_moment() {
        assert_eq!(format_micros(0), "1970-01-01T00:00:00Z");
        assert_eq!(
            format_micros(1_767_225_601_500_000),
            "2026-01-01T00:00:01.500Z"
        );
        assert_eq!(
            format_micros(1_767_225_601_250_001),
            "2026-01-01T00:00:01.250001Z"
        );
        assert_eq!(format_micros(-1), "1969-12-31T23:59:59.999999Z");
        assert_eq!(format_micros(951_782_400_000_000), "2000-02-29T00:00:00Z");
        // Every day of four centuries, and moments within them, round-trip.
        let mut us = -4_000_000_000_000_000i64;
        while us < 9_000_000_000_000_000 {
            let text = format_micros(us);
            assert_eq!(parse(&text).map(Timestamp::micros), Some(us), "{text}");
            us += 86_399_999_999 + 7;
        }
    }

    fn secs(text: &str) -> i64 {
        parse(text)
            .unwrap_or_else(|| panic!("{text:?} should parse"))
            .secs
    }

    const NEW_YEAR_2026: i64 = 1_767_225_600;

    #[test]
    fn every_mobilitydb_and_mf_json_form_parses_to_the_same_moment() {
        for text in [
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:00:00+00:00",
            "2026-01-01T00:00:00 +00",
            "2026-01-01 00:00:00+00",
            "2026-01-01 00:00:00",
            "2026-01-01t00:00:00z",
            "2026-01-01T00:00Z",
            "2026-01-01T05:30:00+05:30",
            "2026-01-01T05:30:00+0530",
            "2025-12-31T21:00:00-03",
        ] {
            assert_eq!(secs(text), NEW_YEAR_2026, "{text}");
        }
    }

    #[test]
    fn fractional_seconds_keep_nanoseconds() {
        let t = parse("2026-01-01T00:00:01.5Z").unwrap();
        assert_eq!((t.secs, t.nanos), (NEW_YEAR_2026 + 1, 500_000_000));
        let t = parse("2026-01-01 00:00:01,123456789123+00").unwrap();
        assert_eq!(t.nanos, 123_456_789);
        assert!(parse("2026-01-01T00:00:00.000001Z") > parse("2026-01-01T00:00:00Z"));
    }

    #[test]
    fn dates_before_the_epoch_and_leap_days_are_exact() {
        assert_eq!(secs("1970-01-01T00:00:00Z"), 0);
        assert_eq!(secs("1969-12-31T23:59:59Z"), -1);
        assert_eq!(secs("2024-02-29T00:00:00Z"), 1_709_164_800);
        assert_eq!(secs("2000-03-01T00:00:00Z"), 951_868_800);
    }

    /// The general parser alone, for comparing with [`parse`].
    fn general(text: &str) -> Option<Timestamp> {
        parse_any(text)
    }

    #[test]
    fn the_common_form_reads_as_the_general_parser_reads_it() {
        // Every day of four centuries, each with a fraction of 0 to 9 digits.
        let mut us = -4_000_000_000_000_000i64;
        let mut n = 0u32;
        while us < 9_000_000_000_000_000 {
            let text = format_micros(us);
            let digits = n % 10;
            let stem = text.split(['.', 'Z']).next().expect("a datetime");
            let fraction = format!(
                "{:09}",
                u64::from(n).wrapping_mul(2_654_435_761) % 1_000_000_000
            );
            let variant = if digits == 0 {
                format!("{stem}Z")
            } else {
                format!("{stem}.{}Z", &fraction[..digits as usize])
            };
            for text in [&text, &variant] {
                assert!(parse_utc(text.as_bytes()).is_some(), "{text}");
                assert_eq!(parse(text), general(text), "{text}");
            }
            us += 86_399_999_999 + 7;
            n += 1;
        }
    }

    #[test]
    fn mutated_datetimes_read_as_the_general_parser_reads_them() {
        // Each byte of common forms replaced by each of a few bytes, and
        // each byte removed: the fast path answers as the general one.
        let bytes = b"0123459-:.TtZz+ x\xff";
        for base in [
            "2026-01-01T00:00:00Z",
            "2024-02-29T23:59:60.123456789Z",
            "1969-12-31T23:59:59.5Z",
        ] {
            for at in 0..base.len() {
                let mut removed = base.as_bytes().to_vec();
                removed.remove(at);
                let mut variants = vec![removed];
                for &b in bytes {
                    let mut v = base.as_bytes().to_vec();
                    v[at] = b;
                    variants.push(v);
                    let mut v = base.as_bytes().to_vec();
                    v.insert(at, b);
                    variants.push(v);
                }
                for v in variants {
                    let Ok(text) = String::from_utf8(v) else {
                        continue;
                    };
                    assert_eq!(parse(&text), general(&text), "{text:?}");
                }
            }
        }
    }

    #[test]
    fn anything_else_is_refused() {
        for text in [
            "",
            "t1",
            "2026-01-01",
            "2026-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:00:00.Z",
            "2026-01-01T00:00:00+5",
            "2026-01-01T00:00:00+05:3",
            "2026-01-01T00:00:00Zjunk",
            "2026-01-01T00:00:00  +00",
            "2026/01/01T00:00:00Z",
            "２０２６-01-01T00:00:00Z",
        ] {
            assert_eq!(parse(text), None, "{text:?}");
        }
    }
}

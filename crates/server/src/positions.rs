//! A feature's positions on the wire: the body of a `POST …/tgsequence/ingest`
//! (one instant `{"datetime","coordinates"}`, an array of them, JSON lines,
//! or an MF-JSON `MovingPoint`), checked before anything is delivered.

use mfstream_model::geo::{self, Crs};
use mfstream_model::position;
use mfstream_model::{Instant, Point, PropertyType, Value};

use super::ingest::{self, Horizon};
use super::problem::Problem;
use mfstream_model::PropertyPath;

/// The most positions an MF-JSON `MovingPoint` may hold (as many as one
/// body of instants can at the default `--max-body`, give or take).
pub(crate) const MAX_MOVING_POINT: usize = 100_000;

/// The reference system of a feature whose type is `known` and, for a
/// planar one, system `crs`: the one positions are checked in.
pub(crate) fn feature_crs(known: Option<PropertyType>, crs: Option<Crs>) -> Option<Crs> {
    match (known, crs) {
        (_, Some(crs)) => Some(crs),
        (Some(PropertyType::TGeogPoint), None) => Some(Crs::Geodetic),
        _ => None,
    }
}

/// The instants of a body for the temporal property `key`: none a position
/// (400: positions are the feature's `tgsequence`).
pub(crate) fn scalars(instants: Vec<Instant>, key: &PropertyPath) -> Result<Vec<Instant>, Problem> {
    match instants
        .iter()
        .position(|i| matches!(i.value, Value::Point(_)))
    {
        Some(i) => Err(Problem::invalid(
            "coordinates",
            format!(
                "instant {}: a position is a feature's, not a property's: send it to {}/ingest",
                i + 1,
                PropertyPath::sequence(key.collection.clone(), key.feature.clone()).href()
            ),
        )),
        None => Ok(instants),
    }
}

/// Parses and checks a body of positions for a feature in `feature` (its
/// reference system, once a query has fixed it): every instant a position
/// of two or three finite numbers, inside the lon/lat ranges for a
/// geodetic one, with an ISO-8601 datetime, the datetimes increasing. Each
/// error is a 400 naming the field and the instant; a `MovingPoint` whose
/// `crs` is not the feature's is a 422. On a feature no query has fixed, a
/// `MovingPoint` is checked in its own `crs`, which fixes nothing (nothing
/// of an ingest to a feature no query reads is kept); positions without
/// one are checked for finiteness only, for they may be planar, and each
/// query checks them in its own system as they come.
pub(crate) fn parse(
    body: &[u8],
    feature: Option<Crs>,
    horizon: &Horizon,
) -> Result<Vec<Instant>, Problem> {
    let (instants, crs) = match moving_point(body, horizon)? {
        Some((instants, given)) => {
            if let (Some(given), Some(feature)) = (given, feature)
                && given != feature
            {
                return Err(Problem::unprocessable(
                    "crs",
                    format!(
                        "the feature's positions are in {}, not {}: a feature has one \
                         reference system",
                        feature.name(),
                        given.name()
                    ),
                ));
            }
            (instants, given.or(feature))
        }
        None => (
            ingest::parse(body, horizon).map_err(|e| coordinates_fault(body).unwrap_or(e))?,
            feature,
        ),
    };
    check(&instants, crs)?;
    Ok(instants)
}

/// When a body of instants does not parse for its coordinates (not two or
/// three numbers), the 400 naming `coordinates` and the instant, rather
/// than the body. Only on the error path: the body is read again.
fn coordinates_fault(body: &[u8]) -> Option<Problem> {
    let trimmed = body.trim_ascii();
    let values: Vec<serde_json::Value> = if trimmed.starts_with(b"[") {
        serde_json::from_slice(trimmed).ok()?
    } else {
        trimmed
            .split(|&b| b == b'\n')
            .filter(|line| !line.trim_ascii().is_empty())
            .map(serde_json::from_slice)
            .collect::<Result<_, _>>()
            .ok()?
    };
    values.iter().enumerate().find_map(|(i, value)| {
        let e = <Instant as serde::Deserialize>::deserialize(value).err()?;
        let text = e.to_string();
        let why = text.strip_prefix("coordinates: ")?;
        Some(Problem::invalid(
            "coordinates",
            format!("instant {}: {why}", i + 1),
        ))
    })
}

/// Every instant a position of `crs` (finite coordinates when it is not
/// known), the datetimes increasing.
fn check(instants: &[Instant], crs: Option<Crs>) -> Result<(), Problem> {
    // Finite numbers are a position of any planar system.
    let crs = crs.unwrap_or(Crs::Planar(0));
    let mut last: Option<(i64, &str)> = None;
    for (i, instant) in instants.iter().enumerate() {
        let n = i + 1;
        let Value::Point(p) = &instant.value else {
            return Err(Problem::invalid(
                "coordinates",
                format!(
                    "instant {n} has a \"value\" ({}): a position has \"coordinates\" [x, y]",
                    instant.value
                ),
            ));
        };
        geo::check_point(crs, geo::Point::new(p.x, p.y)).map_err(|e| {
            let e = position::spec_error(e, "coordinates");
            Problem::invalid(e.field, format!("instant {n}: {}", e.message))
        })?;
        // Checked by `ingest::parse` or `moving_point`: an ISO-8601 datetime.
        let Some(t) = mfstream_model::datetime::parse(&instant.datetime).map(|t| t.micros()) else {
            return Err(Problem::invalid(
                "datetime",
                format!(
                    "instant {n}: {:?} is not an ISO-8601 datetime",
                    instant.datetime
                ),
            ));
        };
        if let Some((before, text)) = last
            && t <= before
        {
            return Err(Problem::invalid(
                "datetime",
                format!(
                    "instant {n}: {:?} is not after instant {} ({text:?}): a feature's \
                     datetimes must increase",
                    instant.datetime,
                    n - 1
                ),
            ));
        }
        last = Some((t, &instant.datetime));
    }
    Ok(())
}

/// A `MovingPoint`'s instants, and the reference system it names.
type MovingPoint = (Vec<Instant>, Option<Crs>);

/// An MF-JSON `MovingPoint` (`{"type":"MovingPoint","coordinates":[[x,y],…],
/// "datetimes":[…],"interpolation":"Linear"}`, an optional `crs`) as its
/// instants and the reference system it names; `None` when the body is
/// not one (it has no `"type":"MovingPoint"`).
fn moving_point(body: &[u8], horizon: &Horizon) -> Result<Option<MovingPoint>, Problem> {
    let trimmed = body.trim_ascii();
    if !trimmed.starts_with(b"{") {
        return Ok(None);
    }
    let mut object = match serde_json::from_slice(trimmed) {
        Ok(serde_json::Value::Object(object)) => object,
        // A MovingPoint that is not JSON (a number out of range, a
        // missing comma) says why, rather than failing again as an
        // instant, for its `type`.
        Err(e) if trimmed.windows(13).any(|w| w == b"\"MovingPoint\"") => {
            return Err(Problem::invalid(
                "body",
                format!("the MovingPoint is not JSON: {e}"),
            ));
        }
        _ => return Ok(None),
    };
    if object.get("type").and_then(serde_json::Value::as_str) != Some("MovingPoint") {
        return Ok(None);
    }
    let array =
        |object: &mut serde_json::Map<String, serde_json::Value>, field: &'static str| match object
            .remove(field)
        {
            Some(serde_json::Value::Array(items)) => Ok(items),
            _ => Err(Problem::invalid(
                field,
                "a MovingPoint needs `coordinates` and `datetimes`, two arrays of the same length",
            )),
        };
    let coordinates = array(&mut object, "coordinates")?;
    let datetimes = array(&mut object, "datetimes")?;
    if coordinates.len() != datetimes.len() || coordinates.is_empty() {
        return Err(Problem::invalid(
            "datetimes",
            format!(
                "{} datetimes for {} coordinates: a MovingPoint needs one datetime per position \
                 (at least one)",
                datetimes.len(),
                coordinates.len()
            ),
        ));
    }
    if coordinates.len() > MAX_MOVING_POINT {
        return Err(Problem::too_large(
            "coordinates",
            format!(
                "{} positions; a MovingPoint holds at most {MAX_MOVING_POINT}: send several",
                coordinates.len()
            ),
        ));
    }
    match object.get("interpolation").map(|v| v.as_str()) {
        None | Some(Some("Linear")) => {}
        Some(other) => {
            return Err(Problem::invalid(
                "interpolation",
                format!(
                    "{}: positions are measured along linear segments; send \"Linear\" (or \
                     leave it out)",
                    other.map_or_else(|| "not a string".to_owned(), |s| format!("{s:?}"))
                ),
            ));
        }
    }
    let crs = match object.get("crs") {
        None | Some(serde_json::Value::Null) => None,
        Some(crs) => Some(mf_json_crs(crs)?),
    };
    Ok(Some((instants_of(&coordinates, &datetimes, horizon)?, crs)))
}

/// A `MovingPoint`'s positions and datetimes (as many of each) as instants.
fn instants_of(
    coordinates: &[serde_json::Value],
    datetimes: &[serde_json::Value],
    horizon: &Horizon,
) -> Result<Vec<Instant>, Problem> {
    let mut instants = Vec::with_capacity(coordinates.len());
    for (i, (c, t)) in coordinates.iter().zip(datetimes).enumerate() {
        let n = i + 1;
        let numbers: Option<Vec<f64>> = c
            .as_array()
            .and_then(|c| c.iter().map(serde_json::Value::as_f64).collect());
        let point = match numbers {
            Some(c) => Point::from_coordinates(&c).map_err(|why| why.to_string()),
            None => Err("expected an array of numbers".to_owned()),
        }
        .map_err(|why| Problem::invalid("coordinates", format!("position {n}: {why}")))?;
        let Some(datetime) = t.as_str() else {
            return Err(Problem::invalid(
                "datetimes",
                format!("position {n}: expected an ISO-8601 string, got {t}"),
            ));
        };
        ingest::check_datetime(n, datetime, horizon)?;
        instants.push(Instant {
            datetime: datetime.to_owned(),
            value: Value::Point(point),
        });
    }
    Ok(instants)
}

/// An MF-JSON `crs`: a name (`"EPSG:4326"`) or `{"type":"Name",
/// "properties":{"name":…}}`.
fn mf_json_crs(crs: &serde_json::Value) -> Result<Crs, Problem> {
    let name = crs
        .as_str()
        .or_else(|| crs.pointer("/properties/name").and_then(|v| v.as_str()))
        .ok_or_else(|| {
            Problem::invalid(
                "crs",
                format!(
                    "expected \"EPSG:NNNN\" or {{\"type\":\"Name\",\"properties\":{{\"name\":\
                     \"EPSG:NNNN\"}}}}, got {}",
                    cut_short(&crs.to_string())
                ),
            )
        })?;
    Crs::parse(name).map_err(|e| {
        let e = position::spec_error(e, "crs");
        Problem::invalid(e.field, e.message)
    })
}

/// `text` as an error quotes it: at most 64 characters, `…` after.
fn cut_short(text: &str) -> String {
    match text.char_indices().nth(64) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body parsed as the server does by default.
    fn parse(body: &[u8], feature: Option<Crs>) -> Result<Vec<Instant>, Problem> {
        let horizon = Horizon::from_now(ingest::DEFAULT_MAX_DATETIME_AHEAD);
        super::parse(body, feature, &horizon)
    }

    fn field(body: &str, crs: Option<Crs>) -> String {
        match parse(body.as_bytes(), crs) {
            Ok(_) => panic!("{body} parsed"),
            Err(p) => format!("{p:?}"),
        }
    }

    #[test]
    fn a_body_of_positions_is_instants_or_a_moving_point() {
        let one = r#"{"datetime":"2026-01-01T00:00:00Z","coordinates":[4.35,50.85]}"#;
        assert_eq!(parse(one.as_bytes(), None).unwrap().len(), 1);
        let lines = format!("{one}\n{}", one.replace("00:00Z", "00:01Z"));
        assert_eq!(parse(lines.as_bytes(), None).unwrap().len(), 2);
        let mp = r#"{"type":"MovingPoint","coordinates":[[4.35,50.85],[4.36,50.86,12]],
            "datetimes":["2026-01-01T00:00:00Z","2026-01-01T00:00:10Z"],"interpolation":"Linear"}"#;
        let instants = parse(mp.as_bytes(), None).unwrap();
        assert_eq!(instants[1].value.to_string(), "[4.36,50.86,12]");
        assert_eq!(instants[1].datetime, "2026-01-01T00:00:10Z");
    }

    #[test]
    fn bad_positions_are_400s_naming_the_field_and_the_instant() {
        let at = |s: &str, c: &str| {
            format!(r#"{{"datetime":"2026-01-01T00:00:{s}Z","coordinates":{c}}}"#)
        };
        let geodetic = Some(Crs::Geodetic);
        let e = field(&at("00", "[200,10]"), geodetic);
        assert!(
            e.contains("coordinates") && e.contains("longitude 200") && e.contains("instant 1"),
            "{e}"
        );
        let e = field(
            &format!("[{},{}]", at("00", "[1,2]"), at("00", "[1,91]")),
            geodetic,
        );
        assert!(e.contains("latitude 91") && e.contains("instant 2"), "{e}");
        // A feature no query has fixed may be planar: finite numbers only.
        let instants = parse(at("00", "[500000,4000000]").as_bytes(), None).unwrap();
        assert_eq!(instants.len(), 1);
        // A MovingPoint on it is checked in its own crs.
        let e = field(
            r#"{"type":"MovingPoint","coordinates":[[200,0]],"datetimes":["2026-01-01T00:00:00Z"],"crs":"EPSG:4326"}"#,
            None,
        );
        assert!(e.contains("longitude 200"), "{e}");
        // A longitude of 1e308 is quoted briefly.
        let e = field(&at("00", "[1e308,0]"), geodetic);
        assert!(
            e.contains("longitude 1e+308 is outside") && e.len() < 300,
            "{e}"
        );
        // A datetime past the horizon, in a MovingPoint too.
        let e = field(
            r#"{"type":"MovingPoint","coordinates":[[1,2],[1,3]],"datetimes":["2026-01-01T00:00:00Z","9999-12-31T00:00:00Z"]}"#,
            None,
        );
        assert!(
            e.contains("datetime")
                && e.contains("instant 2")
                && e.contains("--max-datetime-ahead-ms"),
            "{e}"
        );
        let e = field(&at("00", "[1e308,1e309]"), None);
        assert!(e.contains("out of range") || e.contains("finite"), "{e}");
        // Planar: any finite coordinates.
        assert!(
            parse(
                at("00", "[500000,4000000]").as_bytes(),
                Some(Crs::Planar(3857))
            )
            .is_ok()
        );
        let e = field(
            &format!("[{},{}]", at("01", "[1,2]"), at("01", "[1,3]")),
            None,
        );
        assert!(
            e.contains("datetime") && e.contains("must increase") && e.contains("instant 2"),
            "{e}"
        );
        let e = field(&at("00", "[1]"), None);
        assert!(e.contains("expected 2 or 3 numbers"), "{e}");
        let e = field(r#"{"datetime":"2026-01-01T00:00:00Z","value":3}"#, None);
        assert!(e.contains("coordinates") && e.contains("instant 1"), "{e}");
        let e = field(
            r#"{"type":"MovingPoint","coordinates":[[1,2]],"datetimes":[]}"#,
            None,
        );
        assert!(e.contains("datetimes"), "{e}");
        let e = field(
            r#"{"type":"MovingPoint","coordinates":[[1,2]],"datetimes":["2026-01-01T00:00:00Z"],"interpolation":"Step"}"#,
            None,
        );
        assert!(e.contains("interpolation"), "{e}");
        // A crs that is neither a name nor a Name object is quoted cut short.
        let e = field(
            &format!(
                r#"{{"type":"MovingPoint","coordinates":[[1,2]],"datetimes":["2026-01-01T00:00:00Z"],"crs":[{}1]}}"#,
                "1,".repeat(100_000)
            ),
            None,
        );
        assert!(e.contains("crs") && e.contains("…") && e.len() < 500, "{e}");
        // Not JSON: says why (a number out of range), not "unknown field `type`".
        let e = field(
            r#"{"type":"MovingPoint","coordinates":[[1e309,2]],"datetimes":["2026-01-01T00:00:00Z"]}"#,
            None,
        );
        assert!(
            e.contains("body") && e.contains("out of range") && !e.contains("unknown field"),
            "{e}"
        );
        let e = field(
            r#"{"type":"MovingPoint","coordinates":[[1,2]],"datetimes":["2026-01-01T00:00:00Z"],"crs":"EPSG:3857"}"#,
            Some(Crs::Geodetic),
        );
        assert!(e.contains("422") || e.contains("UNPROCESSABLE"), "{e}");
    }
}

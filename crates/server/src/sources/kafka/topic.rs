//! Topic patterns (`--kafka-topic`): Kafka topic names are letters,
//! digits, `.`, `_` and `-` (no `/`), so a pattern's levels are separated
//! by `.`: each a literal or one of the placeholders `{cid}`, `{fid}`,
//! `{pname}`, which name the temporal property a record is for. The
//! subscription is a regular expression (librdkafka's `^…`) matching
//! every topic of the pattern, so topics created later are read too.

use super::super::broker::topic::{
    Level, Part, PatternError, Route, check_placeholders, route_levels,
};

/// The MQTT tier's `mfapi/{cid}/{fid}/{pname}`, with Kafka's separator.
pub(crate) const DEFAULT: &str = "mfapi.{cid}.{fid}.{pname}";

/// The flag that gives the patterns.
pub(crate) const FLAG: &str = "--kafka-topic";

/// The most patterns `--kafka-topic` takes.
pub(crate) const MAX_PATTERNS: usize = 64;

/// Kafka's longest topic name.
const MAX_TOPIC: usize = 249;

/// One pattern, checked.
#[derive(Debug, Clone)]
pub(crate) struct Pattern {
    text: String,
    levels: Vec<Part>,
}

/// A level of a topic name: what Kafka allows but the separator.
fn is_level(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl Pattern {
    /// Checks `text`: each of `{cid}`, `{fid}`, `{pname}` exactly once, each
    /// a whole level; literal levels of letters, digits, `_` and `-`.
    pub(crate) fn parse(text: &str) -> Result<Pattern, PatternError> {
        let hint = "give levels separated by '.', with {cid}, {fid} and {pname} each once as a \
                    whole level and literals of letters, digits, '_' and '-', such as \
                    mfapi.{cid}.{fid}.{pname}";
        if text.len() > MAX_TOPIC {
            return Err(PatternError::TooLong {
                flag: FLAG,
                text: text.to_owned(),
                max: MAX_TOPIC,
                what: "Kafka's longest topic name",
            });
        }
        let mut levels = Vec::new();
        for level in text.split('.') {
            if let Some(placeholder) = Level::placeholder(level) {
                levels.push(Part::Placeholder(placeholder));
                continue;
            }
            levels.push(match level {
                "" => {
                    return Err(PatternError::EmptyLevel {
                        flag: FLAG,
                        text: text.to_owned(),
                        hint,
                    });
                }
                _ if !is_level(level) => {
                    return Err(PatternError::BadLevel {
                        flag: FLAG,
                        text: text.to_owned(),
                        level: level.to_owned(),
                        rule: "",
                        hint,
                    });
                }
                _ => Part::Literal(level.to_owned()),
            });
        }
        check_placeholders(&levels, FLAG, text, hint)?;
        Ok(Pattern {
            text: text.to_owned(),
            levels,
        })
    }

    /// The pattern as given.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// The subscription: a regular expression (librdkafka's `^` prefix)
    /// matching the pattern's topics.
    pub(crate) fn regex(&self) -> String {
        let levels: Vec<&str> = self
            .levels
            .iter()
            .map(|l| match l {
                Part::Placeholder(_) => "[A-Za-z0-9_-]+",
                // Letters, digits, '_' and '-' only: nothing to escape.
                Part::Literal(literal) => literal.as_str(),
            })
            .collect();
        format!("^{}$", levels.join("\\."))
    }

    /// The property `topic` names, if it matches.
    fn route(&self, topic: &str) -> Option<Route> {
        route_levels(&self.levels, topic.split('.'), is_level)
    }
}

/// Where `topic` goes: the first of `patterns` it matches.
pub(crate) fn route(patterns: &[Pattern], topic: &str) -> Option<Route> {
    patterns.iter().find_map(|p| p.route(topic))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mfstream_model::PropertyPath;

    fn key(c: &str, f: &str, p: &str) -> PropertyPath {
        PropertyPath {
            collection: c.into(),
            feature: f.into(),
            property: p.into(),
        }
    }

    #[test]
    fn the_default_pattern_routes_dotted_topics_and_its_regex_matches_them_alone() {
        let p = Pattern::parse(DEFAULT).unwrap();
        assert_eq!(
            p.regex(),
            r"^mfapi\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$"
        );
        assert_eq!(
            route(std::slice::from_ref(&p), "mfapi.ships.s-1.speed"),
            Some(Route::Property(key("ships", "s-1", "speed")))
        );
        assert_eq!(
            route(std::slice::from_ref(&p), "mfapi.ships.s1.tgsequence"),
            Some(Route::Positions(key("ships", "s1", "tgsequence")))
        );
        for other in [
            "mfapi.ships.s1",
            "mfapi.ships.s1.speed.x",
            "other.a.b.c",
            "mfapi..b.c",
        ] {
            assert_eq!(route(std::slice::from_ref(&p), other), None, "{other}");
        }
        let custom = Pattern::parse("fleet.{fid}.v1.{pname}.{cid}").unwrap();
        assert_eq!(
            route(&[custom], "fleet.s1.v1.speed.ships"),
            Some(Route::Property(key("ships", "s1", "speed")))
        );
    }

    #[test]
    fn bad_patterns_name_the_fault_and_the_form() {
        for (bad, says) in [
            ("mfapi/{cid}/{fid}/{pname}", "neither a placeholder"),
            ("mfapi.{cid}.{fid}", "0 {pname}"),
            ("mfapi.{cid}.{cid}.{fid}.{pname}", "2 {cid}"),
            ("mfapi..{cid}.{fid}.{pname}", "empty level"),
            ("mf api.{cid}.{fid}.{pname}", "neither a placeholder"),
        ] {
            let err = Pattern::parse(bad).unwrap_err().to_string();
            assert!(
                err.contains(says) && err.contains("mfapi.{cid}.{fid}.{pname}"),
                "{bad}: {err}"
            );
        }
        assert!(
            Pattern::parse(&"a".repeat(250))
                .unwrap_err()
                .to_string()
                .contains("249")
        );
    }
}

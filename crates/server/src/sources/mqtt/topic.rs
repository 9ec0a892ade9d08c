//! Topic patterns (`--mqtt-topic`): MQTT topic levels, each a literal or
//! one of the placeholders `{cid}`, `{fid}`, `{pname}`, which name the
//! temporal property a message is for. The subscription filter puts `+`
//! where a placeholder is.

use crate::request::id_fault;
use crate::sources::broker::topic::{
    Level, Part, PatternError, Route, check_placeholders, route_levels,
};

/// The Go tier's pattern: devices that published to it keep working.
pub(crate) const DEFAULT: &str = "mfapi/{cid}/{fid}/{pname}";

/// The flag that gives the patterns.
pub(crate) const FLAG: &str = "--mqtt-topic";

/// The most patterns `--mqtt-topic` takes.
pub(crate) const MAX_PATTERNS: usize = 64;

/// One pattern, checked.
#[derive(Debug, Clone)]
pub(crate) struct Pattern {
    text: String,
    levels: Vec<Part>,
}

impl Pattern {
    /// Checks `text`: each of `{cid}`, `{fid}`, `{pname}` exactly once, each
    /// a whole level, and no MQTT wildcard (`+`, `#`) or empty level.
    pub(crate) fn parse(text: &str) -> Result<Pattern, PatternError> {
        let hint = "give levels separated by '/', with {cid}, {fid} and {pname} each once as a \
                    whole level, such as mfapi/{cid}/{fid}/{pname}";
        let mut levels = Vec::new();
        for level in text.split('/') {
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
                _ if level.contains(['+', '#', '{', '}', '\0']) => {
                    return Err(PatternError::BadLevel {
                        flag: FLAG,
                        text: text.to_owned(),
                        level: level.to_owned(),
                        rule: " (no +, #, braces)",
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

    /// The subscription filter: `+` for each placeholder.
    pub(crate) fn filter(&self) -> String {
        let levels: Vec<&str> = self
            .levels
            .iter()
            .map(|l| match l {
                Part::Placeholder(_) => "+",
                Part::Literal(literal) => literal.as_str(),
            })
            .collect();
        levels.join("/")
    }

    /// The property `topic` names, if it matches; an empty id, or one a
    /// path could not carry (over the path limit, `.`, `..`), does not.
    fn route(&self, topic: &str) -> Option<Route> {
        route_levels(&self.levels, topic.split('/'), |part| {
            !part.is_empty() && id_fault(part).is_none()
        })
    }
}

/// Where `topic` goes: the first of `patterns` it matches.
pub(crate) fn route(patterns: &[Pattern], topic: &str) -> Option<Route> {
    patterns.iter().find_map(|p| p.route(topic))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::MAX_ID;
    use mfstream_model::PropertyPath;

    fn key(c: &str, f: &str, p: &str) -> PropertyPath {
        PropertyPath {
            collection: c.into(),
            feature: f.into(),
            property: p.into(),
        }
    }

    #[test]
    fn the_default_pattern_is_the_go_tiers_and_subscribes_to_three_wildcards() {
        let p = Pattern::parse(DEFAULT).unwrap();
        assert_eq!(p.filter(), "mfapi/+/+/+");
        let ps = [p];
        assert_eq!(
            route(&ps, "mfapi/ships/s1/speed"),
            Some(Route::Property(key("ships", "s1", "speed")))
        );
        assert_eq!(
            route(&ps, "mfapi/ships/s1/tgsequence"),
            Some(Route::Positions(key("ships", "s1", "tgsequence")))
        );
        for bad in [
            "mfapi/ships/s1",
            "mfapi/ships/s1/speed/x",
            "other/ships/s1/speed",
            "mfapi//s1/speed",
            // Dot-segments: no link could name them.
            "mfapi/./s1/speed",
            "mfapi/ships/../speed",
        ] {
            assert_eq!(route(&ps, bad), None, "{bad}");
        }
        let long = format!("mfapi/{}/s1/speed", "c".repeat(MAX_ID + 1));
        assert_eq!(route(&ps, &long), None);
    }

    #[test]
    fn placeholders_may_be_anywhere_and_the_first_matching_pattern_wins() {
        let ps = [
            Pattern::parse("fleet/{fid}/{pname}/of/{cid}").unwrap(),
            Pattern::parse("{cid}/{fid}/{pname}").unwrap(),
        ];
        assert_eq!(ps[0].filter(), "fleet/+/+/of/+");
        assert_eq!(
            route(&ps, "fleet/s1/speed/of/ships"),
            Some(Route::Property(key("ships", "s1", "speed")))
        );
        assert_eq!(
            route(&ps, "a/b/c"),
            Some(Route::Property(key("a", "b", "c")))
        );
    }

    #[test]
    fn a_pattern_without_each_placeholder_once_or_with_wildcards_is_refused_saying_why() {
        for (bad, says) in [
            ("mfapi/{cid}/{fid}", "0 {pname}"),
            ("{cid}/{cid}/{fid}/{pname}", "2 {cid}"),
            ("mfapi/+/{cid}/{fid}/{pname}", "\"+\""),
            ("mfapi/#", "\"#\""),
            ("mfapi//{cid}/{fid}/{pname}", "empty level"),
            ("x{cid}/{fid}/{pname}", "\"x{cid}\""),
        ] {
            let err = Pattern::parse(bad).unwrap_err().to_string();
            assert!(
                err.contains(says) && err.contains("mfapi/{cid}/{fid}/{pname}"),
                "{bad}: {err}"
            );
        }
    }
}

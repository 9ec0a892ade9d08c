//! Topic patterns, what the brokers' patterns share: levels, each a literal or
//! one of the placeholders `{cid}`, `{fid}`, `{pname}`, which name the
//! temporal property a message is for. Each broker's patterns (MQTT's
//! `--mqtt-topic`, Kafka's `--kafka-topic`) differ in the separator and in
//! what a literal level may hold; they parse their levels, and route a
//! topic, with these.

use mfstream_model::PropertyPath;

/// The property name reserved for a feature's positions on a pattern
/// (`mfapi/{cid}/{fid}/tgsequence`): the moving-point ingest takes them.
pub(crate) const POSITIONS: &str = "tgsequence";

/// A placeholder level of a topic pattern: the part of the property it
/// names. MQTT's and Kafka's patterns share it (and [`check_placeholders`]
/// and [`route_levels`]); they differ in the separator and in what a level
/// may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    Collection,
    Feature,
    Property,
}

impl Level {
    /// The placeholder `text` is, if it is one.
    pub(crate) fn placeholder(text: &str) -> Option<Level> {
        match text {
            "{cid}" => Some(Level::Collection),
            "{fid}" => Some(Level::Feature),
            "{pname}" => Some(Level::Property),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Level::Collection => "{cid}",
            Level::Feature => "{fid}",
            Level::Property => "{pname}",
        }
    }
}

/// A level of a topic pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Part {
    /// A level a topic has as it is.
    Literal(String),
    /// A placeholder: an id, which names that part of the property.
    Placeholder(Level),
}

/// Why a broker's topic patterns (`flag`'s) are refused. Each names the
/// flag, quotes the pattern, and (but [`PatternError::TooMany`]) ends with
/// `hint`, how to write one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PatternError {
    /// More patterns than are taken.
    #[error("{count} {flag} patterns; at most {max} are taken")]
    TooMany {
        flag: &'static str,
        count: usize,
        max: usize,
    },
    /// A pattern longer than the broker's longest topic (`what` says
    /// whose).
    #[cfg_attr(not(feature = "kafka"), allow(dead_code))]
    #[error("{flag} {text:?} is over {max} bytes, {what}")]
    TooLong {
        flag: &'static str,
        text: String,
        max: usize,
        what: &'static str,
    },
    /// An empty level.
    #[error("{flag} {text:?} has an empty level: {hint}")]
    EmptyLevel {
        flag: &'static str,
        text: String,
        hint: &'static str,
    },
    /// A level that is neither a placeholder nor a literal; `rule` says
    /// what a literal may not hold, when the hint does not.
    #[error(
        "{flag} {text:?}: the level {level:?} is neither a placeholder nor a literal{rule}: {hint}"
    )]
    BadLevel {
        flag: &'static str,
        text: String,
        level: String,
        rule: &'static str,
        hint: &'static str,
    },
    /// A placeholder missing, or there more than once.
    #[error("{flag} {text:?} has {count} {}: {hint}", placeholder.name())]
    Placeholders {
        flag: &'static str,
        text: String,
        count: usize,
        placeholder: Level,
        hint: &'static str,
    },
}

/// The `flag`'s patterns, each parsed by `parse`: at most `max`, and
/// `default` when none is given.
pub(crate) fn parse_patterns<P>(
    topics: &[String],
    flag: &'static str,
    max: usize,
    default: &str,
    parse: impl Fn(&str) -> Result<P, PatternError>,
) -> Result<Vec<P>, PatternError> {
    if topics.len() > max {
        return Err(PatternError::TooMany {
            flag,
            count: topics.len(),
            max,
        });
    }
    if topics.is_empty() {
        return Ok(vec![parse(default)?]);
    }
    topics.iter().map(|t| parse(t)).collect()
}

/// Each placeholder exactly once among `levels`; else the error, for the
/// `flag`'s pattern `text`, ending with `hint`.
pub(crate) fn check_placeholders(
    levels: &[Part],
    flag: &'static str,
    text: &str,
    hint: &'static str,
) -> Result<(), PatternError> {
    for wanted in [Level::Collection, Level::Feature, Level::Property] {
        let n = levels
            .iter()
            .filter(|l| **l == Part::Placeholder(wanted))
            .count();
        if n != 1 {
            return Err(PatternError::Placeholders {
                flag,
                text: text.to_owned(),
                count: n,
                placeholder: wanted,
                hint,
            });
        }
    }
    Ok(())
}

/// The property the topic's `parts` name under `levels`, if they match:
/// each literal level equal, each placeholder's part an id `valid` takes,
/// no part left over.
pub(crate) fn route_levels<'a>(
    levels: &[Part],
    mut parts: impl Iterator<Item = &'a str>,
    valid: impl Fn(&str) -> bool,
) -> Option<Route> {
    let mut key = PropertyPath {
        collection: String::new(),
        feature: String::new(),
        property: String::new(),
    };
    for level in levels {
        let part = parts.next()?;
        let slot = match level {
            Part::Literal(literal) if literal == part => continue,
            Part::Literal(_) => return None,
            Part::Placeholder(Level::Collection) => &mut key.collection,
            Part::Placeholder(Level::Feature) => &mut key.feature,
            Part::Placeholder(Level::Property) => &mut key.property,
        };
        if !valid(part) {
            return None;
        }
        *slot = part.to_owned();
    }
    if parts.next().is_some() {
        return None;
    }
    Some(if key.property == POSITIONS {
        Route::Positions(key)
    } else {
        Route::Property(key)
    })
}

/// Where a message goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// A temporal property's instants.
    Property(PropertyPath),
    /// A feature's positions: `{pname}` is [`POSITIONS`]; `key.property`
    /// holds it.
    Positions(PropertyPath),
}

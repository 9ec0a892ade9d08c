//! Where an option's value came from, so that a message about it can say.
//!
//! An option reaches mfstream from a command-line flag, an environment
//! variable, a key of `engines.toml`, the program that embeds the library,
//! or its default. Each resolved option is a [`Value`]: the value with its
//! [`Origin`] (cargo's `Value<T>` with its `Definition`). A library error
//! names the option the way its origin does: `--max-query-state` when the
//! command line set it (or left it at its default), `MFSTREAM_TOKEN` when
//! the environment did, `no_progress_timeout_ms of engine "spark"
//! (engines.toml:12)` for a file's key, and the library's own field name
//! when the embedding program set it, never a flag that program never had.
//!
//! ```
//! use mfstream_model::origin::{Origin, Value};
//!
//! let flag = Value::new(1_u64 << 30, Origin::flag("--max-query-state"));
//! assert_eq!(flag.origin.to_string(), "from --max-query-state");
//! assert_eq!(flag.origin.name("max_query_state"), "--max-query-state");
//!
//! let set: Value<u64> = (1 << 30).into();
//! assert_eq!(set.origin.to_string(), "set by the embedding program");
//! assert_eq!(set.origin.name("max_query_state"), "the embedding program's max_query_state");
//! ```

use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Origin {
    /// A command-line flag (`--max-query-state`): given, or the default the
    /// command line shows for it, which the flag changes.
    Flag(Cow<'static, str>),
    /// An environment variable (`MFSTREAM_TOKEN`).
    Env(Cow<'static, str>),
    /// A key of a file's table, or its default when the table leaves the
    /// key unset.
    File(Box<FileKey>),
    /// The program that embeds the library set it (or built the options
    /// with the library's defaults and changed nothing).
    #[default]
    Program,
    /// The library's default: nothing set it.
    Default,
}

/// A key of a table in a file: `no_progress_timeout_ms` of `engine
/// "spark"` in `engines.toml`, at a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileKey {
    /// The file, as messages name it.
    pub file: String,
    /// The 1-based line of the key, or of the table when the key is unset.
    pub line: usize,
    /// The table, for people: `engine "spark"`.
    pub table: String,
    /// The key.
    pub key: &'static str,
    /// Whether the table sets the key; `false`: the value is the default.
    pub set: bool,
}

impl Origin {
    /// A command-line flag, such as `--max-query-state`.
    pub fn flag(flag: impl Into<Cow<'static, str>>) -> Origin {
        Origin::Flag(flag.into())
    }

    /// An environment variable, such as `MFSTREAM_TOKEN`.
    pub fn env(var: impl Into<Cow<'static, str>>) -> Origin {
        Origin::Env(var.into())
    }

    /// How a message names the option this value sets, `field` being the
    /// library's name for it (`max_query_state`): the flag, the variable,
    /// the file's key with its place, or the field of the embedding
    /// program (a message says "raise {name}").
    pub fn name(&self, field: &str) -> String {
        match self {
            Origin::Flag(flag) => flag.to_string(),
            Origin::Env(var) => var.to_string(),
            Origin::File(key) => {
                let unset = if key.set { "" } else { ", unset" };
                format!(
                    "{} of {} ({}:{}{unset})",
                    key.key, key.table, key.file, key.line
                )
            }
            Origin::Program => format!("the embedding program's {field}"),
            Origin::Default => format!("the default {field}"),
        }
    }
}

/// "from --max-query-state", "from MFSTREAM_TOKEN", "from engines.toml:12
/// (engine "spark", key no_progress_timeout_ms)", "set by the embedding
/// program", "default".
impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Flag(flag) => write!(f, "from {flag}"),
            Origin::Env(var) => write!(f, "from {var}"),
            Origin::File(key) if key.set => write!(
                f,
                "from {}:{} ({}, key {})",
                key.file, key.line, key.table, key.key
            ),
            Origin::File(key) => write!(
                f,
                "default: {} at {}:{} sets no {}",
                key.table, key.file, key.line, key.key
            ),
            Origin::Program => f.write_str("set by the embedding program"),
            Origin::Default => f.write_str("default"),
        }
    }
}

/// A resolved option: its value and where it came from.
///
/// It reads as its value (`*limit`, `limit.len()`); a plain value converts
/// into one set by the embedding program (`options.max_in_flight =
/// 100.into()`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Value<T> {
    /// The value.
    pub value: T,
    /// Where it came from.
    pub origin: Origin,
}

impl<T> Value<T> {
    /// `value`, from `origin`.
    pub fn new(value: T, origin: Origin) -> Value<T> {
        Value { value, origin }
    }

    /// `value`, the library's default.
    pub fn default_of(value: T) -> Value<T> {
        Value::new(value, Origin::Default)
    }

    /// The same origin with the value mapped (milliseconds into a
    /// `Duration`, …).
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Value<U> {
        Value::new(f(self.value), self.origin)
    }

    /// How a message names this option (see [`Origin::name`]).
    pub fn name(&self, field: &str) -> String {
        self.origin.name(field)
    }
}

impl<T> From<T> for Value<T> {
    /// A value the embedding program set.
    fn from(value: T) -> Value<T> {
        Value::new(value, Origin::Program)
    }
}

impl<T> Deref for Value<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_origin_says_where_in_its_own_words() {
        let file = |set| {
            Origin::File(Box::new(FileKey {
                file: "engines.toml".into(),
                line: 12,
                table: "engine \"spark\"".into(),
                key: "no_progress_timeout_ms",
                set,
            }))
        };
        let said: Vec<(String, String)> = [
            Origin::flag("--max-query-state"),
            Origin::env("MFSTREAM_FOO"),
            file(true),
            file(false),
            Origin::Program,
            Origin::Default,
        ]
        .iter()
        .map(|o| (o.to_string(), o.name("max_query_state")))
        .collect();
        let expected = [
            ("from --max-query-state", "--max-query-state"),
            ("from MFSTREAM_FOO", "MFSTREAM_FOO"),
            (
                "from engines.toml:12 (engine \"spark\", key no_progress_timeout_ms)",
                "no_progress_timeout_ms of engine \"spark\" (engines.toml:12)",
            ),
            (
                "default: engine \"spark\" at engines.toml:12 sets no no_progress_timeout_ms",
                "no_progress_timeout_ms of engine \"spark\" (engines.toml:12, unset)",
            ),
            (
                "set by the embedding program",
                "the embedding program's max_query_state",
            ),
            ("default", "the default max_query_state"),
        ];
        for ((display, name), (want_display, want_name)) in said.iter().zip(expected) {
            assert_eq!(display, want_display);
            assert_eq!(name, want_name);
        }
    }

    #[test]
    fn a_plain_value_is_the_embedding_programs() {
        let value: Value<u32> = 7.into();
        assert_eq!(*value, 7);
        assert_eq!(value.origin, Origin::Program);
        assert_eq!(value.map(u64::from).value, 7_u64);
    }
}

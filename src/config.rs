//! `engines.toml`: parsed strictly, validated, resolved.
//!
//! The file defines the bridge engines of the registry; the built-in `local`
//! engine needs no entry. The whole schema:
//!
//! ```toml
//! default = "local"                    # optional; "local" or an [[engine]] name
//!
//! [[engine]]
//! name = "flink"                       # required; [a-z][a-z0-9_-]{0,62}, not "local"
//! description = "Apache Flink DataStream bridge job"   # optional, default ""
//! cmd_env = "MFAPI_FLINK_CMD"          # required; the variable holding the job command prefix
//! libpath_env = "MFAPI_FLINK_LIBPATH"  # optional; the variable holding a library path
//! framing = "value"                    # optional; "value" (default) or "json"
//! stop_grace_ms = 5000                 # optional, default 5000, 0 to 600000
//! max_in_flight = 65536                # optional, default 65536, 1 to 16777216
//! no_progress_timeout_ms = 30000       # optional, off when absent, 1 to 86400000
//! env = { JAVA_OPTS = "-Xmx512m" }     # optional; extra environment for the job
//!
//! [engine.restart]                     # optional; restarts are off when absent
//! max = 3                              # required here, 1 to 1000
//! backoff_ms = 100                     # optional, default 100, 1 to 600000
//! backoff_max_ms = 10000               # optional, default 10000, at least backoff_ms
//! ```
//!
//! Environment variable names (`cmd_env`, `libpath_env`, the keys of `env`)
//! are `[A-Za-z_][A-Za-z0-9_]*`. `env` may not set `LD_LIBRARY_PATH`,
//! `MFSTREAM_QUERY` or `MFSTREAM_FRAMING`: mfstream sets those for each job.
//! `restart` needs `framing = "value"`: with json framing the records a
//! crashed job had not answered cannot be replayed.
//!
//! Reading is in two stages. Serde structs mirror the file, rejecting unknown
//! keys and wrong types and keeping the span of every value that is checked
//! later; then validation turns them into [`EngineDef`]s, collecting every
//! problem of the file rather than stopping at the first. Each problem is
//! reported the way cargo reports its config: `file:line:column: message`,
//! with the offending line and a caret under the value.
//!
//! The environment is read only by [`EngineDef::resolve`], when an engine is
//! built: a file is valid whether or not its variables are set, and an engine
//! whose command variable is unset is reported as not ready, not as a bad file.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::ops::{Range, RangeInclusive};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;
use toml::de::{DeTable, DeValue, ValueDeserializer};

use crate::bridge::{BridgeOptions, Framing, RestartPolicy};
use crate::local::LOCAL;

/// The name used in messages for text parsed without a path.
const DEFAULT_FILE_NAME: &str = "engines.toml";

/// Variables mfstream sets for every job, so an entry may not.
const RESERVED_ENV: [&str; 3] = ["LD_LIBRARY_PATH", "MFSTREAM_QUERY", "MFSTREAM_FRAMING"];

/// A validated `engines.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// The file it was read from, if any; relative paths in it are relative
    /// to this file's folder.
    pub path: Option<PathBuf>,
    /// The file's `default` engine name, if it sets one.
    pub default: Option<String>,
    /// The `[[engine]]` entries, in file order.
    pub engines: Vec<EngineDef>,
}

impl Config {
    /// Reads and validates the file at `path`.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError {
            file: path.display().to_string(),
            kind: ErrorKind::Io(error),
        })?;
        Config::parse(&text, Some(path))
    }

    /// Validates `text`, the contents of an `engines.toml`.
    ///
    /// `path` names the file in messages (`engines.toml` when `None`) and is
    /// kept in [`Config::path`].
    ///
    /// ```
    /// let text = "[[engine]]\nname = \"flink\"\ncmd_env = \"MFAPI_FLINK_CMD\"\n";
    /// let config = mfstream::Config::parse(text, None).unwrap();
    /// assert_eq!(config.engines[0].name, "flink");
    ///
    /// let error = mfstream::Config::parse("[[engine]]\nname = 7\n", None).unwrap_err();
    /// assert!(error.to_string().starts_with("engines.toml:2:8: invalid type: integer `7`"));
    /// ```
    pub fn parse(text: &str, path: Option<&Path>) -> Result<Config, ConfigError> {
        let file = path.map_or_else(|| DEFAULT_FILE_NAME.to_owned(), |p| p.display().to_string());
        let mut problems = Problems {
            text,
            file: &file,
            list: Vec::new(),
        };
        let config = read(text, &mut problems).map(|raw| validate(raw, &mut problems));
        match config {
            Some(mut config) if problems.list.is_empty() => {
                config.path = path.map(Path::to_path_buf);
                Ok(config)
            }
            _ => {
                let mut list = problems.list;
                list.sort_by_key(|problem| problem.offset);
                Err(ConfigError {
                    file,
                    kind: ErrorKind::Invalid(list),
                })
            }
        }
    }
}

/// One `[[engine]]` entry, validated; the environment is not read yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineDef {
    /// The registry name.
    pub name: String,
    /// A line for people.
    pub description: String,
    /// The variable holding the job command prefix.
    pub cmd_env: String,
    /// The variable holding a library path for the job, if any.
    pub libpath_env: Option<String>,
    /// How records are framed.
    pub framing: Framing,
    /// The grace period of a stopping job.
    pub stop_grace: Duration,
    /// Records sent but not yet answered, at most.
    pub max_in_flight: usize,
    /// Fail a query whose job holds unanswered records this long.
    pub no_progress_timeout: Option<Duration>,
    /// Restarting a job that dies; off when `None`.
    pub restart: Option<RestartPolicy>,
    /// Extra environment for the job, sorted by name.
    pub env: Vec<(String, String)>,
    /// The 1-based line of the entry's `name`, for messages.
    pub line: usize,
}

impl EngineDef {
    /// The options of a bridge engine, with the command and library path read
    /// through `env` (usually `&|name| std::env::var(name).ok()`).
    ///
    /// `Err` says why the engine is not ready, naming the variable: it is
    /// unset or empty, or its value does not split into words.
    pub fn resolve(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<BridgeOptions, String> {
        let var = &self.cmd_env;
        let command = match env(var) {
            None => return Err(format!("{var} is not set (the bridge-job command prefix)")),
            Some(value) if value.trim().is_empty() => {
                return Err(format!("{var} is empty (the bridge-job command prefix)"));
            }
            Some(value) => value,
        };
        let argv = shell_words::split(&command)
            .map_err(|e| format!("{var} does not split into words ({e}): {command:?}"))?;
        if argv.first().is_none_or(|program| program.is_empty()) {
            return Err(format!("{var} names no program: {command:?}"));
        }
        let libpath = self
            .libpath_env
            .as_deref()
            .and_then(env)
            .filter(|path| !path.trim().is_empty());
        Ok(BridgeOptions {
            name: self.name.clone(),
            description: self.description.clone(),
            argv,
            libpath,
            framing: self.framing,
            stop_grace: self.stop_grace,
            max_in_flight: self.max_in_flight,
            no_progress_timeout: self.no_progress_timeout,
            restart: self.restart.clone(),
            env: self.env.clone(),
        })
    }
}

/// Why `engines.toml` was refused: it could not be read, or it has problems,
/// each printed as its own block with the offending line.
#[derive(Debug, thiserror::Error)]
pub struct ConfigError {
    file: String,
    kind: ErrorKind,
}

#[derive(Debug)]
enum ErrorKind {
    Io(io::Error),
    Invalid(Vec<ConfigProblem>),
}

impl ConfigError {
    /// The problems found in the file, in file order; empty when the file
    /// could not be read.
    pub fn problems(&self) -> &[ConfigProblem] {
        match &self.kind {
            ErrorKind::Io(_) => &[],
            ErrorKind::Invalid(list) => list,
        }
    }

    /// The error that kept the file from being read, if that was the trouble.
    pub fn io_error(&self) -> Option<&io::Error> {
        match &self.kind {
            ErrorKind::Io(error) => Some(error),
            ErrorKind::Invalid(_) => None,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::Io(error) => write!(f, "could not read {}: {error}", self.file),
            ErrorKind::Invalid(list) => {
                for (i, problem) in list.iter().enumerate() {
                    if i > 0 {
                        f.write_str("\n\n")?;
                    }
                    problem.render(&self.file, f)?;
                }
                Ok(())
            }
        }
    }
}

/// One problem in `engines.toml`, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    offset: usize,
    line: usize,
    column: usize,
    message: String,
    source_line: String,
    /// What goes under `source_line`: the indentation, then the carets.
    marker: String,
}

impl ConfigProblem {
    /// The 1-based line.
    pub fn line(&self) -> usize {
        self.line
    }

    /// The 1-based column, in characters.
    pub fn column(&self) -> usize {
        self.column
    }

    /// What is wrong, without the position.
    pub fn message(&self) -> &str {
        &self.message
    }

    fn render(&self, file: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gutter = " ".repeat(self.line.to_string().len());
        writeln!(f, "{file}:{}:{}: {}", self.line, self.column, self.message)?;
        writeln!(f, "{gutter} |")?;
        writeln!(f, "{} | {}", self.line, self.source_line)?;
        write!(f, "{gutter} | {}", self.marker)
    }
}

/// The problems found so far, with the text they point into.
struct Problems<'a> {
    text: &'a str,
    file: &'a str,
    list: Vec<ConfigProblem>,
}

impl Problems<'_> {
    fn at(&mut self, span: Range<usize>, message: impl Into<String>) {
        let start = span.start.min(self.text.len());
        let line_start = self.text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = self.text[start..]
            .find('\n')
            .map_or(self.text.len(), |i| start + i);
        let source_line = self.text[line_start..line_end].trim_end_matches('\r');
        let before = &self.text[line_start..start];
        // Tabs are kept in the indentation so the carets line up under them.
        let indent: String = before
            .chars()
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        let width = self.text[start..span.end.clamp(start, line_end)]
            .chars()
            .count();
        self.list.push(ConfigProblem {
            offset: start,
            line: self.line_of(start),
            column: before.chars().count() + 1,
            message: message.into(),
            source_line: source_line.to_owned(),
            marker: indent + &"^".repeat(width.max(1)),
        });
    }

    /// The 1-based line of `offset`.
    fn line_of(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())]
            .matches('\n')
            .count()
            + 1
    }

    /// `file:line` of `offset`, for pointing at a second place.
    fn place(&self, offset: usize) -> String {
        format!("{}:{}", self.file, self.line_of(offset))
    }

    /// A syntax or type error from `toml`, with the key it is about when
    /// `table` knows it (`toml` tracks the key but does not expose it).
    fn toml(&mut self, error: &toml::de::Error, table: &DeTable<'_>, fallback: Range<usize>) {
        let span = error.span().unwrap_or(fallback);
        let mut message = error.message().to_owned();
        if let Some(key) = key_at(table, span.start) {
            message = format!("{message} for key `{key}`");
            if key == "engine" {
                message.push_str(": write each entry under an [[engine]] header");
            }
        }
        self.at(span, message);
    }
}

/// The dotted key whose value holds `offset`, if any.
fn key_at(table: &DeTable<'_>, offset: usize) -> Option<String> {
    table.iter().find_map(|(key, value)| {
        // A `[engine.restart]` value's span is its header, not its contents,
        // so nested tables are searched whether or not they contain `offset`.
        if let DeValue::Table(inner) = value.get_ref() {
            if let Some(rest) = key_at(inner, offset) {
                return Some(format!("{}.{rest}", key.get_ref()));
            }
        }
        value
            .span()
            .contains(&offset)
            .then(|| key.get_ref().to_string())
    })
}

/// Stage one: the file as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    default: Option<Spanned<String>>,
    /// Read one entry at a time in `read`, so that a type error in one entry
    /// does not hide the problems of the others.
    #[serde(default)]
    #[expect(dead_code, reason = "only checked to be an array here")]
    engine: Vec<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "an [[engine]] table")]
struct RawEngine {
    name: Spanned<String>,
    #[serde(default)]
    description: String,
    cmd_env: Spanned<String>,
    libpath_env: Option<Spanned<String>>,
    #[serde(default)]
    framing: Framing,
    stop_grace_ms: Option<Spanned<u64>>,
    max_in_flight: Option<Spanned<u64>>,
    no_progress_timeout_ms: Option<Spanned<u64>>,
    #[serde(default)]
    env: BTreeMap<Spanned<String>, Spanned<String>>,
    restart: Option<Spanned<RawRestart>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "an [engine.restart] table")]
struct RawRestart {
    max: Spanned<u64>,
    backoff_ms: Option<Spanned<u64>>,
    backoff_max_ms: Option<Spanned<u64>>,
}

/// What stage one yields: `default` is `None` when the top level did not
/// deserialize, and an entry is `None` when it did not; the problem is recorded.
struct Raw {
    default: Option<Spanned<String>>,
    entries: Vec<Option<RawEngine>>,
}

/// Stage one, or `None` when the text is not TOML.
fn read(text: &str, problems: &mut Problems<'_>) -> Option<Raw> {
    let (root, errors) = DeTable::parse_recoverable(text);
    if !errors.is_empty() {
        let mut errors: Vec<_> = errors
            .iter()
            .map(|e| (e.span().unwrap_or(0..0), e))
            .collect();
        errors.sort_by_key(|(span, _)| span.start);
        // Recovery may report a cascade on one line; its first error says it.
        errors.dedup_by_key(|(span, _)| problems.line_of(span.start));
        for (span, error) in errors {
            problems.at(span, error.message());
        }
        return None;
    }
    let entries: Vec<Spanned<DeValue<'_>>> = root
        .get_ref()
        .iter()
        .find(|(key, _)| key.get_ref() == "engine")
        .map_or_else(Vec::new, |(_, value)| match value.get_ref() {
            DeValue::Array(array) => array.to_vec(),
            _ => Vec::new(),
        });
    let root_span = root.span();
    let root = root.into_inner();
    let default = RawFile::deserialize(ValueDeserializer::from(Spanned::new(
        root_span.clone(),
        DeValue::Table(root.clone()),
    )))
    .map_err(|e| problems.toml(&e, &root, root_span))
    .ok()
    .and_then(|top| top.default);
    let entries = entries
        .into_iter()
        .map(|entry| {
            let span = entry.span();
            let table = match entry.get_ref() {
                DeValue::Table(table) => table.clone(),
                _ => DeTable::default(),
            };
            RawEngine::deserialize(ValueDeserializer::from(entry))
                .map_err(|e| problems.toml(&e, &table, span))
                .ok()
        })
        .collect();
    Some(Raw { default, entries })
}

/// Stage two: every entry checked, every problem recorded.
fn validate(Raw { default, entries }: Raw, p: &mut Problems<'_>) -> Config {
    let mut engines = Vec::new();
    // Each name with the offset of its first definition, in file order.
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for raw in entries.iter().flatten() {
        let (name, span) = (raw.name.get_ref(), raw.name.span());
        match seen.iter().find(|(seen, _)| seen == name) {
            Some(&(_, first)) => {
                let first = p.place(first);
                p.at(
                    span,
                    format!("engine {name:?} is defined twice: first at {first}"),
                );
            }
            None => seen.push((name, span.start)),
        }
        engines.push(validate_engine(raw, p));
    }
    // An entry that did not deserialize may be the one `default` names.
    let all_read = entries.iter().all(Option::is_some);
    if let (Some(default), true) = (&default, all_read) {
        let wanted = default.get_ref();
        if wanted != LOCAL && !seen.iter().any(|(name, _)| name == wanted) {
            let known: Vec<String> = std::iter::once(LOCAL)
                .chain(seen.iter().map(|(name, _)| *name))
                .map(|name| format!("{name:?}"))
                .collect();
            let known = known.join(", ");
            let message =
                format!("unknown engine {wanted:?} for key `default`: known engines are {known}");
            p.at(default.span(), message);
        }
    }
    Config {
        path: None,
        default: default.map(Spanned::into_inner),
        engines,
    }
}

fn validate_engine(raw: &RawEngine, p: &mut Problems<'_>) -> EngineDef {
    let name = raw.name.get_ref();
    if name == LOCAL {
        let message = format!(
            "engine name {name:?} is reserved for the built-in engine: choose another name"
        );
        p.at(raw.name.span(), message);
    } else if !is_engine_name(name) {
        let message = format!(
            "invalid engine name {name:?}: use 1 to 63 lowercase letters, digits, '_' or '-', starting with a letter"
        );
        p.at(raw.name.span(), message);
    }
    p.env_name(&raw.cmd_env, "cmd_env");
    if let Some(libpath_env) = &raw.libpath_env {
        p.env_name(libpath_env, "libpath_env");
    }
    for key in raw.env.keys() {
        p.env_name(key, "env");
        let key_name = key.get_ref();
        if RESERVED_ENV.contains(&key_name.as_str()) {
            let hint = match key_name.as_str() {
                "LD_LIBRARY_PATH" => " (use libpath_env to add a library path)",
                _ => "",
            };
            let message =
                format!("`env` may not set {key_name}: mfstream sets it for each job{hint}");
            p.at(key.span(), message);
        }
    }
    let stop_grace = p.ranged(raw.stop_grace_ms.as_ref(), "stop_grace_ms", 0..=600_000);
    let max_in_flight = p.ranged(raw.max_in_flight.as_ref(), "max_in_flight", 1..=16_777_216);
    let no_progress = p.ranged(
        raw.no_progress_timeout_ms.as_ref(),
        "no_progress_timeout_ms",
        1..=86_400_000,
    );
    let restart = raw.restart.as_ref().map(|restart| {
        if raw.framing == Framing::Json {
            p.at(
                restart.span(),
                "restart requires framing = \"value\": with json framing the records a crashed job \
                 had not answered cannot be replayed",
            );
        }
        validate_restart(restart.get_ref(), p)
    });
    EngineDef {
        name: name.clone(),
        description: raw.description.clone(),
        cmd_env: raw.cmd_env.get_ref().clone(),
        libpath_env: raw.libpath_env.as_ref().map(|v| v.get_ref().clone()),
        framing: raw.framing,
        // The defaults are `BridgeOptions::new`'s.
        stop_grace: Duration::from_millis(stop_grace.unwrap_or(5_000)),
        max_in_flight: max_in_flight.map_or(65_536, |n| n as usize),
        no_progress_timeout: no_progress.map(Duration::from_millis),
        restart,
        env: raw
            .env
            .iter()
            .map(|(k, v)| (k.get_ref().clone(), v.get_ref().clone()))
            .collect(),
        line: p.line_of(raw.name.span().start),
    }
}

fn validate_restart(raw: &RawRestart, p: &mut Problems<'_>) -> RestartPolicy {
    let max = p.ranged(Some(&raw.max), "restart.max", 1..=1_000);
    let backoff = p
        .ranged(raw.backoff_ms.as_ref(), "restart.backoff_ms", 1..=600_000)
        .unwrap_or(100);
    let backoff_max = raw
        .backoff_max_ms
        .as_ref()
        .map_or(10_000, |ms| *ms.get_ref());
    if backoff_max < backoff {
        match (&raw.backoff_max_ms, &raw.backoff_ms) {
            (Some(set), _) => p.at(
                set.span(),
                format!(
                    "restart.backoff_max_ms ({backoff_max}) is less than restart.backoff_ms \
                     ({backoff}): raise backoff_max_ms or lower backoff_ms"
                ),
            ),
            (None, backoff_ms) => p.at(
                backoff_ms.as_ref().map_or(0..0, Spanned::span),
                format!(
                    "restart.backoff_ms ({backoff}) is more than the default backoff_max_ms \
                     ({backoff_max}): set backoff_max_ms too"
                ),
            ),
        }
    }
    RestartPolicy {
        max_restarts: max.map_or(1, |n| n as u32),
        backoff: Duration::from_millis(backoff),
        backoff_max: Duration::from_millis(backoff_max),
    }
}

impl Problems<'_> {
    /// The value of an optional integer key when it is set and in `range`.
    fn ranged(
        &mut self,
        value: Option<&Spanned<u64>>,
        key: &str,
        range: RangeInclusive<u64>,
    ) -> Option<u64> {
        let value = value?;
        let n = *value.get_ref();
        if !range.contains(&n) {
            let (low, high) = (range.start(), range.end());
            self.at(
                value.span(),
                format!("value {n} is out of range for key `{key}`: use {low} to {high}"),
            );
            return None;
        }
        Some(n)
    }

    /// Checks that `name` is a portable environment variable name.
    fn env_name(&mut self, name: &Spanned<String>, key: &str) {
        let text = name.get_ref();
        let mut chars = text.chars();
        let valid = chars
            .next()
            .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
            && chars.all(|c| c == '_' || c.is_ascii_alphanumeric());
        if !valid {
            let message = format!(
                "invalid environment variable name {text:?} for key `{key}`: use letters, digits and '_', not starting with a digit"
            );
            self.at(name.span(), message);
        }
    }
}

/// `[a-z][a-z0-9_-]{0,62}`.
fn is_engine_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 63
        && chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each problem of `text` as (line, column, message).
    fn problems(text: &str) -> Vec<(usize, usize, String)> {
        let error = Config::parse(text, None).expect_err("the text has problems");
        let list = error.problems().iter();
        list.map(|p| (p.line(), p.column(), p.message().to_owned()))
            .collect()
    }

    /// The one problem of `text`.
    fn problem(text: &str) -> (usize, usize, String) {
        let mut list = problems(text);
        assert_eq!(list.len(), 1, "expected one problem, got {list:#?}");
        list.remove(0)
    }

    /// A valid entry named `name`, with `extra` lines appended.
    fn entry(name: &str, extra: &str) -> String {
        format!("[[engine]]\nname = \"{name}\"\ncmd_env = \"MFAPI_X_CMD\"\n{extra}")
    }

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn shipped_engines_toml_parses_into_four_bridge_engines() {
        let config = Config::parse(include_str!("../engines.toml"), None).unwrap();
        assert_eq!(config.default.as_deref(), Some("local"));
        let names: Vec<&str> = config.engines.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["flink", "kafka", "spark", "beam"]);
        for engine in &config.engines {
            let upper = engine.name.to_uppercase();
            assert_eq!(engine.cmd_env, format!("MFAPI_{upper}_CMD"));
            assert_eq!(engine.libpath_env, Some(format!("MFAPI_{upper}_LIBPATH")));
            assert_eq!(engine.framing, Framing::Value);
            assert!(!engine.description.is_empty());
        }
        assert_eq!(
            config.engines[0].description,
            "Apache Flink DataStream bridge job"
        );
    }

    #[test]
    fn absent_keys_take_the_bridge_defaults() {
        let config = Config::parse(&entry("flink", ""), None).unwrap();
        let engine = &config.engines[0];
        let defaults = BridgeOptions::new("flink", vec![]);
        assert_eq!(engine.framing, defaults.framing);
        assert_eq!(engine.stop_grace, defaults.stop_grace);
        assert_eq!(engine.max_in_flight, defaults.max_in_flight);
        assert_eq!(engine.no_progress_timeout, None);
        assert_eq!(engine.restart, None);
        assert_eq!(engine.description, "");
        assert_eq!(engine.line, 2);
        assert_eq!(config.default, None);
    }

    #[test]
    fn every_key_is_read() {
        let text = entry(
            "flink",
            "description = \"d\"\nlibpath_env = \"MFAPI_X_LIB\"\nstop_grace_ms = 0\n\
             max_in_flight = 16\nno_progress_timeout_ms = 30000\n\
             env = { JAVA_OPTS = \"-Xmx512m\", A = \"1\" }\n\
             [engine.restart]\nmax = 3\nbackoff_ms = 50\nbackoff_max_ms = 400\n",
        );
        let engine = &Config::parse(&text, None).unwrap().engines[0];
        assert_eq!(engine.description, "d");
        assert_eq!(engine.libpath_env.as_deref(), Some("MFAPI_X_LIB"));
        assert_eq!(engine.stop_grace, Duration::ZERO);
        assert_eq!(engine.max_in_flight, 16);
        assert_eq!(engine.no_progress_timeout, Some(Duration::from_secs(30)));
        let env = [("A", "1"), ("JAVA_OPTS", "-Xmx512m")].map(|(k, v)| (k.into(), v.into()));
        assert_eq!(engine.env, env);
        let restart = RestartPolicy {
            max_restarts: 3,
            backoff: Duration::from_millis(50),
            backoff_max: Duration::from_millis(400),
        };
        assert_eq!(engine.restart, Some(restart));
    }

    #[test]
    fn error_renders_file_line_column_and_underlines_the_value() {
        let text = entry("flink", "stop_grace_ms = \"fast\"\n");
        let path = Path::new("/tmp/x/engines.toml");
        let error = Config::parse(&text, Some(path)).unwrap_err();
        let expected = "\
/tmp/x/engines.toml:4:17: invalid type: string \"fast\", expected u64 for key `stop_grace_ms`
  |
4 | stop_grace_ms = \"fast\"
  |                 ^^^^^^";
        assert_eq!(error.to_string(), expected);
    }

    #[test]
    fn text_without_a_path_is_called_engines_toml() {
        let error = Config::parse("default = 1\n", None).unwrap_err();
        assert!(
            error.to_string().starts_with("engines.toml:1:11: "),
            "{error}"
        );
    }

    #[test]
    fn several_problems_render_as_separate_blocks() {
        let text = format!("{}{}", entry("A", ""), entry("B", ""));
        let rendered = Config::parse(&text, None).unwrap_err().to_string();
        let blocks: Vec<&str> = rendered.split("\n\n").collect();
        assert_eq!(blocks.len(), 2, "{rendered}");
        assert!(blocks[0].starts_with("engines.toml:2:8: invalid engine name \"A\""));
        assert!(blocks[1].starts_with("engines.toml:5:8: invalid engine name \"B\""));
    }

    #[test]
    fn unknown_key_points_at_the_key_and_lists_the_allowed_keys() {
        let (line, column, message) = problem(&entry("flink", "stop_grace = 5\n"));
        assert_eq!((line, column), (4, 1));
        assert!(message.starts_with("unknown field `stop_grace`, expected one of `name`"));
        for key in [
            "cmd_env",
            "stop_grace_ms",
            "no_progress_timeout_ms",
            "env",
            "restart",
        ] {
            assert!(message.contains(&format!("`{key}`")), "{message}");
        }
    }

    #[test]
    fn unknown_top_level_and_restart_keys_are_refused() {
        let (line, column, message) = problem("defualt = \"local\"\n");
        assert_eq!((line, column), (1, 1));
        assert_eq!(
            message,
            "unknown field `defualt`, expected `default` or `engine`"
        );

        let text = entry("flink", "[engine.restart]\nmax = 1\nbackof_ms = 5\n");
        let (line, column, message) = problem(&text);
        assert_eq!((line, column), (6, 1));
        assert!(message.starts_with("unknown field `backof_ms`, expected one of `max`"));
    }

    #[test]
    fn wrong_type_points_at_the_value_and_names_the_key() {
        let (line, column, message) = problem(&entry("flink", "max_in_flight = 1.5\n"));
        assert_eq!((line, column), (4, 17));
        assert_eq!(
            message,
            "invalid type: floating point `1.5`, expected u64 for key `max_in_flight`"
        );

        let text = entry("flink", "[engine.restart]\nmax = \"3\"\n");
        let (line, column, message) = problem(&text);
        assert_eq!((line, column), (5, 7));
        assert!(message.ends_with("for key `restart.max`"), "{message}");

        let (line, column, message) = problem(&entry("flink", "env = { A = 1 }\n"));
        assert_eq!((line, column), (4, 13));
        assert!(message.ends_with("for key `env.A`"), "{message}");
    }

    #[test]
    fn unknown_framing_lists_the_framings() {
        let (line, column, message) = problem(&entry("flink", "framing = \"lines\"\n"));
        assert_eq!((line, column), (4, 11));
        assert!(message.starts_with("unknown variant `lines`, expected `value` or `json`"));
    }

    #[test]
    fn missing_required_key_points_at_the_entry() {
        let (line, column, message) = problem("[[engine]]\nname = \"flink\"\n");
        assert_eq!((line, column), (1, 1));
        assert_eq!(message, "missing field `cmd_env`");
    }

    #[test]
    fn single_bracket_engine_table_suggests_double_brackets() {
        let (line, column, message) = problem("[engine]\nname = \"flink\"\n");
        assert_eq!((line, column), (1, 1));
        assert!(
            message.ends_with("write each entry under an [[engine]] header"),
            "{message}"
        );
    }

    #[test]
    fn syntax_error_points_at_where_parsing_stopped() {
        let (line, column, message) = problem("[[engine]]\nname = \"flink\ncmd_env = \"X\"\n");
        assert_eq!((line, column), (2, 14));
        assert!(message.starts_with("invalid basic string"), "{message}");
    }

    #[test]
    fn bad_engine_name_points_at_the_name() {
        for bad in ["Flink", "9lives", "", "has space", &"a".repeat(64)] {
            let (line, column, message) = problem(&entry(bad, ""));
            assert_eq!((line, column), (2, 8));
            assert!(
                message.starts_with(&format!("invalid engine name {bad:?}: use")),
                "{message}"
            );
        }
        assert!(Config::parse(&entry(&"a".repeat(63), ""), None).is_ok());
        assert!(Config::parse(&entry("my-flink_2", ""), None).is_ok());
    }

    #[test]
    fn local_is_reserved_for_the_builtin_engine() {
        let (line, column, message) = problem(&entry("local", ""));
        assert_eq!((line, column), (2, 8));
        assert!(message.contains("\"local\" is reserved"), "{message}");
    }

    #[test]
    fn duplicate_name_points_at_the_second_and_names_the_first() {
        let text = format!(
            "default = \"local\"\n\n{}{}",
            entry("flink", ""),
            entry("flink", "")
        );
        let (line, column, message) = problem(&text);
        assert_eq!((line, column), (7, 8));
        assert_eq!(
            message,
            "engine \"flink\" is defined twice: first at engines.toml:4"
        );
    }

    #[test]
    fn bad_env_var_names_are_refused_wherever_they_appear() {
        let text = "[[engine]]\nname = \"flink\"\ncmd_env = \"MFAPI-FLINK-CMD\"\n\
                    libpath_env = \"1LIB\"\nenv = { \"JAVA OPTS\" = \"x\" }\n";
        let found = problems(text);
        let at: Vec<(usize, usize)> = found.iter().map(|(l, c, _)| (*l, *c)).collect();
        assert_eq!(at, [(3, 11), (4, 15), (5, 9)]);
        assert!(found[0].2.starts_with(
            "invalid environment variable name \"MFAPI-FLINK-CMD\" for key `cmd_env`"
        ));
        assert!(found[1].2.contains("\"1LIB\" for key `libpath_env`"));
        assert!(found[2].2.contains("\"JAVA OPTS\" for key `env`"));
    }

    #[test]
    fn env_may_not_set_the_variables_mfstream_sets() {
        let text = entry(
            "flink",
            "env = { LD_LIBRARY_PATH = \"/x\", MFSTREAM_QUERY = \"{}\" }\n",
        );
        let found = problems(&text);
        assert_eq!(found.len(), 2, "{found:#?}");
        assert_eq!((found[0].0, found[0].1), (4, 9));
        assert!(found[0].2.starts_with("`env` may not set LD_LIBRARY_PATH"));
        assert!(found[0].2.contains("use libpath_env"));
        assert!(found[1].2.starts_with("`env` may not set MFSTREAM_QUERY"));
    }

    #[test]
    fn out_of_range_values_point_at_the_value_and_give_the_range() {
        let text = entry(
            "flink",
            "stop_grace_ms = 600001\nmax_in_flight = 0\nno_progress_timeout_ms = 0\n\
             [engine.restart]\nmax = 1001\n",
        );
        let found = problems(&text);
        let expected = [
            (
                4,
                17,
                "value 600001 is out of range for key `stop_grace_ms`: use 0 to 600000",
            ),
            (
                5,
                17,
                "value 0 is out of range for key `max_in_flight`: use 1 to 16777216",
            ),
            (
                6,
                26,
                "value 0 is out of range for key `no_progress_timeout_ms`: use 1 to 86400000",
            ),
            (
                8,
                7,
                "value 1001 is out of range for key `restart.max`: use 1 to 1000",
            ),
        ];
        let expected = expected.map(|(l, c, m)| (l, c, m.to_owned()));
        assert_eq!(found, expected);
    }

    #[test]
    fn negative_value_is_refused_as_a_type_error() {
        let (line, column, message) = problem(&entry("flink", "stop_grace_ms = -1\n"));
        assert_eq!((line, column), (4, 17));
        assert!(message.contains("integer `-1`"), "{message}");
    }

    #[test]
    fn backoff_max_below_backoff_is_refused() {
        let text = entry(
            "flink",
            "[engine.restart]\nmax = 1\nbackoff_ms = 500\nbackoff_max_ms = 50\n",
        );
        let (line, column, message) = problem(&text);
        assert_eq!((line, column), (7, 18));
        assert!(
            message.contains("less than restart.backoff_ms (500)"),
            "{message}"
        );

        let text = entry("flink", "[engine.restart]\nmax = 1\nbackoff_ms = 20000\n");
        let (line, column, message) = problem(&text);
        assert_eq!((line, column), (6, 14));
        assert!(message.ends_with("set backoff_max_ms too"), "{message}");
    }

    #[test]
    fn restart_with_json_framing_is_refused_at_the_restart_table() {
        let text = entry("flink", "framing = \"json\"\n[engine.restart]\nmax = 3\n");
        let (line, column, message) = problem(&text);
        assert_eq!((line, column), (5, 1));
        assert_eq!(
            message,
            "restart requires framing = \"value\": with json framing the records a crashed job \
             had not answered cannot be replayed"
        );
        let inline = entry("flink", "framing = \"json\"\nrestart = { max = 3 }\n");
        assert_eq!(problem(&inline).0, 5);
    }

    #[test]
    fn unknown_default_lists_the_known_engines() {
        let text = format!(
            "default = \"flnk\"\n{}{}",
            entry("flink", ""),
            entry("kafka", "")
        );
        let (line, column, message) = problem(&text);
        assert_eq!((line, column), (1, 11));
        assert_eq!(
            message,
            "unknown engine \"flnk\" for key `default`: known engines are \"local\", \"flink\", \"kafka\""
        );
        let local = format!("default = \"local\"\n{}", entry("flink", ""));
        assert!(Config::parse(&local, None).is_ok());
        let configured = format!("default = \"flink\"\n{}", entry("flink", ""));
        assert!(Config::parse(&configured, None).is_ok());
    }

    #[test]
    fn every_bad_entry_is_reported_in_file_order() {
        let text = format!(
            "default = \"nowhere\"\n{}{}{}{}",
            entry("flink", "stop_grace_ms = \"fast\"\n"),
            entry("Kafka", "max_in_flight = 0\n"),
            entry("spark", "colour = \"red\"\n"),
            entry("beam", "framing = \"json\"\nrestart = { max = 1 }\n"),
        );
        let lines: Vec<usize> = problems(&text).iter().map(|(line, _, _)| *line).collect();
        // The unknown default is not reported: the entry that did not
        // deserialize might have been the one it names.
        assert_eq!(lines, [5, 7, 9, 13, 18]);

        let text = format!(
            "default = \"nowhere\"\n{}{}",
            entry("Flink", ""),
            entry("Flink", "")
        );
        let lines: Vec<usize> = problems(&text).iter().map(|(line, _, _)| *line).collect();
        assert_eq!(lines, [1, 3, 6, 6]);
    }

    #[test]
    fn from_file_names_the_path_in_problems_and_keeps_it() {
        let dir = std::env::temp_dir().join(format!("mfstream-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("engines.toml");
        std::fs::write(&path, entry("flink", "")).unwrap();
        let config = Config::from_file(&path).unwrap();
        assert_eq!(config.path.as_deref(), Some(path.as_path()));

        std::fs::write(&path, "default = 3\n").unwrap();
        let error = Config::from_file(&path).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with(&format!("{}:1:11: ", path.display()))
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unreadable_file_is_an_error_naming_the_path_and_the_os_error() {
        let path = std::env::temp_dir().join("mfstream-no-such-dir/engines.toml");
        let error = Config::from_file(&path).unwrap_err();
        assert_eq!(
            error.io_error().map(io::Error::kind),
            Some(io::ErrorKind::NotFound)
        );
        assert!(error.problems().is_empty());
        let message = error.to_string();
        assert!(message.starts_with(&format!("could not read {}: ", path.display())));
        assert!(message.contains("os error"), "{message}");
    }

    fn flink() -> EngineDef {
        let text = entry(
            "flink",
            "libpath_env = \"MFAPI_X_LIB\"\nenv = { A = \"1\" }\n",
        );
        Config::parse(&text, None).unwrap().engines.remove(0)
    }

    #[test]
    fn resolve_with_the_command_unset_names_the_variable() {
        let reason = flink().resolve(&env_of(&[])).unwrap_err();
        assert_eq!(
            reason,
            "MFAPI_X_CMD is not set (the bridge-job command prefix)"
        );
    }

    #[test]
    fn resolve_with_the_command_empty_names_the_variable() {
        for empty in ["", "  \t"] {
            let reason = flink()
                .resolve(&env_of(&[("MFAPI_X_CMD", empty)]))
                .unwrap_err();
            assert_eq!(
                reason,
                "MFAPI_X_CMD is empty (the bridge-job command prefix)"
            );
        }
    }

    #[test]
    fn resolve_with_an_unbalanced_quote_names_the_variable() {
        let env = env_of(&[("MFAPI_X_CMD", "java -jar 'job.jar")]);
        let reason = flink().resolve(&env).unwrap_err();
        assert!(
            reason.starts_with("MFAPI_X_CMD does not split into words"),
            "{reason}"
        );
        assert!(reason.contains("'job.jar"), "{reason}");
    }

    #[test]
    fn resolve_with_an_empty_program_word_names_the_variable() {
        let reason = flink()
            .resolve(&env_of(&[("MFAPI_X_CMD", "'' job")]))
            .unwrap_err();
        assert_eq!(reason, "MFAPI_X_CMD names no program: \"'' job\"");
    }

    #[test]
    fn resolve_splits_the_command_honouring_quotes() {
        let env = env_of(&[("MFAPI_X_CMD", r#"java -cp "/opt/my jobs/*" 'Main Class'"#)]);
        let options = flink().resolve(&env).unwrap();
        assert_eq!(
            options.argv,
            ["java", "-cp", "/opt/my jobs/*", "Main Class"]
        );
        assert_eq!(options.name, "flink");
        assert_eq!(options.env, [("A".to_owned(), "1".to_owned())]);
        assert_eq!(options.libpath, None);
    }

    #[test]
    fn resolve_fills_the_library_path_unless_it_is_empty() {
        let set = env_of(&[("MFAPI_X_CMD", "job"), ("MFAPI_X_LIB", "/opt/meos/lib")]);
        assert_eq!(
            flink().resolve(&set).unwrap().libpath.as_deref(),
            Some("/opt/meos/lib")
        );
        let empty = env_of(&[("MFAPI_X_CMD", "job"), ("MFAPI_X_LIB", "")]);
        assert_eq!(flink().resolve(&empty).unwrap().libpath, None);
    }
}

//! The problems of an `engines.toml`, each rendered the way cargo renders
//! its config errors: `file:line:column: message`, the line, carets under
//! the value.

use std::fmt;
use std::io;
use std::ops::Range;

use toml::de::{DeTable, DeValue};

/// Why `engines.toml` was refused: it could not be read, or it has problems,
/// each printed as its own block with the offending line.
#[derive(Debug, thiserror::Error)]
pub struct ConfigError {
    pub(super) file: String,
    pub(super) kind: ErrorKind,
}

#[derive(Debug)]
pub(super) enum ErrorKind {
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

    /// Each problem as it is printed (`file:line:column: message`, the
    /// line, the carets), in file order; empty when the file could not be
    /// read. The error's message is these, a blank line apart.
    pub fn rendered(&self) -> Vec<String> {
        self.problems()
            .iter()
            .map(|problem| Rendered(problem, &self.file).to_string())
            .collect()
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
                    Rendered(problem, &self.file).fmt(f)?;
                }
                Ok(())
            }
        }
    }
}

/// A problem shown with the file it is in.
struct Rendered<'a>(&'a ConfigProblem, &'a str);

impl fmt::Display for Rendered<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.render(self.1, f)
    }
}

/// One problem in `engines.toml`, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    kind: ConfigProblemKind,
    pub(super) offset: usize,
    line: usize,
    column: usize,
    message: String,
    source_line: String,
    /// What goes under `source_line`: the indentation, then the carets.
    marker: String,
}

/// What kind of problem a [`ConfigProblem`] is; its message says the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigProblemKind {
    /// Not TOML, an unknown key, or a value of the wrong type.
    Malformed,
    /// An engine or a plugin defined twice.
    Duplicate,
    /// `default` names no engine.
    Unknown,
    /// An empty value where one is needed (a plugin's path).
    Empty,
    /// A name that is not allowed (an engine's, an environment
    /// variable's).
    InvalidName,
    /// A name mfstream keeps for itself (the `local` engine, variables it
    /// sets for each job).
    Reserved,
    /// A number outside its range.
    OutOfRange,
    /// Keys that do not go together (`aggregates` without json framing,
    /// `restart` with it, a backoff above its maximum).
    Conflict,
}

impl ConfigProblem {
    /// What kind of problem it is.
    pub fn kind(&self) -> ConfigProblemKind {
        self.kind
    }

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
pub(super) struct Problems<'a> {
    pub(super) text: &'a str,
    pub(super) file: &'a str,
    pub(super) list: Vec<ConfigProblem>,
}

impl Problems<'_> {
    pub(super) fn at(
        &mut self,
        span: Range<usize>,
        kind: ConfigProblemKind,
        message: impl Into<String>,
    ) {
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
            kind,
            offset: start,
            line: self.line_of(start),
            column: before.chars().count() + 1,
            message: message.into(),
            source_line: source_line.to_owned(),
            marker: indent + &"^".repeat(width.max(1)),
        });
    }

    /// The 1-based line of `offset`.
    pub(super) fn line_of(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())]
            .matches('\n')
            .count()
            + 1
    }

    /// `file:line` of `offset`, for pointing at a second place.
    pub(super) fn place(&self, offset: usize) -> String {
        format!("{}:{}", self.file, self.line_of(offset))
    }

    /// A syntax or type error from `toml`, with the key it is about when
    /// `table` knows it (`toml` tracks the key but does not expose it).
    pub(super) fn toml(
        &mut self,
        error: &toml::de::Error,
        table: &DeTable<'_>,
        fallback: Range<usize>,
    ) {
        let span = error.span().unwrap_or(fallback);
        let mut message = error.message().to_owned();
        if let Some(key) = key_at(table, span.start) {
            message = format!("{message} for key `{key}`");
            if key == "engine" || key == "plugin" {
                message.push_str(&format!(": write each entry under an [[{key}]] header"));
            }
        }
        self.at(span, ConfigProblemKind::Malformed, message);
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

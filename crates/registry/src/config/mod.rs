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
//! aggregates = false                   # optional; true: the job computes windowed aggregates (json framing)
//! positions = false                    # optional; true: the job serves queries on positions (json framing)
//! protocol = 1                         # optional, default 1; 2: the job answers a record it cannot compute with an error line
//! stop_grace_ms = 5000                 # optional, default 5000, 0 to 600000
//! max_in_flight = 65536                # optional, default 65536, 1 to 16777216
//! no_progress_timeout_ms = 120000      # optional, default 120000, 1 to 86400000
//! env = { JAVA_OPTS = "-Xmx512m" }     # optional; the job's environment where mfstream's does not set it
//!
//! [engine.restart]                     # optional; restarts are off when absent
//! max = 3                              # required here, 1 to 1000
//! backoff_ms = 100                     # optional, default 100, 1 to 600000
//! backoff_max_ms = 10000               # optional, default 10000, at least backoff_ms
//!
//! [[plugin]]
//! path = "plugins/libmfstream_plugin_scale.so"  # required; relative to this file's folder
//! isolation = "in-process"             # optional; "in-process" (default) or "process"
//! ```
//!
//! Environment variable names (`cmd_env`, `libpath_env`, the keys of `env`)
//! are `[A-Za-z_][A-Za-z0-9_]*`. `env` may not set `LD_LIBRARY_PATH`,
//! `MFSTREAM_QUERY`, `MFSTREAM_FRAMING` or `MFSTREAM_PROTOCOL`: mfstream sets
//! those for each job.
//! `restart` needs `framing = "value"`, or `positions = true`: with json
//! framing only a position query's answers pair with the records sent, so
//! only its unanswered records can be replayed to a new job (its other
//! queries are not restarted). `aggregates = true`
//! needs `framing = "json"`: only a json job can write window events.
//! `positions = true` needs `framing = "json"` too: positions travel as
//! `coordinates`, which the value framing has no room for.
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
//!
//! One rule for `env` and the environment mfstream runs in, as cargo's
//! (its environment variables override its config files): **the process
//! environment wins**. A key of `env` is a default, given to the job only
//! where mfstream's own environment does not set that variable (set empty
//! counts as set). So an operator sets a site's value (an address, a
//! timeout) where mfstream starts, and the shipped file needs no edit; it
//! never silently undoes what the operator exported.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;
use toml::de::{DeTable, DeValue, ValueDeserializer};

mod problem;
mod resolve;

use mfstream_engine::LOCAL;
use mfstream_engine::is_engine_name;
use mfstream_engine::plugin::Isolation;
use mfstream_engine::{BridgeOptions, BridgeSetting, Framing, RestartPolicy};
use mfstream_model::origin::{FileKey, Origin, Value};

pub use self::problem::{ConfigError, ConfigProblem, ConfigProblemKind};
use self::problem::{ErrorKind, Problems};
pub use self::resolve::ResolveError;

/// The name used in messages for text parsed without a path.
const DEFAULT_FILE_NAME: &str = "engines.toml";

/// Variables mfstream sets for every job, so an entry may not.
const RESERVED_ENV: [&str; 4] = [
    "LD_LIBRARY_PATH",
    "MFSTREAM_QUERY",
    "MFSTREAM_FRAMING",
    "MFSTREAM_PROTOCOL",
];

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
    /// The `[[plugin]]` entries, in file order.
    pub plugins: Vec<PluginDef>,
}

/// One `[[plugin]]` entry, validated; the library is not loaded yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginDef {
    /// The library's path as the file writes it, for messages.
    pub written: String,
    /// The library's path, resolved against the config file's folder.
    pub path: PathBuf,
    /// Where the plugin's engines run.
    pub isolation: Isolation,
    /// The 1-based line of the entry's `path`, for messages.
    pub line: usize,
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
    /// let config = mfstream_registry::config::Config::parse(text, None).unwrap();
    /// assert_eq!(config.engines[0].name(), "flink");
    ///
    /// let error = mfstream_registry::config::Config::parse("[[engine]]\nname = 7\n", None).unwrap_err();
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
                // "." rather than "": a bare file name would make the loader
                // search the system's library path instead of this folder.
                let folder = path
                    .and_then(Path::parent)
                    .filter(|p| !p.as_os_str().is_empty())
                    .unwrap_or(Path::new("."));
                for plugin in &mut config.plugins {
                    plugin.path = folder.join(&plugin.written);
                }
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
    /// The engine's options but for what the environment gives: no
    /// command yet (`argv` empty, `libpath` unset), and `env` holding the
    /// entry's own values. Each tunable value's origin is its key's line,
    /// or the entry's when the key is unset (the value is then
    /// [`BridgeOptions::new`]'s default).
    pub options: BridgeOptions,
    /// The variable holding the job command prefix.
    pub cmd_env: String,
    /// The variable holding a library path for the job, if any.
    pub libpath_env: Option<String>,
    /// The 1-based line of the entry's `name`, for messages.
    pub line: usize,
}

impl EngineDef {
    /// The registry name.
    pub fn name(&self) -> &str {
        &self.options.name
    }

    /// The options of a bridge engine, with the command and library path read
    /// through `env` (usually `&|name| std::env::var(name).ok()`), and each
    /// key of the entry's `env` taken from `env` where it is set there (the
    /// process environment wins; the entry's value is the default).
    ///
    /// `Err` says why the engine is not ready, naming the variable: it is
    /// unset or empty, or its value does not split into words.
    pub fn resolve(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<BridgeOptions, ResolveError> {
        let var = self.cmd_env.clone();
        let command = match env(&var) {
            None => return Err(ResolveError::Unset { var }),
            Some(value) if value.trim().is_empty() => return Err(ResolveError::Empty { var }),
            Some(value) => value,
        };
        let argv = match shell_words::split(&command) {
            Ok(argv) => argv,
            Err(e) => {
                let message = e.to_string();
                return Err(ResolveError::Split {
                    var,
                    command,
                    message,
                });
            }
        };
        if argv.first().is_none_or(|program| program.is_empty()) {
            return Err(ResolveError::NoProgram { var, command });
        }
        let libpath = self
            .libpath_env
            .as_deref()
            .and_then(env)
            .filter(|path| !path.trim().is_empty());
        let mut options = self.options.clone();
        options.argv = argv;
        options.libpath = libpath;
        for (key, value) in &mut options.env {
            if let Some(set) = env(key) {
                *value = set;
            }
        }
        Ok(options)
    }
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
    /// Read one entry at a time, as `engine`.
    #[serde(default)]
    #[expect(dead_code, reason = "only checked to be an array here")]
    plugin: Vec<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [[plugin]] table")]
struct RawPlugin {
    path: Spanned<String>,
    #[serde(default)]
    isolation: Isolation,
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
    aggregates: Option<Spanned<bool>>,
    positions: Option<Spanned<bool>>,
    protocol: Option<Spanned<u64>>,
    stop_grace_ms: Option<Spanned<u64>>,
    max_in_flight: Option<Spanned<u64>>,
    no_progress_timeout_ms: Option<Spanned<u64>>,
    #[serde(default)]
    env: BTreeMap<Spanned<String>, Spanned<String>>,
    restart: Option<Spanned<RawRestart>>,
    /// The keys set aside for a problem of their own (see `read_entry`):
    /// checks that involve them are skipped, lest they report a cascade.
    #[serde(skip)]
    set_aside: Vec<String>,
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
    plugins: Vec<Option<RawPlugin>>,
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
            problems.at(span, ConfigProblemKind::Malformed, error.message());
        }
        return None;
    }
    let array_of = |name: &str| -> Vec<Spanned<DeValue<'_>>> {
        root.get_ref()
            .iter()
            .find(|(key, _)| key.get_ref() == name)
            .map_or_else(Vec::new, |(_, value)| match value.get_ref() {
                DeValue::Array(array) => array.to_vec(),
                _ => Vec::new(),
            })
    };
    let entries = array_of("engine");
    let plugins = array_of("plugin");
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
            read_entry::<RawEngine>(entry, problems)
                .map(|(raw, set_aside)| RawEngine { set_aside, ..raw })
        })
        .collect();
    let plugins = plugins
        .into_iter()
        .map(|entry| read_entry::<RawPlugin>(entry, problems).map(|(raw, _)| raw))
        .collect();
    Some(Raw {
        default,
        entries,
        plugins,
    })
}

/// One `[[engine]]` or `[[plugin]]` table with the keys that were set aside,
/// or `None`; every problem is recorded.
///
/// Serde stops at a table's first unknown key or wrong type. To report all
/// of them at once, the key at fault is set aside and the table read again,
/// until it reads or a required key is missing. Stage two then checks what
/// was read, so a table's bad values are reported together too.
fn read_entry<'de, T: Deserialize<'de>>(
    entry: Spanned<DeValue<'de>>,
    problems: &mut Problems<'_>,
) -> Option<(T, Vec<String>)> {
    let span = entry.span();
    let DeValue::Table(mut table) = entry.get_ref().clone() else {
        // Not a table at all: serde says what was expected.
        let error = T::deserialize(ValueDeserializer::from(entry)).err()?;
        problems.toml(&error, &DeTable::default(), span);
        return None;
    };
    let mut set_aside: Vec<String> = Vec::new();
    loop {
        let value = Spanned::new(span.clone(), DeValue::Table(table.clone()));
        let error = match T::deserialize(ValueDeserializer::from(value)) {
            Ok(read) => return Some((read, set_aside)),
            Err(error) => error,
        };
        // A required key that was set aside has had its problem reported.
        let missing_set_aside = set_aside
            .iter()
            .any(|key| error.message() == format!("missing field `{key}`"));
        if missing_set_aside {
            return None;
        }
        problems.toml(&error, &table, span.clone());
        let at = error.span().map(|span| span.start);
        let key = at.and_then(|at| top_key_at(&table, at))?;
        table = table
            .into_iter()
            .filter(|(k, _)| *k.get_ref() != *key)
            .collect();
        set_aside.push(key);
    }
}

/// The key of `table` whose key or value holds `offset`, looking into nested
/// tables (a `[engine.restart]` value's span is its header, not its keys).
fn top_key_at(table: &DeTable<'_>, offset: usize) -> Option<String> {
    fn holds(value: &Spanned<DeValue<'_>>, offset: usize) -> bool {
        value.span().contains(&offset)
            || match value.get_ref() {
                DeValue::Table(inner) => inner
                    .iter()
                    .any(|(k, v)| k.span().contains(&offset) || holds(v, offset)),
                _ => false,
            }
    }
    table
        .iter()
        .find(|(key, value)| key.span().contains(&offset) || holds(value, offset))
        .map(|(key, _)| key.get_ref().to_string())
}

/// Stage two: every entry checked, every problem recorded.
fn validate(
    Raw {
        default,
        entries,
        plugins,
    }: Raw,
    p: &mut Problems<'_>,
) -> Config {
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
                    ConfigProblemKind::Duplicate,
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
            p.at(default.span(), ConfigProblemKind::Unknown, message);
        }
    }
    Config {
        path: None,
        default: default.map(Spanned::into_inner),
        engines,
        plugins: validate_plugins(&plugins, p),
    }
}

fn validate_plugins(raw: &[Option<RawPlugin>], p: &mut Problems<'_>) -> Vec<PluginDef> {
    let mut plugins: Vec<PluginDef> = Vec::new();
    let mut first_at: Vec<usize> = Vec::new();
    for raw in raw.iter().flatten() {
        let (written, span) = (raw.path.get_ref(), raw.path.span());
        if written.trim().is_empty() {
            p.at(
                span.clone(),
                ConfigProblemKind::Empty,
                "empty plugin path: name the library's file",
            );
        }
        if let Some(i) = plugins.iter().position(|d| &d.written == written) {
            let first = p.place(first_at[i]);
            p.at(
                span.clone(),
                ConfigProblemKind::Duplicate,
                format!("plugin {written:?} is listed twice: first at {first}"),
            );
        }
        first_at.push(span.start);
        plugins.push(PluginDef {
            written: written.clone(),
            path: PathBuf::from(written),
            isolation: raw.isolation,
            line: p.line_of(span.start),
        });
    }
    plugins
}

fn validate_engine(raw: &RawEngine, p: &mut Problems<'_>) -> EngineDef {
    let name = raw.name.get_ref();
    if name == LOCAL {
        let message = format!(
            "engine name {name:?} is reserved for the built-in engine: choose another name"
        );
        p.at(raw.name.span(), ConfigProblemKind::Reserved, message);
    } else if !is_engine_name(name) {
        let message = format!(
            "invalid engine name {name:?}: use 1 to 63 lowercase letters, digits, '_' or '-', starting with a letter"
        );
        p.at(raw.name.span(), ConfigProblemKind::InvalidName, message);
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
            p.at(key.span(), ConfigProblemKind::Reserved, message);
        }
    }
    let entry = Entry {
        table: format!("engine {name:?}"),
        line: p.line_of(raw.name.span().start),
    };
    let stop_grace = p.setting(
        raw.stop_grace_ms.as_ref(),
        BridgeOptions::STOP_GRACE_MS,
        &entry,
    );
    let protocol = p.setting(raw.protocol.as_ref(), BridgeOptions::PROTOCOL, &entry);
    let max_in_flight = p.setting(
        raw.max_in_flight.as_ref(),
        BridgeOptions::MAX_IN_FLIGHT,
        &entry,
    );
    let no_progress = p.setting(
        raw.no_progress_timeout_ms.as_ref(),
        BridgeOptions::NO_PROGRESS_TIMEOUT_MS,
        &entry,
    );
    let aggregates = raw.aggregates.as_ref().is_some_and(|a| *a.get_ref());
    let framing_read = !raw.set_aside.iter().any(|key| key == "framing");
    if aggregates && framing_read && raw.framing != Framing::Json {
        let span = raw.aggregates.as_ref().map_or(0..0, Spanned::span);
        p.at(
            span,
            ConfigProblemKind::Conflict,
            "aggregates = true requires framing = \"json\": a value-framing job answers one number \
             per record and cannot write window events",
        );
    }
    let positions = raw.positions.as_ref().is_some_and(|a| *a.get_ref());
    if positions && framing_read && raw.framing != Framing::Json {
        let span = raw.positions.as_ref().map_or(0..0, Spanned::span);
        p.at(
            span,
            ConfigProblemKind::Conflict,
            "positions = true requires framing = \"json\": positions travel as \"coordinates\" \
             and a value-framing job carries one number per line",
        );
    }
    let restart = raw.restart.as_ref().map(|restart| {
        if raw.framing == Framing::Json && !positions {
            p.at(
                restart.span(),
                ConfigProblemKind::Conflict,
                "restart requires framing = \"value\" or positions = true: with json framing only \
                 a position query's records pair with their answers, and the records a crashed job \
                 had not answered cannot be replayed otherwise",
            );
        }
        validate_restart(restart.get_ref(), p)
    });
    let mut options = BridgeOptions::new(name.clone(), Vec::new());
    options.description = raw.description.clone();
    options.framing = raw.framing;
    options.aggregates = aggregates;
    options.positions = positions;
    options.protocol = protocol.map(|v| v as u32);
    options.stop_grace = stop_grace.map(Duration::from_millis);
    options.max_in_flight = max_in_flight.map(|n| n as usize);
    options.no_progress_timeout = no_progress.map(|ms| Some(Duration::from_millis(ms)));
    options.restart = restart;
    options.env = raw
        .env
        .iter()
        .map(|(k, v)| (k.get_ref().clone(), v.get_ref().clone()))
        .collect();
    EngineDef {
        options,
        cmd_env: raw.cmd_env.get_ref().clone(),
        libpath_env: raw.libpath_env.as_ref().map(|v| v.get_ref().clone()),
        line: entry.line,
    }
}

/// The entry a key belongs to, for its values' origins.
struct Entry {
    /// `engine "spark"`.
    table: String,
    /// The line of its `name`.
    line: usize,
}

fn validate_restart(raw: &RawRestart, p: &mut Problems<'_>) -> RestartPolicy {
    let max = p.ranged(Some(&raw.max), RestartPolicy::MAX);
    let backoff = p
        .ranged(raw.backoff_ms.as_ref(), RestartPolicy::BACKOFF_MS)
        .unwrap_or(RestartPolicy::BACKOFF_MS.default);
    let backoff_max = raw
        .backoff_max_ms
        .as_ref()
        .map_or(RestartPolicy::BACKOFF_MAX_MS.default, |ms| *ms.get_ref());
    if backoff_max < backoff {
        match (&raw.backoff_max_ms, &raw.backoff_ms) {
            (Some(set), _) => p.at(
                set.span(),
                ConfigProblemKind::Conflict,
                format!(
                    "restart.backoff_max_ms ({backoff_max}) is less than restart.backoff_ms \
                     ({backoff}): raise backoff_max_ms or lower backoff_ms"
                ),
            ),
            (None, backoff_ms) => p.at(
                backoff_ms.as_ref().map_or(0..0, Spanned::span),
                ConfigProblemKind::Conflict,
                format!(
                    "restart.backoff_ms ({backoff}) is more than the default backoff_max_ms \
                     ({backoff_max}): set backoff_max_ms too"
                ),
            ),
        }
    }
    RestartPolicy {
        max_restarts: max.unwrap_or(RestartPolicy::MAX.default) as u32,
        backoff: Duration::from_millis(backoff),
        backoff_max: Duration::from_millis(backoff_max),
    }
}

impl Problems<'_> {
    /// The value of an optional integer key when it is set and in its
    /// setting's range.
    fn ranged(&mut self, value: Option<&Spanned<u64>>, setting: BridgeSetting) -> Option<u64> {
        let value = value?;
        let n = *value.get_ref();
        if !(setting.min..=setting.max).contains(&n) {
            let (key, low, high) = (setting.key, setting.min, setting.max);
            self.at(
                value.span(),
                ConfigProblemKind::OutOfRange,
                format!("value {n} is out of range for key `{key}`: use {low} to {high}"),
            );
            return None;
        }
        Some(n)
    }

    /// An integer key of `entry` with where it came from: its value and
    /// line when it is set and in range, else the setting's default and
    /// the entry's line (a value out of range is a problem of the file).
    fn setting(
        &mut self,
        value: Option<&Spanned<u64>>,
        setting: BridgeSetting,
        entry: &Entry,
    ) -> Value<u64> {
        let set = self.ranged(value, setting);
        let line = match (set, value) {
            (Some(_), Some(value)) => self.line_of(value.span().start),
            _ => entry.line,
        };
        let origin = Origin::File(Box::new(FileKey {
            file: self.file.to_owned(),
            line,
            table: entry.table.clone(),
            key: setting.key,
            set: set.is_some(),
        }));
        Value::new(set.unwrap_or(setting.default), origin)
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
            self.at(name.span(), ConfigProblemKind::InvalidName, message);
        }
    }
}

#[cfg(test)]
mod tests;

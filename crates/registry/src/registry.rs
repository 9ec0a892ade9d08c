//! The registry: engines by name, from the built-ins, the `[[engine]]`
//! entries of `engines.toml` and the engines of its `[[plugin]]` libraries.
//!
//! Plugins are loaded when a snapshot is built. A library that is refused,
//! or an engine whose name is taken, is listed as not ready with the reason
//! and reported by [`Registry::plugin_errors`]; the other engines are not
//! affected.
//!
//! The registry holds an immutable snapshot behind an atomic pointer:
//! [`Registry::get`] is one lock-free load and a map look-up, and a reload
//! builds a whole new snapshot and swaps it in, so a reader sees the old
//! registry or the new one, never a mix. Queries already running hold their
//! engine (an `Arc`), so a reload never disturbs them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use arc_swap::ArcSwap;
use serde::Serialize;

use crate::config::{Config, ConfigError};
use mfstream_engine::BridgeEngine;
use mfstream_engine::plugin::{self, PluginError, PluginErrorKind};
use mfstream_engine::{AggregatesIn, EngineInfo, EngineKind, Serves, StreamEngine};
use mfstream_engine::{LOCAL, LocalEngine};
use mfstream_model::{QueryKind, QuerySpec};

/// The variable that picks the default engine, as in the Go tier.
pub(crate) const DEFAULT_ENGINE_VAR: &str = "MFAPI_STREAM_ENGINE";
/// The variable naming the `engines.toml` to load when none is given.
pub(crate) const CONFIG_VAR: &str = "MFSTREAM_CONFIG";

/// Engines by name.
#[derive(Debug)]
pub struct Registry {
    snapshot: ArcSwap<Snapshot>,
}

#[derive(Debug)]
struct Snapshot {
    /// In listing order: built-ins, then the file's entries in file order.
    slots: Vec<Slot>,
    index: HashMap<String, usize>,
    default: DefaultEngine,
    path: Option<PathBuf>,
    /// The plugins that could not be loaded or whose engines clash.
    plugin_errors: Vec<PluginError>,
}

#[derive(Debug)]
enum Slot {
    Ready(Arc<dyn StreamEngine>),
    NotReady(EngineInfo),
}

impl Slot {
    fn info(&self) -> EngineInfo {
        match self {
            Slot::Ready(engine) => engine.describe(),
            Slot::NotReady(info) => info.clone(),
        }
    }
}

/// One engine as `mfstream engines --json` and `GET /engines` show it: its
/// [`EngineInfo`] and whether it is the default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListedEngine {
    /// What the registry knows of the engine.
    #[serde(flatten)]
    pub info: EngineInfo,
    /// Whether it is the default engine.
    pub default: bool,
}

/// The default engine's name and where it came from.
#[derive(Debug, Clone)]
struct DefaultEngine {
    name: String,
    from: &'static str,
}

/// Why an engine could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// No engine has that name.
    #[error("unknown engine {name:?}: known engines are {}", known.join(", "))]
    Unknown {
        /// The name asked for.
        name: String,
        /// The known names, in the registry's order.
        known: Vec<String>,
    },
    /// The engine exists but cannot run queries.
    #[error("the {name} engine is not ready: {reason}")]
    NotReady {
        /// The engine.
        name: String,
        /// Why, naming what to set or fix.
        reason: String,
    },
    /// The engine does not serve what the query needs (a query on
    /// positions on an engine without [`Serves::POSITIONS`]).
    #[error(
        "the {name} engine does not serve {needs} queries: engines that do are {}; name one \
         in \"engine\" (`mfstream engines` lists what each serves)",
        serving.join(", ")
    )]
    Unserved {
        /// The engine.
        name: String,
        /// What the query needs, by name (`positions`).
        needs: &'static str,
        /// The engines that serve it, in the registry's order.
        serving: Vec<String>,
    },
    /// The default engine names no engine.
    #[error(
        "{from} names {name:?}, which is not an engine: known engines are {}",
        known.join(", ")
    )]
    UnknownDefault {
        /// The name.
        name: String,
        /// Where the default came from.
        from: &'static str,
        /// The known names, in the registry's order.
        known: Vec<String>,
    },
}

impl Registry {
    /// The built-in engines alone.
    pub fn builtin() -> Registry {
        Registry::from_config(&Config::default())
    }

    /// The built-ins and the engines of `config`, resolved against the
    /// process environment.
    pub fn from_config(config: &Config) -> Registry {
        Registry::from_config_with_env(config, &|name| std::env::var(name).ok())
    }

    /// The built-ins and the engines of `config`, resolved against `env`.
    pub fn from_config_with_env(config: &Config, env: &dyn Fn(&str) -> Option<String>) -> Registry {
        Registry {
            snapshot: ArcSwap::from_pointee(Snapshot::build(config, env)),
        }
    }

    /// Loads `engines.toml` from `path` (or the built-ins alone for `None`).
    pub fn load(path: Option<&Path>) -> Result<Registry, ConfigError> {
        let config = match path {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        Ok(Registry::from_config(&config))
    }

    /// The `engines.toml` a command line uses: `explicit` (`--config`), else
    /// `$MFSTREAM_CONFIG`, else `./engines.toml` when present, else none.
    pub fn discover(explicit: Option<&Path>) -> Option<PathBuf> {
        if let Some(path) = explicit {
            return Some(path.to_owned());
        }
        if let Some(path) = std::env::var_os(CONFIG_VAR).filter(|p| !p.is_empty()) {
            return Some(PathBuf::from(path));
        }
        let local = Path::new("engines.toml");
        local.is_file().then(|| local.to_owned())
    }

    /// The process-wide registry, built on first use from the discovered
    /// `engines.toml` ([`Registry::discover`] with no explicit path).
    pub fn global() -> Result<&'static Registry, &'static ConfigError> {
        static GLOBAL: LazyLock<Result<Registry, ConfigError>> =
            LazyLock::new(|| Registry::load(Registry::discover(None).as_deref()));
        GLOBAL.as_ref()
    }

    /// The engine named `name`.
    pub fn get(&self, name: &str) -> Result<Arc<dyn StreamEngine>, RegistryError> {
        self.snapshot.load().get(name)
    }

    /// The default engine: `$MFAPI_STREAM_ENGINE`, else the file's
    /// `default`, else `local`.
    pub fn get_default(&self) -> Result<Arc<dyn StreamEngine>, RegistryError> {
        let snapshot = self.snapshot.load();
        let default = &snapshot.default;
        if !snapshot.index.contains_key(&default.name) {
            return Err(RegistryError::UnknownDefault {
                name: default.name.clone(),
                from: default.from,
                known: snapshot.known(),
            });
        }
        snapshot.get(&default.name)
    }

    /// Checks that `engine` serves what `spec` needs: a query on positions
    /// needs [`Serves::POSITIONS`]. A refusal names the engines that serve
    /// it ([`RegistryError::Unserved`]), so a control plane can answer
    /// with them before the engine is asked.
    pub fn check_serves(
        &self,
        engine: &dyn StreamEngine,
        spec: &QuerySpec,
    ) -> Result<(), RegistryError> {
        let (needs, name) = match &spec.kind {
            QueryKind::Position(_) => (Serves::POSITIONS, "positions"),
            _ => return Ok(()),
        };
        if engine.describe().serves.contains(needs) {
            return Ok(());
        }
        let serving = self
            .engines()
            .into_iter()
            .filter(|info| info.serves.contains(needs))
            .map(|info| info.name)
            .collect();
        Err(RegistryError::Unserved {
            name: engine.name().to_owned(),
            needs: name,
            serving,
        })
    }

    /// The default engine's name.
    pub fn default_name(&self) -> String {
        self.snapshot.load().default.name.clone()
    }

    /// Every engine, in listing order, ready or not.
    pub fn engines(&self) -> Vec<EngineInfo> {
        self.snapshot.load().slots.iter().map(Slot::info).collect()
    }

    /// Every plugin that could not be loaded, and every plugin engine whose
    /// name is taken, in file order. Their engines are listed as not ready.
    pub fn plugin_errors(&self) -> Vec<PluginError> {
        self.snapshot.load().plugin_errors.clone()
    }

    /// Every engine, in listing order, each marked default or not: what
    /// `mfstream engines --json` prints and `GET /engines` answers.
    pub fn listing(&self) -> Vec<ListedEngine> {
        let snapshot = self.snapshot.load();
        snapshot
            .slots
            .iter()
            .map(|slot| {
                let info = slot.info();
                let default = info.name == snapshot.default.name;
                ListedEngine { info, default }
            })
            .collect()
    }

    /// The file the registry was loaded from, if any.
    pub fn path(&self) -> Option<PathBuf> {
        self.snapshot.load().path.clone()
    }

    /// Replaces every engine with those of `config`, atomically. Queries
    /// already running keep their engine.
    pub fn reload(&self, config: &Config) {
        let env = |name: &str| std::env::var(name).ok();
        self.snapshot.store(Arc::new(Snapshot::build(config, &env)));
    }

    /// Reloads from the file the registry was loaded from. On error the
    /// registry is left as it was.
    pub fn reload_from_file(&self) -> Result<(), ConfigError> {
        if let Some(path) = self.path() {
            self.reload(&Config::from_file(&path)?);
        }
        Ok(())
    }
}

impl Snapshot {
    fn build(config: &Config, env: &dyn Fn(&str) -> Option<String>) -> Snapshot {
        let mut slots = vec![Slot::Ready(
            Arc::new(LocalEngine::new()) as Arc<dyn StreamEngine>
        )];
        for def in &config.engines {
            let slot = match def.resolve(env) {
                Ok(options) => Slot::Ready(Arc::new(BridgeEngine::new(options))),
                Err(reason) => Slot::NotReady(EngineInfo {
                    abi_version: None,
                    name: def.name().to_owned(),
                    kind: EngineKind::Bridge,
                    ready: false,
                    reason: Some(reason.to_string()),
                    description: def.options.description.clone(),
                    serves: BridgeEngine::serves(def.options.positions),
                    aggregates_in: if def.options.aggregates {
                        AggregatesIn::Job
                    } else {
                        AggregatesIn::Host
                    },
                }),
            };
            slots.push(slot);
        }
        let file = config
            .path
            .as_ref()
            .map_or_else(|| "engines.toml".to_owned(), |p| p.display().to_string());
        let mut plugin_errors = Vec::new();
        let mut libraries = HashMap::new();
        for def in &config.plugins {
            add_plugin(
                def,
                &file,
                env,
                &mut slots,
                &mut libraries,
                &mut plugin_errors,
            );
        }
        // The config refuses duplicate and reserved names, and a plugin
        // engine whose name is taken is listed but not indexed: the first
        // engine of a name keeps it.
        let mut index = HashMap::new();
        for (i, slot) in slots.iter().enumerate() {
            index.entry(slot_name(slot)).or_insert(i);
        }
        let default = match env(DEFAULT_ENGINE_VAR).filter(|v| !v.trim().is_empty()) {
            Some(name) => DefaultEngine {
                name: name.trim().to_owned(),
                from: DEFAULT_ENGINE_VAR,
            },
            None => match &config.default {
                Some(name) => DefaultEngine {
                    name: name.clone(),
                    from: "the config's `default`",
                },
                None => DefaultEngine {
                    name: LOCAL.to_owned(),
                    from: "the built-in default",
                },
            },
        };
        Snapshot {
            slots,
            index,
            default,
            path: config.path.clone(),
            plugin_errors,
        }
    }

    fn get(&self, name: &str) -> Result<Arc<dyn StreamEngine>, RegistryError> {
        match self.index.get(name).map(|&i| &self.slots[i]) {
            Some(Slot::Ready(engine)) => Ok(engine.clone()),
            Some(Slot::NotReady(info)) => Err(RegistryError::NotReady {
                name: name.to_owned(),
                reason: info.reason.clone().unwrap_or_default(),
            }),
            None => Err(RegistryError::Unknown {
                name: name.to_owned(),
                known: self.known(),
            }),
        }
    }

    fn known(&self) -> Vec<String> {
        self.slots.iter().map(slot_name).collect()
    }
}

/// Loads the plugin of `def` and adds its engines to `slots`; a plugin that
/// cannot be loaded is listed (under its path) as not ready, with the reason.
fn add_plugin(
    def: &crate::config::PluginDef,
    file: &str,
    env: &dyn Fn(&str) -> Option<String>,
    slots: &mut Vec<Slot>,
    libraries: &mut HashMap<String, PathBuf>,
    errors: &mut Vec<PluginError>,
) {
    let engines = match plugin_engines(def, env) {
        Ok(engines) => engines,
        Err(mut error) => {
            error.line = Some(def.line);
            slots.push(not_ready_plugin(
                def.written.clone(),
                &error,
                "plugin library (not loaded)".into(),
            ));
            errors.push(error);
            return;
        }
    };
    for engine in engines {
        let own = engine.describe();
        if let Some(taken) = slots.iter().find(|slot| slot_name(slot) == own.name) {
            let error = PluginError {
                path: def.path.clone(),
                line: Some(def.line),
                kind: PluginErrorKind::Clash {
                    name: own.name.clone(),
                    other: owner(&taken.info(), file, libraries),
                },
            };
            slots.push(not_ready_plugin(own.name, &error, own.description));
            errors.push(error);
            continue;
        }
        libraries.insert(own.name.clone(), def.path.clone());
        // An engine whose `ready` said no is listed with its reason.
        slots.push(if own.ready {
            Slot::Ready(engine)
        } else {
            Slot::NotReady(own)
        });
    }
}

/// The engines of the plugin library `def`.
fn plugin_engines(
    def: &crate::config::PluginDef,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Arc<dyn StreamEngine>>, PluginError> {
    plugin::engines(&def.path, def.isolation, env)
}

/// A plugin engine (or library) listed, not ready, with `error` as reason.
fn not_ready_plugin(name: String, error: &PluginError, description: String) -> Slot {
    Slot::NotReady(EngineInfo {
        abi_version: None,
        name,
        kind: EngineKind::Plugin,
        ready: false,
        reason: Some(error.to_string()),
        description,
        serves: Serves::NONE,
        aggregates_in: AggregatesIn::Host,
    })
}

/// Who already has the engine `info` names, for a clash's message.
fn owner(info: &EngineInfo, file: &str, libraries: &HashMap<String, PathBuf>) -> String {
    match info.kind {
        EngineKind::Builtin => format!("the built-in engine {:?}", info.name),
        EngineKind::Bridge => format!("the bridge engine {:?} of {file}", info.name),
        EngineKind::Plugin => match libraries.get(&info.name) {
            Some(path) => format!("the engine {:?} of plugin {}", info.name, path.display()),
            None => format!("the plugin engine {:?}", info.name),
        },
    }
}

fn slot_name(slot: &Slot) -> String {
    match slot {
        Slot::Ready(engine) => engine.name().to_owned(),
        Slot::NotReady(info) => info.name.clone(),
    }
}

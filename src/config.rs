//! `engines.toml`: parsed strictly, validated, resolved. (Placeholder until
//! the strict parser lands.)

use std::path::{Path, PathBuf};

use crate::bridge::BridgeOptions;

/// A validated `engines.toml`.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The file.
    pub path: Option<PathBuf>,
    /// The default engine.
    pub default: Option<String>,
    /// The engines.
    pub engines: Vec<EngineDef>,
}

impl Config {
    /// Reads a file.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        Err(ConfigError(format!("{}: not yet", path.display())))
    }
}

/// One `[[engine]]` entry.
#[derive(Debug, Clone)]
pub struct EngineDef {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
}

impl EngineDef {
    /// Resolves.
    pub fn resolve(&self, _env: &dyn Fn(&str) -> Option<String>) -> Result<BridgeOptions, String> {
        Err("not yet".into())
    }
}

/// Why `engines.toml` was refused.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

//! `engines.toml`: parsed strictly, validated, resolved.

/// A validated `engines.toml`.
#[derive(Debug, Clone, Default)]
pub struct Config {}

/// One `[[engine]]` entry.
#[derive(Debug, Clone)]
pub struct EngineDef {}

/// Why `engines.toml` was refused.
#[derive(Debug, thiserror::Error)]
#[error("config")]
pub struct ConfigError {}

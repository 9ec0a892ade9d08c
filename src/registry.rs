//! The registry of engines.

use std::sync::Arc;

use crate::engine::StreamEngine;
use crate::local::LocalEngine;

/// The registry.
#[derive(Debug)]
pub struct Registry {}

/// Why `get` failed.
#[derive(Debug, thiserror::Error)]
#[error("registry")]
pub struct RegistryError {}

impl Registry {
    /// The built-ins alone.
    pub fn builtin() -> Registry {
        Registry {}
    }

    /// An engine by name.
    pub fn get(&self, _name: &str) -> Result<Arc<dyn StreamEngine>, RegistryError> {
        Ok(Arc::new(LocalEngine::new()))
    }
}

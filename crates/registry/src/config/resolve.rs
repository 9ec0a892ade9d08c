//! Why a bridge engine of `engines.toml` is not ready: its command prefix,
//! read from the environment, is missing or unusable.

/// Why [`EngineDef::resolve`](super::EngineDef::resolve) found no command:
/// each names the variable, and `mfstream engines` shows it as the engine's
/// reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// The variable is not set.
    #[error("{var} is not set (the bridge-job command prefix)")]
    Unset {
        /// The variable (the entry's `cmd_env`).
        var: String,
    },
    /// The variable is empty or blank.
    #[error("{var} is empty (the bridge-job command prefix)")]
    Empty {
        /// The variable.
        var: String,
    },
    /// The value does not split into words (an unbalanced quote).
    #[error("{var} does not split into words ({message}): {command:?}")]
    Split {
        /// The variable.
        var: String,
        /// Its value.
        command: String,
        /// Why it does not split.
        message: String,
    },
    /// The first word, the program, is empty.
    #[error("{var} names no program: {command:?}")]
    NoProgram {
        /// The variable.
        var: String,
        /// Its value.
        command: String,
    },
}

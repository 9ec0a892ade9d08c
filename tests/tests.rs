//! The integration tests: one binary, one module per capability.

mod util;

mod bridge;
mod cli;
mod local;
mod plugins;
mod registry;

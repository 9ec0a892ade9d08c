//! The integration tests: one binary, one module per capability.

mod util;

mod bridge;
mod bridge_windows;
mod cli;
mod local;
mod meos;
mod plugin_isolation;
mod plugin_loader;
mod plugins;
mod registry;
mod runtimes;
mod windows;

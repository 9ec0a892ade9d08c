//! The integration tests: one binary, one module per capability.

mod client;
mod util;

mod bridge;
mod bridge_windows;
mod cli;
mod local;
mod page;
mod registry;
mod serve;
mod windows;

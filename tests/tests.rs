//! The integration tests: one binary, one module per capability.

mod client;
mod util;

mod bridge;
mod bridge_positions;
mod bridge_windows;
mod cli;
mod jobs_watermark;
mod layers;
mod local;
mod meos;
mod meos_positions;
mod on_error;
mod on_time;
mod page;
mod plugin_isolation;
mod plugin_loader;
mod plugin_positions;
mod plugins;
mod positions;
mod positions_differential;
mod public_api;
mod readme;
mod registry;
mod runtimes;
mod serve;
mod windows;

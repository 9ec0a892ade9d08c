//! Write an mfstream stream engine as a native plugin.
//!
//! A plugin is a shared library (`crate-type = ["cdylib"]`) that mfstream
//! loads when `engines.toml` names it in a `[[plugin]]` entry. It exports
//! engines; the control plane gets them from `registry.get(name)` like the
//! built-in ones. The roles:
//!
//! - [`abi`] is the C ABI (version 3), the one source of truth for the host
//!   and for plugin authors; `include/mfstream_plugin.h` is its C twin.
//! - [`Engine`] is what a Rust author implements: `open` a query from its
//!   spec, `process` batches of instants, `close` (flush) at the end; an
//!   engine that serves positions also implements `open_positions`.
//! - [`export_plugin!`] exports engines under the ABI, catching every panic
//!   and turning it into the query's error, so nothing unwinds into the host.
//!
//! A complete plugin:
//!
//! ```
//! use mfstream_plugin::{Batch, Emitter, Engine, Value};
//!
//! /// Doubles every number.
//! struct Double;
//!
//! impl Engine for Double {
//!     const NAME: &'static str = "double";
//!     const DESCRIPTION: &'static str = "doubles every value";
//!
//!     fn open(_spec: &str) -> Result<Self, String> {
//!         Ok(Double)
//!     }
//!
//!     fn process(&mut self, batch: Batch<'_>, out: &mut Emitter<'_>) -> Result<(), String> {
//!         for instant in batch.iter() {
//!             match instant.value {
//!                 Value::Number(x) => out.emit(instant.datetime, Value::Number(2.0 * x)),
//!                 _ => return Err(format!("record at {} is not a number", instant.datetime)),
//!             }
//!         }
//!         Ok(())
//!     }
//! }
//!
//! mfstream_plugin::export_plugin!(name: "double", version: "0.1.0", engines: [Double]);
//! # let plugin = unsafe { &*mfstream_plugin() };
//! # assert_eq!(plugin.abi_version, mfstream_plugin::abi::ABI_VERSION);
//! # assert_eq!(plugin.engine_count, 1);
//! ```
//!
//! Build it with `cargo build --release` and name the `.so` in
//! `engines.toml`:
//!
//! ```toml
//! [[plugin]]
//! path = "target/release/libdouble.so"
//! ```
//!
//! A plugin must be built with `panic = "unwind"` (the default) for panics to
//! be caught; with `panic = "abort"` a panic ends the host process (run such
//! a plugin with `isolation = "process"`).

#![deny(missing_docs)]

pub mod abi;
mod export;

pub use crate::export::{Batch, Detect, Emitter, Instant, Point, PositionSpec, Step, Value};

#[doc(hidden)]
pub use crate::export::{__close, __open, __open_positions, __process, __ready};

/// A stream engine written as an ordinary Rust type: one value per query.
///
/// `Send` because the host may call a query's engine from different threads
/// (one at a time).
pub trait Engine: Sized + Send + 'static {
    /// The registry name: `[a-z][a-z0-9_-]{0,62}`, unique in the registry.
    const NAME: &'static str;
    /// A line for people, shown by `mfstream engines`.
    const DESCRIPTION: &'static str;
    /// The kinds of query served: [`abi::MFS_SERVES_TRANSFORM`] (the host
    /// computes windowed aggregates over the engine's outputs), and
    /// [`abi::MFS_SERVES_POSITIONS`] for an engine that implements
    /// [`open_positions`](Engine::open_positions).
    const SERVES: u32 = abi::MFS_SERVES_TRANSFORM;

    /// Opens a query. `spec` is the query as JSON, the object bridge jobs get
    /// in `MFSTREAM_QUERY`, e.g.
    /// `{"id":"q1","property":"speed","type":"TReal","operation":"mul","arg":1.852}`.
    /// An `Err` refuses the query with that message.
    fn open(spec: &str) -> Result<Self, String>;

    /// Opens a position query (ABI version 3): `process` then gets one
    /// feature's positions ([`Value::Point`], with
    /// [`Instant::micros`](crate::Instant::micros)) and emits, per instant,
    /// what `spec.step` says ([`abi`]'s docs, "Positions"). Called only
    /// when [`SERVES`](Engine::SERVES) has [`abi::MFS_SERVES_POSITIONS`].
    fn open_positions(spec: &PositionSpec<'_>) -> Result<Self, String> {
        let _ = spec;
        Err(format!("engine {} serves no position queries", Self::NAME))
    }

    /// Processes one batch of instants, emitting results to `out`. A record
    /// with no result (outside the operation's domain, or not finite) is
    /// reported with [`Emitter::no_result`], and the batch goes on: the
    /// host applies the query's `onError`. An `Err` fails the query with
    /// that message; the events emitted before it are delivered first.
    fn process(&mut self, batch: Batch<'_>, out: &mut Emitter<'_>) -> Result<(), String>;

    /// Whether the engine can run queries now: an `Err` says why not (a
    /// library it needs is missing, say) and is shown by `mfstream engines`.
    /// Called when the registry is built. Ready by default.
    fn ready() -> Result<(), String> {
        Ok(())
    }

    /// Ends the query: emits what is still held (open windows, say). Called
    /// once, also when the query is stopped or failed.
    fn close(self, out: &mut Emitter<'_>) -> Result<(), String> {
        let _ = out;
        Ok(())
    }
}

/// Exports a plugin: its name, its version and the [`Engine`] types it
/// serves, under the ABI's entry symbol.
///
/// ```
/// # use mfstream_plugin::{Batch, Emitter, Engine};
/// # struct Scale;
/// # impl Engine for Scale {
/// #     const NAME: &'static str = "scale";
/// #     const DESCRIPTION: &'static str = "";
/// #     fn open(_: &str) -> Result<Self, String> { Ok(Scale) }
/// #     fn process(&mut self, _: Batch<'_>, _: &mut Emitter<'_>) -> Result<(), String> { Ok(()) }
/// # }
/// mfstream_plugin::export_plugin!(name: "scale", version: env!("CARGO_PKG_VERSION"), engines: [Scale]);
/// ```
#[macro_export]
macro_rules! export_plugin {
    (name: $name:expr, version: $version:expr, engines: [$($engine:ty),+ $(,)?] $(,)?) => {
        /// The mfstream plugin entry point (ABI v3).
        #[unsafe(no_mangle)]
        pub extern "C" fn mfstream_plugin() -> *const $crate::abi::MfsPlugin {
            const COUNT: usize = [$(stringify!($engine)),+].len();
            static ENGINES: [$crate::abi::MfsEngine; COUNT] = [$(
                $crate::abi::MfsEngine {
                    struct_size: ::core::mem::size_of::<$crate::abi::MfsEngine>() as u32,
                    serves: <$engine as $crate::Engine>::SERVES,
                    name: $crate::abi::MfsStr::new(<$engine as $crate::Engine>::NAME),
                    description: $crate::abi::MfsStr::new(<$engine as $crate::Engine>::DESCRIPTION),
                    open: Some($crate::__open::<$engine>),
                    process: Some($crate::__process::<$engine>),
                    close: Some($crate::__close::<$engine>),
                    ready: Some($crate::__ready::<$engine>),
                    open_positions: if <$engine as $crate::Engine>::SERVES
                        & $crate::abi::MFS_SERVES_POSITIONS
                        != 0
                    {
                        Some($crate::__open_positions::<$engine>)
                    } else {
                        None
                    },
                }
            ),+];
            static PLUGIN: $crate::abi::MfsPlugin = $crate::abi::MfsPlugin {
                struct_size: ::core::mem::size_of::<$crate::abi::MfsPlugin>() as u32,
                abi_version: $crate::abi::ABI_VERSION,
                name: $crate::abi::MfsStr::new($name),
                version: $crate::abi::MfsStr::new($version),
                engines: &ENGINES as *const [$crate::abi::MfsEngine; COUNT]
                    as *const $crate::abi::MfsEngine,
                engine_count: COUNT,
            };
            &PLUGIN
        }
    };
}

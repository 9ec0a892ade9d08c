//! What an engine is: how it is provided, what it serves and where it
//! aggregates, as `mfstream engines` shows it.

use std::fmt;

use serde::Serialize;

/// How an engine is provided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
// Exhaustive on purpose: the registry and the server match it whole.
pub enum EngineKind {
    /// Compiled into mfstream.
    Builtin,
    /// A subprocess bridge defined in `engines.toml`.
    Bridge,
    /// A `cdylib` plugin.
    Plugin,
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EngineKind::Builtin => "builtin",
            EngineKind::Bridge => "bridge",
            EngineKind::Plugin => "plugin",
        })
    }
}

/// Where an engine computes windowed aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum AggregatesIn {
    /// In the mfstream process, on the engine's own task (`local`).
    InProcess,
    /// In the engine's job or plugin: the runtime computes them.
    Job,
    /// In the mfstream host, over the instants or over the transformed
    /// outputs of the engine's job (a bridge engine whose job only
    /// transforms).
    Host,
}

impl AggregatesIn {
    /// The name `mfstream engines` shows.
    pub fn as_str(self) -> &'static str {
        match self {
            AggregatesIn::InProcess => "in-process",
            AggregatesIn::Job => "job",
            AggregatesIn::Host => "host",
        }
    }
}

impl fmt::Display for AggregatesIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kinds of query an engine serves: a set of `transform`,
/// `aggregate` and `positions`, written `transform,aggregate` (and as a
/// JSON list of those names).
///
/// ```
/// use mfstream_engine::Serves;
///
/// let serves = Serves::TRANSFORM | Serves::AGGREGATE;
/// assert!(serves.contains(Serves::AGGREGATE));
/// assert_eq!(serves.to_string(), "transform,aggregate");
/// assert_eq!(serves, ["transform", "aggregate"]);
/// assert_eq!(Serves::NONE.to_string(), "");
/// assert_eq!(serves.iter().collect::<Vec<_>>(), [Serves::TRANSFORM, Serves::AGGREGATE]);
/// let local = serves | Serves::POSITIONS;
/// assert_eq!(local.to_string(), "transform,aggregate,positions");
/// assert!(!serves.contains(Serves::POSITIONS));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Serves {
    bits: u8,
}

impl Serves {
    /// Nothing: an engine that cannot run queries.
    pub const NONE: Serves = Serves { bits: 0 };
    /// Transforms: a lifted operation applied to each instant.
    pub const TRANSFORM: Serves = Serves { bits: 1 };
    /// Windowed aggregates.
    pub const AGGREGATE: Serves = Serves { bits: 2 };
    /// Queries on positions (`TGeogPoint`, `TGeomPoint`): the engine
    /// computes each instant's measure, the instant itself, or a geofence's
    /// detections; the host windows its outputs when the query aggregates
    /// (the `local` engine runs them whole). A position query on an engine
    /// without it is refused, naming the engines that serve it.
    pub const POSITIONS: Serves = Serves { bits: 4 };
    /// Every kind, in the order they are written.
    const KINDS: [(Serves, &'static str); 3] = [
        (Serves::TRANSFORM, "transform"),
        (Serves::AGGREGATE, "aggregate"),
        (Serves::POSITIONS, "positions"),
    ];

    /// Whether every kind of `other` is served.
    pub fn contains(self, other: Serves) -> bool {
        self.bits & other.bits == other.bits
    }

    /// Whether nothing is served.
    pub fn is_empty(self) -> bool {
        self.bits == 0
    }

    /// Each kind served, alone: [`Serves::TRANSFORM`], then
    /// [`Serves::AGGREGATE`], then [`Serves::POSITIONS`].
    pub fn iter(self) -> impl Iterator<Item = Serves> {
        Serves::KINDS
            .into_iter()
            .map(|(kind, _)| kind)
            .filter(move |kind| self.contains(*kind))
    }

    /// The names of the kinds served: `transform`, then `aggregate`, then
    /// `positions`.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Serves::KINDS
            .into_iter()
            .filter(move |(kind, _)| self.contains(*kind))
            .map(|(_, name)| name)
    }
}

impl std::ops::BitOr for Serves {
    type Output = Serves;

    fn bitor(self, other: Serves) -> Serves {
        Serves {
            bits: self.bits | other.bits,
        }
    }
}

impl fmt::Display for Serves {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, name) in self.names().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(name)?;
        }
        Ok(())
    }
}

/// A set equals the list of its names, in order.
impl<const N: usize> PartialEq<[&str; N]> for Serves {
    fn eq(&self, names: &[&str; N]) -> bool {
        self.names().eq(names.iter().copied())
    }
}

impl Serialize for Serves {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.names())
    }
}

/// What the registry knows of an engine, as `mfstream engines` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EngineInfo {
    /// For a plugin engine, the plugin ABI version it speaks (1 to 3; only
    /// 3 has positions); `None` for other kinds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abi_version: Option<u32>,
    /// The registry name.
    pub name: String,
    /// How it is provided.
    pub kind: EngineKind,
    /// Whether it can run queries now.
    pub ready: bool,
    /// Why it is not ready, when it is not.
    pub reason: Option<String>,
    /// A line for people.
    pub description: String,
    /// The kinds of query it serves (a query may compose the two: a
    /// transform, then an aggregate of its outputs).
    pub serves: Serves,
    /// Where its windowed aggregates are computed.
    pub aggregates_in: AggregatesIn,
}

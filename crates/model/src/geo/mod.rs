//! Positions (moving points) and their geometry, with the semantics of MEOS
//! (`tgeogpoint` / `tgeompoint`) and the geofence events of Tile38.
//!
//! Pure functions and small per-feature states, no I/O: the value kind,
//! routes and engines call them.
//!
//! - [`Crs`] says how a position is measured: geodetic WGS84 lon/lat
//!   (EPSG:4326, MEOS `tgeogpoint`): distances in metres on the WGS84
//!   ellipsoid, by Karney's geodesics (GeographicLib, as MEOS and PostGIS
//!   compute geography); or a projected system (MEOS `tgeompoint`):
//!   Euclid, in the system's units.
//! - [`Motion`] follows one feature: speed, azimuth and cumulative length of
//!   the segment ending at each instant.
//! - [`Geometry`] is a static GeoJSON geometry a position's distance is
//!   measured to.
//! - [`Fence`] detects `enter`/`exit`/`inside`/`outside`/`cross` against a
//!   polygon, with the crossing interpolated between samples.
//! - [`PositionAcc`] is one window's aggregate over positions.
//!
//! Time is microseconds since the epoch ([`Micros`]) everywhere here.

mod acc;
mod fence;
mod geometry;
mod motion;
mod planar;
mod reproject;
mod sphere;

use std::sync::LazyLock;

use geographiclib_rs::{Geodesic, InverseGeodesic};

pub use acc::{AggregateValue, PositionAcc, PositionAggregate};
pub use fence::{Detect, Fence, FenceEvent, FenceState};
#[cfg(test)]
pub(crate) use geometry::MAX_GEOMETRY_VERTICES;
pub(crate) use geometry::json_heap_bytes;
pub use geometry::{Geometry, MAX_GEOMETRY_BYTES};
pub use motion::{Motion, Step};
pub(crate) use reproject::{SUPPORTED as REPROJECTIONS, source as reprojection_source};
pub use reproject::{reproject, supported as reprojects};

/// A position: lon/lat in degrees (geodetic, EPSG:4326) or x/y in the CRS's
/// units (planar).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Longitude in degrees, or easting.
    pub x: f64,
    /// Latitude in degrees, or northing.
    pub y: f64,
}

impl Point {
    /// A point from its two coordinates (lon, lat or x, y).
    pub const fn new(x: f64, y: f64) -> Point {
        Point { x, y }
    }
}

/// The reference system of a feature or query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Crs {
    /// WGS84 longitude/latitude in degrees (EPSG:4326, OGC CRS84): lengths
    /// in metres on the WGS84 ellipsoid (MEOS `tgeogpoint`).
    Geodetic,
    /// A projected system, by EPSG code: planar, in its units (MEOS
    /// `tgeompoint` with that SRID).
    Planar(u32),
}

/// The WGS84 EPSG code, the geodetic default.
const WGS84_EPSG: u32 = 4326;

/// Geographic lon/lat systems on the GRS80 ellipsoid (whose semi-minor
/// axis differs from WGS84's by 0.1 mm), taken as WGS84: their datums are
/// within about 2 m of it (ETRS89 ~0.9 m in 2026, NAD83 ~1.5 m, GDA94
/// ~1.8 m), an offset ignored. ETRS89 (4258), NAD83 (4269), GDA94 (4283),
/// GDA2020 (7844), NZGD2000 (4167), NAD83(CSRS) (4617), JGD2000 (4612),
/// JGD2011 (6668), SWEREF99 (4619), SIRGAS 2000 (4674), CGCS2000 (4490),
/// RGF93 (4171), NAD83(HARN) (4152), Hartebeesthoek94 (4148, on the WGS84
/// ellipsoid itself), and WGS84's 3D system (4979). A geographic code in
/// neither this list nor [`GEOGRAPHIC_OTHER`] is taken as planar, as MEOS
/// takes a `tgeompoint`'s SRID (the book's Positions chapter, `docs/src/positions.md`, says so).
pub(crate) const WGS84_LIKE: [u32; 15] = [
    4258, 4269, 4283, 7844, 4167, 4617, 4612, 6668, 4619, 4674, 4490, 4171, 4152, 4148, 4979,
];

/// Geographic lon/lat systems on other ellipsoids (their datums are tens
/// to hundreds of metres from WGS84): refused, as neither planar nor
/// WGS84. NAD27 (4267), ED50 (4230), OSGB36 (4277), Tokyo (4301), WGS72
/// (4322), Beijing 1954 (4214), Pulkovo 1942 (4284), AGD66 (4202), AGD84
/// (4203), NZGD49 (4272), DHDN (4314), MGI (4312), NTF (4275), RD Bessel
/// Amersfoort (4289), Belge 1972 (4313), CH1903 (4149), Monte Mario
/// (4265), Indian 1975 (4240), Korean 1985 (4162), Hong Kong 1980 (4611).
pub(crate) const GEOGRAPHIC_OTHER: [u32; 20] = [
    4267, 4230, 4277, 4301, 4322, 4214, 4284, 4202, 4203, 4272, 4314, 4312, 4275, 4289, 4313, 4149,
    4265, 4240, 4162, 4611,
];

impl Crs {
    /// Reads `EPSG:4326` (and the OGC CRS84 URI/URN, `urn:ogc:def:crs:EPSG::4326`,
    /// `http://www.opengis.net/def/crs/EPSG/0/4326`) as [`Crs::Geodetic`] and
    /// `EPSG:NNNN` (or its URN/URI) as [`Crs::Planar`], as MEOS takes a
    /// `tgeompoint`'s SRID, except the geographic (lon/lat) codes, which are
    /// never planar: those on the GRS80 ellipsoid (`WGS84_LIKE`) are
    /// geodetic on WGS84, their datum's offset from it (≤ 2 m) ignored;
    /// the others (`GEOGRAPHIC_OTHER`) are refused.
    pub fn parse(text: &str) -> Result<Crs, GeoError> {
        let t = text.trim();
        let lower = t.to_ascii_lowercase();
        const CRS84: [&str; 4] = [
            "http://www.opengis.net/def/crs/ogc/1.3/crs84",
            "https://www.opengis.net/def/crs/ogc/1.3/crs84",
            "urn:ogc:def:crs:ogc:1.3:crs84",
            "ogc:crs84",
        ];
        if CRS84.contains(&lower.as_str()) {
            return Ok(Crs::Geodetic);
        }
        let code = [
            "epsg:",
            "urn:ogc:def:crs:epsg::",
            "http://www.opengis.net/def/crs/epsg/0/",
            "https://www.opengis.net/def/crs/epsg/0/",
        ]
        .iter()
        .find_map(|prefix| lower.strip_prefix(prefix));
        match code.and_then(|c| c.parse::<u32>().ok()) {
            Some(WGS84_EPSG) => Ok(Crs::Geodetic),
            Some(n) if WGS84_LIKE.contains(&n) => Ok(Crs::Geodetic),
            Some(n) if GEOGRAPHIC_OTHER.contains(&n) => Err(GeoError::Geographic(n)),
            Some(n) if n > 0 => Ok(Crs::Planar(n)),
            _ => Err(GeoError::Crs(quoted(text))),
        }
    }

    /// The canonical name, `EPSG:4326` or `EPSG:NNNN`.
    pub fn name(&self) -> String {
        match self {
            Crs::Geodetic => format!("EPSG:{WGS84_EPSG}"),
            Crs::Planar(n) => format!("EPSG:{n}"),
        }
    }

    /// Whether lengths are geodesics on the WGS84 ellipsoid.
    pub fn is_geodetic(&self) -> bool {
        matches!(self, Crs::Geodetic)
    }
}

/// Time is microseconds since the epoch everywhere in geo.
pub type Micros = i64;

/// A coordinate as a message quotes it: briefly, in the shortest form that
/// reads back to it, as `vocab::number` writes numbers (`200`, `0.5`,
/// `1e+308`), not the 309 digits `{}` writes for 1e308. (Std only: this
/// module is also compiled alone, into benches/geo.rs.)
fn brief(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e21 {
        // Exact: every integral f64 below 1e21 is an i128.
        (v as i128).to_string()
    } else {
        // Debug is the shortest round trip, in exponent form when large.
        let text = format!("{v:?}");
        match text.split_once('e') {
            Some((mantissa, exp)) if !exp.starts_with('-') => format!("{mantissa}e+{exp}"),
            _ => text,
        }
    }
}

/// A bad position, reference system or geometry. Each message names the
/// field and quotes the input.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum GeoError {
    /// A coordinate is NaN or infinite.
    #[error(
        "coordinates: {} is not a finite number; send two finite numbers [x, y]",
        brief(*.0)
    )]
    NotFinite(f64),
    /// A geodetic longitude outside [-180, 180].
    #[error(
        "coordinates: longitude {} is outside [-180, 180]; send [longitude, latitude] in degrees, or name a projected \"crs\"",
        brief(*.0)
    )]
    Longitude(f64),
    /// A geodetic latitude outside [-90, 90].
    #[error(
        "coordinates: latitude {} is outside [-90, 90]; send [longitude, latitude] in degrees, longitude first",
        brief(*.0)
    )]
    Latitude(f64),
    /// An unknown reference system.
    #[error(
        "crs: unknown reference system \"{0}\"; use \"EPSG:4326\" (geodetic lon/lat) or \"EPSG:NNNN\" (a projected system)"
    )]
    Crs(String),
    /// A geographic system on another ellipsoid than WGS84's.
    #[error(
        "crs: EPSG:{0} is a geographic (lon/lat) system on another datum than WGS84, which is not \
         supported; send WGS84 lon/lat as \"EPSG:4326\" (ETRS89, NAD83, GDA94 and the other GRS80 \
         systems are taken as it), or a projected \"EPSG:NNNN\""
    )]
    Geographic(u32),
    /// A reprojection `position` does not do.
    #[error(
        "crs: no reprojection from {from} to {to}; `position` converts {}",
        reproject::SUPPORTED
    )]
    Reprojection {
        /// The feature's system.
        from: String,
        /// The one asked for.
        to: String,
    },
    /// A pole, which has no Web Mercator northing.
    #[error(
        "coordinates: latitude {} has no Web Mercator (EPSG:3857) northing; poles cannot be reprojected",
        brief(*.0)
    )]
    Pole(f64),
    /// A GeoJSON geometry that is not well formed; `path` names the member.
    #[error("{path}: {reason}")]
    GeoJson {
        /// Where in the geometry, e.g. `geometry.coordinates[0][3]`.
        path: String,
        /// What is wrong, and what to send instead.
        reason: String,
    },
    /// A geometry over a size bound.
    #[error("geometry: {got} {what} exceed the limit of {limit}; simplify the geometry")]
    TooLarge {
        /// What was counted (`vertices`, `bytes`).
        what: &'static str,
        /// How many there were.
        got: usize,
        /// The bound.
        limit: usize,
    },
    /// A fence that is not a polygon.
    #[error("geofence: a {0} cannot be a fence; send a GeoJSON Polygon or MultiPolygon")]
    NotAFence(&'static str),
    /// A fence with nothing to detect.
    #[error(
        "detect: empty; name at least one of \"enter\", \"exit\", \"inside\", \"outside\", \"cross\""
    )]
    NoDetect,
    /// An unknown detect or aggregate name.
    #[error("{field}: unknown value \"{input}\"; use one of {expected}")]
    Unknown {
        /// The field (`detect`, `aggregation`).
        field: &'static str,
        /// The input.
        input: String,
        /// The accepted values.
        expected: &'static str,
    },
}

/// Checks a position: finite coordinates, and for geodetic points longitude
/// in [-180, 180] and latitude in [-90, 90].
pub fn check_point(crs: Crs, p: Point) -> Result<(), GeoError> {
    for c in [p.x, p.y] {
        if !c.is_finite() {
            return Err(GeoError::NotFinite(c));
        }
    }
    if crs.is_geodetic() {
        if !(-180.0..=180.0).contains(&p.x) {
            return Err(GeoError::Longitude(p.x));
        }
        if !(-90.0..=90.0).contains(&p.y) {
            return Err(GeoError::Latitude(p.y));
        }
    }
    Ok(())
}

/// The WGS84 ellipsoid's geodesics, built once (the constructor computes
/// series coefficients).
static WGS84: LazyLock<Geodesic> = LazyLock::new(Geodesic::wgs84);

/// The ellipsoidal distance in metres between two lon/lat points, by
/// Karney's algorithm (accurate to nanometres): what MEOS/PostGIS compute
/// for geography (`spheroid_distance` calls GeographicLib's `geod_inverse`).
pub(crate) fn geodesic_distance(a: Point, b: Point) -> f64 {
    WGS84.inverse(a.y, a.x, b.y, b.x)
}

/// The geodesic from `a` to `b`: its length in metres and its azimuth at
/// `a` in degrees clockwise from north, in (-180, 180].
fn geodesic(a: Point, b: Point) -> (f64, f64) {
    let (s12, azi1, _azi2, _a12): (f64, f64, f64, f64) = WGS84.inverse(a.y, a.x, b.y, b.x);
    (s12, azi1)
}

/// The distance between two points: metres on the WGS84 ellipsoid
/// (geodetic), or Euclid in the CRS's units (planar).
pub fn distance(crs: Crs, a: Point, b: Point) -> f64 {
    match crs {
        Crs::Geodetic => geodesic_distance(a, b),
        Crs::Planar(_) => (b.x - a.x).hypot(b.y - a.y),
    }
}

/// The azimuth from `a` to `b` in degrees clockwise from north (the y axis
/// for planar systems), in [0, 360); `None` when `a == b`, where MEOS has no
/// azimuth either. Geodetic: the geodesic's azimuth at `a`, as PostGIS's
/// `ST_Azimuth(geography)` (GeographicLib's `azi1`).
// The engines take both at once (`distance_azimuth`); the oracle and the
// tests take the azimuth alone.
#[cfg_attr(not(test), allow(dead_code))]
pub fn azimuth(crs: Crs, a: Point, b: Point) -> Option<f64> {
    distance_azimuth(crs, a, b).1
}

/// [`distance`] and [`azimuth`] together, with one geodesic computation.
pub(crate) fn distance_azimuth(crs: Crs, a: Point, b: Point) -> (f64, Option<f64>) {
    if a == b {
        return (0.0, None);
    }
    match crs {
        Crs::Geodetic => {
            let (s, azi) = geodesic(a, b);
            (s, Some(normalize_degrees(azi)))
        }
        Crs::Planar(_) => {
            let (dx, dy) = (b.x - a.x, b.y - a.y);
            (
                dx.hypot(dy),
                Some(normalize_degrees(dx.atan2(dy).to_degrees())),
            )
        }
    }
}

/// Maps an angle in degrees to [0, 360).
fn normalize_degrees(deg: f64) -> f64 {
    let d = deg.rem_euclid(360.0);
    // rem_euclid of a tiny negative angle rounds to 360.0 itself.
    if d >= 360.0 { 0.0 } else { d }
}

#[cfg(test)]
mod oracle;
#[cfg(test)]
mod tests;

/// The most characters of an unknown `crs` an error quotes: a 4 MiB one
/// is not echoed back whole.
const QUOTED_CRS_CHARS: usize = 64;

/// `text` to quote in an error: its first [`QUOTED_CRS_CHARS`] characters,
/// `…` when there were more.
fn quoted(text: &str) -> String {
    match text.char_indices().nth(QUOTED_CRS_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

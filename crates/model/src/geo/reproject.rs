//! Reprojection between the reference systems `position` converts:
//! geodetic WGS84 lon/lat (EPSG:4326) and Web Mercator (EPSG:3857, "WGS 84
//! / Pseudo-Mercator"), by EPSG's method 1024 (Popular Visualisation
//! Pseudo Mercator, IOGP Guidance Note 7-2 §1.3.3.2): the spherical
//! Mercator formulas applied to ellipsoidal lon/lat, radius the WGS84
//! semi-major axis, no false origin.
//!
//! Twenty lines of arithmetic rather than PROJ, which needs its C library
//! and a database; other pairs are refused, naming the supported ones.

use super::{Crs, GeoError, Point};

/// The WGS84 semi-major axis, the sphere's radius in method 1024.
const R: f64 = 6_378_137.0;

/// The EPSG code of Web Mercator.
pub(super) const WEB_MERCATOR: u32 = 3857;

/// Whether `position` converts positions of `from` to `to` (the same
/// system, or EPSG:4326 ↔ EPSG:3857).
pub fn supported(from: Crs, to: Crs) -> bool {
    from == to
        || matches!(
            (from, to),
            (Crs::Geodetic, Crs::Planar(WEB_MERCATOR)) | (Crs::Planar(WEB_MERCATOR), Crs::Geodetic)
        )
}

/// The system `position` converts to `to` from when `to` is not the
/// feature's: the other end of `to`'s pair (EPSG:3857 for EPSG:4326, else
/// EPSG:4326).
pub(crate) fn source(to: Crs) -> Crs {
    match to {
        Crs::Geodetic => Crs::Planar(WEB_MERCATOR),
        Crs::Planar(_) => Crs::Geodetic,
    }
}

/// The pairs [`supported`] converts, for messages.
pub(crate) const SUPPORTED: &str = "EPSG:4326 ↔ EPSG:3857";

/// `p`, a position of `from`, in `to`; an error for a pair not
/// [`supported`], and for a pole (whose Mercator northing is infinite).
/// Longitudes from Web Mercator are wrapped into [-180, 180].
pub fn reproject(from: Crs, to: Crs, p: Point) -> Result<Point, GeoError> {
    match (from, to) {
        _ if from == to => Ok(p),
        (Crs::Geodetic, Crs::Planar(WEB_MERCATOR)) => {
            if p.y.abs() >= 90.0 {
                return Err(GeoError::Pole(p.y));
            }
            let (lon, lat) = (p.x.to_radians(), p.y.to_radians());
            // ln(tan(π/4 + φ/2)), EPSG's form, is asinh(tan φ): the same
            // function, without the rounding of tan(π/4) (the equator's
            // northing is 0, not -7e-10 m).
            Ok(Point::new(R * lon, R * lat.tan().asinh()))
        }
        (Crs::Planar(WEB_MERCATOR), Crs::Geodetic) => {
            // π/2 − 2·atan(e^(−N/R)), EPSG's form, is atan(sinh(N/R)).
            let lat = (p.y / R).sinh().atan();
            let lon = (p.x / R).to_degrees();
            // Past ±180° (an easting beyond the projected world), wrapped;
            // the world's edge itself, rounded a hair past, kept at ±180.
            let lon = if lon.abs() <= 180.0 + 1e-9 {
                lon.clamp(-180.0, 180.0)
            } else {
                (lon + 180.0).rem_euclid(360.0) - 180.0
            };
            Ok(Point::new(lon, lat.to_degrees()))
        }
        _ => Err(GeoError::Reprojection {
            from: from.name(),
            to: to.name(),
        }),
    }
}

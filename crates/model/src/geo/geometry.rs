//! A static GeoJSON geometry (RFC 7946): what a position's `distance` is
//! measured to, and the shape of a geofence.

use std::sync::OnceLock;

use serde_json::Value;

use super::planar::{self, Loc};
use super::{Crs, GeoError, Point, distance, sphere};

/// The most vertices a geometry may have (all its parts together): a fence
/// is tested against every edge per position.
pub(crate) const MAX_GEOMETRY_VERTICES: usize = 10_000;
/// The most bytes a geometry's JSON text may have.
pub const MAX_GEOMETRY_BYTES: usize = 1 << 20;

/// What one allocation costs beyond the bytes asked for: glibc's malloc
/// keeps an 8-byte header and rounds each chunk up to 16 bytes.
pub(super) const ALLOCATION_OVERHEAD: u64 = 16;

/// The heap `n` values of `T` in one allocation hold.
pub(super) fn array_bytes<T>(n: usize) -> u64 {
    match n {
        0 => 0,
        n => (n * std::mem::size_of::<T>()) as u64 + ALLOCATION_OVERHEAD,
    }
}

/// The heap a vector holds: its capacity, and the allocation's overhead.
pub(super) fn vec_bytes<T>(v: &Vec<T>) -> u64 {
    array_bytes::<T>(v.capacity())
}

/// The heap a copy of `v` holds, as a query keeps its GeoJSON for `GET`
/// (a clone: arrays and texts exactly their length). A number is held
/// inline; an object is a B-tree of leaves of 11 entries, about half full
/// past one leaf.
pub(crate) fn json_heap_bytes(v: &Value) -> u64 {
    const VALUE: usize = std::mem::size_of::<Value>();
    /// A leaf of `serde_json::Map`: its header and 11 keys and values.
    const LEAF: u64 = (16 + 11 * (std::mem::size_of::<String>() + VALUE)) as u64;
    match v {
        Value::String(text) => array_bytes::<u8>(text.len()),
        Value::Array(items) => {
            array_bytes::<Value>(items.len()) + items.iter().map(json_heap_bytes).sum::<u64>()
        }
        Value::Object(map) => {
            let leaves = match map.len() {
                0 => 0,
                n if n <= 11 => 1,
                n => n.div_ceil(6) as u64,
            };
            leaves * (LEAF + ALLOCATION_OVERHEAD)
                + map
                    .iter()
                    .map(|(key, value)| array_bytes::<u8>(key.len()) + json_heap_bytes(value))
                    .sum::<u64>()
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
    }
}

/// A static geometry: Point, MultiPoint, LineString, MultiLineString,
/// Polygon or MultiPolygon.
#[derive(Debug, Clone)]
pub struct Geometry {
    pub(super) shape: Shape,
    /// `[minx, miny, maxx, maxy]` of every vertex.
    pub(super) bbox: [f64; 4],
    /// Its lines or rings on the unit sphere, built by the first geodetic
    /// distance.
    sphere: OnceLock<sphere::Lines>,
}

/// Two geometries are equal when their parts are.
impl PartialEq for Geometry {
    fn eq(&self, other: &Geometry) -> bool {
        self.shape == other.shape && self.bbox == other.bbox
    }
}

/// The parts of a geometry, by dimension.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Shape {
    Points(Vec<Point>),
    Lines(Vec<Vec<Point>>),
    /// Each polygon: its closed rings, exterior first, then holes.
    Polygons(Vec<Vec<Vec<Point>>>),
}

impl Geometry {
    /// Reads a GeoJSON geometry object: bounded in bytes
    /// ([`MAX_GEOMETRY_BYTES`]) and vertices (`MAX_GEOMETRY_VERTICES`, 10,000);
    /// positions of two (or three, the altitude ignored) finite numbers;
    /// line strings of at least 2 positions; polygon rings closed, of at
    /// least 4 positions.
    pub fn from_geojson(v: &Value) -> Result<Geometry, GeoError> {
        let bytes = json_len(v);
        if bytes > MAX_GEOMETRY_BYTES {
            return Err(GeoError::TooLarge {
                what: "bytes",
                got: bytes,
                limit: MAX_GEOMETRY_BYTES,
            });
        }
        let mut reader = Reader { vertices: 0 };
        let kind = v.get("type").and_then(Value::as_str).ok_or_else(|| {
            bad(
                "geometry.type",
                "missing; send a GeoJSON geometry {\"type\": \"Polygon\", \"coordinates\": …}",
            )
        })?;
        // Read only once the type is known, so an unsupported type says so.
        let coords = || {
            v.get("coordinates").ok_or_else(|| {
                bad(
                    "geometry.coordinates",
                    "missing; send the geometry's coordinates",
                )
            })
        };
        let path = "geometry.coordinates";
        let shape = match kind {
            "Point" => Shape::Points(vec![reader.position(coords()?, path)?]),
            "MultiPoint" => {
                Shape::Points(reader.list(coords()?, path, 1, |r, c, p| r.position(c, p))?)
            }
            "LineString" => Shape::Lines(vec![reader.line(coords()?, path)?]),
            "MultiLineString" => {
                Shape::Lines(reader.list(coords()?, path, 1, |r, c, p| r.line(c, p))?)
            }
            "Polygon" => Shape::Polygons(vec![reader.polygon(coords()?, path)?]),
            "MultiPolygon" => {
                Shape::Polygons(reader.list(coords()?, path, 1, |r, c, p| r.polygon(c, p))?)
            }
            other => {
                return Err(bad(
                    "geometry.type",
                    &format!(
                        "\"{other}\" is not supported; use Point, MultiPoint, LineString, MultiLineString, Polygon or MultiPolygon"
                    ),
                ));
            }
        };
        let mut bbox = [
            f64::INFINITY,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NEG_INFINITY,
        ];
        let mut grow = |p: &Point| {
            bbox = [
                bbox[0].min(p.x),
                bbox[1].min(p.y),
                bbox[2].max(p.x),
                bbox[3].max(p.y),
            ];
        };
        match &shape {
            Shape::Points(ps) => ps.iter().for_each(&mut grow),
            Shape::Lines(ls) => ls.iter().flatten().for_each(&mut grow),
            Shape::Polygons(ps) => ps.iter().flatten().flatten().for_each(&mut grow),
        }
        Ok(Geometry {
            shape,
            bbox,
            sphere: OnceLock::new(),
        })
    }

    /// Its lines, or its polygons' rings.
    fn lines(&self) -> impl Iterator<Item = &[Point]> {
        let (lines, rings) = match &self.shape {
            Shape::Points(_) => (None, None),
            Shape::Lines(ls) => (Some(ls), None),
            Shape::Polygons(ps) => (None, Some(ps)),
        };
        lines
            .into_iter()
            .flatten()
            .chain(rings.into_iter().flatten().flatten())
            .map(Vec::as_slice)
    }

    /// Its lines or rings on the unit sphere, built once.
    fn sphere(&self) -> &sphere::Lines {
        self.sphere.get_or_init(|| sphere::Lines::new(self.lines()))
    }

    /// The heap its parts hold, and the geometry itself, boxed, as a query
    /// measuring distances in `crs` keeps it: geodetic, with its lines on
    /// the sphere (built by the first position).
    pub fn bytes_boxed(&self, crs: Crs) -> u64 {
        let sphere = match (crs, &self.shape) {
            (Crs::Geodetic, Shape::Lines(_) | Shape::Polygons(_)) => {
                sphere::Lines::heap_bytes_for(self.lines())
            }
            _ => 0,
        };
        let parts = match &self.shape {
            Shape::Points(ps) => vec_bytes(ps),
            Shape::Lines(ls) => vec_bytes(ls) + ls.iter().map(vec_bytes).sum::<u64>(),
            Shape::Polygons(ps) => {
                vec_bytes(ps)
                    + ps.iter()
                        .map(|rings| vec_bytes(rings) + rings.iter().map(vec_bytes).sum::<u64>())
                        .sum::<u64>()
            }
        };
        array_bytes::<Geometry>(1) + parts + sphere
    }

    /// The GeoJSON type's name.
    pub fn kind(&self) -> &'static str {
        match &self.shape {
            Shape::Points(ps) if ps.len() == 1 => "Point",
            Shape::Points(_) => "MultiPoint",
            Shape::Lines(ls) if ls.len() == 1 => "LineString",
            Shape::Lines(_) => "MultiLineString",
            Shape::Polygons(ps) if ps.len() == 1 => "Polygon",
            Shape::Polygons(_) => "MultiPolygon",
        }
    }

    /// The distance from `p`: 0 inside (or on) a polygon, else to the
    /// nearest vertex or edge. Planar: Euclid, edges straight. Geodetic:
    /// metres; to points exactly on the WGS84 ellipsoid; to lines and
    /// polygons as MEOS/PostGIS geography (great-circle edges, see
    /// `sphere`).
    pub fn distance(&self, crs: Crs, p: Point) -> f64 {
        match (&self.shape, crs) {
            (Shape::Points(ps), _) => ps
                .iter()
                .map(|&q| distance(crs, p, q))
                .fold(f64::INFINITY, f64::min),
            (Shape::Lines(ls), Crs::Planar(_)) => planar_lines(p, ls.iter().map(Vec::as_slice)),
            (Shape::Lines(_), Crs::Geodetic) => self.sphere().distance(p),
            (Shape::Polygons(ps), Crs::Planar(_)) => {
                if ps
                    .iter()
                    .any(|rings| planar::polygon_loc(rings, p) != Loc::Outside)
                {
                    return 0.0;
                }
                planar_lines(p, ps.iter().flatten().map(Vec::as_slice))
            }
            (Shape::Polygons(ps), Crs::Geodetic) => {
                if ps.iter().any(|rings| sphere::polygon_covers(rings, p)) {
                    return 0.0;
                }
                self.sphere().distance(p)
            }
        }
    }
}

fn planar_lines<'a>(p: Point, lines: impl Iterator<Item = &'a [Point]>) -> f64 {
    let mut best = f64::INFINITY;
    for line in lines {
        if let [q] = line {
            best = best.min((p.x - q.x).hypot(p.y - q.y));
        }
        for e in line.windows(2) {
            best = best.min(planar::segment_distance(p, e[0], e[1]));
        }
    }
    best
}

fn bad(path: &str, reason: &str) -> GeoError {
    GeoError::GeoJson {
        path: path.to_string(),
        reason: reason.to_string(),
    }
}

/// The length of `v`'s compact JSON text, without building it.
fn json_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a Value to a sink that never fails cannot fail.
    match serde_json::to_writer(&mut count, v) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

/// Reads coordinates, counting vertices against the bound.
struct Reader {
    vertices: usize,
}

impl Reader {
    fn position(&mut self, v: &Value, path: &str) -> Result<Point, GeoError> {
        let nums = v
            .as_array()
            .filter(|a| (2..=3).contains(&a.len()))
            .ok_or_else(|| {
                bad(
                    path,
                    &format!(
                        "{v} is not a position; send [x, y] (or [lon, lat]) of finite numbers"
                    ),
                )
            })?;
        let mut xy = [0.0; 2];
        for (i, n) in nums.iter().enumerate() {
            let f = n.as_f64().filter(|f| f.is_finite()).ok_or_else(|| {
                bad(
                    &format!("{path}[{i}]"),
                    &format!("{n} is not a finite number"),
                )
            })?;
            if i < 2 {
                xy[i] = f;
            }
        }
        self.vertices += 1;
        if self.vertices > MAX_GEOMETRY_VERTICES {
            return Err(GeoError::TooLarge {
                what: "vertices",
                got: self.vertices,
                limit: MAX_GEOMETRY_VERTICES,
            });
        }
        Ok(Point::new(xy[0], xy[1]))
    }

    fn list<T>(
        &mut self,
        v: &Value,
        path: &str,
        min: usize,
        mut item: impl FnMut(&mut Reader, &Value, &str) -> Result<T, GeoError>,
    ) -> Result<Vec<T>, GeoError> {
        let items = v.as_array().ok_or_else(|| {
            bad(
                path,
                "is not an array; send the GeoJSON coordinates nesting",
            )
        })?;
        if items.len() < min {
            return Err(bad(
                path,
                &format!("has {} members, at least {min} are needed", items.len()),
            ));
        }
        items
            .iter()
            .enumerate()
            .map(|(i, c)| item(self, c, &format!("{path}[{i}]")))
            .collect()
    }

    fn line(&mut self, v: &Value, path: &str) -> Result<Vec<Point>, GeoError> {
        self.list(v, path, 2, |r, c, p| r.position(c, p))
    }

    fn ring(&mut self, v: &Value, path: &str) -> Result<Vec<Point>, GeoError> {
        let ring = self.list(v, path, 4, |r, c, p| r.position(c, p))?;
        if ring.first() != ring.last() {
            return Err(bad(
                path,
                "is not closed; repeat the first position at the end",
            ));
        }
        Ok(ring)
    }

    fn polygon(&mut self, v: &Value, path: &str) -> Result<Vec<Vec<Point>>, GeoError> {
        self.list(v, path, 1, |r, c, p| r.ring(c, p))
    }
}

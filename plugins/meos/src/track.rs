//! Position queries on MEOS (ABI version 3): one feature's instants as
//! MEOS `tgeogpoint` (geodetic) or `tgeompoint` (planar) values, each step
//! computed by MEOS's own functions, a second implementation independent
//! of mfstream's `local` engine.
//!
//! Each instant after the first makes, with the one before, the linear
//! two-instant sequence of the segment ending at it (what MEOS would hold
//! of the feature's sequence there; building the whole sequence
//! incrementally would cost each instant the feature's history):
//!
//! - `speed`: `tpoint_speed` of the segment, its (step) value;
//! - `azimuth`: `tpoint_azimuth` of the segment in radians, as degrees;
//!   MEOS has none for a segment of zero length (a stop): nothing emitted;
//! - `cumulativeLength`: the sum of the segments' `tpoint_length`;
//! - `distance`: `nad_tgeo_geo` of the instant and the geometry (a
//!   geography when geodetic: metres on the WGS84 spheroid);
//! - `position`: the instant;
//! - a geofence: `geom_covers` of the fence and the instant for
//!   `inside`/`outside`, and the changes of `tintersects_tgeo_geo` along
//!   the segment (a `tgeompoint`: straight in lon/lat, as GeoJSON draws
//!   fences) for the crossings, each located with `tpoint_get_x`/`_y` at
//!   its time and moved onto the boundary (MEOS's times are whole
//!   microseconds): the nearest point of `geom_intersection2d` of the
//!   segment's `tpoint_trajectory` and the fence's `geom_boundary`. A
//!   touch (true for no time) is no crossing, and the sides at
//!   the segment's ends are `geom_covers`'s (MEOS's intersection may
//!   flicker there).

use std::ffi::CString;

use mfstream_plugin::{Detect, Emitter, Instant, Point, PositionSpec, Step, Value};

use crate::meos::{Gs, Meos, Temporal, clear_error, release, take_error};

/// MEOS's `TimestampTz` epoch, 2000-01-01, in µs since 1970-01-01.
const MEOS_EPOCH: i64 = 946_684_800_000_000;
/// MEOS's `LINEAR` interpolation.
const LINEAR: i32 = 3;

/// A MEOS allocation, freed on drop.
struct Owned(*mut Gs);

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: MEOS allocated it, and nothing else holds it.
        unsafe { release(self.0) }
    }
}

// SAFETY: a MEOS value is plain memory, used by one thread at a time (the
// query's), under the MEOS lock.
unsafe impl Send for Owned {}

/// One feature's query on MEOS.
pub struct Track {
    meos: &'static Meos,
    step: Step,
    geodetic: bool,
    srid: i32,
    detect: u32,
    /// The geometry of `distance` (a geography when geodetic) or the fence
    /// (a geometry).
    geometry: Option<Owned>,
    /// The fence's boundary, where its crossings are.
    boundary: Option<Owned>,
    /// The previous instant: µs since 1970, x, y, and whether it was in the
    /// fence.
    last: Option<(i64, f64, f64, bool)>,
    length: f64,
}

impl Track {
    /// Opens `spec` on MEOS.
    pub fn open(meos: &'static Meos, spec: &PositionSpec<'_>) -> Result<Track, String> {
        let _serial = meos.lock();
        let geometry = match (spec.step, spec.geometry) {
            (Step::Distance | Step::Geofence, Some(text)) => {
                Some(geometry(meos, text, spec, spec.step == Step::Distance)?)
            }
            (Step::Distance | Step::Geofence, None) => {
                return Err("the query has no geometry".into());
            }
            _ => None,
        };
        let boundary = match (&geometry, spec.step) {
            // SAFETY: MEOS is initialised; the fence is live, the result ours.
            (Some(fence), Step::Geofence) => Some(checked(
                unsafe { (meos.geo.geom_boundary)(fence.0) },
                "no boundary of the fence",
            )?),
            _ => None,
        };
        Ok(Track {
            meos,
            boundary,
            step: spec.step,
            geodetic: spec.geodetic,
            srid: spec.srid,
            detect: spec.detect,
            geometry,
            last: None,
            length: 0.0,
        })
    }

    /// Computes the step for `instant`, emitting its results to `out`.
    pub fn push(&mut self, instant: &Instant<'_>, out: &mut Emitter<'_>) -> Result<(), String> {
        let Value::Point(p) = instant.value else {
            return Err(format!("record at {} is not a position", instant.datetime));
        };
        let t = instant
            .micros
            .ok_or_else(|| format!("record at {} has no time", instant.datetime))?;
        clear_error();
        let inside = match self.step {
            Step::Geofence => self.covers(p)?,
            _ => false,
        };
        let last = self.last.replace((t, p.x, p.y, inside));
        match self.step {
            Step::Position => out.emit(instant.datetime, Value::Point(p)),
            Step::Distance => {
                let d = self.distance(t, p)?;
                out.emit(instant.datetime, Value::Number(d));
            }
            Step::Speed | Step::Azimuth | Step::CumulativeLength => {
                let Some(last) = last else {
                    if self.step == Step::CumulativeLength {
                        out.emit(instant.datetime, Value::Number(0.0));
                    }
                    return Ok(());
                };
                let segment = self.segment(last, (t, p.x, p.y), self.geodetic)?;
                if let Some(v) = self.measure(&segment)? {
                    out.emit(instant.datetime, Value::Number(v));
                }
            }
            Step::Geofence => {
                if let Some(last) = last {
                    self.crossings(last, (t, p.x, p.y, inside), instant.datetime, out)?;
                }
                let d = if inside {
                    Detect::Inside
                } else {
                    Detect::Outside
                };
                if self.detect & d.bit() != 0 {
                    out.emit(instant.datetime, Value::Detect(d, p));
                }
            }
            _ => return Err(format!("position step {:?} is not served", self.step)),
        }
        Ok(())
    }

    /// A point of the query's kind: a geography when `geodetic`.
    fn point(&self, x: f64, y: f64, geodetic: bool) -> Result<Owned, String> {
        let g = &self.meos.geo;
        // SAFETY: MEOS is initialised; the result is ours.
        let ptr = unsafe {
            if geodetic {
                (g.geogpoint_make2d)(self.srid, x, y)
            } else {
                (g.geompoint_make2d)(self.srid, x, y)
            }
        };
        checked(ptr, "cannot make a point")
    }

    /// The linear sequence from `a` to `b` (µs since 1970, x, y).
    fn segment(
        &self,
        (t0, x0, y0, ..): (i64, f64, f64, bool),
        (t1, x1, y1): (i64, f64, f64),
        geodetic: bool,
    ) -> Result<Owned, String> {
        let g = &self.meos.geo;
        let p0 = self.point(x0, y0, geodetic)?;
        let p1 = self.point(x1, y1, geodetic)?;
        // SAFETY: MEOS is initialised; the points live across the calls,
        // and each result is ours.
        unsafe {
            let i0 = checked((g.tpointinst_make)(p0.0, t0 - MEOS_EPOCH), "no instant")?;
            let i1 = checked((g.tpointinst_make)(p1.0, t1 - MEOS_EPOCH), "no instant")?;
            let instants = [i0.0.cast_const(), i1.0.cast_const()];
            let seq = (g.tsequence_make)(instants.as_ptr(), 2, true, true, LINEAR, false);
            checked(seq, "cannot make the segment")
        }
    }

    /// The measure of the segment ending at an instant; `None` where MEOS
    /// has none (a stop's azimuth).
    fn measure(&mut self, segment: &Owned) -> Result<Option<f64>, String> {
        let g = &self.meos.geo;
        // SAFETY: MEOS is initialised; `segment` is a live tpoint sequence.
        unsafe {
            match self.step {
                Step::Speed => {
                    let speed = checked((g.tpoint_speed)(segment.0), "no speed")?;
                    Ok(Some((g.tfloat_start_value)(speed.0)))
                }
                Step::Azimuth => {
                    let azimuth = (g.tpoint_azimuth)(segment.0);
                    if azimuth.is_null() {
                        return match take_error() {
                            Some(e) => Err(format!("MEOS azimuth: {e}")),
                            None => Ok(None),
                        };
                    }
                    let azimuth = Owned(azimuth);
                    Ok(Some((g.tfloat_start_value)(azimuth.0).to_degrees()))
                }
                _ => {
                    self.length += (g.tpoint_length)(segment.0);
                    Ok(Some(self.length))
                }
            }
        }
    }

    /// The distance from the instant to the geometry.
    fn distance(&self, t: i64, p: Point) -> Result<f64, String> {
        let g = &self.meos.geo;
        let geometry = self.geometry.as_ref().ok_or("no geometry")?;
        let point = self.point(p.x, p.y, self.geodetic)?;
        // SAFETY: MEOS is initialised; the values are live.
        let d = unsafe {
            let instant = checked((g.tpointinst_make)(point.0, t - MEOS_EPOCH), "no instant")?;
            (g.nad_tgeo_geo)(instant.0, geometry.0)
        };
        match take_error() {
            Some(e) => Err(format!("MEOS distance: {e}")),
            None => Ok(d),
        }
    }

    /// Whether the fence covers `p` (its boundary included).
    fn covers(&self, p: Point) -> Result<bool, String> {
        let fence = self.geometry.as_ref().ok_or("no fence")?;
        let point = self.point(p.x, p.y, false)?;
        // SAFETY: MEOS is initialised; the values are live.
        let inside = unsafe { (self.meos.geo.geom_covers)(fence.0, point.0) };
        match take_error() {
            Some(e) => Err(format!("MEOS covers: {e}")),
            None => Ok(inside),
        }
    }

    /// The crossings of the segment from `last` to the instant.
    fn crossings(
        &self,
        last: (i64, f64, f64, bool),
        (t1, x1, y1, inside1): (i64, f64, f64, bool),
        datetime: &str,
        out: &mut Emitter<'_>,
    ) -> Result<(), String> {
        let wanted = Detect::Enter.bit() | Detect::Exit.bit() | Detect::Cross.bit();
        if self.detect & wanted == 0 {
            return Ok(());
        }
        let g = &self.meos.geo;
        let fence = self.geometry.as_ref().ok_or("no fence")?;
        let segment = self.segment(last, (t1, x1, y1), false)?;
        // The times the segment's intersection with the fence changes.
        let mut changes: Vec<(i64, bool)> = Vec::new();
        // SAFETY: MEOS is initialised; each value is live while used.
        unsafe {
            let along = (g.tintersects_tgeo_geo)(segment.0, fence.0, false, false);
            let along = checked(along, "no intersection")?;
            let n = (g.temporal_num_instants)(along.0);
            let mut side = None;
            for k in 1..=n {
                let instant = checked((g.temporal_instant_n)(along.0, k), "no instant")?;
                let t = (g.temporal_start_timestamptz)(instant.0) + MEOS_EPOCH;
                let v = (g.tbool_start_value)(instant.0);
                if side.is_some_and(|s| s != v) {
                    changes.push((t, v));
                }
                side = Some(v);
            }
        }
        // A touch, in and out at one time, is no crossing.
        let mut kept: Vec<(i64, bool)> = Vec::with_capacity(changes.len());
        for change in changes {
            match kept.last() {
                Some(&(t, v)) if t == change.0 && v != change.1 => {
                    kept.pop();
                }
                _ => kept.push(change),
            }
        }
        // The ends' sides are `geom_covers`'s: MEOS's intersection may
        // flicker at a segment's very ends (a rounding of the segment's
        // intersection with the fence), so only its changes strictly
        // inside the segment count, each a change of side from the last,
        // and a side at the end that is not the instant's changes there.
        let (t0, inside0) = (last.0, last.3);
        let mut side = inside0;
        let mut crossings: Vec<(i64, bool)> = Vec::with_capacity(kept.len() + 1);
        for (t, v) in kept {
            if t > t0 && t < t1 && v != side {
                crossings.push((t, v));
                side = v;
            }
        }
        if side != inside1 {
            crossings.push((t1, inside1));
        }
        let an_end_inside = inside0 || inside1;
        let exact = if crossings.is_empty() {
            Vec::new()
        } else {
            self.boundary_points(&segment)?
        };
        for (t, entering) in crossings {
            let detect = match (an_end_inside, entering) {
                (true, true) => Detect::Enter,
                (true, false) => Detect::Exit,
                (false, true) => Detect::Cross,
                (false, false) => continue,
            };
            if self.detect & detect.bit() == 0 {
                continue;
            }
            // MEOS's time is whole microseconds, so its point there may be
            // off the boundary by what the feature moves in one: the
            // crossing is the point of the segment's intersection with the
            // boundary (GEOS, through MEOS) nearest to it.
            let (x, y) = self.at(&segment, t)?;
            let (x, y) = exact
                .iter()
                .copied()
                .min_by(|a, b| {
                    let d = |p: &(f64, f64)| (p.0 - x).hypot(p.1 - y);
                    d(a).total_cmp(&d(b))
                })
                .filter(|p| (p.0 - x).hypot(p.1 - y) <= 1e-3)
                .unwrap_or((x, y));
            let value = Value::Detect(detect, Point::new(x, y));
            if t == t1 {
                out.emit(datetime, value);
            } else {
                out.emit_at(t, value);
            }
        }
        Ok(())
    }

    /// The points where `segment`'s trajectory meets the fence's boundary.
    fn boundary_points(&self, segment: &Owned) -> Result<Vec<(f64, f64)>, String> {
        let g = &self.meos.geo;
        let boundary = self.boundary.as_ref().ok_or("no fence")?;
        let mut points = Vec::new();
        // SAFETY: MEOS is initialised; each value is live while used, and
        // the text MEOS returns is NUL-terminated and ours to free.
        unsafe {
            let line = checked((g.tpoint_trajectory)(segment.0, false), "no trajectory")?;
            let meets = checked(
                (g.geom_intersection2d)(line.0, boundary.0),
                "no intersection with the boundary",
            )?;
            for n in 1..=(g.geo_num_geos)(meets.0) {
                let part = checked((g.geo_geo_n)(meets.0, n), "no part")?;
                let text = (g.geo_as_geojson)(part.0, 0, 17, std::ptr::null());
                if text.is_null() {
                    continue;
                }
                let json = std::ffi::CStr::from_ptr(text)
                    .to_string_lossy()
                    .into_owned();
                release(text.cast());
                // Points only: a stretch along an edge has no one crossing.
                if let Ok(Part { kind, coordinates }) = serde_json::from_str::<Part>(&json) {
                    if let (true, Some(x), Some(y)) = (
                        kind == "Point",
                        coordinates[0].as_f64(),
                        coordinates[1].as_f64(),
                    ) {
                        points.push((x, y));
                    }
                }
            }
        }
        Ok(points)
    }

    /// Where the segment is at `t` (µs since 1970).
    fn at(&self, segment: &Owned, t: i64) -> Result<(f64, f64), String> {
        let g = &self.meos.geo;
        let mut coordinates = [0.0; 2];
        // SAFETY: MEOS is initialised; each value is live while used.
        unsafe {
            for (get, c) in [g.tpoint_get_x, g.tpoint_get_y]
                .into_iter()
                .zip(coordinates.iter_mut())
            {
                let values = checked(get(segment.0), "no coordinate")?;
                if !(g.tfloat_value_at_timestamptz)(values.0, t - MEOS_EPOCH, false, c) {
                    return Err(format!("MEOS has no position of the segment at {t} µs"));
                }
            }
        }
        Ok((coordinates[0], coordinates[1]))
    }
}

/// A part of an intersection, as MEOS writes it in GeoJSON.
#[derive(serde::Deserialize)]
struct Part {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    coordinates: serde_json::Value,
}

/// The query's geometry on MEOS: `text` (GeoJSON) in the query's SRID, a
/// geography for a geodetic `distance`.
fn geometry(
    meos: &Meos,
    text: &str,
    spec: &PositionSpec<'_>,
    as_geography: bool,
) -> Result<Owned, String> {
    let g = &meos.geo;
    let text = CString::new(text).map_err(|_| "the geometry holds a NUL byte".to_owned())?;
    clear_error();
    // SAFETY: MEOS is initialised; each value is ours.
    unsafe {
        let parsed = checked(
            (g.geo_from_geojson)(text.as_ptr()),
            "cannot read the geometry",
        )?;
        let placed = checked((g.geo_set_srid)(parsed.0, spec.srid), "cannot set its SRID")?;
        // Should MEOS set the SRID in place, the value has one owner.
        let parsed = if placed.0 == parsed.0 {
            std::mem::forget(parsed);
            None
        } else {
            Some(parsed)
        };
        drop(parsed);
        if spec.geodetic && as_geography {
            checked((g.geom_to_geog)(placed.0), "cannot make it a geography")
        } else {
            Ok(placed)
        }
    }
}

/// `ptr` owned, or MEOS's error (else `what`) when null.
fn checked(ptr: *mut Temporal, what: &str) -> Result<Owned, String> {
    if ptr.is_null() {
        Err(take_error().map_or_else(|| format!("MEOS: {what}"), |e| format!("MEOS: {e}")))
    } else {
        Ok(Owned(ptr))
    }
}

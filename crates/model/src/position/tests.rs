use super::*;
use crate::spec::{QueryKind, QuerySpec, RegistrationError};
use crate::vocab::PropertyType;

fn spec(body: &str, t: PropertyType) -> Result<QuerySpec, SpecError> {
    Registration::from_json(body)?.into_spec("tgsequence", t)
}

fn field(body: &str) -> &'static str {
    spec(body, PropertyType::TGeogPoint).unwrap_err().field
}

const SQUARE: &str = r#"{"type":"Polygon","coordinates":[[[0,0],[10,0],[10,10],[0,10],[0,0]]]}"#;

#[test]
fn every_position_operation_registers_by_name_in_any_case() {
    for (body, name) in [
        (r#"{"operation":"speed"}"#, "speed"),
        (r#"{"operation":"AZIMUTH"}"#, "azimuth"),
        (r#"{"operation":"cumulativeLength"}"#, "cumulativeLength"),
        (r#"{"operation":"position"}"#, "position"),
        (
            r#"{"operation":"distance","geometry":{"type":"Point","coordinates":[1,2]}}"#,
            "distance",
        ),
        (
            &format!(r#"{{"geofence":{SQUARE},"detect":["enter"]}}"#),
            "geofence",
        ),
        (
            r#"{"aggregation":"COUNT","window":{"type":"COUNT","size":2}}"#,
            "COUNT",
        ),
        (
            r#"{"operation":"speed","aggregation":"max","window":{"type":"COUNT","size":2}}"#,
            "MAX",
        ),
    ] {
        let spec = spec(body, PropertyType::TGeogPoint).unwrap_or_else(|e| panic!("{body}: {e}"));
        assert_eq!(spec.operation_name(), name, "{body}");
        assert_eq!(spec.property_type, PropertyType::TGeogPoint);
        assert!(matches!(spec.kind, QueryKind::Position(_)));
    }
}

/// The catalogue is the one list: each of its operations on positions
/// registers (a geometry with the one taking it) and is what events name,
/// so an entry without its computation fails here; the messages listing
/// the operations are the catalogue's line.
#[test]
fn every_catalogue_operation_on_positions_registers_and_messages_list_them() {
    for op in Op::on(Kind::Position) {
        let body = if op.entry().arg == Arg::Geometry {
            format!(
                r#"{{"operation":"{}","geometry":{{"type":"Point","coordinates":[1,2]}}}}"#,
                op.name().to_uppercase()
            )
        } else {
            format!(r#"{{"operation":"{}"}}"#, op.name().to_uppercase())
        };
        let spec = spec(&body, PropertyType::TGeogPoint).unwrap_or_else(|e| panic!("{body}: {e}"));
        assert_eq!(spec.operation_name(), op.name(), "{body}");
    }
    let line = Op::catalogue_of(Kind::Position);
    for body in [
        r#"{"operation":"ln"}"#,
        r#"{"operation":"speed","arg":1}"#,
        "{}",
    ] {
        let e = spec(body, PropertyType::TGeogPoint).unwrap_err();
        assert!(e.message.contains(&line), "{body}: {e}");
    }
    let e = spec(r#"{"operation":"ln"}"#, PropertyType::TGeogPoint).unwrap_err();
    assert_eq!(
        e.message,
        format!("unknown position operation \"ln\": supported are {line}")
    );
    let e = spec(
        r#"{"operation":"speed","geometry":{"type":"Point","coordinates":[1,2]}}"#,
        PropertyType::TGeogPoint,
    )
    .unwrap_err();
    assert_eq!(e.message, "`geometry` goes with the operation \"distance\"");
    // On a number, a position operation is unfit, not unknown.
    let e = Registration::from_json(r#"{"operation":"speed"}"#)
        .unwrap()
        .into_spec("speed", PropertyType::TReal)
        .unwrap_err();
    assert_eq!(
        (e.field, e.kind),
        ("operation", SpecErrorKind::Unfit),
        "{e}"
    );
    assert!(e.message.contains("applies to positions"), "{e}");
}

#[test]
fn bad_position_registrations_name_the_field() {
    assert_eq!(field(r#"{"operation":"ln"}"#), "operation");
    assert_eq!(field(r#"{"operation":"speed","arg":1}"#), "arg");
    assert_eq!(field(r#"{"operation":"distance"}"#), "geometry");
    assert_eq!(
        field(r#"{"operation":"distance","geometry":{"type":"Blob"}}"#),
        "geometry"
    );
    assert_eq!(
        field(r#"{"operation":"speed","geometry":{"type":"Point","coordinates":[1,2]}}"#),
        "geometry"
    );
    let line = r#"{"type":"LineString","coordinates":[[0,0],[1,1]]}"#;
    assert_eq!(field(&format!(r#"{{"geofence":{line}}}"#)), "geofence");
    assert_eq!(
        field(&format!(r#"{{"geofence":{SQUARE},"detect":["near"]}}"#)),
        "detect"
    );
    assert_eq!(
        field(&format!(r#"{{"geofence":{SQUARE},"detect":[]}}"#)),
        "detect"
    );
    assert_eq!(
        field(r#"{"operation":"speed","detect":["enter"]}"#),
        "detect"
    );
    assert_eq!(
        field(
            r#"{"operation":"position","aggregation":"COUNT","window":{"type":"COUNT","size":2}}"#
        ),
        "aggregation"
    );
    assert_eq!(
        field(r#"{"aggregation":"AVG","window":{"type":"COUNT","size":2}}"#),
        "aggregation"
    );
    assert_eq!(
        field(r#"{"operation":"speed","aggregation":"ANY","window":{"type":"COUNT","size":2}}"#),
        "aggregation"
    );
    assert_eq!(field(r#"{"operation":"speed","crs":"EPSG:x"}"#), "crs");
    assert_eq!(field(r#"{"operation":"speed","crs":7}"#), "crs");
    // A position's fields on a scalar property.
    // A `crs` makes a query one on positions, whose operations these are.
    let e = spec(
        r#"{"operation":"abs","crs":"EPSG:4326"}"#,
        PropertyType::TReal,
    )
    .unwrap_err();
    assert_eq!(e.field, "operation", "{e}");
    assert!(e.message.contains("speed, azimuth"), "{e}");
    let e = Registration::from_json(r#"{"operation":"abs","geometry":{}}"#)
        .unwrap()
        .into_spec_on("p", None)
        .unwrap_err();
    assert!(
        matches!(e, RegistrationError::Invalid(ref e) if e.field == "geometry"),
        "{e:?}"
    );
}

#[test]
fn a_feature_has_one_reference_system_and_another_is_unfit() {
    let on = |body: &str, known, crs| {
        Registration::from_json(body)
            .unwrap()
            .into_position_spec("tgsequence", known, crs)
    };
    let speed = r#"{"operation":"speed"}"#;
    // Default: geodetic.
    let q = on(speed, None, None).unwrap();
    assert_eq!(q.crs(), Some(Crs::Geodetic));
    // The body decides for a new feature.
    let planar = on(r#"{"operation":"speed","crs":"EPSG:3857"}"#, None, None).unwrap();
    assert_eq!(planar.property_type, PropertyType::TGeomPoint);
    assert_eq!(planar.crs(), Some(Crs::Planar(3857)));
    // A mix is refused.
    let mix = on(
        r#"{"operation":"speed","crs":"EPSG:3857"}"#,
        Some(PropertyType::TGeogPoint),
        None,
    );
    assert!(
        matches!(mix, Err(RegistrationError::Unfit(ref e)) if e.field == "crs"),
        "{mix:?}"
    );
    let other = on(
        r#"{"operation":"speed","crs":"EPSG:32631"}"#,
        Some(PropertyType::TGeomPoint),
        Some(Crs::Planar(3857)),
    );
    assert!(matches!(other, Err(RegistrationError::Unfit(ref e)) if e.field == "crs"));
    // No crs: the feature's.
    let same = on(
        speed,
        Some(PropertyType::TGeomPoint),
        Some(Crs::Planar(3857)),
    )
    .unwrap();
    assert_eq!(same.crs(), Some(Crs::Planar(3857)));
    // A scalar type on positions does not fit.
    let scalar = on(r#"{"operation":"speed","type":"TReal"}"#, None, None);
    assert!(matches!(scalar, Err(RegistrationError::Unfit(ref e)) if e.field == "type"));
}

#[test]
fn a_geojson_fault_names_its_member_under_the_field() {
    let e = spec(
        r#"{"geofence":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,"x"],[0,0]]]}}"#,
        PropertyType::TGeogPoint,
    )
    .unwrap_err();
    assert_eq!(e.field, "geofence");
    assert!(
        e.message
            .contains("geofence.coordinates[0][3][1]: \"x\" is not a finite number"),
        "{e}"
    );
    let e = spec(
        r#"{"operation":"distance","geometry":{"type":"MultiPolygon","coordinates":[[[[0,0],[1,0],[1,1],[0,1],[0,0]]],[[[5,5],[6,5],[6,6],[5,6]]]]}}"#,
        PropertyType::TGeogPoint,
    )
    .unwrap_err();
    assert_eq!(e.field, "geometry");
    assert!(
        e.message
            .contains("geometry.coordinates[1][0]: is not closed"),
        "{e}"
    );
}

/// The heap each thread holds, counted by the test binary's allocator: what
/// a test allocates and frees on its own thread while others run.
mod heap {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    pub(super) struct Counting;

    thread_local! {
        /// Bytes asked for and allocations, live on this thread.
        static LIVE: Cell<(i64, i64)> = const { Cell::new((0, 0)) };
    }

    fn track(bytes: i64, allocations: i64) {
        // No destructor and a const initialiser: no allocation here.
        let _ = LIVE.try_with(|live| {
            let (b, a) = live.get();
            live.set((b + bytes, a + allocations));
        });
    }

    /// The bytes and allocations live on this thread.
    pub(super) fn live() -> (i64, i64) {
        LIVE.with(Cell::get)
    }

    // SAFETY: every call is System's, with the caller's arguments.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let p = unsafe { System.alloc(layout) };
            if !p.is_null() {
                track(layout.size() as i64, 1);
            }
            p
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            let p = unsafe { System.alloc_zeroed(layout) };
            if !p.is_null() {
                track(layout.size() as i64, 1);
            }
            p
        }

        unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
            unsafe { System.dealloc(p, layout) };
            track(-(layout.size() as i64), -1);
        }

        unsafe fn realloc(&self, p: *mut u8, layout: Layout, size: usize) -> *mut u8 {
            let q = unsafe { System.realloc(p, layout, size) };
            if !q.is_null() {
                track(size as i64 - layout.size() as i64, 0);
            }
            q
        }
    }
}

#[global_allocator]
static HEAP: heap::Counting = heap::Counting;

#[test]
fn a_geometrys_count_matches_the_heap_its_query_holds() {
    let ring = |n: usize, vertex: &dyn Fn(usize) -> [f64; 2]| -> String {
        let mut points: Vec<[f64; 2]> = (0..n).map(vertex).collect();
        points.push(points[0]);
        serde_json::to_string(&points).unwrap()
    };
    let circle = ring(9_999, &|i| {
        let a = i as f64 / 9_999.0 * std::f64::consts::TAU;
        [10.0 + 0.5 * a.cos(), 45.0 + 0.5 * a.sin()]
    });
    // Every tooth spans the fence's height: every edge in every strip.
    let zigzag = ring(9_999, &|i| match i {
        0 => [0.0, -1.0],
        9_998 => [1.0, -1.0],
        i => [i as f64 / 9_998.0, if i % 2 == 0 { 0.0 } else { 10.0 }],
    });
    for (what, body) in [
        (
            "distance to a 9,999-vertex circle",
            format!(
                r#"{{"operation":"distance","geometry":{{"type":"Polygon","coordinates":[{circle}]}}}}"#
            ),
        ),
        (
            "a 9,999-vertex circle fence",
            format!(r#"{{"geofence":{{"type":"Polygon","coordinates":[{circle}]}}}}"#),
        ),
        (
            "a 9,999-vertex zigzag fence",
            format!(r#"{{"geofence":{{"type":"Polygon","coordinates":[{zigzag}]}}}}"#),
        ),
    ] {
        let spec = spec(&body, PropertyType::TGeogPoint).unwrap();
        let QueryKind::Position(query) = &spec.kind else {
            panic!("{what}: a position query");
        };
        let counted = query.geometry_bytes();
        // What a running query keeps: the copy for GET, and what the local
        // engine builds (position::run).
        let json = query.geometry().unwrap();
        let before = heap::live();
        let kept_json = std::sync::Arc::new(json.clone());
        let parsed = geo::Geometry::from_geojson(json).unwrap();
        let built: Box<dyn std::any::Any> = match &query.what {
            What::Geofence { detect, .. } => Box::new(geo::Fence::new(parsed, detect).unwrap()),
            _ => {
                // The first position puts its lines on the sphere.
                assert!(parsed.distance(query.crs, geo::Point::new(0.0, 0.0)) > 0.0);
                Box::new(parsed)
            }
        };
        let after = heap::live();
        let asked = (after.0 - before.0) as f64;
        let real = asked + 16.0 * (after.1 - before.1) as f64;
        eprintln!(
            "{what}: counted {counted} bytes, the heap {real} ({asked} asked for in {} allocations)",
            after.1 - before.1
        );
        assert!(
            (counted as f64 - real).abs() <= 0.05 * real,
            "{what}: counted {counted}, held {real}"
        );
        drop((kept_json, built));
    }
}

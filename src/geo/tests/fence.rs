//! The fence's documented cases, and its strip index against every edge.

use serde_json::json;

use crate::geo::planar;
use crate::geo::*;

pub(super) fn fence(detect: &[Detect]) -> Fence {
    let square =
        json!({"type": "Polygon", "coordinates": [[[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]]]});
    let g = Geometry::from_geojson(&square).expect("a valid polygon");
    Fence::new(g, detect).expect("a polygon fence")
}

pub(super) fn run(
    f: &Fence,
    track: &[(Micros, f64, f64)],
) -> Vec<(Micros, f64, f64, &'static str)> {
    let mut state = FenceState::default();
    let mut out: Vec<FenceEvent> = Vec::new();
    for &(t, x, y) in track {
        f.step(&mut state, t, Point::new(x, y), &mut out);
    }
    out.iter()
        .map(|e| (e.t, e.point.x, e.point.y, e.detect.name()))
        .collect()
}

#[test]
fn fence_interpolates_enter_and_exit_and_emits_inside_outside_per_instant() {
    let all = [
        Detect::Enter,
        Detect::Exit,
        Detect::Inside,
        Detect::Outside,
        Detect::Cross,
    ];
    let f = fence(&all);
    let events = run(&f, &[(0, -5.0, 5.0), (10, 5.0, 5.0), (30, 15.0, 5.0)]);
    assert_eq!(
        events,
        vec![
            (0, -5.0, 5.0, "outside"),
            (5, 0.0, 5.0, "enter"),
            (10, 5.0, 5.0, "inside"),
            (20, 10.0, 5.0, "exit"),
            (30, 15.0, 5.0, "outside"),
        ]
    );
}

#[test]
fn fence_reports_a_pass_between_two_outside_samples_as_cross() {
    let f = fence(&[Detect::Enter, Detect::Exit, Detect::Cross]);
    let events = run(&f, &[(0, -5.0, 5.0), (20, 15.0, 5.0), (40, 15.0, 25.0)]);
    assert_eq!(events, vec![(5, 0.0, 5.0, "cross")]);
    let point = Geometry::from_geojson(&json!({"type": "Point", "coordinates": [0, 0]}));
    let err = Fence::new(point.expect("a valid point"), &[Detect::Enter]).unwrap_err();
    assert_eq!(err, GeoError::NotAFence("Point"));
}

#[test]
fn fence_needs_something_to_detect_and_known_names() {
    let square = json!({"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 0]]]});
    let g = Geometry::from_geojson(&square).expect("a valid polygon");
    assert_eq!(Fence::new(g, &[]).unwrap_err(), GeoError::NoDetect);
    assert_eq!(Detect::parse("cross"), Ok(Detect::Cross));
    let err = Detect::parse("Enter").unwrap_err().to_string();
    assert!(err.starts_with("detect: unknown value \"Enter\""), "{err}");
}

/// A U-shaped fence: a notch from the top, x in (4, 6), y above 2.
fn u_fence() -> Fence {
    let u = json!({"type": "Polygon", "coordinates": [[
        [0, 0], [10, 0], [10, 10], [6, 10], [6, 2], [4, 2], [4, 10], [0, 10], [0, 0]]]});
    let all = [
        Detect::Enter,
        Detect::Exit,
        Detect::Inside,
        Detect::Outside,
        Detect::Cross,
    ];
    Fence::new(Geometry::from_geojson(&u).expect("a valid polygon"), &all).expect("a fence")
}

#[test]
fn fence_reports_every_crossing_of_a_segment_with_both_ends_inside() {
    // From the left arm to the right arm across the notch: out and back in.
    let events = run(&u_fence(), &[(0, 2.0, 5.0), (80, 10.0, 5.0)]);
    assert_eq!(
        events,
        vec![
            (0, 2.0, 5.0, "inside"),
            (20, 4.0, 5.0, "exit"),
            (40, 6.0, 5.0, "enter"),
            (80, 10.0, 5.0, "inside"),
        ]
    );
}

#[test]
fn fence_boundary_is_inside_and_leaving_it_is_an_exit_at_the_sample() {
    let events = run(
        &u_fence(),
        &[(0, 0.0, 5.0), (10, -1.0, 5.0), (20, 0.0, 5.0)],
    );
    assert_eq!(
        events,
        vec![
            (0, 0.0, 5.0, "inside"),
            (0, 0.0, 5.0, "exit"),
            (10, -1.0, 5.0, "outside"),
            (20, 0.0, 5.0, "enter"),
            (20, 0.0, 5.0, "inside"),
        ]
    );
}

#[test]
fn fence_through_a_hole_with_both_ends_outside_is_two_crosses() {
    let holed = json!({"type": "Polygon", "coordinates": [
        [[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]],
        [[4, 4], [6, 4], [6, 6], [4, 6], [4, 4]]]});
    let g = Geometry::from_geojson(&holed).expect("a valid polygon");
    let f = Fence::new(g, &[Detect::Cross, Detect::Enter, Detect::Exit]).expect("a fence");
    let events = run(&f, &[(0, -5.0, 5.0), (200, 15.0, 5.0)]);
    assert_eq!(
        events,
        vec![(50, 0.0, 5.0, "cross"), (110, 6.0, 5.0, "cross")]
    );
}

#[test]
fn fence_segment_across_the_antimeridian_is_straight_in_lon_lat() {
    // A fence east of the antimeridian; a segment from 179° to -179° is
    // the long way round in lon/lat (as GeoJSON and Tile38 draw it), so it
    // passes through a fence at lon 0.
    let square =
        json!({"type": "Polygon", "coordinates": [[[-1, -1], [1, -1], [1, 1], [-1, 1], [-1, -1]]]});
    let g = Geometry::from_geojson(&square).expect("a valid polygon");
    let f = Fence::new(g, &[Detect::Cross]).expect("a fence");
    let events = run(&f, &[(0, 179.0, 0.0), (358, -179.0, 0.0)]);
    assert_eq!(events, vec![(178, 1.0, 0.0, "cross")]);
}

#[test]
fn the_fence_strip_index_agrees_with_testing_every_edge() {
    // A jagged 200-spike star with a hole; points and segments on a grid.
    let ring = |n: usize, r: &dyn Fn(usize) -> f64| -> Vec<Point> {
        let mut v: Vec<Point> = (0..n)
            .map(|i| {
                let a = i as f64 / n as f64 * std::f64::consts::TAU;
                Point::new(r(i) * a.cos(), r(i) * a.sin())
            })
            .collect();
        v.push(v[0]);
        v
    };
    let rings = vec![
        ring(200, &|i| {
            if i % 2 == 0 {
                10.0
            } else {
                6.0 + (i % 7) as f64 * 0.3
            }
        }),
        ring(9, &|i| 1.0 + (i % 3) as f64 * 0.5),
    ];
    let index = planar::StripIndex::new(&rings);
    for i in 0..=60 {
        for j in 0..=60 {
            let p = Point::new(-12.0 + i as f64 * 0.4, -12.0 + j as f64 * 0.4 + 0.013);
            assert_eq!(index.loc(p), planar::polygon_loc(&rings, p), "{p:?}");
            let q = Point::new(p.y * 0.7, -p.x * 1.1);
            let (mut fast, mut slow) = (Vec::new(), Vec::new());
            index.hits(p, q, &mut fast);
            for e in rings.iter().flat_map(|r| r.windows(2)) {
                planar::segment_hits(p, q, e[0], e[1], &mut slow);
            }
            for v in [&mut fast, &mut slow] {
                v.sort_by(f64::total_cmp);
                v.dedup();
            }
            assert_eq!(fast, slow, "{p:?} -> {q:?}");
        }
    }
}

#[test]
fn fence_touched_at_a_vertex_is_no_pass_and_entered_through_one_is_one_enter() {
    let f = fence(&[Detect::Enter, Detect::Exit, Detect::Cross]);
    // Diagonals through the corner (0, 0) of the square [0, 10]².
    assert_eq!(run(&f, &[(0, -1.0, 1.0), (100, 1.0, -1.0)]), vec![]);
    assert_eq!(
        run(&f, &[(0, -1.0, -1.0), (100, 1.0, 1.0)]),
        vec![(50, 0.0, 0.0, "enter")]
    );
    // Along an edge: on the boundary is inside, so a pass.
    assert_eq!(
        run(&f, &[(0, -5.0, 0.0), (100, 15.0, 0.0)]),
        vec![(25, 0.0, 0.0, "cross")]
    );
}

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
            index.hits(p, q, 0, &mut fast);
            for e in rings.iter().flat_map(|r| r.windows(2)) {
                planar::segment_hits(p, q, e[0], e[1], 0, &mut slow);
            }
            // Each edge once: the same hits, not merely the same set.
            for v in [&mut fast, &mut slow] {
                v.sort_by(|a, b| a.s.total_cmp(&b.s));
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

/// A comb of `teeth` teeth (each tooth's edges span the comb's height, so
/// every strip of the index holds every edge): x in [0, 2·teeth], the
/// spine y in [0, 1], teeth up to y = 10 at even x.
fn comb(teeth: usize) -> Fence {
    let mut ring = vec![[0.0, 0.0], [2.0 * teeth as f64, 0.0]];
    for i in (0..teeth).rev() {
        let x = 2.0 * i as f64;
        ring.extend([[x + 1.0, 10.0], [x + 0.5, 10.0], [x + 0.5, 1.0], [x, 1.0]]);
    }
    ring.pop();
    ring.push([0.0, 10.0]);
    ring.push([0.0, 0.0]);
    let g = Geometry::from_geojson(&json!({"type": "Polygon", "coordinates": [ring]}))
        .expect("a valid comb");
    Fence::new(g, &[Detect::Enter, Detect::Exit, Detect::Cross]).expect("a polygon fence")
}

/// A segment across every tooth of a comb costs O(edges), not a
/// point-in-polygon per crossing (O(edges²)): counted in edge tests, not
/// timed. Its events are every crossing, in order.
#[test]
fn a_segment_across_a_comb_costs_its_edges_not_their_square() {
    for teeth in [50usize, 500, 2_490] {
        let f = comb(teeth);
        let edges = 4 * teeth + 3;
        planar::visits::take();
        let w = 2.0 * teeth as f64;
        let events = run(&f, &[(0, -1.0, 5.0), (1_000_000_000, w + 1.0, 5.3)]);
        let tests = planar::visits::take();
        eprintln!("{teeth} teeth, {edges} edges: {tests} edge tests");
        assert_eq!(
            events.len(),
            teeth + 1,
            "a cross per tooth and the x = 0 side"
        );
        assert!(events.iter().all(|e| e.3 == "cross"));
        assert!(events.windows(2).all(|e| e[0].0 < e[1].0), "in time order");
        assert!(
            tests <= 4 * edges as u64,
            "{teeth} teeth: {tests} edge tests for {edges} edges"
        );
    }
}

/// The side of each stretch of a segment read at its middle for every
/// stretch (the fence's rule before clean crossings flipped it): the
/// events of `Fence::step` must be the same, on jagged fences, through
/// vertices and along edges.
#[test]
fn flipping_at_clean_crossings_gives_the_events_of_reading_every_stretch() {
    let star: Vec<[f64; 2]> = (0..=120)
        .map(|i| {
            let a = (i % 120) as f64 / 120.0 * std::f64::consts::TAU;
            let r = if i % 2 == 0 { 10.0 } else { 4.0 };
            [
                (r * a.cos() * 1e3).round() / 1e3,
                (r * a.sin() * 1e3).round() / 1e3,
            ]
        })
        .collect();
    let square =
        |x: f64, y: f64, s: f64| vec![[x, y], [x + s, y], [x + s, y + s], [x, y + s], [x, y]];
    let fences = [
        json!({"type": "Polygon", "coordinates": [star]}),
        // Overlapping polygons and one with a hole: a crossing of one
        // polygon's edge inside another changes nothing.
        json!({"type": "MultiPolygon", "coordinates": [
            [square(-8.0, -8.0, 10.0), square(-5.0, -5.0, 4.0)],
            [square(-2.0, -2.0, 10.0)]]}),
    ];
    let all = [
        Detect::Enter,
        Detect::Exit,
        Detect::Inside,
        Detect::Outside,
        Detect::Cross,
    ];
    let mut seed = 0x5eed_u64;
    let mut next = |lo: f64, hi: f64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let r = (seed >> 11) as f64 / (1u64 << 53) as f64;
        lo + (hi - lo) * r
    };
    let mut crossings = 0;
    for fence_json in &fences {
        let g = Geometry::from_geojson(fence_json).expect("a valid fence");
        let f = Fence::new(g.clone(), &all).expect("a fence");
        let rings: Vec<Vec<Point>> = match &fence_json["type"] {
            t if t == "Polygon" => vec![fence_json["coordinates"][0].clone()],
            _ => fence_json["coordinates"]
                .as_array()
                .expect("polygons")
                .iter()
                .flat_map(|p| p.as_array().expect("rings").clone())
                .collect(),
        }
        .iter()
        .map(|r| {
            r.as_array()
                .expect("a ring")
                .iter()
                .map(|c| Point::new(c[0].as_f64().expect("x"), c[1].as_f64().expect("y")))
                .collect()
        })
        .collect();
        for i in 0..3_000 {
            // Grid points (on vertices and edges) a third of the time.
            let mut point = |grid: bool| {
                let (x, y) = (next(-12.0, 12.0), next(-12.0, 12.0));
                if grid {
                    Point::new(x.round(), y.round())
                } else {
                    Point::new(x, y)
                }
            };
            let (p0, p1) = (point(i % 3 == 0), point(i % 3 == 0));
            let track = [(0, p0.x, p0.y), (1_000_000, p1.x, p1.y)];
            let events = run(&f, &track);
            crossings += events.len() - 2;
            assert_eq!(
                events,
                reference(&f, &rings, p0, p1),
                "{fence_json} {p0:?} -> {p1:?}"
            );
        }
    }
    assert!(crossings > 10_000, "{crossings} crossings");
}

/// The events of one segment, each stretch's side read at its middle.
fn reference(
    f: &Fence,
    rings: &[Vec<Point>],
    p0: Point,
    p1: Point,
) -> Vec<(Micros, f64, f64, &'static str)> {
    let (inside0, inside1) = (f.covers(p0), f.covers(p1));
    let side = |inside: bool| if inside { "inside" } else { "outside" };
    let mut out = vec![(0, p0.x, p0.y, side(inside0))];
    let mut hits = Vec::new();
    for e in rings.iter().flat_map(|r| r.windows(2)) {
        planar::segment_hits(p0, p1, e[0], e[1], 0, &mut hits);
    }
    let mut hits: Vec<f64> = hits.iter().map(|h| h.s).collect();
    hits.sort_by(f64::total_cmp);
    hits.dedup_by(|a, b| (*a - *b).abs() <= 1e-12);
    let mut crossing = |s: f64, entering: bool| {
        let t = (s * 1e6).round() as Micros;
        let q = planar::lerp(p0, p1, s);
        let d = match (inside0 || inside1, entering) {
            (true, true) => "enter",
            (true, false) => "exit",
            (false, true) => "cross",
            (false, false) => return,
        };
        out.push((t, q.x, q.y, d));
    };
    let (mut now, mut from) = (inside0, 0.0);
    for to in hits.into_iter().chain(std::iter::once(1.0)) {
        let next = if to > from {
            f.covers(planar::lerp(p0, p1, (from + to) / 2.0))
        } else {
            now
        };
        if next != now {
            crossing(from, next);
            now = next;
        }
        from = to;
    }
    if now != inside1 {
        crossing(1.0, inside1);
    }
    out.push((1_000_000, p1.x, p1.y, side(inside1)));
    out
}

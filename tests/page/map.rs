//! The map of a feature's positions on the page: what the server tells it
//! (a position query's reference system and geometry), and what a real
//! browser draws of a track, its fence and the detections, checked on the
//! pixels of its screenshot.

use super::cdp::Browser;
use crate::serve::{Serve, register};

/// The positions of ship s1.
pub const S: &str = "/collections/ships/items/s1/tgsequence";

/// A square fence, lon 2.811..2.831, lat 51.2..51.22 (the book's walk-through, positions.md).
const FENCE: &str = r#"{"type":"Polygon","coordinates":[[[2.811,51.2],[2.831,51.2],[2.831,51.22],[2.811,51.22],[2.811,51.2]]]}"#;

#[tokio::test]
async fn a_position_querys_link_gives_its_crs_and_the_geometry_the_map_draws() {
    let server = Serve::start("map-link", &[], &[]);
    let mut client = server.client();
    let fence = register(&mut client, S, &format!(r#"{{"geofence":{FENCE}}}"#)).await;
    let track = register(&mut client, S, r#"{"operation":"position"}"#).await;
    let fence_link = client.get(&fence).await.json();
    assert_eq!(fence_link["crs"], "EPSG:4326");
    let want: serde_json::Value = serde_json::from_str(FENCE).unwrap();
    assert_eq!(fence_link["geometry"], want);
    let track_link = client.get(&track).await.json();
    assert_eq!(track_link["crs"], "EPSG:4326");
    assert!(track_link.get("geometry").is_none(), "{track_link}");
    // A list leaves the geometries out (up to 1 MiB each), not the crs.
    let list = client.get(&format!("{S}/queries")).await.json();
    let queries = list["queries"].as_array().unwrap();
    assert_eq!(queries.len(), 2);
    for q in queries {
        assert_eq!(q["crs"], "EPSG:4326", "{q}");
        assert!(q.get("geometry").is_none(), "{q}");
    }
    // A property's query has neither.
    let speed = register(
        &mut client,
        "/collections/ships/items/s1/tproperties/speed",
        r#"{"operation":"abs"}"#,
    )
    .await;
    let link = client.get(&speed).await.json();
    assert!(
        link.get("crs").is_none() && link.get("geometry").is_none(),
        "{link}"
    );
}

/// A decoded screenshot: width, height and RGBA pixels.
pub struct Picture {
    pub width: usize,
    pub height: usize,
    rgba: Vec<u8>,
}

impl Picture {
    pub fn decode(png: &[u8]) -> Picture {
        let mut decoder = ::png::Decoder::new(std::io::Cursor::new(png));
        decoder.set_transformations(::png::Transformations::EXPAND | ::png::Transformations::ALPHA);
        let mut reader = decoder.read_info().expect("a PNG");
        let mut buffer = vec![0; reader.output_buffer_size().expect("a PNG of a sane size")];
        let info = reader.next_frame(&mut buffer).expect("a PNG's frame");
        assert_eq!(info.bit_depth, ::png::BitDepth::Eight);
        assert_eq!(info.color_type, ::png::ColorType::Rgba);
        buffer.truncate(info.buffer_size());
        Picture {
            width: info.width as usize,
            height: info.height as usize,
            rgba: buffer,
        }
    }

    /// The pixels within a small distance of `colour` (anti-aliased edges
    /// blend into the background): how many, and their bounding box
    /// `[x0, y0, x1, y1]`.
    pub fn find(&self, colour: [u8; 3]) -> (usize, [usize; 4]) {
        let mut count = 0;
        let mut bbox = [usize::MAX, usize::MAX, 0, 0];
        for (i, px) in self.rgba.chunks_exact(4).enumerate() {
            let near = px[..3]
                .iter()
                .zip(colour)
                .all(|(&a, b)| a.abs_diff(b) <= 12);
            if near {
                let (x, y) = (i % self.width, i / self.width);
                count += 1;
                bbox = [
                    bbox[0].min(x),
                    bbox[1].min(y),
                    bbox[2].max(x),
                    bbox[3].max(y),
                ];
            }
        }
        (count, bbox)
    }
}

/// The page's colours (page.html's style): a first track, a fence's
/// outline, an `enter` and an `exit` mark.
pub const TRACK: [u8; 3] = [0x15, 0x65, 0xc0];
const FENCE_LINE: [u8; 3] = [0xef, 0x6c, 0x00];
const ENTER: [u8; 3] = [0x2e, 0x7d, 0x32];
const EXIT: [u8; 3] = [0xc6, 0x28, 0x28];

/// The map's area on the page, its legend below included.
pub const MAP_AREA: &str = "(() => { const m = $('map').getBoundingClientRect(), \
    l = $('maplegend').getBoundingClientRect(); \
    return [m.x + scrollX, m.y + scrollY, m.width, l.bottom - m.top]; })()";

pub fn clip(value: &serde_json::Value) -> [f64; 4] {
    let v: Vec<f64> = value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    [v[0], v[1], v[2], v[3]]
}

/// Where a copy of the screenshot goes, for a person to look at:
/// `$MFSTREAM_MAP_PNG`, else nowhere.
pub fn keep(png: &[u8], name: &str) {
    if let Some(dir) = std::env::var_os("MFSTREAM_MAP_PNG") {
        std::fs::write(std::path::Path::new(&dir).join(name), png).unwrap();
    }
}

#[tokio::test]
#[ignore = "needs chromium: apt-get install chromium"]
async fn the_map_draws_a_track_its_fence_and_the_detections_in_a_real_browser() {
    let server = Serve::start("map-browser", &[], &[]);
    let mut client = server.client();
    register(&mut client, S, r#"{"operation":"position"}"#).await;
    let fence = register(
        &mut client,
        S,
        &format!(r#"{{"geofence":{FENCE},"detect":["enter","exit"]}}"#),
    )
    .await;
    register(&mut client, S, r#"{"operation":"speed"}"#).await;
    let ship = std::fs::read_to_string(crate::util::root().join("examples/ship.ndjson")).unwrap();
    let response = client.post(&format!("{S}/ingest"), &ship).await;
    assert_eq!(response.status, 202, "{response:?}");
    assert_eq!(response.json()["queries"], 3);
    // The detections are out before the page opens: it reads them from
    // the replay buffer, as a late subscriber does.
    let mut detections = server.subscribe(&format!("{fence}/stream"), &[]).await;
    crate::serve::take(&mut detections, 2).await;

    let mut browser = Browser::start("map-profile");
    browser.navigate(&format!("http://{}/?cid=ships&fid=s1&map=1", server.addr));
    // An event, not a sleep: the page's promise that the map has drawn
    // the 20 positions, the fence, both detections and speed labels.
    let drawn =
        browser.evaluate("mapDrawn({tracks: 1, points: 20, fences: 1, detects: 2, labels: 1})");
    assert_eq!(drawn["tracks"], 1, "{drawn}");
    assert_eq!(drawn["points"], 20, "{drawn}");
    let area = clip(&browser.evaluate(MAP_AREA));
    let png = browser.screenshot(area);
    keep(&png, "map.png");
    let picture = Picture::decode(&png);
    assert!(
        picture.width >= 600 && picture.height >= 300,
        "{}x{}",
        picture.width,
        picture.height
    );
    let (track, track_box) = picture.find(TRACK);
    let (fence_line, fence_box) = picture.find(FENCE_LINE);
    let (enter, _) = picture.find(ENTER);
    let (exit, _) = picture.find(EXIT);
    let said = browser.said();
    assert!(track > 300, "{track} track pixels; chromium said:\n{said}");
    assert!(
        fence_line > 300,
        "{fence_line} fence pixels; chromium said:\n{said}"
    );
    assert!(enter > 20 && exit > 20, "{enter} enter, {exit} exit pixels");
    // Fitted to the data: the track (2.800 to 2.838 E) is most of the
    // map's width, and the fence (2.811 to 2.831 E) is inside it, about
    // half as wide.
    let width = |b: [usize; 4]| (b[2] - b[0]) as f64;
    assert!(
        width(track_box) > 0.6 * picture.width as f64,
        "{track_box:?}"
    );
    let ratio = width(fence_box) / width(track_box);
    assert!(
        (0.4..0.65).contains(&ratio),
        "fence {fence_box:?}, track {track_box:?}"
    );
    assert!(fence_box[0] > track_box[0] && fence_box[2] < track_box[2]);
    // Web Mercator: the fence, 0.02° by 0.02° at 51.21° N, is 1/cos(51.21°)
    // = 1.597 times as tall as it is wide (equirectangular would draw a
    // square); its 3-pixel outline changes that by under 1%.
    let height = |b: [usize; 4]| (b[3] - b[1]) as f64;
    let aspect = height(fence_box) / width(fence_box);
    let want = 1.0 / 51.21f64.to_radians().cos();
    assert!((aspect / want - 1.0).abs() < 0.03, "{aspect}, not {want}");
}

#[tokio::test]
#[ignore = "needs chromium: apt-get install chromium"]
async fn a_track_across_the_antimeridian_is_drawn_across_it_not_back_around_the_world() {
    let server = Serve::start("map-dateline", &[], &[]);
    let mut client = server.client();
    let d1 = "/collections/ships/items/d1/tgsequence";
    register(&mut client, d1, r#"{"operation":"position"}"#).await;
    // East across 180°: 179.95, 179.96, … 179.99, -180.00, -179.99, … in
    // steps of 0.01°.
    let body: String = (0..12)
        .map(|i| {
            let lon = 179.95 + 0.01 * f64::from(i);
            let lon = if lon >= 180.0 { lon - 360.0 } else { lon };
            format!(
                "{{\"datetime\":\"2026-01-01T00:00:{i:02}Z\",\"coordinates\":[{lon:.2},-16.5]}}\n"
            )
        })
        .collect();
    let response = client.post(&format!("{d1}/ingest"), &body).await;
    assert_eq!(response.status, 202, "{response:?}");

    let mut browser = Browser::start("map-dateline-profile");
    browser.navigate(&format!("http://{}/?cid=ships&fid=d1&map=1", server.addr));
    browser.evaluate("mapDrawn({tracks: 1, points: 12})");
    let points = browser.evaluate("document.querySelector('#map .track').getAttribute('points')");
    let xs: Vec<f64> = points
        .as_str()
        .unwrap()
        .split(' ')
        .map(|p| p.split(',').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(xs.len(), 12, "{points}");
    // Evenly spaced, eastwards, across the map: not two clusters at its
    // edges joined by a line across the world.
    let steps: Vec<f64> = xs.windows(2).map(|w| w[1] - w[0]).collect();
    for step in &steps {
        assert!((step - steps[0]).abs() < 0.5 && *step > 0.0, "{steps:?}");
    }
    assert!(xs[11] - xs[0] > 500.0, "{xs:?}");
    let area = clip(&browser.evaluate(MAP_AREA));
    keep(&browser.screenshot(area), "map-dateline.png");
}

#[tokio::test]
#[ignore = "needs chromium: apt-get install chromium"]
async fn a_fences_hole_is_cut_out_and_a_distance_target_is_drawn() {
    let server = Serve::start("map-hole", &[], &[]);
    let mut client = server.client();
    let h1 = "/collections/ships/items/h1/tgsequence";
    register(&mut client, h1, r#"{"operation":"position"}"#).await;
    // A square of 1° with a hole of 0.5°, and a port at its corner.
    register(
        &mut client,
        h1,
        r#"{"geofence":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1],[0,0]],
            [[0.25,0.25],[0.75,0.25],[0.75,0.75],[0.25,0.75],[0.25,0.25]]]}}"#,
    )
    .await;
    register(
        &mut client,
        h1,
        r#"{"operation":"distance","geometry":{"type":"Point","coordinates":[1.2,1.2]}}"#,
    )
    .await;
    let body: String = (0..5)
        .map(|i| {
            let at = -0.2 + 0.3 * f64::from(i);
            format!("{{\"datetime\":\"2026-01-01T00:00:0{i}Z\",\"coordinates\":[{at},{at}]}}\n")
        })
        .collect();
    let response = client.post(&format!("{h1}/ingest"), &body).await;
    assert_eq!(response.status, 202, "{response:?}");

    let mut browser = Browser::start("map-hole-profile");
    browser.navigate(&format!("http://{}/?cid=ships&fid=h1&map=1", server.addr));
    // The distance query's layer may load after the others: wait for it too.
    browser.evaluate("mapDrawn({tracks: 1, points: 5, fences: 1, targets: 1, detects: 1})");
    let fence = browser.evaluate(
        "(() => { const f = document.querySelector('#map .fence'); \
         return [f.getAttribute('d').split('M').length - 1, getComputedStyle(f).fillRule]; })()",
    );
    assert_eq!(
        fence,
        serde_json::json!([2, "evenodd"]),
        "one path, two rings"
    );
    // What is drawn at the hole's centre is the map, not the fence.
    let hole = browser.evaluate(
        "(() => { $('map').scrollIntoView(); \
         const f = document.querySelector('#map .fence').getBBox(), \
         m = $('map').getBoundingClientRect(), k = m.width / 800; \
         const e = document.elementFromPoint(m.x + (f.x + f.width / 2) * k, \
         m.y + (f.y + f.height / 2) * k + 20 * k); return e.id || e.getAttribute('class'); })()",
    );
    assert_eq!(hole, "map");
    let targets = browser.evaluate("document.querySelectorAll('#map circle.target').length");
    assert_eq!(targets, 1);
    let area = clip(&browser.evaluate(MAP_AREA));
    keep(&browser.screenshot(area), "map-hole.png");
}

#[tokio::test]
#[ignore = "needs chromium: apt-get install chromium"]
async fn a_planar_track_is_drawn_as_it_is_north_up() {
    let server = Serve::start("map-planar", &[], &[]);
    let mut client = server.client();
    let p1 = "/collections/ships/items/p1/tgsequence";
    register(
        &mut client,
        p1,
        r#"{"operation":"position","crs":"EPSG:32631"}"#,
    )
    .await;
    // UTM zone 31N metres: 1 km east, then 1 km north.
    let body = [
        (0, 500_000, 5_670_000),
        (1, 501_000, 5_670_000),
        (2, 501_000, 5_671_000),
    ]
    .map(|(s, x, y)| {
        format!("{{\"datetime\":\"2026-01-01T00:00:0{s}Z\",\"coordinates\":[{x},{y}]}}\n")
    })
    .concat();
    let response = client.post(&format!("{p1}/ingest"), &body).await;
    assert_eq!(response.status, 202, "{response:?}");

    let mut browser = Browser::start("map-planar-profile");
    browser.navigate(&format!("http://{}/?cid=ships&fid=p1&map=1", server.addr));
    browser.evaluate("mapDrawn({tracks: 1, points: 3})");
    let points = browser.evaluate("document.querySelector('#map .track').getAttribute('points')");
    let xy: Vec<Vec<f64>> = points
        .as_str()
        .unwrap()
        .split(' ')
        .map(|p| p.split(',').map(|v| v.parse().unwrap()).collect())
        .collect();
    // East is right, north is up (SVG's y grows down), and a metre is as
    // long either way.
    let (east, north) = (xy[1][0] - xy[0][0], xy[1][1] - xy[2][1]);
    assert!(east > 100.0 && (xy[1][1] - xy[0][1]).abs() < 0.1, "{xy:?}");
    assert!((north - east).abs() < 0.2, "{xy:?}");
    let legend = browser.evaluate("$('maplegend').textContent");
    assert!(legend.as_str().unwrap().contains("EPSG:32631"), "{legend}");
    // A geodetic feature's query is not drawn into the planar view.
    register(
        &mut client,
        "/collections/ships/items/g1/tgsequence",
        r#"{"operation":"position"}"#,
    )
    .await;
    let mixed = browser.evaluate(
        "(async () => { $('fid').value = 'g1'; await mapFeature(); \
         return [map.layers.length, $('log').textContent.includes('the map shows EPSG:32631, \
         not EPSG:4326: clear it first')]; })()",
    );
    assert_eq!(mixed, serde_json::json!([1, true]));
}

#[tokio::test]
async fn a_restarted_geofence_query_still_gives_the_map_its_fence() {
    let state = crate::util::TempDir::new("map-state");
    let dir = state.path().to_str().unwrap();
    let mut server = Serve::start("map-state-1", &["--state", dir], &[]);
    let mut client = server.client();
    let fence = register(&mut client, S, &format!(r#"{{"geofence":{FENCE}}}"#)).await;
    assert!(server.terminate().success());

    let server = Serve::start("map-state-2", &["--state", dir], &[]);
    let link = server.client().get(&fence).await.json();
    assert_eq!(link["status"], "running", "{link}");
    assert_eq!(link["crs"], "EPSG:4326");
    let want: serde_json::Value = serde_json::from_str(FENCE).unwrap();
    assert_eq!(link["geometry"], want);
}

//! `serve --tiles URL`: a template the page draws map tiles from, under
//! its map, with its policy letting it load them from that origin only.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::cdp::Browser;
use super::map::{MAP_AREA, Picture, S, TRACK, clip, keep};
use crate::serve::{Serve, register, serve_exits};

#[test]
fn a_bad_tiles_template_stops_the_server_naming_the_flag_and_the_form() {
    let output = serve_exits(
        "tiles-bad",
        &["--tiles", "https://{s}.tile.example/{z}/{x}/{y}.png"],
    );
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--tiles \"https://{s}.tile.example/{z}/{x}/{y}.png\"")
            && stderr.contains("https://tile.example/{z}/{x}/{y}.png"),
        "{stderr}"
    );
    let long = format!("https://tile.example/{{z}}/{{x}}/{{y}}?{}", "k".repeat(600));
    let output = serve_exits("tiles-long", &["--tiles", &long]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("at most 512") && stderr.len() < 400,
        "{stderr}"
    );
}

#[tokio::test]
async fn the_page_gets_the_tiles_template_and_may_load_images_from_its_origin_only() {
    let template = "https://tile.example:8443/{z}/{x}/{y}.png?key=a&b=c";
    let server = Serve::start("tiles-page", &["--tiles", template], &[]);
    let page = server.client().get("/").await;
    assert_eq!(page.status, 200);
    let policy = page.header("content-security-policy").unwrap();
    assert!(
        policy.contains("img-src 'self' https://tile.example:8443;"),
        "{policy}"
    );
    // As an attribute's value, `&` escaped.
    assert!(
        page.body.contains(
            r#"<meta name="mfstream-tiles" content="https://tile.example:8443/{z}/{x}/{y}.png?key=a&amp;b=c">"#
        ),
        "{}",
        &page.body[..600]
    );
    let plain = Serve::start("tiles-none", &[], &[]);
    let page = plain.client().get("/").await;
    let policy = page.header("content-security-policy").unwrap();
    assert!(policy.contains("img-src 'self';"), "{policy}");
    assert!(!page.body.contains("<meta name=\"mfstream-tiles\""));
}

/// The colour of every tile the test's tile server serves.
const TILE: [u8; 3] = [0xc8, 0xe6, 0xc9];

/// A 256×256 PNG of one colour.
fn tile_png() -> Vec<u8> {
    let mut png = Vec::new();
    let mut encoder = ::png::Encoder::new(&mut png, 256, 256);
    encoder.set_color(::png::ColorType::Rgb);
    encoder.set_depth(::png::BitDepth::Eight);
    let mut writer = encoder.write_header().unwrap();
    writer.write_image_data(&TILE.repeat(256 * 256)).unwrap();
    writer.finish().unwrap();
    png
}

/// A tile server on loopback (another origin than the page's): answers
/// every GET with the tile, and keeps the paths asked for.
async fn tile_server() -> (std::net::SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let paths = Arc::new(Mutex::new(Vec::new()));
    let tile = Arc::new(tile_png());
    let served = paths.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (tile, served) = (tile.clone(), served.clone());
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut byte).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&byte[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&head);
                let path = head.split(' ').nth(1).unwrap_or_default().to_owned();
                served.lock().unwrap().push(path);
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n",
                    tile.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
                let _ = socket.write_all(&tile).await;
            });
        }
    });
    (addr, paths)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium: apt-get install chromium"]
async fn the_map_draws_tiles_from_the_template_under_the_track_in_a_real_browser() {
    let (tiles, paths) = tile_server().await;
    let template = format!("http://{tiles}/{{z}}/{{x}}/{{y}}.png");
    let server = Serve::start("tiles-browser", &["--tiles", &template], &[]);
    let mut client = server.client();
    register(&mut client, S, r#"{"operation":"position"}"#).await;
    let ship = std::fs::read_to_string(crate::util::root().join("examples/ship.ndjson")).unwrap();
    let response = client.post(&format!("{S}/ingest"), &ship).await;
    assert_eq!(response.status, 202, "{response:?}");

    let mut browser = Browser::start("tiles-profile");
    browser.navigate(&format!("http://{}/?cid=ships&fid=s1&map=1", server.addr));
    // Every tile drawn has loaded (the page counts their load events).
    let drawn = browser.evaluate(
        "mapDrawn({tracks: 1, points: 20, tiles: 1}).then(() => \
         until(() => map.drawn.tilesLoaded === map.drawn.tiles)).then(() => map.drawn)",
    );
    let count = drawn["tiles"].as_u64().unwrap();
    assert!((1..=64).contains(&count), "{drawn}");
    let asked = paths.lock().unwrap().clone();
    assert!(asked.len() as u64 >= count, "{asked:?}");
    // The ship off Ostend (2.800 to 2.838 E, 51.200 to 51.219 N), fitted
    // to 720 by 405 units, is at zoom 14 (tiles closest to 256 units):
    // OpenStreetMap's x = (lon + 180) / 360 * 2^z is 8319.4 to 8321.1, its
    // y = (1 - asinh(tan(lat)) / pi) / 2 * 2^z 5470.5 to 5469.0; the view
    // reaches a tile or two beyond.
    for path in &asked {
        let zxy: Vec<u32> = path
            .trim_start_matches('/')
            .trim_end_matches(".png")
            .split('/')
            .map(|n| n.parse().unwrap())
            .collect();
        assert_eq!(zxy[0], 14, "{path}");
        assert!((8317..=8323).contains(&zxy[1]), "{path}");
        assert!((5467..=5471).contains(&zxy[2]), "{path}");
    }
    let area = clip(&browser.evaluate(MAP_AREA));
    let png = browser.screenshot(area);
    keep(&png, "map-tiles.png");
    let picture = Picture::decode(&png);
    let (tile, _) = picture.find(TILE);
    let (track, _) = picture.find(TRACK);
    let pixels = picture.width * picture.height;
    assert!(tile > pixels / 2, "{tile} tile pixels of {pixels}");
    assert!(
        track > 300,
        "{track} track pixels: the track is over the tiles"
    );
}

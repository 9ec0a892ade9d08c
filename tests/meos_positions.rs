//! The `meos` plugin's position operations (ABI version 3) on libmeos, a
//! second, independent implementation: the same seeded random tracks (some
//! crossing the fence, the antimeridian and high latitudes, with stops and
//! sub-second steps) through `mfstream run` on `local` and on the plugin,
//! every result compared: within 1e-9 relative, or 1 mm / 1e-9 degrees
//! where absolute is the right measure; detections of the same kinds in
//! the same order, at times 1 µs apart at most. Ignored without libmeos.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::util::*;

/// A small deterministic generator (xorshift64*), so the tracks are the
/// same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One feature's track as NDJSON, starting at `(x, y)`, moving by up to
/// `step` degrees, with stops and steps of 0.2 s to 20 s.
fn track(seed: u64, n: usize, (mut x, mut y): (f64, f64), step: f64) -> String {
    let mut rng = Rng(seed);
    let mut t: i64 = 1_767_225_600_000_000;
    let mut out = String::new();
    for i in 0..n {
        let micros = t.rem_euclid(1_000_000);
        let secs = t.div_euclid(1_000_000) - 1_767_225_600;
        let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
        writeln!(
            out,
            r#"{{"datetime":"2026-01-01T{h:02}:{m:02}:{s:02}.{micros:06}Z","coordinates":[{x},{y}]}}"#
        )
        .unwrap();
        t += 200_000 + (rng.next() * 20e6) as i64;
        if i % 17 == 5 {
            continue; // a stop: the same position again
        }
        x += (rng.next() - 0.45) * step;
        y += (rng.next() - 0.5) * step;
        if x > 180.0 {
            x -= 360.0;
        } else if x < -180.0 {
            x += 360.0;
        }
        y = y.clamp(-89.9, 89.9);
    }
    out
}

/// `mfstream run --type T --query QUERY` on `engine` over `input`.
fn run(
    config: &Path,
    meos: &Path,
    engine: &str,
    t: &str,
    query: &str,
    input: &Path,
) -> Vec<serde_json::Value> {
    let output = mfstream_command(&root())
        .args(["run", "--engine", engine, "--type", t, "--query", query])
        .arg("--config")
        .arg(config)
        .env("MFSTREAM_MEOS_LIB", meos)
        .arg(input)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{engine} {query}: {}",
        stderr(&output)
    );
    stdout(&output)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn close(a: f64, b: f64, absolute: f64) -> bool {
    (a - b).abs() <= absolute.max(1e-9 * a.abs().max(b.abs()))
}

fn micros(datetime: &str) -> i64 {
    // 2026-01-01THH:MM:SS[.ffffff]Z, as both write them.
    let time = &datetime[11..datetime.len() - 1];
    let (hms, fraction) = time.split_once('.').unwrap_or((time, "0"));
    let parts: Vec<i64> = hms.split(':').map(|p| p.parse().unwrap()).collect();
    let fraction = format!("{fraction:0<6}");
    (parts[0] * 3600 + parts[1] * 60 + parts[2]) * 1_000_000 + fraction.parse::<i64>().unwrap()
}

/// Every event of `meos` equals `local`'s: `absolute` is the tolerance of
/// a value (and of a coordinate, for detections).
fn assert_same(what: &str, local: &[serde_json::Value], meos: &[serde_json::Value], absolute: f64) {
    assert_eq!(local.len(), meos.len(), "{what}: {local:?}\n{meos:?}");
    for (l, m) in local.iter().zip(meos) {
        if let Some(detect) = l.get("detect") {
            assert_eq!(detect, &m["detect"], "{what}: {l} {m}");
            let (tl, tm) = (
                l["datetime"].as_str().unwrap(),
                m["datetime"].as_str().unwrap(),
            );
            assert!((micros(tl) - micros(tm)).abs() <= 1, "{what}: {l} {m}");
        } else {
            assert_eq!(l["datetime"], m["datetime"], "{what}: {l} {m}");
        }
        match (l.get("value"), l.get("coordinates")) {
            (Some(v), _) => {
                let (a, b) = (v.as_f64().unwrap(), m["value"].as_f64().unwrap());
                assert!(close(a, b, absolute), "{what}: {a} vs {b} ({l} {m})");
            }
            (None, Some(c)) => {
                for k in 0..2 {
                    let (a, b) = (
                        c[k].as_f64().unwrap(),
                        m["coordinates"][k].as_f64().unwrap(),
                    );
                    assert!(close(a, b, absolute), "{what}: {l} {m}");
                }
            }
            (None, None) => panic!("{what}: an event with neither value nor coordinates: {l}"),
        }
    }
}

fn config(dir: &TempDir) -> PathBuf {
    let config = dir.join("engines.toml");
    std::fs::write(&config, entry(&plugin_library("mfstream-plugin-meos"))).unwrap();
    config
}

#[test]
#[ignore = "needs libmeos: eval \"$(jobs/meos/setup.sh)\""]
fn the_meos_plugin_computes_every_position_operation_as_local_does() {
    let meos = meos_lib();
    let dir = TempDir::new("meos-positions");
    let config = config(&dir);
    let fence = r#"{"type":"Polygon","coordinates":[[[-0.05,-0.05],[0.05,-0.05],[0.05,0.05],[-0.05,0.05],[-0.05,-0.05]]]}"#;
    let line = r#"{"type":"LineString","coordinates":[[179.9,60],[-179.9,60.05]]}"#;
    let tracks = [
        ("fence", track(1, 400, (-0.08, 0.0), 0.01)),
        ("dateline", track(2, 300, (179.95, 60.0), 0.02)),
        ("north", track(3, 300, (10.0, 88.5), 0.3)),
        ("south", track(4, 200, (-70.0, -85.0), 0.2)),
    ];
    let mut compared = 0;
    for (name, text) in &tracks {
        let input = dir.join(&format!("{name}.ndjson"));
        std::fs::write(&input, text).unwrap();
        let queries = [
            (r#"{"operation":"speed"}"#.to_owned(), 0.0),
            (r#"{"operation":"cumulativeLength"}"#.to_owned(), 1e-3),
            (r#"{"operation":"azimuth"}"#.to_owned(), 1e-9),
            (r#"{"operation":"position"}"#.to_owned(), 0.0),
            (
                format!(r#"{{"operation":"distance","geometry":{line}}}"#),
                1e-3,
            ),
            (
                format!(r#"{{"operation":"distance","geometry":{fence}}}"#),
                1e-3,
            ),
            (format!(r#"{{"geofence":{fence}}}"#), 1e-8),
            (
                r#"{"operation":"speed","aggregation":"MAX","window":{"type":"COUNT","size":10}}"#
                    .to_owned(),
                0.0,
            ),
            // The host windows the plugin's positions.
            (
                r#"{"aggregation":"LENGTH","window":{"type":"COUNT","size":10}}"#.to_owned(),
                1e-3,
            ),
        ];
        for (query, absolute) in &queries {
            let local = run(&config, &meos, "local", "TGeogPoint", query, &input);
            let plugin = run(&config, &meos, "meos", "TGeogPoint", query, &input);
            assert!(!local.is_empty(), "{name} {query}");
            assert_same(&format!("{name} {query}"), &local, &plugin, *absolute);
            compared += local.len();
        }
    }
    // A long walk of small steps along a fence's edges, in and out many
    // times (where MEOS's intersection flickers at a segment's end).
    let input = dir.join("walk.ndjson");
    std::fs::write(&input, track(6, 20_000, (2.85, 51.2), 2e-4)).unwrap();
    let walk_fence = r#"{"type":"Polygon","coordinates":[[[2.0,51.2],[4.0,51.2],[4.0,52.0],[2.0,52.0],[2.0,51.2]]]}"#;
    let query = format!(r#"{{"geofence":{walk_fence},"detect":["enter","exit","cross"]}}"#);
    let local = run(&config, &meos, "local", "TGeogPoint", &query, &input);
    let plugin = run(&config, &meos, "meos", "TGeogPoint", &query, &input);
    assert!(
        local.len() > 10,
        "the walk crosses the fence: {}",
        local.len()
    );
    assert_same("walk", &local, &plugin, 1e-8);

    // Out of process, the child answers in the bridge protocol's pairing:
    // the same events.
    let isolated_config = dir.join("isolated.toml");
    let library = plugin_library("mfstream-plugin-meos");
    std::fs::write(&isolated_config, isolated(&library)).unwrap();
    let input = dir.join("fence.ndjson");
    for query in [
        r#"{"operation":"speed"}"#.to_owned(),
        format!(r#"{{"geofence":{fence}}}"#),
    ] {
        let in_process = run(&config, &meos, "meos", "TGeogPoint", &query, &input);
        let out_of_process = run(
            &isolated_config,
            &meos,
            "meos",
            "TGeogPoint",
            &query,
            &input,
        );
        assert_eq!(in_process, out_of_process, "{query}");
    }
    // Planar: a projected system, measured by Euclid on both sides.
    let input = dir.join("planar.ndjson");
    std::fs::write(&input, track(5, 200, (500_000.0, 4_000_000.0), 50.0)).unwrap();
    for query in [
        r#"{"operation":"speed","crs":"EPSG:32631"}"#,
        r#"{"operation":"azimuth","crs":"EPSG:32631"}"#,
        r#"{"operation":"cumulativeLength","crs":"EPSG:32631"}"#,
    ] {
        let local = run(&config, &meos, "local", "TGeomPoint", query, &input);
        let plugin = run(&config, &meos, "meos", "TGeomPoint", query, &input);
        assert_same(query, &local, &plugin, 1e-3);
        compared += local.len();
    }
    assert!(compared > 5000, "{compared}");
}

/// Fails naming `what` unless `got` is within `absolute` or 1e-9 relative
/// of `want`.
fn assert_close(what: &str, got: f64, want: f64, absolute: f64) {
    // Azimuths near north compare across 0/360.
    let got = if what.starts_with("azimuth") && (got - want).abs() > 180.0 {
        got - 360.0f64.copysign(got - want)
    } else {
        got
    };
    assert!(
        close(got, want, absolute),
        "{what}: plugin {got:?}, pymeos {want:?}"
    );
}

#[test]
#[ignore = "needs libmeos and MFSTREAM_PYMEOS_PYTHON (pymeos, shapely): eval \"$(jobs/meos/setup.sh)\""]
fn the_meos_plugin_agrees_with_pymeos_and_shapely() {
    let meos = meos_lib();
    let python = std::env::var_os("MFSTREAM_PYMEOS_PYTHON");
    let python = require(
        python,
        "a Python with pymeos",
        "eval \"$(jobs/meos/setup.sh)\"",
    );
    let dir = TempDir::new("meos-positions-pymeos");
    let config = config(&dir);
    let fence = r#"{"type":"Polygon","coordinates":[[[-0.05,-0.05],[0.05,-0.05],[0.05,0.05],[-0.05,0.05],[-0.05,-0.05]]]}"#;
    let line = r#"{"type":"LineString","coordinates":[[-0.1,0.1],[0.2,-0.1],[179.9,60]]}"#;
    for (name, text) in [
        ("fence", track(11, 300, (-0.08, 0.0), 0.01)),
        ("dateline", track(12, 200, (179.95, 60.0), 0.02)),
        ("north", track(13, 200, (10.0, 88.5), 0.3)),
    ] {
        let input = dir.join(&format!("{name}.ndjson"));
        std::fs::write(&input, &text).unwrap();
        let oracle = std::process::Command::new(&python)
            .arg(root().join("tests/oracle/geo_oracle.py"))
            .args(["--crs", "EPSG:4326", "--fence", fence, "--geometry", line])
            .stdin(std::fs::File::open(&input).unwrap())
            .output()
            .unwrap();
        assert!(oracle.status.success(), "{}", stderr(&oracle));
        let rows: Vec<serde_json::Value> = stdout(&oracle)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let instants: std::collections::HashMap<String, &serde_json::Value> = rows
            .iter()
            .filter(|r| r["kind"] == "instant")
            .map(|r| (r["datetime"].as_str().unwrap().to_owned(), r))
            .collect();
        let at = |e: &serde_json::Value| {
            let t = micros(e["datetime"].as_str().unwrap());
            *instants
                .values()
                .find(|r| micros(r["datetime"].as_str().unwrap()) == t)
                .unwrap_or_else(|| panic!("{name}: no oracle row at {e}"))
        };
        for (op, abs) in [
            ("speed", 0.0),
            ("azimuth", 1e-9),
            ("cumulativeLength", 1e-3),
        ] {
            let query = format!(r#"{{"operation":"{op}","onError":"fail"}}"#);
            let events = run(&config, &meos, "meos", "TGeogPoint", &query, &input);
            let with_value = instants.values().filter(|r| !r[op].is_null()).count();
            assert_eq!(events.len(), with_value, "{name} {op}");
            for e in &events {
                let want = at(e)[op].as_f64().unwrap();
                assert_close(
                    &format!("{op} {name} {e}"),
                    e["value"].as_f64().unwrap(),
                    want,
                    abs,
                );
            }
        }
        let query = format!(r#"{{"operation":"distance","geometry":{line}}}"#);
        for e in run(&config, &meos, "meos", "TGeogPoint", &query, &input) {
            let want = at(&e)["distance"][0].as_f64().unwrap();
            assert_close(
                &format!("distance {name} {e}"),
                e["value"].as_f64().unwrap(),
                want,
                1e-3,
            );
        }
        let query = format!(r#"{{"geofence":{fence}}}"#);
        let detected = run(&config, &meos, "meos", "TGeogPoint", &query, &input);
        let expected: Vec<&serde_json::Value> =
            rows.iter().filter(|r| r["kind"] == "event").collect();
        let kinds = |e: &[&serde_json::Value]| -> Vec<String> {
            e.iter()
                .map(|e| e["detect"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(
            kinds(&detected.iter().collect::<Vec<_>>()),
            kinds(&expected),
            "{name}"
        );
        for (e, x) in detected.iter().zip(&expected) {
            let t = micros(e["datetime"].as_str().unwrap());
            assert!(
                (t - micros(x["datetime"].as_str().unwrap())).abs() <= 1,
                "{e} {x}"
            );
            for k in 0..2 {
                let (got, want) = (
                    e["coordinates"][k].as_f64().unwrap(),
                    x["coordinates"][k].as_f64().unwrap(),
                );
                assert_close(&format!("fence {name} {e}"), got, want, 1e-8);
            }
        }
    }
}

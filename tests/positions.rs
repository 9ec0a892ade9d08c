//! `mfstream run --type TGeogPoint|TGeomPoint`: positions from a file, the
//! same operations and events as the server's.

use crate::util::*;

/// The fence of the book's walk-through (positions.md): lon 2.811..2.831, lat 51.2..51.22.
const FENCE: &str = r#"{"type":"Polygon","coordinates":[[[2.811,51.2],[2.831,51.2],[2.831,51.22],[2.811,51.22],[2.811,51.2]]]}"#;

fn run(args: &[&str]) -> Vec<serde_json::Value> {
    // A directory of its own for each run: tests run at once.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = TempDir::new(&format!("run-positions-{n}"));
    let output = mfstream_command(dir.path())
        .arg("run")
        .args(args)
        .arg(root().join("examples/ship.ndjson"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    stdout(&output)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn run_measures_geodetic_positions_from_a_file() {
    let speeds = run(&["--type", "TGeogPoint", "--op", "speed"]);
    // None at the first of the 20 positions.
    assert_eq!(speeds.len(), 19);
    assert_eq!(speeds[0]["datetime"], "2026-01-01T00:00:10Z");
    assert_eq!(speeds[0]["property"], "tgsequence");
    assert_eq!(speeds[0]["operation"], "speed");
    // 0.002° east and 0.001° north near 51.2° N in 10 s: about 18 m/s
    // (the exact figure is geo's, checked against GeographicLib).
    let v = speeds[0]["value"].as_f64().unwrap();
    assert!((17.0..19.5).contains(&v), "{v}");
    let lengths = run(&["--type", "tgeogpoint", "--op", "cumulativeLength"]);
    assert_eq!(lengths.len(), 20);
    assert_eq!(lengths[0]["value"], 0);
    let positions = run(&["--type", "TGeogPoint", "--op", "position"]);
    assert_eq!(
        positions[1],
        serde_json::json!({"datetime":"2026-01-01T00:00:10Z","coordinates":[2.802,51.201],
            "property":"tgsequence","operation":"position"})
    );
}

#[test]
fn run_detects_a_geofence_and_aggregates_a_measure() {
    let query = format!(r#"{{"geofence":{FENCE},"detect":["enter","exit"]}}"#);
    let events = run(&["--type", "TGeogPoint", "--query", &query]);
    let seen: Vec<_> = events
        .iter()
        .map(|e| {
            (
                e["detect"].as_str().unwrap(),
                e["datetime"].as_str().unwrap(),
            )
        })
        .collect();
    // Half way between the samples on either side of each edge.
    assert_eq!(
        seen,
        [
            ("enter", "2026-01-01T00:00:55Z"),
            ("exit", "2026-01-01T00:02:35Z")
        ]
    );
    let max = run(&[
        "--type",
        "TGeogPoint",
        "--query",
        r#"{"operation":"speed","aggregation":"MAX","window":{"type":"TUMBLING","size":1,"unit":"MINUTES"}}"#,
    ]);
    assert_eq!(max.len(), 4, "{max:?}");
    assert_eq!(max[0]["aggregation"], "MAX");
    assert_eq!(max[0]["count"], 5, "no speed at the first position");
}

#[test]
fn run_on_an_engine_without_positions_names_the_engines_that_serve_them() {
    let dir = TempDir::new("run-positions-unserved");
    let config = dir.join("engines.toml");
    std::fs::write(
        &config,
        "[[engine]]\nname = \"plain\"\ncmd_env = \"TEST_JOB_CMD\"\n",
    )
    .unwrap();
    let output = mfstream_command(dir.path())
        .args([
            "run",
            "--engine",
            "plain",
            "--type",
            "TGeogPoint",
            "--op",
            "speed",
        ])
        .arg("--config")
        .arg(&config)
        .env("TEST_JOB_CMD", format!("sh {}", job("echo.sh")))
        .arg(root().join("examples/ship.ndjson"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(
        stderr(&output).contains(
            "the plain engine does not serve positions queries: engines that do are local;"
        ),
        "{}",
        stderr(&output)
    );
    assert!(stdout(&output).is_empty(), "{}", stdout(&output));
}

#[test]
fn run_on_the_shipped_reference_engine_gives_locals_planar_speeds() {
    let dir = TempDir::new("run-positions-reference");
    let input = dir.join("track.ndjson");
    std::fs::write(
        &input,
        "{\"datetime\":\"2026-01-01T00:00:00Z\",\"coordinates\":[0,0]}\n\
         {\"datetime\":\"2026-01-01T00:00:02Z\",\"coordinates\":[3,4]}\n\
         {\"datetime\":\"2026-01-01T00:00:07Z\",\"coordinates\":[3,4]}\n",
    )
    .unwrap();
    let run = |engine: &str| {
        let output = mfstream_command(dir.path())
            .args(["run", "--engine", engine, "--type", "TGeomPoint"])
            .args(["--query", r#"{"operation":"speed","crs":"EPSG:3857"}"#])
            .arg("--config")
            .arg(root().join("engines.toml"))
            // Planar positions need no more than the standard library.
            .env(
                "MFAPI_REFERENCE_CMD",
                format!("python3 -S {}", reference_job()),
            )
            .arg(&input)
            .output()
            .unwrap();
        assert!(output.status.success(), "{engine}: {}", stderr(&output));
        stdout(&output)
    };
    let local = run("local");
    assert_eq!(
        local,
        "{\"datetime\":\"2026-01-01T00:00:02Z\",\"value\":2.5,\"property\":\"tgsequence\",\"operation\":\"speed\"}\n\
         {\"datetime\":\"2026-01-01T00:00:07Z\",\"value\":0,\"property\":\"tgsequence\",\"operation\":\"speed\"}\n"
    );
    assert_eq!(run("reference"), local);
}

#[test]
fn run_refuses_a_scalar_line_for_positions_and_an_unknown_operation() {
    let dir = TempDir::new("run-positions-bad");
    let input = dir.join("mixed.ndjson");
    std::fs::write(
        &input,
        "{\"datetime\":\"2026-01-01T00:00:00Z\",\"coordinates\":[1,2]}\n\
         {\"datetime\":\"2026-01-01T00:00:01Z\",\"value\":3}\n",
    )
    .unwrap();
    let output = mfstream_command(dir.path())
        .args(["run", "--type", "TGeogPoint", "--op", "position"])
        .arg(&input)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(
        stderr(&output).contains("record at 2026-01-01T00:00:01Z has the value 3"),
        "{}",
        stderr(&output)
    );
    let output = mfstream_command(dir.path())
        .args(["run", "--type", "TGeogPoint", "--op", "ln"])
        .arg(&input)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(
        stderr(&output).contains("unknown position operation \"ln\""),
        "{}",
        stderr(&output)
    );
    // And the other way: a position operation on numbers says where it
    // applies (the catalogue's kinds), not that it is unknown.
    let output = mfstream_command(dir.path())
        .args(["run", "--op", "SPEED"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(
        stderr(&output).contains("operation speed applies to positions"),
        "{}",
        stderr(&output)
    );
}

/// A Python with pymeos, geographiclib and shapely (`MFSTREAM_PYMEOS_PYTHON`).
fn pymeos_python() -> std::path::PathBuf {
    std::env::var_os("MFSTREAM_PYMEOS_PYTHON")
        .map(std::path::PathBuf::from)
        .expect("MFSTREAM_PYMEOS_PYTHON names a Python with pymeos: eval \"$(jobs/meos/setup.sh)\"")
}

/// Microseconds since the epoch of `YYYY-MM-DDTHH:MM:SS[.f…]Z`, as
/// mfstream writes a crossing's datetime and this test writes its input.
fn micros(text: &str) -> i64 {
    let n = |a: usize, b: usize| text[a..b].parse::<i64>().unwrap();
    let (y, m, d) = (n(0, 4), n(5, 7), n(8, 10));
    let days = mfstream_model::datetime::days_from_civil(y, m, d);
    let secs = days * 86_400 + n(11, 13) * 3600 + n(14, 16) * 60 + n(17, 19);
    let fraction = text[19..].trim_start_matches('.').trim_end_matches('Z');
    let us = format!("{fraction:0<6}")[..6].parse::<i64>().unwrap_or(0);
    secs * 1_000_000 + us
}

/// A seeded trajectory through every regime the geometry has: a walk in
/// and out of a fence near 51° N with stops (repeated positions) and
/// sub-second steps, a hop across the antimeridian, and a walk near the
/// north pole.
fn trajectory() -> Vec<(String, f64, f64)> {
    let mut seed: u64 = 0x2026_0020;
    let mut uniform = |lo: f64, hi: f64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        lo + (hi - lo) * (seed >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut out = Vec::new();
    let mut us: i64 = 1_767_225_600_000_000;
    let mut push = |us: i64, lon: f64, lat: f64| {
        let secs = us / 1_000_000;
        let text = format!(
            "2026-01-01T{:02}:{:02}:{:02}.{:06}Z",
            (secs / 3600) % 24,
            (secs / 60) % 60,
            secs % 60,
            us % 1_000_000
        );
        out.push((text, lon, lat));
    };
    let (mut lon, mut lat) = (2.8, 51.2);
    for i in 0..120 {
        us += (uniform(0.2, 20.0) * 1e6) as i64;
        if i % 17 != 5 {
            lon += uniform(-0.001, 0.002);
            lat += uniform(-0.001, 0.001);
        }
        push(us, lon, lat);
    }
    for (lon, lat) in [(179.9995, 10.0), (-179.9995, 10.001), (-179.99, 10.002)] {
        us += 30_000_000;
        push(us, lon, lat);
    }
    let (mut lon, mut lat) = (10.0, 89.5);
    for _ in 0..40 {
        us += (uniform(1.0, 60.0) * 1e6) as i64;
        lon = (lon + uniform(-40.0, 40.0)).clamp(-180.0, 180.0);
        lat = (lat + uniform(-0.05, 0.05)).min(89.99);
        push(us, lon, lat);
    }
    out
}

#[test]
#[ignore = "needs MFSTREAM_PYMEOS_PYTHON (pymeos, geographiclib, shapely): eval \"$(jobs/meos/setup.sh)\""]
fn run_agrees_with_pymeos_geographiclib_and_shapely_on_a_seeded_trajectory() {
    let dir = TempDir::new("run-positions-oracle");
    let track = trajectory();
    let input = dir.join("track.ndjson");
    let lines: String = track
        .iter()
        .map(|(t, x, y)| format!("{{\"datetime\":\"{t}\",\"coordinates\":[{x:?},{y:?}]}}\n"))
        .collect();
    std::fs::write(&input, lines).unwrap();
    let fence = r#"{"type":"Polygon","coordinates":[[[2.81,51.19],[2.86,51.19],[2.86,51.24],[2.81,51.24],[2.81,51.19]]]}"#;
    let line = r#"{"type":"LineString","coordinates":[[2.7,51.3],[3.0,51.1],[3.1,51.3]]}"#;
    let oracle = std::process::Command::new(pymeos_python())
        .arg(root().join("tests/oracle/geo_oracle.py"))
        .args(["--crs", "EPSG:4326", "--fence", fence, "--geometry", line])
        .args(["--window", "60"])
        .stdin(std::fs::File::open(&input).unwrap())
        .output()
        .unwrap();
    assert!(oracle.status.success(), "{}", stderr(&oracle));
    let rows: Vec<serde_json::Value> = stdout(&oracle)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let instants: Vec<&serde_json::Value> =
        rows.iter().filter(|r| r["kind"] == "instant").collect();
    assert_eq!(instants.len(), track.len());
    let index: std::collections::HashMap<&str, usize> = track
        .iter()
        .enumerate()
        .map(|(i, (t, _, _))| (t.as_str(), i))
        .collect();

    let ours = |args: &[&str]| -> Vec<serde_json::Value> {
        let output = mfstream_command(dir.path())
            .args(["run", "--type", "TGeogPoint"])
            .args(args)
            .arg(&input)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        stdout(&output)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let failures = std::cell::RefCell::new(Vec::new());
    let check = |what: &str, i: usize, got: f64, want: f64, abs: f64| {
        let diff = (got - want).abs();
        if !(diff <= abs || diff <= 1e-9 * want.abs()) {
            failures
                .borrow_mut()
                .push(format!("{what} at {i}: ours {got:?}, oracle {want:?}"));
        }
    };
    // Per instant: by its datetime, verbatim in our events.
    let measures = [
        ("speed", "speed", 1e-9),
        ("azimuth", "azimuth", 1e-9),
        ("cumulativeLength", "cumulativeLength", 1e-6),
    ];
    for (op, field, abs) in measures {
        let events = ours(&["--op", op]);
        let expected = instants.iter().filter(|r| !r[field].is_null()).count();
        assert_eq!(
            events.len(),
            expected,
            "{op}: one event per instant with a value"
        );
        for e in &events {
            let i = index[e["datetime"].as_str().unwrap()];
            let want = instants[i][field].as_f64().unwrap();
            let got = e["value"].as_f64().unwrap();
            // Azimuths near north compare across 0/360.
            let got = if field == "azimuth" && (got - want).abs() > 180.0 {
                got - 360.0f64.copysign(got - want)
            } else {
                got
            };
            check(op, i, got, want, abs);
        }
    }
    let query = format!(r#"{{"operation":"distance","geometry":{line}}}"#);
    for e in ours(&["--query", &query]) {
        let i = index[e["datetime"].as_str().unwrap()];
        let want = instants[i]["distance"][0].as_f64().unwrap();
        check(
            "distance to a line",
            i,
            e["value"].as_f64().unwrap(),
            want,
            1e-6,
        );
    }
    // The fence: the same detections in order, at the same microsecond and
    // point.
    let query = format!(r#"{{"geofence":{fence}}}"#);
    let detected = ours(&["--query", &query]);
    let expected: Vec<&serde_json::Value> = rows.iter().filter(|r| r["kind"] == "event").collect();
    let kinds = |events: &[&serde_json::Value]| -> Vec<String> {
        events
            .iter()
            .map(|e| e["detect"].as_str().unwrap().to_owned())
            .collect()
    };
    let detected_refs: Vec<&serde_json::Value> = detected.iter().collect();
    assert_eq!(kinds(&detected_refs), kinds(&expected));
    assert!(
        kinds(&expected).iter().any(|k| k == "enter"),
        "the track enters the fence"
    );
    for (i, (e, x)) in detected.iter().zip(&expected).enumerate() {
        let t = micros(e["datetime"].as_str().unwrap());
        let want = x["t_us"].as_i64().unwrap();
        if (t - want).abs() > 1 {
            failures.borrow_mut().push(format!(
                "fence event {i}: ours at {t} µs, shapely at {want} µs"
            ));
        }
        for k in 0..2 {
            let got = e["coordinates"][k].as_f64().unwrap();
            check(
                "fence coordinate",
                i,
                got,
                x["coordinates"][k].as_f64().unwrap(),
                1e-9,
            );
        }
    }
    // Tumbling minutes: each window's aggregate of its positions, by the
    // minute its first position is in.
    let windows: std::collections::HashMap<i64, &serde_json::Value> = rows
        .iter()
        .filter(|r| r["kind"] == "window")
        .map(|r| (r["start_us"].as_i64().unwrap() / 60_000_000, r))
        .collect();
    for (aggregation, field) in [
        ("EXTENT", "extent_plain"),
        ("CENTROID", "centroid_exact"),
        ("LENGTH", "length"),
        ("AVG_SPEED", "avg_speed"),
        ("MAX_SPEED", "max_speed"),
    ] {
        let query = format!(
            r#"{{"aggregation":"{aggregation}","window":{{"type":"TUMBLING","size":1,"unit":"MINUTES"}}}}"#
        );
        let events = ours(&["--query", &query]);
        let expected = windows.values().filter(|w| !w[field].is_null()).count();
        assert_eq!(events.len(), expected, "{aggregation}: a window each");
        for e in &events {
            let minute = micros(e["windowStart"].as_str().unwrap()) / 60_000_000;
            let want = &windows[&minute][field];
            assert_eq!(
                e["count"], windows[&minute]["count"],
                "{aggregation} {minute}"
            );
            let pairs: Vec<(f64, f64)> = match want {
                serde_json::Value::Array(items) => items
                    .iter()
                    .enumerate()
                    .map(|(k, w)| (e["value"][k].as_f64().unwrap(), w.as_f64().unwrap()))
                    .collect(),
                w => vec![(e["value"].as_f64().unwrap(), w.as_f64().unwrap())],
            };
            for (got, want) in pairs {
                check(aggregation, minute as usize, got, want, 1e-9);
            }
        }
    }
    let failures = failures.into_inner();
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// HOPPING windows of positions (150 s every 60 s: buckets of 30 s, each
/// window three to five of them joined) against pymeos on each window's
/// positions as one sequence, through `mfstream run`.
#[test]
#[ignore = "needs MFSTREAM_PYMEOS_PYTHON (pymeos, geographiclib, shapely): eval \"$(jobs/meos/setup.sh)\""]
fn run_hopping_windows_of_positions_agree_with_pymeos_on_a_seeded_trajectory() {
    let dir = TempDir::new("run-positions-hopping-oracle");
    let track = trajectory();
    let input = dir.join("track.ndjson");
    let lines: String = track
        .iter()
        .map(|(t, x, y)| format!("{{\"datetime\":\"{t}\",\"coordinates\":[{x:?},{y:?}]}}\n"))
        .collect();
    std::fs::write(&input, lines).unwrap();
    // Geodetic, and the same numbers as a planar system's (Euclid).
    for (crs, type_) in [("EPSG:4326", "TGeogPoint"), ("EPSG:3857", "TGeomPoint")] {
        hopping_windows_agree_with_pymeos(&dir, &input, crs, type_);
    }
}

fn hopping_windows_agree_with_pymeos(
    dir: &TempDir,
    input: &std::path::Path,
    crs: &str,
    type_: &str,
) {
    let oracle = std::process::Command::new(pymeos_python())
        .arg(root().join("tests/oracle/geo_oracle.py"))
        .args(["--crs", crs, "--window", "150", "--hop", "60"])
        .stdin(std::fs::File::open(input).unwrap())
        .output()
        .unwrap();
    assert!(oracle.status.success(), "{}", stderr(&oracle));
    let rows: Vec<serde_json::Value> = stdout(&oracle)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["kind"] == "window")
        .collect();
    assert!(rows.len() > 30, "{} windows", rows.len());
    let mut failures = Vec::new();
    for (aggregation, field) in [
        ("COUNT", "count"),
        ("EXTENT", "extent_plain"),
        ("CENTROID", "centroid_exact"),
        ("LENGTH", "length"),
        ("AVG_SPEED", "avg_speed"),
        ("MAX_SPEED", "max_speed"),
    ] {
        let query = format!(
            r#"{{"aggregation":"{aggregation}","window":{{"type":"HOPPING","size":150,"unit":"SECONDS","hop":60}},"crs":"{crs}"}}"#
        );
        let output = mfstream_command(dir.path())
            .args(["run", "--type", type_, "--query", &query])
            .arg(input)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        let events: Vec<serde_json::Value> = stdout(&output)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        // A window of one position has no speed: skipped by both.
        let expected: Vec<&serde_json::Value> =
            rows.iter().filter(|w| !w[field].is_null()).collect();
        assert_eq!(
            events.len(),
            expected.len(),
            "{crs} {aggregation}: a window each"
        );
        for (e, w) in events.iter().zip(expected) {
            let start = w["start_us"].as_i64().unwrap();
            let first = micros(e["windowStart"].as_str().unwrap());
            assert!(
                (start..start + 150_000_000).contains(&first),
                "{aggregation} {e}"
            );
            assert_eq!(e["count"], w["count"], "{aggregation} {start}");
            let pairs: Vec<(f64, f64)> = match &w[field] {
                serde_json::Value::Array(items) => items
                    .iter()
                    .enumerate()
                    .map(|(k, x)| (e["value"][k].as_f64().unwrap(), x.as_f64().unwrap()))
                    .collect(),
                x => vec![(e["value"].as_f64().unwrap(), x.as_f64().unwrap())],
            };
            for (got, want) in pairs {
                let diff = (got - want).abs();
                if !(diff <= 1e-9 || diff <= 1e-9 * want.abs()) {
                    failures.push(format!(
                        "{aggregation} at {start}: ours {got:?}, pymeos {want:?}"
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

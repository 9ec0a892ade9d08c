//! `mfstream run --type TGeogPoint|TGeomPoint`: positions from a file, the
//! same operations and events as the server's.

use crate::util::*;

/// The fence of the README walk-through: lon 2.811..2.831, lat 51.2..51.22.
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
}

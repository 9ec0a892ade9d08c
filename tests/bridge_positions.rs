//! Positions on a bridge engine (`positions = true`): the job computes each
//! instant's step, its lines pair with the records sent (jobs/README.md,
//! "Positions"), and the host windows what it must.

use std::time::Duration;

use mfstream_engine::{BridgeEngine, BridgeOptions, Framing, LocalEngine, RestartPolicy};
use mfstream_engine::{Serves, Source, StreamEngine};
use mfstream_model::{
    Event, Instant, Point, PropertyType, QuerySpec, QueryStatus, Registration, Value,
};

use crate::util::*;

/// A planar fence: the square 0..10 (EPSG:3857 units).
const SQUARE: &str = r#"{"type":"Polygon","coordinates":[[[0,0],[10,0],[10,10],[0,10],[0,0]]]}"#;

/// Options for a position job run as `argv`, json framing.
fn position_options(argv: Vec<String>) -> BridgeOptions {
    let mut options = BridgeOptions::new("ref", argv);
    options.framing = Framing::Json;
    options.protocol = 2.into();
    options.positions = true;
    options.stop_grace = Duration::from_millis(200).into();
    options
}

/// The reference job on the standard library alone (`-S`: no site
/// packages): planar queries need nothing more.
fn stdlib_reference() -> BridgeOptions {
    position_options(vec!["python3".into(), "-S".into(), reference_job()])
}

/// A job written inline in Python.
fn inline_job(source: &str) -> BridgeOptions {
    position_options(vec!["python3".into(), "-c".into(), source.into()])
}

fn spec(body: &str) -> QuerySpec {
    Registration::from_json(body)
        .unwrap()
        .into_spec("tgsequence", PropertyType::TGeomPoint)
        .unwrap()
}

fn at(second: u32, x: f64, y: f64) -> Instant {
    Instant {
        datetime: format!("2026-01-01T00:00:{second:02}Z"),
        value: Value::Point(Point::new(x, y)),
    }
}

/// A planar track: outside, into the square and out (crossings at
/// interpolated times), a stop, a repeated datetime, and a pass through it
/// with both ends outside.
fn track() -> Vec<Instant> {
    vec![
        at(0, -5.0, 5.0),
        at(3, 5.0, 5.0),
        at(4, 5.0, 5.0),
        // Not after the previous one: no result.
        at(4, 6.0, 6.0),
        at(7, 15.0, 5.0),
        at(9, 5.0, 15.0),
        at(13, 5.0, -15.0),
    ]
}

async fn on(
    engine: &dyn StreamEngine,
    body: &str,
    input: Vec<Instant>,
) -> (Vec<String>, QueryStatus) {
    let (events, status) = run_query(engine, spec(body), input).await;
    (events.iter().map(Event::to_json).collect(), status)
}

#[tokio::test]
async fn the_reference_job_gives_locals_events_for_every_planar_step() {
    let engine = BridgeEngine::new(stdlib_reference());
    assert!(engine.describe().serves.contains(Serves::POSITIONS));
    let crs = r#""crs":"EPSG:3857""#;
    let bodies = [
        format!(r#"{{"operation":"speed",{crs}}}"#),
        format!(r#"{{"operation":"azimuth",{crs}}}"#),
        format!(r#"{{"operation":"cumulativeLength",{crs}}}"#),
        format!(r#"{{"operation":"position",{crs}}}"#),
        format!(r#"{{"operation":"distance","geometry":{SQUARE},{crs}}}"#),
        format!(r#"{{"geofence":{SQUARE},{crs}}}"#),
        // Host windows: positions, then a measure's numbers.
        format!(r#"{{"aggregation":"EXTENT","window":{{"type":"COUNT","size":3}},{crs}}}"#),
        format!(
            r#"{{"operation":"speed","aggregation":"MAX","window":{{"type":"TUMBLING","size":5,"unit":"SECONDS"}},{crs}}}"#
        ),
    ];
    for body in bodies {
        let (local, local_status) = on(&LocalEngine::new(), &body, track()).await;
        let (job, status) = on(&engine, &body, track()).await;
        assert_eq!(local_status, QueryStatus::Completed, "{body}");
        assert_eq!(status, QueryStatus::Completed, "{body}");
        assert!(!local.is_empty(), "{body}");
        let same = local.len() == job.len()
            && local.iter().zip(&job).all(|(a, b)| {
                same_json(
                    &serde_json::from_str(a).unwrap(),
                    &serde_json::from_str(b).unwrap(),
                )
            });
        assert!(same, "{body}:\nlocal {local:#?}\njob {job:#?}");
    }
}

/// Whether two runs' events are the same, numbers within the differential
/// tolerance.
fn same_events(a: &[String], b: &[String]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(a, b)| {
            same_json(
                &serde_json::from_str(a).unwrap(),
                &serde_json::from_str(b).unwrap(),
            )
        })
}

/// The reference job's steps, crashing (`tests/jobs/positions_crash.py`):
/// its i-th run answers `after[i] - 1` records, writes the detections of
/// the next one and dies; restarts allowed.
fn crashing_reference(count_file: &std::path::Path, after: &[usize]) -> BridgeOptions {
    let mut options = position_options(vec![
        "python3".into(),
        "-S".into(),
        job("positions_crash.py"),
    ]);
    options.env.extend([
        ("CRASH_COUNT".into(), count_file.display().to_string()),
        (
            "CRASH_AFTER".into(),
            after
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(","),
        ),
    ]);
    options.restart = Some(RestartPolicy {
        max_restarts: 3,
        backoff: Duration::from_millis(1),
        backoff_max: Duration::from_millis(10),
    });
    options
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_position_query_restarted_after_its_job_crashes_gives_locals_events() {
    // Every step, and host windows of positions and of a running length:
    // each needs the feature's state before the crash (the previous
    // position, the fence's side, the length so far, the datetime a
    // record must follow).
    let crs = r#""crs":"EPSG:3857""#;
    let bodies = [
        format!(r#"{{"operation":"speed",{crs}}}"#),
        format!(r#"{{"operation":"azimuth",{crs}}}"#),
        format!(r#"{{"operation":"cumulativeLength",{crs}}}"#),
        format!(r#"{{"operation":"position",{crs}}}"#),
        format!(r#"{{"operation":"distance","geometry":{SQUARE},{crs}}}"#),
        format!(r#"{{"geofence":{SQUARE},{crs}}}"#),
        format!(r#"{{"geofence":{SQUARE},"detect":["enter","exit","cross"],{crs}}}"#),
        format!(r#"{{"aggregation":"LENGTH","window":{{"type":"COUNT","size":3}},{crs}}}"#),
        format!(
            r#"{{"operation":"cumulativeLength","aggregation":"MAX","window":{{"type":"TUMBLING","size":5,"unit":"SECONDS"}},{crs}}}"#
        ),
    ];
    let dir = TempDir::new("positions-restart");
    let mut case = 0;
    for body in bodies {
        let (local, local_status) = on(&LocalEngine::new(), &body, track()).await;
        assert_eq!(local_status, QueryStatus::Completed, "{body}");
        // A crash before each record (after its detections, for a fence
        // detecting inside and outside), then one in the next run's primer
        // (its first line), then one at the same line of the third run
        // (a cumulativeLength offset twice).
        for after in 1..=track().len() {
            case += 1;
            let count = dir.join(&format!("runs-{case}"));
            let options = crashing_reference(&count, &[after, 1, after]);
            let handle = submit(options, spec(&body), track()).await;
            let progress = handle.progress_counters();
            let (events, status) = collect(handle).await;
            let events: Vec<String> = events.iter().map(Event::to_json).collect();
            assert_eq!(status, QueryStatus::Completed, "{body}, crash at {after}");
            let restarts = progress.snapshot().restarts;
            assert!(
                (2..=3).contains(&restarts),
                "{body}, crash at {after}: {restarts} restarts"
            );
            assert!(
                same_events(&local, &events),
                "{body}, crash at {after}:\nlocal {local:#?}\nrestarted {events:#?}"
            );
        }
    }
}

#[tokio::test]
async fn a_json_transform_on_a_position_engine_is_not_restarted() {
    // Its answers do not pair with its records: a crash fails the query.
    let mut options = position_options(vec!["sh".into(), job("crash_after.sh")]);
    options.restart = Some(RestartPolicy {
        max_restarts: 3,
        backoff: Duration::from_millis(1),
        backoff_max: Duration::from_millis(10),
    });
    let spec = mfstream_model::QuerySpec::transform(
        "speed",
        mfstream_model::ops::Transform::new("abs", None).unwrap(),
    );
    let handle = submit(options, spec, instants(5)).await;
    let progress = handle.progress_counters();
    let (_, status) = collect(handle).await;
    assert!(
        failure(&status).contains("exited with status 1"),
        "{status:?}"
    );
    assert_eq!(progress.snapshot().restarts, 0);
}

#[tokio::test]
async fn a_restarted_job_that_cannot_measure_its_primer_fails_the_query() {
    // The first run answers the first record and dies; the second answers
    // everything with an error line, the primer (that first record) too.
    let dir = TempDir::new("primer-refused");
    let mut options = inline_job(
        "import sys, json, os\nf = os.environ['RUNS_FILE']\nfirst = not os.path.exists(f)\n\
         open(f, 'w').close()\nfor line in sys.stdin:\n    \
         d = json.loads(line)['datetime']\n    \
         if first:\n        print(json.dumps({'datetime': d}), flush=True)\n        sys.exit(1)\n    \
         print(json.dumps({'datetime': d, 'error': 'cannot'}), flush=True)\n",
    );
    options
        .env
        .push(("RUNS_FILE".into(), dir.join("ran").display().to_string()));
    options.restart = Some(RestartPolicy {
        max_restarts: 3,
        backoff: Duration::from_millis(1),
        backoff_max: Duration::from_millis(10),
    });
    let handle = submit(
        options,
        spec(r#"{"operation":"speed","crs":"EPSG:3857"}"#),
        track(),
    )
    .await;
    let (events, status) = collect(handle).await;
    let reason = failure(&status);
    assert!(
        reason.contains(
            "job output line 1: the restarted job found no result for the record at \
             2026-01-01T00:00:00Z, which it was sent again"
        ),
        "{reason}"
    );
    assert!(events.is_empty(), "{events:?}");
}

#[tokio::test]
async fn a_record_with_more_detections_than_its_fence_allows_fails_the_query() {
    // The square has 5 vertices: at most 12 detections a record.
    let job = inline_job(
        "import sys, json\nfor line in sys.stdin:\n    \
         d = json.loads(line)['datetime']\n    \
         for _ in range(13):\n        \
         print(json.dumps({'datetime': d, 'coordinates': [0, 0], 'detect': 'inside'}))\n    \
         print(json.dumps({'datetime': d}), flush=True)\n",
    );
    let handle = submit(
        job,
        spec(&format!(r#"{{"geofence":{SQUARE},"crs":"EPSG:3857"}}"#)),
        track(),
    )
    .await;
    let (events, status) = collect(handle).await;
    let reason = failure(&status);
    assert!(
        reason.contains(
            "job output line 13 is detection 13 of the record at 2026-01-01T00:00:00Z, over the \
             12 a record can have on this fence"
        ),
        "{reason}"
    );
    assert!(events.is_empty(), "{events:?}");
}

#[tokio::test]
async fn a_geofence_crossing_is_stamped_at_its_interpolated_time_and_the_record_skipped() {
    let engine = BridgeEngine::new(stdlib_reference());
    let body =
        format!(r#"{{"geofence":{SQUARE},"detect":["enter","exit","cross"],"crs":"EPSG:3857"}}"#);
    let (events, status) = on(&engine, &body, track()).await;
    assert_eq!(status, QueryStatus::Completed);
    let events: Vec<serde_json::Value> = events
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let seen: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["datetime"].as_str().unwrap(),
                e["detect"].as_str().unwrap(),
            )
        })
        .collect();
    // In at x = 0 (1.5 s along 0..3 s), out at x = 10 (1.5 s along 4..7
    // s), and a pass from 9 s to 13 s entering at y = 10 (4 s × 5/30 on).
    assert_eq!(
        seen,
        [
            ("2026-01-01T00:00:01.500Z", "enter"),
            ("2026-01-01T00:00:05.500Z", "exit"),
            ("2026-01-01T00:00:09.666667Z", "cross"),
        ]
    );
    // The repeated datetime was skipped; the next event says so.
    assert_eq!(events[1]["skipped"], 1, "{events:?}");
}

#[tokio::test]
async fn a_line_that_ends_another_record_fails_the_query_naming_both() {
    // Answers every record with the first record's datetime.
    let job = inline_job(
        "import sys\nfor line in sys.stdin:\n    \
         print('{\"datetime\":\"2026-01-01T00:00:00Z\",\"value\":1}', flush=True)\n",
    );
    let handle = submit(
        job,
        spec(r#"{"operation":"speed","crs":"EPSG:3857"}"#),
        track(),
    )
    .await;
    let (events, status) = collect(handle).await;
    let reason = failure(&status);
    assert!(
        reason.contains(
            "job output line 2 ends the record at 2026-01-01T00:00:00Z, but the record awaiting \
             its answers is at 2026-01-01T00:00:03Z"
        ),
        "{reason}"
    );
    assert_eq!(events.len(), 1, "{events:?}");
}

#[tokio::test]
async fn an_answer_of_the_wrong_kind_for_the_step_fails_the_query() {
    // A number where `position` gives the instant itself.
    let job = inline_job(
        "import sys, json\nfor line in sys.stdin:\n    \
         print(json.dumps({'datetime': json.loads(line)['datetime'], 'value': 1}), flush=True)\n",
    );
    let handle = submit(
        job,
        spec(r#"{"operation":"position","crs":"EPSG:3857"}"#),
        track(),
    )
    .await;
    let (events, status) = collect(handle).await;
    let reason = failure(&status);
    assert!(
        reason.contains(
            "job output line 1 is not a position answer ({\"datetime\",\"coordinates\"})"
        ),
        "{reason}"
    );
    assert!(events.is_empty(), "{events:?}");
}

#[tokio::test]
async fn a_job_that_exits_before_answering_every_position_fails_counting_them() {
    // Answers the first two records with nothing, then exits 0.
    let job = inline_job(
        "import sys, json\nfor i, line in enumerate(sys.stdin):\n    \
         print(json.dumps({'datetime': json.loads(line)['datetime']}), flush=True)\n    \
         if i == 1: break\n",
    );
    let handle = submit(
        job,
        spec(r#"{"operation":"speed","crs":"EPSG:3857"}"#),
        track(),
    )
    .await;
    let (_, status) = collect(handle).await;
    let reason = failure(&status);
    assert!(
        reason.contains("after answering 2 of 7 records"),
        "{reason}"
    );
}

#[tokio::test]
async fn a_geodetic_query_without_geographiclib_fails_saying_what_to_install() {
    let engine = BridgeEngine::new(stdlib_reference());
    let spec = Registration::from_json(r#"{"operation":"speed"}"#)
        .unwrap()
        .into_spec("tgsequence", PropertyType::TGeogPoint)
        .unwrap();
    let input = vec![at(0, 1.0, 2.0), at(1, 1.0, 2.5)];
    let handle = engine
        .submit(spec, Source::from_instants(input))
        .await
        .unwrap();
    let (events, status) = collect(handle).await;
    let reason = failure(&status);
    assert!(
        reason.contains("geodetic position queries need the geographiclib package")
            && reason.contains("pip install geographiclib"),
        "{reason}"
    );
    assert!(events.is_empty());
}

#[tokio::test]
async fn a_geometry_too_large_for_mfstream_query_is_refused_naming_the_bound() {
    // A valid fence of 4,000 vertices, about 170 KiB of JSON: under the
    // geometry's own bound, over what one environment variable holds.
    let n = 4000;
    let ring: Vec<String> = (0..=n)
        .map(|i| {
            let a = std::f64::consts::TAU * (i % n) as f64 / n as f64;
            format!("[{:.15},{:.15}]", 1000.0 * a.cos(), 1000.0 * a.sin())
        })
        .collect();
    let fence = format!(
        r#"{{"type":"Polygon","coordinates":[[{}]]}}"#,
        ring.join(",")
    );
    assert!(fence.len() > 131_072 && fence.len() < 1 << 20);
    let spec = spec(&format!(r#"{{"geofence":{fence},"crs":"EPSG:3857"}}"#));
    let engine = BridgeEngine::new(stdlib_reference());
    let Err(mfstream_engine::EngineError::InvalidQuery(e)) = engine
        .submit(spec.clone(), Source::from_instants(track()))
        .await
    else {
        panic!("a query too large for MFSTREAM_QUERY was started");
    };
    assert_eq!(e.field, "geofence");
    assert!(
        e.message
            .contains("over the 131056 a bridge job's MFSTREAM_QUERY can hold"),
        "{e}"
    );
    // The local engine takes it.
    let (_, status) = run_query(&LocalEngine::new(), spec, track()).await;
    assert_eq!(status, QueryStatus::Completed);
}

#[test]
fn the_reference_job_answers_an_unmeasurable_position_with_an_error_line_under_any_protocol() {
    use std::io::Write;
    for protocol in [None, Some("1"), Some("2")] {
        let mut command = std::process::Command::new("python3");
        command
            .args(["-S", &reference_job(), "position"])
            .env("MFSTREAM_FRAMING", "json")
            .env("MFSTREAM_QUERY", r#"{"crs":"EPSG:3857"}"#)
            .env_remove("MFSTREAM_PROTOCOL")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        if let Some(version) = protocol {
            command.env("MFSTREAM_PROTOCOL", version);
        }
        let mut child = command.spawn().unwrap();
        // A datetime not after the previous one, then a good position:
        // the job goes on.
        child
            .stdin
            .take()
            .unwrap()
            .write_all(
                b"{\"datetime\":\"2026-01-01T00:00:00Z\",\"coordinates\":[1,2]}\n\
                  {\"datetime\":\"2026-01-01T00:00:00Z\",\"coordinates\":[1,3]}\n\
                  {\"datetime\":\"2026-01-01T00:00:01Z\",\"coordinates\":[1,4]}\n",
            )
            .unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{protocol:?}: {output:?}");
        let lines: Vec<&str> = std::str::from_utf8(&output.stdout)
            .unwrap()
            .lines()
            .collect();
        assert_eq!(
            lines,
            [
                r#"{"datetime":"2026-01-01T00:00:00Z","coordinates":[1.0,2.0]}"#,
                r#"{"datetime":"2026-01-01T00:00:00Z","error":"2026-01-01T00:00:00Z is not after the previous position: datetimes must increase"}"#,
                r#"{"datetime":"2026-01-01T00:00:01Z","coordinates":[1.0,4.0]}"#,
            ],
            "{protocol:?}"
        );
    }
}

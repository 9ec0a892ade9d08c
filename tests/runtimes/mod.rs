//! Real runtimes (`jobs/<runtime>/`): each job, set up by its
//! `setup.sh`, against the `local` engine on the same input.

// shared helpers

use std::path::Path;
use std::time::Duration;

use mfstream::{
    BridgeEngine, BridgeOptions, Event, Framing, Instant, LocalEngine, QuerySpec, QueryStatus,
    Source, StreamEngine, Transform, Value,
};

use crate::util::*;

/// The job command in `var` (set by `eval "$(jobs/<runtime>/setup.sh)"`),
/// split into words; `None` when it is unset and the test is to be skipped,
/// a failure when `MFSTREAM_REQUIRE_RUNTIMES=1` (as in CI).
pub fn runtime_command(var: &str, setup: &str) -> Option<Vec<String>> {
    match std::env::var(var) {
        Ok(cmd) if !cmd.trim().is_empty() => {
            Some(shell_words::split(&cmd).unwrap_or_else(|e| panic!("{var}: {e}")))
        }
        _ if std::env::var("MFSTREAM_REQUIRE_RUNTIMES").as_deref() == Ok("1") => {
            panic!("{var} is not set and MFSTREAM_REQUIRE_RUNTIMES=1: run `eval \"$({setup})\"`")
        }
        _ => {
            eprintln!("skipped: {var} is not set (run `eval \"$({setup})\"` to test this runtime)");
            None
        }
    }
}

/// Bridge options running `argv` under a shell that first writes its pid,
/// which is the job's process group id, to `pid_file`, then execs the job.
pub fn traced_options(name: &str, argv: &[String], pid_file: &Path) -> BridgeOptions {
    let mut wrapped = vec![
        "sh".to_owned(),
        "-c".to_owned(),
        format!("echo $$ > '{}'; exec \"$@\"", pid_file.display()),
        name.to_owned(),
    ];
    wrapped.extend_from_slice(argv);
    BridgeOptions::new(name, wrapped)
}

/// The live (not zombie) processes of process group `pgid`, as "pid comm".
pub fn group_members(pgid: i32) -> Vec<String> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
        if fields.len() > 2 && fields[2] == pgid.to_string() && fields[0] != "Z" {
            members.push(stat[..=close].to_owned());
        }
    }
    members
}

/// Asserts that the job whose pid (= process group id) is in `pid_file` has
/// ended with all its process group.
pub fn assert_group_gone(pid_file: &Path) {
    let pgid = read_pid(pid_file);
    assert!(
        wait_gone(pgid, Duration::from_secs(30)),
        "the job {pgid} outlived its query"
    );
    let left = group_members(pgid);
    assert!(left.is_empty(), "left in the job's process group: {left:?}");
}

/// Environment for a JVM job launcher (`jobs/flink`, `jobs/spark`): its
/// temp folder under `tmp`, to check the job leaves nothing there.
pub fn jvm_tmp_env(tmp: &Path) -> Vec<(String, String)> {
    std::fs::create_dir_all(tmp).unwrap();
    let opts = format!(
        "-Xmx512m -XX:+UseSerialGC -Djava.io.tmpdir={}",
        tmp.display()
    );
    vec![("MFSTREAM_JAVA_OPTS".to_owned(), opts)]
}

/// Asserts that the folder `tmp` is empty: the job removed its temp files.
pub fn assert_empty(tmp: &Path) {
    let left: Vec<_> = std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "the job left {left:?}");
}

/// Every lifted operation, with `n` instants of inputs in its domain.
pub fn every_operation(n: usize) -> Vec<(Transform, Vec<Instant>)> {
    let ops = [
        ("ln", None),
        ("exp", None),
        ("log10", None),
        ("ceil", None),
        ("floor", None),
        ("abs", None),
        ("degrees", None),
        ("radians", None),
        ("sin", None),
        ("cos", None),
        ("tan", None),
        ("add", Some(2.5)),
        ("sub", Some(1e-3)),
        ("mul", Some(1.852)),
        ("div", Some(3.0)),
    ];
    ops.into_iter()
        .map(|(op, arg)| {
            let value = |i: usize| match op {
                "ln" | "log10" => (i + 1) as f64 * 0.37,
                "exp" => (i as f64 - n as f64 / 2.0) * 0.1,
                _ => (i as f64 - n as f64 / 2.0) * 0.731 + 0.25,
            };
            let input = instants(n)
                .into_iter()
                .enumerate()
                .map(|(i, instant)| Instant::number(instant.datetime, value(i)))
                .collect();
            (Transform::new(op, arg).unwrap(), input)
        })
        .collect()
}

/// Runs `spec` over `input` on `engine`: its events, and its final status.
pub async fn run_query(
    engine: &dyn StreamEngine,
    spec: QuerySpec,
    input: Vec<Instant>,
) -> (Vec<Event>, QueryStatus) {
    let handle = engine
        .submit(spec, Source::from_instants(input))
        .await
        .expect("the query starts");
    collect(handle).await
}

/// The same events in the same order: same datetimes, same values, to
/// `ulps` units in the last place: the JVM's transcendental functions (ln,
/// exp, log10, sin, cos, tan) may differ from Rust's libm by one, and in json
/// framing the host's JSON number parsing (serde_json without
/// `float_roundtrip`) may add one more.
pub fn assert_same_events(what: &str, local: &[Event], job: &[Event], max_ulps: u64) {
    assert_eq!(local.len(), job.len(), "{what}: as many results");
    for (i, (l, j)) in local.iter().zip(job).enumerate() {
        assert_eq!(l.datetime(), j.datetime(), "{what}: result {i} in order");
        let (Value::Number(x), Value::Number(y)) = (l.value(), j.value()) else {
            panic!("{what}: result {i}: {:?} and {:?}", l.value(), j.value());
        };
        let ulps = (x.to_bits() as i64 - y.to_bits() as i64).unsigned_abs();
        assert!(
            x == y || (x.signum() == y.signum() && ulps <= max_ulps),
            "{what}: result {i}: local {x} but the job {y}"
        );
    }
}

/// Every lifted operation on the job `argv` in `framing`: the local engine's
/// results, in order; the query completes and the job's process group is
/// gone.
pub async fn check_every_operation(name: &str, argv: &[String], framing: Framing) {
    let dir = TempDir::new(&format!("{name}-every-op"));
    let pid_file = dir.join("pid");
    let mut options = traced_options(name, argv, &pid_file);
    options.framing = framing;
    let job = BridgeEngine::new(options);
    for (transform, input) in every_operation(1000) {
        let what = format!("{name} {}", transform.op);
        let spec = QuerySpec::transform("speed", transform);
        let (local, status) = run_query(&LocalEngine::new(), spec.clone(), input.clone()).await;
        assert_eq!(status, QueryStatus::Completed, "local {}", transform.op);
        let (events, status) = run_query(&job, spec, input).await;
        assert_eq!(status, QueryStatus::Completed, "{what}");
        let max_ulps = if framing == Framing::Json { 2 } else { 1 };
        assert_same_events(&what, &local, &events, max_ulps);
        assert_group_gone(&pid_file);
        std::fs::remove_file(&pid_file).unwrap();
    }
}

/// `ln` of 0 on the 2nd record: the query fails with the job's message
/// naming the line and the value, after the first answer; and an unknown
/// operation makes the job itself exit 2 before it reads anything.
/// The job's temp folder is gone too.
pub async fn check_domain_error(name: &str, argv: &[String], prefix: &str) {
    let dir = TempDir::new(&format!("{name}-domain"));
    let pid_file = dir.join("pid");
    let mut options = traced_options(name, argv, &pid_file);
    options.env = jvm_tmp_env(&dir.join("tmp"));
    let job = BridgeEngine::new(options);
    let input: Vec<Instant> = [1.0, 0.0, 3.0]
        .into_iter()
        .zip(instants(3))
        .map(|(v, i)| Instant::number(i.datetime, v))
        .collect();
    let spec = QuerySpec::transform("speed", Transform::new("ln", None).unwrap());
    let (events, status) = run_query(&job, spec, input).await;
    let reason = failure(&status);
    assert!(
        reason.contains(&format!(
            "{prefix}: line 2: ln is defined for positive values only, got 0"
        )),
        "{reason}"
    );
    assert!(reason.contains("status 2"), "{reason}");
    assert_eq!(
        events.len(),
        1,
        "the answer before the bad line is delivered"
    );
    assert_eq!(events[0].value(), &Value::Number(0.0));
    assert_group_gone(&pid_file);
    assert_empty(&dir.join("tmp"));

    let out = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .arg("sqrt")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the job runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unknown operation 'sqrt'"), "{stderr}");
    assert!(out.stdout.is_empty(), "stdout is for results only");
}

/// A query stopped while its source is still open: status stopped, and no
/// process of the job (the JVM) is left, nor its temp folder.
pub async fn check_stop_midway(name: &str, argv: &[String]) {
    let dir = TempDir::new(&format!("{name}-stop"));
    let pid_file = dir.join("pid");
    let mut options = traced_options(name, argv, &pid_file);
    options.env = jvm_tmp_env(&dir.join("tmp"));
    let job = BridgeEngine::new(options);
    let (sender, source) = Source::channel(16);
    let spec = QuerySpec::transform("speed", Transform::new("mul", Some(2.0)).unwrap());
    let mut handle = job.submit(spec, source).await.expect("the job starts");
    sender.send_batch(instants(3)).await.unwrap();
    // A live record comes out on its own, while the source stays open.
    let first = handle.next().await.expect("a first answer");
    assert_eq!(first.value(), &Value::Number(2.0));
    assert_eq!(handle.status(), QueryStatus::Running);
    let status = handle.stop_and_wait().await;
    assert_eq!(status, QueryStatus::Stopped);
    assert_group_gone(&pid_file);
    assert_empty(&dir.join("tmp"));
    drop(sender);
}

/// `mfstream run` with the shipped engines.toml and `MFAPI_STREAM_ENGINE`
/// set to `engine` prints what it prints on the local engine.
pub fn check_cli_matches_local(engine: &str, var: &str, cmd: &str) {
    let dir = TempDir::new(&format!("{engine}-cli"));
    let input = dir.join("in.ndjson");
    let lines: Vec<String> = (1..=200)
        .map(|i| {
            format!(
                r#"{{"datetime":"2026-01-01T00:{:02}:{:02}Z","value":{}}}"#,
                i / 60,
                i % 60,
                i as f64 * 0.5
            )
        })
        .collect();
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let run = |engine: &str| {
        let out = mfstream_command(dir.path())
            .env(var, cmd)
            .env("MFAPI_STREAM_ENGINE", engine)
            .arg("run")
            .arg("--config")
            .arg(root().join("engines.toml"))
            .args(["--op", "ln", "--property", "speed"])
            .arg(&input)
            .output()
            .expect("mfstream runs");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{engine}: {stderr}");
        let events: Vec<serde_json::Value> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        events
    };
    let local = run("local");
    let job = run(engine);
    assert_eq!(local.len(), 200);
    assert_eq!(local.len(), job.len());
    for (l, j) in local.iter().zip(&job) {
        assert_eq!(l["datetime"], j["datetime"]);
        let (x, y) = (l["value"].as_f64().unwrap(), j["value"].as_f64().unwrap());
        let ulps = (x.to_bits() as i64 - y.to_bits() as i64).unsigned_abs();
        assert!(ulps <= 2, "{engine}: local {l} but {j}");
    }
}

mod flink;
mod flink_cluster;
mod spark;

//! Real runtimes behind the shipped `engines.toml`, end to end: each test
//! resolves its runtime's entry from the environment (`eval "$(jobs/<rt>/setup.sh)"`)
//! and compares the job's results with the `local` engine's. Every test here
//! is marked `#[ignore = "needs <runtime>: …"]`: plain `cargo test` lists it
//! as ignored, with what to run; `cargo test -- --include-ignored` (as
//! `.ci/run` runs after the setup scripts) requires its runtime.

mod beam;
mod flink;
mod flink_cluster;
mod flink_cluster_script;
mod meos;
mod spark;

// shared helpers

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use mfstream_engine::{BridgeEngine, BridgeOptions, Framing, LocalEngine};
use mfstream_engine::{QueryHandle, Source, StreamEngine};
use mfstream_model::ops::{Domain, Kind, Op, Transform};
use mfstream_model::{Event, Instant, QuerySpec, QueryStatus, Value};
use mfstream_registry::config::Config;

use crate::util::*;

/// The shipped `engines.toml` entry `name`, resolved from the environment,
/// with a variable marking the job's processes (see [`Marked`]); a failure
/// when its command variable is unset (the test is ignored by default).
pub fn runtime(name: &str) -> (BridgeOptions, Marked) {
    let config = Config::from_file(&root().join("engines.toml")).expect("engines.toml is valid");
    let def = config
        .engines
        .iter()
        .find(|e| e.name() == name)
        .unwrap_or_else(|| panic!("engines.toml has no `{name}` entry"));
    require(
        std::env::var_os(&def.cmd_env),
        &format!("the {name} runtime ({} is not set)", def.cmd_env),
        &format!("run `eval \"$(jobs/{name}/setup.sh)\"` first"),
    );
    let mut options = def
        .resolve(&|var| std::env::var(var).ok())
        .unwrap_or_else(|e| panic!("engine {name}: {e}"));
    let marked = Marked::new(name);
    options.env.push((MARK.into(), marked.0.clone()));
    (options, marked)
}

const MARK: &str = "MFSTREAM_TEST_MARK";

/// A unique value of `MFSTREAM_TEST_MARK` in one job's environment: every
/// process of the job inherits it, so they can be found in `/proc`.
pub struct Marked(String);

impl Marked {
    fn new(name: &str) -> Marked {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        Marked(format!("{name}-{}-{n}", std::process::id()))
    }

    /// The live processes carrying the mark: (pid, process group).
    pub fn processes(&self) -> Vec<(i32, i32)> {
        let needle = format!("{MARK}={}", self.0).into_bytes();
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
                continue;
            };
            if !environ
                .split(|&b| b == 0)
                .any(|var| var == needle.as_slice())
            {
                continue;
            }
            if let Some((state, pgid)) = stat(pid) {
                if state != 'Z' {
                    found.push((pid, pgid));
                }
            }
        }
        found
    }
}

/// A process's state and process group, from `/proc/<pid>/stat`.
fn stat(pid: i32) -> Option<(char, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
    let mut fields = text[text.rfind(')')? + 2..].split(' ');
    let state = fields.next()?.chars().next()?;
    let pgid = fields.nth(1)?.parse().ok()?;
    Some((state, pgid))
}

/// Asserts that every process in `seen` has ended and that nothing is left
/// in their process groups (zombies aside: they are dead).
pub fn assert_gone(seen: &[(i32, i32)], what: &str) {
    assert!(!seen.is_empty(), "{what}: no job process was seen running");
    for &(pid, _) in seen {
        assert!(
            wait_gone(pid, Duration::from_secs(30)),
            "{what}: process {pid} outlived its query"
        );
    }
    let groups: Vec<i32> = seen.iter().map(|&(_, pgid)| pgid).collect();
    let left: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| stat(pid).is_some_and(|(s, g)| s != 'Z' && groups.contains(&g)))
        .collect();
    assert!(
        left.is_empty(),
        "{what}: processes {left:?} left in the job's group"
    );
}

/// The query for `op` (with an argument where it takes one).
pub fn transform(op: Op) -> QuerySpec {
    let arg = match op {
        Op::Add => Some(2.5),
        Op::Sub => Some(1.25),
        Op::Mul => Some(1.852),
        Op::Div => Some(4.0),
        _ => None,
    };
    QuerySpec::transform("speed", Transform::new(op.name(), arg).unwrap())
}

/// Instants with the given values, one a second.
pub fn values(xs: &[f64]) -> Vec<Instant> {
    let mut input = instants(xs.len());
    for (instant, &x) in input.iter_mut().zip(xs) {
        instant.value = mfstream_model::Value::Number(x);
    }
    input
}

/// Runs `spec` on `engine` under the default `onError` (skip): the query
/// completes with the answers to the records at `kept` (indexes of
/// `input`), each on its own datetime, and the events carry one skipped
/// record for each other one (a version-1 job never sees them: the host's
/// guard; a version-2 job answers them with error lines).
pub async fn check_skipped(
    engine: &dyn StreamEngine,
    spec: QuerySpec,
    input: &[Instant],
    kept: &[usize],
) {
    let (events, status) = run_query(engine, spec, input.to_vec()).await;
    assert_eq!(status, QueryStatus::Completed, "{events:?}");
    let datetimes: Vec<&str> = events.iter().map(Event::datetime).collect();
    let expected: Vec<&str> = kept.iter().map(|&i| input[i].datetime.as_str()).collect();
    assert_eq!(datetimes, expected);
    let skipped: u64 = events.iter().map(Event::skipped).sum();
    assert_eq!(skipped as usize, input.len() - kept.len());
}

/// `n` positive values (in every operation's domain), irregular, some whole,
/// some below one, some large.
pub fn positive(n: usize) -> Vec<Instant> {
    let mut input = instants(n);
    for (i, instant) in input.iter_mut().enumerate() {
        let x = match i % 4 {
            0 => (i as f64 * 0.7368).sin().abs() * 90.0 + 0.001,
            1 => (i / 4) as f64 + 1.0,
            2 => 1.0 / (i as f64 + 3.0),
            _ => (i as f64).sqrt() * 13.37,
        };
        instant.value = mfstream_model::Value::Number(x);
    }
    input
}

/// The `local` engine's events for `spec` over `input`.
pub async fn local(spec: QuerySpec, input: Vec<Instant>) -> Vec<Event> {
    let (events, status) = run_query(&LocalEngine::new(), spec, input).await;
    assert_eq!(status, QueryStatus::Completed);
    events
}

/// Runs `spec` over `input` on a job, with the source held open until the
/// first answer has arrived, so that the job's processes are seen alive.
/// Returns the events, the status and the processes seen.
pub async fn run_watched(
    options: BridgeOptions,
    marked: &Marked,
    spec: QuerySpec,
    input: Vec<Instant>,
) -> (Vec<Event>, QueryStatus, Vec<(i32, i32)>) {
    let (sender, source) = Source::channel(64);
    let mut handle = mfstream_engine::BridgeEngine::new(options)
        .submit(spec, source)
        .await
        .expect("the job starts");
    let mut rest = input.into_iter();
    sender.send(rest.next().unwrap()).await.unwrap();
    let first = handle.next().await;
    let seen = marked.processes();
    let feeder = tokio::spawn(async move {
        for instant in rest {
            if sender.send(instant).await.is_err() {
                break;
            }
        }
    });
    let (mut events, status) = collect(handle).await;
    feeder.await.unwrap();
    events.splice(0..0, first);
    (events, status, seen)
}

/// Asserts `job` has `local`'s datetimes, in order, and values within
/// `ulps` units in the last place of them.
pub fn assert_matches(what: &str, local: &[Event], job: &[Event], ulps: u64) {
    assert_eq!(local.len(), job.len(), "{what}: event counts differ");
    for (i, (l, j)) in local.iter().zip(job).enumerate() {
        assert_eq!(l.datetime(), j.datetime(), "{what}: event {i} out of order");
        let (x, y) = (l.value().as_f64().unwrap(), j.value().as_f64().unwrap());
        let apart = (x.to_bits() as i64).abs_diff(y.to_bits() as i64);
        assert!(
            x == y || (x.signum() == y.signum() && apart <= ulps),
            "{what}: event {i}: local {x:?}, job {y:?} ({apart} ulps apart)"
        );
    }
}

/// The first event of a query: it proves the job is up and answering.
pub async fn first_event(handle: &mut QueryHandle) -> Event {
    handle.next().await.expect("a first answer")
}

// Flink and Spark (JVM jobs): the job command straight from its variable,
// its process group traced by pid.

/// The job command in `var` (set by `eval "$(SETUP)"`), split into words;
/// a failure when it is unset (the test is ignored by default).
pub fn runtime_command(var: &str, setup: &str) -> Vec<String> {
    let cmd = std::env::var(var).ok().filter(|cmd| !cmd.trim().is_empty());
    let cmd = require(
        cmd,
        &format!("a runtime command in {var}"),
        &format!("run `eval \"$({setup})\"` first"),
    );
    shell_words::split(&cmd).unwrap_or_else(|e| panic!("{var}: {e}"))
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

/// Every lifted operation on numbers (the catalogue's), with `n` instants
/// of inputs in its domain.
pub fn every_operation(n: usize) -> Vec<(Transform, Vec<Instant>)> {
    Op::on(Kind::Number)
        .map(|op| {
            let domain = op.domain();
            let value = |i: usize| match domain {
                Domain::Positive => (i + 1) as f64 * 0.37,
                // Up to exp's bound, with room.
                Domain::AtMost(_) => (i as f64 - n as f64 / 2.0) * 0.1,
                _ => (i as f64 - n as f64 / 2.0) * 0.731 + 0.25,
            };
            let input = instants(n)
                .into_iter()
                .enumerate()
                .map(|(i, instant)| Instant::number(instant.datetime, value(i)))
                .collect();
            let arg = op.takes_arg().then_some(1.852);
            (Transform::new(op.name(), arg).unwrap(), input)
        })
        .collect()
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
        // A JVM's transcendental functions may differ from Rust's libm by
        // one unit in the last place; the rest must be exact.
        let max_ulps = match transform.op.name() {
            "ln" | "exp" | "log10" | "sin" | "cos" | "tan" => 1,
            _ => 0,
        };
        assert_matches(&what, &local, &events, max_ulps);
        assert_group_gone(&pid_file);
        std::fs::remove_file(&pid_file).unwrap();
    }
}

/// `ln` of 0 on the 2nd record. Under `onError: skip` (the default) the
/// host never sends it to the job (a version-1 job: the host's guard), so
/// the query completes with the other two answers on their own datetimes.
/// Under `fail` the query fails with the job's message naming the line and
/// the value, after the first answer; and an unknown operation makes the
/// job itself exit 2 before it reads anything. The job's temp folder is
/// gone too.
///
/// A job of `protocol` 2 answers the record with an error line instead, and
/// under `fail` the host fails the query naming its datetime.
pub async fn check_domain_error(name: &str, argv: &[String], prefix: &str, protocol: u32) {
    let dir = TempDir::new(&format!("{name}-domain"));
    let pid_file = dir.join("pid");
    let mut options = traced_options(name, argv, &pid_file);
    options.env = jvm_tmp_env(&dir.join("tmp"));
    options.protocol = protocol.into();
    let job = BridgeEngine::new(options);
    let input: Vec<Instant> = [1.0, 0.0, 3.0]
        .into_iter()
        .zip(instants(3))
        .map(|(v, i)| Instant::number(i.datetime, v))
        .collect();
    let spec = QuerySpec::transform("speed", Transform::new("ln", None).unwrap());
    check_skipped(&job, spec.clone(), &input, &[0, 2]).await;
    assert_group_gone(&pid_file);
    let spec = spec.on_error(mfstream_model::OnError::Fail);
    let bad = input[1].datetime.clone();
    let (events, status) = run_query(&job, spec, input).await;
    let reason = failure(&status);
    if protocol >= 2 {
        assert!(
            reason.contains(&format!(
                "record at {bad}: the job found no result: ln is defined for positive values only"
            )),
            "{reason}"
        );
    } else {
        assert!(
            reason.contains(&format!(
                "{prefix}: line 2: ln is defined for positive values only, got 0"
            )),
            "{reason}"
        );
        assert!(reason.contains("status 2"), "{reason}");
    }
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
/// set to `engine` prints what it prints on the local engine: the same
/// datetimes, values within `max_ulps`.
pub fn check_cli_matches_local(engine: &str, var: &str, cmd: &str, max_ulps: u64) {
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
        assert!(ulps <= max_ulps, "{engine}: local {l} but {j}");
    }
}

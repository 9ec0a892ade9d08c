//! Real runtimes behind the shipped `engines.toml`, end to end: each test
//! resolves its runtime's entry from the environment (`eval "$(jobs/<rt>/setup.sh)"`)
//! and compares the job's results with the `local` engine's. A test whose
//! runtime is not set up skips, saying so on stderr, unless
//! `MFSTREAM_REQUIRE_RUNTIMES=1` (as `.ci/run` sets): then it fails.

mod beam;
mod meos;

// shared helpers

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use mfstream::{
    BridgeOptions, Config, Event, Instant, LocalEngine, Op, QueryHandle, QuerySpec, QueryStatus,
    Source, StreamEngine, Transform,
};

use crate::util::*;

/// The shipped `engines.toml` entry `name`, resolved from the environment,
/// with a variable marking the job's processes (see [`Marked`]); `None` when
/// its command variable is unset and runtimes are not required.
pub fn runtime(name: &str) -> Option<(BridgeOptions, Marked)> {
    let config = Config::from_file(&root().join("engines.toml")).expect("engines.toml is valid");
    let def = config
        .engines
        .iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("engines.toml has no `{name}` entry"));
    if std::env::var_os(&def.cmd_env).is_none() {
        let why = format!(
            "{} is not set: run `eval \"$(jobs/{name}/setup.sh)\"` first",
            def.cmd_env
        );
        if std::env::var("MFSTREAM_REQUIRE_RUNTIMES").as_deref() == Ok("1") {
            panic!("runtime {name} is required (MFSTREAM_REQUIRE_RUNTIMES=1) but {why}");
        }
        eprintln!("skipped: runtime {name} is not set up ({why})");
        return None;
    }
    let mut options = def
        .resolve(&|var| std::env::var(var).ok())
        .unwrap_or_else(|e| panic!("engine {name}: {e}"));
    let marked = Marked::new(name);
    options.env.push((MARK.into(), marked.0.clone()));
    Some((options, marked))
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
        instant.value = mfstream::Value::Number(x);
    }
    input
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
        instant.value = mfstream::Value::Number(x);
    }
    input
}

/// The `local` engine's events for `spec` over `input`.
pub async fn local(spec: QuerySpec, input: Vec<Instant>) -> Vec<Event> {
    let handle = LocalEngine::new()
        .submit(spec, Source::from_instants(input))
        .await
        .unwrap();
    let (events, status) = collect(handle).await;
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
    let mut handle = mfstream::BridgeEngine::new(options)
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

//! Helpers shared by the integration tests.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use std::process::{Command, Output};

use mfstream_engine::{BridgeEngine, BridgeOptions};
use mfstream_engine::{QueryHandle, Source, SourceSender, StreamEngine};
use mfstream_model::ops::{Kind, Op, Transform};
use mfstream_model::{Event, Instant, QuerySpec, QueryStatus};
use mfstream_registry::Registry;
use mfstream_registry::config::Config;

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A chapter of the book (`docs/src/CHAPTER`, e.g. `"server.md"`), whose
/// examples the tests hold to what mfstream really does.
pub fn book(chapter: &str) -> String {
    let path = root().join("docs/src").join(chapter);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A chaos or fixture job script under `tests/jobs/`.
pub fn job(script: &str) -> String {
    root().join("tests/jobs").join(script).display().to_string()
}

/// The Python reference job.
pub fn reference_job() -> String {
    root()
        .join("jobs/reference/mfstream_job.py")
        .display()
        .to_string()
}

/// A fresh, empty directory for one test.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("mfstream-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Bridge options for a job run as `sh SCRIPT`, with a short grace period so
/// that the stop sequence of a test takes a fraction of a second.
pub fn sh_options(script: &str) -> BridgeOptions {
    let mut options = BridgeOptions::new("test", vec!["sh".into(), job(script)]);
    options.stop_grace = Duration::from_millis(200).into();
    options
}

/// Probes until `done` holds of what `probe` gives, and returns that: how
/// a test waits for a state nothing tells it of (a counter, a status, a
/// process gone). Bounded: past `within` (a probe that does not answer
/// counts in it) it panics, naming `what` it waited for and showing the
/// last value seen, so a regression fails the test instead of hanging it.
/// Between probes it pauses 1 ms, doubling up to 50 ms.
pub async fn eventually<T: std::fmt::Debug>(
    what: &str,
    within: Duration,
    mut probe: impl AsyncFnMut() -> T,
    done: impl Fn(&T) -> bool,
) -> T {
    let deadline = tokio::time::Instant::now() + within;
    let mut pause = Duration::from_millis(1);
    let mut last = None;
    let shown = |last: &Option<T>| last.as_ref().map_or("nothing".into(), |v| format!("{v:?}"));
    loop {
        match tokio::time::timeout_at(deadline, probe()).await {
            Ok(seen) if done(&seen) => return seen,
            Ok(seen) => last = Some(seen),
            Err(_) => panic!(
                "{what}: not within {within:?} (the last probe did not answer); last seen: {}",
                shown(&last)
            ),
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            panic!("{what}: not within {within:?}; last seen: {}", shown(&last));
        }
        tokio::time::sleep(pause.min(deadline - now)).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// `n` numeric instants, the i-th at second i with value i + 1.
pub fn instants(n: usize) -> Vec<Instant> {
    (0..n)
        .map(|i| {
            Instant::number(
                format!(
                    "2026-01-01T00:00:{:02}.{:06}Z",
                    i / 1_000_000 % 60,
                    i % 1_000_000
                ),
                (i + 1) as f64,
            )
        })
        .collect()
}

/// A `mul` by 1 query: the job's answers are the inputs.
pub fn echo_spec() -> QuerySpec {
    QuerySpec::transform("speed", Transform::new("mul", Some(1.0)).unwrap())
}

/// A live echo query on `engine` of `registry`, fed through the returned
/// sender, that has already answered one instant (`before`).
pub async fn live_echo(registry: &Registry, engine: &str) -> (SourceSender, QueryHandle) {
    let (sender, source) = Source::channel(4);
    let mut live = registry
        .get(engine)
        .unwrap()
        .submit(echo_spec(), source)
        .await
        .unwrap();
    sender.send(Instant::number("before", 1.0)).await.unwrap();
    assert_eq!(live.next().await.unwrap().datetime(), "before");
    (sender, live)
}

/// Submits `spec` over `input` to a bridge engine with `options`.
pub async fn submit(options: BridgeOptions, spec: QuerySpec, input: Vec<Instant>) -> QueryHandle {
    BridgeEngine::new(options)
        .submit(spec, Source::from_instants(input))
        .await
        .expect("the job starts")
}

/// Every event of a query, and its final status.
pub async fn collect(mut handle: QueryHandle) -> (Vec<Event>, QueryStatus) {
    let mut events = Vec::new();
    while let Some(batch) = handle.next_batch().await {
        events.extend(batch);
    }
    (events, handle.status())
}

/// The failure reason, or a panic naming the status it got instead.
pub fn failure(status: &QueryStatus) -> &str {
    match status {
        QueryStatus::Failed { reason } => reason,
        other => panic!("expected a failed query, got {other:?}"),
    }
}

/// Waits until process `pid` has terminated, by its pidfd (no polling):
/// true if it has within `timeout`.
pub fn wait_gone(pid: i32, timeout: Duration) -> bool {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        // ESRCH: already gone (and reaped).
        return std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    }
    // SAFETY: fd is a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let mut poll = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let ready = unsafe { libc::poll(&mut poll, 1, timeout.as_millis() as i32) };
    ready == 1
}

/// Reads a pid written by a fixture job, waiting for the file to be complete
/// (the job writes it before it answers its first record).
pub fn read_pid(path: &Path) -> i32 {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

/// The folder cargo builds into for this test binary's profile
/// (`target/debug`): the test binary is `target/debug/deps/tests-…`.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("the binary's folder");
    deps.parent().expect("the profile folder").to_owned()
}

/// The cdylib of workspace crate `package` (`mfstream-plugin-scale` →
/// `libmfstream_plugin_scale.so`), built once per test run.
///
/// `cargo test --workspace` does not build a cdylib-only crate's library,
/// so the first call runs `cargo build -p` for the plugin crates into this
/// test binary's own target folder.
pub fn plugin_library(package: &str) -> PathBuf {
    static BUILT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let profile = profile_dir();
        let target = profile.parent().expect("the target folder");
        let mut cargo = std::process::Command::new(option_env!("CARGO").unwrap_or("cargo"));
        cargo
            .current_dir(root())
            .env("CARGO_TARGET_DIR", target)
            .args(["build", "--quiet"])
            .args(["-p", "mfstream-plugin-scale", "-p", "mfstream-plugin-chaos"])
            .args(["-p", "mfstream-plugin-meos", "-p", "mfstream-fastjob"]);
        if profile.file_name().is_some_and(|n| n == "release") {
            cargo.arg("--release");
        }
        let output = cargo
            .output()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if !output.status.success() {
            return Err(String::from_utf8_lossy(&output.stderr).into_owned());
        }
        Ok(())
    });
    if let Err(e) = built {
        panic!("building the plugin crates failed: {e}");
    }
    let file = format!("lib{}.so", package.replace('-', "_"));
    profile_dir().join(file)
}

/// The native reference job, `mfstream-fastjob`, built with the plugins
/// (see [`plugin_library`]).
pub fn fastjob() -> PathBuf {
    plugin_library("mfstream-plugin-scale");
    profile_dir().join("mfstream-fastjob")
}

/// What a test needs that not every machine has (a runtime, libmeos,
/// chromium): `found`, or a failure naming what is missing and how to get it.
///
/// Such a test is marked `#[ignore = "needs …"]`, so plain `cargo test`
/// lists it as ignored, with the reason, rather than passing it unrun. It
/// runs with `cargo test -- --include-ignored` (as `.ci/run` runs the tests,
/// after the setup scripts), and there its need is a requirement.
#[track_caller]
pub fn require<T>(found: Option<T>, what: &str, how: &str) -> T {
    found.unwrap_or_else(|| panic!("this test needs {what}, and there is none: {how}"))
}

/// Compiles `tests/plugins/c/<source>` with the system C compiler (`$CC`,
/// else `cc`) against `mfstream_plugin.h`, with `flags`, into `out`.
///
/// These tests are not ignored: on Linux, rustc links every test binary
/// through `cc`, so a machine that runs them has a C compiler.
pub fn compile_c(source: &str, flags: &[&str], out: &Path) -> PathBuf {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let output = std::process::Command::new(&cc)
        .arg("-Wall")
        .arg("-I")
        .arg(root().join("plugins/mfstream-plugin/include"))
        .args(flags)
        .arg(root().join("tests/plugins/c").join(source))
        .arg("-lm")
        .arg("-o")
        .arg(out)
        .output();
    let output = match output {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => require(
            None,
            &format!("a C compiler ({cc})"),
            "install gcc, or set CC",
        ),
        output => output.unwrap_or_else(|e| panic!("cannot run {cc}: {e}")),
    };
    assert!(
        output.status.success(),
        "{cc} {source} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    out.to_owned()
}

/// A C plugin compiled from `scale.c` with `flags` into `dir/name`.
pub fn c_plugin(dir: &TempDir, name: &str, flags: &[&str]) -> PathBuf {
    c_plugin_of(dir, "scale.c", name, flags)
}

/// A C plugin compiled from `tests/plugins/c/<source>` with `flags` into
/// `dir/name`. A source in `v2/` includes the frozen version-2 header next
/// to it (a quoted include looks in the source's folder first).
pub fn c_plugin_of(dir: &TempDir, source: &str, name: &str, flags: &[&str]) -> PathBuf {
    let mut all = vec!["-shared", "-fPIC"];
    all.extend_from_slice(flags);
    compile_c(source, &all, &dir.join(name))
}

/// Where libmeos is for the meos plugin's tests (marked
/// `#[ignore = "needs libmeos: …"]`): `$MFSTREAM_MEOS_LIB`, else
/// `$MFAPI_MEOS_LIBPATH` (which `jobs/meos/setup.sh` prints), else
/// `target/meos/pymeos_cffi.libs`; a failure when it is in none of them.
pub fn meos_lib() -> PathBuf {
    let found = ["MFSTREAM_MEOS_LIB", "MFAPI_MEOS_LIBPATH"]
        .iter()
        .find_map(|var| std::env::var_os(var).filter(|v| !v.is_empty()))
        .map(PathBuf::from)
        .or_else(|| Some(root().join("target/meos/pymeos_cffi.libs")))
        .filter(|p| p.exists());
    require(
        found,
        "libmeos",
        "set MFSTREAM_MEOS_LIB, or run `eval \"$(jobs/meos/setup.sh)\"`",
    )
}

/// A registry from an engines.toml in `dir` with `text`.
pub fn registry(dir: &TempDir, text: &str) -> Registry {
    let path = dir.join("engines.toml");
    std::fs::write(&path, text).unwrap();
    Registry::from_config_with_env(&Config::from_file(&path).unwrap(), &|_| None)
}

/// A registry like `registry`'s whose isolated plugins run in the
/// `mfstream` binary (the test binary cannot host them).
pub fn isolating_registry(dir: &TempDir, text: &str) -> Registry {
    let path = dir.join("engines.toml");
    std::fs::write(&path, text).unwrap();
    let host = env!("CARGO_BIN_EXE_mfstream").to_owned();
    let env =
        move |name: &str| (name == mfstream_engine::plugin::PLUGIN_HOST_VAR).then(|| host.clone());
    Registry::from_config_with_env(&Config::from_file(&path).unwrap(), &env)
}

/// An isolated `[[plugin]]` entry for `path`.
pub fn isolated(path: &Path) -> String {
    format!("{}isolation = \"process\"\n", entry(path))
}

/// A `[[plugin]]` entry for `path`.
pub fn entry(path: &Path) -> String {
    format!("[[plugin]]\npath = {:?}\n", path.display().to_string())
}

/// A transform for every operation on numbers of the catalogue.
pub fn every_transform() -> Vec<Transform> {
    Op::on(Kind::Number)
        .map(|op| {
            let arg = op.takes_arg().then_some(1.852);
            Transform::new(op.name(), arg).unwrap()
        })
        .collect()
}

/// The one run helper: `spec` over `input` on `engine`, to its end; its
/// events and its final status.
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

/// [`run_query`] on the engine `name` of `registry`.
pub async fn run_on(
    registry: &Registry,
    name: &str,
    spec: QuerySpec,
    input: Vec<Instant>,
) -> (Vec<Event>, QueryStatus) {
    let engine = registry.get(name).expect("the engine is known and ready");
    run_query(engine.as_ref(), spec, input).await
}

/// Checks that `engine` gives exactly local's events for every operation.
pub async fn assert_matches_local(registry: &Registry, engine: &str) {
    // Values in every operation's domain; 3000 spans several batches.
    let input: Vec<Instant> = instants(3000)
        .into_iter()
        .map(|i| Instant::number(i.datetime, i.value.as_f64().unwrap() / 7.0))
        .collect();
    for transform in every_transform() {
        let spec = QuerySpec::transform("speed", transform);
        let (local, local_status) = run_on(registry, "local", spec.clone(), input.clone()).await;
        let (plugin, status) = run_on(registry, engine, spec, input.clone()).await;
        assert_eq!(local_status, QueryStatus::Completed);
        assert_eq!(status, QueryStatus::Completed, "{engine} {transform}");
        assert_eq!(plugin.len(), local.len(), "{engine} {transform}");
        assert!(
            plugin == local,
            "{engine} {transform}: results differ from local's"
        );
    }
}

/// The one command builder: the `mfstream` binary, run in `dir`, with the
/// variables that would pick another config, engine, log level or libmeos
/// cleared (a test sets what it needs).
pub fn mfstream_command(dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mfstream"));
    cmd.current_dir(dir)
        .env_remove("MFSTREAM_CONFIG")
        .env_remove("MFAPI_STREAM_ENGINE")
        .env_remove("MFSTREAM_MEOS_LIB")
        .env_remove("RUST_LOG");
    cmd
}

/// `mfstream ARGS --config CONFIG` (see [`mfstream_command`]), run to its
/// end.
pub fn mfstream_with(args: &[&str], config: &Path) -> Output {
    mfstream_command(&root())
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .expect("mfstream runs")
}

/// A finished command's stdout, as text.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A finished command's stderr, as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `n` instants 700 ms apart from 23:59:50 UTC, crossing midnight, with
/// values from `value`, in MobilityDB's and MF-JSON's datetime forms. With
/// `late_every = Some(k)`, every k-th comes 9 s late (out of order).
pub fn irregular(
    n: usize,
    late_every: Option<usize>,
    value: impl Fn(usize) -> mfstream_model::Value,
) -> Vec<Instant> {
    (0..n)
        .map(|i| {
            let late = match late_every {
                Some(k) if i % k == k - 1 => 9_000,
                _ => 0,
            };
            let ms = 86_390_000 + i as u64 * 700 - late;
            let (s, frac) = (ms / 1000, ms % 1000);
            let (h, m, s) = (s / 3600 % 24, s / 60 % 60, s % 60);
            let day = 1 + ms / 86_400_000;
            let datetime = match i % 3 {
                0 => format!("2026-01-{day:02}T{h:02}:{m:02}:{s:02}.{frac:03}Z"),
                1 => format!("2026-01-{day:02} {h:02}:{m:02}:{s:02}.{frac:03}+00"),
                _ => format!("2026-01-{day:02}T{h:02}:{m:02}:{s:02}.{frac:03}+00:00"),
            };
            Instant {
                datetime,
                value: value(i),
            }
        })
        .collect()
}

/// Equal JSON, numbers to 1e-9 relative: engines may sum in another order.
pub fn same_json(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as Json;
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0)
        }
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// `t` as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC).
pub fn rfc3339(t: std::time::SystemTime) -> String {
    let ms = t.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = mfstream_model::datetime::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        ms.rem_euclid(1000)
    )
}

/// A wait that times out says what it waited for and the last value seen.
#[tokio::test]
#[should_panic(expected = "the counter at 3: not within 50ms; last seen: 2")]
async fn eventually_names_what_it_waited_for_and_the_last_value_seen() {
    let mut counter = 0;
    let probe = async || {
        counter = (counter + 1).min(2);
        counter
    };
    eventually("the counter at 3", Duration::from_millis(50), probe, |n| {
        *n == 3
    })
    .await;
}

/// A probe that does not answer counts in the wait.
#[tokio::test]
#[should_panic(expected = "an answer: not within 50ms (the last probe did not answer)")]
async fn eventually_bounds_a_probe_that_never_answers() {
    let probe = async || std::future::pending::<()>().await;
    eventually("an answer", Duration::from_millis(50), probe, |()| true).await;
}

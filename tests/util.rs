//! Helpers shared by the integration tests.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use mfstream::{
    BridgeEngine, BridgeOptions, Event, Instant, QueryHandle, QuerySpec, QueryStatus, Source,
    StreamEngine, Transform,
};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
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
    options.stop_grace = Duration::from_millis(200);
    options
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

/// The `mfstream` binary run in `dir`, with the configuration variables
/// cleared.
pub fn mfstream_command(dir: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_mfstream"));
    cmd.current_dir(dir)
        .env_remove("MFSTREAM_CONFIG")
        .env_remove("MFAPI_STREAM_ENGINE")
        .env_remove("RUST_LOG");
    cmd
}

//! One bridge job: a child process in its own process group, with its stderr
//! drained by a task that keeps the tail for failure reasons.
//!
//! # Caveats
//!
//! - The job gets `SIGKILL` when mfstream dies, even by `SIGKILL` (Linux's
//!   parent-death signal). That signal follows the *thread* that forked the
//!   job, not the process: a job forked on a thread that then exits (a
//!   `spawn_blocking` thread retired after 10 s idle, a caller's short-lived
//!   thread) would be killed with it. So every job is forked by one thread
//!   that lives as long as the process ([`spawn_from_one_thread`]). A
//!   grandchild of the job (a JVM under a launcher script that did not
//!   `exec`) does not get the signal, but it does see end of input on its
//!   inherited stdin.
//! - Every signal goes to the whole process group, so a launcher that forked
//!   leaves nothing behind when the job is stopped.

use std::collections::VecDeque;
use std::io;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::task::JoinHandle;

/// Bytes of stderr kept for the failure reason.
const TAIL_BYTES: usize = 4096;
/// Lines of stderr quoted in a failure reason.
const TAIL_LINES: usize = 12;

/// What a job is started with.
#[derive(Debug)]
pub(crate) struct JobCommand<'a> {
    pub argv: &'a [String],
    pub args: &'a [String],
    pub env: &'a [(String, String)],
    pub libpath: Option<&'a str>,
}

/// A running job.
#[derive(Debug)]
pub(crate) struct Job {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub stdout: ChildStdout,
    pgid: i32,
    stderr: Arc<Mutex<StderrTail>>,
    stderr_task: JoinHandle<()>,
}

impl Job {
    /// Starts the job: no shell, its own process group, `SIGKILL` on our
    /// death, stdin, stdout and stderr piped.
    pub(crate) fn spawn(command: &JobCommand<'_>) -> io::Result<Job> {
        let (program, prefix) = command
            .argv
            .split_first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the command is empty"))?;
        let mut cmd = Command::new(program);
        cmd.args(prefix)
            .args(command.args)
            .envs(command.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(libpath) = command.libpath {
            cmd.env(
                "LD_LIBRARY_PATH",
                prepend_path(libpath, std::env::var_os("LD_LIBRARY_PATH")),
            );
        }
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: the closure runs in the forked child before exec and only
        // calls async-signal-safe functions (prctl, getppid, raise).
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The parent may have died before prctl took effect.
                if libc::getppid() != parent {
                    libc::raise(libc::SIGKILL);
                }
                Ok(())
            });
        }
        let mut child = spawn_from_one_thread(cmd)?;
        let pgid = child.id().map(|id| id as i32).unwrap_or(0);
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout was piped");
        let stderr_pipe = child.stderr.take().expect("stderr was piped");
        let stderr = Arc::new(Mutex::new(StderrTail::default()));
        let stderr_task = tokio::spawn(drain_stderr(stderr_pipe, stderr.clone()));
        Ok(Job {
            child,
            stdin,
            stdout,
            pgid,
            stderr,
            stderr_task,
        })
    }

    /// Sends `signal` to the job's whole process group.
    pub(crate) fn signal_group(&self, signal: libc::c_int) {
        if self.pgid > 0 {
            // SAFETY: kill has no memory effects; a group that is gone gives
            // ESRCH, which is fine to ignore.
            unsafe {
                libc::kill(-self.pgid, signal);
            }
        }
    }

    /// The last lines the job wrote to stderr, once it has closed stderr (or
    /// after a short bound, for a job whose stragglers keep it open).
    pub(crate) async fn stderr_tail(&mut self) -> String {
        let _ = tokio::time::timeout(Duration::from_millis(500), &mut self.stderr_task).await;
        self.stderr.lock().map(|t| t.text()).unwrap_or_default()
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        // Whatever happened, nothing of the job outlives it.
        self.signal_group(libc::SIGKILL);
        self.stderr_task.abort();
    }
}

/// A command to fork on the spawning thread, and where its outcome goes.
struct SpawnRequest {
    command: Command,
    runtime: tokio::runtime::Handle,
    reply: mpsc::SyncSender<io::Result<Child>>,
}

/// Forks `command` on the one thread that forks every job, so that the
/// job's parent-death signal fires when the process dies, not when the
/// calling thread does.
///
/// The child is registered with the caller's runtime, which must exist.
/// The caller waits for the fork and exec, as it would calling
/// `Command::spawn` itself.
fn spawn_from_one_thread(command: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<Option<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|e| io::Error::other(format!("jobs are started inside a tokio runtime: {e}")))?;
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("mfstream-spawner".into())
            .spawn(move || {
                // Ends only when every sender has gone: never, the sender is
                // static.
                for mut request in rx {
                    let _entered = request.runtime.enter();
                    let _ = request.reply.send(request.command.spawn());
                }
            })
            .ok()
            .map(|_| tx)
    });
    let Some(spawner) = spawner else {
        return Err(io::Error::other(
            "the thread that starts jobs could not be started",
        ));
    };
    let (reply, outcome) = mpsc::sync_channel(1);
    spawner
        .send(SpawnRequest {
            command,
            runtime,
            reply,
        })
        .map_err(|_| io::Error::other("the thread that starts jobs has gone"))?;
    outcome
        .recv()
        .map_err(|_| io::Error::other("the thread that starts jobs has gone"))?
}

/// `dir` before the existing path, never replacing it.
fn prepend_path(dir: &str, existing: Option<std::ffi::OsString>) -> std::ffi::OsString {
    let mut path = std::ffi::OsString::from(dir);
    if let Some(existing) = existing.filter(|e| !e.is_empty()) {
        path.push(":");
        path.push(existing);
    }
    path
}

/// Reads stderr continuously, so that a job that logs a lot never blocks,
/// keeping the last bytes.
async fn drain_stderr(mut pipe: tokio::process::ChildStderr, tail: Arc<Mutex<StderrTail>>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if tracing::enabled!(tracing::Level::DEBUG) {
                    tracing::debug!(stderr = %String::from_utf8_lossy(&buf[..n]).trim_end());
                }
                if let Ok(mut tail) = tail.lock() {
                    tail.push(&buf[..n]);
                }
            }
        }
    }
}

/// The last [`TAIL_BYTES`] of a stream.
#[derive(Debug, Default)]
struct StderrTail {
    bytes: VecDeque<u8>,
}

impl StderrTail {
    fn push(&mut self, data: &[u8]) {
        let data = &data[data.len().saturating_sub(TAIL_BYTES)..];
        let overflow = (self.bytes.len() + data.len()).saturating_sub(TAIL_BYTES);
        self.bytes.drain(..overflow);
        self.bytes.extend(data);
    }

    /// The last lines, trimmed, joined with ` | `.
    fn text(&self) -> String {
        let bytes: Vec<u8> = self.bytes.iter().copied().collect();
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        lines[lines.len().saturating_sub(TAIL_LINES)..].join(" | ")
    }
}

/// Describes how a job ended: `exited with status 3` or
/// `was killed by signal 11 (SIGSEGV)`.
pub(crate) fn describe_exit(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal} ({})", signal_name(signal)),
        (None, None) => "ended".to_owned(),
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_path_is_prepended_not_replaced() {
        assert_eq!(
            prepend_path("/opt/meos", Some("/usr/lib".into())),
            "/opt/meos:/usr/lib"
        );
        assert_eq!(prepend_path("/opt/meos", Some("".into())), "/opt/meos");
        assert_eq!(prepend_path("/opt/meos", None), "/opt/meos");
    }

    #[test]
    fn the_stderr_tail_keeps_the_last_lines() {
        let mut tail = StderrTail::default();
        for i in 0..10_000 {
            tail.push(format!("line {i}\n").as_bytes());
        }
        let text = tail.text();
        assert!(text.ends_with("line 9999"), "{text}");
        assert_eq!(text.split(" | ").count(), TAIL_LINES);
    }
}

//! `mfstream serve`: the control plane over HTTP and SSE, run as the real
//! binary on a loopback port. This module is the harness; the tests are in
//! its submodules.

mod api;
mod bounds;
mod compute;
mod errors;
mod fuzz;
mod journal;
mod kafka;
mod lifecycle;
mod limits;
mod metrics;
mod mqtt;
mod on_error;
mod ownership;
mod positions;
mod positions_bridge;
mod reproject;
mod reset;
mod sources;
mod state;
mod stored_limits;
mod stream;
mod web;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::time::Duration;

use crate::client::{Client, Sse, SseEvent, subscribe};

/// A datetime for instant `i` of a test: `i` microseconds into 2026.
/// `mfstream serve ARGS` run to its exit, in a fresh directory.
pub fn serve_exits<S: AsRef<std::ffi::OsStr>>(name: &str, args: &[S]) -> std::process::Output {
    let dir = TempDir::new(name);
    Command::new(env!("CARGO_BIN_EXE_mfstream"))
        .args(["serve", "--addr", "127.0.0.1:0"])
        .args(args)
        .env_remove("MFSTREAM_CONFIG")
        .env_remove("MFAPI_STREAM_ENGINE")
        .current_dir(dir.path())
        .output()
        .unwrap()
}

/// `mfstream serve --state STATE` run to its exit, in a fresh directory.
pub fn serve_on_state_exits(name: &str, state: &std::path::Path) -> std::process::Output {
    serve_exits(name, &[std::ffi::OsStr::new("--state"), state.as_os_str()])
}

pub fn at(i: usize) -> String {
    format!("2026-01-01T00:00:00.{i:06}Z")
}

/// One JSON instant at [`at`]`(i)`.
pub fn instant(i: usize, value: &str) -> String {
    format!("{{\"datetime\":\"{}\",\"value\":{value}}}", at(i))
}
use crate::util::*;

/// The property every test uses, unless it says otherwise.
pub const P: &str = "/collections/ships/items/s1/tproperties/speed";

/// Long enough for anything to happen; reached only on failure.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A running `mfstream serve`, killed when dropped.
pub struct Serve {
    child: Option<Child>,
    stdout: BufReader<ChildStdout>,
    pub addr: SocketAddr,
    dir: TempDir,
}

impl Serve {
    /// Starts the server with `args`, an engines.toml of test engines, and
    /// `env`, and waits for the line that says where it listens.
    pub fn start(name: &str, args: &[&str], env: &[(&str, String)]) -> Serve {
        Serve::start_through(name, &[], args, env)
    }

    /// [`Serve::start`] with the binary run through `wrapper`, a command
    /// and its arguments that end with the program to run (`setpriv … --`);
    /// none when empty.
    pub fn start_through(
        name: &str,
        wrapper: &[&str],
        args: &[&str],
        env: &[(&str, String)],
    ) -> Serve {
        let dir = TempDir::new(name);
        let config = dir.join("engines.toml");
        std::fs::write(&config, TEST_ENGINES).unwrap();
        let binary = env!("CARGO_BIN_EXE_mfstream");
        let mut cmd = match wrapper {
            [] => Command::new(binary),
            [program, rest @ ..] => {
                let mut cmd = Command::new(program);
                cmd.args(rest).arg(binary);
                cmd
            }
        };
        cmd.current_dir(dir.path())
            .env_remove("MFSTREAM_CONFIG")
            .env_remove("MFAPI_STREAM_ENGINE")
            .env_remove("MFSTREAM_TOKEN")
            .env("RUST_LOG", "off")
            .env("TEST_ECHO_CMD", format!("sh {}", job("echo.sh")))
            .env("TEST_CRASH_CMD", format!("sh {}", job("crash_after.sh")))
            .env("TEST_HANG_CMD", format!("sh {}", job("hang.sh")))
            // The reference job on the standard library alone: planar
            // positions need nothing more.
            .env("TEST_REFPOS_CMD", format!("python3 -S {}", reference_job()))
            .args(["serve", "--addr", "127.0.0.1:0", "--config"])
            .arg(&config)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.join("stderr")).unwrap());
        for (key, value) in env {
            cmd.env(key, value);
        }
        let mut child = cmd.spawn().expect("mfstream serve starts");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let addr = line
            .trim()
            .strip_prefix("mfstream: listening on http://")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .parse()
            .unwrap();
        Serve {
            child: Some(child),
            stdout,
            addr,
            dir,
        }
    }

    /// The next status line the server prints on stdout.
    pub fn next_line(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line
    }

    /// What the server wrote to stderr so far: its log, with `RUST_LOG`
    /// (and `NO_COLOR`) given in `env`.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr")).unwrap()
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Sends `signal` to the server.
    pub fn signal(&self, signal: i32) {
        let pid = self.child.as_ref().expect("running").id() as i32;
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid, signal) };
    }

    /// The engines.toml the server was started with.
    pub fn config(&self) -> std::path::PathBuf {
        self.dir.join("engines.toml")
    }

    pub fn client(&self) -> Client {
        Client::new(self.addr)
    }

    pub async fn subscribe(&self, path: &str, headers: &[(&str, &str)]) -> Sse {
        match subscribe(self.addr, path, headers).await {
            Ok(sse) => sse,
            Err(response) => panic!("cannot subscribe to {path}: {response:?}"),
        }
    }

    /// Sends SIGTERM and waits for the exit.
    pub fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        child.wait().unwrap()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

const TEST_ENGINES: &str = r#"
[[engine]]
name = "echo"
cmd_env = "TEST_ECHO_CMD"
stop_grace_ms = 200

[[engine]]
name = "crash"
cmd_env = "TEST_CRASH_CMD"
stop_grace_ms = 200

[[engine]]
name = "hang"
cmd_env = "TEST_HANG_CMD"
stop_grace_ms = 200
max_in_flight = 1

[[engine]]
name = "absent"
cmd_env = "TEST_ABSENT_CMD"

[[engine]]
name = "refpos"
cmd_env = "TEST_REFPOS_CMD"
framing = "json"
protocol = 2
positions = true
stop_grace_ms = 200
"#;

/// JSON lines of `n` instants, values `from..from + n`.
pub fn lines(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| format!("{{\"datetime\":\"2026-01-01T00:00:00.{i:06}Z\",\"value\":{i}}}\n"))
        .collect()
}

/// Registers `body` on `property` and returns the query's path.
pub async fn register(client: &mut Client, property: &str, body: &str) -> String {
    let response = client.post(&format!("{property}/queries"), body).await;
    assert_eq!(response.status, 201, "{response:?}");
    let link = response.json();
    assert_eq!(link["rel"], "cquery");
    assert_eq!(link["type"], "text/event-stream");
    let path = link["channel"].as_str().unwrap().to_owned();
    // Part 4 clients follow the links as given: they are absolute.
    let origin = "http://localhost";
    assert_eq!(link["href"], format!("{origin}{path}/stream"));
    assert_eq!(link["links"][0]["href"], format!("{origin}{path}"));
    assert_eq!(response.header("location"), Some(path.as_str()));
    path
}

pub fn values(events: &[SseEvent]) -> Vec<f64> {
    events
        .iter()
        .filter(|e| e.event == "instant")
        .map(|e| e.json()["value"].as_f64().unwrap())
        .collect()
}

pub async fn take(sse: &mut Sse, n: usize) -> Vec<SseEvent> {
    let mut events = Vec::new();
    while events.len() < n {
        let event = tokio::time::timeout(PATIENCE, sse.next())
            .await
            .expect("an event in time")
            .expect("the stream goes on");
        events.push(event);
    }
    events
}

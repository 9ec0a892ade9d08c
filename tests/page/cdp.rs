//! Headless chromium driven over its DevTools protocol, on the pipe of
//! `--remote-debugging-pipe` (file descriptors 3 and 4, NUL-separated JSON
//! messages): no WebSocket client, no port. A test navigates, waits on a
//! promise of the page (an event, not a sleep), and takes a screenshot.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::{TempDir, require};

/// Long enough for a loaded machine to start chromium and draw; reached
/// only on failure.
const PATIENCE: Duration = Duration::from_secs(90);

/// The browser: `$MFSTREAM_CHROMIUM`, else `chromium` on the PATH.
pub fn chromium() -> Option<String> {
    if let Some(path) = std::env::var_os("MFSTREAM_CHROMIUM") {
        return Some(path.to_string_lossy().into_owned());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("chromium"))
        .find(|p| p.is_file())
        .map(|p| p.display().to_string())
}

/// A pipe (its read end, its write end), both close-on-exec.
fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is two ints, as pipe2 writes.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: pipe2 succeeded: both are open descriptors, ours alone.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// A headless chromium with one page attached; killed (its whole process
/// group) when dropped, its profile and temporary files removed.
pub struct Browser {
    child: Child,
    to: File,
    from: Receiver<Value>,
    /// Events that arrived while a call waited for its answer.
    events: Vec<Value>,
    next: u64,
    session: String,
    log: std::path::PathBuf,
    _profile: TempDir,
}

impl Browser {
    /// Starts chromium on `about:blank` and attaches to its page.
    pub fn start(name: &str) -> Browser {
        let chromium = require(
            chromium(),
            "chromium",
            "apt-get install chromium, or set MFSTREAM_CHROMIUM",
        );
        let profile = TempDir::new(name);
        let log = profile.join("chromium.log");
        // Chromium's own temporary folder goes with the profile (it is
        // removed only on a clean exit, never after the SIGKILL of drop).
        let tmp = profile.join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        let (commands, to_chromium) = pipe();
        let (from_chromium, answers) = pipe();
        let (commands_fd, answers_fd) = (commands.as_raw_fd(), answers.as_raw_fd());
        let mut command = Command::new(&chromium);
        command
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                "--window-size=1000,900",
                "--remote-debugging-pipe",
                "--enable-logging=stderr",
            ])
            .arg(format!(
                "--user-data-dir={}",
                profile.join("data").display()
            ))
            .arg("about:blank")
            .env("TMPDIR", &tmp)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).unwrap())
            .process_group(0);
        // SAFETY: only async-signal-safe calls (fcntl, dup2) between fork
        // and exec. The pipe's ends are first copied above 9, so that
        // neither is already 3 or 4 (where dup2 would keep it
        // close-on-exec); dup2 then clears close-on-exec on 3 and 4.
        unsafe {
            command.pre_exec(move || {
                let high = |fd| match libc::fcntl(fd, libc::F_DUPFD, 10) {
                    -1 => Err(std::io::Error::last_os_error()),
                    fd => Ok(fd),
                };
                let (c, a) = (high(commands_fd)?, high(answers_fd)?);
                if libc::dup2(c, 3) == -1 || libc::dup2(a, 4) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("chromium starts");
        drop((commands, answers));
        let (tx, from) = channel();
        let mut reader = File::from(from_chromium);
        std::thread::spawn(move || {
            let mut buffer = Vec::new();
            let mut chunk = [0u8; 65536];
            while let Ok(n @ 1..) = reader.read(&mut chunk) {
                buffer.extend_from_slice(&chunk[..n]);
                while let Some(end) = buffer.iter().position(|&b| b == 0) {
                    let message: Vec<u8> = buffer.drain(..=end).collect();
                    let Ok(value) = serde_json::from_slice(&message[..end]) else {
                        continue;
                    };
                    if tx.send(value).is_err() {
                        return;
                    }
                }
            }
        });
        let mut browser = Browser {
            child,
            to: File::from(to_chromium),
            from,
            events: Vec::new(),
            next: 0,
            session: String::new(),
            log,
            _profile: profile,
        };
        let targets = browser.send(None, "Target.getTargets", json!({}));
        let page = targets["targetInfos"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["type"] == "page"))
            .unwrap_or_else(|| panic!("chromium has no page: {targets}"))["targetId"]
            .clone();
        let attached = browser.send(
            None,
            "Target.attachToTarget",
            json!({"targetId": page, "flatten": true}),
        );
        browser.session = attached["sessionId"].as_str().unwrap().to_owned();
        browser.call("Page.enable", json!({}));
        browser.call("Runtime.enable", json!({}));
        browser
    }

    /// The last lines chromium logged (the page's console among them),
    /// for a failure's message.
    pub fn said(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<_> = log.lines().filter(|l| !l.contains("dbus")).collect();
        tail[tail.len().saturating_sub(20)..].join("\n")
    }

    /// Sends a command (to the page's session, or the browser's) and waits
    /// for its answer; keeps the events that come meanwhile.
    fn send(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = session.into();
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        if let Err(e) = self.to.write_all(&bytes) {
            panic!("chromium's pipe: {e}; chromium said:\n{}", self.said());
        }
        let deadline = Instant::now() + PATIENCE;
        loop {
            let message = self.receive(deadline, method);
            if message["id"] == id {
                if let Some(error) = message.get("error") {
                    panic!("{method}: {error}; chromium said:\n{}", self.said());
                }
                return message["result"].clone();
            }
            self.events.push(message);
        }
    }

    fn receive(&mut self, deadline: Instant, waiting_for: &str) -> Value {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.from.recv_timeout(left) {
            Ok(message) => message,
            Err(RecvTimeoutError::Timeout) => panic!(
                "no {waiting_for} from chromium in {PATIENCE:?}; it said:\n{}",
                self.said()
            ),
            Err(RecvTimeoutError::Disconnected) => {
                panic!("chromium closed its pipe; it said:\n{}", self.said())
            }
        }
    }

    /// A command to the page.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let session = self.session.clone();
        self.send(Some(&session), method, params)
    }

    /// Opens `url` and waits for its load event (a load event of another
    /// page, the blank one before it, is not taken for it).
    pub fn navigate(&mut self, url: &str) {
        self.events.retain(|e| e["method"] != "Page.loadEventFired");
        self.call("Page.navigate", json!({"url": url}));
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(i) = self
                .events
                .iter()
                .position(|e| e["method"] == "Page.loadEventFired")
            {
                self.events.remove(i);
                if self.evaluate("location.href") == url {
                    return;
                }
            }
            let message = self.receive(deadline, "load event");
            self.events.push(message);
        }
    }

    /// Evaluates `expression` in the page, awaiting it if it is a promise,
    /// and returns its value; an exception fails the test.
    pub fn evaluate(&mut self, expression: &str) -> Value {
        let result = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "awaitPromise": true, "returnByValue": true}),
        );
        if let Some(exception) = result.get("exceptionDetails") {
            panic!("{expression}: {exception}; chromium said:\n{}", self.said());
        }
        result["result"]["value"].clone()
    }

    /// A PNG of the page's area `[x, y, width, height]` (CSS pixels, from
    /// the document's top left).
    pub fn screenshot(&mut self, clip: [f64; 4]) -> Vec<u8> {
        let [x, y, width, height] = clip;
        let shot = self.call(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true,
                   "clip": {"x": x, "y": y, "width": width, "height": height, "scale": 1}}),
        );
        base64(shot["data"].as_str().expect("a screenshot's data"))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // SAFETY: signalling the process group we started (pgid = its pid).
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// Standard base64 (RFC 4648, padded), as DevTools sends a screenshot.
fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c:?}"),
    };
    let bytes: Vec<u8> = text.bytes().filter(|&b| b != b'=').map(value).collect();
    bytes
        .chunks(4)
        .flat_map(|c| {
            let n = c.iter().fold(0u32, |n, &v| n << 6 | u32::from(v)) << (6 * (4 - c.len()));
            let all = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
            all.into_iter().take(c.len() * 3 / 4)
        })
        .collect()
}

#[test]
fn base64_decodes_rfc_4648_test_vectors() {
    for (text, plain) in [
        ("", ""),
        ("Zg==", "f"),
        ("Zm8=", "fo"),
        ("Zm9v", "foo"),
        ("Zm9vYg==", "foob"),
        ("Zm9vYmE=", "fooba"),
        ("Zm9vYmFy", "foobar"),
    ] {
        assert_eq!(base64(text), plain.as_bytes(), "{text}");
    }
}

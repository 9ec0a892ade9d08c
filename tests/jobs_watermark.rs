//! Watermark lines (`jobs/README.md#watermarks`): an aggregating job, driven
//! directly as a child process, emits a time window as soon as a watermark
//! passes its end, before its stdin is closed; counts later records of an
//! emitted window as late; ignores a watermark that moves backwards; and
//! gives COUNT windows no heed to watermarks. Each scenario runs on the
//! reference job and on the Flink job (`MFAPI_FLINK_CMD`, see [`flink`]).
//!
//! Every read of the job's stdout is bounded by [`READ_TIMEOUT`]: a job that
//! keeps a window to itself fails the test with a message, it never hangs.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mfstream_engine::LocalEngine;
use mfstream_engine::{Source, StreamEngine};
use mfstream_model::{Instant, PropertyType, QuerySpec, QueryStatus, Registration};
use serde_json::{Value as Json, json};

use crate::util::*;

/// The longest wait for one result line: a Flink job starts in seconds, more
/// on a busy machine; a window that is due never takes this long.
const READ_TIMEOUT: Duration = Duration::from_secs(120);

/// How a job is started: its command, without the arguments.
struct Launcher {
    name: &'static str,
    argv: Vec<String>,
}

fn reference() -> Launcher {
    Launcher {
        name: "reference job",
        argv: vec!["python3".into(), reference_job()],
    }
}

/// The Flink job; a test that calls it is `#[ignore = "needs flink …"]` and,
/// run anyway, fails saying what to set up when `MFAPI_FLINK_CMD` is unset.
fn flink() -> Launcher {
    let argv = crate::runtimes::runtime_command("MFAPI_FLINK_CMD", "jobs/flink/setup.sh");
    Launcher {
        name: "Flink job",
        argv,
    }
}

/// Each scenario as a test on every job: `jobs_watermark::reference::NAME`
/// and `jobs_watermark::flink::NAME`. Flink sessions run one at a time: each
/// is a JVM with a mini-cluster, and the machine has few cores.
macro_rules! on_every_job {
    ($($scenario:ident),* $(,)?) => {
        mod reference {
            $(
                #[test]
                fn $scenario() {
                    let job = super::reference();
                    super::$scenario(&job);
                }
            )*
        }
        mod flink {
            $(
                #[test]
                #[ignore = "needs flink: eval \"$(jobs/flink/setup.sh)\""]
                fn $scenario() {
                    let job = super::flink();
                    let _turn = super::flink_turn();
                    super::$scenario(&job);
                }
            )*
        }
    };
}

/// Holds off the other Flink tests of this file while it lives.
fn flink_turn() -> std::sync::MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

on_every_job!(
    a_watermark_closes_windows_before_the_end_of_input,
    watermarks_at_each_next_record_give_the_local_engines_tumbling_windows,
    watermarks_at_each_next_record_give_the_local_engines_hopping_windows,
    count_windows_ignore_watermarks,
    a_watermark_that_is_not_a_datetime_fails_the_job_with_its_line,
    grace_keeps_a_window_open_until_a_record_passes_its_end_plus_grace,
    with_grace_out_of_order_records_give_the_local_engines_windows,
);

/// TUMBLING 5 s SUM with 3 s of grace: a record at t closes the windows
/// ending by t − 3; a watermark line (the host has subtracted the grace)
/// closes those ending by it.
fn grace_keeps_a_window_open_until_a_record_passes_its_end_plus_grace(job: &Launcher) {
    let spec = spec(
        r#"{"aggregation":"SUM","window":{"type":"TUMBLING","size":5,"unit":"SECONDS"},"grace":3}"#,
    );
    let mut s = Session::start(job, &spec);
    s.instant("2026-01-01T00:00:01Z", 1.0);
    s.instant("2026-01-01T00:00:06Z", 2.0); // 6 − 3 < 5: [0, 5) stays open
    s.instant("2026-01-01T00:00:04Z", 4.0); // on time, within the grace
    s.instant("2026-01-01T00:00:08Z", 8.0); // 8 − 3 = 5: [0, 5) closes
    s.expect(
        json!({"windowStart":"2026-01-01T00:00:01Z","windowEnd":"2026-01-01T00:00:04Z",
        "value":5.0,"count":2}),
    );
    s.instant("2026-01-01T00:00:03Z", 100.0); // late now
    s.watermark("2026-01-01T00:00:10Z");
    s.expect(
        json!({"windowStart":"2026-01-01T00:00:06Z","windowEnd":"2026-01-01T00:00:08Z",
        "value":10.0,"count":2,"late":1}),
    );
    s.instant("2026-01-01T00:00:12Z", 16.0);
    let rest = s.finish();
    let partial = json!({"windowStart":"2026-01-01T00:00:12Z","windowEnd":"2026-01-01T00:00:12Z",
        "value":16.0,"count":1,"partial":true});
    assert_lines(
        &rest,
        &[partial],
        &format!("{}: at the end of input", job.name),
    );
}

/// Records out of order by up to 8 s, no watermark lines: with grace, the
/// job's windows are the `local` engine's (the same records late, the same
/// windows open at once).
fn with_grace_out_of_order_records_give_the_local_engines_windows(job: &Launcher) {
    let bodies = [
        r#"{"aggregation":"SUM","window":{"type":"TUMBLING","size":2,"unit":"SECONDS"},"grace":2}"#,
        r#"{"aggregation":"COUNT","window":{"type":"HOPPING","size":3,"unit":"SECONDS","hop":1,"hopUnit":"SECONDS"},"grace":1}"#,
    ];
    for body in bodies {
        let spec = spec(body);
        let input: Vec<Instant> = (0..60u64)
            .map(|i| {
                let jitter = (i * 7919) % 8000;
                let ms = (10_000 + i * 400).saturating_sub(jitter);
                Instant::number(datetime(ms, i as usize), (i % 13) as f64)
            })
            .collect();
        let want = local(&spec, &input);
        assert!(
            want.iter().any(|e| e["late"].as_u64() > Some(0)) && want.len() > 5,
            "{body}: a dull session: {want:#?}"
        );
        let lines: Vec<String> = input
            .iter()
            .map(|i| json!({"datetime": i.datetime, "value": i.value.as_f64()}).to_string())
            .collect();
        let got = run_to_end(job, &spec, &lines);
        assert_lines(&got, &want, &format!("{}: {body}", job.name));
    }
}

/// TUMBLING 5 s SUM, step by step; each result is read before stdin closes.
fn a_watermark_closes_windows_before_the_end_of_input(job: &Launcher) {
    let spec =
        spec(r#"{"aggregation":"SUM","window":{"type":"TUMBLING","size":5,"unit":"SECONDS"}}"#);
    let mut s = Session::start(job, &spec);
    // Before any record: nothing to emit, but a record whose window ends by
    // the watermark is late.
    s.watermark("2026-01-01 00:00:00+00");
    s.instant("2025-12-31T23:59:58Z", 1000.0);
    s.instant("2026-01-01T00:00:00.5Z", 1.0);
    s.instant("2026-01-01T00:00:01Z", 2.0);
    s.instant("2026-01-01T00:00:03.2Z", 4.0);
    s.watermark("2026-01-01T00:00:05Z");
    s.expect(
        json!({"windowStart":"2026-01-01T00:00:00.5Z","windowEnd":"2026-01-01T00:00:03.2Z",
        "value":7.0,"count":3,"late":1}),
    );
    // Late: its window was emitted.
    s.instant("2026-01-01T00:00:04Z", 1000.0);
    s.instant("2026-01-01T00:00:06Z", 8.0);
    s.instant("2026-01-01T00:00:07Z", 16.0);
    // Short of the window's end: it stays open (the record after it is in
    // the result).
    s.watermark("2026-01-01T00:00:09.999Z");
    s.instant("2026-01-01T00:00:09.9995Z", 32.0);
    s.watermark("2026-01-01T00:00:10+00:00");
    s.expect(
        json!({"windowStart":"2026-01-01T00:00:06Z","windowEnd":"2026-01-01T00:00:09.9995Z",
        "value":56.0,"count":3,"late":1}),
    );
    // Backwards: ignored, so 00:00:09 is still late, not a new window.
    s.watermark("2026-01-01T00:00:08Z");
    s.instant("2026-01-01T00:00:09Z", 1000.0);
    s.instant("2026-01-01T00:00:13Z", 64.0);
    s.watermark("2026-01-01T00:00:20Z");
    s.expect(
        json!({"windowStart":"2026-01-01T00:00:13Z","windowEnd":"2026-01-01T00:00:13Z",
        "value":64.0,"count":1,"late":1}),
    );
    s.instant("2026-01-01T00:00:21Z", 128.0);
    let rest = s.finish();
    let partial = json!({"windowStart":"2026-01-01T00:00:21Z","windowEnd":"2026-01-01T00:00:21Z",
        "value":128.0,"count":1,"partial":true});
    assert_lines(
        &rest,
        &[partial],
        &format!("{}: at the end of input", job.name),
    );
}

fn watermarks_at_each_next_record_give_the_local_engines_tumbling_windows(job: &Launcher) {
    check_against_local(
        job,
        r#"{"aggregation":"AVG","window":{"type":"TUMBLING","size":2,"unit":"SECONDS"}}"#,
        2000,
        2000,
    );
}

fn watermarks_at_each_next_record_give_the_local_engines_hopping_windows(job: &Launcher) {
    check_against_local(
        job,
        r#"{"aggregation":"MAX","window":{"type":"HOPPING","size":3,"unit":"SECONDS","hop":1,"hopUnit":"SECONDS"}}"#,
        3000,
        1000,
    );
}

/// Records in order; after each one, a watermark at the next record's
/// datetime. Each watermark must emit exactly the windows that the next
/// record would have closed, read before that record is written; at the end
/// of input, the open windows come as partial. Altogether: the `local`
/// engine's results over the same records.
fn check_against_local(job: &Launcher, body: &str, span_ms: u64, hop_ms: u64) {
    let spec = spec(body);
    // Irregular gaps (550 to 850 ms) from 00:00:00.300.
    let times: Vec<u64> = (0..40u64).map(|i| 300 + i * 700 + (i % 3) * 150).collect();
    let input: Vec<Instant> = times
        .iter()
        .enumerate()
        .map(|(i, &ms)| Instant::number(datetime(ms, i), ((i * 37) % 101) as f64 / 4.0))
        .collect();
    let local = local(&spec, &input);
    let mut expected = local.iter();
    let mut s = Session::start(job, &spec);
    for (i, instant) in input.iter().enumerate() {
        s.instant(&instant.datetime, instant.value.as_f64().unwrap());
        let Some(&next) = times.get(i + 1) else {
            break;
        };
        s.watermark(&datetime(next, i + 1));
        // Window ends in (times[i], next] that hold records.
        let due = (times[i] / hop_ms + 1..=next / hop_ms)
            .map(|k| k * hop_ms)
            .filter(|&end| times[..=i].iter().any(|&t| t < end && t + span_ms >= end))
            .count();
        for _ in 0..due {
            let want = expected
                .next()
                .unwrap_or_else(|| panic!("{}: local has no more windows", job.name));
            s.expect(want.clone());
        }
    }
    let rest = s.finish();
    let left: Vec<Json> = expected.cloned().collect();
    assert!(
        left.iter().all(|e| e["partial"] == true),
        "only open windows are left for the end of input: {left:#?}"
    );
    assert_lines(&rest, &left, &format!("{}: at the end of input", job.name));
}

/// COUNT 2 SUM: watermarks neither close a window nor make a record late.
fn count_windows_ignore_watermarks(job: &Launcher) {
    let spec = spec(r#"{"aggregation":"SUM","window":{"type":"COUNT","size":2}}"#);
    let input: Vec<Instant> = [1.0, 2.0, 4.0, 8.0, 16.0]
        .iter()
        .enumerate()
        .map(|(i, &x)| Instant::number(datetime(10_000 + 1000 * i as u64, 0), x))
        .collect();
    let local = local(&spec, &input);
    assert_eq!(local.len(), 3, "{local:#?}");
    let mut s = Session::start(job, &spec);
    s.instant(&input[0].datetime, 1.0);
    s.watermark(&datetime(100_000, 0));
    s.instant(&input[1].datetime, 2.0);
    s.expect(local[0].clone());
    s.instant(&input[2].datetime, 4.0);
    s.watermark(&datetime(300_000, 1));
    s.instant(&input[3].datetime, 8.0);
    s.expect(local[1].clone());
    s.instant(&input[4].datetime, 16.0);
    let rest = s.finish();
    assert_lines(
        &rest,
        &local[2..],
        &format!("{}: at the end of input", job.name),
    );
    assert_eq!(local[1]["count"], 2);
}

fn a_watermark_that_is_not_a_datetime_fails_the_job_with_its_line(job: &Launcher) {
    let spec =
        spec(r#"{"aggregation":"COUNT","window":{"type":"TUMBLING","size":1,"unit":"SECONDS"}}"#);
    let mut s = Session::start(job, &spec);
    s.instant("2026-01-01T00:00:00Z", 1.0);
    s.send(r#"{"watermark":"soon"}"#);
    let (lines, status, stderr) = s.end();
    assert!(lines.is_empty(), "{}: {lines:?}", job.name);
    assert_eq!(
        status,
        Some(2),
        "{}: exit status; stderr: {stderr}",
        job.name
    );
    assert!(
        stderr.contains("line 2") && stderr.contains("soon"),
        "{}: {stderr}",
        job.name
    );
}

/// Flink against the reference job, over pseudo-random sessions: records
/// mostly in order, some seconds late; watermarks between them, some behind
/// the records, some ahead (so that many records come late). Read at the end
/// of input, both give the same lines.
#[test]
#[ignore = "needs flink: eval \"$(jobs/flink/setup.sh)\""]
fn flink_gives_the_reference_jobs_results_on_sessions_with_random_watermarks() {
    let flink = flink();
    let _turn = flink_turn();
    let reference = reference();
    let bodies = [
        r#"{"aggregation":"SUM","window":{"type":"TUMBLING","size":2,"unit":"SECONDS"}}"#,
        r#"{"aggregation":"MAX","window":{"type":"HOPPING","size":3,"unit":"SECONDS","hop":1,"hopUnit":"SECONDS"}}"#,
        r#"{"aggregation":"COUNT","window":{"type":"HOPPING","size":5,"unit":"SECONDS","hop":2,"hopUnit":"SECONDS"},"emitPartial":false}"#,
        r#"{"aggregation":"SUM","window":{"type":"TUMBLING","size":2,"unit":"SECONDS"},"grace":3}"#,
    ];
    for (n, body) in bodies.iter().enumerate() {
        let spec = spec(body);
        let lines = random_session(n as u64 + 1, 300);
        let want = run_to_end(&reference, &spec, &lines);
        let got = run_to_end(&flink, &spec, &lines);
        let late: u64 = want.iter().filter_map(|e| e["late"].as_u64()).sum();
        assert!(
            late > 0 && want.len() > 20,
            "{body}: a dull session: {want:#?}"
        );
        assert_lines(
            &got,
            &want,
            &format!("Flink against the reference job, {body}"),
        );
    }
}

/// `n` lines: about a quarter watermarks, 3 s behind to 4 s ahead of the
/// latest record; records 0 to 0.9 s apart, one in five up to 6 s late.
fn random_session(seed: u64, n: usize) -> Vec<String> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move |below: u64| {
        // xorshift64*: enough for a test's variety, and reproducible.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d) % below
    };
    let mut t = 10_000u64;
    (0..n)
        .map(|i| {
            if next(4) == 0 {
                let w = (t + next(7000)).saturating_sub(3000);
                json!({ "watermark": datetime(w, i) }).to_string()
            } else {
                t += next(900);
                let at = if next(5) == 0 {
                    t.saturating_sub(next(6000))
                } else {
                    t
                };
                json!({"datetime": datetime(at, i), "value": next(50) as f64}).to_string()
            }
        })
        .collect()
}

/// Every line of `lines` through a job, then the end of input: its results.
fn run_to_end(job: &Launcher, spec: &QuerySpec, lines: &[String]) -> Vec<Json> {
    let mut s = Session::start(job, spec);
    for line in lines {
        s.send(line);
    }
    s.finish()
}

// helpers

/// The query of a registration body, as the host would pass it in
/// `MFSTREAM_QUERY`.
fn spec(body: &str) -> QuerySpec {
    let mut spec = Registration::from_json(body)
        .expect("a registration body")
        .into_spec("speed", PropertyType::TReal)
        .expect("a valid query");
    spec.id = "q".into();
    spec
}

/// `2026-01-01T00:MM:SS.mmm` at `ms` into the day's first hour, in one of
/// the datetime forms jobs accept (by `form` modulo 3).
fn datetime(ms: u64, form: usize) -> String {
    let (m, s, frac) = (ms / 60_000, ms / 1000 % 60, ms % 1000);
    match form % 3 {
        0 => format!("2026-01-01T00:{m:02}:{s:02}.{frac:03}Z"),
        1 => format!("2026-01-01 00:{m:02}:{s:02}.{frac:03}+00"),
        _ => format!("2026-01-01T00:{m:02}:{s:02}.{frac:03}+00:00"),
    }
}

/// The `local` engine's results over `input`, as a job writes them (without
/// the `property` and `aggregation` the host adds).
fn local(spec: &QuerySpec, input: &[Instant]) -> Vec<Json> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (events, status) = runtime.block_on(async {
        let handle = LocalEngine::new()
            .submit(spec.clone(), Source::from_instants(input.to_vec()))
            .await
            .expect("local runs the query");
        collect(handle).await
    });
    assert_eq!(status, QueryStatus::Completed);
    events
        .iter()
        .map(|e| {
            let mut json: Json = serde_json::from_str(&e.to_json()).unwrap();
            let obj = json.as_object_mut().unwrap();
            obj.remove("property");
            obj.remove("aggregation");
            json
        })
        .collect()
}

fn assert_lines(got: &[Json], want: &[Json], what: &str) {
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: got {got:#?}\nwant {want:#?}"
    );
    for (g, w) in got.iter().zip(want) {
        assert!(same_json(g, w), "{what}: got {g}, want {w}");
    }
}

/// One aggregating job as a child process: json framing, the query in
/// `MFSTREAM_QUERY` (with a `grace` key, as the host sends for a live
/// query), `aggregate AGG` as arguments. Its stdout lines arrive on a
/// channel (a reader thread), its stderr is drained into a buffer; dropping
/// the session kills the job.
struct Session {
    what: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<Vec<u8>>>,
    stderr_reader: Option<std::thread::JoinHandle<()>>,
    sent: Vec<String>,
}

impl Session {
    fn start(job: &Launcher, spec: &QuerySpec) -> Session {
        let query: Json = serde_json::from_str(&spec.to_json()).unwrap();
        let aggregation = query["aggregation"].as_str().unwrap().to_owned();
        let mut child = Command::new(&job.argv[0])
            .args(&job.argv[1..])
            .args(["aggregate", &aggregation])
            .env("MFSTREAM_FRAMING", "json")
            .env("MFSTREAM_QUERY", query.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: cannot start {:?}: {e}", job.name, job.argv));
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        let stderr_reader = std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                let mut buf = sink.lock().unwrap();
                buf.extend_from_slice(&chunk[..n]);
                let excess = buf.len().saturating_sub(16 * 1024);
                buf.drain(..excess); // the tail is enough
            }
        });
        Session {
            what: format!("{} ({})", job.name, spec.to_json()),
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            stderr_reader: Some(stderr_reader),
            sent: Vec::new(),
        }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        if let Err(e) = writeln!(stdin, "{line}").and_then(|()| stdin.flush()) {
            panic!(
                "{}: writing {line}: {e}; stderr: {}",
                self.what,
                self.stderr()
            );
        }
        self.sent.push(line.to_owned());
    }

    fn instant(&mut self, datetime: &str, value: f64) {
        self.send(&json!({"datetime": datetime, "value": value}).to_string());
    }

    fn watermark(&mut self, datetime: &str) {
        self.send(&json!({ "watermark": datetime }).to_string());
    }

    /// Reads the next result line, with stdin still open, and compares it.
    fn expect(&mut self, want: Json) {
        let line = match self.lines.recv_timeout(READ_TIMEOUT) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => panic!(
                "{}: no result within {READ_TIMEOUT:?} after {}: the window should close on \
                 the watermark, before the end of input; want {want}; stderr: {}",
                self.what,
                self.last_sent(),
                self.stderr()
            ),
            Err(RecvTimeoutError::Disconnected) => panic!(
                "{}: the job closed its stdout after {}, exit {:?}; want {want}; stderr: {}",
                self.what,
                self.last_sent(),
                self.child.wait().ok(),
                self.stderr()
            ),
        };
        let got: Json = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("{}: result {line:?} is not JSON: {e}", self.what));
        assert!(
            same_json(&got, &want),
            "{}: after {}: got {got}, want {want}",
            self.what,
            self.last_sent()
        );
    }

    /// Closes stdin, reads the remaining lines and checks the exit status is
    /// 0: the lines.
    fn finish(self) -> Vec<Json> {
        let what = self.what.clone();
        let (lines, status, stderr) = self.end();
        assert_eq!(status, Some(0), "{what}: exit status; stderr: {stderr}");
        lines
            .iter()
            .map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("{what}: result {l:?} is not JSON: {e}"))
            })
            .collect()
    }

    /// Closes stdin; the remaining lines, the exit status and stderr.
    fn end(mut self) -> (Vec<String>, Option<i32>, String) {
        drop(self.stdin.take());
        let mut rest = Vec::new();
        loop {
            match self.lines.recv_timeout(READ_TIMEOUT) {
                Ok(line) => rest.push(line),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => panic!(
                    "{}: stdout still open {READ_TIMEOUT:?} after stdin was closed; stderr: {}",
                    self.what,
                    self.stderr()
                ),
            }
        }
        assert!(
            wait_gone(self.child.id() as i32, READ_TIMEOUT),
            "{}: the job did not exit {READ_TIMEOUT:?} after closing stdout; stderr: {}",
            self.what,
            self.stderr()
        );
        let status = self.child.wait().expect("the job is reaped");
        if let Some(reader) = self.stderr_reader.take() {
            let _ = reader.join();
        }
        (rest, status.code(), self.stderr())
    }

    fn last_sent(&self) -> String {
        let from = self.sent.len().saturating_sub(3);
        format!("writing {}", self.sent[from..].join(" "))
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // A failed test must not leave a JVM behind: the child is ours.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

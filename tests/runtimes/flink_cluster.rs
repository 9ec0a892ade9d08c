//! Apache Flink on a session cluster (`jobs/flink/cluster.sh`,
//! `mfstream-flink-client`): each query is a job on a separately running
//! cluster, checked through the cluster's REST API.
//!
//! The tests share one cluster, and two of them kill its TaskManager: they
//! take turns (`CLUSTER`). Where the cluster is the only witness (a job's
//! state), they poll its REST API with a deadline.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use mfstream_engine::RestartPolicy;

use super::*;

const VAR: &str = "MFAPI_FLINK_CLUSTER_CMD";
const SETUP: &str = "jobs/flink/cluster.sh start";

/// One test at a time on the cluster.
pub(super) static CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The client's command and the cluster's REST address (its `--rest`, else
/// `MFSTREAM_FLINK_REST`).
pub(super) fn cluster() -> (Vec<String>, String) {
    let argv = runtime_command(VAR, SETUP);
    let rest = argv
        .iter()
        .position(|a| a == "--rest")
        .map(|i| argv[i + 1].clone())
        .or_else(|| std::env::var("MFSTREAM_FLINK_REST").ok())
        .expect("the REST address: --rest in MFAPI_FLINK_CLUSTER_CMD, or MFSTREAM_FLINK_REST");
    (argv, rest)
}

/// `GET rest/path` as JSON.
pub(super) fn rest_get(rest: &str, path: &str) -> serde_json::Value {
    let authority = rest.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = TcpStream::connect(authority).unwrap_or_else(|e| panic!("{rest}: {e}"));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (_, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

/// The jobs of the cluster that have not ended, as "name state".
fn live_jobs(rest: &str) -> Vec<String> {
    rest_get(rest, "/jobs/overview")["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| {
            !matches!(
                j["state"].as_str(),
                Some("FINISHED" | "FAILED" | "CANCELED")
            )
        })
        .map(|j| format!("{} {}", j["name"], j["state"]))
        .collect()
}

/// The state of job `jid` in the cluster's (current) overview.
pub(super) fn job_state(rest: &str, jid: &str) -> Option<String> {
    rest_get(rest, "/jobs/overview")["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["jid"] == jid)
        .map(|j| j["state"].as_str().unwrap().to_owned())
}

/// No job of the cluster is running or waiting (its overview is current).
async fn assert_no_live_job(rest: &str) {
    eventually(
        "no job left running on the cluster",
        Duration::from_secs(30),
        async || live_jobs(rest),
        Vec::is_empty,
    )
    .await;
}

/// `jobs/flink/cluster.sh VERB` for the cluster at `rest`, with `client` as
/// the client (no build); its stdout.
pub(super) fn cluster_script(verb: &str, rest: &str, client: &str) -> String {
    let port = rest.rsplit(':').next().unwrap().trim_end_matches('/');
    let out = Command::new(root().join("jobs/flink/cluster.sh"))
        .arg(verb)
        .env("MFSTREAM_FLINK_REST_PORT", port)
        .env("MFSTREAM_FLINK_CLIENT", client)
        .stderr(Stdio::inherit())
        .output()
        .expect("cluster.sh runs");
    String::from_utf8(out.stdout).unwrap()
}

/// The pid of the cluster's TaskManager, from `cluster.sh status`.
fn taskmanager_pid(rest: &str, client: &str) -> i32 {
    let status = cluster_script("status", rest, client);
    status
        .lines()
        .find_map(|l| l.strip_prefix("taskmanager: "))
        .and_then(|pids| pids.split_whitespace().next())
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no TaskManager in: {status}"))
}

fn mul(x: f64) -> QuerySpec {
    QuerySpec::transform("speed", Transform::new("mul", Some(x)).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a flink session cluster: eval \"$(jobs/flink/cluster.sh start)\""]
async fn flink_cluster_gives_the_local_engines_results_for_every_operation() {
    let (argv, rest) = cluster();
    let _turn = CLUSTER.lock().await;
    check_every_operation("flink-cluster", &argv, Framing::Value).await;
    check_cli_matches_local("flink-cluster", VAR, &std::env::var(VAR).unwrap(), 1);
    assert_no_live_job(&rest).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a flink session cluster: eval \"$(jobs/flink/cluster.sh start)\""]
async fn a_domain_error_on_flink_cluster_is_skipped_or_fails_with_the_jobs_message() {
    let (argv, rest) = cluster();
    let _turn = CLUSTER.lock().await;
    // The shipped engine speaks protocol 2: the job answers an error line.
    assert_eq!(*runtime("flink-cluster").0.protocol, 2);
    check_domain_error("flink-cluster", &argv, "mfstream-flink-client", 2).await;
    // As a version-1 job (the host speaks 2 to every job: told 1 here) it
    // fails, naming the line.
    let v1: Vec<String> = ["env", "MFSTREAM_PROTOCOL=1"]
        .into_iter()
        .map(str::to_owned)
        .chain(argv)
        .collect();
    check_domain_error("flink-cluster", &v1, "mfstream-flink-client", 1).await;
    assert_no_live_job(&rest).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a flink session cluster: eval \"$(jobs/flink/cluster.sh start)\""]
async fn a_flink_cluster_query_stopped_midway_leaves_no_job_on_the_cluster() {
    let (argv, rest) = cluster();
    let _turn = CLUSTER.lock().await;
    check_stop_midway("flink-cluster", &argv).await;
    assert_no_live_job(&rest).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a flink session cluster: eval \"$(jobs/flink/cluster.sh start)\""]
async fn sigterm_to_the_flink_cluster_client_cancels_its_job() {
    let (argv, rest) = cluster();
    let _turn = CLUSTER.lock().await;
    let mut client = Command::new(&argv[0])
        .args(&argv[1..])
        .args(["mul", "3"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the client starts");
    let mut stdin = client.stdin.take().unwrap();
    stdin.write_all(b"1\n2\n").unwrap();
    stdin.flush().unwrap();
    let mut results = BufReader::new(client.stdout.take().unwrap());
    let mut line = String::new();
    results.read_line(&mut line).unwrap();
    assert_eq!(line, "3.0\n", "a live record comes out while stdin is open");
    assert_eq!(live_jobs(&rest).len(), 1, "the job runs on the cluster");
    // SAFETY: kill with a pid of our own child and a signal number.
    unsafe { libc::kill(client.id() as i32, libc::SIGTERM) };
    let status = client.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::into_raw(status) >> 8,
        128 + libc::SIGTERM,
        "exit 128 + SIGTERM"
    );
    let mut stderr = String::new();
    client
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let jid = stderr
        .split("cancelled job ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("no cancelled job in: {stderr}"));
    assert_eq!(job_state(&rest, jid).as_deref(), Some("CANCELED"));
    assert_no_live_job(&rest).await;
    drop(stdin);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a flink session cluster: eval \"$(jobs/flink/cluster.sh start)\""]
async fn more_flink_cluster_queries_than_slots_wait_for_one_or_fail_saying_so() {
    let (argv, rest) = cluster();
    let _turn = CLUSTER.lock().await;
    let slots = rest_get(&rest, "/overview")["slots-total"]
        .as_u64()
        .unwrap() as usize;
    assert!(slots >= 1, "the cluster has a TaskManager");
    let engine = |timeout: &str| {
        let mut options = BridgeOptions::new("flink-cluster", argv.clone());
        options
            .env
            .push(("MFSTREAM_FLINK_SCHEDULE_TIMEOUT".into(), timeout.into()));
        BridgeEngine::new(options)
    };
    // Fill every slot with a query whose source stays open.
    let mut running = Vec::new();
    for _ in 0..slots {
        let (sender, source) = Source::channel(16);
        let mut handle = engine("60").submit(mul(2.0), source).await.unwrap();
        sender.send_batch(instants(1)).await.unwrap();
        assert!(handle.next().await.is_some(), "a query per slot runs");
        running.push((sender, handle));
    }
    // One more, with a short schedule timeout: it fails, saying why.
    let (events, status) = run_query(&engine("2"), mul(2.0), instants(3)).await;
    let reason = failure(&status);
    assert!(events.is_empty());
    assert!(
        reason.contains("did not start within the schedule timeout"),
        "{reason}"
    );
    assert!(
        reason.contains(&format!("{slots} of {slots} task slots in use")),
        "{reason}"
    );
    // One more with time to wait: it runs once a running query ends.
    let waiting = engine("60")
        .submit(mul(2.0), Source::from_instants(instants(100)))
        .await
        .unwrap();
    let (sender, handle) = running.pop().unwrap();
    drop(sender);
    let (_, status) = collect(handle).await;
    assert_eq!(status, QueryStatus::Completed);
    let (events, status) = collect(waiting).await;
    assert_eq!(status, QueryStatus::Completed);
    assert_eq!(events.len(), 100, "the waiting query gave every result");
    for (sender, handle) in running {
        drop(sender);
        assert_eq!(collect(handle).await.1, QueryStatus::Completed);
    }
    assert_no_live_job(&rest).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a flink session cluster: eval \"$(jobs/flink/cluster.sh start)\""]
async fn sigkill_of_mfstream_leaves_no_job_running_on_the_flink_cluster() {
    let (_, rest) = cluster();
    let _turn = CLUSTER.lock().await;
    let dir = TempDir::new("flink-cluster-sigkill");
    let mut mfstream = mfstream_command(dir.path())
        .env(VAR, std::env::var(VAR).unwrap())
        .arg("run")
        .arg("--config")
        .arg(root().join("engines.toml"))
        .args(["--engine", "flink-cluster", "--op", "mul", "--arg", "2"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("mfstream runs");
    let mut stdin = mfstream.stdin.take().unwrap();
    writeln!(stdin, r#"{{"datetime":"2026-01-01T00:00:00Z","value":21}}"#).unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    BufReader::new(mfstream.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains(r#""value":42"#), "{line}");
    assert_eq!(live_jobs(&rest).len(), 1, "the job runs on the cluster");
    mfstream.kill().unwrap();
    mfstream.wait().unwrap();
    assert_no_live_job(&rest).await;
    drop(stdin);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a flink session cluster: eval \"$(jobs/flink/cluster.sh start)\""]
async fn a_taskmanager_killed_mid_query_fails_it_or_with_restarts_loses_no_record() {
    let (argv, rest) = cluster();
    let _turn = CLUSTER.lock().await;
    let kill_taskmanager = || {
        let pid = taskmanager_pid(&rest, &argv[0]);
        // SAFETY: kill with a pid and a signal number.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
        assert!(wait_gone(pid, Duration::from_secs(10)));
    };
    let restart_taskmanager = || cluster_script("start", &rest, &argv[0]);

    // Without a restart policy: the query fails with the cluster's reason.
    let (sender, source) = Source::channel(16);
    let engine = BridgeEngine::new(BridgeOptions::new("flink-cluster", argv.clone()));
    let mut handle = engine.submit(mul(2.0), source).await.unwrap();
    sender.send_batch(instants(10)).await.unwrap();
    assert!(handle.next().await.is_some(), "the query runs");
    kill_taskmanager();
    let (_, status) = collect(handle).await;
    let reason = failure(&status).to_owned();
    assert!(reason.contains("failed on the cluster"), "{reason}");
    drop(sender);
    restart_taskmanager();

    // With the engine's restart policy: the client fails, the host starts it
    // again, its new job waits for the restarted TaskManager, and the
    // records not answered are replayed.
    let mut options = BridgeOptions::new("flink-cluster", argv.clone());
    options.restart = Some(RestartPolicy {
        max_restarts: 3,
        backoff: Duration::from_millis(200),
        backoff_max: Duration::from_secs(2),
    });
    let input = instants(3000);
    let (sender, source) = Source::channel(16);
    let mut handle = BridgeEngine::new(options)
        .submit(mul(2.0), source)
        .await
        .unwrap();
    sender.send_batch(input[..1000].to_vec()).await.unwrap();
    let mut events = Vec::new();
    eventually(
        "the first 1000 answers, before the kill",
        Duration::from_secs(120),
        async || {
            events.extend(handle.next_batch().await.expect("answers before the kill"));
            events.len()
        },
        |n| *n >= 1000,
    )
    .await;
    kill_taskmanager();
    let (rest2, client) = (rest.clone(), argv[0].clone());
    let restarter = std::thread::spawn(move || cluster_script("start", &rest2, &client));
    sender.send_batch(input[1000..].to_vec()).await.unwrap();
    drop(sender);
    let (rest_events, status) = collect(handle).await;
    events.extend(rest_events);
    restarter.join().unwrap();
    assert_eq!(status, QueryStatus::Completed);
    assert_eq!(events.len(), input.len(), "no record lost or duplicated");
    for (event, instant) in events.iter().zip(&input) {
        assert_eq!(event.datetime(), instant.datetime);
        let Value::Number(x) = instant.value else {
            unreachable!()
        };
        assert_eq!(event.value(), &Value::Number(2.0 * x));
    }
    assert_no_live_job(&rest).await;
}

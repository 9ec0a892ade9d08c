//! `jobs/flink/cluster.sh start` on ports that are taken: by a plain
//! listener, by the running session cluster (a second start on its ports,
//! from another cache folder), or by a server that takes the REST port
//! after the check, while this start's JobManager boots. Each must fail,
//! naming the port and what holds it, and leave the running cluster as it
//! was; none may report `ready` for a cluster it did not start. And a job
//! that cannot connect back to the client fails naming the address.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant as Clock;

use super::flink_cluster::{CLUSTER, cluster, job_state, rest_get};
use super::*;

/// A loopback port nothing listens on (bound, then released).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The cache folder of the running cluster's installation
/// (`…/runtimes/flink`), from the jar path in its command.
fn flink_cache(argv: &[String]) -> PathBuf {
    let jar = argv
        .iter()
        .position(|a| a == "--jar")
        .map(|i| PathBuf::from(&argv[i + 1]))
        .expect("--jar in MFAPI_FLINK_CLUSTER_CMD");
    jar.parent().and_then(Path::parent).unwrap().to_owned()
}

/// `cluster.sh VERB` with `env`, the running cluster's client as the
/// client (nothing is built), to its end.
fn script(verb: &str, client: &str, env: &[(&str, String)]) -> Output {
    Command::new(root().join("jobs/flink/cluster.sh"))
        .arg(verb)
        .env("MFSTREAM_FLINK_CLIENT", client)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .output()
        .expect("cluster.sh runs")
}

/// Runs `cluster.sh stop` with the same environment when dropped: a start
/// that should have been refused and was not leaves nothing running.
struct StopOnDrop<'a> {
    client: &'a str,
    env: Vec<(&'static str, String)>,
}

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        let _ = script("stop", self.client, &self.env);
    }
}

/// The running cluster's JobManager pid, from `cluster.sh status`.
fn jobmanager_pid(rest: &str, client: &str) -> u32 {
    let port = rest.rsplit(':').next().unwrap().trim_end_matches('/');
    let status = script(
        "status",
        client,
        &[("MFSTREAM_FLINK_REST_PORT", port.into())],
    );
    let text = String::from_utf8(status.stdout).unwrap();
    assert!(status.status.success(), "the cluster is ready: {text}");
    text.lines()
        .find_map(|l| l.strip_prefix("jobmanager: "))
        .and_then(|p| p.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no JobManager in: {text}"))
}

/// A refused start: exit 1, no `export` on stdout, no JVM started, and
/// `taken` (what the message must say) on stderr.
fn assert_refused(out: &Output, taken: &[String]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty(), "no exports from a refused start");
    assert!(
        !stderr.contains("starting the JobManager"),
        "refused before any JVM: {stderr}"
    );
    for needle in taken {
        assert!(stderr.contains(needle.as_str()), "{needle:?} in: {stderr}");
    }
}

#[test]
#[ignore = "needs a flink session cluster: eval \"$(jobs/flink/cluster.sh start)\""]
fn cluster_sh_refuses_a_port_a_plain_listener_holds_naming_the_port_and_its_holder() {
    let (argv, _) = cluster();
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let env = vec![
        ("MFSTREAM_FLINK_REST_PORT", port.to_string()),
        ("MFSTREAM_FLINK_RPC_PORT", free_port().to_string()),
    ];
    let _stop = StopOnDrop {
        client: &argv[0],
        env: env.clone(),
    };
    let out = script("start", &argv[0], &env);
    // The holder is this test binary.
    assert_refused(
        &out,
        &[format!(
            "the REST port {port} (MFSTREAM_FLINK_REST_PORT) is taken by pid {} (",
            std::process::id()
        )],
    );
}

#[test]
#[ignore = "needs a flink session cluster: eval \"$(jobs/flink/cluster.sh start)\""]
fn a_second_cluster_sh_on_the_ports_of_a_running_cluster_refuses_naming_its_jobmanager() {
    let (argv, rest) = cluster();
    // Another test kills and restarts the TaskManager.
    let _turn = CLUSTER.blocking_lock();
    let client = argv[0].as_str();
    let jobmanager = jobmanager_pid(&rest, client);
    let config = rest_get(&rest, "/jobmanager/config");
    let key = |name: &str| {
        config
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["key"] == name)
            .and_then(|e| e["value"].as_str())
            .unwrap_or_else(|| panic!("{name} in {config}"))
            .to_owned()
    };
    let (rest_port, rpc_port) = (key("rest.port"), key("jobmanager.rpc.port"));
    let holder = format!(
        "is taken by pid {jobmanager} (java org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint"
    );

    // Another REST port, the same RPC port: the JobManager would die on
    // it and this start's TaskManager join the running cluster.
    let env = vec![
        ("MFSTREAM_FLINK_REST_PORT", free_port().to_string()),
        ("MFSTREAM_FLINK_RPC_PORT", rpc_port.clone()),
    ];
    let stop = StopOnDrop {
        client,
        env: env.clone(),
    };
    let out = script("start", client, &env);
    assert_refused(
        &out,
        &[format!(
            "the RPC port {rpc_port} (MFSTREAM_FLINK_RPC_PORT) {holder}"
        )],
    );
    drop(stop);

    // Both ports, from another installation folder (its own cluster
    // folders, the same Flink): another operator's cluster.sh.
    let other = TempDir::new("flink-cluster-second");
    let cache = flink_cache(&argv);
    std::fs::create_dir_all(other.join("flink")).unwrap();
    for entry in std::fs::read_dir(&cache).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with("cluster-") {
            std::os::unix::fs::symlink(entry.path(), other.join("flink").join(&name)).unwrap();
        }
    }
    let env = vec![
        ("MFSTREAM_RUNTIMES", other.path().display().to_string()),
        ("MFSTREAM_FLINK_REST_PORT", rest_port.clone()),
        ("MFSTREAM_FLINK_RPC_PORT", rpc_port.clone()),
    ];
    let stop = StopOnDrop {
        client,
        env: env.clone(),
    };
    let out = script("start", client, &env);
    assert_refused(
        &out,
        &[
            format!("the REST port {rest_port} (MFSTREAM_FLINK_REST_PORT) {holder}"),
            format!("the RPC port {rpc_port} (MFSTREAM_FLINK_RPC_PORT) {holder}"),
        ],
    );
    drop(stop);

    // The running cluster is as it was.
    assert_eq!(jobmanager_pid(&rest, client), jobmanager);
    assert_eq!(
        rest_get(&rest, "/taskmanagers")["taskmanagers"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "no TaskManager joined the running cluster"
    );
}

/// A server on `listener` that answers every request as another Flink
/// cluster would: a TaskManager registered, a cluster id of its own.
fn impostor(listener: TcpListener) {
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut head = String::new();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let _ = reader.read_line(&mut head);
            let body = if head.contains("/jobmanager/config") {
                r#"[{"key":"mfstream.cluster.id","value":"another-cluster"}]"#
            } else if head.contains("/taskmanagers") {
                r#"{"taskmanagers":[{"id":"another-taskmanager"}]}"#
            } else {
                "{}"
            };
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
}

#[test]
#[ignore = "needs a flink session cluster: eval \"$(jobs/flink/cluster.sh start)\""]
fn a_rest_port_taken_while_the_jobmanager_boots_is_not_reported_ready() {
    let (argv, _) = cluster();
    // Two more JVMs: not while another test measures the cluster.
    let _turn = CLUSTER.blocking_lock();
    let client = argv[0].as_str();
    let rest_port = free_port();
    let env = vec![
        ("MFSTREAM_FLINK_REST_PORT", rest_port.to_string()),
        ("MFSTREAM_FLINK_RPC_PORT", free_port().to_string()),
    ];
    let _stop = StopOnDrop {
        client,
        env: env.clone(),
    };
    let mut start = Command::new(root().join("jobs/flink/cluster.sh"))
        .arg("start")
        .env("MFSTREAM_FLINK_CLIENT", client)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cluster.sh runs");
    let state = flink_cache(&argv).join(format!("cluster-{rest_port}"));
    let pid_file = state.join("pid/flink-mfstream-standalonesession.pid");
    // The ports were free at the check. Once the JobManager's JVM is
    // launched (its pid file written), and long before it binds its REST
    // port (seconds), another server takes that port.
    let deadline = Clock::now() + Duration::from_secs(120);
    while !pid_file.exists() {
        assert!(Clock::now() < deadline, "no JobManager launched");
        std::thread::sleep(Duration::from_millis(5));
    }
    let listener = TcpListener::bind(("127.0.0.1", rest_port))
        .expect("the REST port is taken before the JobManager binds it");
    impostor(listener);
    let mut stderr = String::new();
    start
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let out = start.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty(), "not ready: {stderr}");
    assert!(
        stderr.contains(&format!(
            "http://127.0.0.1:{rest_port} is answered by a server that is not the JobManager started here"
        )),
        "{stderr}"
    );
    // What it started is stopped: nothing of this cluster runs.
    for daemon in ["standalonesession", "taskexecutor"] {
        let file = state.join(format!("pid/flink-mfstream-{daemon}.pid"));
        for pid in std::fs::read_to_string(&file).unwrap_or_default().lines() {
            let pid: i32 = pid.trim().parse().unwrap();
            assert!(
                wait_gone(pid, Duration::from_secs(1)),
                "{daemon} {pid} still runs"
            );
        }
    }
}

/// `POST rest/path` with a JSON body, as JSON.
fn rest_post(rest: &str, path: &str, body: &serde_json::Value) -> serde_json::Value {
    let authority = rest.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = TcpStream::connect(authority).unwrap_or_else(|e| panic!("{rest}: {e}"));
    let body = body.to_string();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (_, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a flink session cluster: eval \"$(jobs/flink/cluster.sh start)\""]
async fn a_job_that_cannot_connect_back_to_the_client_fails_naming_the_address() {
    let (argv, rest) = cluster();
    let _turn = CLUSTER.lock().await;
    // The client uploads the job's jar (once per cluster) on its first run.
    let mut client = Command::new(&argv[0])
        .args(&argv[1..])
        .args(["mul", "2"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    client.stdin.take().unwrap().write_all(b"1\n").unwrap();
    let out = client.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2.0\n");
    let jar = flink_cache(&argv).join("cluster-job");
    let name = argv[argv.iter().position(|a| a == "--jar").unwrap() + 1].clone();
    let name = Path::new(&name)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert!(jar.join(&name).exists());
    let jars = rest_get(&rest, "/jars");
    let id = jars["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name.as_str())
        .and_then(|f| f["id"].as_str())
        .unwrap_or_else(|| panic!("{name} in {jars}"))
        .to_owned();

    // As on a multi-host cluster where the client listens on an address
    // the TaskManager cannot reach: the ports it is told refuse.
    let (records, results) = (free_port(), free_port());
    let run = serde_json::json!({
        "entryClass": "MfstreamClusterJob",
        "programArgsList": ["--protocol=2", "127.0.0.1", records.to_string(), results.to_string(), "mul", "2"],
        "parallelism": 1,
    });
    let jid = rest_post(&rest, &format!("/jars/{id}/run"), &run)["jobid"]
        .as_str()
        .expect("a job id")
        .to_owned();
    eventually(
        "the job fails",
        Duration::from_secs(60),
        async || job_state(&rest, &jid),
        |state| state.as_deref() == Some("FAILED"),
    )
    .await;
    let trace = eventually(
        "the job's exception is recorded",
        Duration::from_secs(10),
        async || {
            let exceptions = rest_get(&rest, &format!("/jobs/{jid}/exceptions"));
            exceptions["exceptionHistory"]["entries"][0]["stacktrace"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        },
        |trace| !trace.is_empty(),
    )
    .await;
    // The client prints the deepest cause: it names the address, the port,
    // and what to set.
    let cause = trace
        .lines()
        .filter_map(|l| l.strip_prefix("Caused by: "))
        .next_back()
        .unwrap_or_else(|| panic!("no cause in: {trace}"));
    let named = [
        format!("127.0.0.1:{results} for the job's results"),
        format!("127.0.0.1:{records} for the job's records"),
    ];
    assert!(
        cause.starts_with("java.net.ConnectException: cannot connect to mfstream-flink-client at ")
            && named.iter().any(|n| cause.contains(n.as_str()))
            && cause.contains("MFSTREAM_FLINK_LISTEN"),
        "{cause}"
    );
}

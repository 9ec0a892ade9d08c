//! Query work off the serving path: the compute threads, their slices,
//! and the CPU each query spends (`--compute-threads`, `--max-query-cpu`).
//! Latency figures are the benchmark's (`benches/fairness.rs`); these tests
//! check the order of events, which no load can change.

use super::*;

/// A feature's positions whose `distance` costs a few milliseconds each.
const HEAVY: &str = "/collections/bench/items/heavy/tgsequence";

/// The positions fed to the heavy query.
const POSITIONS: usize = 200;

/// A geodetic polygon of 10,000 vertices (the most a geometry may have):
/// a circle of 0.05° around (10°, 50°).
fn polygon() -> String {
    let n = 9_999;
    let ring: Vec<String> = (0..=n)
        .map(|i| {
            let a = std::f64::consts::TAU * (i % n) as f64 / n as f64;
            format!("[{},{}]", 10.0 + 0.05 * a.cos(), 50.0 + 0.05 * a.sin())
        })
        .collect();
    format!(
        r#"{{"type":"Polygon","coordinates":[[{}]]}}"#,
        ring.join(",")
    )
}

/// `n` positions a second apart near the polygon, as JSON lines.
fn positions(n: usize) -> String {
    (0..n)
        .map(|i| {
            let a = i as f64 * 0.37;
            format!(
                "{{\"datetime\":\"2026-01-01T00:{:02}:{:02}Z\",\"coordinates\":[{},{}]}}\n",
                i / 60,
                i % 60,
                10.0 + 0.07 * a.cos(),
                50.0 + 0.07 * a.sin()
            )
        })
        .collect()
}

/// Registers the heavy query and subscribes to it.
async fn heavy(server: &Serve, client: &mut Client) -> (String, Sse) {
    let body = format!(r#"{{"operation":"distance","geometry":{}}}"#, polygon());
    let query = register(client, HEAVY, &body).await;
    let sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    (query, sse)
}

/// Feeds the heavy query its positions in one ingest.
async fn feed_heavy(client: &mut Client) {
    let fed = client
        .request(
            "POST",
            &format!("{HEAVY}/ingest"),
            &[("Content-Type", "application/x-ndjson")],
            positions(POSITIONS).as_bytes(),
        )
        .await;
    assert_eq!(fed.status, 202, "{fed:?}");
}

#[tokio::test]
async fn a_light_query_is_answered_while_a_heavy_one_is_mid_batch_on_one_compute_thread() {
    let server = Serve::start("serve-compute-fair", &["--compute-threads", "1"], &[]);
    let mut client = server.client();
    let (heavy_query, mut heavy_events) = heavy(&server, &mut client).await;
    let light = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let mut light_events = server.subscribe(&format!("{light}/stream"), &[]).await;
    feed_heavy(&mut client).await;
    // The heavy query has begun its batch of POSITIONS: one thread, one
    // batch. Without slices its first event would come with its last.
    take(&mut heavy_events, 1).await;
    // The server answers, and the light query computes, meanwhile.
    let engines = client.get("/engines").await;
    assert_eq!(engines.status, 200, "{engines:?}");
    let fed = client
        .post(&format!("{P}/ingest"), &instant(1, "-2.5"))
        .await;
    assert_eq!(fed.status, 202, "{fed:?}");
    assert_eq!(values(&take(&mut light_events, 1).await), [2.5]);
    let busy = client.get(&heavy_query).await.json();
    let done = busy["events"].as_u64().unwrap();
    assert!(
        done < POSITIONS as u64,
        "the heavy query had delivered all {done} events before the light one's ({})",
        busy["status"]
    );
    // The heavy query loses nothing, and its CPU is accounted to it.
    take(&mut heavy_events, POSITIONS - 1).await;
    let heavy_link = client.get(&heavy_query).await.json();
    let light_link = client.get(&light).await.json();
    let heavy_cpu = heavy_link["cpuSeconds"].as_f64().unwrap();
    let light_cpu = light_link["cpuSeconds"].as_f64().unwrap();
    assert!(heavy_cpu > 0.0, "{heavy_link}");
    assert!(
        light_cpu < heavy_cpu,
        "light {light_cpu} s, heavy {heavy_cpu} s"
    );
    let metrics = client.get("/metrics").await.body;
    let series = metrics
        .lines()
        .find(|l| {
            l.starts_with("mfstream_query_cpu_seconds_total{")
                && l.contains(&format!(
                    "query=\"{}\"",
                    heavy_link["queryId"].as_str().unwrap()
                ))
        })
        .unwrap_or_else(|| panic!("no cpu series for the heavy query:\n{metrics}"));
    let value: f64 = series.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(value >= heavy_cpu, "{series} against {heavy_cpu}");
    assert!(
        metrics.contains("mfstream_engine_cpu_seconds_total{engine=\"local\"}"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_query_past_max_query_cpu_fails_alone_naming_the_option() {
    let server = Serve::start(
        "serve-compute-bound",
        &["--max-query-cpu", "0.02", "--query-cpu-window", "1"],
        &[],
    );
    let mut client = server.client();
    let light = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let mut light_events = server.subscribe(&format!("{light}/stream"), &[]).await;
    let (heavy_query, mut heavy_events) = heavy(&server, &mut client).await;
    feed_heavy(&mut client).await;
    // 20 ms of CPU a second: the heavy query's positions cost more.
    let end = loop {
        let event = tokio::time::timeout(PATIENCE, heavy_events.next())
            .await
            .expect("an event in time")
            .expect("the stream goes on to its end");
        if event.event == "end" {
            break event.json();
        }
    };
    assert_eq!(end["status"], "failed", "{end}");
    let reason = end["reason"].as_str().unwrap();
    assert!(
        reason.contains("--max-query-cpu (0.02 of a core over 1 s)"),
        "{reason}"
    );
    let link = client.get(&heavy_query).await.json();
    assert_eq!(link["status"], "failed", "{link}");
    // The light query goes on.
    let fed = client.post(&format!("{P}/ingest"), &instant(1, "-4")).await;
    assert_eq!(fed.status, 202, "{fed:?}");
    assert_eq!(values(&take(&mut light_events, 1).await), [4.0]);
    assert_eq!(client.get(&light).await.json()["status"], "running");
}

#[test]
fn a_bad_cpu_bound_or_thread_count_is_refused_naming_it() {
    for (args, needle) in [
        (&["--max-query-cpu", "0"][..], "--max-query-cpu"),
        (&["--max-query-cpu=-1"][..], "--max-query-cpu"),
        (&["--compute-threads", "0"][..], "--compute-threads"),
        (&["--query-cpu-window", "0"][..], "--query-cpu-window"),
    ] {
        let out = serve_exits("serve-compute-args", args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

#[tokio::test]
async fn a_heavy_querys_replay_after_a_kill_runs_off_the_serving_path_exactly_once() {
    let state = TempDir::new("serve-compute-replay");
    let dir = state.path().to_str().unwrap();
    let args = ["--compute-threads", "1", "--state", dir];
    let server = Serve::start("serve-compute-replay-1", &args, &[]);
    let mut client = server.client();
    let (heavy_query, mut heavy_events) = heavy(&server, &mut client).await;
    feed_heavy(&mut client).await;
    // Killed mid-batch: the rest of the positions are replayed from the
    // log at the restart, the cost of their records with them.
    take(&mut heavy_events, 1).await;
    server.signal(libc::SIGKILL);
    drop(server);
    let server = Serve::start("serve-compute-replay-2", &args, &[]);
    let mut client = server.client();
    let mut all = server
        .subscribe(&format!("{heavy_query}/stream"), &[("Last-Event-ID", "0")])
        .await;
    let first = take(&mut all, 1).await;
    let engines = client.get("/engines").await;
    assert_eq!(engines.status, 200, "{engines:?}");
    let light = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let mut light_events = server.subscribe(&format!("{light}/stream"), &[]).await;
    let fed = client.post(&format!("{P}/ingest"), &instant(1, "-3")).await;
    assert_eq!(fed.status, 202, "{fed:?}");
    assert_eq!(values(&take(&mut light_events, 1).await), [3.0]);
    let busy = client.get(&heavy_query).await.json();
    assert!(
        busy["events"].as_u64().unwrap() < POSITIONS as u64,
        "the replay had ended before the light query's event ({})",
        busy["events"]
    );
    // Every position's event once, in order, across the kill.
    let mut ids = Vec::new();
    for event in first.into_iter().chain(take(&mut all, POSITIONS - 1).await) {
        assert_eq!(event.event, "instant", "{event:?}");
        ids.push(event.id.unwrap().parse::<u64>().unwrap());
    }
    assert_eq!(ids, (1..=POSITIONS as u64).collect::<Vec<_>>());
}

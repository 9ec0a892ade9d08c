//! Fairness benchmark of `mfstream serve`: heavy tenants against a light
//! one, on one machine. Figures printed, never asserted, except that
//! nothing may be lost.
//!
//! ```text
//! cargo bench --bench fairness                    # 16 heavy queries x 1,024 positions, distance to a 9,999-vertex polygon
//! cargo bench --bench fairness -- 4 256           # HEAVY POSITIONS
//! MFSTREAM_BENCH_BIN=/path/to/mfstream cargo bench --bench fairness   # another build, same load
//! MFSTREAM_BENCH_BASE=/path/to/old/mfstream cargo bench --bench fairness   # this build and that one, side by side
//! ```
//!
//! Each server (the release binary; with `MFSTREAM_BENCH_BASE`, that one
//! too, the two alternating) runs two phases:
//!
//! 1. **alone**: one heavy query, `distance` to a geodetic polygon of
//!    9,999 vertices (the most a geometry may have), is fed POSITIONS
//!    positions in one ingest; the time from the ingest to its last event
//!    gives its throughput, the whole pool to itself.
//! 2. **contended**: HEAVY such queries (one feature each) are fed
//!    POSITIONS positions each at once; meanwhile a light tenant ingests one
//!    instant every 20 ms to its own property, whose `abs` query it
//!    subscribes to, and times each from its ingest request to its event on
//!    the stream; and a client times `GET /engines` every 50 ms. The phase
//!    ends when every heavy query has delivered all its events.
//!
//! The goal (issue 28): the light tenant's p99 under 100 ms and `GET
//! /engines` under 50 ms on 2 cores, with the heavy queries busy; and the
//! lone heavy query as fast as before.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant as Clock};

use mfstream_test_client::{Client, subscribe};

/// How often the light tenant ingests.
const LIGHT_TICK: Duration = Duration::from_millis(20);

/// How often `GET /engines` is timed.
const PROBE_TICK: Duration = Duration::from_millis(50);

/// The polygon's vertices, the closing one included: the most a geometry
/// may have.
const VERTICES: usize = 10_000;

/// The longest a phase may take before the benchmark gives up.
const DEADLINE: Duration = Duration::from_secs(600);

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let heavy = args.first().copied().unwrap_or(16);
    let positions = args.get(1).copied().unwrap_or(1024);
    let this = std::env::var("MFSTREAM_BENCH_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_mfstream").into());
    let mut binaries = vec![("this build", this)];
    if let Ok(base) = std::env::var("MFSTREAM_BENCH_BASE") {
        binaries.push(("base", base));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    println!(
        "{heavy} heavy queries (distance to a {}-vertex polygon) x {positions} positions; \
         light tenant every {} ms; GET /engines every {} ms",
        VERTICES - 1,
        LIGHT_TICK.as_millis(),
        PROBE_TICK.as_millis()
    );
    let mut lost = false;
    for (name, binary) in &binaries {
        let server = Serve::start(binary);
        let cpu = server.cpu_seconds();
        let rate = runtime.block_on(alone(server.addr, positions));
        let cpu = server.cpu_seconds() - cpu;
        println!(
            "{name}: alone: {rate:.0} positions/s wall, {:.0} per CPU second of the server",
            positions as f64 / cpu
        );
        drop(server);
    }
    for (name, binary) in &binaries {
        let server = Serve::start(binary);
        let figures = runtime.block_on(contended(server.addr, heavy, positions));
        lost |= figures.lost;
        println!("{name}: contended: heavy done in {:.2} s", figures.heavy);
        println!("  light ingest -> event: {}", figures.light);
        println!("  GET /engines:          {}", figures.engines);
        drop(server);
    }
    if lost {
        std::process::exit(1);
    }
}

/// A phase's figures.
struct Contended {
    heavy: f64,
    light: Spread,
    engines: Spread,
    lost: bool,
}

/// Latencies, in milliseconds.
struct Spread(Vec<f64>);

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut v = self.0.clone();
        if v.is_empty() {
            return write!(f, "no samples");
        }
        v.sort_by(f64::total_cmp);
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        write!(
            f,
            "p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} samples)",
            at(0.5),
            at(0.99),
            v[v.len() - 1],
            v.len()
        )
    }
}

/// The polygon: a circle of radius 0.05° around (10°, 50°).
fn polygon() -> String {
    let ring: Vec<String> = (0..VERTICES)
        .map(|i| {
            let a = std::f64::consts::TAU * (i % (VERTICES - 1)) as f64 / (VERTICES - 1) as f64;
            format!("[{},{}]", 10.0 + 0.05 * a.cos(), 50.0 + 0.05 * a.sin())
        })
        .collect();
    format!(
        r#"{{"type":"Polygon","coordinates":[[{}]]}}"#,
        ring.join(",")
    )
}

/// `n` positions a second apart, wandering around the polygon.
fn positions(n: usize) -> String {
    let lines: Vec<String> = (0..n)
        .map(|i| {
            let a = i as f64 * 0.37;
            let r = 0.02 + 0.06 * ((i as f64 * 0.11).sin().abs());
            format!(
                r#"{{"datetime":"2026-01-01T{:02}:{:02}:{:02}Z","coordinates":[{},{}]}}"#,
                i / 3600 % 24,
                i / 60 % 60,
                i % 60,
                10.0 + r * a.cos(),
                50.0 + r * a.sin()
            )
        })
        .collect();
    lines.join("\n")
}

/// Registers a heavy query on feature `fid` and subscribes to it.
async fn heavy_query(addr: SocketAddr, fid: &str, geometry: &str) -> mfstream_test_client::Sse {
    let mut client = Client::new(addr);
    let body = format!(r#"{{"operation":"distance","geometry":{geometry}}}"#);
    let path = format!("/collections/bench/items/{fid}/tgsequence/queries");
    let r = client.post(&path, &body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let qid = r.json()["queryId"].as_str().expect("a queryId").to_owned();
    match subscribe(addr, &format!("{path}/{qid}/stream"), &[]).await {
        Ok(sse) => sse,
        Err(r) => panic!("subscribe: {} {}", r.status, r.body),
    }
}

/// Feeds `fid` its positions as JSON lines.
async fn feed(addr: SocketAddr, fid: &str, body: &str) {
    let path = format!("/collections/bench/items/{fid}/tgsequence/ingest");
    let r = Client::new(addr)
        .request(
            "POST",
            &path,
            &[("Content-Type", "application/x-ndjson")],
            body.as_bytes(),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
}

/// Reads `n` result events from `sse`; false if the stream ended first.
async fn drain(sse: &mut mfstream_test_client::Sse, n: usize) -> bool {
    let mut got = 0;
    while got < n {
        match sse.next().await {
            Some(e) if e.event == "instant" => got += 1,
            Some(e) if e.event == "lagged" || e.event == "end" => return false,
            Some(_) => {}
            None => return false,
        }
    }
    true
}

/// Phase 1: one heavy query alone; its positions per second.
async fn alone(addr: SocketAddr, n: usize) -> f64 {
    let geometry = polygon();
    let mut sse = heavy_query(addr, "alone", &geometry).await;
    let body = positions(n);
    let start = Clock::now();
    feed(addr, "alone", &body).await;
    let done = tokio::time::timeout(DEADLINE, drain(&mut sse, n)).await;
    assert!(
        matches!(done, Ok(true)),
        "the lone query delivered every event"
    );
    n as f64 / start.elapsed().as_secs_f64()
}

/// Phase 2: heavy queries against a light tenant.
async fn contended(addr: SocketAddr, heavy: usize, n: usize) -> Contended {
    let geometry = Arc::new(polygon());
    let mut streams = Vec::new();
    for i in 0..heavy {
        streams.push(heavy_query(addr, &format!("h{i}"), &geometry).await);
    }
    // The light tenant's query and stream, before any heavy work.
    let light_path = "/collections/light/items/l/tproperties/v";
    let r = Client::new(addr)
        .post(&format!("{light_path}/queries"), r#"{"operation":"abs"}"#)
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let qid = r.json()["queryId"].as_str().expect("a queryId").to_owned();
    let mut light = subscribe(addr, &format!("{light_path}/queries/{qid}/stream"), &[])
        .await
        .unwrap_or_else(|r| panic!("subscribe: {} {}", r.status, r.body));

    let busy = Arc::new(AtomicBool::new(true));
    let epoch = Clock::now();
    // The heavy ingests, all at once, then the wait for every event.
    let body = Arc::new(positions(n));
    let heavy_done = {
        let busy = busy.clone();
        tokio::spawn(async move {
            let feeds: Vec<_> = (0..heavy)
                .map(|i| {
                    let body = body.clone();
                    tokio::spawn(async move { feed(addr, &format!("h{i}"), &body).await })
                })
                .collect();
            for f in feeds {
                f.await.expect("a feed");
            }
            let drains: Vec<_> = streams
                .into_iter()
                .map(|mut sse| tokio::spawn(async move { drain(&mut sse, n).await }))
                .collect();
            let mut all = true;
            for d in drains {
                all &= tokio::time::timeout(DEADLINE, d)
                    .await
                    .is_ok_and(|r| r.unwrap_or(false));
            }
            busy.store(false, Ordering::Relaxed);
            (epoch.elapsed().as_secs_f64(), all)
        })
    };
    // GET /engines every PROBE_TICK, each timed from when it was due (not
    // from when it was sent: a stalled server would otherwise hide the
    // probes it held back).
    let probe = {
        let busy = busy.clone();
        tokio::spawn(async move {
            let mut client = Client::new(addr);
            let mut times = Vec::new();
            let mut tick = tokio::time::interval(PROBE_TICK);
            while busy.load(Ordering::Relaxed) {
                let due = tick.tick().await;
                let r = client.get("/engines").await;
                assert_eq!(r.status, 200, "{}", r.body);
                times.push(due.elapsed().as_secs_f64() * 1e3);
            }
            times
        })
    };
    // The light tenant: one instant every LIGHT_TICK, each timed from when
    // it was due to its event on the stream, read by a task of its own.
    let start = tokio::time::Instant::now();
    let due = move |seq: u64| start + LIGHT_TICK * seq as u32;
    let sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let reader = {
        let sent = sent.clone();
        let busy = busy.clone();
        tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut expected = 1u64;
            loop {
                if !busy.load(Ordering::Relaxed) && expected > sent.load(Ordering::Relaxed) {
                    return (latencies, true);
                }
                let next = tokio::time::timeout(Duration::from_millis(100), light.next()).await;
                match next {
                    Err(_) => continue,
                    Ok(Some(e)) if e.event != "instant" && e.event != "end" => continue,
                    Ok(Some(e)) if e.json()["value"].as_f64() == Some(expected as f64) => {
                        latencies.push(due(expected).elapsed().as_secs_f64() * 1e3);
                        expected += 1;
                    }
                    other => {
                        eprintln!("light tenant: expected event {expected}, got {other:?}");
                        return (latencies, false);
                    }
                }
            }
        })
    };
    let mut client = Client::new(addr);
    let mut seq = 0u64;
    while busy.load(Ordering::Relaxed) {
        seq += 1;
        tokio::time::sleep_until(due(seq)).await;
        // Microseconds since the start, as a datetime on 1970-01-01:
        // increasing, so never a duplicate.
        let us = epoch.elapsed().as_micros() as u64;
        let datetime = format!(
            "1970-01-01T{:02}:{:02}:{:02}.{:06}Z",
            us / 3_600_000_000,
            us / 60_000_000 % 60,
            us / 1_000_000 % 60,
            us % 1_000_000
        );
        let r = client
            .post(
                &format!("{light_path}/ingest"),
                &format!(r#"{{"datetime":"{datetime}","value":{seq}}}"#),
            )
            .await;
        assert_eq!(r.status, 202, "{}", r.body);
        sent.store(seq, Ordering::Relaxed);
    }
    let (latencies, delivered) = tokio::time::timeout(DEADLINE, reader)
        .await
        .map_or((Vec::new(), false), |r| r.expect("the light reader"));
    let lost = !delivered;
    let (heavy_secs, all) = heavy_done.await.expect("the heavy phase");
    let engines = probe.await.expect("the probe");
    Contended {
        heavy: heavy_secs,
        light: Spread(latencies),
        engines: Spread(engines),
        lost: lost || !all,
    }
}

/// A release `mfstream serve`, killed when dropped.
struct Serve {
    child: std::process::Child,
    addr: SocketAddr,
}

impl Serve {
    fn start(binary: &str) -> Serve {
        let mut child = Command::new(binary)
            .args(["serve", "--addr", "127.0.0.1:0"])
            .env("RUST_LOG", "warn")
            .env_remove("MFSTREAM_CONFIG")
            .env_remove("MFAPI_STREAM_ENGINE")
            .stdout(Stdio::piped())
            .spawn()
            .expect("mfstream serve starts");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().expect("stdout")),
            &mut line,
        )
        .expect("the listening line");
        let addr: SocketAddr = line
            .trim()
            .strip_prefix("mfstream: listening on http://")
            .expect("the listening line")
            .parse()
            .expect("an address");
        Serve { child, addr }
    }
}

impl Serve {
    /// The CPU time the server has used so far (user and system), from
    /// /proc: a figure a busy machine disturbs less than wall time.
    fn cpu_seconds(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .expect("/proc/PID/stat");
        // The fields after the command's closing parenthesis; utime and
        // stime are the 14th and 15th of the whole line.
        let rest = &stat[stat.rfind(')').expect("a command") + 2..];
        let fields: Vec<&str> = rest.split(' ').collect();
        let ticks: f64 =
            fields[11].parse::<f64>().expect("utime") + fields[12].parse::<f64>().expect("stime");
        // SAFETY: sysconf reads a constant of the system.
        ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

//! Load benchmark of `mfstream serve`: figures printed, never asserted,
//! except that nothing may be lost.
//!
//! ```text
//! cargo bench --bench serve                      # 100 queries x 10 subscribers, 1,000 instants/s each, 10 s
//! cargo bench --bench serve -- 20 5 1000 10      # QUERIES SUBSCRIBERS RATE SECONDS
//! cargo bench --bench serve -- --state 20 5 1000 10   # the same, memory-only and with --state, side by side
//! cargo bench --bench serve -- --state 20 5 1000 10 100000   # ... and 100,000 unpaced instants per query
//! cargo bench --bench serve -- --state --power   # the --state server with --durability power
//! MFSTREAM_BENCH_BIN=/path/to/mfstream cargo bench --bench serve   # another build, same load
//! ```
//!
//! With `--state`, the same load runs twice, on a memory-only server and on
//! one with `--state` (and `--durability power` with `--power`; a fresh
//! directory under the system's temporary one), and then each takes an
//! unpaced ingest: QUERIES feeders post
//! batches of 256 instants as fast as they are acknowledged, RATE x SECONDS
//! instants each, to queries nobody subscribes to; the acknowledged
//! instants per second of each server are printed next to each other, with
//! their ratio.
//!
//! The release binary serves on a loopback port; this process is the load:
//! one feeder per query posting its instants (JSON lines, every 20 ms, at the
//! rate; the feeders' ticks spread over the 20 ms) to the query's own property, and SUBSCRIBERS SSE connections per
//! query. Each instant carries its send time (the time since the start, as a
//! datetime on 1970-01-01, to the microsecond) and its sequence number as its value, so every subscriber
//! checks it got every event in order (no `lagged`, no gap) and times each
//! one from the ingest request to its arrival. Both ends share the machine.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant as Clock};

use mfstream_test_client::{Client, Sse, subscribe};

/// How often a feeder posts.
const TICK: Duration = Duration::from_millis(20);

struct Load {
    queries: usize,
    subscribers: usize,
    rate: u64,
    seconds: u64,
}

fn main() {
    let state = std::env::args().any(|a| a == "--state");
    let power = std::env::args().any(|a| a == "--power");
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let arg = |i: usize, default: u64| args.get(i).copied().unwrap_or(default);
    let load = Load {
        queries: arg(0, 100) as usize,
        subscribers: arg(1, 10) as usize,
        rate: arg(2, 1000),
        seconds: arg(3, 10),
    };
    // The unpaced ingest's instants per query: UNPACED, else RATE x SECONDS.
    let unpaced_each = arg(4, load.rate * load.seconds);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    if !state {
        let mut server = Serve::start(&load, None, false);
        let ok = runtime.block_on(run(server.addr, &load));
        server.stop();
        if !ok {
            std::process::exit(1);
        }
        return;
    }
    let dir = std::env::temp_dir().join(format!("mfstream-bench-state-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut ok = true;
    let mut rates = Vec::new();
    for state in [None, Some(dir.as_path())] {
        println!(
            "== {} ==",
            match state {
                None => "memory only".to_owned(),
                Some(dir) if power => format!("--state {} --durability power", dir.display()),
                Some(dir) => format!("--state {}", dir.display()),
            }
        );
        let mut server = Serve::start(&load, state, power);
        ok &= runtime.block_on(run(server.addr, &load));
        rates.push(runtime.block_on(unpaced(server.addr, &load, unpaced_each)));
        server.stop();
        if let Some(dir) = state {
            println!(
                "  state directory after both: {:.1} MiB",
                du(dir) as f64 / (1024.0 * 1024.0)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "unpaced ingest: memory only {:.0} instants/s, --state {:.0} instants/s: {:.0}% of memory only",
        rates[0],
        rates[1],
        100.0 * rates[1] / rates[0]
    );
    if !ok {
        std::process::exit(1);
    }
}

/// The bytes of the files under `dir`.
fn du(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => du(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// The release `mfstream serve`, killed when stopped.
struct Serve {
    child: std::process::Child,
    addr: SocketAddr,
}

impl Serve {
    fn start(load: &Load, state: Option<&std::path::Path>, power: bool) -> Serve {
        // MFSTREAM_BENCH_BIN runs another build (say, an older commit's)
        // under the same load, for a side-by-side comparison.
        let binary = std::env::var("MFSTREAM_BENCH_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_mfstream").into());
        let mut cmd = Command::new(&binary);
        cmd.args(["serve", "--addr", "127.0.0.1:0", "--replay", "16384"])
            .args(["--max-subscribers", &(load.subscribers + 1).to_string()]);
        // Bounds an older build may not have: given only where it has them.
        let help = Command::new(&binary)
            .args(["serve", "--help"])
            .output()
            .expect("mfstream serve --help runs");
        let help = String::from_utf8_lossy(&help.stdout);
        if help.contains("--replay-bytes") {
            cmd.args(["--replay-bytes", &(64 << 20).to_string()]);
        }
        if help.contains("--max-connections") {
            // Every subscriber and feeder holds a connection.
            let connections = load.queries * (load.subscribers + 2) + 64;
            cmd.args(["--max-connections", &connections.to_string()]);
        }
        if help.contains("--max-streams") {
            // Every subscriber holds a stream (the default cap is three
            // quarters of the connections).
            let streams = load.queries * load.subscribers + 64;
            cmd.args(["--max-streams", &streams.to_string()]);
        }
        if help.contains("--max-query-state") {
            // Above the replay buffer, which counts in it.
            cmd.args(["--max-query-state", &(256u64 << 20).to_string()]);
        }
        assert!(
            state.is_none() || help.contains("--state"),
            "{binary} has no --state"
        );
        cmd.env("RUST_LOG", "warn")
            .env_remove("MFSTREAM_CONFIG")
            .env_remove("MFAPI_STREAM_ENGINE")
            .stdout(Stdio::piped());
        if let Some(dir) = state {
            cmd.arg("--state").arg(dir);
            if power {
                cmd.args(["--durability", "power"]);
            }
        }
        let mut child = cmd.spawn().expect("mfstream serve starts");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let addr: SocketAddr = line
            .trim()
            .strip_prefix("mfstream: listening on http://")
            .expect("the listening line")
            .parse()
            .unwrap();
        Serve { child, addr }
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Instants per unpaced ingest request: one chunk of the server's.
const UNPACED_BATCH: u64 = 256;

/// Posts `total` instants per query as fast as they are
/// acknowledged, to queries of their own that nobody subscribes to; the
/// acknowledged instants per second.
async fn unpaced(addr: SocketAddr, load: &Load, total: u64) -> f64 {
    let mut client = Client::new(addr);
    let mut properties = Vec::new();
    for q in 0..load.queries {
        let property = format!("/collections/unpaced/items/f{q}/tproperties/speed");
        let response = client
            .post(&format!("{property}/queries"), r#"{"operation":"abs"}"#)
            .await;
        assert_eq!(response.status, 201, "{response:?}");
        properties.push(property);
    }
    let start = Clock::now();
    let mut feeders = Vec::new();
    for property in properties {
        feeders.push(tokio::spawn(async move {
            let mut client = Client::new(addr);
            let path = format!("{property}/ingest");
            let mut sent = 0u64;
            let mut body = String::new();
            while sent < total {
                let n = UNPACED_BATCH.min(total - sent);
                body.clear();
                for seq in sent..sent + n {
                    body.push_str(&format!(
                        "{{\"datetime\":\"2026-01-01T00:00:00Z\",\"value\":{seq}}}\n"
                    ));
                }
                let response = client.post(&path, &body).await;
                match response.status {
                    202 => sent += n,
                    503 => {}
                    _ => panic!("{response:?}"),
                }
            }
        }));
    }
    for feeder in feeders {
        feeder.await.unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    let all = total * load.queries as u64;
    let rate = all as f64 / secs;
    println!("  unpaced ingest: {all} instants acknowledged in {secs:.2} s: {rate:.0}/s");
    rate
}

/// What one subscriber saw.
#[derive(Default)]
struct Seen {
    events: u64,
    problems: Vec<String>,
    latencies_us: Vec<u32>,
}

/// The paced load; false when an event was lost or out of order.
async fn run(addr: SocketAddr, load: &Load) -> bool {
    println!(
        "serve: {} queries x {} subscribers, {} instants/s each, {} s (local engine, abs)",
        load.queries, load.subscribers, load.rate, load.seconds
    );
    let mut client = Client::new(addr);
    let mut queries = Vec::new();
    for q in 0..load.queries {
        let property = format!("/collections/bench/items/f{q}/tproperties/speed");
        let response = client
            .post(&format!("{property}/queries"), r#"{"operation":"abs"}"#)
            .await;
        assert_eq!(response.status, 201, "{response:?}");
        let path = response.json()["channel"].as_str().unwrap().to_owned();
        queries.push((property, path));
    }
    // One clock for the send and arrival times.
    let start = Arc::new(Clock::now());
    let mut readers = Vec::new();
    for (_, path) in &queries {
        for _ in 0..load.subscribers {
            let sse = subscribe(addr, &format!("{path}/stream"), &[])
                .await
                .unwrap_or_else(|r| panic!("{r:?}"));
            readers.push(tokio::spawn(read(sse, start.clone())));
        }
    }
    let total = load.rate * load.seconds;
    let fed_from = start.elapsed();
    let mut feeders = Vec::new();
    for (q, (property, _)) in queries.iter().enumerate() {
        let (property, start) = (property.clone(), start.clone());
        // Independent sources: the feeders' 20 ms ticks are spread evenly
        // rather than all firing together.
        let phase = TICK * q as u32 / load.queries as u32;
        feeders.push(tokio::spawn(feed(
            addr,
            property,
            start,
            fed_from + phase,
            load.rate,
            total,
        )));
    }
    let mut refused = 0;
    for feeder in feeders {
        refused += feeder.await.unwrap();
    }
    let fed_in = start.elapsed() - fed_from;
    for (_, path) in &queries {
        let response = client.delete(path).await;
        assert_eq!(response.status, 204, "{response:?}");
    }
    let mut latencies = Vec::new();
    let (mut events, mut problems) = (0u64, Vec::new());
    for reader in readers {
        let seen = reader.await.unwrap();
        events += seen.events;
        latencies.extend(seen.latencies_us);
        problems.extend(seen.problems);
        if seen.events != total {
            problems.push(format!("a subscriber got {} of {total}", seen.events));
        }
    }
    let expected = total * (load.queries * load.subscribers) as u64;
    latencies.sort_unstable();
    let pct = |p: f64| latencies[((latencies.len() - 1) as f64 * p) as usize] as f64 / 1000.0;
    println!(
        "  fed {} instants in {:.1} s ({:.0}/s in all; {refused} ingest requests refused with 503)",
        total * load.queries as u64,
        fed_in.as_secs_f64(),
        (total * load.queries as u64) as f64 / fed_in.as_secs_f64()
    );
    println!(
        "  delivered {events} of {expected} events over SSE; lost {}",
        expected - events.min(expected)
    );
    println!(
        "  ingest -> SSE latency: p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms",
        pct(0.5),
        pct(0.99),
        pct(0.999),
        pct(1.0)
    );
    if !problems.is_empty() {
        problems.dedup();
        for p in problems.iter().take(10) {
            println!("  PROBLEM: {p}");
        }
        return false;
    }
    true
}

/// Posts `total` instants to `property` at `rate` per second from `from`
/// on (by the `start` clock), every 20 ms;
/// returns how many requests were refused (and sent again).
async fn feed(
    addr: SocketAddr,
    property: String,
    start: Arc<Clock>,
    from: Duration,
    rate: u64,
    total: u64,
) -> u64 {
    let mut client = Client::new(addr);
    let path = format!("{property}/ingest");
    let first = tokio::time::Instant::from_std(*start + from);
    let mut ticker = tokio::time::interval_at(first, TICK);
    let (mut sent, mut refused) = (0u64, 0u64);
    let mut body = String::new();
    while sent < total {
        ticker.tick().await;
        let paced = start.elapsed().saturating_sub(from).as_secs_f64();
        let due = ((paced * rate as f64) as u64).min(total);
        if due <= sent {
            continue;
        }
        body.clear();
        let now = datetime(start.elapsed().as_micros() as u64);
        for seq in sent..due {
            body.push_str(&format!("{{\"datetime\":\"{now}\",\"value\":{seq}}}\n"));
        }
        let response = client.post(&path, &body).await;
        match response.status {
            202 => sent = due,
            503 => refused += 1,
            _ => panic!("{response:?}"),
        }
    }
    refused
}

/// Reads a stream to its end, checking order and timing each event.
async fn read(mut sse: Sse, start: Arc<Clock>) -> Seen {
    let mut seen = Seen::default();
    let mut next = 0u64;
    while let Some(frame) = sse.next_frame().await {
        if frame.starts_with(b":") || frame.starts_with(b"retry:") {
            continue;
        }
        let arrived = start.elapsed().as_micros() as u64;
        if memchr::memmem::find(frame, b"\nevent: instant\n").is_none() {
            if memchr::memmem::find(frame, b"\nevent: end\n").is_some() {
                break;
            }
            seen.problems
                .push(String::from_utf8_lossy(frame).replace('\n', " "));
            continue;
        }
        let (sent_us, value) = (sent_us(frame), number_after(frame, b"\"value\":"));
        if value != next {
            seen.problems
                .push(format!("expected value {next}, got {value}"));
        }
        next = value + 1;
        seen.events += 1;
        seen.latencies_us
            .push(arrived.saturating_sub(sent_us) as u32);
    }
    seen
}

/// A send time (microseconds since the start) as the datetime of an
/// instant: the server checks datetimes are ISO-8601.
fn datetime(us: u64) -> String {
    let secs = us / 1_000_000;
    format!(
        "1970-01-01T{:02}:{:02}:{:02}.{:06}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        us % 1_000_000
    )
}

/// The send time an event frame's datetime carries (see [`datetime`]).
fn sent_us(frame: &[u8]) -> u64 {
    let key = b"\"datetime\":\"1970-01-01T";
    let at = memchr::memmem::find(frame, key).expect("the datetime") + key.len();
    let field = |from: usize, len: usize| {
        frame[at + from..at + from + len]
            .iter()
            .fold(0, |n, b| n * 10 + u64::from(b - b'0'))
    };
    (field(0, 2) * 3600 + field(3, 2) * 60 + field(6, 2)) * 1_000_000 + field(9, 6)
}

/// The number right after `key` in an event frame, read without a JSON
/// parse: the load generator shares the machine with the server.
fn number_after(frame: &[u8], key: &[u8]) -> u64 {
    let at = memchr::memmem::find(frame, key).expect("the field") + key.len();
    frame[at..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .fold(0, |n, b| n * 10 + u64::from(b - b'0'))
}

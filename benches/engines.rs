//! Engine-level benchmarks: figures printed, never asserted.
//!
//! ```text
//! cargo build --release -p mfstream-fastjob -p mfstream-plugin-scale
//! cargo bench --bench engines                 # every section
//! cargo bench --bench engines -- local        # one section: local, plugin, bridge, latency, memory, windows
//! ```
//!
//! - `local`: the `local` engine transforming instants (no JSON, no I/O).
//! - `plugin`: the `scale` plugin engine (a cdylib, in process) on the same
//!   transform, next to `local`, with the ratio.
//! - `bridge`: the bridge through the native job `mfstream-fastjob`, value
//!   and json framing (no JSON at the ends: instants in memory, events counted).
//! - `latency`: instants fed at 10,000/s through the bridge; the time from
//!   an instant entering the source to its event coming out, p50/p99/max.
//! - `memory`: 10 million instants through the bridge; the process's
//!   resident memory sampled along the way (it must stay flat).
//! - `windows`: the `local` engine computing windowed aggregates (1,000
//!   instants per second of event time): TUMBLING 1 s COUNT, SUM, AVG, MIN,
//!   MAX and HOPPING 10 s by 1 s AVG; and, first, 10 million instants
//!   through a TUMBLING window with resident memory sampled (it must stay
//!   flat).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant as Clock};

use mfstream_engine::{BATCH, Source, StreamEngine};
use mfstream_engine::{BridgeEngine, BridgeOptions, Framing, LocalEngine};
use mfstream_model::aggregate::{Aggregate, TimeUnit, Window};
use mfstream_model::ops::Transform;
use mfstream_model::{Aggregation, Instant, PropertyType, QuerySpec};

fn main() {
    let wanted: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let runs = |name: &str| wanted.is_empty() || wanted.iter().any(|w| name.contains(w.as_str()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    if runs("local") {
        runtime.block_on(local());
    }
    if runs("plugin") {
        runtime.block_on(plugin());
    }
    if runs("bridge") {
        runtime.block_on(bridge(Framing::Value, 5_000_000));
        runtime.block_on(bridge(Framing::Json, 2_000_000));
        runtime.block_on(bridge_host_windows(5_000_000));
    }
    if runs("latency") {
        runtime.block_on(latency(10_000.0, 50_000));
    }
    if runs("memory") {
        runtime.block_on(memory(10_000_000));
    }
    if runs("windows") {
        // Memory first: the throughput runs' inputs would raise the baseline.
        runtime.block_on(window_memory(10_000_000));
        runtime.block_on(windows(5_000_000));
    }
}

fn spec() -> QuerySpec {
    QuerySpec::transform("speed", Transform::new("mul", Some(1.852)).unwrap())
}

/// `n` instants in batches, made before the clock starts.
fn batches(n: usize) -> Vec<Vec<Instant>> {
    (0..n)
        .map(|i| Instant::number(format!("2026-01-01T00:00:00.{i:09}Z"), i as f64 + 0.5))
        .collect::<Vec<_>>()
        .chunks(BATCH)
        .map(<[Instant]>::to_vec)
        .collect()
}

/// Feeds `batches` to `engine` running `mul 1.852` and checks that every
/// record gave an event; returns records per second.
async fn throughput(engine: &dyn StreamEngine, batches: Vec<Vec<Instant>>) -> f64 {
    let n: usize = batches.iter().map(Vec::len).sum();
    let (rate, events) = window_throughput(engine, spec(), batches).await;
    assert_eq!(events, n);
    rate
}

async fn local() {
    let n = 20_000_000;
    let mut best: f64 = 0.0;
    for _ in 0..3 {
        best = best.max(throughput(&LocalEngine::new(), batches(n)).await);
    }
    println!(
        "local engine, mul, {n} records: {:.2} M records/s (best of 3)",
        best / 1e6
    );
}

async fn plugin() {
    let library = std::env::var_os("MFSTREAM_SCALE_PLUGIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("target/release/libmfstream_plugin_scale.so")
        });
    assert!(
        library.is_file(),
        "{} is missing: run `cargo build --release -p mfstream-plugin-scale` first",
        library.display()
    );
    let text = format!("[[plugin]]\npath = {:?}\n", library.display().to_string());
    let config = mfstream_registry::config::Config::parse(&text, None).unwrap();
    let registry = mfstream_registry::Registry::from_config(&config);
    let errors = registry.plugin_errors();
    assert!(errors.is_empty(), "{errors:?}");
    let scale = registry.get("scale").unwrap();
    let n = 20_000_000;
    let (mut best_local, mut best_plugin): (f64, f64) = (0.0, 0.0);
    for _ in 0..3 {
        best_local = best_local.max(throughput(&LocalEngine::new(), batches(n)).await);
        best_plugin = best_plugin.max(throughput(scale.as_ref(), batches(n)).await);
    }
    println!(
        "plugin engine (scale, in process), mul, {n} records: {:.2} M records/s; local {:.2} M records/s; local/plugin = {:.2} (best of 3, alternated)",
        best_plugin / 1e6,
        best_local / 1e6,
        best_local / best_plugin
    );
}

fn fastjob() -> Vec<String> {
    let path = std::env::var_os("MFSTREAM_FASTJOB")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/mfstream-fastjob")
        });
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --release -p mfstream-fastjob` first",
        path.display()
    );
    vec![path.display().to_string()]
}

fn fast_engine(framing: Framing) -> BridgeEngine {
    let mut options = BridgeOptions::new("fast", fastjob());
    options.framing = framing;
    BridgeEngine::new(options)
}

async fn bridge(framing: Framing, n: usize) {
    let mut best: f64 = 0.0;
    for _ in 0..3 {
        best = best.max(throughput(&fast_engine(framing), batches(n)).await);
    }
    println!(
        "bridge, {} framing, native job, {n} records: {:.2} M records/s (best of 3)",
        framing.as_str(),
        best / 1e6
    );
}

async fn latency(rate: f64, n: usize) {
    let engine = fast_engine(Framing::Value);
    let (sender, source) = Source::channel(16);
    let mut handle = engine.submit(spec(), source).await.unwrap();
    let sent_at: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    let epoch = Clock::now();
    let stamps = sent_at.clone();
    // A thread of its own paces the feed: one instant per period, each
    // stamped as it enters the source.
    let feeder = std::thread::spawn(move || {
        let period = Duration::from_secs_f64(1.0 / rate);
        let start = Clock::now();
        for i in 0..n {
            let due = start + period * i as u32;
            let now = Clock::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            stamps[i].store(epoch.elapsed().as_nanos() as u64, Ordering::Relaxed);
            let instant = Instant::number(i.to_string(), i as f64);
            sender.blocking_send_batch(vec![instant]).unwrap();
        }
    });
    let mut latencies = Vec::with_capacity(n);
    while let Some(batch) = handle.next_batch().await {
        let now = epoch.elapsed().as_nanos() as u64;
        for event in batch {
            let i: usize = event.datetime().parse().unwrap();
            latencies.push(now - sent_at[i].load(Ordering::Relaxed));
        }
    }
    feeder.join().unwrap();
    assert_eq!(latencies.len(), n);
    // The first second warms up the job and the runtime.
    let mut steady: Vec<u64> = latencies[(rate as usize).min(n / 2)..].to_vec();
    steady.sort_unstable();
    let pct = |p: f64| steady[((steady.len() - 1) as f64 * p) as usize] as f64 / 1e3;
    println!(
        "bridge latency at {rate:.0} records/s, native job, {} records: p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs",
        steady.len(),
        pct(0.50),
        pct(0.99),
        pct(1.0)
    );
}

/// The process's resident memory, in MiB.
fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

async fn memory(n: usize) {
    let engine = fast_engine(Framing::Value);
    let (sender, source) = Source::channel(16);
    let mut handle = engine.submit(spec(), source).await.unwrap();
    let feeder = tokio::spawn(async move {
        // Instants are made as they are sent, so that the input itself takes
        // no memory: what grows is the engine's.
        for start in (0..n).step_by(BATCH) {
            let batch = (start..(start + BATCH).min(n))
                .map(|i| Instant::number(format!("2026-01-01T00:00:00.{i:09}Z"), i as f64))
                .collect();
            sender.send_batch(batch).await.unwrap();
        }
    });
    let mut events = 0usize;
    let mut samples = Vec::new();
    let mut next_sample = n / 10;
    while let Some(batch) = handle.next_batch().await {
        events += batch.len();
        if events >= next_sample {
            samples.push((events, rss_mib()));
            next_sample += n / 10;
        }
    }
    feeder.await.unwrap();
    assert_eq!(events, n);
    let shown: Vec<String> = samples
        .iter()
        .map(|(e, m)| format!("{}M: {m:.1}", e / 1_000_000))
        .collect();
    println!(
        "bridge memory over {n} records, resident MiB: {}",
        shown.join(", ")
    );
}

/// The `i`-th instant of a stream of 1,000 per second of event time.
fn timed(i: usize) -> Instant {
    let (secs, ms) = (i / 1000, i % 1000);
    let (h, m, s) = (secs / 3600 % 24, secs / 60 % 60, secs % 60);
    Instant::number(
        format!("2026-01-01T{h:02}:{m:02}:{s:02}.{ms:03}Z"),
        (i % 977) as f64 + 0.25,
    )
}

fn window_spec(aggregation: Aggregation, window: Window) -> QuerySpec {
    QuerySpec::aggregate(
        "speed",
        PropertyType::TReal,
        None,
        Aggregate::new(aggregation, window),
    )
}

/// Feeds `batches` to `engine` running `spec` to completion; returns
/// records per second and the events seen.
async fn window_throughput(
    engine: &dyn StreamEngine,
    spec: QuerySpec,
    batches: Vec<Vec<Instant>>,
) -> (f64, usize) {
    let n: usize = batches.iter().map(Vec::len).sum();
    let (sender, source) = Source::channel(16);
    let started = Clock::now();
    let mut handle = engine.submit(spec, source).await.unwrap();
    let feeder = tokio::spawn(async move {
        for batch in batches {
            sender.send_batch(batch).await.unwrap();
        }
    });
    let mut events = 0;
    while let Some(batch) = handle.next_batch().await {
        events += batch.len();
    }
    let secs = started.elapsed().as_secs_f64();
    feeder.await.unwrap();
    assert_eq!(handle.status(), mfstream_model::QueryStatus::Completed);
    (n as f64 / secs, events)
}

/// A transform on the job composed with a window in the host.
async fn bridge_host_windows(n: usize) {
    let input: Vec<Vec<Instant>> = (0..n)
        .map(timed)
        .collect::<Vec<_>>()
        .chunks(BATCH)
        .map(<[Instant]>::to_vec)
        .collect();
    let spec = QuerySpec::aggregate(
        "speed",
        PropertyType::TReal,
        Some(Transform::new("mul", Some(1.852)).unwrap()),
        Aggregate::new(
            Aggregation::Avg,
            Window::Tumbling {
                size: 1,
                unit: TimeUnit::Seconds,
            },
        ),
    );
    let mut best: f64 = 0.0;
    for _ in 0..3 {
        let engine = fast_engine(Framing::Value);
        let (rate, _) = window_throughput(&engine, spec.clone(), input.clone()).await;
        best = best.max(rate);
    }
    println!(
        "bridge, value framing, native job mul 1.852 then TUMBLING 1 s AVG in the host, {n} records: {:.2} M records/s (best of 3)",
        best / 1e6
    );
}

async fn windows(n: usize) {
    let input: Vec<Vec<Instant>> = (0..n)
        .map(timed)
        .collect::<Vec<_>>()
        .chunks(BATCH)
        .map(<[Instant]>::to_vec)
        .collect();
    let tumbling = Window::Tumbling {
        size: 1,
        unit: TimeUnit::Seconds,
    };
    let hopping = Window::Hopping {
        size: 10,
        unit: TimeUnit::Seconds,
        hop: 1,
        hop_unit: TimeUnit::Seconds,
    };
    let cases = [
        ("TUMBLING 1 s", Aggregation::Count, &tumbling),
        ("TUMBLING 1 s", Aggregation::Sum, &tumbling),
        ("TUMBLING 1 s", Aggregation::Avg, &tumbling),
        ("TUMBLING 1 s", Aggregation::Min, &tumbling),
        ("TUMBLING 1 s", Aggregation::Max, &tumbling),
        ("HOPPING 10 s by 1 s", Aggregation::Avg, &hopping),
    ];
    for (name, aggregation, window) in cases {
        let mut best: f64 = 0.0;
        let mut events = 0;
        for _ in 0..3 {
            let (rate, seen) = window_throughput(
                &LocalEngine::new(),
                window_spec(aggregation, window.clone()),
                input.clone(),
            )
            .await;
            best = best.max(rate);
            events = seen;
        }
        println!(
            "local engine, {name} {aggregation}, {n} records, {events} events: {:.2} M records/s (best of 3)",
            best / 1e6
        );
    }
}

async fn window_memory(n: usize) {
    let spec = window_spec(
        Aggregation::Avg,
        Window::Tumbling {
            size: 1,
            unit: TimeUnit::Seconds,
        },
    );
    let (sender, source) = Source::channel(16);
    let mut handle = LocalEngine::new().submit(spec, source).await.unwrap();
    let feeder = tokio::spawn(async move {
        // Instants are made as they are sent and memory is sampled as they
        // go: what could grow is the engine's state.
        let mut samples = Vec::new();
        for start in (0..n).step_by(BATCH) {
            let batch = (start..(start + BATCH).min(n)).map(timed).collect();
            sender.send_batch(batch).await.unwrap();
            let sent = (start + BATCH).min(n);
            if sent / (n / 10) != start / (n / 10) {
                samples.push((sent, rss_mib()));
            }
        }
        samples
    });
    let mut events = 0usize;
    while let Some(batch) = handle.next_batch().await {
        events += batch.len();
    }
    let samples = feeder.await.unwrap();
    assert_eq!(events, n / 1000);
    let shown: Vec<String> = samples
        .iter()
        .map(|(e, m)| format!("{}M: {m:.1}", e / 1_000_000))
        .collect();
    println!(
        "local engine memory, TUMBLING 1 s AVG over {n} records, resident MiB: {}",
        shown.join(", ")
    );
}

//! Durable ingest through the state store against a memory-only baseline:
//! figures printed side by side, never asserted.
//!
//! ```text
//! cargo bench --bench store                       # 1,000,000 instants, 100 per call, 32 callers
//! cargo bench --bench store -- 200000 50 8        # INSTANTS PER_CALL CALLERS
//! ```
//!
//! Each caller is a task that does what an ingest request does: hand a
//! batch of instants over and wait for the acknowledgement. The baseline
//! hands them to a thread that keeps them in memory (the shape of ingest
//! without `--state`: a bounded queue, a batch at a time, an answer per
//! call); the store logs them durably to its journal (`Durability::Process`:
//! a `pwrite(2)` per call; then `Power`: and an `fdatasync` shared by the
//! calls waiting), and once more with a single caller, where every call
//! waits alone. Two inputs: the instants already built (the
//! store's own cost against a bare queue), and each call's instants parsed
//! first from a JSON-lines body, as `POST …/ingest` does (closer to what a
//! server spends per instant). The inputs are made before the clock starts;
//! each figure is the best of three runs.
//! Last, one query's results are stored in batches of 64 events, as a pump
//! would.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant as Clock};

use mfstream_model::Instant;
use mfstream_model::PropertyPath;
use mfstream_store::{Durability, NewQuery, PropertyLock, Store, StoreOptions, StoredEvent};
use tokio::sync::{mpsc, oneshot};

#[derive(Clone, Copy)]
struct Load {
    instants: u64,
    per_call: u64,
    callers: u64,
}

#[derive(Clone, Copy, PartialEq)]
enum Input {
    Built,
    Body,
}

#[derive(Clone)]
enum Sink {
    Memory(mpsc::Sender<Call>),
    Store(Arc<Store>),
}

type Call = (Vec<Instant>, oneshot::Sender<u64>);

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let arg = |i: usize, default: u64| args.get(i).copied().unwrap_or(default).max(1);
    let load = Load {
        instants: arg(0, 1_000_000),
        per_call: arg(1, 100),
        callers: arg(2, 32),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    println!(
        "store: {} instants, {} per call, {} concurrent callers",
        load.instants, load.per_call, load.callers
    );
    println!(
        "{:<32} {:>24} {:>24}",
        "", "instants built", "JSON body parsed first"
    );
    runtime.block_on(async {
        let built = memory(load, Input::Built).await;
        let body = memory(load, Input::Body).await;
        report("memory only (baseline)", load, (built, body), (built, body));
        let cases = [
            (
                "durable, Process (pwrite)",
                Durability::Process,
                load.callers,
            ),
            (
                "durable, Power (shared fdatasync)",
                Durability::Power,
                load.callers,
            ),
            ("durable, Process, one caller", Durability::Process, 1),
        ];
        for (what, durability, callers) in cases {
            let load = Load { callers, ..load };
            let durable = (
                durable(load, durability, Input::Built).await,
                durable(load, durability, Input::Body).await,
            );
            report(what, load, durable, (built, body));
        }
        let (events, took) = events(200_000).await;
        println!(
            "{:<32} {:>12.0} events/s",
            "events, one query, 64 per call",
            events as f64 / took.as_secs_f64()
        );
    });
}

fn report(what: &str, load: Load, took: (Duration, Duration), baseline: (Duration, Duration)) {
    let rate = |d: Duration| load.instants as f64 / d.as_secs_f64();
    let cell = |d: Duration, base: Duration| {
        format!(
            "{:>9.0}/s ({:>5.1}%)",
            rate(d),
            100.0 * rate(d) / rate(base)
        )
    };
    println!(
        "{what:<32} {:>24} {:>24}",
        cell(took.0, baseline.0),
        cell(took.1, baseline.1)
    );
}

fn instant(caller: u64, call: u64, i: u64, per_call: u64) -> Instant {
    Instant::number(
        format!(
            "2026-01-01T00:{:02}:{:02}.{caller:03}{call:06}Z",
            i / 60 % 60,
            i % 60
        ),
        (call * per_call + i) as f64 * 0.5,
    )
}

/// Every caller's bodies, one per call, made before the clock starts.
fn bodies(load: Load) -> Vec<Vec<Vec<u8>>> {
    let calls = load.instants / load.per_call / load.callers;
    (0..load.callers)
        .map(|caller| {
            (0..calls)
                .map(|call| {
                    let mut body = Vec::new();
                    for i in 0..load.per_call {
                        instant(caller, call, i, load.per_call).write_json(&mut body);
                        body.push(b'\n');
                    }
                    body
                })
                .collect()
        })
        .collect()
}

fn parse(body: &[u8]) -> Vec<Instant> {
    body.split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| Instant::from_json(line).expect("a JSON instant"))
        .collect()
}

/// One caller's calls: instants built, or bodies to parse.
enum Calls {
    Built(Vec<Vec<Instant>>),
    Bodies(Vec<Vec<u8>>),
}

/// Runs every caller against `sink`, returning the time taken.
async fn run(load: Load, input: Input, sink: Sink) -> Duration {
    // Built instants are parsed here, before the clock starts.
    let prepared: Vec<Calls> = bodies(load)
        .into_iter()
        .map(|bodies| match input {
            Input::Built => Calls::Built(bodies.iter().map(|b| parse(b)).collect()),
            Input::Body => Calls::Bodies(bodies),
        })
        .collect();
    let start = Clock::now();
    let mut callers = tokio::task::JoinSet::new();
    for prepared in prepared {
        let sink = sink.clone();
        callers.spawn(async move {
            let calls: Box<dyn Iterator<Item = Vec<Instant>> + Send> = match prepared {
                Calls::Built(built) => Box::new(built.into_iter()),
                Calls::Bodies(bodies) => Box::new(bodies.into_iter().map(|body| parse(&body))),
            };
            for instants in calls {
                match &sink {
                    Sink::Memory(calls) => {
                        let (ack, answer) = oneshot::channel();
                        calls.send((instants, ack)).await.expect("the keeper runs");
                        answer.await.expect("an answer");
                    }
                    Sink::Store(store) => {
                        store
                            .append_instants(&property(), &instants)
                            .await
                            .expect("logged");
                    }
                }
            }
        });
    }
    callers.join_all().await;
    start.elapsed()
}

/// The instants handed to a thread that keeps the last million in memory.
async fn memory(load: Load, input: Input) -> Duration {
    let mut best = Duration::MAX;
    for _ in 0..3 {
        best = best.min(memory_once(load, input).await);
    }
    best
}

async fn memory_once(load: Load, input: Input) -> Duration {
    let (calls, mut queue) = mpsc::channel::<Call>(1024);
    let keeper = std::thread::spawn(move || {
        let mut kept = VecDeque::new();
        let mut seq = 0;
        while let Some((instants, ack)) = queue.blocking_recv() {
            let mut pending = vec![(instants, ack)];
            while let Ok(call) = queue.try_recv() {
                pending.push(call);
            }
            for (instants, ack) in pending {
                seq += instants.len() as u64;
                kept.extend(instants);
                while kept.len() > 1_000_000 {
                    kept.pop_front();
                }
                let _ = ack.send(seq);
            }
        }
    });
    let took = run(load, input, Sink::Memory(calls)).await;
    keeper.join().expect("the keeper ends");
    took
}

fn dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mfstream-bench-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn property() -> PropertyPath {
    PropertyPath {
        collection: "ships".into(),
        feature: "a".into(),
        property: "speed".into(),
    }
}

/// The instants logged by a fresh store.
async fn durable(load: Load, durability: Durability, input: Input) -> Duration {
    let mut best = Duration::MAX;
    for _ in 0..3 {
        best = best.min(durable_once(load, durability, input).await);
    }
    best
}

async fn durable_once(load: Load, durability: Durability, input: Input) -> Duration {
    let dir = dir("ingest");
    let options = StoreOptions {
        durability,
        ..StoreOptions::default()
    };
    let store = Arc::new(Store::open(&dir, options).expect("the store opens"));
    // A running query keeps the whole log (its checkpoint never moves).
    let lock = PropertyLock::new(property(), ());
    store
        .register(&lock.lock().await, query())
        .await
        .expect("registers");
    let took = run(load, input, Sink::Store(store.clone())).await;
    Arc::into_inner(store).expect("the last handle").close();
    let _ = std::fs::remove_dir_all(&dir);
    took
}

fn query() -> NewQuery {
    NewQuery {
        id: "q".into(),
        property: property(),
        spec: r#"{"operation":"mul","arg":1.852}"#.into(),
        engine: "local".into(),
        created: std::time::SystemTime::now(),
    }
}

/// One query's results stored as a pump would: 64 at a time.
async fn events(n: u64) -> (u64, Duration) {
    let dir = dir("events");
    let store = Store::open(&dir, StoreOptions::default()).expect("the store opens");
    let lock = PropertyLock::new(property(), ());
    store
        .register(&lock.lock().await, query())
        .await
        .expect("registers");
    let start = Clock::now();
    let mut id = 1;
    while id <= n {
        let events: Vec<_> = (id..(id + 64).min(n + 1))
            .map(|id| StoredEvent {
                id,
                kind: mfstream_model::EventKind::Instant,
                data: format!(
                    r#"{{"datetime":"2026-01-01T00:00:00.{id:06}Z","value":{},"property":"speed","operation":"mul"}}"#,
                    id as f64 * 1.852
                ),
            })
            .collect();
        id += events.len() as u64;
        store
            .append_events("q", events, None)
            .await
            .expect("stored");
    }
    let took = start.elapsed();
    store.close();
    let _ = std::fs::remove_dir_all(&dir);
    (n, took)
}

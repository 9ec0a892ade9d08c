//! The broker sources' conformance suite: cases written once and run
//! against each broker a test can start and publish to ([`TestBroker`]:
//! mosquitto for `--mqtt`, tansu for `--kafka`), with the helpers both
//! suites share. [`conformance!`] stamps one test per case in the module
//! of the broker it is given (`serve::mqtt::…`, `serve::kafka::…`), so
//! `cargo test mqtt` runs every case against mosquitto.
//!
//! A new broker source runs the same cases by implementing [`TestBroker`]
//! for its broker and invoking [`conformance!`] once.
//!
//! The cases: what a message may hold and how a bad one is counted
//! ([`records`]), and what is delivered across a saturated ingest, a
//! SIGKILL of serve and a broker restart ([`delivery`]).

use std::sync::mpsc;
use std::time::Duration;

use super::*;

mod delivery;
mod records;

pub(in crate::serve) use delivery::*;
pub(in crate::serve) use records::*;

/// A broker the test started, and how a server reads it.
pub(super) trait TestBroker: Sized {
    /// The source's name: the `source` label of the ingest metrics.
    const SOURCE: &'static str;
    /// The source's status route.
    const STATUS: &'static str;
    /// Its status's count of messages read (redeliveries included).
    const RECEIVED: &'static str;
    /// Its status's count of messages acknowledged (or committed).
    const ACKNOWLEDGED: &'static str;
    /// Its metric family of bad messages, by `reason`.
    const BAD_METRIC: &'static str;
    /// The most messages read and not yet acknowledged while the ingest
    /// is saturated: the rest waits at the broker.
    const MAX_HELD: u64;
    /// How long a delivery may take: a Kafka group may first have to wait
    /// for a killed member's session to time out.
    const PATIENCE: Duration;
    /// Topics the source reads whose ids are bad: one with an empty
    /// collection id, one with a feature id `..`. None where the
    /// subscription itself admits only good ids (Kafka's is a regular
    /// expression of letters, digits, `_` and `-`).
    const BAD_ID_TOPICS: Option<[&'static str; 2]>;

    /// A broker of the test's own, running, on which ship s1's topics
    /// ([`TestBroker::topic`]) can be published to.
    async fn start(name: &str) -> Self;

    /// The topic of ship s1's `property` (`speed`, `tgsequence`) by the
    /// default pattern.
    fn topic(property: &str) -> String;

    /// `serve` reading this broker with `args` and `env`, once it is ready
    /// (its line printed).
    fn serve(&self, name: &str, args: &[&str], env: &[(&str, String)]) -> Serve;

    /// Publishes `payloads` in order, one message each, to `topic`, on a
    /// task: its end means the broker has them all.
    fn send_to(&self, topic: &str, payloads: Vec<String>) -> tokio::task::JoinHandle<()>;

    /// Stops the broker and starts it again on the same port and storage.
    fn restart(&mut self);

    /// Publishes `payloads` to the topic of the property [`P`].
    fn send(&self, payloads: Vec<String>) -> tokio::task::JoinHandle<()> {
        self.send_to(&Self::topic("speed"), payloads)
    }
}

/// One test per conformance case, in the invoking module, for the broker
/// type given, each with the attributes given (an `#[ignore]` where the
/// broker needs a program CI installs).
macro_rules! conformance {
    ($source:literal, $broker:ty $(, #[$attr:meta])*) => {
        $crate::serve::sources::conformance!(@cases $source, $broker, [$(#[$attr])*],
            bad_records_are_acknowledged_counted_per_reason_and_sampled_behind_the_token,
            an_instant_stamped_past_the_servers_horizon_is_bad_and_later_ones_are_taken,
            positions_on_tgsequence_reach_position_queries_once_and_bad_ones_are_counted,
            positions_are_checked_in_the_reference_system_a_query_fixed,
            a_saturated_ingest_stops_the_reading_and_loses_nothing_once_it_drains,
            after_a_sigkill_of_serve_every_message_is_in_the_results_exactly_once,
            positions_after_a_sigkill_of_serve_are_each_in_the_results_exactly_once,
        );
    };
    (@cases $source:literal, $broker:ty, $attrs:tt, $($case:ident,)*) => {
        $($crate::serve::sources::conformance!(@case $source, $broker, $attrs, $case);)*
    };
    (@case $source:literal, $broker:ty, [$(#[$attr:meta])*], $case:ident) => {
        #[tokio::test]
        $(#[$attr])*
        async fn $case() {
            let name = concat!($source, "-", stringify!($case));
            $crate::serve::sources::$case::<$broker>(name).await;
        }
    };
}
pub(super) use conformance;

/// The topic of the property [`P`].
fn speed<B: TestBroker>() -> String {
    B::topic("speed")
}

/// The topic of ship s1's positions, [`S`].
fn positions<B: TestBroker>() -> String {
    B::topic("tgsequence")
}

/// The positions of ship s1.
const S: &str = "/collections/ships/items/s1/tgsequence";

/// Publishes `payloads` to `topic` and waits until the broker has them.
async fn deliver<B: TestBroker>(broker: &B, topic: &str, payloads: Vec<String>) {
    broker
        .send_to(topic, payloads)
        .await
        .expect("every message published");
}

/// The source's status once `done` holds ([`eventually`], within
/// [`TestBroker::PATIENCE`]).
pub(super) async fn status_until<B: TestBroker>(
    client: &mut Client,
    what: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let probe = async || client.get(B::STATUS).await.json();
    eventually(what, B::PATIENCE, probe, done).await
}

/// The source's status once it has acknowledged `n` messages: every one
/// published handled, bad ones included.
async fn acknowledged<B: TestBroker>(client: &mut Client, n: u64) -> serde_json::Value {
    let what = format!("{n} messages acknowledged");
    status_until::<B>(client, &what, |s| s[B::ACKNOWLEDGED] == n).await
}

/// A position at `secs` seconds into 2026.
fn position(secs: u32, lon: f64, lat: f64) -> String {
    format!(r#"{{"datetime":"2026-01-01T00:00:{secs:02}Z","coordinates":[{lon},{lat}]}}"#)
}

/// Instants `from..from + n`, value `i`, one per message.
pub(super) fn instants(from: usize, n: usize) -> Vec<String> {
    (from..from + n)
        .map(|i| instant(i, &i.to_string()))
        .collect()
}

/// Waits for `server`'s next line, which must be `want` ("the server
/// `what`"); a server that prints none is killed after `patience`, so the
/// wait ends and the assertion says so.
pub(super) fn assert_line(server: &mut Serve, want: &str, patience: Duration, what: &str) {
    let pid = server.pid() as i32;
    let (done, watch) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if watch.recv_timeout(patience) == Err(mpsc::RecvTimeoutError::Timeout) {
            // SAFETY: signalling the test's own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    let line = server.next_line();
    let _ = done.send(());
    watchdog.join().unwrap();
    assert_eq!(line.trim(), want, "the server {what}");
}

/// A free loopback port for a broker: bound and released.
pub(super) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The lines a broker writes to `pipe`, read on a thread of their own so
/// it never blocks on a full pipe (once nobody receives them, they are
/// read and dropped).
pub(super) fn read_lines(pipe: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

/// Events until the one whose value is `last` (each within `patience`);
/// every value before it.
pub(super) async fn until_value(sse: &mut Sse, last: f64, patience: Duration) -> Vec<f64> {
    let mut seen = Vec::new();
    loop {
        let event = tokio::time::timeout(patience, sse.next())
            .await
            .expect("an event in time")
            .expect("the stream goes on");
        if event.event != "instant" {
            continue;
        }
        let value = event.json()["value"].as_f64().unwrap();
        seen.push(value);
        if value == last {
            return seen;
        }
    }
}

/// `seen` is `0, 1, …, n - 1`: each value once, in order; else says
/// which are missing and which doubled (not the whole list).
pub(super) fn assert_each_once(seen: &[f64], n: usize) {
    let mut count = vec![0; n];
    for v in seen {
        count[*v as usize] += 1;
    }
    let missing: Vec<usize> = (0..n).filter(|&i| count[i] == 0).collect();
    let doubled: Vec<usize> = (0..n).filter(|&i| count[i] > 1).collect();
    assert!(
        missing.is_empty() && doubled.is_empty(),
        "{} results for {n} messages: missing {} (first {:?}), doubled {} (first {:?})",
        seen.len(),
        missing.len(),
        missing.first(),
        doubled.len(),
        doubled.first()
    );
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "in order");
}

/// The flags of a server that keeps a log and replays from it.
pub(super) fn with_state(dir: &str) -> [&str; 6] {
    [
        "--state",
        dir,
        "--replay",
        "100000",
        "--replay-bytes",
        "33554432",
    ]
}

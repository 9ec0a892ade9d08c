//! Windows that close on time: a live query (`QuerySpec::live_on`) advances
//! event time on the wall clock, so its last window is emitted without a
//! later record, on every engine kind. The clock is tokio's, paused: the
//! runtime jumps to the next timer when it has nothing else to do, so
//! these tests wait for events, never for time.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mfstream_engine::{BridgeEngine, BridgeOptions, Framing, LocalEngine};
use mfstream_engine::{QueryHandle, Source, SourceSender, StreamEngine};
use mfstream_model::clock::WallClock;
use mfstream_model::{Event, Instant, PropertyType, QuerySpec, Registration};
use tokio::time::Instant as Tick;

use crate::util::*;

/// 2026-01-01T00:00:00Z, in seconds since the epoch.
const MIDNIGHT: u64 = 1_767_225_600;

/// `2026-01-01T00:00:SS.mmmZ` for `millis` after midnight.
fn at(millis: u64) -> String {
    format!(
        "2026-01-01T00:00:{:02}.{:03}Z",
        millis / 1000,
        millis % 1000
    )
}

/// A clock that reads `millis` after midnight now.
fn clock_at(millis: u64) -> WallClock {
    WallClock::starting_at(UNIX_EPOCH + Duration::from_millis(MIDNIGHT * 1000 + millis))
}

fn live_spec(body: &str, clock: WallClock) -> QuerySpec {
    let mut spec = Registration::from_json(body)
        .expect("a registration body")
        .into_spec("speed", PropertyType::TReal)
        .expect("a valid query")
        .live_on(clock);
    spec.id = "q".into();
    spec
}

fn tumbling(grace: u64) -> String {
    format!(
        r#"{{"operation":"mul","arg":1,"aggregation":"SUM","window":{{"type":"TUMBLING","size":1,"unit":"SECONDS"}},"grace":{grace}}}"#
    )
}

fn window(event: Event) -> serde_json::Value {
    serde_json::from_str(&event.to_json()).expect("events are JSON")
}

async fn start(engine: &dyn StreamEngine, spec: QuerySpec) -> (SourceSender, QueryHandle) {
    let (sender, source) = Source::channel(4);
    let handle = engine.submit(spec, source).await.expect("the query starts");
    (sender, handle)
}

/// The end of a query fed a record in its emitted window (late) and one
/// ahead of the clock, then closed: one partial event, the late one
/// counted in it, and the query completed.
async fn ends_late_and_partial(handle: QueryHandle) {
    let (rest, status) = collect(handle).await;
    assert_eq!(status, mfstream_model::QueryStatus::Completed);
    let rest: Vec<_> = rest.into_iter().map(window).collect();
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(
        (&rest[0]["value"], &rest[0]["late"], &rest[0]["partial"]),
        (
            &serde_json::json!(4),
            &serde_json::json!(1),
            &serde_json::json!(true)
        ),
        "{}",
        rest[0]
    );
}

/// On `engine`: TUMBLING 1 s SUM with `grace`, two records in [0 s, 1 s)
/// stamped at the clock's time, and the source kept open. The window is
/// emitted on the clock, no earlier than its end plus the grace; then a
/// record in it is late, counted in the next (partial) event.
async fn closes_on_time(engine: &dyn StreamEngine, grace: u64) {
    let clock = clock_at(500);
    let began = Tick::now();
    let (sender, mut handle) = start(engine, live_spec(&tumbling(grace), clock)).await;
    let two = vec![Instant::number(at(500), 1.0), Instant::number(at(700), 2.0)];
    sender.send_batch(two).await.unwrap();
    let event = window(handle.next().await.expect("the window, on time"));
    let waited = began.elapsed();
    assert_eq!(
        (&event["value"], &event["count"], event.get("partial")),
        (&serde_json::json!(3), &serde_json::json!(2), None),
        "{event}"
    );
    let due = Duration::from_millis(500 + grace * 1000);
    assert!(waited >= due, "emitted after {waited:?}, before {due:?}");
    // The source is still open: no later record closed it. A record in the
    // emitted window is now late.
    let after = vec![
        Instant::number(at(900), 100.0),
        Instant::number(at(1000 + grace * 1000 + 100), 4.0),
    ];
    sender.send_batch(after).await.unwrap();
    // The end runs in real time: a job takes real time to exit, and paused
    // time would jump to the end of its stop grace meanwhile.
    tokio::time::resume();
    drop(sender);
    ends_late_and_partial(handle).await;
}

/// On `engine`: a restored query replaying its log. TUMBLING 1 s SUM with
/// `grace`, on a held clock that reads an hour past the records' window
/// (the restart outlasted it). Fed while the clock is held, the records
/// fall in their window by their datetimes, and nothing closes it on the
/// clock; the release closes it at once, with both records and none late.
/// From then on the clock applies: a record in that window is late, one
/// ahead of the clock is counted (the partial event at the end).
async fn a_held_clock_replays_then_closes_at_the_release(engine: &dyn StreamEngine, grace: u64) {
    let (clock, release) = clock_at(3_600_000).held();
    let reading = clock.clone();
    let (sender, mut handle) = start(engine, live_spec(&tumbling(grace), clock)).await;
    // The replay comes a while after the submission: the clock has crossed
    // window boundaries since (an aggregating job must get no line).
    tokio::time::advance(Duration::from_secs(5)).await;
    let two = vec![Instant::number(at(500), 1.0), Instant::number(at(700), 2.0)];
    sender.send_batch(two).await.unwrap();
    let waited = tokio::time::timeout(Duration::from_secs(3600), handle.next()).await;
    assert!(
        waited.is_err(),
        "a window closed on a held clock: {waited:?}"
    );
    // The rest runs in real time: a job takes real time to answer, and
    // paused time would jump past a timeout meanwhile.
    tokio::time::resume();
    sender.release_clock(release).await.unwrap();
    let event = tokio::time::timeout(Duration::from_secs(30), handle.next())
        .await
        .expect("the window, at the release, with its records")
        .expect("an event");
    let event = window(event);
    assert_eq!(
        (&event["value"], &event["count"], event.get("late")),
        (&serde_json::json!(3), &serde_json::json!(2), None),
        "{event}"
    );
    let ahead = reading.now() + Duration::from_secs(10);
    let after = vec![
        Instant::number(at(900), 100.0),
        Instant::number(rfc3339(ahead), 4.0),
    ];
    sender.send_batch(after).await.unwrap();
    drop(sender);
    ends_late_and_partial(handle).await;
}

#[tokio::test(start_paused = true)]
async fn a_held_local_clock_counts_replayed_records_in_their_window_and_closes_it_at_the_release() {
    a_held_clock_replays_then_closes_at_the_release(&LocalEngine::new(), 1).await;
}

#[tokio::test(start_paused = true)]
async fn without_the_hold_records_the_clock_has_passed_are_late() {
    let (sender, mut handle) = start(
        &LocalEngine::new(),
        live_spec(&tumbling(1), clock_at(3_600_000)),
    )
    .await;
    let two = vec![Instant::number(at(500), 1.0), Instant::number(at(700), 2.0)];
    sender.send_batch(two).await.unwrap();
    sender
        .send(Instant::number("2026-01-01T01:00:00.100Z", 4.0))
        .await
        .unwrap();
    drop(sender);
    let event = window(handle.next().await.unwrap());
    assert_eq!(
        (&event["value"], &event["late"]),
        (&serde_json::json!(4), &serde_json::json!(2)),
        "{event}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_held_clock_over_a_value_jobs_answers_closes_the_replayed_window_at_the_release() {
    a_held_clock_replays_then_closes_at_the_release(&reference(Framing::Value, false), 1).await;
}

#[tokio::test(start_paused = true)]
async fn a_held_clock_sends_a_job_that_aggregates_no_watermark_line_until_the_release() {
    a_held_clock_replays_then_closes_at_the_release(&reference(Framing::Json, true), 1).await;
}

#[tokio::test(start_paused = true)]
async fn a_held_clock_over_an_in_process_plugins_outputs_closes_the_replayed_window_at_the_release()
{
    let dir = TempDir::new("on-time-held-plugin");
    let scale = plugin_library("mfstream-plugin-scale");
    let registry = registry(&dir, &entry(&scale));
    let engine = registry.get("scale").unwrap();
    a_held_clock_replays_then_closes_at_the_release(engine.as_ref(), 1).await;
}

/// Real time, as for every `json` transform job: on a held clock that
/// reads an hour past the records' window, the window closes once the
/// clock is released and the job has settled, with both records.
#[tokio::test]
async fn a_held_clock_over_a_json_jobs_answers_closes_the_replayed_window_once_it_settled() {
    let dir = TempDir::new("on-time-held-isolated");
    let scale = plugin_library("mfstream-plugin-scale");
    let registry = isolating_registry(&dir, &isolated(&scale));
    let isolated: Arc<dyn StreamEngine> = registry.get("scale").unwrap();
    for engine in [isolated.as_ref(), &reference(Framing::Json, false)] {
        let (clock, release) = clock_at(3_600_000).held();
        let (sender, mut handle) = start(engine, live_spec(&tumbling(0), clock)).await;
        let two = vec![Instant::number(at(500), 1.0), Instant::number(at(700), 2.0)];
        sender.send_batch(two).await.unwrap();
        sender.release_clock(release).await.unwrap();
        let event = tokio::time::timeout(Duration::from_secs(30), handle.next())
            .await
            .expect("the window within 30 s of the release")
            .expect("an event");
        let event = window(event);
        assert_eq!(
            (&event["value"], &event["count"], event.get("late")),
            (&3.into(), &2.into(), None),
            "{event}"
        );
        drop(sender);
        let (rest, _) = collect(handle).await;
        assert!(rest.is_empty(), "{rest:?}");
    }
}

/// The reference job as an engine that transforms (host windows) or
/// aggregates; no progress timeout, since paused time runs ahead of a job
/// that takes real time to start.
fn reference(framing: Framing, aggregates: bool) -> BridgeEngine {
    let mut options = BridgeOptions::new("reference", vec!["python3".into(), reference_job()]);
    options.framing = framing;
    options.aggregates = aggregates;
    options.no_progress_timeout = None.into();
    BridgeEngine::new(options)
}

#[tokio::test(start_paused = true)]
async fn a_live_local_window_closes_on_the_clock_without_a_later_record() {
    closes_on_time(&LocalEngine::new(), 0).await;
}

#[tokio::test(start_paused = true)]
async fn grace_delays_a_live_local_window_by_that_many_seconds() {
    closes_on_time(&LocalEngine::new(), 2).await;
}

#[tokio::test(start_paused = true)]
async fn the_clock_closes_a_live_local_window_exactly_at_its_end_plus_grace() {
    let clock = clock_at(250);
    let began = Tick::now();
    let body = r#"{"aggregation":"COUNT","window":{"type":"HOPPING","size":2,"unit":"SECONDS","hop":1,"hopUnit":"SECONDS"},"grace":1}"#;
    let (sender, mut handle) = start(&LocalEngine::new(), live_spec(body, clock)).await;
    sender.send(Instant::number(at(250), 1.0)).await.unwrap();
    // Windows [-1 s, 1 s) and [0 s, 2 s) hold it: due at 2 s and 3 s.
    for due in [2000, 3000] {
        let event = window(handle.next().await.unwrap());
        assert_eq!(event["count"], 1, "{event}");
        assert_eq!(began.elapsed(), Duration::from_millis(due - 250));
    }
    drop(sender);
    assert!(handle.next().await.is_none());
}

#[tokio::test(start_paused = true)]
async fn a_live_count_window_does_not_close_on_the_clock() {
    let body = r#"{"aggregation":"COUNT","window":{"type":"COUNT","size":3}}"#;
    let (sender, mut handle) = start(&LocalEngine::new(), live_spec(body, clock_at(0))).await;
    let two = vec![Instant::number(at(0), 1.0), Instant::number(at(100), 2.0)];
    sender.send_batch(two).await.unwrap();
    let waited = tokio::time::timeout(Duration::from_secs(3600), handle.next()).await;
    assert!(waited.is_err(), "a COUNT window closed on the clock");
    drop(sender);
    let event = window(handle.next().await.unwrap());
    assert_eq!(
        (&event["count"], &event["partial"]),
        (&2.into(), &true.into())
    );
}

#[tokio::test(start_paused = true)]
async fn a_query_that_is_not_live_closes_windows_on_records_alone() {
    let mut spec = live_spec(&tumbling(0), clock_at(0));
    spec.clock = None;
    let (sender, mut handle) = start(&LocalEngine::new(), spec).await;
    sender.send(Instant::number(at(0), 1.0)).await.unwrap();
    let waited = tokio::time::timeout(Duration::from_secs(3600), handle.next()).await;
    assert!(
        waited.is_err(),
        "a window closed on the clock of a file query"
    );
    sender.send(Instant::number(at(1000), 2.0)).await.unwrap();
    assert_eq!(window(handle.next().await.unwrap())["value"], 1);
}

#[tokio::test(start_paused = true)]
async fn a_live_window_over_a_value_jobs_answers_closes_on_the_clock_after_its_answers() {
    closes_on_time(&reference(Framing::Value, false), 0).await;
}

#[tokio::test(start_paused = true)]
async fn grace_delays_a_live_window_over_a_value_jobs_answers() {
    closes_on_time(&reference(Framing::Value, false), 2).await;
}

#[tokio::test(start_paused = true)]
async fn a_job_that_aggregates_closes_a_live_window_on_a_watermark_line() {
    closes_on_time(&reference(Framing::Json, true), 0).await;
}

#[tokio::test(start_paused = true)]
async fn grace_delays_a_live_window_of_a_job_that_aggregates() {
    closes_on_time(&reference(Framing::Json, true), 2).await;
}

#[tokio::test(start_paused = true)]
async fn a_live_window_over_an_in_process_plugins_outputs_closes_on_the_clock() {
    let dir = TempDir::new("on-time-plugin");
    let scale = plugin_library("mfstream-plugin-scale");
    let registry = registry(&dir, &entry(&scale));
    let engine = registry.get("scale").unwrap();
    closes_on_time(engine.as_ref(), 0).await;
    tokio::time::pause(); // the first query's end resumed it
    closes_on_time(engine.as_ref(), 1).await;
}

/// Real time: a `json` job's answers cannot be paired with its inputs, so
/// the clock applies once the job has settled (read everything, quiet for
/// a moment). An isolated plugin is such a job.
#[tokio::test]
async fn a_live_window_over_an_isolated_plugins_outputs_closes_once_the_job_settled() {
    let dir = TempDir::new("on-time-isolated");
    let scale = plugin_library("mfstream-plugin-scale");
    let registry = isolating_registry(&dir, &isolated(&scale));
    let engine: Arc<dyn StreamEngine> = registry.get("scale").unwrap();
    json_transform_closes_on_time(engine.as_ref()).await;
    json_transform_closes_on_time(&reference(Framing::Json, false)).await;
}

async fn json_transform_closes_on_time(engine: &dyn StreamEngine) {
    let now = SystemTime::now();
    let spec = live_spec(&tumbling(0), WallClock::starting_at(now));
    let (sender, mut handle) = start(engine, spec).await;
    sender
        .send_batch(vec![
            Instant::number(rfc3339(now), 1.0),
            Instant::number(rfc3339(now), 2.0),
        ])
        .await
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(30), handle.next())
        .await
        .expect("the window within 30 s, without a later record")
        .expect("an event");
    let event = window(event);
    assert_eq!(
        (&event["value"], &event["count"]),
        (&3.into(), &2.into()),
        "{event}"
    );
    drop(sender);
    let (rest, _) = collect(handle).await;
    assert!(rest.is_empty(), "{rest:?}");
}

/// The Flink job computes the windows (`aggregates = true`): the host's
/// watermark line closes the live window, the grace delays it, and a record
/// in it after that is late, as on `local`.
#[tokio::test(start_paused = true)]
#[ignore = "needs flink: eval \"$(jobs/flink/setup.sh)\""]
async fn a_flink_job_closes_a_live_window_on_the_hosts_watermark_line() {
    let argv = crate::runtimes::runtime_command("MFAPI_FLINK_CMD", "jobs/flink/setup.sh");
    let mut options = BridgeOptions::new("flink", argv);
    options.framing = Framing::Json;
    options.aggregates = true;
    options.no_progress_timeout = None.into();
    let flink = BridgeEngine::new(options);
    closes_on_time(&flink, 1).await;
}

/// A value job's answer with no result (`!`, protocol 2) ends its record
/// like an answer: the mark after it applies, and the window closes on the
/// clock without a later record.
#[tokio::test(start_paused = true)]
async fn a_live_window_closes_on_the_clock_after_a_record_the_job_found_no_result_for() {
    let mut options = BridgeOptions::new("reference", vec!["python3".into(), reference_job()]);
    options.protocol = 2.into();
    options.no_progress_timeout = None.into();
    let engine = BridgeEngine::new(options);
    let body = r#"{"operation":"ln","aggregation":"SUM","window":{"type":"TUMBLING","size":1,"unit":"SECONDS"}}"#;
    let (sender, mut handle) = start(&engine, live_spec(body, clock_at(500))).await;
    // ln 1 = 0, then ln 0: no result, skipped.
    let two = vec![Instant::number(at(500), 1.0), Instant::number(at(700), 0.0)];
    sender.send_batch(two).await.unwrap();
    // Paused time runs ahead of the job's real start: the bound is real
    // time, on a thread (only a bound: the test waits for the event).
    let (bound, expired) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(60));
        let _ = bound.send(());
    });
    let event = tokio::select! {
        event = handle.next() => event.expect("an event"),
        _ = expired => panic!("no window on the clock in 60 s: the mark after a record with no result never applied"),
    };
    let event = window(event);
    assert_eq!(
        (
            event["value"].as_f64(),
            &event["count"],
            event.get("partial")
        ),
        (Some(0.0), &serde_json::json!(1), None),
        "{event}"
    );
    tokio::time::resume();
    drop(sender);
    let (rest, _) = collect(handle).await;
    assert!(rest.is_empty(), "{rest:?}");
}

/// A position job's answers pair with its records: the clock's mark
/// waits for them however long the job holds one, where a settle rule
/// would close the window without it and count it late. This job holds
/// each record's answer until its next input line (or its end), and says
/// when it holds the second record's through a FIFO; only then does the
/// (paused) clock run.
#[tokio::test(start_paused = true)]
async fn a_live_window_over_a_position_jobs_answers_waits_for_an_answer_held_back() {
    let dir = TempDir::new("on-time-held");
    let fifo = dir.join("held");
    let path = std::ffi::CString::new(fifo.display().to_string()).unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    // The answer to `position` is the instant itself: the line echoed.
    let job = "import os, sys\nheld = None\nfor n, line in enumerate(sys.stdin, 1):\n    \
               if held:\n        sys.stdout.write(held)\n        sys.stdout.flush()\n    \
               held = line\n    \
               if n == 2:\n        with open(os.environ['HELD_FIFO'], 'w') as f:\n            \
               f.write('held')\n\
               if held:\n    sys.stdout.write(held)\n";
    let mut options =
        BridgeOptions::new("positions", vec!["python3".into(), "-c".into(), job.into()]);
    options.framing = Framing::Json;
    options.protocol = 2.into();
    options.positions = true;
    options.no_progress_timeout = None.into();
    options
        .env
        .push(("HELD_FIFO".into(), fifo.display().to_string()));
    let engine = BridgeEngine::new(options);
    let body = r#"{"aggregation":"COUNT","window":{"type":"TUMBLING","size":1,"unit":"SECONDS"},"crs":"EPSG:3857"}"#;
    let mut spec = Registration::from_json(body)
        .unwrap()
        .into_spec("tgsequence", PropertyType::TGeomPoint)
        .unwrap()
        .live_on(clock_at(500));
    spec.id = "q".into();
    let (sender, mut handle) = start(&engine, spec).await;
    let point = |millis, x| Instant {
        datetime: at(millis),
        value: mfstream_model::Value::Point(mfstream_model::Point::new(x, 0.0)),
    };
    sender
        .send_batch(vec![point(500, 1.0), point(700, 2.0)])
        .await
        .unwrap();
    // A blocking task holds the paused clock until the job holds.
    let said = tokio::task::spawn_blocking(move || std::fs::read_to_string(fifo))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(said, "held");
    // Seconds past the window's end: still open, the second answer held.
    let waited = tokio::time::timeout(Duration::from_secs(5), handle.next()).await;
    assert!(
        waited.is_err(),
        "the window closed without its held answer: {waited:?}"
    );
    // The end of its input releases it: the window, whole, none late.
    tokio::time::resume();
    drop(sender);
    let (events, status) = collect(handle).await;
    assert_eq!(status, mfstream_model::QueryStatus::Completed);
    let events: Vec<_> = events.into_iter().map(window).collect();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        (
            &events[0]["count"],
            events[0].get("late"),
            events[0].get("partial")
        ),
        (&serde_json::json!(2), None, None),
        "{}",
        events[0]
    );
}

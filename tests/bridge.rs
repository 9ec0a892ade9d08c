//! The generic subprocess bridge: the protocol, and jobs that misbehave.

use std::time::Duration;

use mfstream_engine::{BridgeEngine, BridgeOptions, Framing, RestartPolicy};
use mfstream_engine::{EngineError, Serves, Source, StreamEngine};
use mfstream_model::{PropertyType, QueryStatus, Registration, Value};

use crate::util::*;

/// Long enough for any process to die after SIGKILL; reached only on failure.
const GONE: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn value_framing_pairs_every_output_with_its_input_datetime() {
    let input = instants(20_000);
    let handle = submit(sh_options("echo.sh"), echo_spec(), input.clone()).await;
    let (events, status) = collect(handle).await;
    assert_eq!(status, QueryStatus::Completed);
    assert_eq!(events.len(), input.len());
    for (event, instant) in events.iter().zip(&input) {
        assert_eq!(event.datetime(), instant.datetime);
        assert_eq!(event.value(), &instant.value);
    }
}

#[tokio::test]
async fn the_reference_job_applies_the_operation_in_both_framings() {
    for framing in [Framing::Value, Framing::Json] {
        let mut options = BridgeOptions::new("reference", vec!["python3".into(), reference_job()]);
        options.framing = framing;
        let spec = mfstream_model::QuerySpec::transform(
            "speed",
            mfstream_model::ops::Transform::new("div", Some(4.0)).unwrap(),
        );
        let handle = submit(options, spec, instants(3)).await;
        let (events, status) = collect(handle).await;
        assert_eq!(status, QueryStatus::Completed, "{framing:?}");
        let values: Vec<&Value> = events.iter().map(|e| e.value()).collect();
        assert_eq!(
            values,
            [
                &Value::Number(0.25),
                &Value::Number(0.5),
                &Value::Number(0.75)
            ]
        );
        assert_eq!(events[2].datetime(), instants(3)[2].datetime);
    }
}

#[tokio::test]
async fn unparsable_output_fails_query_with_line_number() {
    let input = instants(10);
    let handle = submit(sh_options("garbage.sh"), echo_spec(), input.clone()).await;
    let (events, status) = collect(handle).await;
    let reason = failure(&status);
    assert!(
        reason.contains("line 3") && reason.contains("not-a-number"),
        "{reason}"
    );
    // The answers before the bad line keep their own datetimes; none after it
    // is delivered, so nothing is paired with the wrong timestamp.
    assert_eq!(events.len(), 2);
    assert_eq!(events[1].datetime(), input[1].datetime);
}

#[tokio::test]
async fn a_job_that_exits_non_zero_fails_with_its_stderr() {
    let handle = submit(sh_options("fail.sh"), echo_spec(), instants(5)).await;
    let (_, status) = collect(handle).await;
    let reason = failure(&status);
    assert!(reason.contains("exited with status 3"), "{reason}");
    assert!(
        reason.contains("boom: the job failed on purpose"),
        "{reason}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_flooding_stderr_never_blocks_the_bridge() {
    let handle = submit(sh_options("flood_stderr.sh"), echo_spec(), instants(200)).await;
    let (events, status) = collect(handle).await;
    assert_eq!(status, QueryStatus::Completed);
    assert_eq!(events.len(), 200);
}

#[tokio::test]
async fn a_hung_job_is_stopped_and_its_status_says_stopped() {
    let handle = submit(sh_options("hang.sh"), echo_spec(), instants(5)).await;
    handle.stop();
    assert_eq!(handle.wait().await, QueryStatus::Stopped);
}

#[tokio::test]
async fn a_silent_job_fails_after_the_no_progress_timeout() {
    let mut options = sh_options("hang.sh");
    options.no_progress_timeout = Some(Duration::from_millis(300)).into();
    let handle = submit(options, echo_spec(), instants(5)).await;
    let (_, status) = collect(handle).await;
    let reason = failure(&status);
    assert!(
        reason.contains("no progress") && reason.contains("5 records waited"),
        "{reason}"
    );
}

#[tokio::test]
async fn a_job_ignoring_sigterm_is_killed_after_the_grace_period() {
    let dir = TempDir::new("ignore-term");
    let pid_file = dir.join("pid");
    let mut options = sh_options("ignore_term.sh");
    options.argv = vec![
        "sh".into(),
        "-c".into(),
        format!(
            "echo $$ > {}; exec sh {} \"$@\"",
            pid_file.display(),
            job("ignore_term.sh")
        ),
        "job".into(),
    ];
    let mut handle = submit(options, echo_spec(), instants(3)).await;
    // The first answer proves the job is up (and has written its pid).
    assert!(handle.next().await.is_some());
    let pid = read_pid(&pid_file);
    let status = handle.stop_and_wait().await;
    assert_eq!(status, QueryStatus::Stopped);
    assert!(wait_gone(pid, GONE), "the job survived SIGKILL");
}

#[tokio::test]
async fn a_job_that_never_exits_after_its_input_ends_fails_and_is_killed() {
    let handle = submit(sh_options("ignore_term.sh"), echo_spec(), instants(3)).await;
    let (events, status) = collect(handle).await;
    assert_eq!(events.len(), 3);
    let reason = failure(&status);
    assert!(reason.contains("did not exit"), "{reason}");
}

#[tokio::test]
async fn a_forked_child_dies_with_its_job_on_stop() {
    let dir = TempDir::new("fork");
    let pid_file = dir.join("child");
    let mut options = sh_options("fork_child.sh");
    options
        .env
        .push(("CHILD_PID_FILE".into(), pid_file.display().to_string()));
    let mut handle = submit(options, echo_spec(), instants(3)).await;
    assert!(handle.next().await.is_some());
    let child = read_pid(&pid_file);
    assert_eq!(handle.stop_and_wait().await, QueryStatus::Stopped);
    assert!(wait_gone(child, GONE), "the forked child survived the stop");
}

#[tokio::test]
async fn a_job_that_buffers_its_answers_completes_within_the_window() {
    // The Go original deadlocks here once 1,024 records are unanswered.
    let handle = submit(sh_options("block_answers.sh"), echo_spec(), instants(5_000)).await;
    let (events, status) = collect(handle).await;
    assert_eq!(status, QueryStatus::Completed);
    assert_eq!(events.len(), 5_000);
}

#[tokio::test]
async fn a_full_window_with_a_silent_job_is_reported_not_a_silent_hang() {
    let mut options = sh_options("block_answers.sh");
    options.max_in_flight = 100.into();
    options.no_progress_timeout = Some(Duration::from_millis(300)).into();
    let handle = submit(options, echo_spec(), instants(1_000)).await;
    let (events, status) = collect(handle).await;
    assert!(events.is_empty());
    let reason = failure(&status);
    assert!(reason.contains("100 records waited"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_job_is_fed_the_records_it_had_not_answered() {
    let dir = TempDir::new("restart");
    let mut options = sh_options("crash_after.sh");
    options.env.push(("CRASH_AFTER".into(), "3".into()));
    options.env.push((
        "CRASH_MARKER".into(),
        dir.join("crashed").display().to_string(),
    ));
    options.restart = Some(RestartPolicy {
        max_restarts: 2,
        backoff: Duration::from_millis(1),
        backoff_max: Duration::from_millis(10),
    });
    let input = instants(10);
    let mut handle = BridgeEngine::new(options)
        .submit(echo_spec(), Source::from_instants(input.clone()))
        .await
        .unwrap();
    let mut events = Vec::new();
    while let Some(event) = handle.next().await {
        events.push(event);
    }
    assert_eq!(handle.status(), QueryStatus::Completed);
    assert_eq!(handle.progress().restarts, 1);
    // Every record exactly once, in order, with its own datetime.
    let got: Vec<(&str, &Value)> = events.iter().map(|e| (e.datetime(), e.value())).collect();
    let want: Vec<(&str, &Value)> = input
        .iter()
        .map(|i| (i.datetime.as_str(), &i.value))
        .collect();
    assert_eq!(got, want);
}

#[tokio::test]
async fn without_a_restart_policy_a_crash_fails_the_query() {
    let dir = TempDir::new("no-restart");
    let mut options = sh_options("crash_after.sh");
    options.env.push((
        "CRASH_MARKER".into(),
        dir.join("crashed").display().to_string(),
    ));
    let handle = submit(options, echo_spec(), instants(10)).await;
    let (events, status) = collect(handle).await;
    assert_eq!(events.len(), 3);
    assert!(failure(&status).contains("exited with status 1"));
}

#[tokio::test]
async fn a_job_answering_too_few_records_fails_saying_how_many() {
    let mut options = sh_options("echo.sh");
    // `sh -c` takes the appended operation as $0 and $1, so `head` reads stdin.
    let spec = mfstream_model::QuerySpec::transform(
        "speed",
        mfstream_model::ops::Transform::new("abs", None).unwrap(),
    );
    options.argv = vec!["sh".into(), "-c".into(), "head -n 2".into()];
    let handle = submit(options, spec, instants(5)).await;
    let (events, status) = collect(handle).await;
    assert_eq!(events.len(), 2);
    let reason = failure(&status);
    assert!(reason.contains("answering 2 of 5 records"), "{reason}");
}

#[tokio::test]
async fn a_command_that_does_not_exist_is_an_error_at_submit() {
    let options = BridgeOptions::new("missing", vec!["/nonexistent/mfstream-job".into()]);
    let error = BridgeEngine::new(options)
        .submit(echo_spec(), Source::from_instants(instants(1)))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("/nonexistent/mfstream-job"), "{error}");
}

#[tokio::test]
async fn the_job_gets_its_arguments_the_query_and_the_library_path() {
    let dir = TempDir::new("env");
    let dump = dir.join("env");
    let mut options = sh_options("env_dump.sh");
    options
        .env
        .push(("ENV_DUMP_FILE".into(), dump.display().to_string()));
    options.libpath = Some("/opt/meos/lib".into());
    let mut spec = echo_spec();
    spec.id = "q7".into();
    let (_, status) = collect(submit(options, spec, instants(1)).await).await;
    assert_eq!(status, QueryStatus::Completed);
    let text = std::fs::read_to_string(&dump).unwrap();
    assert!(text.contains("/opt/meos/lib"), "{text}");
    assert!(
        text.contains(r#""id":"q7""#) && text.contains(r#""operation":"mul""#),
        "{text}"
    );
    assert!(text.contains("mul 1"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_handle_stops_the_job() {
    let dir = TempDir::new("drop");
    let pid_file = dir.join("child");
    let mut options = sh_options("fork_child.sh");
    options
        .env
        .push(("CHILD_PID_FILE".into(), pid_file.display().to_string()));
    let mut handle = submit(options, echo_spec(), instants(3)).await;
    assert!(handle.next().await.is_some());
    let child = read_pid(&pid_file);
    drop(handle);
    assert!(
        wait_gone(child, GONE),
        "a dropped query left its job running"
    );
}

#[tokio::test]
async fn json_framed_answers_are_read_back_to_the_same_bits() {
    // serde_json's default float parser can be one unit in the last place
    // off: 12.390536734905753 read back as 12.390536734905751.
    let mut options = BridgeOptions::new("reference", vec!["python3".into(), reference_job()]);
    options.framing = Framing::Json;
    let spec = mfstream_model::QuerySpec::transform(
        "speed",
        mfstream_model::ops::Transform::new("div", Some(4.0)).unwrap(),
    );
    let mut input = instants(1);
    input[0].value = Value::Number(49.56214693962301);
    let (events, status) = collect(submit(options, spec, input).await).await;
    assert_eq!(status, QueryStatus::Completed);
    assert_eq!(events[0].value(), &Value::Number(49.56214693962301 / 4.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_submitted_from_a_thread_that_exits_outlives_the_thread() {
    let runtime = tokio::runtime::Handle::current();
    let (sender, source) = Source::channel(4);
    let submitter = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let engine = BridgeEngine::new(sh_options("echo.sh"));
        let handle = runtime.block_on(engine.submit(echo_spec(), source));
        (tid, handle.expect("the job starts"))
    });
    let (tid, mut handle) = tokio::task::spawn_blocking(move || submitter.join().unwrap())
        .await
        .unwrap();
    // The thread has gone from the kernel's table, so a parent-death signal
    // tied to it has been sent.
    let task = std::path::PathBuf::from(format!("/proc/self/task/{tid}"));
    eventually(
        "the submitting thread gone",
        GONE,
        async || task.exists(),
        |exists| !exists,
    )
    .await;
    sender
        .send(mfstream_model::Instant::number("after", 7.0))
        .await
        .unwrap();
    let event = handle.next().await.expect("the job still answers");
    assert_eq!(
        (event.datetime(), event.value()),
        ("after", &Value::Number(7.0))
    );
    drop(sender);
    assert!(handle.next().await.is_none());
    assert_eq!(handle.status(), QueryStatus::Completed);
}

/// Options for a `json` job run as `sh -c SCRIPT`, failing after 300 ms
/// without progress.
fn json_sh(script: &str) -> BridgeOptions {
    let mut options = sh_options("echo.sh");
    options.argv = vec!["sh".into(), "-c".into(), script.into()];
    options.framing = Framing::Json;
    options.no_progress_timeout = Some(Duration::from_millis(300)).into();
    options
}

#[tokio::test]
async fn a_json_job_that_stops_reading_fails_after_the_no_progress_timeout() {
    let engine = BridgeEngine::new(json_sh("exec sleep 100000"));
    let (sender, source) = Source::channel(8);
    let handle = engine.submit(echo_spec(), source).await.unwrap();
    for instant in instants(5) {
        sender.send(instant).await.unwrap();
    }
    let (_, status) = collect(handle).await;
    let reason = failure(&status);
    assert!(
        reason.contains("neither read its input nor wrote anything")
            && reason.contains("5 records waited"),
        "{reason}"
    );
}

#[tokio::test]
async fn a_json_job_that_neither_writes_nor_exits_after_its_input_fails_after_the_timeout() {
    let handle = submit(
        json_sh("cat >/dev/null; exec sleep 100000"),
        echo_spec(),
        instants(5),
    )
    .await;
    let (_, status) = collect(handle).await;
    let reason = failure(&status);
    assert!(
        reason.contains("wrote nothing and did not exit") && reason.contains("end of its input"),
        "{reason}"
    );
}

#[tokio::test]
async fn a_json_job_that_reads_everything_may_stay_silent_past_the_timeout() {
    // It reads its five records, then says nothing for longer than the
    // timeout, as a job that filters or buffers may.
    let script = "head -n 5 >/dev/null; sleep 1; \
                  echo '{\"datetime\":\"late\",\"value\":1}'; cat >/dev/null";
    let engine = BridgeEngine::new(json_sh(script));
    let (sender, source) = Source::channel(8);
    let mut handle = engine.submit(echo_spec(), source).await.unwrap();
    for instant in instants(5) {
        sender.send(instant).await.unwrap();
    }
    let event = handle.next().await;
    assert_eq!(
        event.as_ref().map(|e| e.datetime()),
        Some("late"),
        "{:?}",
        handle.status()
    );
    drop(sender);
    assert!(handle.next().await.is_none());
    assert_eq!(handle.status(), QueryStatus::Completed);
}

#[test]
fn jobs_fail_after_two_minutes_without_progress_by_default() {
    let options = BridgeOptions::new("x", vec!["job".into()]);
    assert_eq!(*options.no_progress_timeout, Some(Duration::from_secs(120)));
}

#[tokio::test]
async fn records_a_job_has_not_answered_count_in_the_querys_state_budget() {
    // A job that reads everything and never answers: 20,000 records in
    // flight are about 2 MiB, over a budget of 1 MiB.
    let mut options = sh_options("hang.sh");
    options.max_in_flight = 1_000_000.into();
    let budget = std::sync::Arc::new(mfstream_model::budget::StateBudget::new(1 << 20));
    let (sender, source) = Source::budgeted(4, budget.clone());
    let handle = BridgeEngine::new(options)
        .submit(echo_spec().with_budget(budget), source)
        .await
        .expect("the job starts");
    let feed = tokio::spawn(async move {
        for batch in instants(20_000).chunks(1000) {
            if sender.send_batch(batch.to_vec()).await.is_err() {
                break;
            }
        }
    });
    let status = tokio::time::timeout(Duration::from_secs(20), handle.wait())
        .await
        .expect("the query ends");
    let reason = failure(&status);
    assert!(
        reason.starts_with("query state reached the embedding program's max_query_state (1 MiB)"),
        "{reason}"
    );
    feed.await.unwrap();
}

#[tokio::test]
async fn a_bridge_engine_without_positions_refuses_a_position_query_naming_the_field() {
    let engine = BridgeEngine::new(sh_options("echo.sh"));
    assert!(!engine.describe().serves.contains(Serves::POSITIONS));
    let spec = Registration::from_json(r#"{"operation":"speed","type":"TGeogPoint"}"#)
        .unwrap()
        .into_spec("tgsequence", PropertyType::TGeogPoint)
        .unwrap();
    let (_sender, source) = Source::channel(1);
    let Err(EngineError::InvalidQuery(e)) = engine.submit(spec, source).await else {
        panic!("a position query was accepted");
    };
    assert_eq!(e.field, "engine");
    assert!(
        e.message.contains("does not serve TGeogPoint queries"),
        "{e}"
    );
}

//! Apache Beam (jobs/beam/): the Python SDK pipeline in the FnApiRunner.

use mfstream_engine::BridgeOptions;
use mfstream_engine::{Source, StreamEngine};
use mfstream_model::QueryStatus;
use mfstream_model::ops::{Kind, Op};

use super::*;
use crate::util::*;

/// Points the job's TMPDIR at a fresh folder, to see what it leaves there.
fn watch_tmp(options: &mut BridgeOptions, name: &str) -> TempDir {
    let dir = TempDir::new(name);
    options
        .env
        .push(("TMPDIR".into(), dir.path().display().to_string()));
    dir
}

/// Beam makes a temporary folder per pipeline; the job removes it however
/// it ends (completed, failed, stopped).
fn assert_no_temp_files(dir: &TempDir, what: &str) {
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "{what}: left in TMPDIR: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs beam: eval \"$(jobs/beam/setup.sh)\""]
async fn every_operation_on_beam_gives_the_local_results_in_order_and_leaves_no_process() {
    let input = positive(500);
    for op in Op::on(Kind::Number) {
        let (mut options, marked) = runtime("beam");
        let tmp = watch_tmp(&mut options, &format!("beam-{op}"));
        let spec = transform(op);
        let local = local(spec.clone(), input.clone()).await;
        let (events, status, seen) = run_watched(options, &marked, spec, input.clone()).await;
        assert_eq!(status, QueryStatus::Completed, "beam {op}");
        // Python's math and Rust's f64 both call the C library: the same bits.
        assert_matches(&format!("beam {op}"), &local, &events, 0);
        assert_gone(&seen, &format!("beam {op}"));
        assert_no_temp_files(&tmp, &format!("beam {op}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs beam: eval \"$(jobs/beam/setup.sh)\""]
async fn a_beam_query_stopped_midway_leaves_nothing_behind() {
    let (mut options, marked) = runtime("beam");
    let tmp = watch_tmp(&mut options, "beam-stop");
    let (sender, source) = Source::channel(16);
    let mut handle = mfstream_engine::BridgeEngine::new(options)
        .submit(transform(Op::Mul), source)
        .await
        .expect("the job starts");
    sender.send_batch(positive(3)).await.unwrap();
    first_event(&mut handle).await;
    let seen = marked.processes();
    // The source stays open: the job is mid-stream when it is stopped.
    assert_eq!(handle.stop_and_wait().await, QueryStatus::Stopped);
    drop(sender);
    assert_gone(&seen, "a stopped beam query");
    assert_no_temp_files(&tmp, "a stopped beam query");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs beam: eval \"$(jobs/beam/setup.sh)\""]
async fn a_domain_error_on_beam_is_skipped_by_default_or_fails_the_query() {
    let (mut options, _) = runtime("beam");
    let tmp = watch_tmp(&mut options, "beam-domain");
    let input = values(&[4.0, 1.0, 0.0, 2.0]);
    // The job speaks protocol 2 (engines.toml): it answers the record with
    // an error line; skipped by default.
    assert_eq!(*options.protocol, 2);
    let engine = mfstream_engine::BridgeEngine::new(options.clone());
    check_skipped(&engine, transform(Op::Ln), &input, &[0, 1, 3]).await;
    let fail = transform(Op::Ln).on_error(mfstream_model::OnError::Fail);
    let handle = submit(options.clone(), fail.clone(), input.clone()).await;
    let (events, status) = collect(handle).await;
    let reason = failure(&status);
    let expected = format!(
        "record at {}: the job found no result: ln is defined for positive values only",
        input[2].datetime
    );
    assert!(reason.contains(&expected), "{reason}");
    // As a version-1 job (no MFSTREAM_PROTOCOL), it fails in its own words.
    let mut v1 = options;
    v1.protocol = 1.into();
    v1.argv
        .splice(0..0, ["env".to_owned(), "MFSTREAM_PROTOCOL=1".to_owned()]);
    let (_, status) = collect(submit(v1, fail, input).await).await;
    let reason = failure(&status);
    assert!(
        reason.contains("line 3: ln is defined for positive values only"),
        "{reason}"
    );
    assert_eq!(events.len(), 2, "the answers before the bad line arrive");
    assert_no_temp_files(&tmp, "a failed beam query");
}

#[test]
#[ignore = "needs beam: eval \"$(jobs/beam/setup.sh)\""]
fn mfstream_run_on_beam_prints_what_local_prints() {
    runtime("beam");
    const VAR: &str = "MFAPI_BEAM_CMD";
    check_cli_matches_local("beam", VAR, &std::env::var(VAR).unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs beam: eval \"$(jobs/beam/setup.sh)\""]
async fn beam_speaks_json_framing_too() {
    let (mut options, _) = runtime("beam");
    options.framing = mfstream_engine::Framing::Json;
    let input = positive(300);
    let spec = transform(Op::Div);
    let local = local(spec.clone(), input.clone()).await;
    let (events, status) = collect(submit(options, spec, input).await).await;
    assert_eq!(status, QueryStatus::Completed);
    assert_matches("beam div, json framing", &local, &events, 0);
}

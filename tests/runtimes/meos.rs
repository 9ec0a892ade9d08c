//! MEOS (jobs/meos/): MobilityDB's C library applies the operations,
//! loaded through the engine's library path.

use mfstream_engine::{Source, StreamEngine};
use mfstream_model::QueryStatus;
use mfstream_model::ops::{Kind, Op};

use super::*;
use crate::util::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the meos job: eval \"$(jobs/meos/setup.sh)\""]
async fn every_meos_operation_gives_the_local_results_in_order_and_leaves_no_process() {
    let input = positive(2_000);
    // The operations MEOS computes: an entry may have no `meos`.
    for op in Op::on(Kind::Number).filter(|op| op.entry().meos.is_some()) {
        let (options, marked) = runtime("meos");
        let spec = transform(op);
        let local = local(spec.clone(), input.clone()).await;
        let (events, status, seen) = run_watched(options, &marked, spec, input.clone()).await;
        assert_eq!(status, QueryStatus::Completed, "meos {op}");
        let ulps = match op {
            Op::Degrees => DEGREES_ULPS,
            Op::Tan => TAN_ULPS,
            _ => 0,
        };
        assert_matches(&format!("meos {op}"), &local, &events, ulps);
        assert_gone(&seen, &format!("meos {op}"));
    }
}

/// MEOS rounds twice in `degrees` (`x * 180.0 / M_PI`), Rust once
/// (`x * (180.0 / PI)`): about one value in nine is one unit in the last
/// place apart.
const DEGREES_ULPS: u64 = 1;

/// MEOS has no tangent: the job's `tan` is `pg_dsin(x) / pg_dcos(x)`, three
/// roundings where libm's `tan` has one. On these 2,000 inputs 643 are
/// 1 ulp from libm's and one (341) is 2 ulps. `sin` and `cos` (`pg_dsin`,
/// `pg_dcos`) give libm's bits, as do the others but `degrees`.
const TAN_ULPS: u64 = 2;

/// Runs `op` over `input` on the meos engine three ways: skipped (the
/// records at `kept` answered, the others counted), failing under bridge
/// protocol 2 (the host names the bad record's datetime and the job's
/// message, `v2`), and failing as a version-1 job, in its own words (`v1`,
/// naming the line). `answered` answers arrive before each failure.
async fn check_no_result(op: Op, input: &[Instant], kept: &[usize], v2: &str, v1: &str) {
    let (options, _) = runtime("meos");
    // The job speaks protocol 2 (engines.toml).
    assert_eq!(*options.protocol, 2);
    let engine = mfstream_engine::BridgeEngine::new(options.clone());
    check_skipped(&engine, transform(op), input, kept).await;
    let bad = (0..input.len())
        .find(|i| !kept.contains(i))
        .expect("a bad record");
    let fail = transform(op).on_error(mfstream_model::OnError::Fail);
    let (events, status) =
        collect(submit(options.clone(), fail.clone(), input.to_vec()).await).await;
    let reason = failure(&status);
    let expected = format!(
        "record at {}: the job found no result: {v2}",
        input[bad].datetime
    );
    assert!(reason.contains(&expected), "{op}: {reason}");
    assert_eq!(
        events.len(),
        bad,
        "{op}: the answers before the bad record arrive"
    );
    // As a version-1 job (no error lines), it fails in its own words.
    let mut old = options;
    old.protocol = 1.into();
    old.argv
        .splice(0..0, ["env".to_owned(), "MFSTREAM_PROTOCOL=1".to_owned()]);
    let (events, status) = collect(submit(old, fail, input.to_vec()).await).await;
    let reason = failure(&status);
    assert!(reason.contains(v1), "{op} (version 1): {reason}");
    assert_eq!(
        events.len(),
        bad,
        "{op} (version 1): the answers before the bad line"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the meos job: eval \"$(jobs/meos/setup.sh)\""]
async fn sin_cos_and_tan_of_an_infinity_on_meos_have_no_result_with_meos_message() {
    for op in [Op::Sin, Op::Cos, Op::Tan] {
        let input = values(&[0.5, f64::INFINITY, 2.0]);
        let name = op.name();
        let message = format!("{name} of inf: input is out of range (MEOS error 3)");
        check_no_result(op, &input, &[0, 2], &message, &format!("line 2: {message}")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the meos job: eval \"$(jobs/meos/setup.sh)\""]
async fn a_domain_error_on_meos_has_no_result_with_meos_message() {
    let input = values(&[4.0, 1.0, -2.0, 2.0]);
    let message = "log10 of -2.0: Cannot take logarithm of zero or a negative number";
    check_no_result(
        Op::Log10,
        &input,
        &[0, 1, 3],
        message,
        &format!("line 3: {message}"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the meos job: eval \"$(jobs/meos/setup.sh)\""]
async fn an_exp_that_would_end_meos_itself_is_a_record_with_no_result() {
    // MEOS's exp overflow bypasses the error handler and exits the process:
    // under protocol 2 the job asks libm first; as a version-1 job MEOS ends
    // it and the job names the line under MEOS's message.
    let input = values(&[1.0, 1000.0, 2.0]);
    check_no_result(
        Op::Exp,
        &input,
        &[0, 2],
        "exp of 1000.0: value out of range: overflow (MEOS)",
        "line 2: MEOS ended the process computing exp of 1000",
    )
    .await;
    // An underflow too (`local` gives 0 there): in the catalogue's domain,
    // so a version-1 job's host guard let it through, and MEOS ended the job.
    let input = values(&[1.0, -745.2, 2.0]);
    check_no_result(
        Op::Exp,
        &input,
        &[0, 2],
        "exp of -745.2: value out of range: underflow (MEOS)",
        "line 2: MEOS ended the process computing exp of -745.2",
    )
    .await;
    let (options, _) = runtime("meos");
    let mut old = options;
    old.protocol = 1.into();
    old.argv
        .splice(0..0, ["env".to_owned(), "MFSTREAM_PROTOCOL=1".to_owned()]);
    let (_, status) = collect(submit(old, transform(Op::Exp), input).await).await;
    let reason = failure(&status);
    assert!(reason.contains("value out of range: underflow"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the meos job: eval \"$(jobs/meos/setup.sh)\""]
async fn meos_is_found_only_through_the_engines_library_path() {
    let (mut options, _) = runtime("meos");
    options.libpath = None;
    let handle = submit(options, transform(Op::Abs), positive(3)).await;
    let (_, status) = collect(handle).await;
    let reason = failure(&status);
    assert!(
        reason.contains("cannot load MEOS") && reason.contains("MFAPI_MEOS_LIBPATH"),
        "{reason}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the meos job: eval \"$(jobs/meos/setup.sh)\""]
async fn a_meos_query_stopped_midway_leaves_nothing_behind() {
    let (options, marked) = runtime("meos");
    let (sender, source) = Source::channel(16);
    let mut handle = mfstream_engine::BridgeEngine::new(options)
        .submit(transform(Op::Ln), source)
        .await
        .expect("the job starts");
    sender.send_batch(positive(3)).await.unwrap();
    first_event(&mut handle).await;
    let seen = marked.processes();
    assert_eq!(handle.stop_and_wait().await, QueryStatus::Stopped);
    drop(sender);
    assert_gone(&seen, "a stopped meos query");
}

#[test]
#[ignore = "needs the meos job: eval \"$(jobs/meos/setup.sh)\""]
fn mfstream_run_on_meos_prints_what_local_prints() {
    runtime("meos");
    const VAR: &str = "MFAPI_MEOS_CMD";
    check_cli_matches_local("meos", VAR, &std::env::var(VAR).unwrap(), 0);
}

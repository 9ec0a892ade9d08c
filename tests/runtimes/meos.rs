//! MEOS (jobs/meos/): MobilityDB's C library applies the operations,
//! loaded through the engine's library path.

use mfstream::QueryStatus;
use mfstream::engine::{Source, StreamEngine};
use mfstream::ops::{Kind, Op};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the meos job: eval \"$(jobs/meos/setup.sh)\""]
async fn sin_cos_and_tan_of_an_infinity_on_meos_fail_with_meos_message() {
    for op in [Op::Sin, Op::Cos, Op::Tan] {
        let (options, _) = runtime("meos");
        let input = values(&[0.5, f64::INFINITY, 2.0]);
        let engine = mfstream::BridgeEngine::new(options.clone());
        check_skipped(&engine, transform(op), &input, &[0, 2]).await;
        let fail = transform(op).on_error(mfstream::OnError::Fail);
        let handle = submit(options, fail, input).await;
        let (events, status) = collect(handle).await;
        let reason = failure(&status);
        let name = op.name();
        assert!(
            reason.contains(&format!(
                "line 2: {name} of inf: input is out of range (MEOS error 3)"
            )),
            "{reason}"
        );
        assert_eq!(
            events.len(),
            1,
            "{name}: the answer before the bad line arrives"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the meos job: eval \"$(jobs/meos/setup.sh)\""]
async fn a_domain_error_on_meos_fails_the_query_with_meos_message() {
    let (options, _) = runtime("meos");
    let input = values(&[4.0, 1.0, -2.0, 2.0]);
    // Skipped by default: the host keeps it from the version-1 job.
    let engine = mfstream::BridgeEngine::new(options.clone());
    check_skipped(&engine, transform(Op::Log10), &input, &[0, 1, 3]).await;
    let fail = transform(Op::Log10).on_error(mfstream::OnError::Fail);
    let handle = submit(options, fail, input).await;
    let (events, status) = collect(handle).await;
    let reason = failure(&status);
    assert!(
        reason
            .contains("line 3: log10 of -2.0: Cannot take logarithm of zero or a negative number"),
        "{reason}"
    );
    assert_eq!(events.len(), 2, "the answers before the bad line arrive");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the meos job: eval \"$(jobs/meos/setup.sh)\""]
async fn an_error_that_ends_meos_itself_still_names_the_line_under_meos_message() {
    // MEOS's exp overflow bypasses the error handler and exits the process.
    let (options, _) = runtime("meos");
    let input = values(&[1.0, 1000.0, 2.0]);
    // Skipped by default: the host keeps it from the job, which would die.
    let engine = mfstream::BridgeEngine::new(options.clone());
    check_skipped(&engine, transform(Op::Exp), &input, &[0, 2]).await;
    let fail = transform(Op::Exp).on_error(mfstream::OnError::Fail);
    let handle = submit(options, fail, input).await;
    let (events, status) = collect(handle).await;
    let reason = failure(&status);
    assert!(
        reason.contains("value out of range: overflow")
            && reason.contains("line 2: MEOS ended the process computing exp of 1000"),
        "{reason}"
    );
    assert_eq!(events.len(), 1, "the answer before the bad line arrives");
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
    let mut handle = mfstream::BridgeEngine::new(options)
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

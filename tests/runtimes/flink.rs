//! Apache Flink (`jobs/flink/`): the DataStream job in a local mini-cluster.

use super::*;

const VAR: &str = "MFAPI_FLINK_CMD";
const SETUP: &str = "jobs/flink/setup.sh";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flink_gives_the_local_engines_results_for_every_operation() {
    let Some(argv) = runtime_command(VAR, SETUP) else {
        return;
    };
    check_every_operation("flink", &argv).await;
    check_cli_matches_local("flink", VAR, &std::env::var(VAR).unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flink_fails_a_domain_error_with_the_jobs_message() {
    let Some(argv) = runtime_command(VAR, SETUP) else {
        return;
    };
    check_domain_error("flink", &argv, "mfstream-flink").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flink_query_stopped_midway_leaves_no_jvm_behind() {
    let Some(argv) = runtime_command(VAR, SETUP) else {
        return;
    };
    check_stop_midway("flink", &argv).await;
}

//! Apache Spark (`jobs/spark/`): the Structured Streaming job in `local[1]`.

use super::*;

const VAR: &str = "MFAPI_SPARK_CMD";
const SETUP: &str = "jobs/spark/setup.sh";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs spark: eval \"$(jobs/spark/setup.sh)\""]
async fn spark_gives_the_local_engines_results_for_every_operation() {
    let argv = runtime_command(VAR, SETUP);
    check_every_operation("spark", &argv, mfstream_engine::Framing::Value).await;
    check_cli_matches_local("spark", VAR, &std::env::var(VAR).unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs spark: eval \"$(jobs/spark/setup.sh)\""]
async fn spark_reports_a_domain_error_for_the_host_to_skip_or_fail_on() {
    let argv = runtime_command(VAR, SETUP);
    check_domain_error("spark", &argv, "mfstream-spark", 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs spark: eval \"$(jobs/spark/setup.sh)\""]
async fn a_spark_query_stopped_midway_leaves_no_jvm_behind() {
    let argv = runtime_command(VAR, SETUP);
    check_stop_midway("spark", &argv).await;
}

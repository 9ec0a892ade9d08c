//! `isolation = "process"`: a plugin run in a child of the mfstream binary;
//! a crash fails its query, nothing else.

use mfstream_engine::{EngineKind, Source};
use mfstream_model::{Instant, PropertyType, QueryStatus, Registration};

use crate::util::*;

#[tokio::test]
async fn an_isolated_plugin_matches_local_for_every_operation() {
    let dir = TempDir::new("plugin-iso-scale");
    let scale = plugin_library("mfstream-plugin-scale");
    let registry = isolating_registry(&dir, &isolated(&scale));
    let info = registry.engines().into_iter().find(|i| i.name == "scale");
    assert_eq!(
        info.map(|i| (i.kind, i.ready)),
        Some((EngineKind::Plugin, true))
    );
    assert_matches_local(&registry, "scale").await;
}

#[tokio::test]
async fn a_crashing_isolated_plugin_fails_its_query_with_the_signal_and_others_go_on() {
    let dir = TempDir::new("plugin-iso-crash");
    let chaos = plugin_library("mfstream-plugin-chaos");
    let scale = plugin_library("mfstream-plugin-scale");
    let text = format!("{}{}", isolated(&chaos), entry(&scale));
    let registry = isolating_registry(&dir, &text);
    // A live query on another engine, before and after the crashes.
    let (sender, mut live) = live_echo(&registry, "scale").await;
    for (engine, signal) in [("aborter", "SIGABRT"), ("segv", "SIGSEGV")] {
        let (_, status) = run_on(&registry, engine, echo_spec(), instants(20)).await;
        let reason = failure(&status);
        assert!(reason.contains(signal), "{engine}: {reason}");
    }
    let (_, status) = run_on(&registry, "panicky", echo_spec(), instants(20)).await;
    let reason = failure(&status);
    assert!(
        reason.contains("the plugin panicked: unlucky record"),
        "{reason}"
    );
    // The registry, the isolated engines and the live query go on.
    let (events, status) = run_on(&registry, "aborter", echo_spec(), instants(12)).await;
    assert_eq!((events.len(), status), (12, QueryStatus::Completed));
    sender.send(Instant::number("after", 2.0)).await.unwrap();
    assert_eq!(live.next().await.unwrap().datetime(), "after");
    drop(sender);
    assert!(live.next().await.is_none());
    assert_eq!(live.status(), QueryStatus::Completed);
}

#[test]
fn an_isolated_bad_plugin_is_refused_with_the_same_reason() {
    let dir = TempDir::new("plugin-iso-abi");
    let bad = c_plugin(&dir, "libabi4.so", &["-DMFS_TEST_WRONG_ABI"]);
    let registry = isolating_registry(&dir, &isolated(&bad));
    let errors = registry.plugin_errors();
    assert_eq!(errors.len(), 1);
    let text = errors[0].to_string();
    let expected = format!(
        "plugin {}: the plugin speaks ABI version 4, but this mfstream speaks versions 1 to 3",
        bad.display()
    );
    assert!(text.starts_with(&expected), "{text}");
    assert_eq!(errors[0].line, Some(2));
}

#[test]
fn an_isolated_library_that_aborts_on_load_is_refused_and_the_host_goes_on() {
    let dir = TempDir::new("plugin-iso-load-abort");
    let bad = c_plugin(&dir, "libabort.so", &["-DMFS_TEST_ABORT_ON_LOAD"]);
    let scale = plugin_library("mfstream-plugin-scale");
    let registry = isolating_registry(&dir, &format!("{}{}", isolated(&bad), entry(&scale)));
    let errors = registry.plugin_errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    let text = errors[0].to_string();
    assert!(
        text.ends_with(
            "loading the plugin in a child process failed: it was killed by signal 6 (SIGABRT)"
        ),
        "{text}"
    );
    assert!(registry.get("scale").is_ok());
}

/// The spec a plugin's `open` was given, as the `refuser` fixture quotes it.
fn quoted_spec(text: &str) -> &str {
    let start = text.find("not even ").map_or(0, |i| i + "not even ".len());
    let end = text[start..]
        .find('}')
        .map_or(text.len(), |i| start + i + 1);
    &text[start..end]
}

#[tokio::test]
async fn an_isolated_plugin_is_asked_for_the_transform_alone_as_in_process() {
    // Regression: the child deleted `aggregation` and `window` from the JSON
    // but kept `emitPartial`, which the in-process path never passed on.
    let chaos = plugin_library("mfstream-plugin-chaos");
    let in_process = registry(&TempDir::new("plugin-spec-in"), &entry(&chaos));
    let isolating = isolating_registry(&TempDir::new("plugin-spec-iso"), &isolated(&chaos));
    let spec = Registration::from_json(
        r#"{"operation":"mul","arg":2,"aggregation":"AVG","window":{"type":"COUNT","size":2},"emitPartial":false}"#,
    )
    .unwrap()
    .into_spec("speed", PropertyType::TReal)
    .unwrap();
    let refused = in_process
        .get("refuser")
        .unwrap()
        .submit(spec.clone(), Source::from_instants(instants(1)))
        .await
        .unwrap_err()
        .to_string();
    let (_, status) = run_on(&isolating, "refuser", spec, instants(1)).await;
    let transform_alone = r#"{"arg":2.0,"id":"","onError":"skip","operation":"mul","property":"speed","type":"TReal"}"#;
    assert_eq!(quoted_spec(&refused), transform_alone, "{refused}");
    assert_eq!(quoted_spec(failure(&status)), transform_alone, "{status:?}");
}

#[test]
fn isolation_from_a_program_that_is_not_mfstream_is_refused_at_once_naming_the_variable() {
    let dir = TempDir::new("plugin-iso-not-mfstream");
    let scale = plugin_library("mfstream-plugin-scale");
    // The test binary is not mfstream, and MFSTREAM_PLUGIN_HOST is unset.
    let registry = registry(&dir, &isolated(&scale));
    let errors = registry.plugin_errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    let text = errors[0].to_string();
    assert!(
        text.contains("is not mfstream: set MFSTREAM_PLUGIN_HOST to the mfstream binary"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_plugin_that_aborts_has_delivered_the_results_of_earlier_batches() {
    let dir = TempDir::new("plugin-iso-abort-flush");
    let chaos = plugin_library("mfstream-plugin-chaos");
    let registry = isolating_registry(&dir, &isolated(&chaos));
    // Short lines, so that one read of the child holds far more than one
    // batch; the aborter dies on the value 13, record 2001.
    let crash_at = 2_000;
    let input: Vec<Instant> = (0..5_000)
        .map(|i| Instant::number(format!("d{i}"), if i == crash_at { 13.0 } else { 1.0 }))
        .collect();
    let engine = registry.get("aborter").unwrap();
    let handle = engine
        .submit(echo_spec(), Source::from_instants(input.clone()))
        .await
        .unwrap();
    let (events, status) = collect(handle).await;
    assert!(failure(&status).contains("SIGABRT"), "{status:?}");
    // At most the crashing batch is lost.
    assert!(
        events.len() > crash_at - mfstream_engine::BATCH,
        "only {} results of the {crash_at} records before the crash were delivered",
        events.len()
    );
    for (event, instant) in events.iter().zip(&input) {
        assert_eq!(event.datetime(), instant.datetime);
    }
}

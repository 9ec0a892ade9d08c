//! The registry: engines from engines.toml, readiness, defaults, reloads.

use std::collections::HashMap;
use std::sync::Arc;

use mfstream_engine::{EngineKind, Source};
use mfstream_model::QueryStatus;
use mfstream_registry::config::Config;
use mfstream_registry::{Registry, RegistryError};

use crate::util::*;

const TWO_ENGINES: &str = r#"
default = "fast"

[[engine]]
name = "fast"
description = "a shell job"
cmd_env = "TEST_FAST_CMD"

[[engine]]
name = "spark"
cmd_env = "TEST_SPARK_CMD"
libpath_env = "TEST_SPARK_LIBPATH"
"#;

fn registry(text: &str, vars: &[(&str, &str)]) -> Registry {
    let config = Config::parse(text, None).unwrap();
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Registry::from_config_with_env(&config, &|name| vars.get(name).cloned())
}

#[test]
fn every_config_entry_becomes_a_bridge_engine() {
    let echo = format!("sh {}", job("echo.sh"));
    let registry = registry(TWO_ENGINES, &[("TEST_FAST_CMD", &echo)]);
    let infos = registry.engines();
    let names: Vec<&str> = infos.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["local", "fast", "spark"]);
    assert_eq!(infos[0].kind, EngineKind::Builtin);
    assert_eq!(infos[1].kind, EngineKind::Bridge);
    assert!(infos[1].ready);
    assert_eq!(registry.get("fast").unwrap().name(), "fast");
}

#[test]
fn an_unset_command_variable_is_named_by_listing_and_by_get() {
    let registry = registry(TWO_ENGINES, &[]);
    let spark = registry
        .engines()
        .into_iter()
        .find(|i| i.name == "spark")
        .unwrap();
    assert!(!spark.ready);
    assert!(spark.reason.unwrap().contains("TEST_SPARK_CMD"));
    let error = registry.get("spark").unwrap_err().to_string();
    assert!(
        error.contains("spark") && error.contains("TEST_SPARK_CMD"),
        "{error}"
    );
}

#[test]
fn an_unknown_engine_error_lists_the_known_ones() {
    let registry = registry(TWO_ENGINES, &[]);
    match registry.get("storm").unwrap_err() {
        RegistryError::Unknown { name, known } => {
            assert_eq!(name, "storm");
            assert_eq!(known, ["local", "fast", "spark"]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_default_engine_comes_from_the_variable_then_the_file_then_local() {
    let echo = format!("sh {}", job("echo.sh"));
    let from_file = registry(TWO_ENGINES, &[("TEST_FAST_CMD", &echo)]);
    assert_eq!(from_file.get_default().unwrap().name(), "fast");
    let from_var = registry(TWO_ENGINES, &[("MFAPI_STREAM_ENGINE", "local")]);
    assert_eq!(from_var.get_default().unwrap().name(), "local");
    let builtin = Registry::builtin();
    assert_eq!(builtin.get_default().unwrap().name(), "local");
    let bad = registry(TWO_ENGINES, &[("MFAPI_STREAM_ENGINE", "storm")]);
    let error = bad.get_default().unwrap_err().to_string();
    assert!(
        error.contains("MFAPI_STREAM_ENGINE") && error.contains("storm"),
        "{error}"
    );
}

#[tokio::test]
async fn a_runtime_added_by_configuration_runs_queries() {
    let dir = TempDir::new("by-config");
    let config_path = dir.join("engines.toml");
    std::fs::write(
        &config_path,
        "[[engine]]\nname = \"storm\"\ncmd_env = \"TEST_STORM_CMD\"\nframing = \"json\"\n",
    )
    .unwrap();
    let config = Config::from_file(&config_path).unwrap();
    let cmd = format!("python3 '{}'", reference_job());
    let registry = Registry::from_config_with_env(&config, &|name| {
        (name == "TEST_STORM_CMD").then(|| cmd.clone())
    });
    let engine = registry.get("storm").unwrap();
    let spec = mfstream_model::QuerySpec::transform(
        "speed",
        mfstream_model::ops::Transform::new("log10", None).unwrap(),
    );
    let input = vec![mfstream_model::Instant::number(
        "2026-01-01T00:00:00Z",
        1000.0,
    )];
    let handle = engine
        .submit(spec, Source::from_instants(input))
        .await
        .unwrap();
    let (events, status) = collect(handle).await;
    assert_eq!(status, QueryStatus::Completed);
    assert_eq!(events[0].value().as_f64(), Some(3.0));
}

#[tokio::test]
async fn quoted_arguments_survive_word_splitting() {
    let dir = TempDir::new("quoted");
    let args_file = dir.join("args");
    let cmd = format!(
        "env ARGS_FILE='{}' sh '{}' 'two words' \"and 'three' here\"",
        args_file.display(),
        job("args.sh")
    );
    let registry = registry(TWO_ENGINES, &[("TEST_FAST_CMD", &cmd)]);
    let handle = registry
        .get("fast")
        .unwrap()
        .submit(echo_spec(), Source::from_instants(instants(1)))
        .await
        .unwrap();
    assert_eq!(collect(handle).await.1, QueryStatus::Completed);
    let args = std::fs::read_to_string(&args_file).unwrap();
    let args: Vec<&str> = args.lines().collect();
    assert_eq!(args, ["two words", "and 'three' here", "mul", "1"]);
}

#[test]
fn get_is_concurrent_and_a_reload_swaps_the_whole_snapshot() {
    let echo = format!("sh {}", job("echo.sh"));
    let registry = Arc::new(registry(TWO_ENGINES, &[("TEST_FAST_CMD", &echo)]));
    let held = registry.get("local").unwrap();
    let (before, after) = (["local", "fast", "spark"], ["local", "beam"]);
    // Every reader is reading when the reload comes (the barrier), reads
    // until it sees the new snapshot, and never sees a mix of the two.
    let readers = 4;
    let started = std::sync::Barrier::new(readers + 1);
    std::thread::scope(|scope| {
        let mut seen = Vec::new();
        for _ in 0..readers {
            let (registry, started) = (registry.clone(), &started);
            seen.push(scope.spawn(move || {
                started.wait();
                // A spin, not `eventually`: a reader must read as often as
                // it can to catch a mix. Bounded all the same.
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
                loop {
                    let names: Vec<String> =
                        registry.engines().into_iter().map(|i| i.name).collect();
                    assert!(registry.get("local").is_ok());
                    if names == after {
                        return;
                    }
                    assert_eq!(names, before, "a snapshot is old or new, never a mix");
                    assert!(
                        std::time::Instant::now() < deadline,
                        "the reload's snapshot not seen within 20 s; still {names:?}"
                    );
                }
            }));
        }
        started.wait();
        registry.reload(
            &Config::parse(
                "[[engine]]\nname = \"beam\"\ncmd_env = \"UNSET_BEAM_CMD\"\n",
                None,
            )
            .unwrap(),
        );
        for reader in seen {
            reader.join().expect("a reader saw only whole snapshots");
        }
    });
    assert!(matches!(
        registry.get("fast"),
        Err(RegistryError::Unknown { .. })
    ));
    // An engine taken before the reload still works.
    assert_eq!(held.name(), "local");
}

#[test]
fn the_process_wide_registry_is_built_once_from_the_discovered_file() {
    // Tests run in the package root, where the shipped engines.toml is found
    // (unless MFSTREAM_CONFIG names another file).
    let registry =
        mfstream_registry::Registry::global().expect("the shipped engines.toml is valid");
    assert!(std::ptr::eq(
        registry,
        mfstream_registry::Registry::global().unwrap()
    ));
    assert!(registry.get("local").is_ok());
    if std::env::var_os("MFSTREAM_CONFIG").is_none() {
        let names: Vec<String> = registry.engines().into_iter().map(|i| i.name).collect();
        assert_eq!(
            names,
            [
                "local",
                "flink",
                "kafka",
                "spark",
                "beam",
                "meos",
                "flink-cluster",
                "reference"
            ]
        );
    }
}

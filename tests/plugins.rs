//! cdylib plugins: results equal local's, every bad plugin refused with its
//! reason, panics contained, libraries kept loaded under running queries.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use mfstream::{
    Config, EngineError, EngineKind, Event, Instant, Op, QuerySpec, QueryStatus, Registry, Source,
    Transform,
};

use crate::util::*;

/// A registry from an engines.toml in `dir` with `text`.
fn registry(dir: &TempDir, text: &str) -> Registry {
    let path = dir.join("engines.toml");
    std::fs::write(&path, text).unwrap();
    Registry::from_config_with_env(&Config::from_file(&path).unwrap(), &|_| None)
}

/// A registry like `registry`'s whose isolated plugins run in the
/// `mfstream` binary (the test binary cannot host them).
fn isolating_registry(dir: &TempDir, text: &str) -> Registry {
    let path = dir.join("engines.toml");
    std::fs::write(&path, text).unwrap();
    let host = env!("CARGO_BIN_EXE_mfstream").to_owned();
    let env = move |name: &str| (name == mfstream::PLUGIN_HOST_VAR).then(|| host.clone());
    Registry::from_config_with_env(&Config::from_file(&path).unwrap(), &env)
}

/// An isolated `[[plugin]]` entry for `path`.
fn isolated(path: &Path) -> String {
    format!("{}isolation = \"process\"\n", entry(path))
}

/// A `[[plugin]]` entry for `path`.
fn entry(path: &Path) -> String {
    format!("[[plugin]]\npath = {:?}\n", path.display().to_string())
}

/// `mfstream` with the configuration variables cleared.
fn mfstream(args: &[&str], config: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mfstream"))
        .args(args)
        .arg("--config")
        .arg(config)
        .env_remove("MFSTREAM_CONFIG")
        .env_remove("MFAPI_STREAM_ENGINE")
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

/// A transform for every operation of the catalogue.
fn every_transform() -> Vec<Transform> {
    Op::ALL
        .iter()
        .map(|op| {
            let arg = op.takes_arg().then_some(1.852);
            Transform::new(op.name(), arg).unwrap()
        })
        .collect()
}

/// Events of `spec` over `input` on `engine` of `registry`, and the status.
async fn run_on(
    registry: &Registry,
    engine: &str,
    spec: QuerySpec,
    input: Vec<Instant>,
) -> (Vec<Event>, QueryStatus) {
    let engine = registry.get(engine).unwrap();
    let handle = engine
        .submit(spec, Source::from_instants(input))
        .await
        .unwrap();
    collect(handle).await
}

/// Checks that `engine` gives exactly local's events for every operation.
async fn assert_matches_local(registry: &Registry, engine: &str) {
    // Values in every operation's domain; 3000 spans several batches.
    let input: Vec<Instant> = instants(3000)
        .into_iter()
        .map(|i| Instant::number(i.datetime, i.value.as_f64().unwrap() / 7.0))
        .collect();
    for transform in every_transform() {
        let spec = QuerySpec::transform("speed", transform);
        let (local, local_status) = run_on(registry, "local", spec.clone(), input.clone()).await;
        let (plugin, status) = run_on(registry, engine, spec, input.clone()).await;
        assert_eq!(local_status, QueryStatus::Completed);
        assert_eq!(status, QueryStatus::Completed, "{engine} {transform}");
        assert_eq!(plugin.len(), local.len(), "{engine} {transform}");
        assert!(
            plugin == local,
            "{engine} {transform}: results differ from local's"
        );
    }
}

#[tokio::test]
async fn the_rust_scale_plugin_matches_local_for_every_operation() {
    let dir = TempDir::new("plugin-scale");
    let scale = plugin_library("mfstream-plugin-scale");
    let registry = registry(&dir, &entry(&scale));
    let info = registry.engines().into_iter().find(|i| i.name == "scale");
    let info = info.expect("the scale engine is listed");
    assert_eq!((info.kind, info.ready), (EngineKind::Plugin, true));
    assert_eq!(info.serves, ["transform"]);
    assert_matches_local(&registry, "scale").await;
}

#[tokio::test]
async fn a_c_plugin_built_against_the_header_matches_local_for_every_operation() {
    let dir = TempDir::new("plugin-c");
    let Some(library) = c_plugin(&dir, "libcscale.so", &[]) else {
        return;
    };
    let registry = registry(&dir, &entry(&library));
    assert_matches_local(&registry, "cscale").await;
}

#[test]
fn the_c_header_and_the_rust_abi_agree_on_every_size_and_offset() {
    use mfstream_plugin::abi::*;
    use std::mem::{offset_of, size_of};

    let dir = TempDir::new("plugin-layout");
    let Some(program) = compile_c("layout.c", &[], &dir.join("layout")) else {
        return;
    };
    let output = Command::new(&program).output().unwrap();
    let c = String::from_utf8(output.stdout).unwrap();
    let rust = [
        ("MfsStr", size_of::<MfsStr>()),
        ("MfsStr.ptr", offset_of!(MfsStr, ptr)),
        ("MfsStr.len", offset_of!(MfsStr, len)),
        ("MfsValue", size_of::<MfsValue>()),
        ("MfsValue.kind", offset_of!(MfsValue, kind)),
        ("MfsValue.number", offset_of!(MfsValue, number)),
        ("MfsValue.text", offset_of!(MfsValue, text)),
        ("MfsInstant", size_of::<MfsInstant>()),
        ("MfsInstant.datetime", offset_of!(MfsInstant, datetime)),
        ("MfsInstant.value", offset_of!(MfsInstant, value)),
        ("MfsEvent", size_of::<MfsEvent>()),
        ("MfsEvent.datetime", offset_of!(MfsEvent, datetime)),
        ("MfsEvent.value", offset_of!(MfsEvent, value)),
        ("MfsHost", size_of::<MfsHost>()),
        ("MfsHost.ctx", offset_of!(MfsHost, ctx)),
        ("MfsHost.emit", offset_of!(MfsHost, emit)),
        ("MfsHost.fail", offset_of!(MfsHost, fail)),
        ("MfsEngine", size_of::<MfsEngine>()),
        ("MfsEngine.struct_size", offset_of!(MfsEngine, struct_size)),
        ("MfsEngine.serves", offset_of!(MfsEngine, serves)),
        ("MfsEngine.name", offset_of!(MfsEngine, name)),
        ("MfsEngine.description", offset_of!(MfsEngine, description)),
        ("MfsEngine.open", offset_of!(MfsEngine, open)),
        ("MfsEngine.process", offset_of!(MfsEngine, process)),
        ("MfsEngine.close", offset_of!(MfsEngine, close)),
        ("MfsEngine.ready", offset_of!(MfsEngine, ready)),
        ("MfsPlugin", size_of::<MfsPlugin>()),
        ("MfsPlugin.struct_size", offset_of!(MfsPlugin, struct_size)),
        ("MfsPlugin.abi_version", offset_of!(MfsPlugin, abi_version)),
        ("MfsPlugin.name", offset_of!(MfsPlugin, name)),
        ("MfsPlugin.version", offset_of!(MfsPlugin, version)),
        ("MfsPlugin.engines", offset_of!(MfsPlugin, engines)),
        (
            "MfsPlugin.engine_count",
            offset_of!(MfsPlugin, engine_count),
        ),
        ("MFS_ABI_VERSION", ABI_VERSION as usize),
    ];
    let expected: String = rust.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
    assert_eq!(c, expected);
}

#[tokio::test]
async fn a_panicking_plugin_fails_its_query_with_the_panic_message_and_the_host_lives_on() {
    let dir = TempDir::new("plugin-panic");
    let chaos = plugin_library("mfstream-plugin-chaos");
    let scale = plugin_library("mfstream-plugin-scale");
    let registry = registry(&dir, &format!("{}{}", entry(&chaos), entry(&scale)));
    // The 13th instant has the value 13.
    let (events, status) = run_on(&registry, "panicky", echo_spec(), instants(20)).await;
    let reason = failure(&status);
    assert!(
        reason.contains("the plugin panicked: unlucky record at 2026-01-01T00:00:00.000012Z"),
        "{reason}"
    );
    assert_eq!(
        events.len(),
        12,
        "the events before the panic are delivered"
    );
    // The same engine and another run on.
    let (events, status) = run_on(&registry, "panicky", echo_spec(), instants(12)).await;
    assert_eq!((events.len(), status), (12, QueryStatus::Completed));
    let (events, status) = run_on(&registry, "scale", echo_spec(), instants(100)).await;
    assert_eq!((events.len(), status), (100, QueryStatus::Completed));
}

#[tokio::test]
async fn a_query_the_plugin_refuses_to_open_is_an_error_at_submit() {
    let dir = TempDir::new("plugin-refuse");
    let chaos = plugin_library("mfstream-plugin-chaos");
    let registry = registry(&dir, &entry(&chaos));
    let engine = registry.get("refuser").unwrap();
    let error = engine
        .submit(echo_spec(), Source::from_instants(instants(1)))
        .await
        .unwrap_err();
    assert!(matches!(error, EngineError::Start { .. }), "{error:?}");
    let text = error.to_string();
    assert!(
        text.contains("refuser") && text.contains("this engine opens no query"),
        "{text}"
    );
}

#[tokio::test]
async fn a_library_stays_loaded_while_a_query_from_it_lives_across_a_reload() {
    let dir = TempDir::new("plugin-reload");
    let scale = plugin_library("mfstream-plugin-scale");
    let registry = registry(&dir, &entry(&scale));
    let engine = registry.get("scale").unwrap();
    let (sender, source) = Source::channel(4);
    let mut query = engine.submit(echo_spec(), source).await.unwrap();
    // The registry and the engine let go of the library; the query holds it.
    registry.reload(&Config::default());
    drop(engine);
    assert!(registry.get("scale").is_err());
    for instant in instants(3) {
        sender.send(instant).await.unwrap();
        let event = query.next().await.expect("the query still answers");
        assert_eq!(event.value().as_f64(), Some(1.0 * event_index(&event)));
    }
    drop(sender);
    assert!(query.next().await.is_none());
    assert_eq!(query.status(), QueryStatus::Completed);
}

/// The value `instants` gave the event's datetime: its second + 1.
fn event_index(event: &Event) -> f64 {
    let micros: f64 = event.datetime()[20..26].parse().unwrap();
    micros + 1.0
}

#[tokio::test]
async fn a_stopped_plugin_query_ends_as_stopped() {
    let dir = TempDir::new("plugin-stop");
    let scale = plugin_library("mfstream-plugin-scale");
    let registry = registry(&dir, &entry(&scale));
    let engine = registry.get("scale").unwrap();
    let (sender, source) = Source::channel(4);
    let mut query = engine.submit(echo_spec(), source).await.unwrap();
    sender.send(Instant::number("t", 1.0)).await.unwrap();
    assert!(query.next().await.is_some());
    assert_eq!(query.stop_and_wait().await, QueryStatus::Stopped);
}

#[tokio::test]
async fn plugins_refuse_windowed_aggregates_for_now() {
    let dir = TempDir::new("plugin-agg");
    let scale = plugin_library("mfstream-plugin-scale");
    let registry = registry(&dir, &entry(&scale));
    let body = r#"{"aggregation":"AVG","window":{"type":"COUNT","size":2}}"#;
    let spec = mfstream::Registration::from_json(body)
        .unwrap()
        .into_spec("speed", mfstream::PropertyType::TReal)
        .unwrap();
    let engine = registry.get("scale").unwrap();
    let error = engine.submit(spec, Source::from_instants([])).await;
    assert!(matches!(error, Err(EngineError::Unsupported { .. })));
}

/// One bad plugin next to the good scale plugin: `check` exits 1 naming the
/// file, the line and `reason`; `engines` lists `listed` as not ready with
/// that reason; the scale engine still runs.
fn assert_refused(dir: &TempDir, bad: &Path, listed: &str, reason: &str) {
    let scale = plugin_library("mfstream-plugin-scale");
    let config = dir.join("engines.toml");
    let text = format!(
        "[[engine]]\nname = \"flink\"\ncmd_env = \"TEST_UNSET_CMD\"\n\n{}{}",
        entry(&scale),
        entry(bad)
    );
    std::fs::write(&config, text).unwrap();

    let check = mfstream(&["check"], &config);
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert_eq!(check.status.code(), Some(1), "{stderr}");
    let place = format!("{}:8: plugin {}: ", config.display(), bad.display());
    assert!(
        stderr.contains(&place) && stderr.contains(reason),
        "expected {place}…{reason} in:\n{stderr}"
    );

    let engines = mfstream(&["engines", "--json"], &config);
    assert!(engines.status.success());
    let listed_engines: Vec<serde_json::Value> = serde_json::from_slice(&engines.stdout).unwrap();
    let entry = listed_engines
        .iter()
        .rev()
        .find(|e| e["name"] == listed)
        .unwrap_or_else(|| panic!("{listed} is not listed: {listed_engines:?}"));
    assert_eq!(entry["kind"], "plugin");
    assert_eq!(entry["ready"], false);
    let why = entry["reason"].as_str().unwrap();
    assert!(why.contains(reason), "{why}");
    let scale = listed_engines
        .iter()
        .find(|e| e["name"] == "scale")
        .unwrap();
    assert_eq!(scale["ready"], true);

    let run = Command::new(env!("CARGO_BIN_EXE_mfstream"))
        .args([
            "run", "--engine", "scale", "--op", "mul", "--arg", "2", "--config",
        ])
        .arg(&config)
        .arg(root().join("examples/speed.ndjson"))
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&run.stdout).lines().count(), 20);
}

#[test]
fn a_missing_library_is_refused_naming_the_file() {
    let dir = TempDir::new("plugin-missing");
    let bad = dir.join("libnothere.so");
    assert_refused(
        &dir,
        &bad,
        &bad.display().to_string(),
        "cannot read the file",
    );
}

#[test]
fn a_text_file_is_refused_as_not_loadable() {
    let dir = TempDir::new("plugin-text");
    let bad = dir.join("libtext.so");
    std::fs::write(&bad, "not a library\n").unwrap();
    assert_refused(
        &dir,
        &bad,
        &bad.display().to_string(),
        "cannot load the library",
    );
}

#[test]
fn a_folder_is_refused_as_not_a_regular_file() {
    let dir = TempDir::new("plugin-folder");
    let bad = dir.join("plugins");
    std::fs::create_dir(&bad).unwrap();
    assert_refused(&dir, &bad, &bad.display().to_string(), "not a regular file");
}

#[test]
fn a_group_writable_library_is_refused_with_the_chmod_fix() {
    let dir = TempDir::new("plugin-writable");
    let bad = dir.join("libwritable.so");
    std::fs::copy(plugin_library("mfstream-plugin-chaos"), &bad).unwrap();
    std::fs::set_permissions(&bad, std::fs::Permissions::from_mode(0o775)).unwrap();
    let fix = format!(
        "writable by group or others (mode 775), so anyone could put code into mfstream: run `chmod go-w {}`",
        bad.display()
    );
    assert_refused(&dir, &bad, &bad.display().to_string(), &fix);
}

#[test]
fn a_library_without_the_entry_symbol_is_refused() {
    let dir = TempDir::new("plugin-nosym");
    let Some(bad) = c_plugin(&dir, "libnoentry.so", &["-DMFS_TEST_NO_ENTRY"]) else {
        return;
    };
    let reason = "the library exports no `mfstream_plugin` symbol";
    assert_refused(&dir, &bad, &bad.display().to_string(), reason);
}

#[test]
fn a_plugin_of_another_abi_version_is_refused_naming_both_versions() {
    let dir = TempDir::new("plugin-abi");
    let Some(bad) = c_plugin(&dir, "libabi2.so", &["-DMFS_TEST_WRONG_ABI"]) else {
        return;
    };
    let reason = "the plugin speaks ABI version 2, but this mfstream speaks version 1";
    assert_refused(&dir, &bad, &bad.display().to_string(), reason);
}

#[test]
fn a_plugin_engine_named_like_a_config_engine_is_refused_naming_both() {
    let dir = TempDir::new("plugin-clash");
    let Some(bad) = c_plugin(&dir, "libclash.so", &["-DMFS_TEST_ENGINE_NAME=\"flink\""]) else {
        return;
    };
    let reason = "engine \"flink\" clashes with the bridge engine \"flink\" of";
    assert_refused(&dir, &bad, "flink", reason);
}

#[test]
fn a_plugin_engine_named_like_the_builtin_is_refused() {
    let dir = TempDir::new("plugin-clash-local");
    let Some(bad) = c_plugin(&dir, "liblocal.so", &["-DMFS_TEST_ENGINE_NAME=\"local\""]) else {
        return;
    };
    let reason = "engine \"local\" clashes with the built-in engine \"local\"";
    assert_refused(&dir, &bad, "local", reason);
}

#[test]
fn a_plugin_engine_with_a_malformed_name_is_refused() {
    let dir = TempDir::new("plugin-badname");
    let Some(bad) = c_plugin(
        &dir,
        "libbadname.so",
        &["-DMFS_TEST_ENGINE_NAME=\"Bad Name\""],
    ) else {
        return;
    };
    let reason = "invalid engine name \"Bad Name\"";
    assert_refused(&dir, &bad, &bad.display().to_string(), reason);
}

#[test]
fn mfstream_run_on_a_plugin_engine_writes_what_local_writes() {
    let dir = TempDir::new("plugin-cli-run");
    let scale = plugin_library("mfstream-plugin-scale");
    let config = dir.join("engines.toml");
    std::fs::write(&config, entry(&scale)).unwrap();
    let input = root().join("examples/speed.ndjson");
    let run = |engine: &str| {
        let output = Command::new(env!("CARGO_BIN_EXE_mfstream"))
            .args(["run", "--engine", engine, "--op", "mul", "--arg", "1.852"])
            .arg("--config")
            .arg(&config)
            .arg(&input)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        output.stdout
    };
    assert_eq!(run("scale"), run("local"));
    let check = mfstream(&["check"], &config);
    assert!(check.status.success());
    assert!(String::from_utf8_lossy(&check.stdout).contains("ok, 2 engines, 2 ready"));
}

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
    let (sender, source) = Source::channel(4);
    let mut live = registry
        .get("scale")
        .unwrap()
        .submit(echo_spec(), source)
        .await
        .unwrap();
    sender.send(Instant::number("before", 1.0)).await.unwrap();
    assert_eq!(live.next().await.unwrap().datetime(), "before");
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
    let Some(bad) = c_plugin(&dir, "libabi2.so", &["-DMFS_TEST_WRONG_ABI"]) else {
        return;
    };
    let registry = isolating_registry(&dir, &isolated(&bad));
    let errors = registry.plugin_errors();
    assert_eq!(errors.len(), 1);
    let text = errors[0].to_string();
    let expected = format!(
        "plugin {}: the plugin speaks ABI version 2, but this mfstream speaks version 1",
        bad.display()
    );
    assert!(text.starts_with(&expected), "{text}");
    assert_eq!(errors[0].line, 2);
}

/// `mfstream run --engine ENGINE --op OP [--arg X]` over the sample input
/// with `config`, libmeos at `meos` (or none): the events' values, or the
/// failure on stderr.
fn run_values(
    config: &Path,
    engine: &str,
    op: &str,
    meos: Option<&Path>,
) -> Result<Vec<f64>, String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mfstream"));
    cmd.args(["run", "--engine", engine, "--op", op])
        .arg("--config")
        .arg(config)
        .env_remove("MFSTREAM_MEOS_LIB")
        .env_remove("MFAPI_STREAM_ENGINE");
    if ["add", "sub", "mul", "div"].contains(&op) {
        cmd.args(["--arg", "1.852"]);
    }
    if let Some(meos) = meos {
        cmd.env("MFSTREAM_MEOS_LIB", meos);
    }
    let output = cmd
        .arg(root().join("examples/speed.ndjson"))
        .output()
        .unwrap();
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    let text = String::from_utf8(output.stdout).unwrap();
    Ok(text
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["value"]
                .as_f64()
                .unwrap()
        })
        .collect())
}

#[test]
fn the_meos_plugin_without_libmeos_is_listed_not_ready_naming_the_variable() {
    let dir = TempDir::new("plugin-meos-absent");
    let config = dir.join("engines.toml");
    std::fs::write(&config, entry(&plugin_library("mfstream-plugin-meos"))).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_mfstream"))
        .args(["engines", "--json", "--config"])
        .arg(&config)
        .env_remove("MFSTREAM_MEOS_LIB")
        .output()
        .unwrap();
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&output.stdout).unwrap();
    let meos = listed.iter().find(|e| e["name"] == "meos").unwrap();
    assert_eq!(
        (&meos["kind"], &meos["ready"]),
        (&"plugin".into(), &false.into())
    );
    let reason = meos["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("MFSTREAM_MEOS_LIB is not set"),
        "{reason}"
    );
    let error = run_values(&config, "meos", "abs", None).unwrap_err();
    assert!(
        error.contains("the meos engine is not ready: MFSTREAM_MEOS_LIB is not set"),
        "{error}"
    );
}

#[test]
fn the_meos_plugin_matches_local_for_every_operation_meos_has() {
    let Some(meos) = meos_lib("the_meos_plugin_matches_local_for_every_operation_meos_has") else {
        return;
    };
    let dir = TempDir::new("plugin-meos");
    let config = dir.join("engines.toml");
    std::fs::write(&config, entry(&plugin_library("mfstream-plugin-meos"))).unwrap();
    for op in Op::ALL {
        let name = op.name();
        let local = run_values(&config, "local", name, None).unwrap();
        let result = run_values(&config, "meos", name, Some(&meos));
        if matches!(op, Op::Sin | Op::Cos | Op::Tan) {
            let error = result.unwrap_err();
            assert!(
                error.contains(&format!("MEOS 1.3 has no lifted {name}")),
                "{error}"
            );
            continue;
        }
        let values = result.unwrap_or_else(|e| panic!("meos {name}: {e}"));
        assert_eq!(values.len(), local.len(), "{name}");
        for (m, l) in values.iter().zip(&local) {
            // MEOS computes degrees as x * 180 / pi, local as x * (180 / pi):
            // they may differ in the last bit. Everything else is exact.
            let tolerance = if op == Op::Degrees {
                2.0 * f64::EPSILON * l.abs()
            } else {
                0.0
            };
            assert!(
                (m - l).abs() <= tolerance,
                "meos {name}: {m} against local's {l}"
            );
        }
    }
}

#[test]
fn a_meos_domain_error_fails_the_query_with_meos_message() {
    let Some(meos) = meos_lib("a_meos_domain_error_fails_the_query_with_meos_message") else {
        return;
    };
    let dir = TempDir::new("plugin-meos-domain");
    let config = dir.join("engines.toml");
    std::fs::write(&config, entry(&plugin_library("mfstream-plugin-meos"))).unwrap();
    let input = dir.join("input.ndjson");
    std::fs::write(
        &input,
        "{\"datetime\":\"a\",\"value\":1}\n{\"datetime\":\"b\",\"value\":0}\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_mfstream"))
        .args(["run", "--engine", "meos", "--op", "ln", "--config"])
        .arg(&config)
        .arg(&input)
        .env("MFSTREAM_MEOS_LIB", &meos)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("record at b: MEOS ln: Cannot take logarithm of zero or a negative number"),
        "{stderr}"
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout).lines().count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_code_runs_on_the_query_thread_not_on_a_runtime_worker() {
    let dir = TempDir::new("plugin-thread");
    let registry = registry(&dir, &entry(&plugin_library("mfstream-plugin-chaos")));
    let (events, status) = run_on(&registry, "whereami", echo_spec(), instants(3)).await;
    assert_eq!(status, QueryStatus::Completed);
    for event in events {
        // The kernel keeps 15 bytes of `mfstream-plugin-whereami`.
        assert_eq!(
            event.value(),
            &mfstream::Value::Text("mfstream-plugin".into())
        );
    }
}

#[tokio::test]
async fn a_plugin_that_emits_nan_fails_its_query() {
    let dir = TempDir::new("plugin-nan");
    let registry = registry(&dir, &entry(&plugin_library("mfstream-plugin-chaos")));
    let (events, status) = run_on(&registry, "nan", echo_spec(), instants(3)).await;
    let reason = failure(&status);
    assert!(reason.contains("not a finite number"), "{reason}");
    assert!(events.is_empty());
}

#[test]
fn two_plugins_exporting_one_engine_name_are_a_clash_naming_both_files() {
    let dir = TempDir::new("plugin-clash-two");
    let first = dir.join("libfirst.so");
    let second = dir.join("libsecond.so");
    std::fs::copy(plugin_library("mfstream-plugin-scale"), &first).unwrap();
    std::fs::copy(plugin_library("mfstream-plugin-scale"), &second).unwrap();
    let registry = registry(&dir, &format!("{}{}", entry(&first), entry(&second)));
    let errors = registry.plugin_errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    let text = errors[0].to_string();
    let expected = format!(
        "plugin {}: engine \"scale\" clashes with the engine \"scale\" of plugin {}: rename one of them",
        second.display(),
        first.display()
    );
    assert_eq!(text, expected);
    // The first keeps the name and runs.
    assert!(registry.get("scale").is_ok());
}

#[test]
fn a_bare_plugin_file_name_is_found_next_to_a_config_given_without_a_folder() {
    let dir = TempDir::new("plugin-bare-name");
    std::fs::copy(
        plugin_library("mfstream-plugin-scale"),
        dir.join("libscale.so"),
    )
    .unwrap();
    std::fs::write(
        dir.join("engines.toml"),
        "[[plugin]]\npath = \"libscale.so\"\n",
    )
    .unwrap();
    let check = Command::new(env!("CARGO_BIN_EXE_mfstream"))
        .args(["check", "--config", "engines.toml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert!(check.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert!(stdout.contains("ok, 2 engines, 2 ready"), "{stdout}");
}

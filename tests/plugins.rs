//! cdylib plugins in process: results equal local's (Rust and C), the C
//! header agrees with the ABI, panics and bad results fail one query, plugin
//! code runs off the runtime's workers, libraries stay loaded under running
//! queries.

use std::process::Command;

use mfstream_engine::{EngineError, EngineKind, Source};
use mfstream_model::{Event, Instant, QueryStatus};
use mfstream_registry::Registry;
use mfstream_registry::config::Config;

use crate::util::*;

#[tokio::test]
async fn the_rust_scale_plugin_matches_local_for_every_operation() {
    let dir = TempDir::new("plugin-scale");
    let scale = plugin_library("mfstream-plugin-scale");
    let registry = registry(&dir, &entry(&scale));
    let info = registry.engines().into_iter().find(|i| i.name == "scale");
    let info = info.expect("the scale engine is listed");
    assert_eq!((info.kind, info.ready), (EngineKind::Plugin, true));
    assert_eq!(info.serves, ["transform", "aggregate"]);
    assert_matches_local(&registry, "scale").await;
}

#[tokio::test]
async fn a_c_plugin_built_against_the_header_matches_local_for_every_operation() {
    let dir = TempDir::new("plugin-c");
    let library = c_plugin(&dir, "libcscale.so", &[]);
    let registry = registry(&dir, &entry(&library));
    assert_matches_local(&registry, "cscale").await;
}

#[test]
fn the_c_header_and_the_rust_abi_agree_on_every_size_and_offset() {
    use mfstream_plugin::abi::*;
    use std::mem::{offset_of, size_of};

    let dir = TempDir::new("plugin-layout");
    let program = compile_c("layout.c", &[], &dir.join("layout"));
    let output = Command::new(&program).output().unwrap();
    assert!(output.status.success(), "{}", output.status);
    let c = String::from_utf8(output.stdout).unwrap();
    let rust = [
        ("MfsStr", size_of::<MfsStr>()),
        ("MfsStr.ptr", offset_of!(MfsStr, ptr)),
        ("MfsStr.len", offset_of!(MfsStr, len)),
        ("MfsPoint", size_of::<MfsPoint>()),
        ("MfsPoint.x", offset_of!(MfsPoint, x)),
        ("MfsPoint.y", offset_of!(MfsPoint, y)),
        ("MfsPoint.z", offset_of!(MfsPoint, z)),
        ("MfsValue", size_of::<MfsValue>()),
        ("MfsValue.kind", offset_of!(MfsValue, kind)),
        ("MfsValue.flags", offset_of!(MfsValue, flags)),
        ("MfsValue.number", offset_of!(MfsValue, number)),
        ("MfsValue.text", offset_of!(MfsValue, text)),
        ("MfsValue.point", offset_of!(MfsValue, point)),
        ("MfsInstant", size_of::<MfsInstant>()),
        ("MfsInstant.datetime", offset_of!(MfsInstant, datetime)),
        ("MfsInstant.value", offset_of!(MfsInstant, value)),
        ("MfsInstant.micros", offset_of!(MfsInstant, micros)),
        ("MfsEvent", size_of::<MfsEvent>()),
        ("MfsEvent.datetime", offset_of!(MfsEvent, datetime)),
        ("MfsEvent.value", offset_of!(MfsEvent, value)),
        ("MfsEvent.micros", offset_of!(MfsEvent, micros)),
        ("MfsPositionSpec", size_of::<MfsPositionSpec>()),
        (
            "MfsPositionSpec.struct_size",
            offset_of!(MfsPositionSpec, struct_size),
        ),
        ("MfsPositionSpec.step", offset_of!(MfsPositionSpec, step)),
        (
            "MfsPositionSpec.detect",
            offset_of!(MfsPositionSpec, detect),
        ),
        (
            "MfsPositionSpec.geodetic",
            offset_of!(MfsPositionSpec, geodetic),
        ),
        ("MfsPositionSpec.srid", offset_of!(MfsPositionSpec, srid)),
        ("MfsPositionSpec.crs", offset_of!(MfsPositionSpec, crs)),
        (
            "MfsPositionSpec.geometry",
            offset_of!(MfsPositionSpec, geometry),
        ),
        ("MfsPositionSpec.spec", offset_of!(MfsPositionSpec, spec)),
        ("MfsHost", size_of::<MfsHost>()),
        ("MfsHost.ctx", offset_of!(MfsHost, ctx)),
        ("MfsHost.emit", offset_of!(MfsHost, emit)),
        ("MfsHost.fail", offset_of!(MfsHost, fail)),
        ("MfsHost.error", offset_of!(MfsHost, error)),
        ("MfsEngine", size_of::<MfsEngine>()),
        ("MfsEngine.struct_size", offset_of!(MfsEngine, struct_size)),
        ("MfsEngine.serves", offset_of!(MfsEngine, serves)),
        ("MfsEngine.name", offset_of!(MfsEngine, name)),
        ("MfsEngine.description", offset_of!(MfsEngine, description)),
        ("MfsEngine.open", offset_of!(MfsEngine, open)),
        ("MfsEngine.process", offset_of!(MfsEngine, process)),
        ("MfsEngine.close", offset_of!(MfsEngine, close)),
        ("MfsEngine.ready", offset_of!(MfsEngine, ready)),
        (
            "MfsEngine.open_positions",
            offset_of!(MfsEngine, open_positions),
        ),
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
    let mut expected: String = rust.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
    expected += &format!(
        "MFS_POINT {MFS_POINT} MFS_DETECT {MFS_DETECT} MFS_HAS_Z {MFS_HAS_Z} \
         MFS_SERVES_POSITIONS {MFS_SERVES_POSITIONS}\n\
         MFS_STEP {MFS_STEP_SPEED} {MFS_STEP_AZIMUTH} {MFS_STEP_CUMULATIVE_LENGTH} \
         {MFS_STEP_DISTANCE} {MFS_STEP_POSITION} {MFS_STEP_GEOFENCE}\n\
         MFS_DETECT_ {MFS_DETECT_ENTER} {MFS_DETECT_EXIT} {MFS_DETECT_INSIDE} \
         {MFS_DETECT_OUTSIDE} {MFS_DETECT_CROSS}\n\
         MFS_NO_TIME {MFS_NO_TIME}\n"
    );
    assert_eq!(c, expected);
}

#[test]
fn the_frozen_version_2_header_agrees_with_the_hosts_version_2_layouts() {
    use mfstream_plugin::abi::{MfsHost, MfsPlugin, MfsStr, v2};
    use std::mem::{offset_of, size_of};

    let dir = TempDir::new("plugin-layout-v2");
    let program = compile_c("v2/layout.c", &[], &dir.join("layout"));
    let output = Command::new(&program).output().unwrap();
    assert!(output.status.success(), "{}", output.status);
    let c = String::from_utf8(output.stdout).unwrap();
    let rust = [
        ("MfsStr", size_of::<MfsStr>()),
        ("MfsStr.ptr", offset_of!(MfsStr, ptr)),
        ("MfsStr.len", offset_of!(MfsStr, len)),
        ("MfsValue", size_of::<v2::MfsValue>()),
        ("MfsValue.kind", offset_of!(v2::MfsValue, kind)),
        ("MfsValue.number", offset_of!(v2::MfsValue, number)),
        ("MfsValue.text", offset_of!(v2::MfsValue, text)),
        ("MfsInstant", size_of::<v2::MfsInstant>()),
        ("MfsInstant.datetime", offset_of!(v2::MfsInstant, datetime)),
        ("MfsInstant.value", offset_of!(v2::MfsInstant, value)),
        ("MfsEvent", size_of::<v2::MfsEvent>()),
        ("MfsEvent.datetime", offset_of!(v2::MfsEvent, datetime)),
        ("MfsEvent.value", offset_of!(v2::MfsEvent, value)),
        ("MfsHost", size_of::<v2::MfsHost>()),
        ("MfsHost.ctx", offset_of!(v2::MfsHost, ctx)),
        ("MfsHost.emit", offset_of!(v2::MfsHost, emit)),
        ("MfsHost.fail", offset_of!(v2::MfsHost, fail)),
        ("MfsHost.error", offset_of!(v2::MfsHost, error)),
        ("MfsEngine", size_of::<v2::MfsEngine>()),
        (
            "MfsEngine.struct_size",
            offset_of!(v2::MfsEngine, struct_size),
        ),
        ("MfsEngine.serves", offset_of!(v2::MfsEngine, serves)),
        ("MfsEngine.name", offset_of!(v2::MfsEngine, name)),
        (
            "MfsEngine.description",
            offset_of!(v2::MfsEngine, description),
        ),
        ("MfsEngine.open", offset_of!(v2::MfsEngine, open)),
        ("MfsEngine.process", offset_of!(v2::MfsEngine, process)),
        ("MfsEngine.close", offset_of!(v2::MfsEngine, close)),
        ("MfsEngine.ready", offset_of!(v2::MfsEngine, ready)),
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
        ("MFS_ABI_VERSION", 2),
    ];
    let expected: String = rust.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
    assert_eq!(c, expected);
    // The host's callbacks are the same struct in both versions but for
    // the pointee of `emit`.
    assert_eq!(size_of::<v2::MfsHost>(), size_of::<MfsHost>());
}

#[tokio::test]
async fn plugins_built_against_abi_versions_1_and_2_still_load_and_serve_numbers() {
    let dir = TempDir::new("plugin-old-abi");
    for (name, flags, version) in [
        ("libcscale-v2.so", &[][..], 2),
        ("libcscale-v1.so", &["-DMFS_TEST_ABI_1"][..], 1),
    ] {
        let library = c_plugin_of(&dir, "v2/scale.c", name, flags);
        let registry = registry(&dir, &entry(&library));
        let info = registry.engines().into_iter().find(|i| i.name == "cscale");
        let info = info.expect("the old plugin's engine is listed");
        assert_eq!(
            (info.kind, info.ready),
            (EngineKind::Plugin, true),
            "{name}"
        );
        assert_eq!(info.abi_version, Some(version), "{name}");
        assert_matches_local(&registry, "cscale").await;
        let isolating = isolating_registry(&dir, &isolated(&library));
        assert_matches_local(&isolating, "cscale").await;
    }
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

/// Windowed queries, with and without a transform before the window.
const WINDOWED: [&str; 4] = [
    r#"{"operation":"mul","arg":1.852,"aggregation":"SUM","window":{"type":"COUNT","size":7}}"#,
    r#"{"operation":"ln","aggregation":"AVG","window":{"type":"TUMBLING","size":5,"unit":"SECONDS"}}"#,
    r#"{"operation":"abs","aggregation":"MAX","window":{"type":"HOPPING","size":10,"unit":"SECONDS","hop":3,"hopUnit":"SECONDS"}}"#,
    r#"{"aggregation":"AVG","window":{"type":"TUMBLING","size":1,"unit":"MINUTES"}}"#,
];

/// Every windowed query on `engine` gives exactly local's events.
async fn assert_windows_match_local(registry: &Registry, engine: &str) {
    let input: Vec<Instant> = (0..400)
        .map(|i| {
            let datetime = format!("2026-01-01T00:{:02}:{:02}Z", i / 60, i % 60);
            Instant::number(datetime, (i + 1) as f64 / 7.0)
        })
        .collect();
    for body in WINDOWED {
        let spec = mfstream_model::Registration::from_json(body)
            .unwrap()
            .into_spec("speed", mfstream_model::PropertyType::TReal)
            .unwrap();
        let (local, local_status) = run_on(registry, "local", spec.clone(), input.clone()).await;
        let (plugin, status) = run_on(registry, engine, spec, input.clone()).await;
        assert_eq!(local_status, QueryStatus::Completed, "{body}");
        assert_eq!(status, QueryStatus::Completed, "{engine} {body}");
        let json = |events: &[Event]| events.iter().map(Event::to_json).collect::<Vec<_>>();
        assert!(!local.is_empty(), "{body}");
        assert_eq!(json(&plugin), json(&local), "{engine} {body}");
    }
}

/// A plugin built for a newer ABI may declare `serves` bits this host does
/// not know: they are left out (and logged), in process and isolated alike,
/// and the engine runs as one that transforms.
#[tokio::test]
async fn an_unknown_serves_bit_is_ignored_and_the_engine_still_serves() {
    let dir = TempDir::new("plugin-newer");
    let chaos = plugin_library("mfstream-plugin-chaos");
    for registry in [
        registry(&dir, &entry(&chaos)),
        isolating_registry(&dir, &isolated(&chaos)),
    ] {
        let info = registry.engines().into_iter().find(|i| i.name == "newer");
        let info = info.expect("the newer engine is listed");
        assert!(info.ready, "{info:?}");
        assert_eq!(info.serves, ["transform", "aggregate"]);
        let (events, status) = run_on(&registry, "newer", echo_spec(), instants(3)).await;
        assert_eq!((events.len(), status), (3, QueryStatus::Completed));
    }
}

#[tokio::test]
async fn windows_over_a_plugin_engine_equal_local_s() {
    let dir = TempDir::new("plugin-windows");
    let registry = registry(&dir, &entry(&plugin_library("mfstream-plugin-scale")));
    let info = registry.engines().into_iter().find(|i| i.name == "scale");
    assert_eq!(info.unwrap().serves, ["transform", "aggregate"]);
    assert_windows_match_local(&registry, "scale").await;
}

#[tokio::test]
async fn windows_over_an_isolated_plugin_engine_equal_local_s() {
    let dir = TempDir::new("plugin-iso-windows");
    let scale = plugin_library("mfstream-plugin-scale");
    let registry = isolating_registry(&dir, &isolated(&scale));
    assert_windows_match_local(&registry, "scale").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_code_runs_on_the_query_thread_not_on_a_runtime_worker() {
    let dir = TempDir::new("plugin-thread");
    let registry = registry(&dir, &entry(&plugin_library("mfstream-plugin-chaos")));
    let (events, status) = run_on(&registry, "whereami", echo_spec(), instants(3)).await;
    assert_eq!(status, QueryStatus::Completed);
    assert_eq!(events.len(), 3, "one answer per instant");
    for event in events {
        // The kernel keeps 15 bytes of `mfstream-plugin-whereami`.
        assert_eq!(
            event.value(),
            &mfstream_model::Value::Text("mfstream-plugin".into())
        );
    }
}

#[tokio::test]
async fn a_plugin_that_emits_nan_fails_its_query_under_fail() {
    let dir = TempDir::new("plugin-nan");
    let registry = registry(&dir, &entry(&plugin_library("mfstream-plugin-chaos")));
    let fail = echo_spec().on_error(mfstream_model::OnError::Fail);
    let (events, status) = run_on(&registry, "nan", fail, instants(3)).await;
    let reason = failure(&status);
    assert!(reason.contains("not a finite number"), "{reason}");
    assert!(events.is_empty());
}

#[test]
fn mfstream_run_on_a_plugin_engine_writes_what_local_writes() {
    let dir = TempDir::new("plugin-cli-run");
    let scale = plugin_library("mfstream-plugin-scale");
    let config = dir.join("engines.toml");
    std::fs::write(&config, entry(&scale)).unwrap();
    let input = root().join("examples/speed.ndjson");
    let run = |engine: &str| {
        let output = mfstream_command(dir.path())
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
    let check = mfstream_with(&["check"], &config);
    assert!(check.status.success());
    assert!(String::from_utf8_lossy(&check.stdout).contains("ok, 2 engines, 2 ready"));
}

#[test]
fn the_chaos_plugins_deliberate_panic_prints_no_panic_report() {
    let dir = TempDir::new("plugin-panic-quiet");
    let config = dir.join("engines.toml");
    std::fs::write(&config, entry(&plugin_library("mfstream-plugin-chaos"))).unwrap();
    let input = dir.join("in.ndjson");
    std::fs::write(
        &input,
        "{\"datetime\":\"2026-01-01T00:00:00Z\",\"value\":13}\n",
    )
    .unwrap();
    let output = mfstream_command(dir.path())
        .env("RUST_BACKTRACE", "1")
        .args(["run", "--engine", "panicky", "--op", "abs", "--config"])
        .arg(&config)
        .arg(&input)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = stderr(&output);
    assert_eq!(
        stderr,
        "mfstream: query failed: the plugin panicked: unlucky record at 2026-01-01T00:00:00Z\n"
    );
}

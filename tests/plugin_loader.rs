//! The plugin loader: every bad plugin refused, naming the file and the
//! reason, by `mfstream check` and `mfstream engines`; every other engine
//! keeps working.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use mfstream_model::{Instant, QueryStatus};
use mfstream_registry::Registry;
use mfstream_registry::config::Config;

use crate::util::*;

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

    let check = mfstream_with(&["check"], &config);
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert_eq!(check.status.code(), Some(1), "{stderr}");
    let place = format!("{}:8: plugin {}: ", config.display(), bad.display());
    assert!(
        stderr.contains(&place) && stderr.contains(reason),
        "expected {place}…{reason} in:\n{stderr}"
    );

    let engines = mfstream_with(&["engines", "--json"], &config);
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

    let run = mfstream_command(dir.path())
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
    let bad = c_plugin(&dir, "libnoentry.so", &["-DMFS_TEST_NO_ENTRY"]);
    let reason = "the library exports no `mfstream_plugin` symbol";
    assert_refused(&dir, &bad, &bad.display().to_string(), reason);
}

#[test]
fn a_plugin_of_another_abi_version_is_refused_naming_both_versions() {
    let dir = TempDir::new("plugin-abi");
    let bad = c_plugin(&dir, "libabi4.so", &["-DMFS_TEST_WRONG_ABI"]);
    let reason = "the plugin speaks ABI version 4, but this mfstream speaks versions 1 to 3";
    assert_refused(&dir, &bad, &bad.display().to_string(), reason);
}

#[test]
fn a_plugin_that_declares_positions_without_open_positions_is_refused() {
    let dir = TempDir::new("plugin-bad-serves");
    let bad = c_plugin(
        &dir,
        "libbadserves.so",
        &["-DMFS_TEST_POSITIONS_WITHOUT_OPEN"],
    );
    let reason = "engine \"cscale\" declares MFS_SERVES_POSITIONS but has no open_positions \
                  function: set it, or drop the bit";
    assert_refused(&dir, &bad, &bad.display().to_string(), reason);
}

#[test]
fn mfstream_engines_says_which_abi_version_each_plugin_speaks() {
    let dir = TempDir::new("plugin-abi-listing");
    let v3 = c_plugin(&dir, "libv3.so", &["-DMFS_TEST_ENGINE_NAME=\"cthree\""]);
    let v2 = c_plugin_of(
        &dir,
        "v2/scale.c",
        "libv2.so",
        &["-DMFS_TEST_ENGINE_NAME=\"ctwo\""],
    );
    let v1 = c_plugin_of(
        &dir,
        "v2/scale.c",
        "libv1.so",
        &["-DMFS_TEST_ABI_1", "-DMFS_TEST_ENGINE_NAME=\"cone\""],
    );
    let config = dir.join("engines.toml");
    std::fs::write(
        &config,
        format!("{}{}{}", entry(&v3), entry(&v2), entry(&v1)),
    )
    .unwrap();
    let table = stdout(&mfstream_with(&["engines"], &config));
    for (name, kind) in [
        ("cthree", "plugin v3"),
        ("ctwo", "plugin v2"),
        ("cone", "plugin v1"),
    ] {
        let line = table.lines().find(|l| l.starts_with(name));
        let line = line.unwrap_or_else(|| panic!("{name} is not listed:\n{table}"));
        assert!(line.contains(kind), "{line}");
    }
    let local = table.lines().find(|l| l.starts_with("local"));
    assert!(local.is_some_and(|l| !l.contains(" v")), "{table}");
    let json = mfstream_with(&["engines", "--json"], &config);
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&json.stdout).unwrap();
    let version = |name: &str| {
        let e = listed.iter().find(|e| e["name"] == name).unwrap();
        e.get("abi_version").cloned()
    };
    assert_eq!(version("cthree"), Some(serde_json::json!(3)));
    assert_eq!(version("ctwo"), Some(serde_json::json!(2)));
    assert_eq!(version("cone"), Some(serde_json::json!(1)));
    assert_eq!(version("local"), None);
}

#[test]
fn a_plugin_engine_named_like_a_config_engine_is_refused_naming_both() {
    let dir = TempDir::new("plugin-clash");
    let bad = c_plugin(&dir, "libclash.so", &["-DMFS_TEST_ENGINE_NAME=\"flink\""]);
    let reason = "engine \"flink\" clashes with the bridge engine \"flink\" of";
    assert_refused(&dir, &bad, "flink", reason);
}

#[test]
fn a_plugin_engine_named_like_the_builtin_is_refused() {
    let dir = TempDir::new("plugin-clash-local");
    let bad = c_plugin(&dir, "liblocal.so", &["-DMFS_TEST_ENGINE_NAME=\"local\""]);
    let reason = "engine \"local\" clashes with the built-in engine \"local\"";
    assert_refused(&dir, &bad, "local", reason);
}

#[test]
fn a_plugin_engine_with_a_malformed_name_is_refused() {
    let dir = TempDir::new("plugin-badname");
    let bad = c_plugin(
        &dir,
        "libbadname.so",
        &["-DMFS_TEST_ENGINE_NAME=\"Bad Name\""],
    );
    let reason = "invalid engine name \"Bad Name\"";
    assert_refused(&dir, &bad, &bad.display().to_string(), reason);
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
    let check = mfstream_command(dir.path())
        .args(["check", "--config", "engines.toml"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert!(check.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert!(stdout.contains("ok, 2 engines, 2 ready"), "{stdout}");
}

/// The first `len` bytes of `library`, written to `to` (mode 644).
fn cut(library: &Path, len: usize, to: &Path) {
    let bytes = std::fs::read(library).unwrap();
    assert!(len < bytes.len(), "{len} is not a cut of {}", bytes.len());
    std::fs::write(to, &bytes[..len]).unwrap();
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o644)).unwrap();
}

#[test]
fn a_truncated_library_is_refused_not_a_sigbus_and_local_still_runs() {
    let dir = TempDir::new("plugin-truncated");
    let scale = plugin_library("mfstream-plugin-scale");
    for len in [4 * 1024, 64 * 1024, 200 * 1024, 450 * 1024] {
        let bad = dir.join(&format!("libcut{len}.so"));
        cut(&scale, len, &bad);
        assert_refused(
            &dir,
            &bad,
            &bad.display().to_string(),
            "the file is cut short",
        );
        let run = mfstream_command(dir.path())
            .args(["run", "--engine", "local", "--op", "mul", "--arg", "2"])
            .arg("--config")
            .arg(dir.join("engines.toml"))
            .arg(root().join("examples/speed.ndjson"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(
            run.status.success(),
            "cut at {len}: {:?}: {stderr}",
            run.status
        );
        assert_eq!(String::from_utf8_lossy(&run.stdout).lines().count(), 20);
    }
}

/// A registry loaded from `engines.toml` in `dir`, listing `library`.
fn plugin_registry(dir: &TempDir, library: &Path) -> (Registry, Config) {
    let path = dir.join("engines.toml");
    std::fs::write(&path, entry(library)).unwrap();
    let config = Config::from_file(&path).unwrap();
    (Registry::from_config_with_env(&config, &|_| None), config)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_picks_up_a_library_rebuilt_at_the_same_path_while_running_queries_keep_theirs() {
    let dir = TempDir::new("plugin-rebuilt");
    let library = dir.join("libplugin.so");
    std::fs::copy(plugin_library("mfstream-plugin-scale"), &library).unwrap();
    let (registry, config) = plugin_registry(&dir, &library);
    let (sender, mut live) = live_echo(&registry, "scale").await;

    // A rebuild writes a new file at the same path.
    let rebuilt = dir.join("libplugin.so.new");
    std::fs::copy(plugin_library("mfstream-plugin-chaos"), &rebuilt).unwrap();
    std::fs::rename(&rebuilt, &library).unwrap();
    registry.reload(&config);
    let names: Vec<String> = registry.engines().into_iter().map(|e| e.name).collect();
    assert!(names.iter().any(|n| n == "panicky"), "{names:?}");
    assert!(!names.iter().any(|n| n == "scale"), "{names:?}");

    sender.send(Instant::number("after", 2.0)).await.unwrap();
    assert_eq!(live.next().await.unwrap().datetime(), "after");
    drop(sender);
    assert!(live.next().await.is_none());
    assert_eq!(live.status(), QueryStatus::Completed);
    // Loaded libraries leave no private copies behind.
    let pid = std::process::id();
    let litter: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!(".mfstream-{pid}-"))
        })
        .collect();
    assert!(litter.is_empty(), "{litter:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_library_truncated_in_place_under_a_running_query_harms_neither_it_nor_a_reload() {
    let dir = TempDir::new("plugin-cut-in-place");
    let library = dir.join("libplugin.so");
    let scale = plugin_library("mfstream-plugin-scale");
    std::fs::copy(&scale, &library).unwrap();
    let (registry, config) = plugin_registry(&dir, &library);
    let (sender, mut live) = live_echo(&registry, "scale").await;

    // In place: the same inode, now 64 KB long.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&library)
        .unwrap()
        .set_len(64 * 1024)
        .unwrap();
    registry.reload(&config);
    let errors = registry.plugin_errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].to_string().contains("the file is cut short"),
        "{}",
        errors[0]
    );

    for i in 0..3 {
        sender
            .send(Instant::number(format!("after {i}"), 2.0))
            .await
            .unwrap();
        assert_eq!(live.next().await.unwrap().datetime(), format!("after {i}"));
    }
    drop(sender);
    assert!(live.next().await.is_none());
    assert_eq!(live.status(), QueryStatus::Completed);
}

#[test]
fn a_library_in_a_folder_others_can_write_is_refused_with_the_chmod_fix() {
    let dir = TempDir::new("plugin-open-folder");
    let folder = dir.join("plugins");
    std::fs::create_dir(&folder).unwrap();
    let bad = folder.join("libscale2.so");
    std::fs::copy(plugin_library("mfstream-plugin-chaos"), &bad).unwrap();
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o777)).unwrap();
    let fix = format!(
        "the folder {} is writable by group or others (mode 777), so anyone could replace the plugin: run `chmod go-w {}`",
        folder.display(),
        folder.display()
    );
    assert_refused(&dir, &bad, &bad.display().to_string(), &fix);
}

#[test]
fn a_library_in_a_sticky_folder_like_tmp_is_accepted() {
    let dir = TempDir::new("plugin-sticky-folder");
    let folder = dir.join("shared");
    std::fs::create_dir(&folder).unwrap();
    let library = folder.join("libscale.so");
    std::fs::copy(plugin_library("mfstream-plugin-scale"), &library).unwrap();
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let (registry, _) = plugin_registry(&dir, &library);
    assert_eq!(registry.plugin_errors(), []);
    assert!(registry.get("scale").is_ok());
}

#[test]
fn a_library_below_a_folder_others_can_write_further_up_is_refused_naming_that_folder() {
    let dir = TempDir::new("plugin-open-ancestor");
    let open = dir.join("open");
    let folder = open.join("plugins");
    std::fs::create_dir_all(&folder).unwrap();
    let bad = folder.join("libscale.so");
    std::fs::copy(plugin_library("mfstream-plugin-scale"), &bad).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (registry, _) = plugin_registry(&dir, &bad);
    let errors = registry.plugin_errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    let expected = format!(
        "the folder {} is writable by group or others (mode 777)",
        open.display()
    );
    assert!(errors[0].to_string().contains(&expected), "{}", errors[0]);
}

#[test]
fn a_load_removes_the_private_copies_of_processes_that_died_loading() {
    // A process that has gone: its pid, reaped.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let orphan = std::env::temp_dir().join(format!(".mfstream-{pid}-0-0000000000000000-libx.so"));
    std::fs::write(&orphan, b"a copy left by a crash").unwrap();
    let dir = TempDir::new("plugin-orphans");
    let (registry, _) = plugin_registry(&dir, &plugin_library("mfstream-plugin-scale"));
    assert!(registry.get("scale").is_ok());
    assert!(!orphan.exists(), "{} was left", orphan.display());
}

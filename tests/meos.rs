//! The `meos` plugin: MEOS loaded at run time. The tests that need libmeos
//! are ignored unless run with `--include-ignored`; then they require it.

use std::path::Path;

use mfstream_model::ops::{Kind, Op};

use crate::util::*;

/// `mfstream run --engine ENGINE --op OP [--arg X]` over the sample input
/// with `config`, libmeos at `meos` (or none): the events' values, or the
/// failure on stderr.
fn run_values(
    config: &Path,
    engine: &str,
    op: &str,
    meos: Option<&Path>,
) -> Result<Vec<f64>, String> {
    let mut cmd = mfstream_command(&root());
    cmd.args(["run", "--engine", engine, "--op", op])
        .arg("--config")
        .arg(config);
    if Op::from_name(op).is_some_and(Op::takes_arg) {
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
    let output = mfstream_with(&["engines", "--json"], &config);
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
#[ignore = "needs libmeos: eval \"$(jobs/meos/setup.sh)\""]
fn the_meos_plugin_matches_local_for_every_operation() {
    let meos = meos_lib();
    let dir = TempDir::new("plugin-meos");
    let config = dir.join("engines.toml");
    std::fs::write(&config, entry(&plugin_library("mfstream-plugin-meos"))).unwrap();
    // The operations MEOS computes: an entry may have no `meos`.
    for op in Op::on(Kind::Number).filter(|op| op.entry().meos.is_some()) {
        let name = op.name();
        let local = run_values(&config, "local", name, None).unwrap();
        let values = run_values(&config, "meos", name, Some(&meos))
            .unwrap_or_else(|e| panic!("meos {name}: {e}"));
        assert_eq!(values.len(), local.len(), "{name}");
        // MEOS computes degrees as x * 180 / pi, local as x * (180 / pi):
        // they may differ in the last bit. MEOS has no tangent: the plugin's
        // tan is pg_dsin(x) / pg_dcos(x), up to 2 ulps from libm's tan (on
        // these 20 inputs 4 are 1 ulp apart, none 2). sin and cos (pg_dsin,
        // pg_dcos) and the rest give local's bits.
        let ulps = match op {
            Op::Degrees => 1,
            Op::Tan => 2,
            _ => 0,
        };
        for (m, l) in values.iter().zip(&local) {
            let apart = (m.to_bits() as i64).abs_diff(l.to_bits() as i64);
            assert!(
                m == l || (m.signum() == l.signum() && apart <= ulps),
                "meos {name}: {m} against local's {l} ({apart} ulps apart)"
            );
        }
    }
}

#[test]
#[ignore = "needs libmeos: eval \"$(jobs/meos/setup.sh)\""]
fn a_meos_domain_error_fails_the_query_with_meos_message_under_fail_and_is_skipped_by_default() {
    let meos = meos_lib();
    let dir = TempDir::new("plugin-meos-domain");
    let config = dir.join("engines.toml");
    std::fs::write(&config, entry(&plugin_library("mfstream-plugin-meos"))).unwrap();
    let input = dir.join("input.ndjson");
    std::fs::write(
        &input,
        "{\"datetime\":\"a\",\"value\":1}\n{\"datetime\":\"b\",\"value\":0}\n\
         {\"datetime\":\"c\",\"value\":1}\n",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        mfstream_command(dir.path())
            .args(["run", "--engine", "meos", "--op", "ln", "--config"])
            .arg(&config)
            .args(extra)
            .arg(&input)
            .env("MFSTREAM_MEOS_LIB", &meos)
            .output()
            .unwrap()
    };
    // The default: the record at b is skipped, c keeps its datetime.
    let output = run(&[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let datetimes: Vec<String> = stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["datetime"].to_string())
        .collect();
    assert_eq!(datetimes, ["\"a\"", "\"c\""]);
    assert!(
        stdout.lines().nth(1).unwrap().ends_with(r#""skipped":1}"#),
        "{stdout}"
    );
    let output = run(&["--on-error", "fail"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("record at b: MEOS ln: Cannot take logarithm of zero or a negative number"),
        "{stderr}"
    );
    // In the same words out of process (the child reports it, the host fails).
    let isolated = dir.join("isolated.toml");
    let text = entry(&plugin_library("mfstream-plugin-meos"));
    std::fs::write(&isolated, format!("{text}isolation = \"process\"\n")).unwrap();
    let output = mfstream_command(dir.path())
        .args([
            "run",
            "--on-error",
            "fail",
            "--engine",
            "meos",
            "--op",
            "ln",
            "--config",
        ])
        .arg(&isolated)
        .arg(&input)
        .env("MFSTREAM_MEOS_LIB", &meos)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("record at b: the job found no result: MEOS ln: Cannot take logarithm"),
        "{stderr}"
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout).lines().count(), 1);
}

#[test]
fn the_books_meos_plugin_recipe_names_a_config_where_meos_is_the_plugin() {
    let chapter = crate::util::book("plugins.md");
    let section = &chapter[chapter.find("## The `meos` plugin").unwrap()..];
    let build = "cargo build --release -p mfstream-plugin-meos\n";
    assert!(section.contains(build), "the recipe builds the plugin");
    let line = section
        .lines()
        .find(|l| l.starts_with("mfstream run "))
        .expect("the recipe runs a query");
    let words = shell_words::split(line).unwrap();
    let config = words
        .iter()
        .position(|w| w == "--config")
        .map(|i| root().join(&words[i + 1]))
        .expect("the recipe names its own config: the shipped one has a bridge engine meos");
    // The release build above is where the config points.
    let text: toml::Table = toml::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    let path = text["plugin"][0]["path"].as_str().unwrap();
    let mut resolved = std::path::PathBuf::new();
    for part in config.parent().unwrap().join(path).components() {
        match part {
            std::path::Component::ParentDir => assert!(resolved.pop()),
            part => resolved.push(part),
        }
    }
    assert_eq!(
        resolved,
        root().join("target/release/libmfstream_plugin_meos.so")
    );
    // The same config, pointing at this run's build of the plugin (a fresh
    // checkout has no release build): meos is the plugin, nothing clashes.
    let built = plugin_library("mfstream-plugin-meos");
    let dir = std::env::temp_dir().join(format!("mfstream-meos-recipe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("engines.toml");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace(path, built.to_str().unwrap());
    std::fs::write(&copy, text).unwrap();
    let output = mfstream_with(&["engines", "--json"], &copy);
    std::fs::remove_dir_all(&dir).unwrap();
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&output.stdout).unwrap();
    let meos: Vec<_> = listed.iter().filter(|e| e["name"] == "meos").collect();
    assert_eq!(meos.len(), 1, "{listed:?}");
    assert_eq!(meos[0]["kind"], "plugin", "{listed:?}");
}

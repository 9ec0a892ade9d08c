//! The layers are crates, and what each crate pulls in is pinned: Cargo
//! refuses a cycle between crates, and these tests refuse a dependency
//! that goes the wrong way (the store on an engine, the model on anything
//! of ours but the catalogue) or a heavy one where a control plane embeds
//! the registry.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use crate::util::root;

/// `cargo` with `args`, run in the workspace; its stdout.
fn cargo(args: &[&str]) -> String {
    let output = Command::new(option_env!("CARGO").unwrap_or("cargo"))
        .current_dir(root())
        .args(args)
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8")
}

/// Each workspace library's normal dependencies on the other workspace
/// crates, by package name.
fn workspace_edges() -> BTreeMap<String, BTreeSet<String>> {
    let metadata = cargo(&[
        "metadata",
        "--format-version",
        "1",
        "--no-deps",
        "--offline",
    ]);
    let metadata: serde_json::Value = serde_json::from_str(&metadata).expect("metadata is JSON");
    let packages = metadata["packages"].as_array().expect("packages");
    let ours: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str())
                .filter(|name| ours.contains(*name))
                .map(str::to_owned)
                .collect();
            (p["name"].as_str().unwrap_or_default().to_owned(), deps)
        })
        .collect()
}

#[test]
fn each_layer_depends_only_on_the_layers_below_it() {
    let edges = workspace_edges();
    let allowed: &[(&str, &[&str])] = &[
        ("mfstream-ops", &[]),
        ("mfstream-model", &["mfstream-ops"]),
        ("mfstream-engine", &["mfstream-model", "mfstream-plugin"]),
        ("mfstream-registry", &["mfstream-model", "mfstream-engine"]),
        ("mfstream-store", &["mfstream-model"]),
        (
            "mfstream-server",
            &[
                "mfstream-model",
                "mfstream-engine",
                "mfstream-registry",
                "mfstream-store",
            ],
        ),
    ];
    for (package, may) in allowed {
        let deps = edges
            .get(*package)
            .unwrap_or_else(|| panic!("{package} is not in the workspace"));
        let wrong: Vec<&String> = deps.iter().filter(|d| !may.contains(&d.as_str())).collect();
        assert!(
            wrong.is_empty(),
            "{package} depends on {wrong:?}; it may on {may:?} only"
        );
    }
}

/// What a control plane compiles to call `registry.get(name)`: the design
/// card's packages (libloading, tokio, async-trait, serde, toml) and what
/// the core needs, not an HTTP server, a broker client, a database, TLS,
/// an OpenAPI generator, a metrics library or a command-line parser.
#[test]
fn the_registry_crate_builds_on_the_core_packages_only() {
    let tree = cargo(&[
        "tree",
        "-p",
        "mfstream-registry",
        "-e",
        "normal",
        "--prefix",
        "none",
        "--offline",
    ]);
    let crates: BTreeSet<&str> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    for core in ["libloading", "tokio", "async-trait", "serde", "toml"] {
        assert!(crates.contains(core), "the registry no longer uses {core}?");
    }
    let heavy = [
        "axum",
        "hyper",
        "rusqlite",
        "libsqlite3-sys",
        "rdkafka",
        "rdkafka-sys",
        "rumqttc",
        "rustls",
        "ring",
        "utoipa",
        "prometheus-client",
        "clap",
    ];
    let pulled: Vec<&&str> = heavy.iter().filter(|h| crates.contains(**h)).collect();
    assert!(pulled.is_empty(), "mfstream-registry pulls in {pulled:?}");
    assert!(
        crates.len() <= 60,
        "mfstream-registry builds {} crates (54 when this was written): {crates:?}",
        crates.len()
    );
}

//! One path per public item in each library crate (each crate's lib.rs,
//! "Where things are"), and each crate's public surface pinned.
//!
//! rustdoc's JSON output, which would list every path, is nightly-only, so
//! this reads the sources instead and checks the rule that gives one path:
//! the root re-exports only from private modules, and a public module only
//! from its own private submodules. An item defined in a public module has
//! its path there; one defined in a private module has only the re-export.
//! Globs (`*`) in a `pub use` are refused, and so is an item re-exported
//! twice by one module (under two names).

use std::path::{Path, PathBuf};

use crate::util::root;

/// The inline public modules allowed, unchecked: `plugin_host` is the
/// binary's hidden `plugin-host` command (`#[doc(hidden)]`, not API).
const HIDDEN: &[&str] = &["plugin_host"];

/// The workspace crates a public module may re-export from, with the one
/// module that does: the operation catalogue is its own crate
/// (`mfstream-ops`, crates/ops) so that the bridge jobs and plugins share
/// it, and `mfstream_model::ops` is its one path among the layers.
const FOREIGN: &[(&str, &str)] = &[("crates/model/src/ops.rs", "mfstream_ops")];

/// The library crates, lowest layer first: their directory under crates/
/// and their name in paths.
const CRATES: &[(&str, &str)] = &[
    ("model", "mfstream_model"),
    ("engine", "mfstream_engine"),
    ("registry", "mfstream_registry"),
    ("store", "mfstream_store"),
    ("server", "mfstream_server"),
];

/// A module's source: its `mod` declarations and `pub use` paths, at item
/// level (column 0; an inline module's items are indented, so not read).
struct Module {
    file: PathBuf,
    public_mods: Vec<String>,
    inline_public_mods: Vec<String>,
    private_mods: Vec<String>,
    pub_uses: Vec<String>,
}

impl Module {
    fn read(file: &Path) -> Module {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        let mut module = Module {
            file: file.to_owned(),
            public_mods: Vec::new(),
            inline_public_mods: Vec::new(),
            private_mods: Vec::new(),
            pub_uses: Vec::new(),
        };
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            if let Some(name) = declared(line, "pub mod ") {
                module.public_mods.push(name);
            } else if let Some(name) = line.strip_prefix("pub mod ") {
                module
                    .inline_public_mods
                    .push(name.trim_end_matches(" {").to_owned());
            } else if let Some(name) =
                declared(line, "mod ").or_else(|| declared(line, "pub(crate) mod "))
            {
                module.private_mods.push(name);
            } else if let Some(rest) = line.strip_prefix("pub use ") {
                let mut path = rest.to_owned();
                while !path.contains(';') {
                    let next = lines.next().expect("a `pub use` ends with `;`");
                    path.push(' ');
                    path.push_str(next.trim());
                }
                let path = path.split(';').next().unwrap_or_default();
                module
                    .pub_uses
                    .push(path.replace(" }", "}").replace("{ ", "{"));
            }
        }
        module
    }

    /// Where the module is, for a message.
    fn at(&self) -> String {
        let file = self.file.strip_prefix(root()).unwrap_or(&self.file);
        file.display().to_string()
    }

    /// What is wrong with the module's re-exports (`is_root`: it is the
    /// crate root).
    fn problems(&self, is_root: bool) -> Vec<String> {
        let mut problems: Vec<String> = self
            .pub_uses
            .iter()
            .filter_map(|path| check(self, path, is_root))
            .collect();
        problems.extend(inline(self));
        problems.extend(twice(self));
        problems
    }

    /// The file of the submodule `name` declared here.
    fn child(&self, name: &str) -> PathBuf {
        let dir = match self.file.file_name().and_then(|f| f.to_str()) {
            Some("lib.rs" | "mod.rs") => self.file.parent().expect("a parent").to_owned(),
            _ => self.file.with_extension(""),
        };
        let flat = dir.join(format!("{name}.rs"));
        if flat.is_file() {
            flat
        } else {
            dir.join(name).join("mod.rs")
        }
    }
}

/// `name` of a line `{prefix}name;` (a module in its own file).
fn declared(line: &str, prefix: &str) -> Option<String> {
    let name = line.strip_prefix(prefix)?.strip_suffix(';')?;
    name.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
        .then(|| name.to_owned())
}

/// The first segment of `path` after `skip` (`crate::`, `self::`), or of
/// `path` itself.
fn first_segment<'a>(path: &'a str, skip: &str) -> &'a str {
    let path = path.strip_prefix(skip).unwrap_or(path);
    path.split("::").next().unwrap_or_default()
}

/// What is wrong with the `pub use` of `path` in `module` (`is_root`: the
/// crate root, which may re-export from any private module of the crate).
fn check(module: &Module, path: &str, is_root: bool) -> Option<String> {
    let at = module.at();
    if path.contains('*') {
        return Some(format!("{at}: `pub use {path}` is a glob: name each item"));
    }
    let from = if is_root {
        path.strip_prefix("crate::")
            .or_else(|| path.strip_prefix("self::"))
            .map(|rest| first_segment(rest, ""))
    } else if path.starts_with("crate::") || path.starts_with("super::") {
        None
    } else {
        Some(first_segment(path, "self::"))
    };
    let foreign = |name: &str| {
        FOREIGN
            .iter()
            .any(|&(file, krate)| krate == name && module.file.ends_with(file))
    };
    match from {
        Some(name) if !is_root && foreign(name) => None,
        Some(name) if module.private_mods.iter().any(|m| m == name) => None,
        Some(name) if module.public_mods.iter().any(|m| m == name) => Some(format!(
            "{at}: `pub use {path}` gives a second path to items of the public module `{name}`"
        )),
        _ => Some(format!(
            "{at}: `pub use {path}` re-exports from outside this module's private submodules"
        )),
    }
}

/// The inline public modules of `module` that are not [`HIDDEN`]: their
/// items would escape the check.
fn inline(module: &Module) -> Vec<String> {
    let at = module.at();
    module
        .inline_public_mods
        .iter()
        .filter(|name| !HIDDEN.contains(&name.as_str()))
        .map(|name| format!("{at}: `pub mod {name}` is inline: give it a file"))
        .collect()
}

/// The items `module` re-exports more than once (`a::X` and `a::X as Y`).
fn twice(module: &Module) -> Vec<String> {
    let at = module.at();
    let mut items: Vec<String> = module
        .pub_uses
        .iter()
        .flat_map(|path| leaves(path))
        .collect();
    items.sort();
    items
        .windows(2)
        .filter(|pair| pair[0] == pair[1])
        .map(|pair| format!("{at}: `{}` is re-exported twice", pair[0]))
        .collect()
}

/// The items `path` names, without their new names: `a::{X, Y as Z}` is
/// `a::X`, `a::Y` (one level of braces, which is all rustfmt leaves).
fn leaves(path: &str) -> Vec<String> {
    let unnamed = |item: &str| {
        item.split(" as ")
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned()
    };
    match path.split_once('{') {
        Some((prefix, items)) => items
            .trim_end_matches('}')
            .split(',')
            .filter(|item| !item.trim().is_empty())
            .map(|item| format!("{prefix}{}", unnamed(item)))
            .collect(),
        None => vec![unnamed(path)],
    }
}

/// The items `module` declares at item level (column 0) as `pub`: their
/// kind and name.
fn declared_items(module: &Module) -> Vec<String> {
    let text = std::fs::read_to_string(&module.file).unwrap_or_default();
    let kinds = [
        "fn",
        "async fn",
        "unsafe fn",
        "const fn",
        "struct",
        "enum",
        "trait",
        "const",
        "static",
        "type",
        "union",
    ];
    let mut items = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("pub ") else {
            continue;
        };
        for kind in kinds {
            if let Some(after) = rest.strip_prefix(kind).and_then(|r| r.strip_prefix(' ')) {
                let name: String = after
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    items.push(format!("{kind} {name}"));
                }
                break;
            }
        }
    }
    items
}

/// The public surface of the crate in `crates/{dir}`: every item a caller
/// can name, with its one path (`mfstream_model::geo::Crs`), and the
/// problems of its re-exports.
fn surface(dir: &str, name: &str) -> (Vec<String>, Vec<String>) {
    let lib = Module::read(&root().join("crates").join(dir).join("src/lib.rs"));
    let mut problems = lib.problems(true);
    let mut items = Vec::new();
    let mut public: Vec<(String, PathBuf)> = vec![(name.to_owned(), lib.file.clone())];
    while let Some((path, file)) = public.pop() {
        let module = Module::read(&file);
        if path != name {
            problems.extend(module.problems(false));
            items.push(format!("mod {path}"));
        }
        for item in declared_items(&module) {
            let (kind, ident) = item.rsplit_once(' ').unwrap_or_default();
            items.push(format!("{kind} {path}::{ident}"));
        }
        for used in &module.pub_uses {
            for leaf in leaves_named(used) {
                items.push(format!("use {path}::{leaf}"));
            }
        }
        for m in &module.public_mods {
            public.push((format!("{path}::{m}"), module.child(m)));
        }
        for m in &module.inline_public_mods {
            items.push(format!("mod {path}::{m} (hidden)"));
        }
    }
    items.sort();
    (items, problems)
}

/// The names `path` gives: `a::{X, Y as Z}` is `X`, `Z`.
fn leaves_named(path: &str) -> Vec<String> {
    let named = |item: &str| {
        let item = item.trim();
        let name = item.rsplit(" as ").next().unwrap_or(item);
        name.rsplit("::").next().unwrap_or(name).trim().to_owned()
    };
    match path.split_once('{') {
        Some((_, items)) => items
            .trim_end_matches('}')
            .split(',')
            .filter(|item| !item.trim().is_empty())
            .map(named)
            .collect(),
        None => vec![named(path)],
    }
}

#[test]
fn every_public_item_has_one_path() {
    let mut problems = Vec::new();
    for &(dir, name) in CRATES {
        let (items, crate_problems) = surface(dir, name);
        assert!(
            items.len() >= 5,
            "{dir}: only {} public items found",
            items.len()
        );
        problems.extend(crate_problems);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// No crate re-exports another workspace crate's items (except the
/// catalogue's one module, [`FOREIGN`]): an item has its path in the crate
/// that defines it, never a second one in a crate above.
#[test]
fn no_crate_re_exports_another_crates_items() {
    let mut problems = Vec::new();
    for &(dir, _) in CRATES {
        let src = root().join("crates").join(dir).join("src");
        let mut files = vec![src];
        while let Some(path) = files.pop() {
            if path.is_dir() {
                files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for line in text.lines() {
                let line = line.trim_start();
                let foreign = FOREIGN.iter().any(|&(file, _)| path.ends_with(file));
                if line.starts_with("pub use mfstream_") && !foreign {
                    problems.push(format!("{}: {line}", path.display()));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Each library crate's public surface is pinned in `crates/*/public-api.txt`:
/// an item added, moved or removed is a reviewed change of that file
/// (`MFSTREAM_BLESS=1 cargo test --test tests public_api` writes it).
#[test]
fn each_crates_public_surface_is_the_pinned_one() {
    let bless = std::env::var_os("MFSTREAM_BLESS").is_some();
    let mut differ = Vec::new();
    for &(dir, name) in CRATES {
        let (items, _) = surface(dir, name);
        let text = items.join("\n") + "\n";
        let file = root().join("crates").join(dir).join("public-api.txt");
        if bless {
            std::fs::write(&file, &text).unwrap();
            continue;
        }
        let pinned = std::fs::read_to_string(&file).unwrap_or_default();
        if pinned != text {
            let old: Vec<&str> = pinned.lines().collect();
            let new: Vec<&str> = text.lines().collect();
            let added: Vec<&&str> = new.iter().filter(|l| !old.contains(l)).collect();
            let removed: Vec<&&str> = old.iter().filter(|l| !new.contains(l)).collect();
            differ.push(format!(
                "crates/{dir}/public-api.txt: added {added:?}, removed {removed:?}"
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "the public surface changed; review it, then run \
         `MFSTREAM_BLESS=1 cargo test --test tests public_api`:\n{}",
        differ.join("\n")
    );
}

#[test]
fn a_re_export_from_a_public_module_or_outside_is_refused() {
    // The check itself, on a root and on a public module.
    let lib = Module::read(&root().join("crates/model/src/lib.rs"));
    let twice = check(&lib, "crate::aggregate::{Window, Windower}", true);
    assert!(twice.is_some_and(|p| p.contains("public module `aggregate`")));
    assert_eq!(check(&lib, "crate::vocab::{Event, Instant}", true), None);
    let aggregate = Module::read(&root().join("crates/model/src/aggregate/mod.rs"));
    assert!(check(&aggregate, "crate::vocab::Instant", false).is_some());
    assert!(check(&aggregate, "self::window::*", false).is_some());
    assert_eq!(check(&aggregate, "window::{TimeUnit, Window}", false), None);
    // The catalogue crate: from `ops` only.
    let ops = Module::read(&root().join("crates/model/src/ops.rs"));
    assert_eq!(check(&ops, "mfstream_ops::Op", false), None);
    assert!(check(&aggregate, "mfstream_ops::Op", false).is_some());
    assert!(check(&lib, "mfstream_ops::Op", true).is_some());
}

//! One path per public item (src/lib.rs, "Where things are").
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
/// it, and `mfstream_model::ops` is its one path in this crate.
const FOREIGN: &[(&str, &str)] = &[("src/ops.rs", "mfstream_ops")];

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
            .map(|_| first_segment(path, "crate::"))
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

#[test]
fn every_public_item_has_one_path() {
    let lib = Module::read(&root().join("src/lib.rs"));
    assert!(
        lib.public_mods.iter().any(|m| m == "engine") && !lib.pub_uses.is_empty(),
        "src/lib.rs not understood: {:?} {:?}",
        lib.public_mods,
        lib.pub_uses
    );
    let mut problems = lib.problems(true);
    // The public modules, and their public submodules in turn.
    let mut public: Vec<PathBuf> = lib.public_mods.iter().map(|m| lib.child(m)).collect();
    let mut checked = 0;
    while let Some(file) = public.pop() {
        let module = Module::read(&file);
        problems.extend(module.problems(false));
        public.extend(module.public_mods.iter().map(|m| module.child(m)));
        checked += 1;
    }
    assert!(checked >= 7, "only {checked} public modules found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_re_export_from_a_public_module_or_outside_is_refused() {
    // The check itself, on the root and on a public module.
    let lib = Module::read(&root().join("src/lib.rs"));
    let twice = check(&lib, "crate::engine::{Source, StreamEngine}", true);
    assert!(twice.is_some_and(|p| p.contains("public module `engine`")));
    assert_eq!(check(&lib, "crate::vocab::{Event, Instant}", true), None);
    let engine = Module::read(&root().join("src/engine/mod.rs"));
    assert!(check(&engine, "crate::vocab::Instant", false).is_some());
    assert!(check(&engine, "self::source::*", false).is_some());
    assert_eq!(
        check(&engine, "source::{Source, SourceSender}", false),
        None
    );
    // The catalogue crate: from `ops` only.
    let ops = Module::read(&root().join("src/ops.rs"));
    assert_eq!(check(&ops, "mfstream_ops::Op", false), None);
    assert!(check(&engine, "mfstream_ops::Op", false).is_some());
    assert!(check(&lib, "mfstream_ops::Op", true).is_some());
}

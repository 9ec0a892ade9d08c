//! The tables generated from the catalogue are what is checked in: the
//! book's table of operations (`docs/src/cli.md`), the page's menu of them, the Python, Java and C
//! jobs' tables and the tests' C plugin's. When one
//! differs (the catalogue changed, or someone edited a table by hand), this
//! test fails naming the files; `MFSTREAM_BLESS=1` rewrites them.

use std::path::Path;

use mfstream_ops::render::{self, OPERATIONS, REGENERATE};

/// Renders one table.
type Render = fn() -> String;

/// Each file with a generated table, and how to render it.
const FILES: &[(&str, Render)] = &[
    ("docs/src/cli.md", render::markdown),
    ("crates/server/src/page.html", render::html),
    ("jobs/reference/mfstream_job.py", render::python),
    ("jobs/beam/beam_job.py", render::python),
    ("jobs/jvm/LiftedOperation.java", render::java),
    ("jobs/meos/meos_job.c", render::c),
    ("tests/plugins/c/scale.c", render::c_plugin),
];

#[test]
fn checked_in_tables_are_what_the_catalogue_renders() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bless = std::env::var_os("MFSTREAM_BLESS").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for (file, render) in FILES {
        let path = root.join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
        let want =
            render::splice(&text, OPERATIONS, &render()).unwrap_or_else(|e| panic!("{file}: {e}"));
        if want == text {
            continue;
        }
        if bless {
            std::fs::write(&path, want).unwrap_or_else(|e| panic!("{file}: {e}"));
        } else {
            stale.push(*file);
        }
    }
    assert!(
        stale.is_empty(),
        "the operation tables in {stale:?} differ from the catalogue \
         (crates/ops/src/catalogue.rs): run `{REGENERATE}` to regenerate them"
    );
}

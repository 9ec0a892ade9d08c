//! The catalogue's tables for the places that cannot read it as Rust: the
//! book's command-line chapter (`docs/src/cli.md`, Markdown), the server's page (HTML), the Python jobs, the JVM jobs, the
//! MEOS C job and the C plugin the tests build (`tests/plugins/c/scale.c`).
//!
//! Each checked-in file holds its table between two marker lines, in its own
//! comment syntax: one with `BEGIN GENERATED: operations` and one with
//! `END GENERATED: operations`. [`splice`] puts a rendered table between
//! them; the `generated` test of this crate fails when a file's table is
//! not what the catalogue renders, and [`REGENERATE`] rewrites them. The
//! jobs compute numbers only: their tables list the operations that apply
//! to numbers ([`Kind::Number`]).

use std::fmt::Write;

use crate::{Arg, CATALOGUE, Domain, Entry, Kind, Meos, Op};

/// The command that rewrites every generated table from the catalogue.
pub const REGENERATE: &str = "MFSTREAM_BLESS=1 cargo test -p mfstream-ops --test generated";

/// The name in the marker lines of every operations table.
pub const OPERATIONS: &str = "operations";

/// The book's table (`docs/src/cli.md`): every operation (on numbers and on positions), its
/// argument, formula, domain, kinds and MEOS function.
pub fn markdown() -> String {
    let mut out = String::from(
        "| operation | argument | result | has a result for | applies to | MEOS |\n\
         |---|---|---|---|---|---|\n",
    );
    for e in CATALOGUE {
        let kinds: Vec<&str> = e.kinds.iter().map(|k| k.plural()).collect();
        let meos = e
            .meos_function()
            .map_or_else(|| "—".to_owned(), |f| format!("`{f}`"));
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} | {meos} |",
            e.name,
            e.arg,
            // A `|` would end the cell (`|x|`).
            e.formula.replace('|', "\\|"),
            e.domain,
            kinds.join(", ")
        );
    }
    out
}

/// The page's operation menu (`crates/server/src/page.html`): an `<option>` per
/// operation on numbers (the page charts numbers), `data-arg` on those
/// that take an argument, so the page sends its `arg` with them.
pub fn html() -> String {
    let mut out = String::new();
    for e in numeric() {
        let arg = if e.arg.takes_one() { " data-arg" } else { "" };
        let _ = writeln!(out, "    <option{arg}>{}</option>", e.name);
    }
    out
}

/// The Python jobs' tables (`jobs/reference/mfstream_job.py`,
/// `jobs/beam/beam_job.py`): `UNARY` and `BINARY` map a name to its
/// function, `POSITIVE_ONLY` and `NONZERO_ARG` are the domain and argument
/// rules.
pub fn python() -> String {
    let mut out = String::from("UNARY = {\n");
    for e in numeric().filter(|e| !e.arg.takes_one()) {
        let _ = writeln!(out, "    \"{}\": {},", e.name, e.python.unwrap_or("None"));
    }
    out.push_str("}\nBINARY = {\n");
    for e in numeric().filter(|e| e.arg.takes_one()) {
        let _ = writeln!(out, "    \"{}\": {},", e.name, e.python.unwrap_or("None"));
    }
    out.push_str("}\n");
    let set = |names: Vec<String>| {
        if names.is_empty() {
            "set()".to_owned()
        } else {
            format!("{{{}}}", names.join(", "))
        }
    };
    let _ = writeln!(out, "POSITIVE_ONLY = {}", set(quoted(positive_only())));
    let _ = writeln!(out, "NONZERO_ARG = {}", set(quoted(nonzero_arg())));
    out
}

/// The JVM jobs' table (`jobs/jvm/LiftedOperation.java`): class members
/// that validate a name and compute it.
pub fn java() -> String {
    let mut out = String::new();
    let _ = writeln!(out, "    /** Every operation, for messages. */");
    let _ = writeln!(out, "    static final String CATALOGUE = \"{}\";", line());
    out.push('\n');
    out.push_str(
        "    /** Whether {@code op} takes an argument; null when it is no operation. */\n",
    );
    out.push_str("    static Boolean takesArg(String op) {\n        switch (op) {\n");
    for e in numeric() {
        let _ = writeln!(
            out,
            "            case \"{}\": return {};",
            e.name,
            e.arg.takes_one()
        );
    }
    out.push_str("            default: return null;\n        }\n    }\n\n");
    let any = |names: Vec<&str>| {
        if names.is_empty() {
            "false".to_owned()
        } else {
            let tests: Vec<String> = names
                .iter()
                .map(|n| format!("op.equals(\"{n}\")"))
                .collect();
            tests.join(" || ")
        }
    };
    out.push_str("    /** Whether {@code op} is defined for positive values only. */\n");
    let _ = writeln!(
        out,
        "    static boolean positiveOnly(String op) {{\n        return {};\n    }}\n",
        any(positive_only())
    );
    out.push_str("    /** Whether {@code op}'s argument must not be 0. */\n");
    let _ = writeln!(
        out,
        "    static boolean nonZeroArg(String op) {{\n        return {};\n    }}\n",
        any(nonzero_arg())
    );
    out.push_str(
        "    /** {@code op} of {@code x} and the argument {@code a}, before the finiteness check. */\n",
    );
    out.push_str(
        "    static double compute(String op, double x, double a) {\n        switch (op) {\n",
    );
    for e in numeric() {
        let _ = writeln!(
            out,
            "            case \"{}\": return {};",
            e.name,
            e.java.unwrap_or("Double.NaN")
        );
    }
    out.push_str(
        "            default: throw new IllegalArgumentException(\"unknown operation \" + op);\n        }\n    }\n",
    );
    out
}

/// The MEOS C job's table (`jobs/meos/meos_job.c`): `OPS`, each name with
/// its MEOS function, its shape and whether its argument must not be 0,
/// and `OPERATIONS`, the line for the usage message: the operations on
/// numbers that MEOS computes (an entry without `meos` is not the job's).
pub fn c() -> String {
    let mut out = String::from("static const struct op OPS[] = {\n");
    for (e, meos) in with_meos() {
        let shape = match meos {
            Meos::Unary(_) => "UNARY",
            Meos::Degrees(_) => "DEGREES",
            Meos::Binary(_) => "BINARY",
            Meos::Scalar(_) => "SCALAR",
            Meos::Tan => "TAN",
        };
        let nonzero = e.arg == Arg::NonZero;
        let and = if meos == Meos::Tan {
            " /* and pg_dcos */"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "    {{\"{}\", {shape}, \"{}\", {nonzero}}},{and}",
            e.name,
            meos.symbol()
        );
    }
    out.push_str("};\n");
    let _ = writeln!(
        out,
        "#define OPERATIONS \"{}\"",
        Op::line(with_meos().map(|(e, _)| e.op))
    );
    out
}

/// The operations on numbers that MEOS computes, with how.
fn with_meos() -> impl Iterator<Item = (&'static Entry, Meos)> {
    numeric().filter_map(|e| Some((e, e.meos?)))
}

/// The C plugin of the tests' table (`tests/plugins/c/scale.c`): `enum op`,
/// `NAMES` and `LAST_OP`, and `compute`, each operation's libm expression,
/// NaN (no result) where its domain refuses the value.
pub fn c_plugin() -> String {
    let upper: Vec<String> = numeric().map(|e| e.name.to_ascii_uppercase()).collect();
    let mut out = format!("enum op {{ {} }};\n", upper.join(", "));
    out.push_str("static const char *const NAMES[] = {\n");
    for e in numeric() {
        let _ = writeln!(out, "    \"{}\",", e.name);
    }
    out.push_str("};\n");
    let _ = writeln!(
        out,
        "#define LAST_OP {}",
        upper.last().map_or("-1", String::as_str)
    );
    out.push_str(
        "\n/* op of x and the argument a, before the finiteness check. */\n\
         static double compute(enum op op, double x, double a) {\n    (void)a;\n    switch (op) {\n",
    );
    for (e, name) in numeric().zip(&upper) {
        let refuse = if e.domain == Domain::Positive {
            "x <= 0 ? NAN : "
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "        case {name}: return {refuse}{};",
            e.c.unwrap_or("NAN")
        );
    }
    out.push_str("    }\n    return NAN;\n}\n");
    out
}

/// Puts `body` between the marker lines of `name` in `text`: the line
/// holding `BEGIN GENERATED: {name}` and the next one holding
/// `END GENERATED: {name}`, both kept as they are.
pub fn splice(text: &str, name: &str, body: &str) -> Result<String, SpliceError> {
    let begin = format!("BEGIN GENERATED: {name}");
    let end = format!("END GENERATED: {name}");
    let line_after = |at: usize| text[at..].find('\n').map_or(text.len(), |i| at + i + 1);
    let start = text
        .find(&begin)
        .map(line_after)
        .ok_or_else(|| SpliceError::NoMarker(begin.clone()))?;
    let stop = text[start..]
        .find(&end)
        .map(|i| text[..start + i].rfind('\n').map_or(0, |n| n + 1))
        .ok_or_else(|| SpliceError::NoMarker(end.clone()))?;
    if text[stop..].find(&begin).is_some() {
        return Err(SpliceError::Twice(begin));
    }
    Ok(format!("{}{body}{}", &text[..start], &text[stop..]))
}

/// Why a file's generated table cannot be found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpliceError {
    /// A marker line is missing (or the end comes before the begin).
    NoMarker(String),
    /// The table's begin marker comes twice.
    Twice(String),
}

impl std::fmt::Display for SpliceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpliceError::NoMarker(m) => write!(f, "no line holding {m:?}: add the marker lines"),
            SpliceError::Twice(m) => write!(f, "{m:?} is there twice: keep one table"),
        }
    }
}

impl std::error::Error for SpliceError {}

/// The operations the jobs compute: those on numbers.
fn numeric() -> impl Iterator<Item = &'static Entry> {
    CATALOGUE.iter().filter(|e| e.kinds.contains(&Kind::Number))
}

fn positive_only() -> Vec<&'static str> {
    numeric()
        .filter(|e| e.domain == Domain::Positive)
        .map(|e| e.name)
        .collect()
}

fn nonzero_arg() -> Vec<&'static str> {
    numeric()
        .filter(|e| e.arg == Arg::NonZero)
        .map(|e| e.name)
        .collect()
}

fn quoted(names: Vec<&str>) -> Vec<String> {
    names.iter().map(|n| format!("\"{n}\"")).collect()
}

/// The numeric operations as one line ([`Op::catalogue_of`]).
fn line() -> String {
    Op::catalogue_of(Kind::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_replaces_only_the_lines_between_the_markers() {
        let text =
            "a\n# BEGIN GENERATED: operations (x)\nold\nold\n# END GENERATED: operations\nb\n";
        assert_eq!(
            splice(text, "operations", "new\n").unwrap(),
            "a\n# BEGIN GENERATED: operations (x)\nnew\n# END GENERATED: operations\nb\n"
        );
        let empty = "<!-- BEGIN GENERATED: operations -->\n<!-- END GENERATED: operations -->\n";
        assert_eq!(
            splice(empty, "operations", "t\n").unwrap(),
            "<!-- BEGIN GENERATED: operations -->\nt\n<!-- END GENERATED: operations -->\n"
        );
    }

    #[test]
    fn splice_refuses_a_file_without_both_markers_in_order() {
        let no_end = "BEGIN GENERATED: operations\nx\n";
        assert!(
            matches!(splice(no_end, "operations", ""), Err(SpliceError::NoMarker(m)) if m.starts_with("END"))
        );
        let reversed = "END GENERATED: operations\nBEGIN GENERATED: operations\n";
        assert!(splice(reversed, "operations", "").is_err());
        assert!(matches!(
            splice("x\n", "operations", ""),
            Err(SpliceError::NoMarker(_))
        ));
        let twice = "BEGIN GENERATED: operations\nEND GENERATED: operations\nBEGIN GENERATED: operations\nEND GENERATED: operations\n";
        assert!(matches!(
            splice(twice, "operations", ""),
            Err(SpliceError::Twice(_))
        ));
    }

    #[test]
    fn the_job_tables_hold_every_numeric_operation_with_its_rules() {
        let (python, java, c) = (python(), java(), c());
        for op in Op::on(Kind::Number) {
            let e = op.entry();
            let (py, expr) = (e.python.unwrap(), e.java.unwrap());
            assert!(python.contains(&format!("\"{}\": {py},", e.name)), "{op}");
            assert!(
                java.contains(&format!("case \"{}\": return {expr};", e.name)),
                "{op}"
            );
            assert_eq!(
                c.contains(&format!("{{\"{}\", ", e.name)),
                e.meos.is_some(),
                "{op}"
            );
        }
        assert!(python.contains("POSITIVE_ONLY = {\"ln\", \"log10\"}\nNONZERO_ARG = {\"div\"}\n"));
        assert!(java.contains("return op.equals(\"ln\") || op.equals(\"log10\");"));
        assert!(c.contains("{\"div\", BINARY, \"div_tfloat_float\", true},"));
        let served = Op::line(Op::on(Kind::Number).filter(|op| op.entry().meos.is_some()));
        assert!(c.contains(&format!("#define OPERATIONS \"{served}\"")));
        // The jobs compute numbers: no operation on positions is theirs.
        for op in Op::on(Kind::Position) {
            let quoted = format!("\"{}\"", op.name());
            assert!(!python.contains(&quoted), "{op}");
            assert!(!java.contains(&quoted), "{op}");
            assert!(!c.contains(&quoted), "{op}");
            assert!(!html().contains(&format!(">{}<", op.name())), "{op}");
        }
        let plugin = c_plugin();
        assert!(plugin.contains("        case LN: return x <= 0 ? NAN : log(x);\n"));
        assert!(plugin.contains("        case DIV: return x / a;\n"));
        let last = Op::on(Kind::Number)
            .last()
            .map(|op| op.name().to_ascii_uppercase());
        assert!(plugin.contains(&format!("#define LAST_OP {}\n", last.unwrap())));
        assert!(!plugin.contains("SPEED"), "{plugin}");
        let html = html();
        assert!(html.contains("    <option>ln</option>\n"), "{html}");
        assert!(
            html.contains("    <option data-arg>div</option>\n"),
            "{html}"
        );
        let markdown = markdown();
        assert!(
            markdown.contains("| `ln` | none | ln x | x > 0 | numbers | `tfloat_ln` |"),
            "{markdown}"
        );
        assert!(
            markdown.contains("| `div` | one finite number, not 0 | x / a |"),
            "{markdown}"
        );
        assert!(
            markdown.contains(
                "| `distance` | a GeoJSON geometry (`geometry`) | metres (units when planar) to the \
                 geometry, 0 inside a polygon | every instant | positions | \
                 `distance(tgeogpoint, geography)` |"
            ),
            "{markdown}"
        );
    }
}

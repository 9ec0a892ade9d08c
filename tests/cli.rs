//! The `mfstream` command: run, engines, check, signals and pipes.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::Duration;

use crate::util::*;

/// An engines.toml in `dir` with one engine `job` run by `TEST_JOB_CMD`.
fn job_config(dir: &TempDir) -> std::path::PathBuf {
    let path = dir.join("engines.toml");
    std::fs::write(
        &path,
        "[[engine]]\nname = \"job\"\ncmd_env = \"TEST_JOB_CMD\"\nstop_grace_ms = 200\n",
    )
    .unwrap();
    path
}

#[test]
fn run_on_the_local_engine_writes_one_json_event_per_instant() {
    let dir = TempDir::new("cli-run");
    let output = mfstream_command(dir.path())
        .args(["run", "--op", "mul", "--arg", "2", "--property", "speed"])
        .arg(root().join("examples/speed.ndjson"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let lines: Vec<serde_json::Value> = stdout(&output)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 20);
    assert_eq!(
        lines[0],
        serde_json::json!({"datetime":"2026-01-01T00:00:00Z","value":20,"property":"speed","operation":"mul"})
    );
}

/// `serve` bounds how far ahead of its clock an ingested datetime may be;
/// `run` reads files of any time (old logs, synthetic data), 9999 included.
#[test]
fn run_takes_instants_stamped_far_in_the_future() {
    let dir = TempDir::new("cli-run-future");
    let mut child = mfstream_command(dir.path())
        .args(["run", "--op", "mul", "--arg", "2"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            b"{\"datetime\":\"2026-01-01T00:00:00Z\",\"value\":1}\n\
              {\"datetime\":\"9999-12-31T00:00:00Z\",\"value\":2}\n",
        )
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(
        out.contains(r#"{"datetime":"9999-12-31T00:00:00Z","value":4"#),
        "{out}"
    );
}

#[test]
fn run_takes_a_part4_registration_body() {
    let dir = TempDir::new("cli-query");
    let mut child = mfstream_command(dir.path())
        .args(["run", "--query", r#"{"operation":"div","arg":4}"#])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"datetime\":\"2026-01-01T00:00:00Z\",\"value\":10}\n")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    assert!(
        stdout(&output).contains(r#""value":2.5"#),
        "{}",
        stdout(&output)
    );
}

#[test]
fn run_delivers_each_event_while_the_input_is_still_open() {
    let dir = TempDir::new("cli-live");
    let mut child = mfstream_command(dir.path())
        .args(["run", "--op", "abs"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for i in 0..3 {
        writeln!(stdin, "{{\"datetime\":\"t{i}\",\"value\":-{i}.5}}").unwrap();
        stdin.flush().unwrap();
        // The event arrives before any more input is written.
        let line = lines.next().unwrap().unwrap();
        assert!(line.contains(&format!("\"t{i}\"")), "{line}");
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_bad_input_line_fails_the_query_naming_its_number() {
    let dir = TempDir::new("cli-bad-line");
    let input = dir.join("in.ndjson");
    std::fs::write(
        &input,
        "{\"datetime\":\"t1\",\"value\":1}\n\n{\"datetime\":\"t3\",\"value\":\n",
    )
    .unwrap();
    let output = mfstream_command(dir.path())
        .args(["run", "--op", "abs"])
        .arg(&input)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    // The position is said once, as the input's (not serde's "line 1").
    let stderr = stderr(&output);
    assert!(
        stderr
            .contains("input line 3, column 25: not a JSON instant (EOF while parsing a value): "),
        "{stderr}"
    );
    assert!(!stderr.contains(" at line "), "{stderr}");
    assert_eq!(
        stdout(&output).lines().count(),
        1,
        "the good line before it is delivered"
    );
}

#[test]
fn run_fails_a_query_whose_distinct_texts_pass_max_query_state() {
    let dir = TempDir::new("cli-max-query-state");
    let input = dir.join("in.ndjson");
    // 2,000 distinct texts of 1 KiB in one day-long window: about 2 MiB.
    let lines: String = (0..2000)
        .map(|i| {
            format!(
                "{{\"datetime\":\"2026-01-01T00:00:00.{i:06}Z\",\"value\":\"{i}{}\"}}\n",
                "x".repeat(1024)
            )
        })
        .collect();
    std::fs::write(&input, lines).unwrap();
    let query =
        r#"{"aggregation":"COUNT_DISTINCT","window":{"type":"TUMBLING","size":24,"unit":"HOURS"}}"#;
    let run = |budget: &str| {
        mfstream_command(dir.path())
            .args(["run", "--type", "TText", "--query", query])
            .args(["--max-query-state", budget])
            .arg(&input)
            .output()
            .unwrap()
    };
    let failed = run("1000000");
    assert_eq!(failed.status.code(), Some(1), "{}", stderr(&failed));
    assert!(
        stderr(&failed).contains("query state reached --max-query-state (976.6 KiB)"),
        "{}",
        stderr(&failed)
    );
    let fits = run("4000000");
    assert_eq!(fits.status.code(), Some(0), "{}", stderr(&fits));
    assert!(
        stdout(&fits).contains(r#""value":2000"#),
        "{}",
        stdout(&fits)
    );
}

#[test]
fn bad_queries_are_refused_before_anything_runs() {
    let dir = TempDir::new("cli-bad-query");
    let unknown = mfstream_command(dir.path())
        .args(["run", "--op", "sqrt"])
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        stderr(&unknown).contains("ln, exp, log10"),
        "{}",
        stderr(&unknown)
    );
    let div0 = mfstream_command(dir.path())
        .args(["run", "--op", "div", "--arg", "0"])
        .output()
        .unwrap();
    assert_eq!(div0.status.code(), Some(2));
    assert!(stderr(&div0).contains("div by zero"), "{}", stderr(&div0));
    let missing = mfstream_command(dir.path())
        .args(["run", "--op", "mul"])
        .output()
        .unwrap();
    assert!(
        stderr(&missing).contains("needs a scalar argument"),
        "{}",
        stderr(&missing)
    );
}

#[test]
fn an_engine_whose_variable_is_unset_fails_naming_the_variable() {
    let dir = TempDir::new("cli-unset");
    let config = job_config(&dir);
    let output = mfstream_command(dir.path())
        .args(["run", "--engine", "job", "--op", "abs", "--config"])
        .arg(&config)
        .env_remove("TEST_JOB_CMD")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("TEST_JOB_CMD"),
        "{}",
        stderr(&output)
    );
    let listed = mfstream_command(dir.path())
        .args(["engines", "--json"])
        .output()
        .unwrap();
    let engines: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let job = engines
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "job")
        .unwrap();
    assert_eq!(job["kind"], "bridge");
    assert_eq!(job["ready"], false);
    assert!(job["reason"].as_str().unwrap().contains("TEST_JOB_CMD"));
}

#[test]
fn an_unknown_engine_fails_listing_the_known_ones() {
    let dir = TempDir::new("cli-unknown");
    let output = mfstream_command(dir.path())
        .args(["run", "--engine", "storm", "--op", "abs"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("known engines are local"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn check_passes_a_good_file_and_names_line_and_column_of_a_bad_one() {
    let dir = TempDir::new("cli-check");
    let good = mfstream_command(dir.path())
        .arg("check")
        .arg("--config")
        .arg(root().join("engines.toml"))
        .output()
        .unwrap();
    assert!(good.status.success(), "{}", stderr(&good));
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[[engine]]\nname = \"x\"\ncmd_env = \"X_CMD\"\nstop_grace_ms = \"soon\"\n",
    )
    .unwrap();
    let output = mfstream_command(dir.path())
        .arg("check")
        .arg("--config")
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("bad.toml:4:17"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn config_discovery_uses_the_variable_then_the_working_directory() {
    let dir = TempDir::new("cli-discover");
    job_config(&dir);
    let here = mfstream_command(dir.path())
        .args(["engines", "--json"])
        .output()
        .unwrap();
    assert!(stdout(&here).contains("\"job\""));
    let elsewhere = TempDir::new("cli-discover-none");
    let none = mfstream_command(elsewhere.path())
        .args(["engines", "--json"])
        .output()
        .unwrap();
    assert!(!stdout(&none).contains("\"job\""));
    let by_var = mfstream_command(elsewhere.path())
        .args(["engines", "--json"])
        .env("MFSTREAM_CONFIG", dir.join("engines.toml"))
        .output()
        .unwrap();
    assert!(stdout(&by_var).contains("\"job\""));
}

#[test]
fn sigterm_stops_the_query_and_ends_the_jobs_whole_process_group() {
    let dir = TempDir::new("cli-sigterm");
    let config = job_config(&dir);
    let pid_file = dir.join("child");
    let mut child = mfstream_command(dir.path())
        .args(["run", "--engine", "job", "--op", "abs", "--config"])
        .arg(&config)
        .env("TEST_JOB_CMD", format!("sh {}", job("fork_child.sh")))
        .env("CHILD_PID_FILE", &pid_file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{{\"datetime\":\"t\",\"value\":-1}}").unwrap();
    stdin.flush().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(lines.next().unwrap().unwrap().contains("\"t\""));
    let grandchild = read_pid(&pid_file);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143));
    assert!(
        wait_gone(grandchild, Duration::from_secs(10)),
        "the job's child survived"
    );
}

#[test]
fn a_sigkilled_mfstream_takes_its_job_with_it() {
    let dir = TempDir::new("cli-sigkill");
    let config = job_config(&dir);
    let pid_file = dir.join("job");
    let mut child = mfstream_command(dir.path())
        .args(["run", "--engine", "job", "--op", "abs", "--config"])
        .arg(&config)
        .env(
            "TEST_JOB_CMD",
            format!(
                "sh -c 'echo $$ > {}; exec sh {}'",
                pid_file.display(),
                job("echo.sh")
            ),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{{\"datetime\":\"t\",\"value\":-1}}").unwrap();
    stdin.flush().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(lines.next().unwrap().unwrap().contains("\"t\""));
    let job_pid = read_pid(&pid_file);
    child.kill().unwrap();
    child.wait().unwrap();
    // stdin stays open here, so only the parent-death signal can end the job.
    assert!(
        wait_gone(job_pid, Duration::from_secs(10)),
        "the job outlived mfstream"
    );
    drop(stdin);
}

#[test]
fn a_closed_stdout_ends_the_run_successfully() {
    let dir = TempDir::new("cli-pipe");
    let input = dir.join("in.ndjson");
    let mut text = String::new();
    for i in 0..200_000 {
        text.push_str(&format!("{{\"datetime\":\"t{i}\",\"value\":{i}}}\n"));
    }
    std::fs::write(&input, text).unwrap();
    let mut child = mfstream_command(dir.path())
        .args(["run", "--op", "abs"])
        .arg(&input)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(lines.next().unwrap().is_ok());
    drop(lines);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn run_gives_the_same_windows_on_an_aggregating_engine_and_on_local() {
    let dir = TempDir::new("cli-windows");
    let config = dir.join("engines.toml");
    std::fs::write(
        &config,
        "[[engine]]\nname = \"ref\"\ncmd_env = \"TEST_JOB_CMD\"\nframing = \"json\"\naggregates = true\n\n\
         [[engine]]\nname = \"plain\"\ncmd_env = \"TEST_JOB_CMD\"\n",
    )
    .unwrap();
    let job = format!("python3 {}", reference_job());
    let query = r#"{"operation":"mul","arg":1.852,"aggregation":"AVG","window":{"type":"HOPPING","size":3,"unit":"SECONDS","hop":1,"hopUnit":"SECONDS"}}"#;
    let run = |engine: &str| {
        let output = mfstream_command(dir.path())
            .args([
                "run",
                "--engine",
                engine,
                "--property",
                "speed",
                "--query",
                query,
            ])
            .arg("--config")
            .arg(&config)
            .arg(root().join("examples/speed.ndjson"))
            .env("TEST_JOB_CMD", &job)
            .output()
            .unwrap();
        assert!(output.status.success(), "{engine}: {}", stderr(&output));
        stdout(&output)
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .collect::<Vec<_>>()
    };
    let local = run("local");
    assert!(local.len() >= 20, "a window per second: {local:?}");
    for engine in ["ref", "plain"] {
        let windows = run(engine);
        assert_eq!(windows.len(), local.len(), "{engine}");
        for (w, l) in windows.iter().zip(&local) {
            let (a, b) = (w["value"].as_f64().unwrap(), l["value"].as_f64().unwrap());
            assert!(
                (a - b).abs() < 1e-9 * b.abs().max(1.0),
                "{engine}: {w} vs {l}"
            );
            assert_eq!(
                (
                    &w["windowStart"],
                    &w["windowEnd"],
                    &w["count"],
                    &w["aggregation"]
                ),
                (
                    &l["windowStart"],
                    &l["windowEnd"],
                    &l["count"],
                    &l["aggregation"]
                ),
                "{engine}"
            );
        }
    }

    let listed = mfstream_command(dir.path())
        .args(["engines", "--json", "--config"])
        .arg(&config)
        .env("TEST_JOB_CMD", &job)
        .output()
        .unwrap();
    let engines: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let where_: Vec<(&str, &str)> = engines
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap(),
                e["aggregates_in"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        where_,
        [("local", "in-process"), ("ref", "job"), ("plain", "host")]
    );
    let table = mfstream_command(dir.path())
        .args(["engines", "--config"])
        .arg(&config)
        .env("TEST_JOB_CMD", &job)
        .output()
        .unwrap();
    let text = stdout(&table);
    assert!(text.contains("AGGREGATES"), "{text}");
    let ref_line = text.lines().find(|l| l.starts_with("ref ")).unwrap();
    assert!(
        ref_line.contains("transform,aggregate") && ref_line.contains(" job "),
        "{ref_line}"
    );
}

#[test]
fn operation_names_are_read_in_any_case_like_aggregations() {
    let dir = TempDir::new("cli-op-case");
    let input = root().join("examples/speed.ndjson");
    let run = |args: &[&str]| {
        let output = mfstream_command(dir.path())
            .arg("run")
            .args(args)
            .arg(&input)
            .output()
            .unwrap();
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        stdout(&output)
    };
    let lower = run(&["--op", "mul", "--arg", "2"]);
    assert_eq!(lower.lines().count(), 20);
    assert_eq!(run(&["--op", "MUL", "--arg", "2"]), lower);
    assert_eq!(
        run(&["--query", r#"{"operation":"Mul","arg":2}"#]),
        lower,
        "a registration body's operation too"
    );
    let windowed =
        r#"{"operation":"MUL","arg":2,"aggregation":"max","window":{"type":"COUNT","size":5}}"#;
    let out = run(&["--query", windowed]);
    assert_eq!(out.lines().count(), 4, "{out}");
    assert!(out.contains(r#""aggregation":"MAX""#), "{out}");
}

#[test]
fn a_registration_field_of_the_wrong_type_is_named() {
    let dir = TempDir::new("cli-field-type");
    for (body, expected) in [
        (
            r#"{"operation":"mul","arg":"x"}"#,
            r#"mfstream: arg: expected a number, got "x""#,
        ),
        (
            r#"{"operation":7}"#,
            "mfstream: operation: expected a string, got 7",
        ),
        (
            r#"{"aggregation":"AVG","window":{"type":"COUNT","size":2},"emitPartial":"yes"}"#,
            r#"mfstream: emitPartial: expected true or false, got "yes""#,
        ),
    ] {
        let output = mfstream_command(dir.path())
            .args(["run", "--query", body])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{body}");
        assert_eq!(stderr(&output).trim_end(), expected, "{body}");
    }
}

#[test]
fn an_unreadable_config_exits_2_for_check_engines_and_run() {
    let dir = TempDir::new("cli-unreadable");
    let missing = dir.join("missing.toml");
    for args in [&["check"][..], &["engines"], &["run", "--op", "abs"]] {
        let output = mfstream_command(dir.path())
            .args(args)
            .arg("--config")
            .arg(&missing)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let expected = format!("mfstream: could not read {}: ", missing.display());
        assert!(
            stderr(&output).starts_with(&expected),
            "{args:?}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn check_reports_every_problem_of_one_engine_table_at_once() {
    let dir = TempDir::new("cli-check-all");
    let config = dir.join("engines.toml");
    std::fs::write(
        &config,
        "[[engine]]\nname = \"Flink\"\ncmd_env = \"1X\"\nstop_grace_ms = \"fast\"\ncolour = 1\n",
    )
    .unwrap();
    let output = mfstream_with(&["check"], &config);
    assert_eq!(output.status.code(), Some(1));
    let stderr = stderr(&output);
    let at = |line: usize| format!("{}:{line}:", config.display());
    for line in 2..=5 {
        assert!(
            stderr.contains(&at(line)),
            "line {line} not reported: {stderr}"
        );
    }
}

#[test]
fn help_shows_examples_exit_codes_and_environment() {
    let dir = TempDir::new("cli-help");
    let help = |args: &[&str]| {
        let output = mfstream_command(dir.path()).args(args).output().unwrap();
        assert!(output.status.success(), "{args:?}");
        stdout(&output)
    };
    let windowed = r#"--query '{"aggregation":"AVG","window":{"type":"TUMBLING","size":10,"unit":"SECONDS"}}'"#;
    let top = help(&["--help"]);
    for part in [
        "Examples:",
        "mfstream run --op mul --arg 1.852",
        windowed,
        "Exit status:",
        "  2    bad arguments",
        "  130  stopped by SIGINT",
        "Environment:",
        "MFSTREAM_CONFIG",
        "MFAPI_STREAM_ENGINE",
        "RUST_LOG",
        "completions",
    ] {
        assert!(top.contains(part), "--help lacks {part:?}:\n{top}");
    }
    let run = help(&["run", "--help"]);
    assert!(run.contains(windowed), "{run}");
    assert!(run.contains("in any case"), "{run}");
    // `--op` and `--arg` list the catalogue's operations, not a copy: on
    // numbers, then on positions.
    use mfstream_model::ops::{Kind, Op};
    assert!(run.contains(&Op::catalogue_of(Kind::Number)), "{run}");
    for op in Op::on(Kind::Position) {
        assert!(run.contains(op.name()), "{run}");
    }
    assert!(
        run.contains("(distance and geofences take --query)"),
        "{run}"
    );
    assert!(
        run.contains("The operation's scalar argument (add, sub, mul, div)"),
        "{run}"
    );
}

#[test]
fn run_serve_and_check_help_show_the_exit_codes_each_can_end_with() {
    let dir = TempDir::new("cli-help-exit");
    let codes = |command: &str| {
        let output = mfstream_command(dir.path())
            .args([command, "--help"])
            .output()
            .unwrap();
        assert!(output.status.success(), "{command}");
        let help = stdout(&output);
        let section = help
            .split_once("\nExit status:\n")
            .unwrap_or_else(|| panic!("{command} --help has no exit codes:\n{help}"))
            .1;
        section
            .lines()
            .map_while(|line| line.strip_prefix("  ")?.split_whitespace().next())
            .map(|code| code.parse::<u8>().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(codes("run"), [0, 1, 2, 130, 143]);
    assert_eq!(codes("check"), [0, 1, 2]);
    assert_eq!(codes("serve"), [0, 2]);
}

#[test]
fn completions_print_a_script_for_each_shell() {
    let dir = TempDir::new("cli-completions");
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let output = mfstream_command(dir.path())
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(output.status.success(), "{shell}: {}", stderr(&output));
        let script = stdout(&output);
        for word in ["mfstream", "engines", "check", "serve", "config"] {
            assert!(script.contains(word), "{shell}: no {word:?}");
        }
        assert!(
            !script.contains("plugin-host"),
            "{shell}: the hidden command is offered"
        );
    }
    let output = mfstream_command(dir.path())
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn the_books_engines_example_is_what_mfstream_engines_prints() {
    let readme = crate::util::book("cli.md");
    let command = "$ MFAPI_SPARK_CMD='java -cp \"jobs/spark/*\" SparkJob' mfstream engines\n";
    let start = readme
        .find(command)
        .expect("the book's cli.md shows `mfstream engines`")
        + command.len();
    let shown = &readme[start..start + readme[start..].find("```").unwrap()];
    let mut cmd = mfstream_command(&root());
    for (var, _) in std::env::vars().filter(|(var, _)| var.starts_with("MFAPI_")) {
        cmd.env_remove(var);
    }
    let output = cmd
        .env("MFAPI_SPARK_CMD", r#"java -cp "jobs/spark/*" SparkJob"#)
        .arg("engines")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), shown);
}

#[test]
fn run_live_emits_a_tumbling_window_on_time_while_stdin_stays_open() {
    let dir = TempDir::new("cli-run-live");
    let query = r#"{"aggregation":"SUM","window":{"type":"TUMBLING","size":1,"unit":"SECONDS"}}"#;
    let mut child = mfstream_command(dir.path())
        .args(["run", "--live", "--query", query])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let _ = tx.send(line.unwrap());
        }
    });
    let now = rfc3339(std::time::SystemTime::now());
    writeln!(stdin, "{{\"datetime\":\"{now}\",\"value\":1}}").unwrap();
    writeln!(stdin, "{{\"datetime\":\"{now}\",\"value\":2}}").unwrap();
    stdin.flush().unwrap();
    // stdin stays open: the clock, not a later record, closes the window.
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("no window within 20 s of two instants at {now}"));
    let window: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        (&window["value"], &window["count"]),
        (&3.into(), &2.into()),
        "{line}"
    );
    assert!(window.get("partial").is_none(), "{line}");
    drop(stdin);
    assert!(child.wait().unwrap().success());
    assert!(rx.recv().is_err(), "nothing after the end");
}

/// Whether `text` holds an SGR escape (a colour or a style: `ESC [ … m`).
fn has_colour(text: &str) -> bool {
    text.split("\x1b[").skip(1).any(|rest| {
        let end = rest.find(|c: char| !c.is_ascii_digit() && c != ';');
        end.is_some_and(|end| rest[end..].starts_with('m'))
    })
}

/// What `mfstream run --op abs` logs at debug level, one instant in, with
/// `no_color` as `NO_COLOR`, on a terminal (a pseudo-terminal) or a pipe.
fn debug_log(terminal: bool, no_color: Option<&str>) -> String {
    let dir = TempDir::new("cli-colour");
    let input = dir.join("in.ndjson");
    std::fs::write(
        &input,
        "{\"datetime\":\"2026-01-01T00:00:00Z\",\"value\":-1}\n",
    )
    .unwrap();
    let mut cmd = mfstream_command(dir.path());
    cmd.env("RUST_LOG", "debug")
        .env_remove("NO_COLOR")
        .args(["run", "--op", "abs"])
        .arg(&input)
        .stdout(Stdio::null());
    if let Some(value) = no_color {
        cmd.env("NO_COLOR", value);
    }
    if !terminal {
        let output = cmd.output().unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        return stderr(&output);
    }
    use std::os::fd::FromRawFd;
    let (mut leader, mut follower) = (0, 0);
    // SAFETY: openpty writes two new descriptors into the two ints, which
    // are then owned by the File and the OwnedFd below.
    let opened = unsafe {
        libc::openpty(
            &mut leader,
            &mut follower,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(opened, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: openpty returned these descriptors to us, and nothing else owns them.
    let (mut leader, follower) = unsafe {
        (
            std::fs::File::from_raw_fd(leader),
            std::os::fd::OwnedFd::from_raw_fd(follower),
        )
    };
    cmd.stderr(follower);
    let mut child = cmd.spawn().unwrap();
    // The follower's last copy is the child's: its exit ends the terminal.
    drop(cmd);
    assert!(child.wait().unwrap().success());
    let mut log = Vec::new();
    // Linux answers EIO, not end of file, once the follower side is closed.
    let _ = std::io::Read::read_to_end(&mut leader, &mut log);
    String::from_utf8_lossy(&log).into_owned()
}

#[test]
fn logs_are_coloured_only_on_a_terminal_and_never_under_no_color() {
    let piped = debug_log(false, None);
    assert!(piped.contains("DEBUG"), "{piped:?}");
    assert!(!has_colour(&piped), "colour on a pipe: {piped:?}");
    let terminal = debug_log(true, None);
    assert!(terminal.contains("DEBUG"), "{terminal:?}");
    assert!(
        has_colour(&terminal),
        "no colour on a terminal: {terminal:?}"
    );
    let no_color = debug_log(true, Some("1"));
    assert!(no_color.contains("DEBUG"), "{no_color:?}");
    assert!(
        !has_colour(&no_color),
        "colour under NO_COLOR: {no_color:?}"
    );
}

#[test]
fn serve_on_an_address_in_use_says_its_cause_once() {
    let dir = TempDir::new("cli-addr-in-use");
    let mut first = mfstream_command(dir.path())
        .args(["serve", "--addr", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(first.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("mfstream: listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    let second = mfstream_command(dir.path())
        .args(["serve", "--addr", &addr])
        .output()
        .unwrap();
    let _ = first.kill();
    let _ = first.wait();
    assert_eq!(second.status.code(), Some(2));
    let message = stderr(&second);
    assert!(
        message.starts_with(&format!("mfstream: cannot listen on {addr}: ")),
        "{message}"
    );
    assert_eq!(message.matches("os error").count(), 1, "{message}");
}

#[test]
fn run_with_neither_op_nor_query_says_to_give_one() {
    let dir = TempDir::new("cli-no-query");
    let output = mfstream_command(dir.path())
        .arg("run")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(message.contains("<--query <JSON>|--op <OP>>"), "{message}");
}

#[test]
fn completions_offer_the_operations_the_types_and_the_configured_engines() {
    let dir = TempDir::new("cli-completion-values");
    let config = dir.join("engines.toml");
    std::fs::write(
        &config,
        "[[engine]]\nname = \"zebra\"\ncmd_env = \"ZEBRA_CMD\"\n",
    )
    .unwrap();
    for shell in ["bash", "zsh", "fish"] {
        let output = mfstream_with(&["completions", shell], &config);
        assert!(output.status.success(), "{shell}: {}", stderr(&output));
        let script = stdout(&output);
        for value in [
            "log10",
            "radians",
            "cumulativeLength",
            "azimuth",
            "TBoolean",
            "TInteger",
            "zebra",
        ] {
            assert!(script.contains(value), "{shell}: no {value:?}");
        }
    }
    // Completions list the names; the parser still takes any case.
    let output = mfstream_command(dir.path())
        .args(["run", "--op", "ABS", "--type", "treal"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn a_directory_as_input_exits_2_like_a_missing_file() {
    let dir = TempDir::new("cli-dir-input");
    for input in [dir.path().to_owned(), dir.join("missing.ndjson")] {
        let output = mfstream_command(dir.path())
            .args(["run", "--op", "abs"])
            .arg(&input)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        let expected = format!("mfstream: cannot open the input {:?}: ", input);
        assert!(
            stderr(&output).starts_with(&expected),
            "{}",
            stderr(&output)
        );
    }
    let output = mfstream_command(dir.path())
        .args(["run", "--op", "abs"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(stderr(&output).contains("it is a directory: name a file"));
}

#[test]
fn every_problem_check_reports_starts_with_mfstream() {
    let dir = TempDir::new("cli-check-prefix");
    let config = dir.join("engines.toml");
    std::fs::write(
        &config,
        "[[engine]]\nname = \"Flink\"\ncmd_env = \"1X\"\n\n[[plugin]]\npath = \"missing.so\"\n",
    )
    .unwrap();
    let output = mfstream_with(&["check"], &config);
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    let place = format!("{}:", config.display());
    let problems: Vec<&str> = message.lines().filter(|l| l.contains(&place)).collect();
    assert_eq!(problems.len(), 2, "{message}");
    for line in problems {
        assert!(line.starts_with("mfstream: "), "{line}");
    }
    // A file that parses, with a plugin that does not load.
    std::fs::write(&config, "[[plugin]]\npath = \"missing.so\"\n").unwrap();
    let output = mfstream_with(&["check"], &config);
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(
        message.starts_with(&format!("mfstream: {}:2: plugin ", config.display())),
        "{message}"
    );
}

#[test]
fn engines_says_when_mfapi_stream_engine_names_no_engine() {
    let dir = TempDir::new("cli-engines-default");
    let config = job_config(&dir);
    let output = mfstream_command(dir.path())
        .env("MFAPI_STREAM_ENGINE", "storm")
        .args(["engines", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let listing = stdout(&output);
    assert!(!listing.contains("storm  "), "{listing}");
    assert!(!listing.contains("* default engine"), "{listing}");
    assert!(
        listing.ends_with(
            "\n! no default engine: MFAPI_STREAM_ENGINE names \"storm\", which is not an engine: known engines are local, job\n"
        ),
        "{listing}"
    );
}

#[test]
fn help_help_exits_0_and_help_command_is_command_help() {
    let dir = TempDir::new("cli-help-help");
    let run = |args: &[&str]| mfstream_command(dir.path()).args(args).output().unwrap();
    let output = run(&["help", "--help"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("Usage: mfstream help [COMMAND]"));
    let help_run = run(&["help", "run"]);
    assert!(help_run.status.success());
    assert_eq!(stdout(&help_run), stdout(&run(&["run", "--help"])));
    assert_eq!(stdout(&run(&["help"])), stdout(&run(&["--help"])));
    let unknown = run(&["help", "nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        stderr(&unknown).starts_with("mfstream: no command \"nope\": the commands are engines,")
    );
}

#[test]
fn an_operators_variable_wins_over_the_engines_env_in_engines_toml() {
    let dir = TempDir::new("cli-env-rule");
    let config = dir.join("engines.toml");
    let from_file = dir.join("from-file");
    let from_operator = dir.join("from-operator");
    std::fs::write(
        &config,
        format!(
            "[[engine]]\nname = \"job\"\ncmd_env = \"TEST_JOB_CMD\"\n\
             env = {{ ENV_DUMP_FILE = {:?} }}\n",
            from_file.display().to_string()
        ),
    )
    .unwrap();
    let run = |operator: Option<&std::path::Path>| {
        let mut cmd = mfstream_command(dir.path());
        cmd.args(["run", "--engine", "job", "--op", "abs", "--config"])
            .arg(&config)
            .env("TEST_JOB_CMD", format!("sh {}", job("env_dump.sh")))
            .env_remove("ENV_DUMP_FILE");
        if let Some(path) = operator {
            cmd.env("ENV_DUMP_FILE", path);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"{\"datetime\":\"2026-01-01T00:00:00Z\",\"value\":-1}\n")
            .unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
    };
    // Set where mfstream runs: the operator's value reaches the job.
    run(Some(&from_operator));
    assert!(from_operator.exists(), "the job used the operator's value");
    assert!(
        !from_file.exists(),
        "engines.toml's env did not override it"
    );
    // Unset: engines.toml's value is the default.
    run(None);
    assert!(from_file.exists(), "the job used engines.toml's value");
}

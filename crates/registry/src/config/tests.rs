//! Tests of engines.toml parsing and validation.
use std::io;

use super::*;

/// Each problem of `text` as (line, column, message).
fn problems(text: &str) -> Vec<(usize, usize, String)> {
    let error = Config::parse(text, None).expect_err("the text has problems");
    let list = error.problems().iter();
    list.map(|p| (p.line(), p.column(), p.message().to_owned()))
        .collect()
}

/// The one problem of `text`.
fn problem(text: &str) -> (usize, usize, String) {
    let mut list = problems(text);
    assert_eq!(list.len(), 1, "expected one problem, got {list:#?}");
    list.remove(0)
}

/// A valid entry named `name`, with `extra` lines appended.
fn entry(name: &str, extra: &str) -> String {
    format!("[[engine]]\nname = \"{name}\"\ncmd_env = \"MFAPI_X_CMD\"\n{extra}")
}

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }
}

#[test]
fn shipped_engines_toml_parses_into_its_bridge_engines() {
    let config = Config::parse(include_str!("../../../../engines.toml"), None).unwrap();
    assert_eq!(config.default.as_deref(), Some("local"));
    let names: Vec<&str> = config.engines.iter().map(|e| e.name()).collect();
    assert_eq!(
        names,
        [
            "flink",
            "kafka",
            "spark",
            "beam",
            "meos",
            "flink-cluster",
            "reference"
        ]
    );
    // The reference job serves positions (json framing, protocol 2).
    let reference = &config.engines[6];
    assert_eq!(reference.cmd_env, "MFAPI_REFERENCE_CMD");
    assert_eq!(
        (
            reference.options.framing,
            *reference.options.protocol,
            reference.options.positions
        ),
        (Framing::Json, 2, true)
    );
    assert!(config.engines[..6].iter().all(|e| !e.options.positions));
    // flink-cluster runs its jobs on a cluster: no library path here.
    let cluster = &config.engines[5];
    assert_eq!(cluster.cmd_env, "MFAPI_FLINK_CLUSTER_CMD");
    assert_eq!(cluster.libpath_env, None);
    for engine in &config.engines[..5] {
        let upper = engine.name().to_uppercase();
        assert_eq!(engine.cmd_env, format!("MFAPI_{upper}_CMD"));
        assert_eq!(engine.libpath_env, Some(format!("MFAPI_{upper}_LIBPATH")));
        // The Flink job speaks json framing and computes windows itself.
        let framing = match engine.name() {
            "flink" => Framing::Json,
            _ => Framing::Value,
        };
        assert_eq!(engine.options.framing, framing, "{}", engine.name());
        assert!(!engine.options.description.is_empty());
    }
    assert_eq!(
        config.engines[0].options.description,
        "Apache Flink DataStream bridge job"
    );
}

#[test]
fn absent_keys_take_the_bridge_defaults() {
    let config = Config::parse(&entry("flink", ""), None).unwrap();
    let engine = &config.engines[0];
    let defaults = BridgeOptions::new("flink", vec![]);
    let options = &engine.options;
    assert_eq!(options.framing, defaults.framing);
    assert_eq!(*options.protocol, *defaults.protocol);
    assert_eq!(*options.stop_grace, *defaults.stop_grace);
    assert_eq!(*options.max_in_flight, *defaults.max_in_flight);
    assert_eq!(*options.no_progress_timeout, *defaults.no_progress_timeout);
    assert_eq!(*options.no_progress_timeout, Some(Duration::from_secs(120)));
    assert_eq!(options.restart, None);
    assert_eq!(options.description, "");
    assert_eq!(engine.line, 2);
    // Each default says so, and which entry left its key unset.
    assert_eq!(
        options.no_progress_timeout.origin.to_string(),
        "default: engine \"flink\" at engines.toml:2 sets no no_progress_timeout_ms"
    );
    assert_eq!(config.default, None);
}

#[test]
fn every_key_is_read() {
    let text = entry(
        "flink",
        "description = \"d\"\nlibpath_env = \"MFAPI_X_LIB\"\nstop_grace_ms = 0\n\
         max_in_flight = 16\nno_progress_timeout_ms = 30000\n\
         env = { JAVA_OPTS = \"-Xmx512m\", A = \"1\" }\n\
         [engine.restart]\nmax = 3\nbackoff_ms = 50\nbackoff_max_ms = 400\n",
    );
    let engine = &Config::parse(&text, None).unwrap().engines[0];
    let options = &engine.options;
    assert_eq!(options.description, "d");
    assert_eq!(engine.libpath_env.as_deref(), Some("MFAPI_X_LIB"));
    assert_eq!(*options.stop_grace, Duration::ZERO);
    assert_eq!(*options.max_in_flight, 16);
    assert_eq!(*options.no_progress_timeout, Some(Duration::from_secs(30)));
    // Each value set says where: the file, its line, the entry and the key.
    assert_eq!(
        options.no_progress_timeout.origin.to_string(),
        "from engines.toml:8 (engine \"flink\", key no_progress_timeout_ms)"
    );
    let env = [("A", "1"), ("JAVA_OPTS", "-Xmx512m")].map(|(k, v)| (k.into(), v.into()));
    assert_eq!(options.env, env);
    let restart = RestartPolicy {
        max_restarts: 3,
        backoff: Duration::from_millis(50),
        backoff_max: Duration::from_millis(400),
    };
    assert_eq!(options.restart, Some(restart));
}

#[test]
fn error_renders_file_line_column_and_underlines_the_value() {
    let text = entry("flink", "stop_grace_ms = \"fast\"\n");
    let path = Path::new("/tmp/x/engines.toml");
    let error = Config::parse(&text, Some(path)).unwrap_err();
    let expected = "\
/tmp/x/engines.toml:4:17: invalid type: string \"fast\", expected u64 for key `stop_grace_ms`
  |
4 | stop_grace_ms = \"fast\"
  |                 ^^^^^^";
    assert_eq!(error.to_string(), expected);
}

#[test]
fn text_without_a_path_is_called_engines_toml() {
    let error = Config::parse("default = 1\n", None).unwrap_err();
    assert!(
        error.to_string().starts_with("engines.toml:1:11: "),
        "{error}"
    );
}

#[test]
fn several_problems_render_as_separate_blocks() {
    let text = format!("{}{}", entry("A", ""), entry("B", ""));
    let rendered = Config::parse(&text, None).unwrap_err().to_string();
    let blocks: Vec<&str> = rendered.split("\n\n").collect();
    assert_eq!(blocks.len(), 2, "{rendered}");
    assert!(blocks[0].starts_with("engines.toml:2:8: invalid engine name \"A\""));
    assert!(blocks[1].starts_with("engines.toml:5:8: invalid engine name \"B\""));
}

#[test]
fn unknown_key_points_at_the_key_and_lists_the_allowed_keys() {
    let (line, column, message) = problem(&entry("flink", "stop_grace = 5\n"));
    assert_eq!((line, column), (4, 1));
    assert!(message.starts_with("unknown field `stop_grace`, expected one of `name`"));
    for key in [
        "cmd_env",
        "stop_grace_ms",
        "no_progress_timeout_ms",
        "env",
        "restart",
    ] {
        assert!(message.contains(&format!("`{key}`")), "{message}");
    }
}

#[test]
fn unknown_top_level_and_restart_keys_are_refused() {
    let (line, column, message) = problem("defualt = \"local\"\n");
    assert_eq!((line, column), (1, 1));
    assert_eq!(
        message,
        "unknown field `defualt`, expected one of `default`, `engine`, `plugin`"
    );

    let text = entry("flink", "[engine.restart]\nmax = 1\nbackof_ms = 5\n");
    let (line, column, message) = problem(&text);
    assert_eq!((line, column), (6, 1));
    assert!(message.starts_with("unknown field `backof_ms`, expected one of `max`"));
}

#[test]
fn wrong_type_points_at_the_value_and_names_the_key() {
    let (line, column, message) = problem(&entry("flink", "max_in_flight = 1.5\n"));
    assert_eq!((line, column), (4, 17));
    assert_eq!(
        message,
        "invalid type: floating point `1.5`, expected u64 for key `max_in_flight`"
    );

    let text = entry("flink", "[engine.restart]\nmax = \"3\"\n");
    let (line, column, message) = problem(&text);
    assert_eq!((line, column), (5, 7));
    assert!(message.ends_with("for key `restart.max`"), "{message}");

    let (line, column, message) = problem(&entry("flink", "env = { A = 1 }\n"));
    assert_eq!((line, column), (4, 13));
    assert!(message.ends_with("for key `env.A`"), "{message}");
}

#[test]
fn unknown_framing_lists_the_framings() {
    let (line, column, message) = problem(&entry("flink", "framing = \"lines\"\n"));
    assert_eq!((line, column), (4, 11));
    assert!(message.starts_with("unknown variant `lines`, expected `value` or `json`"));
}

#[test]
fn missing_required_key_points_at_the_entry() {
    let (line, column, message) = problem("[[engine]]\nname = \"flink\"\n");
    assert_eq!((line, column), (1, 1));
    assert_eq!(message, "missing field `cmd_env`");
}

#[test]
fn single_bracket_engine_table_suggests_double_brackets() {
    let (line, column, message) = problem("[engine]\nname = \"flink\"\n");
    assert_eq!((line, column), (1, 1));
    assert!(
        message.ends_with("write each entry under an [[engine]] header"),
        "{message}"
    );
}

#[test]
fn syntax_error_points_at_where_parsing_stopped() {
    let (line, column, message) = problem("[[engine]]\nname = \"flink\ncmd_env = \"X\"\n");
    assert_eq!((line, column), (2, 14));
    assert!(message.starts_with("invalid basic string"), "{message}");
}

#[test]
fn bad_engine_name_points_at_the_name() {
    for bad in ["Flink", "9lives", "", "has space", &"a".repeat(64)] {
        let (line, column, message) = problem(&entry(bad, ""));
        assert_eq!((line, column), (2, 8));
        assert!(
            message.starts_with(&format!("invalid engine name {bad:?}: use")),
            "{message}"
        );
    }
    assert!(Config::parse(&entry(&"a".repeat(63), ""), None).is_ok());
    assert!(Config::parse(&entry("my-flink_2", ""), None).is_ok());
}

#[test]
fn local_is_reserved_for_the_builtin_engine() {
    let (line, column, message) = problem(&entry("local", ""));
    assert_eq!((line, column), (2, 8));
    assert!(message.contains("\"local\" is reserved"), "{message}");
}

#[test]
fn duplicate_name_points_at_the_second_and_names_the_first() {
    let text = format!(
        "default = \"local\"\n\n{}{}",
        entry("flink", ""),
        entry("flink", "")
    );
    let (line, column, message) = problem(&text);
    assert_eq!((line, column), (7, 8));
    assert_eq!(
        message,
        "engine \"flink\" is defined twice: first at engines.toml:4"
    );
}

#[test]
fn bad_env_var_names_are_refused_wherever_they_appear() {
    let text = "[[engine]]\nname = \"flink\"\ncmd_env = \"MFAPI-FLINK-CMD\"\n\
                libpath_env = \"1LIB\"\nenv = { \"JAVA OPTS\" = \"x\" }\n";
    let found = problems(text);
    let at: Vec<(usize, usize)> = found.iter().map(|(l, c, _)| (*l, *c)).collect();
    assert_eq!(at, [(3, 11), (4, 15), (5, 9)]);
    assert!(
        found[0]
            .2
            .starts_with("invalid environment variable name \"MFAPI-FLINK-CMD\" for key `cmd_env`")
    );
    assert!(found[1].2.contains("\"1LIB\" for key `libpath_env`"));
    assert!(found[2].2.contains("\"JAVA OPTS\" for key `env`"));
}

#[test]
fn env_may_not_set_the_variables_mfstream_sets() {
    let text = entry(
        "flink",
        "env = { LD_LIBRARY_PATH = \"/x\", MFSTREAM_QUERY = \"{}\" }\n",
    );
    let found = problems(&text);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_eq!((found[0].0, found[0].1), (4, 9));
    assert!(found[0].2.starts_with("`env` may not set LD_LIBRARY_PATH"));
    assert!(found[0].2.contains("use libpath_env"));
    assert!(found[1].2.starts_with("`env` may not set MFSTREAM_QUERY"));
}

#[test]
fn out_of_range_values_point_at_the_value_and_give_the_range() {
    let text = entry(
        "flink",
        "stop_grace_ms = 600001\nmax_in_flight = 0\nno_progress_timeout_ms = 0\n\
         [engine.restart]\nmax = 1001\n",
    );
    let found = problems(&text);
    let expected = [
        (
            4,
            17,
            "value 600001 is out of range for key `stop_grace_ms`: use 0 to 600000",
        ),
        (
            5,
            17,
            "value 0 is out of range for key `max_in_flight`: use 1 to 16777216",
        ),
        (
            6,
            26,
            "value 0 is out of range for key `no_progress_timeout_ms`: use 1 to 86400000",
        ),
        (
            8,
            7,
            "value 1001 is out of range for key `restart.max`: use 1 to 1000",
        ),
    ];
    let expected = expected.map(|(l, c, m)| (l, c, m.to_owned()));
    assert_eq!(found, expected);
}

#[test]
fn negative_value_is_refused_as_a_type_error() {
    let (line, column, message) = problem(&entry("flink", "stop_grace_ms = -1\n"));
    assert_eq!((line, column), (4, 17));
    assert!(message.contains("integer `-1`"), "{message}");
}

#[test]
fn backoff_max_below_backoff_is_refused() {
    let text = entry(
        "flink",
        "[engine.restart]\nmax = 1\nbackoff_ms = 500\nbackoff_max_ms = 50\n",
    );
    let (line, column, message) = problem(&text);
    assert_eq!((line, column), (7, 18));
    assert!(
        message.contains("less than restart.backoff_ms (500)"),
        "{message}"
    );

    let text = entry("flink", "[engine.restart]\nmax = 1\nbackoff_ms = 20000\n");
    let (line, column, message) = problem(&text);
    assert_eq!((line, column), (6, 14));
    assert!(message.ends_with("set backoff_max_ms too"), "{message}");
}

#[test]
fn restart_with_json_framing_is_refused_at_the_restart_table() {
    let text = entry("flink", "framing = \"json\"\n[engine.restart]\nmax = 3\n");
    let (line, column, message) = problem(&text);
    assert_eq!((line, column), (5, 1));
    assert_eq!(
        message,
        "restart requires framing = \"value\" or positions = true: with json framing only a \
         position query's records pair with their answers, and the records a crashed job had \
         not answered cannot be replayed otherwise"
    );
    let inline = entry("flink", "framing = \"json\"\nrestart = { max = 3 }\n");
    assert_eq!(problem(&inline).0, 5);
}

#[test]
fn restart_with_json_framing_is_taken_for_an_engine_serving_positions() {
    let text = entry(
        "reference",
        "framing = \"json\"\npositions = true\n[engine.restart]\nmax = 3\n",
    );
    let config = Config::parse(&text, None).unwrap();
    let engine = &config.engines[0];
    assert!(engine.options.positions);
    assert_eq!(
        engine.options.restart.as_ref().map(|r| r.max_restarts),
        Some(3)
    );
}

#[test]
fn positions_needs_json_framing_and_is_off_by_default() {
    let text = entry("ref", "positions = true\n");
    let (line, column, message) = problem(&text);
    assert_eq!((line, column), (4, 13));
    assert!(
        message.starts_with("positions = true requires framing = \"json\""),
        "{message}"
    );
    let json = entry("ref", "framing = \"json\"\npositions = true\n");
    let config = Config::parse(&json, None).unwrap();
    assert!(config.engines[0].options.positions);
    let plain = Config::parse(&entry("ref", "framing = \"json\"\n"), None).unwrap();
    assert!(!plain.engines[0].options.positions);
}

#[test]
fn aggregates_needs_json_framing_and_is_off_by_default() {
    let text = entry("flink", "aggregates = true\n");
    let (line, column, message) = problem(&text);
    assert_eq!((line, column), (4, 14));
    assert!(
        message.starts_with("aggregates = true requires framing = \"json\""),
        "{message}"
    );
    let json = entry("flink", "framing = \"json\"\naggregates = true\n");
    let config = Config::parse(&json, None).unwrap();
    assert!(config.engines[0].options.aggregates);
    let plain = Config::parse(&entry("flink", ""), None).unwrap();
    assert!(!plain.engines[0].options.aggregates);
}

#[test]
fn unknown_default_lists_the_known_engines() {
    let text = format!(
        "default = \"flnk\"\n{}{}",
        entry("flink", ""),
        entry("kafka", "")
    );
    let (line, column, message) = problem(&text);
    assert_eq!((line, column), (1, 11));
    assert_eq!(
        message,
        "unknown engine \"flnk\" for key `default`: known engines are \"local\", \"flink\", \"kafka\""
    );
    let local = format!("default = \"local\"\n{}", entry("flink", ""));
    assert!(Config::parse(&local, None).is_ok());
    let configured = format!("default = \"flink\"\n{}", entry("flink", ""));
    assert!(Config::parse(&configured, None).is_ok());
}

#[test]
fn every_bad_entry_is_reported_in_file_order() {
    let text = format!(
        "default = \"nowhere\"\n{}{}{}{}",
        entry("flink", "stop_grace_ms = \"fast\"\n"),
        entry("Kafka", "max_in_flight = 0\n"),
        entry("spark", "colour = \"red\"\n"),
        entry("beam", "framing = \"json\"\nrestart = { max = 1 }\n"),
    );
    let lines: Vec<usize> = problems(&text).iter().map(|(line, _, _)| *line).collect();
    assert_eq!(lines, [1, 5, 7, 9, 13, 18]);

    // The unknown default is not reported when an entry without a name
    // might have been the one it names.
    let text = format!(
        "default = \"nowhere\"\n[[engine]]\ncmd_env = \"X\"\n{}",
        entry("flink", "")
    );
    let lines: Vec<usize> = problems(&text).iter().map(|(line, _, _)| *line).collect();
    assert_eq!(lines, [2]);

    let text = format!(
        "default = \"nowhere\"\n{}{}",
        entry("Flink", ""),
        entry("Flink", "")
    );
    let lines: Vec<usize> = problems(&text).iter().map(|(line, _, _)| *line).collect();
    assert_eq!(lines, [1, 3, 6, 6]);
}

#[test]
fn every_problem_of_one_engine_table_is_reported_at_once() {
    let text = "\
[[engine]]
name = \"Bad Name\"
cmd_env = \"1X\"
stop_grace_ms = \"fast\"
colour = \"red\"
max_in_flight = 0
framing = \"jsn\"
aggregates = true
";
    let found = problems(text);
    let lines: Vec<usize> = found.iter().map(|(line, _, _)| *line).collect();
    // Not `aggregates = true requires framing = "json"`: the framing is
    // reported already, and the check would only repeat it.
    assert_eq!(lines, [2, 3, 4, 5, 6, 7], "{found:#?}");
    assert!(found[0].2.starts_with("invalid engine name \"Bad Name\""));
    assert!(
        found[1]
            .2
            .ends_with("for key `cmd_env`: use letters, digits and '_', not starting with a digit")
    );
    assert!(
        found[2].2.ends_with("for key `stop_grace_ms`"),
        "{}",
        found[2].2
    );
    assert!(found[3].2.starts_with("unknown field `colour`"));
    assert!(found[4].2.contains("for key `max_in_flight`"));
    assert!(found[5].2.starts_with("unknown variant `jsn`"));

    // A required key of the wrong type is reported once, not again as missing.
    let found = problems("[[engine]]\nname = 7\ncmd_env = 8\n");
    let lines: Vec<usize> = found.iter().map(|(line, _, _)| *line).collect();
    assert_eq!(lines, [2, 3], "{found:#?}");
    let found = problems("[[plugin]]\npath = 1\nisolation = \"none\"\ncolour = 2\n");
    let lines: Vec<usize> = found.iter().map(|(line, _, _)| *line).collect();
    assert_eq!(lines, [2, 3, 4], "{found:#?}");
}

#[test]
fn from_file_names_the_path_in_problems_and_keeps_it() {
    let dir = std::env::temp_dir().join(format!("mfstream-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("engines.toml");
    std::fs::write(&path, entry("flink", "")).unwrap();
    let config = Config::from_file(&path).unwrap();
    assert_eq!(config.path.as_deref(), Some(path.as_path()));

    std::fs::write(&path, "default = 3\n").unwrap();
    let error = Config::from_file(&path).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with(&format!("{}:1:11: ", path.display()))
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unreadable_file_is_an_error_naming_the_path_and_the_os_error() {
    let path = std::env::temp_dir().join("mfstream-no-such-dir/engines.toml");
    let error = Config::from_file(&path).unwrap_err();
    assert_eq!(
        error.io_error().map(io::Error::kind),
        Some(io::ErrorKind::NotFound)
    );
    assert!(error.problems().is_empty());
    let message = error.to_string();
    assert!(message.starts_with(&format!("could not read {}: ", path.display())));
    assert!(message.contains("os error"), "{message}");
}

fn flink() -> EngineDef {
    let text = entry(
        "flink",
        "libpath_env = \"MFAPI_X_LIB\"\nenv = { A = \"1\" }\n",
    );
    Config::parse(&text, None).unwrap().engines.remove(0)
}

#[test]
fn resolve_with_the_command_unset_names_the_variable() {
    let reason = flink().resolve(&env_of(&[])).unwrap_err();
    assert!(
        matches!(&reason, ResolveError::Unset { var } if var == "MFAPI_X_CMD"),
        "{reason}"
    );
    assert_eq!(
        reason.to_string(),
        "MFAPI_X_CMD is not set (the bridge-job command prefix)"
    );
}

#[test]
fn resolve_with_the_command_empty_names_the_variable() {
    for empty in ["", "  \t"] {
        let reason = flink()
            .resolve(&env_of(&[("MFAPI_X_CMD", empty)]))
            .unwrap_err();
        assert!(matches!(reason, ResolveError::Empty { .. }), "{reason}");
        assert_eq!(
            reason.to_string(),
            "MFAPI_X_CMD is empty (the bridge-job command prefix)"
        );
    }
}

#[test]
fn resolve_with_an_unbalanced_quote_names_the_variable() {
    let env = env_of(&[("MFAPI_X_CMD", "java -jar 'job.jar")]);
    let reason = flink().resolve(&env).unwrap_err();
    assert!(matches!(reason, ResolveError::Split { .. }), "{reason}");
    let reason = reason.to_string();
    assert!(
        reason.starts_with("MFAPI_X_CMD does not split into words"),
        "{reason}"
    );
    assert!(reason.contains("'job.jar"), "{reason}");
}

#[test]
fn resolve_with_an_empty_program_word_names_the_variable() {
    let reason = flink()
        .resolve(&env_of(&[("MFAPI_X_CMD", "'' job")]))
        .unwrap_err();
    assert!(matches!(reason, ResolveError::NoProgram { .. }), "{reason}");
    assert_eq!(
        reason.to_string(),
        "MFAPI_X_CMD names no program: \"'' job\""
    );
}

#[test]
fn resolve_splits_the_command_honouring_quotes() {
    let env = env_of(&[("MFAPI_X_CMD", r#"java -cp "/opt/my jobs/*" 'Main Class'"#)]);
    let options = flink().resolve(&env).unwrap();
    assert_eq!(
        options.argv,
        ["java", "-cp", "/opt/my jobs/*", "Main Class"]
    );
    assert_eq!(options.name, "flink");
    assert_eq!(options.env, [("A".to_owned(), "1".to_owned())]);
    assert_eq!(options.libpath, None);
}

#[test]
fn resolve_lets_the_process_environment_win_over_the_entrys_env() {
    let text = entry(
        "flink",
        "env = { MFSTREAM_FLINK_LISTEN = \"127.0.0.1\", TIMEOUT = \"60\", EMPTY = \"x\" }\n",
    );
    let engine = Config::parse(&text, None).unwrap().engines.remove(0);
    // Unset where mfstream runs: the entry's values.
    let unset = env_of(&[("MFAPI_X_CMD", "job")]);
    let options = engine.resolve(&unset).unwrap();
    let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()
    };
    assert_eq!(
        options.env,
        pairs(&[
            ("EMPTY", "x"),
            ("MFSTREAM_FLINK_LISTEN", "127.0.0.1"),
            ("TIMEOUT", "60")
        ])
    );
    // Set by the operator, even empty: the operator's.
    let set = env_of(&[
        ("MFAPI_X_CMD", "job"),
        ("MFSTREAM_FLINK_LISTEN", "10.0.0.7"),
        ("EMPTY", ""),
    ]);
    let options = engine.resolve(&set).unwrap();
    assert_eq!(
        options.env,
        pairs(&[
            ("EMPTY", ""),
            ("MFSTREAM_FLINK_LISTEN", "10.0.0.7"),
            ("TIMEOUT", "60")
        ])
    );
}

#[test]
fn resolve_fills_the_library_path_unless_it_is_empty() {
    let set = env_of(&[("MFAPI_X_CMD", "job"), ("MFAPI_X_LIB", "/opt/meos/lib")]);
    assert_eq!(
        flink().resolve(&set).unwrap().libpath.as_deref(),
        Some("/opt/meos/lib")
    );
    let empty = env_of(&[("MFAPI_X_CMD", "job"), ("MFAPI_X_LIB", "")]);
    assert_eq!(flink().resolve(&empty).unwrap().libpath, None);
}

#[test]
fn plugin_paths_are_relative_to_the_file_and_isolation_defaults_to_in_process() {
    let text = "[[plugin]]\npath = \"lib/libscale.so\"\n\n[[plugin]]\npath = \"/opt/libx.so\"\nisolation = \"process\"\n";
    let config = Config::parse(text, Some(Path::new("/etc/mfstream/engines.toml"))).unwrap();
    let plugins = &config.plugins;
    assert_eq!(plugins[0].path, Path::new("/etc/mfstream/lib/libscale.so"));
    assert_eq!(plugins[0].written, "lib/libscale.so");
    assert_eq!(plugins[0].isolation, Isolation::InProcess);
    assert_eq!(plugins[0].line, 2);
    assert_eq!(plugins[1].path, Path::new("/opt/libx.so"));
    assert_eq!(plugins[1].isolation, Isolation::Process);
}

#[test]
fn bad_plugin_entries_are_errors_with_line_and_column() {
    let (line, column, message) = problem("[[plugin]]\npath = \"a.so\"\nisolation = \"thread\"\n");
    assert_eq!((line, column), (3, 13));
    assert!(
        message.contains("`in-process`") && message.contains("`process`"),
        "{message}"
    );

    let (line, _, message) = problem("[[plugin]]\npath = \"a.so\"\nsymbol = \"x\"\n");
    assert_eq!(line, 3);
    assert!(message.starts_with("unknown field `symbol`"), "{message}");

    let (line, _, message) = problem("[[plugin]]\nisolation = \"process\"\n");
    assert_eq!(line, 1);
    assert!(message.contains("missing field `path`"), "{message}");

    let (line, column, message) =
        problem("[[plugin]]\npath = \"a.so\"\n[[plugin]]\npath = \"a.so\"\n");
    assert_eq!((line, column), (4, 8));
    assert_eq!(
        message,
        "plugin \"a.so\" is listed twice: first at engines.toml:2"
    );

    let (_, _, message) = problem("[plugin]\npath = \"a.so\"\n");
    assert!(message.contains("[[plugin]]"), "{message}");
}

#[test]
fn a_plugin_next_to_a_config_named_without_a_folder_is_looked_for_in_this_folder() {
    let config = Config::parse(
        "[[plugin]]\npath = \"libx.so\"\n",
        Some(Path::new("engines.toml")),
    );
    assert_eq!(config.unwrap().plugins[0].path, Path::new("./libx.so"));
}

#[test]
fn protocol_is_1_by_default_2_when_set_and_anything_else_is_refused() {
    let parse = |extra: &str| Config::parse(&entry("job", extra), None);
    assert_eq!(*parse("").unwrap().engines[0].options.protocol, 1);
    let two = parse("protocol = 2\n").unwrap();
    assert_eq!(*two.engines[0].options.protocol, 2);
    let env = env_of(&[("MFAPI_X_CMD", "job")]);
    assert_eq!(*two.engines[0].resolve(&env).unwrap().protocol, 2);
    assert_eq!(
        problem(&entry("job", "protocol = 3\n")),
        (
            4,
            12,
            "value 3 is out of range for key `protocol`: use 1 to 2".to_owned()
        )
    );
    let (_, _, message) = problem(&entry("job", "env = { MFSTREAM_PROTOCOL = \"1\" }\n"));
    assert!(
        message.starts_with("`env` may not set MFSTREAM_PROTOCOL"),
        "{message}"
    );
}

#[test]
fn each_problem_says_its_kind() {
    let kind = |text: &str| {
        let error = Config::parse(text, None).expect_err("the text has problems");
        let kinds: Vec<ConfigProblemKind> =
            error.problems().iter().map(ConfigProblem::kind).collect();
        assert_eq!(kinds.len(), 1, "{error}");
        kinds[0]
    };
    let twice = format!("{}{}", entry("a", ""), entry("a", ""));
    let cases = [
        ("[[engine]\n".to_owned(), ConfigProblemKind::Malformed),
        (entry("a", "colour = 1\n"), ConfigProblemKind::Malformed),
        (twice, ConfigProblemKind::Duplicate),
        (
            format!("default = \"b\"\n{}", entry("a", "")),
            ConfigProblemKind::Unknown,
        ),
        (
            "[[plugin]]\npath = \" \"\n".to_owned(),
            ConfigProblemKind::Empty,
        ),
        (entry("local", ""), ConfigProblemKind::Reserved),
        (entry("A", ""), ConfigProblemKind::InvalidName),
        (
            entry("a", "env = { LD_LIBRARY_PATH = \"/x\" }\n"),
            ConfigProblemKind::Reserved,
        ),
        (entry("a", "protocol = 3\n"), ConfigProblemKind::OutOfRange),
        (
            entry("a", "aggregates = true\n"),
            ConfigProblemKind::Conflict,
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(kind(&text), expected, "{text}");
    }
}

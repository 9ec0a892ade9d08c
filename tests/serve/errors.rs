//! Errors, the token, the bounds, and the descriptive routes.

use crate::client::{Client, raw, subscribe};

use super::*;

/// One request and the error it must get.
struct Case {
    what: &'static str,
    method: &'static str,
    path: String,
    body: String,
    status: u16,
    code: &'static str,
    /// The field named, when one must be.
    field: Option<&'static str>,
    /// What the description must contain.
    says: &'static [&'static str],
}

fn case(what: &'static str, method: &'static str, path: impl Into<String>) -> Case {
    Case {
        what,
        method,
        path: path.into(),
        body: String::new(),
        status: 400,
        code: "InvalidParameterValue",
        field: None,
        says: &[],
    }
}

impl Case {
    fn body(self, body: impl Into<String>) -> Case {
        Case {
            body: body.into(),
            ..self
        }
    }
    fn answers(self, status: u16, code: &'static str) -> Case {
        Case {
            status,
            code,
            ..self
        }
    }
    fn field(self, field: &'static str) -> Case {
        Case {
            field: Some(field),
            ..self
        }
    }
    fn says(self, says: &'static [&'static str]) -> Case {
        Case { says, ..self }
    }
}

/// Every error is `{"code","description"}` (and `field` when one is at
/// fault) with the status that fits: the handlers', axum's rejections, and
/// hyper's own answers alike.
#[tokio::test]
async fn every_error_is_json_with_a_code_a_description_and_the_right_status() {
    let server = Serve::start("serve-errors", &["--max-body", "100000"], &[]);
    let mut client = server.client();
    let queries = format!("{P}/queries");
    let text = "/collections/ships/items/s1/tproperties/name";
    let label = "/collections/ships/items/s1/tproperties/label";
    // Fix the label property's type (text) with a query on it.
    register(
        &mut client,
        label,
        r#"{"aggregation":"COUNT","window":{"type":"COUNT","size":1},"type":"TText"}"#,
    )
    .await;
    let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let id = query.rsplit('/').next().unwrap().to_owned();
    let long_id = "x".repeat(257);
    let cases = [
        case("an unknown operation", "POST", &queries)
            .body(r#"{"operation":"nope"}"#)
            .field("operation")
            .says(&["operation: "]),
        case("a bad argument", "POST", &queries)
            .body(r#"{"operation":"div","arg":0}"#)
            .field("arg"),
        case("a body that is not JSON", "POST", &queries)
            .body("{")
            .field("body"),
        case("an unknown key", "POST", &queries)
            .body(r#"{"operation":"ln","bogus":1}"#)
            .field("body"),
        case("an onError that is neither skip nor fail", "POST", &queries)
            .body(r#"{"operation":"ln","onError":"maybe"}"#)
            .field("onError")
            .says(&["\"maybe\"", "\"skip\" or \"fail\""]),
        case("an onError that is not a string", "POST", &queries)
            .body(r#"{"operation":"ln","onError":true}"#)
            .field("onError"),
        case("a window without an aggregation", "POST", &queries)
            .body(r#"{"window":{"type":"COUNT","size":1}}"#)
            .field("aggregation"),
        case(
            "an unknown engine is the client's mistake",
            "POST",
            &queries,
        )
        .body(r#"{"operation":"ln","engine":"nope"}"#)
        .field("engine")
        .says(&["\"nope\"", "local", "echo"]),
        case("an engine that is not ready", "POST", &queries)
            .body(r#"{"operation":"ln","engine":"absent"}"#)
            .answers(501, "NotImplemented")
            .says(&["absent", "TEST_ABSENT_CMD"]),
        case(
            "a transform of a text property",
            "POST",
            format!("{text}/queries"),
        )
        .body(r#"{"operation":"abs","type":"TText"}"#)
        .answers(422, "UnprocessableEntity")
        .field("operation"),
        case(
            "a type other than the property's",
            "POST",
            format!("{label}/queries"),
        )
        .body(r#"{"operation":"abs","type":"TReal"}"#)
        .answers(422, "UnprocessableEntity")
        .field("type")
        .says(&["TText"]),
        case(
            "a transform of a property whose type is fixed",
            "POST",
            format!("{label}/queries"),
        )
        .body(r#"{"operation":"abs"}"#)
        .answers(422, "UnprocessableEntity")
        .field("operation"),
        case(
            "an aggregation the type does not define",
            "POST",
            format!("{label}/queries"),
        )
        .body(r#"{"aggregation":"AVG","window":{"type":"COUNT","size":1}}"#)
        .answers(422, "UnprocessableEntity")
        .field("aggregation")
        .says(&["TText allows COUNT, COUNT_DISTINCT"]),
        case(
            "a number into a text property",
            "POST",
            format!("{label}/ingest"),
        )
        .body(instant(0, "1"))
        .field("value"),
        case(
            "an ingest line that is not an instant",
            "POST",
            format!("{P}/ingest"),
        )
        .body(format!("{}\nnope", instant(0, "1")))
        .field("body")
        .says(&["line 2"]),
        case(
            "a datetime that does not parse",
            "POST",
            format!("{P}/ingest"),
        )
        .body(r#"[{"datetime":"2026-01-01T00:00:00Z","value":1},{"datetime":"soon","value":2}]"#)
        .field("datetime")
        .says(&["instant 2", "soon", "ISO-8601"]),
        case("an overlong datetime", "POST", format!("{P}/ingest"))
            .body(format!(
                r#"{{"datetime":"2026-01-01T00:00:00{}Z","value":1}}"#,
                "0".repeat(100)
            ))
            .field("datetime")
            .says(&["at most 64"]),
        case("an empty ingest", "POST", format!("{P}/ingest")).field("body"),
        case(
            "a query under another property",
            "GET",
            format!("/collections/ships/items/s2/tproperties/speed/queries/{id}"),
        )
        .answers(404, "NotFound"),
        case(
            "an unknown query",
            "GET",
            format!("{queries}/0123456789abcdef0123456789abcdef"),
        )
        .answers(404, "NotFound"),
        case(
            "an unknown query, deleted",
            "DELETE",
            format!("{queries}/0123456789abcdef0123456789abcdef"),
        )
        .answers(404, "NotFound"),
        case("an unknown path", "GET", "/nowhere").answers(404, "NotFound"),
        case("a method a path does not take", "PUT", &queries)
            .answers(405, "MethodNotAllowed")
            .says(&["PUT"]),
        case("a method the engines do not take", "DELETE", "/engines")
            .answers(405, "MethodNotAllowed"),
        case(
            "a path id that is not UTF-8",
            "GET",
            "/collections/%FF/items/s1/tproperties/speed/queries",
        )
        .field("path"),
        case(
            "an overlong id",
            "GET",
            format!("/collections/{long_id}/items/s1/tproperties/speed/queries"),
        )
        .field("path")
        .says(&["257 bytes", "at most 256"]),
        case(
            "an overlong URI",
            "GET",
            format!("/engines?{}", "a".repeat(9000)),
        )
        .answers(414, "URITooLong"),
        case("a body over --max-body", "POST", format!("{P}/ingest"))
            .body(lines(0, 2000))
            .answers(413, "PayloadTooLarge")
            .says(&["--max-body"]),
    ];
    for case in cases {
        let response = client
            .request(case.method, &case.path, &[], case.body.as_bytes())
            .await;
        let what = case.what;
        assert_eq!(response.status, case.status, "{what}: {response:?}");
        check_json(what, &response, case.code, case.field, case.says);
    }

    // Stream errors, on their own connection.
    let stream = format!("{query}/stream");
    let bad_resume = subscribe(server.addr, &stream, &[("Last-Event-ID", "x")]).await;
    let response = bad_resume.err().expect("refused");
    assert_eq!(response.status, 400);
    check_json(
        "a bad Last-Event-ID",
        &response,
        "InvalidParameterValue",
        Some("Last-Event-ID"),
        &[],
    );

    // What hyper answers itself, before any route: JSON all the same.
    let raw_cases: [(&str, String, u16, &str); 4] = [
        (
            "a malformed Content-Length",
            format!("POST {P}/ingest HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"),
            400,
            "BadRequest",
        ),
        (
            "a malformed request line",
            "GET /engines HTTP/1.1 extra\r\nHost: x\r\n\r\n".to_owned(),
            400,
            "BadRequest",
        ),
        (
            "a head over 64 KiB",
            format!(
                "GET /engines HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
                "a".repeat(70_000)
            ),
            431,
            "RequestHeaderFieldsTooLarge",
        ),
        (
            // Answered at once: the body is never waited for.
            "a declared Content-Length over --max-body, its body not sent",
            format!("POST {P}/ingest HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n{{"),
            413,
            "PayloadTooLarge",
        ),
    ];
    for (what, request, status, code) in raw_cases {
        let response = tokio::time::timeout(PATIENCE, raw(server.addr, request.as_bytes()))
            .await
            .unwrap_or_else(|_| panic!("{what}: no answer"));
        assert_eq!(response.status, status, "{what}: {response:?}");
        check_json(what, &response, code, None, &[]);
    }
    // Small, but too many fields: the answer says which bound that is.
    let fields: String = (0..120).map(|i| format!("X-Field-{i}: a\r\n")).collect();
    let request = format!("GET /engines HTTP/1.1\r\nHost: x\r\n{fields}\r\n");
    let response = tokio::time::timeout(PATIENCE, raw(server.addr, request.as_bytes()))
        .await
        .expect("an answer to a head of 120 fields");
    assert_eq!(response.status, 431, "{response:?}");
    check_json(
        "a head of 120 fields",
        &response,
        "RequestHeaderFieldsTooLarge",
        None,
        &["100 header fields"],
    );
    // And the server is still up.
    assert_eq!(client.get("/engines").await.status, 200);
}

fn check_json(
    what: &str,
    response: &crate::client::Response,
    code: &str,
    field: Option<&str>,
    says: &[&str],
) {
    assert_eq!(
        response.header("content-type"),
        Some("application/json"),
        "{what}: {response:?}"
    );
    let body = response.json();
    assert_eq!(body["code"], code, "{what}: {body}");
    let description = body["description"].as_str().unwrap_or_default();
    assert!(!description.is_empty(), "{what}: {body}");
    if let Some(field) = field {
        assert_eq!(body["field"], field, "{what}: {body}");
    }
    for part in says {
        assert!(
            description.contains(part),
            "{what}: {part:?} not in {description:?}"
        );
    }
}

#[tokio::test]
async fn a_token_protects_every_route_but_the_landing_page() {
    let server = Serve::start("serve-token", &[], &[("MFSTREAM_TOKEN", "s3cret".into())]);
    let mut anonymous = server.client();
    assert_eq!(anonymous.get("/").await.status, 200);
    for path in ["/engines", "/conformance", &format!("{P}/queries")] {
        let response = anonymous.get(path).await;
        assert_eq!(response.status, 401, "{path}");
        assert_eq!(response.header("www-authenticate"), Some("Bearer"));
    }
    let wrong = Client::new(server.addr)
        .with_token("guess")
        .get("/engines")
        .await;
    assert_eq!(wrong.status, 401);
    let mut client = Client::new(server.addr).with_token("s3cret");
    assert_eq!(client.get("/engines").await.status, 200);
    let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let refused = subscribe(server.addr, &format!("{query}/stream"), &[]).await;
    assert_eq!(refused.err().map(|r| r.status), Some(401));
    let ok = subscribe(
        server.addr,
        &format!("{query}/stream"),
        &[("Authorization", "Bearer s3cret")],
    )
    .await;
    assert!(ok.is_ok());
    // The scheme is matched in any case (RFC 7235).
    for scheme in ["bearer", "BEARER"] {
        let value = format!("{scheme} s3cret");
        let response = anonymous
            .request("GET", "/engines", &[("Authorization", &value)], b"")
            .await;
        assert_eq!(response.status, 200, "{value}");
    }
}

#[test]
fn an_empty_token_is_refused_at_start_up_instead_of_turning_auth_off() {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mfstream"))
        .args(["serve", "--addr", "127.0.0.1:0", "--token", ""])
        .current_dir(std::env::temp_dir())
        .env_remove("MFSTREAM_CONFIG")
        .env_remove("MFSTREAM_TOKEN")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A server that starts says where it listens; one that refuses closes
    // its stdout without a word.
    let mut stdout = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut stdout)
        .unwrap();
    if !stdout.is_empty() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("it served with an empty token: {stdout:?}");
    }
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    // It says where the empty token came from.
    assert!(
        stderr.contains("the token is empty (from --token)"),
        "{stderr}"
    );
}

#[tokio::test]
async fn links_are_absolute_from_the_host_header_and_forwarded_scheme() {
    let server = Serve::start("serve-links", &[], &[]);
    let mut client = server.client();
    let response = client
        .request(
            "POST",
            &format!("{P}/queries"),
            &[("X-Forwarded-Proto", "https")],
            br#"{"operation":"abs"}"#,
        )
        .await;
    assert_eq!(response.status, 201, "{response:?}");
    let link = response.json();
    let channel = link["channel"].as_str().unwrap();
    // The client sends `Host: localhost`.
    assert_eq!(link["href"], format!("https://localhost{channel}/stream"));
    // The link works as given: its path streams.
    let listed = client.get(&format!("{P}/queries")).await.json();
    assert_eq!(
        listed["queries"][0]["href"],
        format!("http://localhost{channel}/stream")
    );
}

#[tokio::test]
async fn engines_conformance_and_landing_describe_the_server() {
    let server = Serve::start("serve-describe", &[], &[]);
    let mut client = server.client();
    let engines = client.get("/engines").await.json();
    let names: Vec<_> = engines
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["local", "echo", "crash", "hang", "absent", "refpos"]
    );
    assert_eq!(engines[0]["default"], true);
    assert_eq!(engines[4]["ready"], false);
    let conformance = client.get("/conformance").await.json();
    assert!(
        conformance["conformsTo"]
            .to_string()
            .contains("conf/cquery")
    );
    let landing = client.get("/?f=json").await.json();
    assert!(landing["links"].to_string().contains("/conformance"));
    let page = client.get("/").await;
    assert!(
        page.header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
}

/// Ids `.` and `..` (sent as `%2E`, `%2E%2E`, or as they are) are refused on
/// every route, naming the id: a client removes such dot-segments from a
/// link before requesting it, so no `href`, `links` or `Location` could
/// name them (before, the 201's links led to a 404).
#[tokio::test]
async fn dot_segment_ids_are_refused_on_every_route_naming_the_id() {
    let server = Serve::start("serve-dot-ids", &[], &[]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let qid = query.rsplit('/').next().unwrap().to_owned();
    let body = r#"{"operation":"abs"}"#;
    for dots in ["%2E", "%2e%2E", ".", ".."] {
        let (c, f, p, q) = ("ships", "s1", "speed", qid.as_str());
        let property =
            |c: &str, f: &str, p: &str| format!("/collections/{c}/items/{f}/tproperties/{p}");
        let positions = |c: &str, f: &str| format!("/collections/{c}/items/{f}/tgsequence");
        let paths = [
            (
                "collection",
                "POST",
                format!("{}/queries", property(dots, f, p)),
            ),
            (
                "feature",
                "POST",
                format!("{}/queries", property(c, dots, p)),
            ),
            (
                "property",
                "POST",
                format!("{}/queries", property(c, f, dots)),
            ),
            (
                "property",
                "POST",
                format!("{}/ingest", property(c, f, dots)),
            ),
            (
                "property",
                "GET",
                format!("{}/queries", property(c, f, dots)),
            ),
            (
                "query",
                "GET",
                format!("{}/queries/{dots}", property(c, f, p)),
            ),
            (
                "query",
                "DELETE",
                format!("{}/queries/{dots}", property(c, f, p)),
            ),
            (
                "query",
                "GET",
                format!("{}/queries/{dots}/stream", property(c, f, p)),
            ),
            (
                "collection",
                "GET",
                format!("{}/queries/{q}", property(dots, f, p)),
            ),
            (
                "collection",
                "POST",
                format!("{}/queries", positions(dots, f)),
            ),
            ("feature", "POST", format!("{}/ingest", positions(c, dots))),
            (
                "query",
                "GET",
                format!("{}/queries/{dots}", positions(c, f)),
            ),
        ];
        for (id, method, path) in paths {
            let sent = if method == "POST" { body } else { "" };
            let response = client.request(method, &path, &[], sent.as_bytes()).await;
            let what = format!("{method} {path}");
            assert_eq!(response.status, 400, "{what}: {response:?}");
            let json = response.json();
            assert_eq!(json["field"], "path", "{what}: {json}");
            let description = json["description"].as_str().unwrap();
            assert!(
                description.starts_with(&format!("path: the {id} id is \"."))
                    && description.contains("dot-segment"),
                "{what}: {description}"
            );
        }
    }
    // Nothing was registered on the way: the one query is all there is.
    let listed = client.get(&format!("{P}/queries")).await.json();
    assert_eq!(listed["numberReturned"], 1, "{listed}");
    // An id with dots that is not a dot-segment is an id like any other.
    register(
        &mut client,
        "/collections/a.b/items/.s1/tproperties/speed..",
        body,
    )
    .await;
}

/// An instant stamped further ahead of the server's clock than
/// `--max-datetime-ahead-ms` (a day by default) is refused, naming the
/// instant and the option, on both ingest routes, and nothing of its body
/// reaches a query; an hour ahead is taken. The option moves the bound.
#[tokio::test]
async fn an_instant_past_the_servers_horizon_is_refused_naming_the_option() {
    let server = Serve::start("serve-horizon", &[], &[]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let positions = "/collections/ships/items/s1/tgsequence";
    let echo = register(&mut client, positions, r#"{"operation":"position"}"#).await;
    let soon = rfc3339(std::time::SystemTime::now() + std::time::Duration::from_secs(3600));
    let far = "9999-12-31T00:00:00Z";
    let instant = |at: &str| format!(r#"{{"datetime":"{at}","value":1}}"#);
    let position = |at: &str| format!(r#"{{"datetime":"{at}","coordinates":[1,2]}}"#);
    for (path, body) in [
        (
            P.to_owned(),
            format!("{}\n{}", instant(&soon), instant(far)),
        ),
        (
            format!("{positions}/ingest"),
            format!("{}\n{}", position(&soon), position(far)),
        ),
        (
            format!("{positions}/ingest"),
            format!(
                r#"{{"type":"MovingPoint","coordinates":[[1,2],[1,3]],"datetimes":["{soon}","{far}"]}}"#
            ),
        ),
    ] {
        let path = if path.ends_with("/ingest") {
            path
        } else {
            format!("{path}/ingest")
        };
        let response = client.post(&path, &body).await;
        assert_eq!(response.status, 400, "{path}: {response:?}");
        let json = response.json();
        assert_eq!(json["field"], "datetime", "{json}");
        let description = json["description"].as_str().unwrap();
        assert!(
            description.starts_with(&format!("datetime: instant 2: \"{far}\" is after "))
                && description.contains("--max-datetime-ahead-ms (86400000)"),
            "{description}"
        );
    }
    assert_eq!(client.get(&query).await.json()["events"], 0);
    assert_eq!(client.get(&echo).await.json()["events"], 0);
    // An hour ahead is taken.
    let response = client.post(&format!("{P}/ingest"), &instant(&soon)).await;
    assert_eq!(response.status, 202, "{response:?}");

    // The option moves the bound: a minute refuses the hour.
    let strict = Serve::start(
        "serve-horizon-minute",
        &["--max-datetime-ahead-ms", "60000"],
        &[],
    );
    let response = strict
        .client()
        .post(&format!("{P}/ingest"), &instant(&soon))
        .await;
    assert_eq!(response.status, 400, "{response:?}");
    assert!(
        response.json()["description"]
            .as_str()
            .unwrap()
            .contains("--max-datetime-ahead-ms (60000)"),
        "{response:?}"
    );
}

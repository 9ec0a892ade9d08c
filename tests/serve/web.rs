//! A web page cannot drive the server: `Host` names the server (DNS
//! rebinding), a state-changing request from another origin is refused
//! (CSRF), bodies are JSON (no HTML form can send one), CORS only for
//! `--cors-origin`, security headers on every answer, and a token no header
//! can carry is refused at start.

use crate::client::{Response, raw};

use super::*;

/// `method path` with exactly `headers` (no `Host` unless given), on a
/// connection of its own.
async fn send(server: &Serve, method: &str, path: &str, headers: &[&str], body: &str) -> Response {
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for header in headers {
        request.push_str(header);
        request.push_str("\r\n");
    }
    if !body.is_empty() || method == "POST" {
        request.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    request.push_str("\r\n");
    request.push_str(body);
    tokio::time::timeout(PATIENCE, raw(server.addr, request.as_bytes()))
        .await
        .expect("an answer")
}

fn refused(what: &str, response: &Response, status: u16, code: &str, says: &[&str]) {
    assert_eq!(response.status, status, "{what}: {response:?}");
    let body = response.json();
    assert_eq!(body["code"], code, "{what}: {body}");
    let description = body["description"].as_str().unwrap();
    for part in says {
        assert!(
            description.contains(part),
            "{what}: {part:?} not in {description}"
        );
    }
}

async fn queries_on(client: &mut Client, property: &str) -> usize {
    let listed = client.get(&format!("{property}/queries")).await;
    assert_eq!(listed.status, 200, "{listed:?}");
    listed.json()["numberReturned"].as_u64().unwrap() as usize
}

const JSON: &str = "Content-Type: application/json";
const ABS: &str = r#"{"operation":"abs"}"#;

#[tokio::test]
async fn a_host_that_does_not_name_the_server_is_refused_so_dns_rebinding_reads_nothing() {
    let server = Serve::start("web-host", &[], &[]);
    let own = format!("Host: {}", server.addr);
    for host in [
        "Host: localhost",
        "Host: LocalHost:8080",
        "Host: 127.0.0.1",
        "Host: [::1]:1",
        own.as_str(),
    ] {
        let response = send(&server, "GET", "/engines", &[host], "").await;
        assert_eq!(response.status, 200, "{host}: {response:?}");
    }
    for (what, headers, says) in [
        (
            "a rebound name",
            &["Host: evil.example:8080"][..],
            &["\"evil.example:8080\"", "--allowed-host evil.example"][..],
        ),
        (
            "a name ending in localhost",
            &["Host: localhost.evil.example"],
            &["--allowed-host"],
        ),
        ("no Host", &[], &["no Host header", "--allowed-host"]),
    ] {
        for path in ["/", "/engines", &format!("{P}/queries")] {
            let response = send(&server, "GET", path, headers, "").await;
            refused(what, &response, 403, "HostNotAllowed", says);
        }
        let mut all = headers.to_vec();
        all.push(JSON);
        let response = send(&server, "POST", &format!("{P}/queries"), &all, ABS).await;
        refused(what, &response, 403, "HostNotAllowed", says);
    }
    // Two Host headers, or a target naming another authority.
    let two = send(
        &server,
        "GET",
        "/engines",
        &["Host: localhost", "Host: evil.example"],
        "",
    )
    .await;
    refused(
        "two Host headers",
        &two,
        400,
        "InvalidParameterValue",
        &["more than one Host"],
    );
    let absolute = send(
        &server,
        "GET",
        "http://evil.example/engines",
        &["Host: localhost"],
        "",
    )
    .await;
    refused(
        "an absolute target",
        &absolute,
        403,
        "HostNotAllowed",
        &["evil.example"],
    );
    assert_eq!(queries_on(&mut server.client(), P).await, 0);
}

#[tokio::test]
async fn allowed_hosts_are_accepted_and_a_star_accepts_any() {
    let server = Serve::start("web-allowed-host", &["--allowed-host", "mf.example"], &[]);
    let ok = send(&server, "GET", "/engines", &["Host: MF.example:8443"], "").await;
    assert_eq!(ok.status, 200, "{ok:?}");
    let other = send(&server, "GET", "/engines", &["Host: evil.example"], "").await;
    refused(
        "another name",
        &other,
        403,
        "HostNotAllowed",
        &["evil.example"],
    );

    let any = Serve::start("web-any-host", &["--allowed-host", "*"], &[]);
    let ok = send(&any, "GET", "/engines", &["Host: evil.example"], "").await;
    assert_eq!(ok.status, 200, "{ok:?}");
}

#[tokio::test]
async fn a_request_from_another_origin_is_refused() {
    let server = Serve::start("web-origin", &[], &[]);
    let mut client = server.client();
    let query = register(&mut client, P, ABS).await;
    let queries = format!("{P}/queries");
    let ingest = format!("{P}/ingest");
    let evil = "Origin: http://evil.example";
    let body = instant(1, "1");
    for (what, origin, says) in [
        (
            "another origin",
            evil,
            &[
                "\"http://evil.example\"",
                "--cors-origin http://evil.example",
            ][..],
        ),
        (
            "another port",
            "Origin: http://localhost:1",
            &["--cors-origin"],
        ),
        ("a sandboxed page", "Origin: null", &["\"null\""]),
    ] {
        let cases = [
            ("POST", queries.as_str(), ABS),
            ("POST", ingest.as_str(), body.as_str()),
            ("DELETE", query.as_str(), ""),
        ];
        for (method, path, body) in cases {
            let response = send(
                &server,
                method,
                path,
                &["Host: localhost", JSON, origin],
                body,
            )
            .await;
            refused(what, &response, 403, "OriginNotAllowed", says);
        }
    }
    // A browser that says the request is cross-site, without an Origin:
    // refused unless a link followed (a top-level GET navigation).
    for site in ["cross-site", "same-site"] {
        let header = format!("Sec-Fetch-Site: {site}");
        let response = send(
            &server,
            "POST",
            &queries,
            &["Host: localhost", JSON, &header],
            ABS,
        )
        .await;
        refused(site, &response, 403, "OriginNotAllowed", &["--cors-origin"]);
        let no_cors = ["Host: localhost", &header, "Sec-Fetch-Mode: no-cors"];
        let stream = format!("{query}/stream");
        for path in ["/engines", stream.as_str()] {
            let response = send(&server, "GET", path, &no_cors, "").await;
            refused(
                site,
                &response,
                403,
                "OriginNotAllowed",
                &["Sec-Fetch-Site"],
            );
        }
        let link = [
            "Host: localhost",
            &header,
            "Sec-Fetch-Mode: navigate",
            "Sec-Fetch-Dest: document",
        ];
        let response = send(&server, "GET", "/", &link, "").await;
        assert_eq!(
            response.status, 200,
            "{site}: a link to the page: {response:?}"
        );
    }
    // Nothing was registered, ingested or deleted.
    assert_eq!(queries_on(&mut client, P).await, 1);
    assert_eq!(client.get(&query).await.json()["events"], 0);

    // The server's own origin (the page's), in either scheme, and requests
    // without an Origin (curl) pass.
    for origin in ["Origin: http://localhost", "Origin: https://localhost"] {
        let response = send(
            &server,
            "POST",
            &queries,
            &["Host: localhost", JSON, origin],
            ABS,
        )
        .await;
        assert_eq!(response.status, 201, "{origin}: {response:?}");
    }
    let response = send(
        &server,
        "POST",
        &queries,
        &["Host: localhost", JSON, "Sec-Fetch-Site: same-origin"],
        ABS,
    )
    .await;
    assert_eq!(response.status, 201, "{response:?}");
    assert_eq!(queries_on(&mut client, P).await, 4);
    // Reading is refused too (the browser would keep the answer from the
    // page anyway, but a stream would hold a subscriber's slot).
    let stream = format!("{query}/stream");
    for path in [queries.as_str(), stream.as_str()] {
        let read = send(&server, "GET", path, &["Host: localhost", evil], "").await;
        refused("a read", &read, 403, "OriginNotAllowed", &["--cors-origin"]);
        assert_eq!(read.header("access-control-allow-origin"), None);
    }
}

#[tokio::test]
async fn a_body_an_html_form_can_send_is_refused_415() {
    let server = Serve::start("web-content-type", &[], &[]);
    let mut client = server.client();
    let query = register(&mut client, P, ABS).await;
    let queries = format!("{P}/queries");
    let ingest = format!("{P}/ingest");
    let body = instant(1, "1");
    for (path, body) in [(&queries, ABS), (&ingest, body.as_str())] {
        for content_type in [
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
            Some("application/jsonx"),
            None,
        ] {
            let header = content_type.map(|t| format!("Content-Type: {t}"));
            let mut headers = vec!["Host: localhost"];
            headers.extend(header.as_deref());
            let response = send(&server, "POST", path, &headers, body).await;
            let says: &[&str] = match content_type {
                Some(_) => &["application/json"],
                None => &["no Content-Type", "application/json"],
            };
            refused(path, &response, 415, "UnsupportedMediaType", says);
            assert_eq!(response.header("connection"), Some("close"));
        }
    }
    assert_eq!(queries_on(&mut client, P).await, 1);
    assert_eq!(client.get(&query).await.json()["events"], 0);
    // JSON with a parameter, and JSON lines for ingest, are taken.
    let typed = "Content-Type: application/json; charset=utf-8";
    let response = send(&server, "POST", &queries, &["Host: localhost", typed], ABS).await;
    assert_eq!(response.status, 201, "{response:?}");
    for content_type in [typed, "Content-Type: application/x-ndjson"] {
        let response = send(
            &server,
            "POST",
            &ingest,
            &["Host: localhost", content_type],
            &lines(0, 2),
        )
        .await;
        assert_eq!(response.status, 202, "{content_type}: {response:?}");
    }
    let ndjson_registration = send(
        &server,
        "POST",
        &queries,
        &["Host: localhost", "Content-Type: application/x-ndjson"],
        ABS,
    )
    .await;
    refused(
        "JSON lines as a registration",
        &ndjson_registration,
        415,
        "UnsupportedMediaType",
        &[],
    );
}

#[tokio::test]
async fn cors_is_answered_for_cors_origins_only() {
    let app = "http://app.example:3000";
    let server = Serve::start(
        "web-cors",
        &["--cors-origin", app],
        &[("MFSTREAM_TOKEN", "s3cret".into())],
    );
    let queries = format!("{P}/queries");
    let preflight = |origin: &'static str| {
        let origin = format!("Origin: {origin}");
        let server = &server;
        let queries = &queries;
        async move {
            send(
                server,
                "OPTIONS",
                queries,
                &[
                    "Host: localhost",
                    &origin,
                    "Access-Control-Request-Method: POST",
                    "Access-Control-Request-Headers: authorization, content-type",
                ],
                "",
            )
            .await
        }
    };
    // A preflight carries no token: it is answered before the token check.
    let allowed = preflight("http://app.example:3000").await;
    assert_eq!(allowed.status, 204, "{allowed:?}");
    assert_eq!(allowed.header("access-control-allow-origin"), Some(app));
    let methods = allowed.header("access-control-allow-methods").unwrap();
    assert!(
        methods.contains("POST") && methods.contains("DELETE"),
        "{methods}"
    );
    let headers = allowed
        .header("access-control-allow-headers")
        .unwrap()
        .to_ascii_lowercase();
    for header in ["authorization", "content-type", "last-event-id"] {
        assert!(headers.contains(header), "{headers}");
    }
    let other = preflight("http://evil.example").await;
    refused(
        "another origin's preflight",
        &other,
        403,
        "OriginNotAllowed",
        &["--cors-origin"],
    );
    assert_eq!(other.header("access-control-allow-origin"), None);

    // The allowed origin's requests get their CORS headers, its POST is
    // taken; another origin's get none.
    let origin = format!("Origin: {app}");
    let auth = "Authorization: Bearer s3cret";
    let created = send(
        &server,
        "POST",
        &queries,
        &["Host: localhost", JSON, auth, &origin],
        ABS,
    )
    .await;
    assert_eq!(created.status, 201, "{created:?}");
    assert_eq!(created.header("access-control-allow-origin"), Some(app));
    assert!(
        created
            .header("access-control-expose-headers")
            .unwrap()
            .contains("Location")
    );
    assert_eq!(created.header("vary"), Some("Origin"));
    let listed = send(
        &server,
        "GET",
        &queries,
        &["Host: localhost", auth, "Origin: http://evil.example"],
        "",
    )
    .await;
    refused("another origin", &listed, 403, "OriginNotAllowed", &[]);
    assert_eq!(listed.header("access-control-allow-origin"), None);
    // Without an Origin (curl), the answer names none, but varies by it.
    let listed = send(&server, "GET", &queries, &["Host: localhost", auth], "").await;
    assert_eq!(listed.status, 200);
    assert_eq!(listed.header("access-control-allow-origin"), None);
    assert_eq!(listed.header("vary"), Some("Origin"));
    // An error is readable by the allowed page too.
    let unauthorized = send(&server, "GET", &queries, &["Host: localhost", &origin], "").await;
    assert_eq!(unauthorized.status, 401);
    assert_eq!(
        unauthorized.header("access-control-allow-origin"),
        Some(app)
    );
}

#[tokio::test]
async fn every_answer_has_security_headers_and_the_page_a_content_security_policy() {
    let server = Serve::start("web-headers", &[], &[]);
    let mut client = server.client();
    for path in ["/", "/engines", "/nowhere", &format!("{P}/queries")] {
        let response = client.get(path).await;
        assert_eq!(
            response.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
        assert_eq!(
            response.header("referrer-policy"),
            Some("no-referrer"),
            "{path}"
        );
        assert!(
            response.header("content-security-policy").is_some(),
            "{path}"
        );
        assert_eq!(
            response.header("cross-origin-resource-policy"),
            Some("same-origin"),
            "{path}"
        );
    }
    let refused = send(&server, "GET", "/", &["Host: evil.example"], "").await;
    assert_eq!(refused.header("x-content-type-options"), Some("nosniff"));
    // Hyper's own answers, too.
    let malformed = raw(
        server.addr,
        b"GET / HTTP/1.1 extra\r\nHost: localhost\r\n\r\n",
    )
    .await;
    assert_eq!(malformed.status, 400);
    assert_eq!(malformed.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(
        malformed.header("cross-origin-resource-policy"),
        Some("same-origin")
    );

    let api = client.get("/engines").await;
    let policy = api.header("content-security-policy").unwrap();
    assert!(policy.contains("default-src 'none'"), "{policy}");
    let page = client.get("/").await;
    let policy = page.header("content-security-policy").unwrap().to_owned();
    for directive in [
        "default-src 'none'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
        "form-action 'none'",
    ] {
        assert!(policy.contains(directive), "{directive} not in {policy}");
    }
    // Its one script runs by the nonce the policy names, fresh each time.
    let nonce = policy
        .split("script-src 'nonce-")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .expect("a script nonce");
    assert!(nonce.len() >= 22, "{nonce}");
    assert!(page.body.contains(&format!("<script nonce=\"{nonce}\">")));
    assert!(page.body.contains(&format!("<style nonce=\"{nonce}\">")));
    let again = client.get("/").await;
    assert!(
        !again
            .header("content-security-policy")
            .unwrap()
            .contains(nonce)
    );
}

#[tokio::test]
async fn answers_refused_before_the_browser_checks_have_security_headers_and_vary_too() {
    let args = ["--max-body", "64", "--cors-origin", "https://app.example"];
    let server = Serve::start("web-headers-early", &args, &[]);
    let long = format!("/{}", "a".repeat(9 * 1024));
    let too_long = send(&server, "GET", &long, &["Host: localhost"], "").await;
    assert_eq!(too_long.status, 414, "{too_long:?}");
    let ingest = format!("{P}/ingest");
    let big = format!("[{}]", instant(1, &"1".repeat(80)));
    let too_big = send(&server, "POST", &ingest, &["Host: localhost", JSON], &big).await;
    assert_eq!(too_big.status, 413, "{too_big:?}");
    for (what, response) in [("414", &too_long), ("413", &too_big)] {
        assert_eq!(
            response.header("x-content-type-options"),
            Some("nosniff"),
            "{what}: {response:?}"
        );
        assert_eq!(
            response.header("referrer-policy"),
            Some("no-referrer"),
            "{what}"
        );
        assert_eq!(
            response.header("content-security-policy"),
            Some("default-src 'none'; frame-ancestors 'none'"),
            "{what}"
        );
        assert_eq!(
            response.header("cross-origin-resource-policy"),
            Some("same-origin"),
            "{what}"
        );
        assert_eq!(response.header("vary"), Some("Origin"), "{what}");
    }
}

#[tokio::test]
async fn a_request_with_two_origins_or_two_content_types_is_refused_whatever_their_order() {
    let server = Serve::start("web-twice", &[], &[]);
    let own = format!("Origin: http://{}", server.addr);
    let host = format!("Host: {}", server.addr);
    let queries = format!("{P}/queries");
    for origins in [
        [own.as_str(), "Origin: http://evil.example"],
        ["Origin: http://evil.example", own.as_str()],
    ] {
        let headers = [host.as_str(), JSON, origins[0], origins[1]];
        let response = send(&server, "POST", &queries, &headers, ABS).await;
        refused(
            "two origins",
            &response,
            400,
            "InvalidParameterValue",
            &["more than one Origin"],
        );
    }
    for types in [
        [JSON, "Content-Type: text/plain"],
        ["Content-Type: text/plain", JSON],
    ] {
        let headers = [host.as_str(), own.as_str(), types[0], types[1]];
        let response = send(&server, "POST", &queries, &headers, ABS).await;
        refused(
            "two types",
            &response,
            415,
            "UnsupportedMediaType",
            &["more than one Content-Type"],
        );
    }
    let mut client = server.client();
    assert_eq!(
        queries_on(&mut client, P).await,
        0,
        "nothing was registered"
    );
}

#[test]
fn a_token_no_authorization_header_can_carry_is_refused_at_start_with_exit_2() {
    for (token, says) in [
        (" s3cret", "starts with a space"),
        ("s3cret ", "ends with a space"),
        ("s3\u{1}cret", "control character"),
        ("sécret", "non-ASCII"),
    ] {
        let dir = TempDir::new("web-token");
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_mfstream"))
            .args(["serve", "--addr", "127.0.0.1:0"])
            .current_dir(dir.path())
            .env_remove("MFSTREAM_CONFIG")
            .env("MFSTREAM_TOKEN", token)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(
            output.stdout.is_empty(),
            "{token:?}: it listened: {output:?}"
        );
        assert_eq!(output.status.code(), Some(2), "{token:?}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(says) && stderr.contains("Authorization"),
            "{token:?}: {stderr}"
        );
    }
}

#[test]
fn a_bad_allowed_host_or_cors_origin_is_refused_at_start_with_exit_2() {
    for (args, says) in [
        (
            ["--allowed-host", "http://mf.example"],
            "--allowed-host \"http://mf.example\"",
        ),
        (["--cors-origin", "*"], "--cors-origin \"*\""),
        (["--cors-origin", "app.example"], "scheme://host[:port]"),
    ] {
        let dir = TempDir::new("web-options");
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_mfstream"))
            .args(["serve", "--addr", "127.0.0.1:0"])
            .args(args)
            .current_dir(dir.path())
            .env_remove("MFSTREAM_CONFIG")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(output.stdout.is_empty(), "{args:?}: it listened");
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

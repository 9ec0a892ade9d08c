//! The names and origins a browser's requests may carry.

use super::*;

fn browsers(hosts: &[&str], origins: &[&str], bound: &str) -> Browsers {
    let mut options = ServeOptions::default();
    options.access.allowed_hosts = hosts
        .iter()
        .map(|h| h.to_string())
        .collect::<Vec<_>>()
        .into();
    options.access.cors_origins = origins
        .iter()
        .map(|o| o.to_string())
        .collect::<Vec<_>>()
        .into();
    Browsers::new(&options, bound.parse().unwrap()).unwrap()
}

#[test]
fn loopback_names_the_bound_address_and_allowed_hosts_pass() {
    let b = browsers(&["mf.example", "192.0.2.9:8443"], &[], "10.0.0.5:8080");
    for host in [
        "localhost",
        "LOCALHOST:8080",
        "127.0.0.1",
        "127.0.0.1:1",
        "127.0.0.1:65535",
        "[::1]",
        "[::1]:8080",
        "10.0.0.5:8080",
        "mf.example",
        "MF.example:443",
        "192.0.2.9:8443",
    ] {
        assert!(b.host_allowed(host, None), "{host}");
    }
    for host in [
        "evil.example",
        "localhost.evil.example",
        "mf.example.evil",
        "192.0.2.9",
        "10.0.0.6",
        "",
        "::1",
        "[::1",
        "localhost:",
        "localhost:80a",
        "localhost:99999",
        "localhost:65536",
        "localhost:0",
        "localhost:+80",
        "[::1]:100000",
        "local host",
        "127.1",
    ] {
        assert!(!b.host_allowed(host, None), "{host:?}");
    }
}

#[test]
fn bound_to_any_address_the_arrival_address_passes() {
    let b = browsers(&[], &[], "0.0.0.0:8080");
    let arrived: IpAddr = "192.0.2.1".parse().unwrap();
    assert!(b.host_allowed("192.0.2.1:8080", Some(arrived)));
    assert!(!b.host_allowed("192.0.2.2:8080", Some(arrived)));
    assert!(!b.host_allowed("0.0.0.0:8080", Some(arrived)));
    let b = browsers(&[], &[], "[::]:8080");
    let mapped: IpAddr = "::ffff:192.0.2.1".parse().unwrap();
    assert!(b.host_allowed("192.0.2.1:8080", Some(mapped)));
}

#[test]
fn bad_entries_are_refused_at_start() {
    for (hosts, origins) in [
        (vec!["a b"], vec![]),
        (vec!["http://x"], vec![]),
        (vec![""], vec![]),
        (vec![], vec!["*"]),
        (vec![], vec!["null"]),
        (vec![], vec!["app.example"]),
        (vec![], vec!["ftp://app.example"]),
        (vec![], vec!["https://app.example/path"]),
    ] {
        let mut options = ServeOptions::default();
        options.access.allowed_hosts = hosts
            .iter()
            .map(|h| h.to_string())
            .collect::<Vec<_>>()
            .into();
        options.access.cors_origins = origins
            .iter()
            .map(|o| o.to_string())
            .collect::<Vec<_>>()
            .into();
        let bound = "127.0.0.1:1".parse().unwrap();
        match Browsers::new(&options, bound) {
            Err(ServeError::BadBrowserOption { .. }) => {}
            other => panic!("{hosts:?} {origins:?}: {other:?}"),
        }
    }
}

#[test]
fn origins_match_as_browsers_send_them() {
    let b = browsers(
        &["::1"],
        &["https://App.example:443/", "http://localhost:3000"],
        "127.0.0.1:1",
    );
    assert!(b.cors_allowed("https://app.example"));
    assert!(b.cors_allowed("http://localhost:3000"));
    assert!(!b.cors_allowed("http://localhost:3001"));
    assert!(!b.cors_allowed("http://app.example"));
    assert_eq!(b.hosts, ["[::1]"]);
}

#[test]
fn fetch_metadata_lets_through_same_origin_user_and_link_requests_only() {
    let headers = |pairs: &[(&'static str, &'static str)]| {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.insert(*name, HeaderValue::from_static(value));
        }
        h
    };
    let allows = |method, pairs| fetch_metadata_allows(&method, &headers(pairs));
    assert!(allows(Method::POST, &[]));
    assert!(allows(Method::POST, &[("sec-fetch-site", "same-origin")]));
    assert!(allows(Method::GET, &[("sec-fetch-site", "none")]));
    let link = [
        ("sec-fetch-site", "cross-site"),
        ("sec-fetch-mode", "navigate"),
        ("sec-fetch-dest", "document"),
    ];
    assert!(allows(Method::GET, &link));
    assert!(!allows(Method::POST, &link));
    assert!(!allows(
        Method::GET,
        &[
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "no-cors")
        ]
    ));
    assert!(!allows(
        Method::GET,
        &[
            ("sec-fetch-site", "same-site"),
            ("sec-fetch-mode", "navigate"),
            ("sec-fetch-dest", "embed")
        ]
    ));
    assert!(!allows(Method::DELETE, &[("sec-fetch-site", "same-site")]));
}

#[test]
fn a_long_header_is_cut_in_the_message() {
    let long = "é".repeat(200);
    let message = not_a_name(&browsers(&[], &[], "127.0.0.1:1"), "host", &long);
    assert!(message.len() < 320, "{message}");
    assert!(message.contains('…'), "{message}");
}

#[test]
fn the_own_origin_is_the_host_in_either_scheme() {
    assert!(own_origin("localhost:8080", "http://localhost:8080"));
    assert!(own_origin("mf.example", "https://mf.example"));
    assert!(own_origin("mf.example:443", "https://mf.example"));
    assert!(own_origin("mf.example:80", "http://mf.example"));
    assert!(!own_origin("localhost:8080", "http://localhost:8081"));
    assert!(!own_origin("localhost:8080", "http://evil.example"));
    assert!(!own_origin("localhost:8080", "null"));
}

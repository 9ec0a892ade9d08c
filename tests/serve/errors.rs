//! Errors, the token, the bounds, and the descriptive routes.

use crate::client::{Client, subscribe};

use super::*;

#[tokio::test]
async fn errors_have_a_code_a_description_and_the_right_status() {
    let server = Serve::start("serve-errors", &[], &[]);
    let mut client = server.client();
    let queries = format!("{P}/queries");

    let bad_op = client.post(&queries, r#"{"operation":"nope"}"#).await;
    assert_eq!(bad_op.status, 400);
    let body = bad_op.json();
    assert_eq!(body["code"], "InvalidParameterValue");
    assert!(
        body["description"]
            .as_str()
            .unwrap()
            .starts_with("operation: ")
    );
    let bad_arg = client
        .post(&queries, r#"{"operation":"div","arg":0}"#)
        .await;
    assert_eq!(bad_arg.json()["field"], "arg");
    let not_json = client.post(&queries, "{").await;
    assert_eq!(
        (not_json.status, not_json.json()["field"].as_str()),
        (400, Some("body"))
    );

    let unknown = client
        .post(&queries, r#"{"operation":"ln","engine":"nope"}"#)
        .await;
    assert_eq!(unknown.status, 501);
    let description = unknown.json()["description"].as_str().unwrap().to_owned();
    assert!(
        description.contains("\"nope\"") && description.contains("local"),
        "{description}"
    );
    let not_ready = client
        .post(&queries, r#"{"operation":"ln","engine":"absent"}"#)
        .await;
    assert_eq!(not_ready.status, 501);
    let description = not_ready.json()["description"].as_str().unwrap().to_owned();
    assert!(
        description.contains("absent") && description.contains("TEST_ABSENT_CMD"),
        "{description}"
    );

    let text = "/collections/ships/items/s1/tproperties/name";
    let transform = client
        .post(
            &format!("{text}/queries"),
            r#"{"operation":"abs","type":"TText"}"#,
        )
        .await;
    assert_eq!(transform.status, 422, "{transform:?}");
    assert_eq!(transform.json()["code"], "UnprocessableEntity");
    // A type fixed by the first ingest counts too.
    let label = "/collections/ships/items/s1/tproperties/label";
    assert_eq!(
        client
            .post(
                &format!("{label}/ingest"),
                r#"{"datetime":"t","value":"a"}"#
            )
            .await
            .status,
        202
    );
    assert_eq!(
        client
            .post(&format!("{label}/queries"), r#"{"operation":"abs"}"#)
            .await
            .status,
        422
    );
    // And a number does not go into a text property.
    let wrong = client
        .post(&format!("{label}/ingest"), r#"{"datetime":"t","value":1}"#)
        .await;
    assert_eq!(
        (wrong.status, wrong.json()["field"].as_str()),
        (400, Some("value"))
    );

    let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let id = query.rsplit('/').next().unwrap();
    let elsewhere = format!("/collections/ships/items/s2/tproperties/speed/queries/{id}");
    assert_eq!(
        client.get(&elsewhere).await.status,
        404,
        "found under another path"
    );
    let missing = client
        .get(&format!("{queries}/0123456789abcdef0123456789abcdef"))
        .await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json()["code"], "NotFound");
    assert_eq!(client.get("/nowhere").await.status, 404);
    let bad_ingest = client
        .post(
            &format!("{P}/ingest"),
            "{\"datetime\":\"t\",\"value\":1}\nnope",
        )
        .await;
    assert!(
        bad_ingest.json()["description"]
            .as_str()
            .unwrap()
            .contains("line 2")
    );
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
}

#[tokio::test]
async fn queries_subscribers_and_bodies_are_bounded() {
    let server = Serve::start(
        "serve-bounds",
        &[
            "--max-queries",
            "1",
            "--max-subscribers",
            "1",
            "--max-body",
            "1000",
            "--max-properties",
            "2",
        ],
        &[],
    );
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let second = client
        .post(&format!("{P}/queries"), r#"{"operation":"abs"}"#)
        .await;
    assert_eq!(second.status, 503, "{second:?}");
    let _first = server.subscribe(&format!("{query}/stream"), &[]).await;
    let refused = subscribe(server.addr, &format!("{query}/stream"), &[]).await;
    assert_eq!(refused.err().map(|r| r.status), Some(429));
    let big = client.post(&format!("{P}/ingest"), &lines(0, 100)).await;
    assert_eq!(big.status, 413, "{big:?}");
    assert_eq!(big.json()["code"], "PayloadTooLarge");
    let one = r#"{"datetime":"t","value":1}"#;
    let second = "/collections/c/items/f/tproperties/second";
    assert_eq!(
        client.post(&format!("{second}/ingest"), one).await.status,
        202
    );
    let third = "/collections/c/items/f/tproperties/third";
    assert_eq!(
        client.post(&format!("{third}/ingest"), one).await.status,
        503
    );
    assert_eq!(
        client.post(&format!("{second}/ingest"), one).await.status,
        202
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
    assert_eq!(names, ["local", "echo", "crash", "hang", "absent"]);
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

//! With `--state`, a value the store would not keep is refused up front,
//! 413 naming the limit, not taken in part and then refused by the store
//! (503).

use super::*;

const NAMES: &str = "/collections/ships/items/s1/tproperties/name";
/// The most bytes of a text value the store keeps (`StoreOptions`'
/// `max_text_bytes`, the book's limits in operating.md).
const MAX_TEXT: usize = 64 * 1024;

fn text(i: usize, len: usize) -> String {
    format!(
        "{{\"datetime\":\"{}\",\"value\":\"{}\"}}\n",
        at(i),
        "x".repeat(len)
    )
}

#[tokio::test]
async fn a_text_value_over_the_limit_with_state_is_413_naming_the_limit_and_nothing_is_taken() {
    let state = TempDir::new("text-limit-state");
    let dir = state.path().to_str().unwrap().to_owned();
    let server = Serve::start("text-limit", &["--state", &dir], &[]);
    let mut client = server.client();
    let query = register(
        &mut client,
        NAMES,
        r#"{"aggregation":"COUNT","window":{"type":"COUNT","size":1},"type":"TText"}"#,
    )
    .await;
    let ingest = format!("{NAMES}/ingest");
    // A short value first: a body is refused whole, not taken in part.
    let body = text(0, 3) + &text(1, MAX_TEXT + 1);
    let response = client.post(&ingest, &body).await;
    assert_eq!(response.status, 413, "{response:?}");
    let problem = response.json();
    assert_eq!(problem["code"], "PayloadTooLarge");
    assert_eq!(problem["field"], "value");
    let description = problem["description"].as_str().unwrap();
    for part in [
        "instant 2",
        &format!("{}", MAX_TEXT + 1),
        &format!("{MAX_TEXT} bytes"),
        "--state",
    ] {
        assert!(description.contains(part), "{part:?} not in {description}");
    }
    assert_eq!(problem.get("accepted"), None, "{problem}");
    // At the limit, it is taken; the query saw nothing of the refused body.
    let response = client.post(&ingest, &text(2, MAX_TEXT)).await;
    assert_eq!(response.status, 202, "{response:?}");
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let events = take(&mut sse, 1).await;
    assert_eq!(events[0].id.as_deref(), Some("1"));
    assert_eq!(events[0].json()["windowStart"], at(2));
    assert_eq!(client.get(&query).await.json()["events"], 1);
}

#[tokio::test]
async fn without_state_a_long_text_value_is_taken() {
    let server = Serve::start("text-no-limit", &[], &[]);
    let mut client = server.client();
    register(
        &mut client,
        NAMES,
        r#"{"aggregation":"COUNT","window":{"type":"COUNT","size":1},"type":"TText"}"#,
    )
    .await;
    let response = client
        .post(&format!("{NAMES}/ingest"), &text(0, MAX_TEXT + 1))
        .await;
    assert_eq!(response.status, 202, "{response:?}");
}

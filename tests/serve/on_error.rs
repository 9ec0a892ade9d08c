//! One bad value ingested ends nobody's query (`onError`, skip by default).

use super::*;

#[tokio::test]
async fn one_bad_value_skips_a_record_in_every_query_on_the_property_and_both_keep_running() {
    let server = Serve::start("serve-on-error", &[], &[]);
    let mut client = server.client();
    // ln and exp (default: skip) on the local engine and through a bridge
    // job (echo: version 1, which the host's guard protects), and one that
    // asked to fail.
    let ln = register(&mut client, P, r#"{"operation":"ln"}"#).await;
    let exp = register(&mut client, P, r#"{"operation":"exp","onError":"skip"}"#).await;
    let bridge = register(&mut client, P, r#"{"operation":"ln","engine":"echo"}"#).await;
    let fail = register(&mut client, P, r#"{"operation":"ln","onError":"fail"}"#).await;
    let mut streams = Vec::new();
    for query in [&ln, &exp, &bridge] {
        streams.push(server.subscribe(&format!("{query}/stream"), &[]).await);
    }
    let mut failing = server.subscribe(&format!("{fail}/stream"), &[]).await;
    // ln has no result at -1 and exp none at 1000.
    let body = [
        instant(1, "1"),
        instant(2, "-1"),
        instant(3, "1000"),
        instant(4, "1"),
    ];
    let response = client.post(&format!("{P}/ingest"), &body.join("\n")).await;
    assert_eq!(response.status, 202, "{response:?}");
    for (query, sse) in [&ln, &exp, &bridge].into_iter().zip(&mut streams) {
        let events = take(sse, 3).await;
        let datetimes: Vec<String> = events
            .iter()
            .map(|e| e.json()["datetime"].as_str().unwrap().to_owned())
            .collect();
        let skipped: u64 = events
            .iter()
            .map(|e| e.json()["skipped"].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(skipped, 1, "{query}: {events:?}");
        assert!(
            !datetimes.contains(&if query == &exp { at(3) } else { at(2) }),
            "{query}: {datetimes:?}"
        );
        let status = client.get(query).await.json();
        assert_eq!(status["status"], "running", "{query}: {status}");
        assert_eq!(status["skipped"], 1, "{query}: {status}");
    }
    // The query that asked to fail has failed, naming the record.
    let end = tokio::time::timeout(PATIENCE, failing.until_end())
        .await
        .unwrap();
    let data = end.last().unwrap().json();
    assert_eq!(data["status"], "failed");
    assert!(data["reason"].as_str().unwrap().contains(&at(2)), "{data}");
    // The others keep answering.
    client.post(&format!("{P}/ingest"), &instant(5, "1")).await;
    for sse in &mut streams {
        let event = take(sse, 1).await.remove(0);
        assert_eq!(event.json()["datetime"], at(5));
        assert!(event.json().get("skipped").is_none(), "{event:?}");
    }
}

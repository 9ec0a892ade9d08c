//! What a message may hold, on a property's topic and on a feature's
//! positions, and how a bad one is counted.

use super::super::metrics::scrape_until;
use super::*;

/// An instant, an array of two and a bare number (stamped on receipt)
/// reach a query, in order. The server, still running, is returned for
/// the broker's own checks.
pub(in crate::serve) async fn instants_arrays_and_bare_numbers_reach_the_queries<B: TestBroker>(
    broker: &B,
    name: &str,
    args: &[&str],
) -> Serve {
    let server = broker.serve(name, args, &[]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"mul","arg":2}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let payloads = vec![
        instant(1, "1"),
        format!("[{},{}]", instant(2, "2"), instant(3, "3")),
        " 4 ".to_owned(),
    ];
    deliver(broker, &speed::<B>(), payloads).await;
    let events = take(&mut sse, 4).await;
    assert_eq!(values(&events), [2.0, 4.0, 6.0, 8.0]);
    let datetimes: Vec<String> = events
        .iter()
        .map(|e| e.json()["datetime"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(datetimes[..3], [at(1), at(2), at(3)]);
    // The bare number is stamped on receipt: now, in UTC microseconds.
    assert!(
        datetimes[3].len() == "2026-01-01T00:00:00.000000Z".len() && datetimes[3] > at(3),
        "{}",
        datetimes[3]
    );
    server
}

/// Every kind of bad message is acknowledged (so never redelivered),
/// counted under its reason in the status and the metrics, and sampled
/// with its topic and why; the status is behind the token like every
/// route.
pub(in crate::serve) async fn bad_records_are_acknowledged_counted_per_reason_and_sampled_behind_the_token<
    B: TestBroker,
>(
    name: &str,
) {
    let broker = B::start(name).await;
    let token = ("MFSTREAM_TOKEN", "sesame".to_owned());
    let server = broker.serve(name, &["--max-body", "1024"], &[token]);
    let mut client = server.client().with_token("sesame");
    let query = register(&mut client, P, r#"{"operation":"mul","arg":2}"#).await;
    let auth = [("Authorization", "Bearer sesame")];
    let mut sse = server.subscribe(&format!("{query}/stream"), &auth).await;
    let (topic, positions) = (speed::<B>(), positions::<B>());
    let payloads = vec![
        "nope".to_owned(),
        "\"12\"".to_owned(),
        r#"{"datetime":"soon","value":1}"#.to_owned(),
        " ".repeat(2000),
        // Text on a TReal property: refused by the ingest path itself.
        instant(2, "\"fast\""),
    ];
    deliver(&broker, &topic, payloads).await;
    deliver(&broker, &positions, vec!["[1,2]".to_owned()]).await;
    let empty_id = B::BAD_ID_TOPICS.map(|[empty_id, _]| empty_id);
    if let Some(empty_id) = empty_id {
        deliver(&broker, empty_id, vec![instant(1, "1")]).await;
    }
    // A good one after them.
    deliver(&broker, &topic, vec![instant(3, "3")]).await;
    assert_eq!(values(&take(&mut sse, 1).await), [6.0]);

    assert_eq!(
        server.client().get(B::STATUS).await.status,
        401,
        "behind the token like every route"
    );
    let bad_topics = u64::from(empty_id.is_some());
    let sent = 7 + bad_topics;
    let status = acknowledged::<B>(&mut client, sent).await;
    let bad = &status["bad"];
    assert_eq!(bad["notJson"], 1, "{status}");
    assert_eq!(bad["wrongType"], 2, "{status}");
    assert_eq!(bad["badDatetime"], 1, "{status}");
    assert_eq!(bad["topic"].as_u64().unwrap_or(0), bad_topics, "{status}");
    assert_eq!(bad["badPosition"], 1, "{status}");
    assert_eq!(bad["tooLarge"], 1, "{status}");
    assert_eq!(status[B::RECEIVED], sent, "{status}");
    let samples = status["badSamples"].as_array().unwrap();
    assert_eq!(samples.len() as u64, sent - 1, "{status}");
    // Each with its topic, reason and why. (In the order they were found
    // bad: a payload over --max-body as it is read, a value the property
    // refuses when its batch is ingested, the rest in between.)
    let sample = |reason: &str| {
        samples
            .iter()
            .find(|s| s["reason"] == reason)
            .unwrap_or_else(|| panic!("a {reason} sample: {status}"))
    };
    let says = |reason: &str, text: &str| {
        let detail = sample(reason)["detail"].as_str().unwrap().to_owned();
        assert!(detail.contains(text), "{reason}: {detail}");
    };
    if let Some(empty_id) = empty_id {
        assert_eq!(sample("topic")["topic"], empty_id);
    }
    assert_eq!(sample("badPosition")["topic"], positions.as_str());
    assert!(
        samples
            .iter()
            .filter(|s| s["reason"] != "topic" && s["reason"] != "badPosition")
            .all(|s| s["topic"] == topic.as_str()),
        "{status}"
    );
    assert_eq!(sample("notJson")["payload"], "nope");
    says("badPosition", "invalid type: integer");
    says("badDatetime", "\"soon\"");
    says("tooLarge", "at most --max-body (1024)");
    let refused = samples
        .iter()
        .find(|s| s["reason"] == "wrongType" && s["payload"].as_str().unwrap().contains("fast"))
        .unwrap_or_else(|| panic!("the text on a TReal property: {status}"));
    assert!(
        refused["detail"]
            .as_str()
            .unwrap()
            .contains("the property is TReal"),
        "{status}"
    );

    // The metrics say the same.
    let scrape = scrape_until(&mut client, "the bad messages counted", |s| {
        s.get(B::BAD_METRIC, &[("reason", "notJson")]) == 1.0
    })
    .await;
    for (reason, n) in [
        ("notJson", 1),
        ("wrongType", 2),
        ("badDatetime", 1),
        ("tooLarge", 1),
        ("badPosition", 1),
        ("topic", bad_topics),
    ] {
        assert_eq!(
            scrape.get(B::BAD_METRIC, &[("reason", reason)]),
            n as f64,
            "{reason}"
        );
    }
    let refused = |reason| {
        scrape.get(
            "mfstream_ingest_refused_total",
            &[("source", B::SOURCE), ("reason", reason)],
        )
    };
    // Not JSON, and JSON of another shape: on the property's topic and on
    // the positions' (`[1,2]`), as over HTTP.
    assert_eq!(refused("body"), 3.0);
    assert_eq!(refused("datetime"), 1.0);
    assert_eq!(refused("too_large"), 1.0);
    assert_eq!(refused("value"), 1.0);
}

/// One message stamped 9999-12-31 (a device with a broken clock) is a bad
/// message, `badDatetime`, on a property's topic and on a feature's
/// positions alike, and moves no duplicate mark: the instants after it are
/// taken. (Before, it was taken, and every later instant of its property
/// was dropped as a duplicate until a restart.) A topic with a
/// dot-segment id matches no pattern.
pub(in crate::serve) async fn an_instant_stamped_past_the_servers_horizon_is_bad_and_later_ones_are_taken<
    B: TestBroker,
>(
    name: &str,
) {
    let broker = B::start(name).await;
    let server = broker.serve(name, &[], &[]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"mul","arg":2}"#).await;
    let echo = register(&mut client, S, r#"{"operation":"position"}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let (topic, on_positions) = (speed::<B>(), positions::<B>());
    let mut positions = server.subscribe(&format!("{echo}/stream"), &[]).await;
    let far = "9999-12-31T00:00:00Z";
    deliver(
        &broker,
        &topic,
        vec![format!(r#"{{"datetime":"{far}","value":1}}"#)],
    )
    .await;
    deliver(
        &broker,
        &on_positions,
        vec![format!(r#"{{"datetime":"{far}","coordinates":[1,2]}}"#)],
    )
    .await;
    let dot_id = B::BAD_ID_TOPICS.map(|[_, dot_id]| dot_id);
    if let Some(dot_id) = dot_id {
        deliver(&broker, dot_id, vec![instant(1, "5")]).await;
    }
    deliver(&broker, &topic, vec![instant(2, "3")]).await;
    deliver(&broker, &on_positions, vec![position(3, 4.0, 5.0)]).await;
    assert_eq!(values(&take(&mut sse, 1).await), [6.0]);
    let event = take(&mut positions, 1).await.remove(0);
    assert_eq!(event.json()["coordinates"], serde_json::json!([4, 5]));
    let bad_topics = u64::from(dot_id.is_some());
    let status = acknowledged::<B>(&mut client, 4 + bad_topics).await;
    assert_eq!(status["bad"]["badDatetime"], 2, "{status}");
    assert_eq!(
        status["bad"]["topic"].as_u64().unwrap_or(0),
        bad_topics,
        "{status}"
    );
    assert_eq!(status["duplicates"], 0, "{status}");
    let samples = status["badSamples"].as_array().unwrap();
    assert_eq!(samples.len() as u64, 2 + bad_topics, "{status}");
    for sample in samples {
        let detail = sample["detail"].as_str().unwrap();
        match sample["reason"].as_str().unwrap() {
            "badDatetime" => assert!(
                detail.contains(&format!("instant 1: \"{far}\" is after"))
                    && detail.contains("--max-datetime-ahead-ms (86400000)"),
                "{detail}"
            ),
            "topic" => assert!(detail.contains("`..`"), "{detail}"),
            other => panic!("{other}: {status}"),
        }
    }
}

/// Positions in each form of `POST S/ingest` reach a position query once,
/// in order; a position at or before the feature's last is a duplicate,
/// and every bad one is counted under its reason with why.
pub(in crate::serve) async fn positions_on_tgsequence_reach_position_queries_once_and_bad_ones_are_counted<
    B: TestBroker,
>(
    name: &str,
) {
    let broker = B::start(name).await;
    let server = broker.serve(name, &[], &[]);
    let mut client = server.client();
    let echo = register(&mut client, S, r#"{"operation":"position"}"#).await;
    let mut sse = server.subscribe(&format!("{echo}/stream"), &[]).await;
    let (topic, on_positions) = (speed::<B>(), positions::<B>());
    let payloads = vec![
        // One instant, an array, a MovingPoint (the forms of POST S/ingest).
        position(0, 4.35, 50.85),
        format!(
            "[{},{}]",
            position(1, 4.36, 50.86),
            position(2, 4.37, 50.87)
        ),
        r#"{"type":"MovingPoint","coordinates":[[4.38,50.88],[4.39,50.89,12]],
            "datetimes":["2026-01-01T00:00:03Z","2026-01-01T00:00:04Z"],"interpolation":"Linear"}"#
            .to_owned(),
        // At or before the feature's last position: a duplicate.
        position(2, 4.37, 50.87),
        // Bad: out of range, not JSON, a property's instant, the wrong crs
        // (the feature's is geodetic), datetimes not increasing.
        position(5, 200.0, 0.0),
        "nope".to_owned(),
        instant(5, "1"),
        r#"{"type":"MovingPoint","coordinates":[[1,2]],"datetimes":["2026-01-01T00:00:05Z"],
            "crs":"EPSG:3857"}"#
            .to_owned(),
        format!("[{},{}]", position(6, 1.0, 2.0), position(6, 1.0, 3.0)),
    ];
    deliver(&broker, &on_positions, payloads).await;
    // A position on a property's topic is the wrong type.
    deliver(&broker, &topic, vec![position(5, 1.0, 2.0)]).await;
    deliver(&broker, &on_positions, vec![position(7, 4.4, 50.9)]).await;
    let events = take(&mut sse, 6).await;
    let got: Vec<(String, serde_json::Value)> = events
        .iter()
        .map(|e| {
            let j = e.json();
            assert_eq!(j["property"], "tgsequence", "{j}");
            (
                j["datetime"].as_str().unwrap().to_owned(),
                j["coordinates"].clone(),
            )
        })
        .collect();
    let want = |secs: u32, c: serde_json::Value| (format!("2026-01-01T00:00:{secs:02}Z"), c);
    use serde_json::json;
    assert_eq!(
        got,
        [
            want(0, json!([4.35, 50.85])),
            want(1, json!([4.36, 50.86])),
            want(2, json!([4.37, 50.87])),
            want(3, json!([4.38, 50.88])),
            want(4, json!([4.39, 50.89, 12])),
            want(7, json!([4.4, 50.9])),
        ]
    );
    let status = acknowledged::<B>(&mut client, 11).await;
    let bad = &status["bad"];
    assert_eq!(bad["badPosition"], 3, "{status}");
    // A datetime at fault is one, as on a property's topic.
    assert_eq!(bad["badDatetime"], 1, "{status}");
    assert_eq!(bad["notJson"], 1, "{status}");
    assert_eq!(bad["wrongType"], 1, "{status}");
    assert_eq!(status["duplicates"], 1, "{status}");
    let samples = status["badSamples"].as_array().unwrap();
    let detail = |text: &str| {
        samples
            .iter()
            .find(|s| s["detail"].as_str().unwrap().contains(text))
            .unwrap_or_else(|| panic!("a sample saying {text:?}: {status}"))
    };
    assert_eq!(detail("longitude 200")["reason"], "badPosition");
    assert_eq!(detail("longitude 200")["topic"], on_positions.as_str());
    assert_eq!(detail("EPSG:3857")["reason"], "badPosition");
    assert_eq!(detail("must increase")["reason"], "badDatetime");
    let wrong = detail("send it to /collections/ships/items/s1/tgsequence/ingest");
    assert_eq!(wrong["reason"], "wrongType");
    assert_eq!(wrong["topic"], topic.as_str());
}

/// A query that fixed a planar reference system has the feature's
/// positions checked in it: any finite coordinates, in metres; a
/// MovingPoint in another system is bad.
pub(in crate::serve) async fn positions_are_checked_in_the_reference_system_a_query_fixed<
    B: TestBroker,
>(
    name: &str,
) {
    let broker = B::start(name).await;
    let server = broker.serve(name, &[], &[]);
    let mut client = server.client();
    let speed = register(&mut client, S, r#"{"operation":"speed","crs":"EPSG:3857"}"#).await;
    let mut sse = server.subscribe(&format!("{speed}/stream"), &[]).await;
    let payloads = vec![
        // Planar: any finite coordinates (out of the lon/lat ranges), metres.
        position(0, 500_000.0, 4_000_000.0),
        // A MovingPoint in another system than the feature's: bad.
        r#"{"type":"MovingPoint","coordinates":[[1,2]],"datetimes":["2026-01-01T00:00:05Z"],
            "crs":"EPSG:4326"}"#
            .to_owned(),
        position(10, 500_030.0, 4_000_040.0),
    ];
    deliver(&broker, &positions::<B>(), payloads).await;
    let events = take(&mut sse, 1).await;
    let event = events[0].json();
    assert_eq!(event["datetime"], "2026-01-01T00:00:10Z", "{event}");
    // 50 m in 10 s (a 3-4-5 triangle).
    assert_eq!(event["value"], 5.0, "{event}");
    let status = acknowledged::<B>(&mut client, 3).await;
    assert_eq!(status["bad"]["badPosition"], 1, "{status}");
    let detail = status["badSamples"][0]["detail"].as_str().unwrap();
    assert!(detail.contains("EPSG:3857"), "{detail}");
}

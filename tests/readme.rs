//! The README's examples show what mfstream really prints and sends.

use crate::serve::{P, Serve, register};
use crate::util::root;

/// `frames` (SSE frames without their blank line) as the README shows
/// them: shell comments, `#` alone for the blank line between frames.
fn commented(frames: &[&[u8]]) -> String {
    let text: Vec<String> = frames
        .iter()
        .map(|frame| String::from_utf8_lossy(frame).into_owned())
        .collect();
    text.join("\n\n")
        .lines()
        .map(|line| match line {
            "" => "#".to_owned(),
            line => format!("# {line}"),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn the_readmes_sse_walk_through_shows_what_the_server_sends() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let walk = &readme[readme.find("A walk-through with curl:").unwrap()..];
    let walk = &walk[..walk.find("\n```\n").unwrap()];

    let server = Serve::start("readme-sse", &[], &[]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"mul","arg":1.852}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let speeds = std::fs::read_to_string(root().join("examples/speed.ndjson")).unwrap();
    let ingest = client.post(&format!("{P}/ingest"), &speeds).await;
    assert_eq!(ingest.body, r#"{"accepted":20,"queries":1}"#);
    let mut frames = Vec::new();
    for _ in 0..21 {
        frames.push(sse.next_frame().await.expect("a frame").to_vec());
    }
    assert_eq!(client.delete(&query).await.status, 204);
    let end = sse.next_frame().await.expect("the end").to_vec();
    assert!(sse.next_frame().await.is_none(), "the stream ends");

    // The retry line and the first result, then the end, as they come.
    let first = commented(&[&frames[0], &frames[1]]);
    assert!(
        walk.contains(&format!("{first}\n#\n# …\n")),
        "README lacks:\n{first}"
    );
    let last = commented(&[&end]);
    let delete =
        "curl -s -XDELETE $Q                                # 204; the stream ends with:\n";
    assert!(
        walk.contains(&format!("{delete}{last}")),
        "README lacks:\n{last}"
    );
}

#[tokio::test]
async fn the_readmes_positions_walk_through_shows_what_the_server_sends() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let walk = &readme[readme.find("A walk-through with positions:").unwrap()..];
    let walk = &walk[..walk.find("\n```\n").unwrap()];
    let quoted = |command: &str| -> String {
        let at = walk
            .find(command)
            .unwrap_or_else(|| panic!("README lacks {command}"));
        let rest = &walk[at + command.len()..];
        rest[..rest.find('\'').unwrap()].to_owned()
    };

    let server = Serve::start("readme-positions", &[], &[]);
    let mut client = server.client();
    let s = "/collections/ships/items/s1/tgsequence";
    let fence = quoted("curl -s -H \"$J\" $S/queries -d '");
    let query = register(&mut client, s, &fence).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let ship = std::fs::read_to_string(root().join("examples/ship.ndjson")).unwrap();
    let ingest = client.post(&format!("{s}/ingest"), &ship).await;
    assert!(
        walk.contains(&format!(
            "--data-binary @examples/ship.ndjson    # {}",
            ingest.body
        )),
        "README lacks the answer {}",
        ingest.body
    );
    let mut frames = Vec::new();
    for _ in 0..3 {
        frames.push(sse.next_frame().await.expect("a frame").to_vec());
    }
    let shown = commented(&frames.iter().map(Vec::as_slice).collect::<Vec<_>>());
    assert!(walk.contains(&shown), "README lacks:\n{shown}");

    register(&mut client, s, r#"{"operation":"speed"}"#).await;
    let moving = quoted("$S/ingest -d '{\"type\"");
    let moving = format!("{{\"type\"{moving}");
    let answer = client.post(&format!("{s}/ingest"), &moving).await;
    assert!(
        walk.contains(&format!(
            "\"interpolation\":\"Linear\"}}'   # {}",
            answer.body
        )),
        "README lacks {}",
        answer.body
    );
    let bad = quoted("$S/ingest -d '{\"datetime\"");
    let answer = client
        .post(&format!("{s}/ingest"), &format!("{{\"datetime\"{bad}"))
        .await;
    assert_eq!(answer.status, 400);
    assert!(
        walk.contains(&format!("# {}", answer.body)),
        "README lacks {}",
        answer.body
    );
}

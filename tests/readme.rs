//! The book's walk-throughs (`docs/src/`) show what mfstream really prints
//! and sends; README's tour shows the book's own examples; and every link
//! of the documentation resolves.

use crate::serve::{P, Serve, register};
use crate::util::{book, root};

/// `frames` (SSE frames without their blank line) as the book shows
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
async fn the_books_sse_walk_through_shows_what_the_server_sends() {
    let chapter = book("server.md");
    let walk = &chapter[chapter.find("A walk-through with curl:").unwrap()..];
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
        "the book lacks:\n{first}"
    );
    let last = commented(&[&end]);
    let delete =
        "curl -s -XDELETE $Q                                # 204; the stream ends with:\n";
    assert!(
        walk.contains(&format!("{delete}{last}")),
        "the book lacks:\n{last}"
    );
}

#[tokio::test]
async fn the_books_positions_walk_through_shows_what_the_server_sends() {
    let chapter = book("positions.md");
    let walk = &chapter[chapter.find("A walk-through with positions:").unwrap()..];
    let walk = &walk[..walk.find("\n```\n").unwrap()];
    let quoted = |command: &str| -> String {
        let at = walk
            .find(command)
            .unwrap_or_else(|| panic!("the book lacks {command}"));
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
        "the book lacks the answer {}",
        ingest.body
    );
    let mut frames = Vec::new();
    for _ in 0..3 {
        frames.push(sse.next_frame().await.expect("a frame").to_vec());
    }
    let shown = commented(&frames.iter().map(Vec::as_slice).collect::<Vec<_>>());
    assert!(walk.contains(&shown), "the book lacks:\n{shown}");

    register(&mut client, s, r#"{"operation":"speed"}"#).await;
    let moving = quoted("$S/ingest -d '{\"type\"");
    let moving = format!("{{\"type\"{moving}");
    let answer = client.post(&format!("{s}/ingest"), &moving).await;
    assert!(
        walk.contains(&format!(
            "\"interpolation\":\"Linear\"}}'   # {}",
            answer.body
        )),
        "the book lacks {}",
        answer.body
    );
    let bad = quoted("$S/ingest -d '{\"datetime\"");
    let answer = client
        .post(&format!("{s}/ingest"), &format!("{{\"datetime\"{bad}"))
        .await;
    assert_eq!(answer.status, 400);
    assert!(
        walk.contains(&format!("# {}", answer.body)),
        "the book lacks {}",
        answer.body
    );
}

/// The fenced blocks of `text`, in order, without their fences.
fn fenced(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim_start().starts_with("```") {
            let block: Vec<&str> = lines
                .by_ref()
                .take_while(|l| !l.trim_start().starts_with("```"))
                .collect();
            blocks.push(block.join("\n"));
        }
    }
    blocks
}

/// Every chapter of the book, as `(file name, text)`.
fn chapters() -> Vec<(String, String)> {
    let mut chapters: Vec<(String, String)> = std::fs::read_dir(root().join("docs/src"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".md"))
        .map(|name| {
            let text = book(&name);
            (name, text)
        })
        .collect();
    chapters.sort();
    chapters
}

#[test]
fn the_readmes_tour_shows_the_books_own_examples() {
    // The tour's commands and outputs are copies of the book's, whose tests
    // (above, and in the other modules) check them: a copy that drifts
    // fails here.
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let tour = &readme[readme
        .find("## A five-minute tour")
        .expect("README has its tour")..];
    let tour = &tour[..tour.find("\n## ").expect("a section after the tour")];
    let blocks = fenced(tour);
    assert!(blocks.len() >= 3, "the tour shows examples: {blocks:?}");
    let chapters = chapters();
    for block in blocks {
        assert!(
            chapters.iter().any(|(_, text)| text.contains(&block)),
            "README's tour shows a block no chapter of the book has:\n{block}"
        );
    }
}

#[test]
fn the_books_windowed_aggregate_example_is_what_mfstream_run_prints() {
    let chapter = book("windows.md");
    let at = chapter
        .find("```sh\nmfstream run --property speed \\\n")
        .expect("windows.md runs a windowed aggregate");
    let blocks = fenced(&chapter[at..]);
    let command = blocks[0].replace("\\\n", " ");
    let words = shell_words::split(&command).unwrap();
    assert_eq!(words[0], "mfstream");
    let output = crate::util::mfstream_command(&root())
        .args(&words[1..])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", crate::util::stderr(&output));
    assert_eq!(crate::util::stdout(&output), format!("{}\n", blocks[1]));
}

#[test]
fn every_link_of_the_documentation_resolves() {
    // The Markdown's links and anchors (README, the book's sources, every
    // other README); CI also checks the book as mdbook builds it
    // (`python3 docs/check-links.py docs/book`, in .ci/run).
    let output = std::process::Command::new("python3")
        .arg(root().join("docs/check-links.py"))
        .output()
        .expect("python3 runs docs/check-links.py");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn every_code_block_of_the_docs_is_marked_and_rust_ones_are_doctests() {
    // rustdoc runs an unmarked block as Rust: every block says what it is.
    // And a chapter with Rust examples is included as a doctest (a
    // `#[doc = include_str!("…/docs/src/CHAPTER")]` of the library).
    let mut sources = String::new();
    for dir in ["src", "crates"] {
        let mut stack = vec![root().join(dir)];
        while let Some(path) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&path) else {
                continue;
            };
            for entry in entries {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    sources += &std::fs::read_to_string(&path).unwrap();
                }
            }
        }
    }
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let mut docs = chapters();
    docs.push(("../../README.md".to_owned(), readme));
    for (name, text) in docs {
        let mut open = false;
        for (n, line) in text.lines().enumerate() {
            let Some(info) = line.trim_start().strip_prefix("```") else {
                continue;
            };
            if !open {
                assert!(
                    !info.trim().is_empty(),
                    "docs/src/{name}:{}: a code block without its language",
                    n + 1
                );
            }
            open = !open;
        }
        let include = format!("docs/src/{name}\")]");
        let include = include.trim_start_matches("docs/src/../../");
        assert!(
            !text.contains("```rust") || sources.contains(include),
            "{name} has Rust examples, but no `#[doc = include_str!(…{include}` runs them"
        );
    }
}

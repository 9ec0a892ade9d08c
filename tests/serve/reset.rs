//! A `Last-Event-ID` ahead of the server (a history this server does not
//! have) is answered by `event: reset` with the query's last id, then the
//! server's own history from the start, as a new subscriber gets it.

use std::path::Path;

use super::*;

fn ids(events: &[SseEvent]) -> Vec<u64> {
    events
        .iter()
        .map(|e| e.id.as_deref().expect("an id").parse().unwrap())
        .collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

async fn ingest(client: &mut Client, from: usize, n: usize) {
    let response = client.post(&format!("{P}/ingest"), &lines(from, n)).await;
    assert_eq!(response.status, 202, "{response:?}");
}

/// Asserts the stream opens with a reset naming `last`, then gives events
/// `1..=last` with the values `0..last` (as a new subscriber gets them).
async fn assert_reset_then_history(sse: &mut Sse, last: u64) {
    let reset = take(sse, 1).await.remove(0);
    assert_eq!(reset.event, "reset", "{reset:?}");
    assert_eq!(reset.id, None, "a reset carries no id: {reset:?}");
    assert_eq!(reset.json(), serde_json::json!({ "lastEventId": last }));
    let history = take(sse, last as usize).await;
    assert_eq!(ids(&history), (1..=last).collect::<Vec<_>>());
    let want: Vec<f64> = (0..last).map(|v| v as f64).collect();
    assert_eq!(values(&history), want);
}

#[tokio::test]
async fn a_last_event_id_ahead_of_the_query_gets_a_reset_and_the_history_without_state() {
    let server = Serve::start("reset-memory", &[], &[]);
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;
    let stream = format!("{query}/stream");
    ingest(&mut client, 0, 3).await;
    let mut first = server.subscribe(&stream, &[]).await;
    assert_eq!(ids(&take(&mut first, 3).await), [1, 2, 3]);

    // Ids of a history this server never had (another server's, before a
    // restart that forgot everything).
    let mut ahead = server.subscribe(&stream, &[("Last-Event-ID", "10")]).await;
    assert_reset_then_history(&mut ahead, 3).await;
    // Up to date is not ahead: no reset, the next event first.
    let mut level = server.subscribe(&stream, &[("Last-Event-ID", "3")]).await;
    ingest(&mut client, 3, 1).await;
    for sse in [&mut ahead, &mut level] {
        let next = take(sse, 1).await;
        assert_eq!((ids(&next), values(&next)), (vec![4], vec![3.0]));
    }
}

#[tokio::test]
async fn a_client_ahead_of_a_state_dir_restored_from_an_older_backup_gets_a_reset() {
    let state = TempDir::new("reset-state");
    let backup = TempDir::new("reset-backup");
    let dir = state.path().to_str().unwrap().to_owned();
    let stream;
    {
        let mut server = Serve::start("reset-before", &["--state", &dir], &[]);
        let mut client = server.client();
        let query = register(&mut client, P, r#"{"operation":"abs"}"#).await;
        stream = format!("{query}/stream");
        ingest(&mut client, 0, 2).await;
        // Sent only once stored.
        let mut sse = server.subscribe(&stream, &[]).await;
        assert_eq!(ids(&take(&mut sse, 2).await), [1, 2]);
        assert_eq!(server.terminate().code(), Some(0));
    }
    // The backup holds events 1 and 2.
    copy_dir(state.path(), &backup.join("state"));
    {
        let mut server = Serve::start("reset-after", &["--state", &dir], &[]);
        let mut client = server.client();
        ingest(&mut client, 2, 3).await;
        let mut sse = server.subscribe(&stream, &[("Last-Event-ID", "2")]).await;
        assert_eq!(ids(&take(&mut sse, 3).await), [3, 4, 5]);
        assert_eq!(server.terminate().code(), Some(0));
    }
    // The state is lost and restored from the backup: the client saw 5.
    let restored = backup.join("state");
    let restored = restored.to_str().unwrap();
    let server = Serve::start("reset-restored", &["--state", restored], &[]);
    let mut client = server.client();
    let mut ahead = server.subscribe(&stream, &[("Last-Event-ID", "5")]).await;
    assert_reset_then_history(&mut ahead, 2).await;
    // And the query goes on from the backup's history: its next event is
    // 3 again, for the next instant ingested.
    ingest(&mut client, 10, 1).await;
    let next = take(&mut ahead, 1).await;
    assert_eq!((ids(&next), values(&next)), (vec![3], vec![10.0]));
}

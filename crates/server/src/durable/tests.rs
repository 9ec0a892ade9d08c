//! What a store error does to a query, on a server run in-process (the
//! store's fault hook is compiled into tests alone).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mfstream_test_client::{Client, subscribe};
use tokio::sync::oneshot;

use crate::{ServeOptions, Server};
use mfstream_registry::Registry;
use mfstream_store::StoreErrorKind;

const P: &str = "/collections/ships/items/s1/tproperties/speed";
const PATIENCE: Duration = Duration::from_secs(20);

/// A running server and what stops it.
struct Running {
    client: Client,
    addr: std::net::SocketAddr,
    stop: oneshot::Sender<()>,
    done: tokio::task::JoinHandle<()>,
}

async fn serve(state: &Path) -> (Running, Arc<mfstream_store::Store>) {
    let mut options = ServeOptions {
        addr: ([127, 0, 0, 1], 0).into(),
        ..ServeOptions::default()
    };
    options.state.dir = Some(state.to_owned()).into();
    options.timing.shutdown_grace = Duration::from_secs(2).into();
    let server = Server::bind(Arc::new(Registry::builtin()), options)
        .await
        .expect("the server binds");
    let store = server.app.store.clone().expect("--state");
    let addr = server.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel();
    let done = tokio::spawn(async move {
        server
            .run(async {
                let _ = stopped.await;
            })
            .await
            .expect("the server runs");
    });
    let running = Running {
        client: Client::new(addr),
        addr,
        stop,
        done,
    };
    (running, store)
}

impl Running {
    async fn shut_down(self) {
        let _ = self.stop.send(());
        self.done.await.unwrap();
    }
}

#[tokio::test]
async fn a_query_whose_results_the_store_refuses_is_failed_with_the_reason_even_after_a_restart() {
    let state = std::env::temp_dir().join(format!("mfstream-refused-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    let (mut server, store) = serve(&state).await;
    let response = server
        .client
        .post(&format!("{P}/queries"), r#"{"operation":"abs"}"#)
        .await;
    assert_eq!(response.status, 201, "{response:?}");
    let query = response.json()["channel"].as_str().unwrap().to_owned();
    let mut sse = subscribe(server.addr, &format!("{query}/stream"), &[])
        .await
        .expect("subscribed");

    store.inject_fault(Some(StoreErrorKind::Unwritable(
        "the disk is on fire".into(),
    )));
    drop(store);
    let body = r#"{"datetime":"2026-01-01T00:00:00Z","value":-1}"#;
    let ingest = server.client.post(&format!("{P}/ingest"), body).await;
    assert_eq!(ingest.status, 202, "the instant was logged: {ingest:?}");

    let events = tokio::time::timeout(PATIENCE, sse.until_end())
        .await
        .expect("the end in time");
    let end = events.last().expect("an end event").json();
    assert_eq!(end["status"], "failed", "{events:?}");
    let reason = end["reason"].as_str().unwrap().to_owned();
    assert!(
        reason.starts_with("the state store refused its results: ")
            && reason.contains("the disk is on fire"),
        "{reason}"
    );
    let link = server.client.get(&query).await.json();
    assert_eq!(link["status"], "failed", "not stopped: {link}");
    assert_eq!(link["reason"], reason.as_str());
    server.shut_down().await;

    let (mut server, store) = serve(&state).await;
    drop(store);
    let link = server.client.get(&query).await.json();
    assert_eq!(link["status"], "failed", "after a restart: {link}");
    assert_eq!(link["reason"], reason.as_str());
    server.shut_down().await;
    std::fs::remove_dir_all(&state).unwrap();
}

#[tokio::test]
async fn a_querys_results_wait_for_a_state_directory_that_cannot_be_reached_and_the_query_runs_on()
{
    let state = std::env::temp_dir().join(format!("mfstream-unreachable-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    let (mut server, store) = serve(&state).await;
    let response = server
        .client
        .post(&format!("{P}/queries"), r#"{"operation":"abs"}"#)
        .await;
    assert_eq!(response.status, 201, "{response:?}");
    let query = response.json()["channel"].as_str().unwrap().to_owned();
    let mut sse = subscribe(server.addr, &format!("{query}/stream"), &[])
        .await
        .expect("subscribed");

    // The instant is logged; its result finds the directory unreachable.
    store.inject_fault(Some(StoreErrorKind::Unreachable {
        path: state.join("journal"),
        message: "Permission denied (os error 13)".into(),
    }));
    let body = r#"{"datetime":"2026-01-01T00:00:00Z","value":-1}"#;
    let ingest = server.client.post(&format!("{P}/ingest"), body).await;
    assert_eq!(ingest.status, 202, "{ingest:?}");
    // Offered, refused, and offered again: not failed.
    for _ in 0..2 {
        tokio::time::timeout(PATIENCE, store.fault_hit())
            .await
            .expect("the results offered to the store");
    }
    let link = server.client.get(&query).await.json();
    assert_eq!(link["status"], "running", "{link}");

    store.inject_fault(None);
    let event = tokio::time::timeout(PATIENCE, sse.next())
        .await
        .expect("the result in time")
        .expect("the stream goes on");
    assert_eq!(event.id.as_deref(), Some("1"));
    assert_eq!(event.json()["value"], 1.0);
    let link = server.client.get(&query).await.json();
    assert_eq!(link["status"], "running", "{link}");
    drop(store);
    server.shut_down().await;
    std::fs::remove_dir_all(&state).unwrap();
}

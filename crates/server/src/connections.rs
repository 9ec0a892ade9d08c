//! Connections: the accept loop, with a cap on open connections, a time
//! limit on request heads, and a shutdown that is graceful first and then
//! closes whatever is still open.
//!
//! `axum::serve` has none of these bounds (no header timeout, no connection
//! cap, a graceful shutdown that waits forever), so the server drives
//! hyper's HTTP/1.1 connections itself:
//!
//! - at most `max_connections` are open at once; past that, new connections
//!   wait in the kernel's accept queue until one closes (no file descriptor
//!   is spent on them);
//! - a request head must arrive within `header_timeout` (this is also how
//!   long a kept-alive connection may sit idle between requests), and be at
//!   most [`MAX_HEAD`] bytes;
//! - on shutdown, every connection is asked to finish its current request
//!   and close ([`Connections::drain`]); those still open when
//!   [`Connections::close`] is called (after the shutdown grace) are closed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::{Service, service_fn};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::browser::Arrived;
use super::parse_errors::JsonParseErrors;

/// The largest request head (request line and headers), in bytes: a larger
/// one is answered 431, so a slow connection holds at most this much of a
/// head.
pub(crate) const MAX_HEAD: usize = 64 * 1024;

/// The bounds of the accept loop.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) max_connections: usize,
    pub(crate) header_timeout: Duration,
}

/// The connections being served, for the shutdown.
#[derive(Debug, Default)]
pub(crate) struct Connections {
    tasks: TaskTracker,
    /// Stop accepting; ask every connection to finish and close.
    draining: CancellationToken,
    /// Close every connection still open.
    closing: CancellationToken,
    /// Connections accepted so far (`GET /metrics`).
    accepted: AtomicU64,
}

impl Connections {
    /// Accepts and serves connections until [`Connections::drain`].
    pub(crate) async fn accept(&self, listener: TcpListener, router: Router, limits: Limits) {
        let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .max_header_size(MAX_HEAD);
        loop {
            // A permit first: over the cap, connections wait in the accept
            // queue instead of holding a file descriptor each.
            let permit = tokio::select! {
                permit = permits.clone().acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_closed) => return,
                },
                () = self.draining.cancelled() => return,
            };
            let (tcp, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of descriptors or a connection reset before
                        // it was accepted: neither ends the server.
                        tracing::warn!("cannot accept a connection: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = self.draining.cancelled() => return,
            };
            self.accepted.fetch_add(1, Ordering::Relaxed);
            // Small SSE frames go out at once, not held back by Nagle's
            // algorithm waiting for the peer's delayed ACK.
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!("cannot set TCP_NODELAY: {e}");
            }
            // Each request carries the local address it arrived on: with
            // `0.0.0.0` or `::` bound, that is the address the client used,
            // which its `Host` may name (see `browser`).
            let arrived = tcp.local_addr().ok().map(Arrived);
            let io = TokioIo::new(JsonParseErrors::new(tcp));
            let router = TowerToHyperService::new(router.clone());
            let service = service_fn(move |mut request: hyper::Request<Incoming>| {
                if let Some(arrived) = arrived {
                    request.extensions_mut().insert(arrived);
                }
                router.call(request)
            });
            let conn = builder.serve_connection(io, service);
            let draining = self.draining.clone();
            let closing = self.closing.clone();
            self.tasks.spawn(async move {
                let _permit = permit;
                let mut conn = std::pin::pin!(conn);
                let result = tokio::select! {
                    result = conn.as_mut() => result,
                    () = draining.cancelled() => {
                        conn.as_mut().graceful_shutdown();
                        tokio::select! {
                            result = conn.as_mut() => result,
                            () = closing.cancelled() => Ok(()),
                        }
                    }
                };
                if let Err(e) = result {
                    tracing::debug!(%peer, "connection ended: {e}");
                }
            });
        }
    }

    /// The connections open now.
    pub(crate) fn open(&self) -> usize {
        self.tasks.len()
    }

    /// The connections accepted so far.
    pub(crate) fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Stops accepting, and asks every connection to finish its current
    /// request (a stream: to send its last bytes) and close.
    pub(crate) fn drain(&self) {
        self.draining.cancel();
        self.tasks.close();
    }

    /// Waits up to `wait` for every connection to close; false if some are
    /// still open.
    pub(crate) async fn wait(&self, wait: Duration) -> bool {
        tokio::time::timeout(wait, self.tasks.wait()).await.is_ok()
    }

    /// Closes every connection still open, and waits for them to go.
    pub(crate) async fn close(&self) {
        self.drain();
        self.closing.cancel();
        self.tasks.wait().await;
    }
}

/// The SSE streams open, capped below the connections (`--max-streams`) so
/// that open streams can never take every connection and lock out ingest
/// and registrations.
#[derive(Debug)]
pub(crate) struct Streams {
    open: Arc<AtomicUsize>,
    max: usize,
}

/// One open stream's slot, given back when the stream ends (its body is
/// dropped).
#[derive(Debug)]
pub(crate) struct StreamSlot(Arc<AtomicUsize>);

impl Streams {
    /// At most `max` streams open at once.
    pub(crate) fn new(max: usize) -> Streams {
        Streams {
            open: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }

    /// A slot for one more stream; `None` when `max` are open.
    pub(crate) fn try_open(&self) -> Option<StreamSlot> {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .ok()
            .map(|_| StreamSlot(self.open.clone()))
    }

    /// The streams open now.
    pub(crate) fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// The most streams open at once.
    pub(crate) fn max(&self) -> usize {
        self.max
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_past_the_cap_are_refused_until_one_ends() {
        let streams = Streams::new(2);
        let a = streams.try_open().unwrap();
        let _b = streams.try_open().unwrap();
        assert!(streams.try_open().is_none());
        drop(a);
        assert!(streams.try_open().is_some());
    }
}

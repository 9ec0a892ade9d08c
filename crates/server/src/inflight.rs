//! The bytes of request bodies in flight, bounded server-wide
//! ([`Limits::max_inflight_bytes`](crate::Limits::max_inflight_bytes),
//! `--max-inflight-bytes`): each body holds its bytes from the moment it
//! starts being read (its `Content-Length` at once, else as its chunks
//! arrive) until the call it carries is done (an ingest: its instants
//! handed over). Without it, `--max-connections` bodies of `--max-body`
//! each could be held at once (1,024 × 4 MiB ≈ 4 GiB, twice that once
//! parsed).
//!
//! Past the bound a request is answered 503 with `Retry-After` at once,
//! never queued: a queue of bodies would be the memory the bound saves.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use mfstream_model::budget::Bytes;
use mfstream_model::origin::Value;

use super::problem::Problem;

/// The server's bytes of bodies in flight.
#[derive(Debug)]
pub(crate) struct InFlight {
    bytes: Arc<Semaphore>,
    max: usize,
    /// How a refusal names the bound: as its origin does.
    option: Arc<str>,
}

/// The bytes one body holds, given back when dropped.
#[derive(Debug)]
pub(crate) struct Held {
    flight: Arc<Semaphore>,
    max: usize,
    option: Arc<str>,
    permit: Option<OwnedSemaphorePermit>,
    bytes: usize,
}

impl InFlight {
    /// At most `max` bytes of bodies in flight.
    pub(crate) fn new(max: Value<usize>) -> InFlight {
        InFlight {
            bytes: Arc::new(Semaphore::new(max.min(Semaphore::MAX_PERMITS))),
            option: max.name("max_inflight_bytes").into(),
            max: max.value,
        }
    }

    /// A hold of no bytes yet, for one body.
    pub(crate) fn hold(&self) -> Held {
        Held {
            flight: self.bytes.clone(),
            max: self.max,
            option: self.option.clone(),
            permit: None,
            bytes: 0,
        }
    }

    /// The bytes held now.
    pub(crate) fn used(&self) -> usize {
        self.max.min(Semaphore::MAX_PERMITS) - self.bytes.available_permits()
    }

    /// The bytes free now.
    #[cfg(test)]
    pub(crate) fn available(&self) -> usize {
        self.bytes.available_permits()
    }
}

impl Held {
    /// Holds `bytes` in all for this body (more than now, or nothing
    /// changes); 503 naming the bound when the server's are taken.
    pub(crate) fn cover(&mut self, bytes: usize) -> Result<(), Problem> {
        let Some(more) = bytes.checked_sub(self.bytes).filter(|&n| n > 0) else {
            return Ok(());
        };
        let permit = u32::try_from(more)
            .ok()
            .and_then(|n| self.flight.clone().try_acquire_many_owned(n).ok())
            .ok_or_else(|| busy(self.max, &self.option))?;
        match &mut self.permit {
            Some(held) => held.merge(permit),
            None => self.permit = Some(permit),
        }
        self.bytes = bytes;
        Ok(())
    }
}

fn busy(max: usize, option: &str) -> Problem {
    Problem::new(
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        "TooManyBytesInFlight",
        format!(
            "request bodies being received or ingested reached {option} ({}): send it again \
             after the Retry-After delay",
            Bytes(max as u64)
        ),
    )
    .closing()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mfstream_model::origin::Origin;

    #[test]
    fn bodies_hold_their_bytes_until_dropped_and_the_one_past_the_bound_is_refused() {
        let flight = InFlight::new(Value::new(100, Origin::flag("--max-inflight-bytes")));
        let mut a = flight.hold();
        a.cover(60).unwrap();
        a.cover(30).unwrap();
        assert_eq!(flight.available(), 40);
        let mut b = flight.hold();
        b.cover(40).unwrap();
        let mut c = flight.hold();
        let refused = format!("{:?}", c.cover(1).unwrap_err());
        assert!(
            refused.contains("--max-inflight-bytes (100 bytes)"),
            "{refused}"
        );
        drop(a);
        c.cover(60).unwrap();
        assert_eq!(flight.available(), 0);
        drop((b, c));
        assert_eq!(flight.available(), 100);
    }
}

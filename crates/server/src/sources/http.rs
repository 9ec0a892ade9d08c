//! HTTP ingest (`POST …/ingest`, `POST …/tgsequence/ingest`): the source
//! every server has. Its handlers are routes of their own (`crate::routes`);
//! as a source it is its counters, `source="http"` in the ingest metrics.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{Configured, Kind, Run, Source};
use crate::metrics::{IngestCounters, IngestTally, Reason};
use crate::problem::Problem;
use crate::{App, ServeOptions};

/// HTTP ingest's kind: always on, no options, no status route.
pub(crate) const KIND: Kind = Kind {
    name: NAME,
    configure,
    routes: |router| router,
};

const NAME: &str = "http";

/// Nothing to configure: built by [`super::Sources::build`] itself.
fn configure(_: &ServeOptions) -> Configured {
    Ok(None)
}

/// HTTP ingest's counters.
#[derive(Debug)]
pub(crate) struct Http {
    counters: Arc<IngestCounters>,
}

impl Http {
    /// HTTP ingest, counted in `tally`.
    pub(crate) fn new(tally: &mut IngestTally) -> Arc<Http> {
        Arc::new(Http {
            counters: tally.counters(NAME),
        })
    }

    /// Counts an ingest's answer: the instants it accepted, and its reason
    /// if it is an error.
    pub(crate) fn answered(&self, answer: Result<usize, &Problem>) {
        self.counters.answered(answer);
    }

    /// Counts a body refused before its route (over `--max-body`).
    pub(crate) fn refused(&self, reason: Reason) {
        self.counters.refused(reason);
    }
}

impl Source for Http {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(self: Arc<Self>, _app: Arc<App>, _stop: CancellationToken) -> Run {
        Box::pin(std::future::ready(()))
    }
}

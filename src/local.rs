//! The `local` engine: transforms applied in process, the embedded default.

use std::sync::Arc;

use async_trait::async_trait;
use tracing::Instrument;

use crate::engine::{
    EngineError, EngineInfo, EngineKind, QueryHandle, QueryOutput, Source, StreamEngine,
};
use crate::ops::Transform;
use crate::spec::{QueryKind, QuerySpec};
use crate::vocab::{Event, Instant, InstantEvent, QueryStatus, Value};

/// The name of the built-in engine.
pub const LOCAL: &str = "local";

/// Event batches buffered between the engine and its consumer.
const EVENT_BUFFER: usize = 16;

/// The in-process engine.
///
/// Applies a transform to each instant in order on a task of the async
/// runtime, passing the datetime through verbatim.
#[derive(Debug, Default)]
pub struct LocalEngine;

impl LocalEngine {
    /// The engine.
    pub fn new() -> LocalEngine {
        LocalEngine
    }
}

#[async_trait]
impl StreamEngine for LocalEngine {
    fn name(&self) -> &str {
        LOCAL
    }

    fn describe(&self) -> EngineInfo {
        EngineInfo {
            name: LOCAL.into(),
            kind: EngineKind::Builtin,
            ready: true,
            reason: None,
            description: "in-process engine (the embedded default)".into(),
            serves: vec!["transform"],
        }
    }

    async fn submit(&self, spec: QuerySpec, source: Source) -> Result<QueryHandle, EngineError> {
        let transform = match &spec.kind {
            QueryKind::Transform(t) => *t,
            QueryKind::Aggregate(_) => {
                return Err(EngineError::Unsupported {
                    engine: LOCAL.into(),
                    what: "windowed aggregates yet".into(),
                });
            }
        };
        let (handle, output) = QueryHandle::new(&spec.id, LOCAL, EVENT_BUFFER);
        let span = tracing::info_span!("query", engine = LOCAL, id = %spec.id);
        let property: Arc<str> = spec.property.as_str().into();
        tokio::spawn(run(transform, property, source, output).instrument(span));
        Ok(handle)
    }
}

async fn run(transform: Transform, property: Arc<str>, mut source: Source, output: QueryOutput) {
    let operation: Arc<str> = transform.op.name().into();
    let status = loop {
        let batch = tokio::select! {
            biased;
            _ = output.stopping() => break QueryStatus::Stopped,
            batch = source.next_batch() => batch,
        };
        let batch = match batch {
            None => break QueryStatus::Completed,
            Some(Err(e)) => break QueryStatus::Failed { reason: e.0 },
            Some(Ok(batch)) => batch,
        };
        output.progress().add_in(batch.len());
        let (events, failure) = apply(&transform, &property, &operation, batch);
        // Results before a failing record are delivered, then the failure.
        if output.emit(events).await.is_err() {
            break QueryStatus::Stopped;
        }
        if let Some(reason) = failure {
            break QueryStatus::Failed { reason };
        }
    };
    tracing::debug!(%status, "query ended");
    output.finish(status);
}

/// Transforms a batch, stopping at the first record that fails.
fn apply(
    transform: &Transform,
    property: &Arc<str>,
    operation: &Arc<str>,
    batch: Vec<Instant>,
) -> (Vec<Event>, Option<String>) {
    let mut events = Vec::with_capacity(batch.len());
    for instant in batch {
        let x = match instant.value {
            Value::Number(x) => x,
            other => {
                let reason = format!(
                    "record at {} has value {other}, but {} takes numbers",
                    instant.datetime, transform.op
                );
                return (events, Some(reason));
            }
        };
        match transform.apply(x) {
            Ok(y) => events.push(Event::Instant(InstantEvent {
                datetime: instant.datetime,
                value: Value::Number(y),
                property: property.clone(),
                operation: operation.clone(),
            })),
            Err(e) => {
                let reason = format!("record at {}: {e}", instant.datetime);
                return (events, Some(reason));
            }
        }
    }
    (events, None)
}

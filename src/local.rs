//! The `local` engine: transforms and windowed aggregates computed in
//! process, the embedded default.

use std::sync::Arc;

use async_trait::async_trait;
use tracing::Instrument;

use crate::engine::{
    AggregatesIn, EngineError, EngineInfo, EngineKind, QueryHandle, QueryOutput, Source,
    StreamEngine,
};
use crate::ops::Transform;
use crate::spec::{QueryKind, QuerySpec};
use crate::vocab::{Event, Instant, InstantEvent, QueryStatus, Value};
use crate::window::Windower;

/// The name of the built-in engine.
pub const LOCAL: &str = "local";

/// The in-process engine.
///
/// Runs each query on a task of the async runtime: a transform is applied
/// to each instant in order, passing the datetime through verbatim; a
/// windowed aggregate feeds the instants (transformed first, when the query
/// composes both) to a [`Windower`].
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
            serves: vec!["transform", "aggregate"],
            aggregates_in: AggregatesIn::InProcess,
        }
    }

    async fn submit(&self, spec: QuerySpec, source: Source) -> Result<QueryHandle, EngineError> {
        spec.validate()?;
        Ok(submit_as(LOCAL, spec, source))
    }
}

/// Runs a validated query in process, its handle naming `engine`: the
/// `local` engine's queries, and the windows a bridge engine computes in the
/// host for an aggregate with no transform for its job to run.
pub(crate) fn submit_as(engine: &str, spec: QuerySpec, source: Source) -> QueryHandle {
    let property: Arc<str> = spec.property.as_str().into();
    let work = match &spec.kind {
        QueryKind::Transform(t) => Work::new(Some(*t), None, &property),
        QueryKind::Aggregate {
            transform,
            aggregate,
        } => {
            let windower =
                Windower::new(aggregate, property.clone()).with_property_type(spec.value_type());
            Work::new(*transform, Some(windower), &property)
        }
    };
    let (handle, output) = QueryHandle::new(&spec.id, engine, crate::engine::EVENT_BUFFER);
    let span = tracing::info_span!("query", engine, id = %spec.id);
    tokio::spawn(run(work, source, output).instrument(span));
    handle
}

/// What a query does to each instant: a transform, a windowed aggregate,
/// or both in turn.
struct Work {
    transform: Option<Transform>,
    windower: Option<Windower>,
    property: Arc<str>,
    operation: Arc<str>,
}

impl Work {
    fn new(transform: Option<Transform>, windower: Option<Windower>, property: &Arc<str>) -> Work {
        Work {
            transform,
            windower,
            property: property.clone(),
            operation: transform.map_or("", |t| t.op.name()).into(),
        }
    }

    /// Processes a batch, stopping at the first record that fails; the
    /// events before it are returned with the reason.
    fn apply(&mut self, batch: Vec<Instant>) -> (Vec<Event>, Option<String>) {
        let mut events = Vec::with_capacity(if self.windower.is_some() {
            0
        } else {
            batch.len()
        });
        for instant in batch {
            let instant = match &self.transform {
                Some(transform) => match transformed(transform, instant) {
                    Ok(instant) => instant,
                    Err(reason) => return (events, Some(reason)),
                },
                None => instant,
            };
            match &mut self.windower {
                Some(windower) => {
                    if let Err(reason) = windower.push(instant, &mut events) {
                        return (events, Some(reason));
                    }
                }
                None => events.push(Event::Instant(InstantEvent {
                    datetime: instant.datetime,
                    value: instant.value,
                    property: self.property.clone(),
                    operation: self.operation.clone(),
                })),
            }
        }
        (events, None)
    }

    /// The end of the source: the open windows' partial events, and the
    /// reason the query fails if one cannot be emitted.
    fn finish(&mut self) -> (Vec<Event>, Option<String>) {
        let mut events = Vec::new();
        let failure = match &mut self.windower {
            Some(windower) => windower.try_finish(&mut events).err(),
            None => None,
        };
        (events, failure)
    }
}

async fn run(mut work: Work, mut source: Source, output: QueryOutput) {
    let status = loop {
        let batch = tokio::select! {
            biased;
            _ = output.stopping() => break QueryStatus::Stopped,
            batch = source.next_batch() => batch,
        };
        let batch = match batch {
            None => {
                let (events, failure) = work.finish();
                if output.emit(events).await.is_err() {
                    break QueryStatus::Stopped;
                }
                break match failure {
                    Some(reason) => QueryStatus::Failed { reason },
                    None => QueryStatus::Completed,
                };
            }
            Some(Err(e)) => break QueryStatus::Failed { reason: e.0 },
            Some(Ok(batch)) => batch,
        };
        output.progress().add_in(batch.len());
        let (events, failure) = work.apply(batch);
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

/// The instant with its value transformed, or why it cannot be.
fn transformed(transform: &Transform, instant: Instant) -> Result<Instant, String> {
    let x = match instant.value {
        Value::Number(x) => x,
        other => {
            return Err(format!(
                "record at {} has value {other}, but {} takes numbers",
                instant.datetime, transform.op
            ));
        }
    };
    match transform.apply(x) {
        Ok(y) => Ok(Instant {
            datetime: instant.datetime,
            value: Value::Number(y),
        }),
        Err(e) => Err(format!("record at {}: {e}", instant.datetime)),
    }
}

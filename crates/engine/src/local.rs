//! The `local` engine: transforms and windowed aggregates computed in
//! process, the embedded default.

use std::sync::Arc;

use async_trait::async_trait;

use crate::plan::{self, Plan, Pushed, Records, plan};
use crate::{
    AggregatesIn, EngineError, EngineInfo, EngineKind, QueryHandle, Serves, Source, StreamEngine,
};
use mfstream_model::OnError;
use mfstream_model::aggregate::{WindowError, Windower};
use mfstream_model::clock::WallClock;
use mfstream_model::ops::{DomainError, Op, Transform};
use mfstream_model::{Event, Instant, InstantEvent, Value};
use mfstream_model::{QueryKind, QuerySpec};
use mfstream_model::{SpecError, SpecErrorKind};

/// The name of the built-in engine.
pub const LOCAL: &str = "local";

/// The in-process engine.
///
/// Runs each query as a task of its [`Compute`](mfstream_model::compute::Compute) (a compute
/// pool, or the caller's runtime), in slices: a transform is applied
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
            abi_version: None,
            name: LOCAL.into(),
            kind: EngineKind::Builtin,
            ready: true,
            reason: None,
            description: "in-process engine (the embedded default)".into(),
            serves: Serves::TRANSFORM | Serves::AGGREGATE | Serves::POSITIONS,
            aggregates_in: AggregatesIn::InProcess,
        }
    }

    async fn submit(&self, spec: QuerySpec, source: Source) -> Result<QueryHandle, EngineError> {
        // A position query runs whole, in process: it is not split.
        if let QueryKind::Position(query) = &spec.kind {
            spec.validate()?;
            return Ok(crate::positions::submit(LOCAL, &spec, query, source)?);
        }
        let plan = plan(&spec)?;
        Ok(submit_as(LOCAL, plan, &spec, source)?)
    }
}

/// Runs a planned query in process, its handle naming `engine`: the `local`
/// engine's queries, and the windows a bridge or plugin engine computes in
/// the host for an aggregate with no transform for its job to run. A
/// position query's plan runs the query whole, as the `local` engine does.
pub(crate) fn submit_as(
    engine: &str,
    plan: Plan,
    spec: &QuerySpec,
    source: Source,
) -> Result<QueryHandle, SpecError> {
    let property: Arc<str> = spec.property.as_str().into();
    let work = match (plan, &spec.kind) {
        (Plan::Position { .. }, QueryKind::Position(query)) => {
            return crate::positions::submit(engine, spec, query, source);
        }
        (plan, _) => plan,
    };
    let work = match work {
        Plan::Engine {
            transform,
            windower,
        } => Work::new(Some(transform), windower, property, spec.clock.clone()),
        Plan::Host(windower) => Work::new(None, Some(windower), property, spec.clock.clone()),
        Plan::Position { .. } => {
            return Err(SpecError::new(
                "type",
                SpecErrorKind::Unfit,
                format!("{} is not a query on positions", spec.property_type),
            ));
        }
    }
    .on_error(spec.on_error);
    Ok(plan::start(engine, spec, work, source))
}

/// What a query does to each instant: a transform, a windowed aggregate,
/// or both in turn.
struct Work {
    transform: Option<Transform>,
    windower: Option<Box<Windower>>,
    property: Arc<str>,
    operation: Arc<str>,
    /// A live query's wall clock, which closes windows on time.
    clock: Option<WallClock>,
    /// What a record with no finite result does.
    on_error: OnError,
    /// Records skipped since the last instant event (a transform alone):
    /// the next one carries them.
    carry: u64,
}

impl Work {
    fn new(
        transform: Option<Transform>,
        windower: Option<Box<Windower>>,
        property: Arc<str>,
        clock: Option<WallClock>,
    ) -> Work {
        Work {
            transform,
            windower,
            property,
            operation: transform.map_or("", |t| t.op.name()).into(),
            clock,
            on_error: OnError::Skip,
            carry: 0,
        }
    }

    fn on_error(mut self, on_error: OnError) -> Work {
        self.on_error = on_error;
        self
    }
}

impl Records for Work {
    type Error = RecordError;

    fn windows(&mut self) -> (Option<&mut Windower>, Option<&WallClock>) {
        (self.windower.as_deref_mut(), self.clock.as_ref())
    }

    /// A record with no result in its operation's domain is skipped under
    /// `onError: skip`, else an error too.
    fn push(&mut self, instant: Instant, events: &mut Vec<Event>) -> Result<Pushed, RecordError> {
        let instant = match &self.transform {
            Some(transform) => match transformed(transform, instant) {
                Ok(instant) => instant,
                Err(RecordError::Domain { .. }) if self.on_error == OnError::Skip => {
                    // The next event carries it: the window's, or the
                    // next transformed instant's.
                    match &mut self.windower {
                        Some(windower) => windower.skip(1),
                        None => self.carry += 1,
                    }
                    return Ok(Pushed::Skipped);
                }
                Err(reason) => return Err(reason),
            },
            None => instant,
        };
        match &mut self.windower {
            Some(windower) => {
                windower.push(instant, events)?;
                Ok(Pushed::Done)
            }
            None => {
                events.push(Event::Instant(InstantEvent {
                    datetime: instant.datetime,
                    value: instant.value,
                    property: self.property.clone(),
                    operation: self.operation.clone(),
                    skipped: std::mem::take(&mut self.carry),
                }));
                Ok(Pushed::Done)
            }
        }
    }
}

/// Why a record fails a local query.
#[derive(Debug, thiserror::Error)]
enum RecordError {
    /// A value that is not a number, given to a transform.
    #[error("record at {datetime} has value {value}, but {op} takes numbers")]
    NotNumber {
        datetime: String,
        value: Value,
        op: Op,
    },
    /// No result in the operation's domain (or not finite): skipped under
    /// `onError: skip`.
    #[error("record at {datetime}: {error}")]
    Domain {
        datetime: String,
        error: DomainError,
    },
    /// The windower refused it.
    #[error(transparent)]
    Window(#[from] WindowError),
}

/// The instant with its value transformed, or why it has none.
fn transformed(transform: &Transform, instant: Instant) -> Result<Instant, RecordError> {
    let x = match instant.value {
        Value::Number(x) => x,
        value => {
            return Err(RecordError::NotNumber {
                datetime: instant.datetime,
                value,
                op: transform.op,
            });
        }
    };
    match transform.apply(x) {
        Ok(y) => Ok(Instant {
            datetime: instant.datetime,
            value: Value::Number(y),
        }),
        Err(error) => Err(RecordError::Domain {
            datetime: instant.datetime,
            error,
        }),
    }
}

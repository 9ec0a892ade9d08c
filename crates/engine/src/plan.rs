//! The query planner: which part of a query an engine runs and which the
//! host runs over the engine's outputs, the same for every engine.
//!
//! A query is a transform, a windowed aggregate, or a transform then an
//! aggregate of its outputs. An engine (the `local` engine's task, a bridge
//! job, a plugin in or out of process) runs the transform; the host's
//! [`Windower`] computes the windows, over the engine's outputs or, when
//! there is no transform, over the instants themselves. A bridge engine
//! whose job aggregates is the one exception: it asks for the whole query.
//! A query on positions is split the same way ([`Plan::Position`]): the
//! engine computes its [`PositionStep`], the host windows the outputs.
//! In process (the `local` engine, a position query), [`drive`] runs a
//! query's [`Records`] record by record.

use std::sync::Arc;

use crate::{BATCH, Progress, QueryHandle, QueryOutput, Source};
use mfstream_model::OnError;
use mfstream_model::aggregate::{Aggregate, Windower};
use mfstream_model::clock::WallClock;
use mfstream_model::compute::{self, CpuLimit, CpuWindow};
use mfstream_model::geo::Crs;
use mfstream_model::ops::Transform;
use mfstream_model::position::{PositionQuery, PositionStep};
use mfstream_model::{Event, Instant, PropertyType, QueryStatus};
use mfstream_model::{QueryKind, QuerySpec};
use mfstream_model::{SpecError, SpecErrorKind};
use tracing::Instrument;

/// How a validated query runs.
#[derive(Debug)]
pub(crate) enum Plan {
    /// The engine applies `transform` to each instant; with a `windower`,
    /// the host aggregates the engine's outputs (numbers, whatever the
    /// property's type).
    Engine {
        /// What the engine computes.
        transform: Transform,
        /// The windows over its outputs, for an aggregate query.
        windower: Option<Box<Windower>>,
    },
    /// Nothing for an engine to do: the host windows the instants.
    Host(Box<Windower>),
    /// A query on positions, on an engine other than `local` (which runs
    /// it whole: `position::submit`): the engine computes `step` for each
    /// instant in the reference system `crs` (the spec it is handed is
    /// [`engine_position_spec`]); with a `windower`, the host aggregates
    /// its outputs (numbers for a measure, positions for `position`).
    Position {
        /// The feature's reference system.
        crs: Crs,
        /// What the engine computes for each instant.
        step: PositionStep,
        /// The windows over its outputs, for an aggregate query.
        windower: Option<Box<Windower>>,
    },
}

/// The query an engine is asked to run: `spec` with the transform alone,
/// so that every engine (a plugin in process, an isolated plugin's child)
/// sees the same spec.
pub(crate) fn engine_spec(spec: &QuerySpec, transform: Transform) -> QuerySpec {
    QuerySpec {
        kind: QueryKind::Transform(transform),
        ..spec.clone()
    }
}

/// The position query an engine is asked to run: `spec` with its
/// per-instant part alone ([`PositionStep`]), whose kind is
/// `QueryKind::Position` with no aggregate; a bridge job reads it from
/// `MFSTREAM_QUERY` (`QuerySpec::to_json`), a plugin from its spec.
pub(crate) fn engine_position_spec(spec: &QuerySpec, crs: Crs, step: PositionStep) -> QuerySpec {
    QuerySpec {
        kind: QueryKind::Position(PositionQuery::of_step(crs, step)),
        ..spec.clone()
    }
}

/// Why `engine` refuses a query on positions: it does not serve them
/// ([`Serves::POSITIONS`](crate::Serves::POSITIONS)). The registry
/// refuses such a query first, naming the engines that do
/// (`Registry::check_serves`); this is an engine's own word, when it is
/// handed one directly.
pub(crate) fn unserved(engine: &str, spec: &QuerySpec) -> SpecError {
    SpecError::new(
        "engine",
        SpecErrorKind::Unfit,
        format!(
            "the {engine} engine does not serve {} queries (positions): run them on an engine \
             whose SERVES in `mfstream engines` lists positions, such as \"local\"",
            spec.property_type
        ),
    )
}

/// Validates `spec` and splits it between the engine and the host.
pub(crate) fn plan(spec: &QuerySpec) -> Result<Plan, SpecError> {
    spec.validate()?;
    let property: Arc<str> = spec.property.as_str().into();
    Ok(match &spec.kind {
        QueryKind::Transform(transform) => Plan::Engine {
            transform: *transform,
            windower: None,
        },
        QueryKind::Aggregate {
            transform: Some(transform),
            aggregate,
        } => Plan::Engine {
            transform: *transform,
            // The engine's answers are numbers, whatever the property.
            windower: Some(windower(spec, aggregate, property, PropertyType::TReal)?),
        },
        QueryKind::Aggregate {
            transform: None,
            aggregate,
        } => Plan::Host(windower(spec, aggregate, property, spec.property_type)?),
        // The local engine runs a position query whole (it does not plan
        // it); another engine computes its step.
        QueryKind::Position(query) => {
            let Some((step, aggregate)) = query.split() else {
                return Err(SpecError::new(
                    "engine",
                    SpecErrorKind::Unfit,
                    format!(
                        "a {:?} query that reprojects (its \"crs\" is not the feature's) runs \
                         on the local engine only: register it with \"engine\":\"local\"",
                        query.operation_name()
                    ),
                ));
            };
            let windower = match (&step, aggregate) {
                (_, None) => None,
                // A measure's values are numbers.
                (PositionStep::Measure(_), Some(aggregate)) => {
                    Some(windower(spec, aggregate, property, PropertyType::TReal)?)
                }
                // Positions, measured in their reference system.
                (_, Some(aggregate)) => {
                    let windower = windower(spec, aggregate, property, spec.property_type)?;
                    Some(Box::new((*windower).with_crs(query.crs())))
                }
            };
            Plan::Position {
                crs: query.crs(),
                step,
                windower,
            }
        }
    })
}

/// The host's windower of `spec`, taking values of type `t`, resumed where
/// the spec says.
fn windower(
    spec: &QuerySpec,
    aggregate: &Aggregate,
    property: Arc<str>,
    t: PropertyType,
) -> Result<Box<Windower>, SpecError> {
    let windower = Windower::new(aggregate, property)?
        .with_property_type(t)
        .with_budget(spec.budget.clone())
        .with_on_error(spec.on_error);
    Ok(Box::new(match spec.resume {
        Some(end) => windower.resumed_after(end),
        None => windower,
    }))
}

/// Feeds an engine's outputs to the host's windower, delivering the window
/// events in chunks of about [`BATCH`] as they close: the events one output
/// closes (bounded: see [`Windower`]'s bounds) are never held with those
/// of the next. An error is the query's end: `Failed`, naming the record, after
/// the events before it; `Stopped` when the consumer has gone.
pub(crate) async fn window(
    windower: &mut Windower,
    outputs: impl IntoIterator<Item = Instant>,
    output: &QueryOutput,
) -> Result<(), QueryStatus> {
    let mut events = Vec::new();
    for instant in outputs {
        let failure = windower.push(instant, &mut events).err();
        count_skipped(windower, output);
        if events.len() >= BATCH || failure.is_some() {
            output
                .emit(std::mem::take(&mut events))
                .await
                .map_err(|_| QueryStatus::Stopped)?;
        }
        if let Some(reason) = failure {
            return Err(QueryStatus::Failed {
                reason: reason.to_string(),
            });
        }
    }
    output.emit(events).await.map_err(|_| QueryStatus::Stopped)
}

/// Counts the records `windower` skipped (`onError: skip`) in the query's
/// total; its next event carries them already.
pub(crate) fn count_skipped(windower: &mut Windower, output: &QueryOutput) {
    output.progress().count_skipped(windower.take_skipped());
}

/// The host's guard before an engine that cannot answer one bad record
/// without dying (a version-1 bridge job or plugin), under `onError: skip`:
/// takes out of `batch` the records the catalogue says have no finite
/// result for `transform` ([`Op::domain`](mfstream_model::ops::Op::domain): `ln` of 0,
/// `exp` of 1000), counting each as skipped, so the engine is never sent
/// one. The engine's own answers pair with the records it is sent, so no
/// later answer shifts. Nothing is taken under `onError: fail`: the engine
/// meets the record and fails the query in its own words, as before.
pub(crate) fn guard(
    transform: &Transform,
    on_error: OnError,
    batch: &mut Vec<Instant>,
    progress: &Progress,
) {
    if on_error != OnError::Skip {
        return;
    }
    let before = batch.len();
    // A value that is not a number is left for the engine to refuse.
    batch.retain(|i| i.value.as_f64().is_none_or(|x| transform.apply(x).is_ok()));
    progress.add_skipped((before - batch.len()) as u64);
}

/// Advances `windower` to `secs` on the wall clock (a live query; see
/// [`WallClock::now_secs`]), and delivers the events of the windows that
/// closes. An error is the query's end, as for [`window`].
pub(crate) async fn advance(
    windower: &mut Windower,
    secs: i64,
    output: &QueryOutput,
) -> Result<(), QueryStatus> {
    let mut events = Vec::new();
    let failure = windower.advance(secs, &mut events).err();
    count_skipped(windower, output);
    output
        .emit(events)
        .await
        .map_err(|_| QueryStatus::Stopped)?;
    match failure {
        Some(reason) => Err(QueryStatus::Failed {
            reason: reason.to_string(),
        }),
        None => Ok(()),
    }
}

/// Advances a live query's windows to its wall clock now (see
/// [`advance`]); nothing when the query has no windows, is not live, or
/// its clock is held ([`WallClock::held`]).
pub(crate) async fn tick(
    windower: Option<&mut Windower>,
    clock: Option<&WallClock>,
    output: &QueryOutput,
) -> Result<(), QueryStatus> {
    match (windower, applied(clock)) {
        (Some(windower), Some(clock)) => advance(windower, clock.now_secs(), output).await,
        _ => Ok(()),
    }
}

/// When a live query's wall clock closes the next window of `windower`
/// that holds records (its end plus the grace), as a tokio instant to sleep
/// until; `None` when the query is not live, its clock is held, or no
/// window holds records.
pub(crate) fn deadline(
    windower: Option<&Windower>,
    clock: Option<&WallClock>,
) -> Option<tokio::time::Instant> {
    Some(applied(clock)?.instant_at(windower?.deadline()?))
}

/// The clock of a live query, unless it is held: what applies to its
/// windows now.
fn applied(clock: Option<&WallClock>) -> Option<&WallClock> {
    clock.filter(|clock| !clock.is_held())
}

/// Sleeps until `at`; forever when there is no deadline.
pub(crate) async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The end of a query, the same on every path: once the source has ended
/// and the engine's outputs were delivered (`status` is `Completed`), the
/// windows still open are emitted as partial events. The final status: a
/// window that cannot be written fails the query; a consumer that has gone
/// stops it.
pub(crate) async fn finish(
    windower: Option<&mut Windower>,
    output: &QueryOutput,
    status: QueryStatus,
) -> QueryStatus {
    let Some(windower) = windower else {
        return status;
    };
    if status != QueryStatus::Completed {
        return status;
    }
    let mut events: Vec<Event> = Vec::new();
    let flushed = windower.finish(&mut events);
    count_skipped(windower, output);
    if output.emit(events).await.is_err() {
        return QueryStatus::Stopped;
    }
    match flushed {
        Ok(()) => status,
        Err(reason) => QueryStatus::Failed {
            reason: reason.to_string(),
        },
    }
}

/// What became of one record in process.
pub(crate) enum Pushed {
    /// Its events (if any) were pushed.
    Done,
    /// It has no result and was skipped (`onError: skip`).
    Skipped,
}

/// A query run in process record by record: the `local` engine's
/// transform and windows, or a position query's. [`drive`] runs either.
pub(crate) trait Records {
    /// Why a record fails the query.
    type Error: std::fmt::Display;

    /// Processes one record, its events pushed onto `events`; an error
    /// names the record and fails the query. A record skipped under
    /// `onError: skip` is counted by the windows when there are some (the
    /// next window's event carries it), else by [`drive`].
    fn push(&mut self, instant: Instant, events: &mut Vec<Event>) -> Result<Pushed, Self::Error>;

    /// Its windows, if any, and its live wall clock, if any.
    fn windows(&mut self) -> (Option<&mut Windower>, Option<&WallClock>);
}

/// Starts a query of `engine` in process: `work` over `source` on the
/// query's compute threads, within its CPU limit, its CPU counted in its
/// progress.
pub(crate) fn start(
    engine: &str,
    spec: &QuerySpec,
    work: impl Records<Error: Send> + Send + 'static,
    source: Source,
) -> QueryHandle {
    let (handle, output) = QueryHandle::new(&spec.id, engine, crate::EVENT_BUFFER);
    let span = tracing::info_span!("query", engine, id = %spec.id);
    let source = source.typed(spec.property_type);
    let limit = spec.compute.limit();
    let progress = handle.progress_counters();
    spec.compute.spawn(
        move |nanos| progress.add_cpu(nanos),
        drive(work, source, output, limit).instrument(span),
    );
    handle
}

/// Runs `work` over `source` to its end: a live query's windows advance on
/// the wall clock before each batch (so that records the clock has passed
/// are late), and at the deadline of the next window holding records,
/// without a later record; a held clock from its release on (an empty
/// batch: see [`WallClock::held`]).
pub(crate) async fn drive(
    mut work: impl Records,
    mut source: Source,
    output: QueryOutput,
    limit: Option<CpuLimit>,
) {
    let mut cpu = limit.map(|limit| CpuWindow::new(limit, output.progress().cpu_nanos()));
    let status = loop {
        let (windower, clock) = work.windows();
        let deadline = deadline(windower.as_deref(), clock);
        let batch = tokio::select! {
            biased;
            _ = output.stopping() => break QueryStatus::Stopped,
            batch = source.next_batch() => batch,
            _ = sleep_until(deadline), if deadline.is_some() => {
                let (windower, clock) = work.windows();
                if let Err(status) = tick(windower, clock, &output).await {
                    break status;
                }
                continue;
            }
        };
        match batch {
            None => break QueryStatus::Completed,
            Some(Err(e)) => break QueryStatus::Failed { reason: e.0 },
            Some(Ok(batch)) => {
                output.progress().add_in(batch.len());
                let (windower, clock) = work.windows();
                if let Err(status) = tick(windower, clock, &output).await {
                    break status;
                }
                if let Some(status) = apply(&mut work, batch, &output, &mut cpu).await {
                    break status;
                }
            }
        }
    };
    let status = finish(work.windows().0, &output, status).await;
    tracing::debug!(%status, "query ended");
    output.finish(status);
}

/// Delivers a batch's events in chunks of about [`BATCH`], so that the
/// events of records that close many windows are never all held at once.
/// Results before a failing record are delivered, then the failure. A
/// skipped record is counted in the query's total; the next event carries
/// it. Once the query has worked its slice it delivers what it has and
/// gives its thread back (`compute`), and its CPU is checked against its
/// bound, if it has one (`cpu`).
async fn apply(
    work: &mut impl Records,
    batch: Vec<Instant>,
    output: &QueryOutput,
    cpu: &mut Option<CpuWindow>,
) -> Option<QueryStatus> {
    let mut events = Vec::with_capacity(batch.len().min(BATCH));
    for instant in batch {
        let (skipped, failure) = match work.push(instant, &mut events) {
            Ok(pushed) => (matches!(pushed, Pushed::Skipped), None),
            Err(reason) => (false, Some(reason)),
        };
        match work.windows().0 {
            Some(windower) => count_skipped(windower, output),
            None if skipped => output.progress().count_skipped(1),
            None => {}
        }
        let slice_done = compute::record_done();
        if events.len() >= BATCH || failure.is_some() || slice_done {
            let chunk = std::mem::replace(&mut events, Vec::with_capacity(BATCH));
            if output.emit(chunk).await.is_err() {
                return Some(QueryStatus::Stopped);
            }
        }
        if let Some(reason) = failure {
            return Some(QueryStatus::Failed {
                reason: reason.to_string(),
            });
        }
        if slice_done {
            compute::yield_slice().await;
            if let Some(status) = charge(work, output, cpu) {
                return Some(status);
            }
        }
    }
    if output.emit(events).await.is_err() {
        return Some(QueryStatus::Stopped);
    }
    charge(work, output, cpu)
}

/// Checks the query's CPU against its bound, if it has one: a query past
/// it fails. A replay (the clock held) is accounted, not bounded.
fn charge(
    work: &mut impl Records,
    output: &QueryOutput,
    cpu: &mut Option<CpuWindow>,
) -> Option<QueryStatus> {
    let window = cpu.as_mut()?;
    let bounded = !work.windows().1.is_some_and(WallClock::is_held);
    window
        .charge(output.progress().cpu_nanos(), bounded)
        .map(|reason| QueryStatus::Failed { reason })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mfstream_model::Registration;

    #[test]
    fn a_spec_resumed_after_a_window_resumes_its_windower_with_or_without_a_transform() {
        let window = r#""window":{"type":"HOPPING","size":10,"unit":"SECONDS","hop":5}"#;
        for body in [
            format!(r#"{{"aggregation":"SUM",{window}}}"#),
            format!(r#"{{"operation":"abs","aggregation":"SUM",{window}}}"#),
        ] {
            let mut spec = Registration::from_json(&body)
                .unwrap()
                .into_spec_on("speed", None)
                .unwrap();
            // 2026-01-01T00:01:40Z: the window [90 s, 100 s) was emitted.
            spec.resume = Some(1_767_225_700);
            let mut windower = match plan(&spec).unwrap() {
                Plan::Host(windower)
                | Plan::Engine {
                    windower: Some(windower),
                    ..
                } => windower,
                other => panic!("{body}: no windower in {other:?}"),
            };
            // In [90, 100) and [95, 105): only the second is still to come.
            let mut events = Vec::new();
            let record = Instant::number("2026-01-01T00:01:39Z", 1.0);
            windower.push(record, &mut events).unwrap();
            windower.finish(&mut events).unwrap();
            assert_eq!(events.len(), 1, "{body}: {events:?}");
            assert!(
                events[0]
                    .to_json()
                    .ends_with(r#""count":1,"partial":true}"#)
            );
        }
    }

    /// A query on the positions of a geodetic feature.
    fn position_spec(body: &str) -> QuerySpec {
        Registration::from_json(body)
            .unwrap()
            .into_spec_on("tgsequence", Some(PropertyType::TGeogPoint))
            .unwrap()
    }

    #[test]
    fn a_position_query_is_split_into_the_engines_step_and_the_hosts_windows() {
        let tumbling = r#""window":{"type":"TUMBLING","size":10,"unit":"SECONDS"}"#;
        let fence = r#"{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1],[0,0]]]}"#;
        let point = r#"{"type":"Point","coordinates":[1,2]}"#;
        let cases = [
            (r#"{"operation":"speed"}"#.to_owned(), "speed", false),
            (
                format!(r#"{{"operation":"distance","geometry":{point}}}"#),
                "distance",
                false,
            ),
            (r#"{"operation":"position"}"#.to_owned(), "position", false),
            (
                format!(r#"{{"geofence":{fence},"detect":["enter"]}}"#),
                "geofence",
                false,
            ),
            // A numeric aggregate of a measure: the engine measures.
            (
                format!(r#"{{"operation":"azimuth","aggregation":"MAX",{tumbling}}}"#),
                "azimuth",
                true,
            ),
            // A position aggregate: the engine gives the positions.
            (
                format!(r#"{{"aggregation":"EXTENT",{tumbling}}}"#),
                "position",
                true,
            ),
        ];
        for (body, step_name, windowed) in cases {
            let spec = position_spec(&body);
            let Plan::Position {
                crs,
                step,
                windower,
            } = plan(&spec).unwrap()
            else {
                panic!("{body}: not a position plan");
            };
            assert_eq!(crs, Crs::Geodetic, "{body}");
            assert_eq!(step.name(), step_name, "{body}");
            assert_eq!(windower.is_some(), windowed, "{body}");
            // The engine's spec is the step alone, and reads back so.
            let engine = engine_position_spec(&spec, crs, step.clone());
            let back = QuerySpec::from_json(&engine.to_json()).unwrap();
            let QueryKind::Position(query) = &back.kind else {
                panic!("{body}: {back:?}");
            };
            assert_eq!(query.split(), Some((step, None)), "{body}");
            assert_eq!(back.property_type, PropertyType::TGeogPoint);
        }
    }

    #[test]
    fn a_reprojecting_position_query_is_refused_off_the_local_engine_naming_it() {
        // No engine protocol carries the output's reference system.
        let spec = position_spec(r#"{"operation":"position","crs":"EPSG:3857"}"#);
        let e = plan(&spec).unwrap_err();
        assert_eq!(e.field, "engine", "{e}");
        assert!(
            e.message.contains("reprojects") && e.message.contains("\"engine\":\"local\""),
            "{e}"
        );
    }

    #[test]
    fn a_position_aggregate_windows_the_engines_positions_in_their_reference_system() {
        // LENGTH over a COUNT window of two positions a degree of latitude
        // apart: geodetic metres, so the windower knows the crs.
        let spec = position_spec(r#"{"aggregation":"LENGTH","window":{"type":"COUNT","size":2}}"#);
        let Plan::Position {
            windower: Some(mut windower),
            ..
        } = plan(&spec).unwrap()
        else {
            panic!("no windows");
        };
        let mut events = Vec::new();
        for (t, lat) in [("2026-01-01T00:00:00Z", 0.0), ("2026-01-01T00:00:10Z", 1.0)] {
            let instant = Instant {
                datetime: t.into(),
                value: mfstream_model::Value::Point(mfstream_model::Point::new(0.0, lat)),
            };
            windower.push(instant, &mut events).unwrap();
        }
        let json: serde_json::Value = serde_json::from_str(&events[0].to_json()).unwrap();
        let length = json["value"].as_f64().unwrap();
        // GeographicLib: 0°N to 1°N on the meridian is 110574.3886 m.
        assert!((length - 110_574.388_6).abs() < 1e-3, "{length}");
    }
}

//! The generic subprocess bridge: every `[[engine]]` of `engines.toml` runs
//! its queries as child processes speaking the bridge line protocol.
//!
//! The job command is the engine's command prefix with the operation and,
//! where it takes one, its argument appended (`… mul 1.852`). It runs
//! without a shell, in its own process group, with `LD_LIBRARY_PATH`
//! extended by the engine's library path, `MFSTREAM_FRAMING` naming the
//! framing, `MFSTREAM_QUERY` holding the query as JSON and
//! `MFSTREAM_PROTOCOL` the protocol version the host speaks ([`PROTOCOL`]).
//! `jobs/README.md` is the protocol reference.
//!
//! # One bad record (protocol 2)
//!
//! A version-2 job answers a record it cannot compute with an error line in
//! its place (`value`: `!` and a message; `json`: `{"datetime":…,"error":…}`),
//! and the host applies the query's `onError`: the record is skipped and
//! counted, or the query fails naming its datetime. A version-1 job (the
//! default, `protocol = 1` in `engines.toml`) dies on such a record, so
//! under `onError: skip` the host never sends it one: it checks each record
//! against the operation catalogue first (`plan::guard`). Either way, a
//! `NaN` or infinite answer is a record with no result.

mod framing;
mod job;
mod options;
mod run;
mod watermark;

pub(crate) use self::job::describe_exit;
pub use self::options::{
    BridgeOptions, BridgeSetting, DEFAULT_NO_PROGRESS_TIMEOUT, Framing, RestartPolicy,
};

use std::sync::Arc;

use async_trait::async_trait;
use tracing::Instrument;

use crate::plan::{Plan, plan};
use crate::{
    AggregatesIn, EngineError, EngineInfo, EngineKind, QueryHandle, Serves, Source, StreamEngine,
};
use mfstream_model::{QueryKind, QuerySpec};
use mfstream_model::{SpecError, SpecErrorKind};

use self::run::Results;

/// The bridge protocol version the host speaks, passed to every job in
/// `MFSTREAM_PROTOCOL`: 2, which adds error lines for one record. Jobs of
/// version 1 keep working.
pub(crate) const PROTOCOL: u32 = 2;

/// The longest `MFSTREAM_QUERY` a job can be started with: Linux's bound
/// on one environment string (`MAX_ARG_STRLEN`, 32 pages of 4 KiB,
/// `NAME=value` and its NUL included). A position query's geometry (up to
/// 1 MiB) may not fit: it is refused, naming the bound, rather than failing
/// to start with `E2BIG`.
pub(crate) const MAX_QUERY_ENV: usize = 131_072 - "MFSTREAM_QUERY=".len() - 1;

/// How a query is split with the host, as [`BridgeEngine::submit`] starts it.
enum Planned {
    /// A job runs (part of) the query.
    Job(JobSpec),
    /// Nothing for a job to do: the host runs the plan in process.
    Host(Plan),
}

/// A query's job: its arguments, its `MFSTREAM_QUERY` when it is not the
/// spec's own JSON (a position query's step alone), what its lines are for
/// a position query, and what becomes of them (events, the host's
/// windows, the job's windows).
struct JobSpec {
    args: Vec<String>,
    query: Option<String>,
    positions: Option<run::PositionAnswers>,
    results: Results,
}

/// The job of a query on positions computing `step` in `crs`, its outputs
/// windowed by `windower` when the query aggregates; refused when its
/// `MFSTREAM_QUERY` would not fit in an environment string
/// ([`MAX_QUERY_ENV`]).
fn position_job(
    spec: &QuerySpec,
    crs: mfstream_model::geo::Crs,
    step: mfstream_model::position::PositionStep,
    windower: Option<Box<mfstream_model::aggregate::Windower>>,
) -> Result<JobSpec, SpecError> {
    let operation: Arc<str> = step.name().into();
    let answers = run::PositionAnswers::of(&step);
    let field = match &step {
        mfstream_model::position::PositionStep::Geofence { .. } => "geofence",
        _ => "geometry",
    };
    let query = crate::plan::engine_position_spec(spec, crs, step).to_json();
    if query.len() > MAX_QUERY_ENV {
        return Err(SpecError::new(
            field,
            SpecErrorKind::OutOfRange,
            format!(
                "the query is {} bytes of JSON, over the {MAX_QUERY_ENV} a bridge job's \
                 MFSTREAM_QUERY can hold (an environment variable): simplify the {field}, or \
                 run it on the local engine",
                query.len()
            ),
        ));
    }
    let results = match windower {
        Some(windower) => Results::HostWindows { windower },
        None => Results::Instants {
            operation: operation.clone(),
        },
    };
    Ok(JobSpec {
        args: vec![operation.to_string()],
        query: Some(query),
        positions: Some(answers),
        results,
    })
}

/// An engine that runs each query as a bridge job.
#[derive(Debug)]
pub struct BridgeEngine {
    options: Arc<BridgeOptions>,
}

impl BridgeEngine {
    /// What a bridge engine serves: transforms and aggregates, and positions
    /// when its entry says `positions = true`.
    pub fn serves(positions: bool) -> Serves {
        let serves = Serves::TRANSFORM | Serves::AGGREGATE;
        if positions {
            serves | Serves::POSITIONS
        } else {
            serves
        }
    }

    /// An engine running jobs with `options`.
    pub fn new(options: BridgeOptions) -> BridgeEngine {
        BridgeEngine {
            options: Arc::new(options),
        }
    }

    /// The engine's options.
    pub fn options(&self) -> &BridgeOptions {
        &self.options
    }

    /// What the job of `spec` runs and what becomes of its lines; or the
    /// plan the host runs alone (an aggregate with no transform).
    fn plan_job(&self, spec: &QuerySpec) -> Result<Planned, EngineError> {
        let job = |args: Vec<String>, results: Results| JobSpec {
            args,
            query: None,
            positions: None,
            results,
        };
        Ok(Planned::Job(match (&spec.kind, plan(spec)?) {
            (QueryKind::Aggregate { aggregate, .. }, _) if self.options.aggregates => job(
                vec!["aggregate".into(), aggregate.aggregation.name().into()],
                Results::JobWindows {
                    aggregation: aggregate.aggregation,
                },
            ),
            (
                _,
                Plan::Engine {
                    transform,
                    windower: None,
                },
            ) => job(
                transform.job_args(),
                Results::Instants {
                    operation: transform.op.name().into(),
                },
            ),
            (
                _,
                Plan::Engine {
                    transform,
                    windower: Some(windower),
                },
            ) => job(transform.job_args(), Results::HostWindows { windower }),
            (_, plan @ Plan::Host(_)) => return Ok(Planned::Host(plan)),
            (_, Plan::Position { .. }) if !self.options.positions => {
                return Err(crate::plan::unserved(&self.options.name, spec).into());
            }
            (
                _,
                Plan::Position {
                    crs,
                    step,
                    windower,
                },
            ) => position_job(spec, crs, step, windower)?,
        }))
    }

    /// The job's environment: the engine's `env`, then the variables the
    /// host sets for each job, `MFSTREAM_QUERY` holding `query`.
    fn job_env(&self, query: String) -> Vec<(String, String)> {
        let mut env = self.options.env.clone();
        env.push((
            "MFSTREAM_FRAMING".into(),
            self.options.framing.as_str().into(),
        ));
        env.push(("MFSTREAM_QUERY".into(), query));
        env.push(("MFSTREAM_PROTOCOL".into(), PROTOCOL.to_string()));
        env
    }
}

#[async_trait]
impl StreamEngine for BridgeEngine {
    fn name(&self) -> &str {
        &self.options.name
    }

    fn describe(&self) -> EngineInfo {
        EngineInfo {
            abi_version: None,
            name: self.options.name.clone(),
            kind: EngineKind::Bridge,
            ready: true,
            reason: None,
            description: self.options.description.clone(),
            serves: BridgeEngine::serves(self.options.positions),
            aggregates_in: if self.options.aggregates {
                AggregatesIn::Job
            } else {
                AggregatesIn::Host
            },
        }
    }

    /// Starts the query's job before returning, so that a command that
    /// cannot start is an error here, not a failed query.
    ///
    /// A windowed aggregate runs in the job when the engine aggregates;
    /// otherwise the host windows the job's transformed outputs, or, for an
    /// aggregate with no transform before it, the instants themselves (no
    /// job is started then: there is nothing for it to do).
    ///
    /// A query on positions (an engine with `positions = true`) asks the
    /// job for its per-instant part, the `PositionStep`: the step's name is
    /// the job's argument, `MFSTREAM_QUERY` holds the step alone, and the
    /// host windows the job's answers when the query aggregates.
    async fn submit(&self, spec: QuerySpec, source: Source) -> Result<QueryHandle, EngineError> {
        let name = &self.options.name;
        let property: Arc<str> = spec.property.as_str().into();
        let JobSpec {
            args: job_args,
            query,
            positions,
            results,
        } = match self.plan_job(&spec)? {
            Planned::Job(job) => job,
            Planned::Host(plan) => {
                return Ok(crate::local::submit_as(name, plan, &spec, source)?);
            }
        };
        let watermarks = match (&spec.kind, &results, spec.clock.clone()) {
            (QueryKind::Aggregate { aggregate, .. }, Results::JobWindows { .. }, Some(clock)) => {
                watermark::Watermarks::job(clock, aggregate)
            }
            // A position job's answers pair with its records, as a
            // `value` job's do: exact marks, not the settle rule.
            (_, Results::HostWindows { .. }, Some(clock)) => Some(watermark::Watermarks::host(
                clock,
                self.options.framing == Framing::Value || positions.is_some(),
            )),
            _ => None,
        };
        let source = source.typed(spec.property_type);
        let env = self.job_env(query.unwrap_or_else(|| spec.to_json()));
        // A version-1 job dies on a record with no result: under skip, the
        // host keeps such records from it.
        let guard = match &spec.kind {
            _ if *self.options.protocol >= 2 => None,
            QueryKind::Transform(t) => Some(*t),
            QueryKind::Aggregate { transform, .. } => *transform,
            // The job answers a position it cannot measure with an error
            // line (jobs/README.md, "Positions").
            QueryKind::Position(_) => None,
        };
        let (handle, output) = QueryHandle::new(&spec.id, name, crate::EVENT_BUFFER);
        let driver = run::Driver::new(
            self.options.clone(),
            job_args,
            env,
            property,
            results,
            source,
            output,
        )
        .with_watermarks(watermarks)
        .with_positions(positions)
        .with_on_error(spec.on_error, guard);
        let job = driver.spawn().map_err(|e| EngineError::Start {
            engine: name.clone(),
            reason: format!(
                "cannot run {:?}: {e}",
                self.options.argv.first().map_or("", String::as_str)
            ),
        })?;
        let span = tracing::info_span!("query", engine = %name, id = %spec.id);
        let progress = handle.progress_counters();
        spec.compute.spawn(
            move |nanos| progress.add_cpu(nanos),
            driver.run(job).instrument(span),
        );
        Ok(handle)
    }
}

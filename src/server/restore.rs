//! Start-up with `--state DIR`: every query of the store back in the
//! table, with its replay ring; each running one resubmitted to its engine
//! and fed the logged instants after its checkpoint, before anything new is
//! served.
//!
//! A resumed query is live, as every query of the server, but its clock is
//! held while the log is replayed ([`WallClock::held`]): the logged instants
//! fall in their windows by their datetimes alone, as they did before the
//! restart, however long the server was down. The release follows the last
//! of them through the query's source; the windows whose end plus grace
//! the wall clock has passed then close at once.

use std::sync::Arc;

use crate::aggregate::resume::StateError;
use crate::clock::WallClock;
use crate::engine::{BATCH, EngineError, Source, SourceSender};
use crate::registry::RegistryError;
use crate::spec::{QuerySpec, Registration, RegistrationError};
use crate::store::{EventIds, RestoredQuery, Store, StoreError, StoreErrorKind};
use crate::vocab::{PropertyPath, PropertyType, QueryStatus};

use super::App;
use super::durable::{Keeper, Ledger, Rule};
use super::fanout::Fanout;
use super::table::{About, Kind, Query, Reservation, Started};

/// The logged instants read at once while replaying.
const PAGE: usize = 16 * 1024;

/// What a start-up restored.
#[derive(Debug, Default)]
pub(crate) struct Restored {
    /// Queries resumed on their engines.
    pub(crate) running: usize,
    /// Queries that had ended (or could not be resumed), kept with their
    /// results and status.
    pub(crate) ended: usize,
    /// Instants fed again from the log.
    pub(crate) replayed: u64,
}

/// Puts every query of `store` back into `app`'s table.
pub(crate) async fn restore(app: &App, store: &Arc<Store>) -> Result<Restored, StoreError> {
    let queries = blocking(store, |s| s.queries()).await?;
    let mut restored = Restored::default();
    for query in queries {
        one(app, store, query, &mut restored).await?;
    }
    Ok(restored)
}

/// Runs a blocking read of the store off the async threads.
async fn blocking<T: Send + 'static>(
    store: &Arc<Store>,
    read: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    let s = store.clone();
    tokio::task::spawn_blocking(move || read(&s))
        .await
        .map_err(|e| {
            let message = e.to_string();
            StoreError::new(
                store.dir(),
                StoreErrorKind::Thread {
                    name: "restore",
                    message,
                },
            )
        })?
}

/// Why a query running when the server stopped could not be resumed: its
/// status becomes `failed`, "could not be resumed after a restart: " and
/// this.
#[derive(Debug, thiserror::Error)]
enum ResumeError {
    /// Its registration no longer resolves (the catalogue changed).
    #[error(transparent)]
    Registration(#[from] RegistrationError),
    /// Its engine is gone or not ready.
    #[error(transparent)]
    Engine(#[from] RegistryError),
    /// Its checkpoint's state does not fit it.
    #[error(transparent)]
    State(#[from] StateError),
    /// The engine refused it.
    #[error(transparent)]
    Submit(#[from] EngineError),
}

/// The spec a query was registered with, resolved as it was then.
fn spec_of(query: &RestoredQuery) -> Result<QuerySpec, RegistrationError> {
    let registration = Registration::from_json(&query.spec).map_err(RegistrationError::Invalid)?;
    let known = registration.property_type;
    let mut spec = registration.into_spec_on(query.property.name(), known)?;
    spec.id = query.id.clone();
    Ok(spec)
}

async fn one(
    app: &App,
    store: &Arc<Store>,
    restored: RestoredQuery,
    counts: &mut Restored,
) -> Result<(), StoreError> {
    let key = restored.property.clone();
    // Whatever the bounds now, what was registered comes back.
    let Ok(mut reservation) = app.table.reserve(&key, usize::MAX, usize::MAX) else {
        return Ok(());
    };
    let o = &app.options;
    let fanout = Arc::new(Fanout::restore(
        o.replay,
        o.replay_bytes,
        o.max_subscribers,
        &restored.ring,
        restored.last_event_id,
    ));
    let spec = spec_of(&restored);
    let mut status = restored.status.clone();
    if status == QueryStatus::Running {
        match resume(app, store, &restored, &key, reservation, &fanout).await {
            Ok(replayed) => {
                counts.running += 1;
                counts.replayed += replayed;
                return Ok(());
            }
            Err((returned, reason)) => {
                tracing::warn!(id = %restored.id, %reason, "query could not be resumed");
                status = QueryStatus::Failed {
                    reason: format!("could not be resumed after a restart: {reason}"),
                };
                store.set_status(&restored.id, &status).await?;
                reservation = returned;
            }
        }
    }
    ended(
        app,
        restored,
        key,
        reservation,
        fanout,
        spec,
        status,
        counts,
    )
    .await
}

#[allow(clippy::too_many_arguments)]
async fn ended(
    app: &App,
    restored: RestoredQuery,
    key: PropertyPath,
    reservation: Reservation<'_>,
    fanout: Arc<Fanout>,
    spec: Result<QuerySpec, RegistrationError>,
    status: QueryStatus,
    counts: &mut Restored,
) -> Result<(), StoreError> {
    let about = match &spec {
        Ok(spec) => {
            set_type(&reservation, spec.property_type, spec.crs()).await;
            About::of(spec, key, &restored.engine)
        }
        Err(_) => About {
            id: restored.id,
            key,
            engine: restored.engine,
            kind: Kind::Transform,
            operation: String::new(),
            shape: None,
        },
    };
    fanout.finish(&status);
    app.table
        .insert_ended(reservation, Query::ended(about, status, fanout));
    counts.ended += 1;
    Ok(())
}

async fn set_type(
    reservation: &Reservation<'_>,
    property_type: PropertyType,
    crs: Option<crate::geo::Crs>,
) {
    let mut state = reservation.property.state.lock().await;
    state.property_type = Some(property_type);
    state.crs = state.crs.or(crs);
}

/// Resubmits a running query and feeds it the instants after its
/// checkpoint; the number fed, or why it could not be resumed.
async fn resume<'a>(
    app: &'a App,
    store: &Arc<Store>,
    restored: &RestoredQuery,
    key: &PropertyPath,
    reservation: Reservation<'a>,
    fanout: &Arc<Fanout>,
) -> Result<u64, (Reservation<'a>, ResumeError)> {
    let (clock, release) = WallClock::system().held();
    let budget = app.query_budget();
    let mut spec = match spec_of(restored) {
        Ok(spec) => spec
            .live_on(clock)
            .with_budget(budget.clone())
            .with_compute(app.query_compute()),
        Err(reason) => return Err((reservation, reason.into())),
    };
    let engine = match app.registry.get(&restored.engine) {
        Ok(engine) => engine,
        Err(e) => return Err((reservation, e.into())),
    };
    let rule = Rule::of(&spec, &engine.describe());
    // A time window resumes after the last window it emitted.
    spec.resume = match rule.resume_point(restored.checkpoint.state.as_deref()) {
        Ok(resume) => resume,
        Err(reason) => return Err((reservation, reason.into())),
    };
    let resume = spec.resume;
    let property_type = spec.property_type;
    let crs = spec.crs();
    let about = About::of(&spec, key.clone(), engine.name());
    let (sender, source) = Source::budgeted(app.options.source_buffer, budget.clone());
    let handle = match engine.submit(spec, source).await {
        Ok(handle) => handle,
        Err(e) => return Err((reservation, e.into())),
    };
    // The records skipped before the checkpoint are not computed again:
    // the query's total goes on from the checkpoint's.
    let skipped = restored.checkpoint.skipped;
    handle.progress_counters().count_skipped(skipped);
    let ledger = Arc::new(
        Ledger::restored(rule, restored.checkpoint.after_seq, resume, skipped)
            .with_budget(budget.clone()),
    );
    let keeper = Keeper {
        store: store.clone(),
        ids: EventIds::resume(restored),
        ledger: ledger.clone(),
    };
    let started = Started {
        about,
        property_type,
        crs,
        handle,
        sender: sender.clone(),
        fanout: fanout.clone(),
        budget,
        keeper: Some(keeper),
    };
    let property = reservation.property.clone();
    // Held while replaying: no ingest reaches the query before its log.
    let mut state = property.state.lock().await;
    app.table.start(reservation, &mut state, started);
    let replayed = replay(store, restored, &sender, &ledger).await;
    if replayed.is_ok() {
        // Before any new ingest: the clock applies from the first instant
        // after the log's. A query that has ended needs no clock.
        let _ = sender.release_clock(release).await;
    }
    drop(state);
    match replayed {
        Ok(n) => Ok(n),
        Err(e) => {
            // The query is in the table: it fails on its own, with the
            // reason, and its status is stored by its pump.
            sender
                .fail(crate::engine::SourceError(format!(
                    "cannot replay the log: {e}"
                )))
                .await;
            Ok(0)
        }
    }
}

/// Feeds `sender` the instants of the query's property logged after its
/// checkpoint, in log order, page by page.
async fn replay(
    store: &Arc<Store>,
    restored: &RestoredQuery,
    sender: &SourceSender,
    ledger: &Ledger,
) -> Result<u64, StoreError> {
    let mut after = restored.checkpoint.after_seq;
    let mut fed = 0;
    loop {
        let property = restored.property.clone();
        let page = blocking(store, move |s| s.instants(&property, after, PAGE)).await?;
        let Some(last) = page.last() else {
            return Ok(fed);
        };
        after = last.seq;
        for chunk in page.chunks(BATCH) {
            ledger.fed(chunk.iter().map(|l| (l.seq, &l.instant)));
            let batch: Vec<_> = chunk.iter().map(|l| l.instant.clone()).collect();
            if sender.send_batch(batch).await.is_err() {
                // The query ended (it failed on an instant): the rest is
                // no longer needed.
                return Ok(fed);
            }
            fed += chunk.len() as u64;
        }
    }
}

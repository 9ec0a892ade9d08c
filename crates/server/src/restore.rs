//! Start-up with `--state DIR`: every query of the store back in the
//! table, with its replay ring; each running one resubmitted to its engine
//! and fed the logged instants after its checkpoint before any new instant
//! of its property.
//!
//! The server answers while the log is replayed: [`restore`] puts every
//! query back, then each property's replay runs as a task of its own that
//! holds the property's lock from before the server serves until the last
//! of its queries has been fed its log. An ingest to that property waits
//! for it (up to `--ingest-wait-ms`, then 503 as for a busy query); every
//! other request is answered, and the replayed records are computed on the
//! compute threads, in slices, as live ones. The log says `log replayed`,
//! with the instants fed again, once every replay has ended.
//!
//! A resumed query is live, as every query of the server, but its clock is
//! held while the log is replayed ([`WallClock::held`]): the logged instants
//! fall in their windows by their datetimes alone, as they did before the
//! restart, however long the server was down. The release follows the last
//! of them through the query's source; the windows whose end plus grace
//! the wall clock has passed then close at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use mfstream_engine::{BATCH, EngineError, Source, SourceSender};
use mfstream_model::aggregate::resume::StateError;
use mfstream_model::clock::{ClockRelease, WallClock};
use mfstream_model::{PropertyPath, QueryStatus};
use mfstream_model::{QuerySpec, Registration, RegistrationError};
use mfstream_registry::RegistryError;
use mfstream_store::{
    EventIds, OwnedPropertyGuard, RestoredQuery, Store, StoreError, StoreErrorKind,
};

use super::App;
use super::durable::{Keeper, Ledger, Rule};
use super::fanout::Fanout;
use super::table::{About, Property, PropertyState, Query, Reservation, Started};
use super::wire::Kind;

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
    /// Properties whose queries are being fed their log, each by a task of
    /// its own.
    pub(crate) replaying: usize,
}

/// Puts every query of `store` back into `app`'s table and starts the
/// replay of the log to those that run (see the module's docs): it returns
/// once every query is back, before the replays end.
pub(crate) async fn restore(app: &App, store: &Arc<Store>) -> Result<Restored, StoreError> {
    let queries = blocking(store, |s| s.queries()).await?;
    // A property's queries together, in the order of their first: one
    // hold of its lock covers their replays.
    let mut by_property: Vec<(PropertyPath, Vec<RestoredQuery>)> = Vec::new();
    for query in queries {
        match by_property
            .iter_mut()
            .find(|(key, _)| *key == query.property)
        {
            Some((_, group)) => group.push(query),
            None => by_property.push((query.property.clone(), vec![query])),
        }
    }
    let mut restored = Restored::default();
    let tally = Arc::new(ReplayTally::default());
    for (_, group) in by_property {
        let mut held = Held::default();
        for query in group {
            one(app, store, query, &mut restored, &mut held).await?;
        }
        if let Some(replays) = held.into_replays() {
            restored.replaying += 1;
            tally.groups.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(replays.run(store.clone(), tally.clone()));
        }
    }
    // The start-up's own count: the last to end says the total.
    tally.done();
    Ok(restored)
}

/// The instants every replay fed, said in the log once the last ends.
#[derive(Debug)]
struct ReplayTally {
    /// Replays still running, and the start-up itself until it has
    /// started them all.
    groups: AtomicUsize,
    instants: AtomicU64,
}

impl Default for ReplayTally {
    fn default() -> ReplayTally {
        ReplayTally {
            groups: AtomicUsize::new(1),
            instants: AtomicU64::new(0),
        }
    }
}

impl ReplayTally {
    fn done(&self) {
        if self.groups.fetch_sub(1, Ordering::AcqRel) == 1 {
            tracing::info!(
                replayed = self.instants.load(Ordering::Relaxed),
                "log replayed"
            );
        }
    }
}

/// One property's lock while its queries are put back, and the replays
/// its running queries are owed.
#[derive(Default)]
struct Held {
    guard: Option<OwnedPropertyGuard<PropertyState>>,
    feeds: Vec<Feed>,
}

impl Held {
    /// The property's state, its lock taken at the first call.
    async fn state(&mut self, property: &Property) -> &mut PropertyState {
        let guard = match self.guard.take() {
            Some(guard) => guard,
            None => property.state.lock_owned().await,
        };
        self.guard.insert(guard)
    }

    /// The replays to run, with the lock, if any query is owed one.
    fn into_replays(self) -> Option<Replays> {
        let guard = self.guard?;
        (!self.feeds.is_empty()).then_some(Replays {
            guard,
            feeds: self.feeds,
        })
    }
}

/// What one running query is fed again: its property's instants logged
/// after `after`.
struct Feed {
    property: PropertyPath,
    after: u64,
    sender: SourceSender,
    ledger: Arc<Ledger>,
    release: ClockRelease,
}

/// A property's replays, holding its lock: no ingest reaches its queries
/// before their log.
struct Replays {
    guard: OwnedPropertyGuard<PropertyState>,
    feeds: Vec<Feed>,
}

impl Replays {
    async fn run(self, store: Arc<Store>, tally: Arc<ReplayTally>) {
        for feed in self.feeds {
            match replay(&store, &feed).await {
                Ok(n) => {
                    tally.instants.fetch_add(n, Ordering::Relaxed);
                    // Before any new ingest: the clock applies from the
                    // first instant after the log's.
                    let _ = feed.sender.release_clock(feed.release).await;
                }
                // The query is in the table: it fails on its own, with the
                // reason, and its status is stored by its pump.
                Err(e) => {
                    feed.sender
                        .fail(mfstream_engine::SourceError(format!(
                            "cannot replay the log: {e}"
                        )))
                        .await
                }
            }
        }
        tally.done();
        drop(self.guard);
    }
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
    held: &mut Held,
) -> Result<(), StoreError> {
    let key = restored.property.clone();
    // Whatever the bounds now, what was registered comes back.
    let Ok(mut reservation) = app.table.reserve(&key, usize::MAX, usize::MAX) else {
        return Ok(());
    };
    let o = &app.options;
    let fanout = Arc::new(Fanout::restore(
        *o.state.replay,
        *o.state.replay_bytes,
        *o.limits.max_subscribers,
        &restored.ring,
        restored.last_event_id,
    ));
    let spec = spec_of(&restored);
    let mut status = restored.status.clone();
    if status == QueryStatus::Running {
        match resume(app, store, &restored, &key, reservation, &fanout, held).await {
            Ok(()) => {
                counts.running += 1;
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
        held,
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
    held: &mut Held,
) -> Result<(), StoreError> {
    let about = match &spec {
        Ok(spec) => {
            let state = held.state(&reservation.property).await;
            state.property_type = Some(spec.property_type);
            state.crs = state.crs.or(spec.crs());
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

/// Resubmits a running query, with its property's lock (`held`), and
/// adds the replay of the instants after its checkpoint to those `held`
/// runs; or why it could not be resumed.
async fn resume<'a>(
    app: &'a App,
    store: &Arc<Store>,
    restored: &RestoredQuery,
    key: &PropertyPath,
    reservation: Reservation<'a>,
    fanout: &Arc<Fanout>,
    held: &mut Held,
) -> Result<(), (Reservation<'a>, ResumeError)> {
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
    // Its geometry counts as at registration, whatever the limits now.
    if let Some((bytes, _)) = spec.geometry_bytes() {
        budget.count_geometry(bytes);
    }
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
    let (sender, source) = Source::budgeted(app.options.limits.source_buffer, budget.clone());
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
    // Held until its replay has ended: no ingest reaches the query before
    // its log.
    let state = held.state(&property).await;
    app.table.start(reservation, state, started);
    held.feeds.push(Feed {
        property: restored.property.clone(),
        after: restored.checkpoint.after_seq,
        sender,
        ledger,
        release,
    });
    Ok(())
}

/// Feeds `sender` the instants of the query's property logged after its
/// checkpoint, in log order, page by page.
async fn replay(store: &Arc<Store>, feed: &Feed) -> Result<u64, StoreError> {
    let Feed { sender, ledger, .. } = feed;
    let mut after = feed.after;
    let mut fed = 0;
    loop {
        let property = feed.property.clone();
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

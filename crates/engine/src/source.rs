//! The instants a query reads: a [`Source`] and its feeding end, the
//! [`SourceSender`].

use std::sync::Arc;

use tokio::sync::mpsc;

use super::BATCH;
use mfstream_model::budget::{Part, StateBudget, instant_bytes};
use mfstream_model::clock::ClockRelease;
use mfstream_model::{Instant, PropertyType, Value};

/// A failure of the source a query reads, such as an input line that does
/// not parse. It fails the query with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SourceError(pub String);

type SourceItem = Result<Vec<Instant>, SourceError>;

/// What travels on a live source's channel.
#[derive(Debug)]
enum Item {
    /// A batch, with the bytes it counts in the query's budget.
    Batch(Vec<Instant>, u64),
    Failed(SourceError),
    /// A held clock's release, in order with the batches.
    Release(ClockRelease),
}

/// The instants a query reads, in batches.
///
/// Built with [`Source::channel`] for a live feed or [`Source::from_instants`]
/// for a fixed list. The source ends when every sender is dropped; a sender
/// can also end it with an error ([`SourceSender::fail`]).
#[derive(Debug)]
pub struct Source {
    rx: mpsc::Receiver<Item>,
    /// The property's type, whose records are checked here
    /// ([`Source::typed`]); `None`: unchecked.
    typed: Option<PropertyType>,
    /// The failure of a record, once the records before it were delivered.
    failed: Option<SourceError>,
    /// The query's state budget, which the instants waiting in the buffer
    /// count in ([`Source::budgeted`]).
    budget: Option<Arc<StateBudget>>,
}

impl Source {
    /// A live source holding at most `capacity` batches in flight.
    pub fn channel(capacity: usize) -> (SourceSender, Source) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (SourceSender { tx, budget: None }, Source::new(rx))
    }

    /// A live source whose buffered instants count in `budget` (the
    /// query's: [`QuerySpec::with_budget`]) from the moment they are sent
    /// until the query takes them. A batch taken while the query holds more
    /// than its budget ends the source with [`StateBudget::exceeded`]'s
    /// reason, which fails the query.
    ///
    /// [`QuerySpec::with_budget`]: crate::QuerySpec::with_budget
    pub fn budgeted(capacity: usize, budget: Arc<StateBudget>) -> (SourceSender, Source) {
        let (mut tx, mut rx) = Source::channel(capacity);
        tx.budget = Some(budget.clone());
        rx.budget = Some(budget);
        (tx, rx)
    }

    /// A source of a fixed list of instants.
    pub fn from_instants(instants: impl IntoIterator<Item = Instant>) -> Source {
        let mut batches = Vec::new();
        let mut batch = Vec::with_capacity(BATCH);
        for instant in instants {
            batch.push(instant);
            if batch.len() == BATCH {
                batches.push(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)));
            }
        }
        if !batch.is_empty() {
            batches.push(batch);
        }
        let (tx, rx) = mpsc::channel(batches.len().max(1));
        for batch in batches {
            tx.try_send(Item::Batch(batch, 0))
                .expect("the channel was sized to hold every batch");
        }
        Source::new(rx)
    }

    fn new(rx: mpsc::Receiver<Item>) -> Source {
        Source {
            rx,
            typed: None,
            failed: None,
            budget: None,
        }
    }

    /// The source of a property of type `t`: for `TInteger`, a number with
    /// a fraction, for `TGeogPoint` and `TGeomPoint` a record that is no
    /// position, and for any other type a position, ends the source with an
    /// error naming the record, after the records before it (every engine
    /// fails the query with it).
    pub(crate) fn typed(mut self, t: PropertyType) -> Source {
        self.typed = Some(t);
        self
    }

    /// The next batch; `None` once the source has ended. An empty batch
    /// says that the query's held clock was released there
    /// ([`SourceSender::release_clock`]): it applies from now on.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a batch is never lost when this future is dropped.
    pub async fn next_batch(&mut self) -> Option<SourceItem> {
        if let Some(error) = self.failed.take() {
            return Some(Err(error));
        }
        Some(match self.rx.recv().await? {
            Item::Batch(batch, bytes) => {
                if let Some(budget) = &self.budget {
                    // The batch is the engine's now; past the budget (the
                    // batch still counted) the query ends here, before its
                    // state grows further.
                    let over = budget.exceeded();
                    budget.sub(Part::Pending, bytes);
                    if let Some(reason) = over {
                        return Some(Err(SourceError(reason)));
                    }
                }
                self.checked(batch)
            }
            Item::Failed(error) => Err(error),
            Item::Release(release) => {
                release.release();
                Ok(Vec::new())
            }
        })
    }

    /// The state budget of the query reading it ([`Source::budgeted`]), for
    /// an engine to count what it holds of the query's instants in.
    pub(crate) fn budget(&self) -> Option<Arc<StateBudget>> {
        self.budget.clone()
    }

    /// The records of `batch` up to the first that does not fit the
    /// property's type; that one's error comes next.
    fn checked(&mut self, mut batch: Vec<Instant>) -> SourceItem {
        let Some(t) = self.typed else {
            return Ok(batch);
        };
        let unfit = |i: &Instant| match (&i.value, t) {
            (Value::Number(x), PropertyType::TInteger) => x.fract() != 0.0,
            (Value::Point(_), t) => !t.is_point(),
            (_, t) => t.is_point(),
        };
        let Some(at) = batch.iter().position(unfit) else {
            return Ok(batch);
        };
        let bad = &batch[at];
        let error = SourceError(match (&bad.value, t) {
            (Value::Point(p), t) => format!(
                "record at {} has the coordinates {}, but the property is {t}: \
                 give it a \"value\"",
                bad.datetime,
                Value::Point(*p)
            ),
            (value, t) if t.is_point() => format!(
                "record at {} has the value {value}, but the property is {t}: \
                 give it \"coordinates\" [x, y]",
                bad.datetime
            ),
            (value, _) => format!(
                "record at {} has value {value}, but the property is TInteger: it takes integers",
                bad.datetime
            ),
        });
        batch.truncate(at);
        if batch.is_empty() {
            return Err(error);
        }
        self.failed = Some(error);
        Ok(batch)
    }
}

/// The feeding end of a live [`Source`].
#[derive(Debug, Clone)]
pub struct SourceSender {
    tx: mpsc::Sender<Item>,
    budget: Option<Arc<StateBudget>>,
}

/// The query reading the source has ended; the batch was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the query reading this source has ended")]
pub struct SourceClosed;

impl SourceSender {
    /// The item carrying `batch`, counted in the budget until taken.
    fn item(&self, batch: Vec<Instant>) -> Item {
        let bytes = charge(self.budget.as_deref(), &batch);
        Item::Batch(batch, bytes)
    }

    /// Sends a batch, waiting while the query's buffer is full.
    pub async fn send_batch(&self, batch: Vec<Instant>) -> Result<(), SourceClosed> {
        if batch.is_empty() {
            return Ok(());
        }
        let item = self.item(batch);
        self.tx.send(item).await.map_err(|_| SourceClosed)
    }

    /// Reserves room for one batch, waiting while the query's buffer is
    /// full. A control plane feeding several queries reserves room in each
    /// before sending to any, so that either all get a batch or none does.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future (or the permit) gives the room back.
    pub async fn reserve(&self) -> Result<SourcePermit<'_>, SourceClosed> {
        let permit = self.tx.reserve().await.map_err(|_| SourceClosed)?;
        Ok(SourcePermit {
            permit,
            budget: self.budget.as_deref(),
        })
    }

    /// Sends one instant.
    pub async fn send(&self, instant: Instant) -> Result<(), SourceClosed> {
        self.send_batch(vec![instant]).await
    }

    /// Sends a batch from a thread outside the async runtime, blocking while
    /// the query's buffer is full.
    ///
    /// # Panics
    ///
    /// When called from within an async runtime (as tokio's `blocking_send`).
    pub fn blocking_send_batch(&self, batch: Vec<Instant>) -> Result<(), SourceClosed> {
        if batch.is_empty() {
            return Ok(());
        }
        let item = self.item(batch);
        self.tx.blocking_send(item).map_err(|_| SourceClosed)
    }

    /// Ends the source with an error from a thread outside the async
    /// runtime.
    pub fn blocking_fail(self, error: SourceError) {
        // If the query has already ended, there is no one left to tell.
        let _ = self.tx.blocking_send(Item::Failed(error));
    }

    /// Ends the source with an error, which fails the query.
    pub async fn fail(self, error: SourceError) {
        // If the query has already ended, there is no one left to tell.
        let _ = self.tx.send(Item::Failed(error)).await;
    }

    /// Releases a held clock ([`WallClock::held`]) in order with the
    /// batches: the query applies its clock once it has taken every batch
    /// sent before this one, and before any sent after. The query reads it
    /// as an empty batch.
    ///
    /// [`WallClock::held`]: mfstream_model::clock::WallClock::held
    pub async fn release_clock(&self, release: ClockRelease) -> Result<(), SourceClosed> {
        self.tx
            .send(Item::Release(release))
            .await
            .map_err(|_| SourceClosed)
    }

    /// Waits until the query reading this source has ended.
    pub async fn closed(&self) {
        self.tx.closed().await
    }
}

/// Room for one batch in a query's source buffer, from
/// [`SourceSender::reserve`]: sending on it never waits.
#[derive(Debug)]
pub struct SourcePermit<'a> {
    permit: mpsc::Permit<'a, Item>,
    budget: Option<&'a StateBudget>,
}

/// Counts `batch` in `budget` as pending, returning its bytes (0 without a
/// budget: nothing is walked then).
fn charge(budget: Option<&StateBudget>, batch: &[Instant]) -> u64 {
    let Some(budget) = budget else {
        return 0;
    };
    let bytes = batch.iter().map(instant_bytes).sum();
    budget.add(Part::Pending, bytes);
    bytes
}

impl SourcePermit<'_> {
    /// Sends a batch in the reserved room. An empty batch gives the room
    /// back instead.
    pub fn send_batch(self, batch: Vec<Instant>) {
        if !batch.is_empty() {
            let bytes = charge(self.budget, &batch);
            self.permit.send(Item::Batch(batch, bytes));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_typed_source_ends_at_a_position_on_a_scalar_property_and_the_reverse() {
        let point = |t: &str| Instant {
            datetime: t.into(),
            value: Value::Point(mfstream_model::Point::new(1.0, 2.0)),
        };
        let mut scalar = Source::from_instants([Instant::number("a", 1.0), point("b")])
            .typed(PropertyType::TReal);
        assert_eq!(scalar.next_batch().await.unwrap().unwrap().len(), 1);
        let e = scalar.next_batch().await.unwrap().unwrap_err().0;
        assert!(
            e.contains("record at b has the coordinates [1,2]") && e.contains("TReal"),
            "{e}"
        );
        let mut positions = Source::from_instants([point("a"), Instant::number("b", 3.0)])
            .typed(PropertyType::TGeogPoint);
        assert_eq!(positions.next_batch().await.unwrap().unwrap().len(), 1);
        let e = positions.next_batch().await.unwrap().unwrap_err().0;
        assert!(
            e.contains("record at b has the value 3") && e.contains("\"coordinates\""),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_clock_release_reads_as_an_empty_batch_after_the_batches_sent_before_it() {
        let (clock, release) = mfstream_model::clock::WallClock::system().held();
        let (sender, mut source) = Source::channel(4);
        sender.send(Instant::number("t", 1.0)).await.unwrap();
        sender.release_clock(release).await.unwrap();
        sender.send(Instant::number("u", 2.0)).await.unwrap();
        assert_eq!(source.next_batch().await.unwrap().unwrap().len(), 1);
        assert!(
            clock.is_held(),
            "held until the batches before it are taken"
        );
        assert!(source.next_batch().await.unwrap().unwrap().is_empty());
        assert!(!clock.is_held());
        assert_eq!(source.next_batch().await.unwrap().unwrap()[0].datetime, "u");
    }

    #[tokio::test]
    async fn instants_waiting_count_in_the_budget_until_taken_and_past_it_fail_the_source() {
        let budget = Arc::new(StateBudget::new(10_000));
        let (sender, mut source) = Source::budgeted(4, budget.clone());
        let text = |n: usize| Instant {
            datetime: "t".into(),
            value: mfstream_model::Value::Text("x".repeat(n)),
        };
        sender.send(text(1000)).await.unwrap();
        let waiting = budget.used();
        assert!(waiting >= 1001, "{waiting}");
        assert_eq!(source.next_batch().await.unwrap().unwrap().len(), 1);
        assert_eq!(budget.used(), 0, "taken: the engine's now");
        sender.send(text(20_000)).await.unwrap();
        let failure = source.next_batch().await.unwrap().unwrap_err();
        assert!(
            failure
                .0
                .starts_with("query state reached the embedding program's max_query_state"),
            "{failure}"
        );
    }

    #[tokio::test]
    async fn a_fixed_source_yields_its_instants_in_batches_then_ends() {
        let mut source = Source::from_instants((0..2500).map(|i| Instant::number("t", i as f64)));
        let mut seen = Vec::new();
        while let Some(batch) = source.next_batch().await {
            let batch = batch.unwrap();
            assert!(batch.len() <= BATCH);
            seen.extend(batch.into_iter().map(|i| i.value.as_f64().unwrap()));
        }
        assert_eq!(seen, (0..2500).map(|i| i as f64).collect::<Vec<_>>());
    }
}

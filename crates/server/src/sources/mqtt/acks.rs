//! MQTT's side of the pipeline: takes the messages the connection read in
//! batches of up to [`BATCH`], hands each to the broker pipeline
//! ([`pipeline::take`]), and acknowledges each message the pipeline is done
//! with, on the connection it came on.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use rumqttc::v5::AsyncClient;
use rumqttc::v5::mqttbytes::v5::Publish;
use tokio::sync::mpsc;

use super::super::broker::pipeline::{self, Marks};
use super::{Mqtt, Msg};
use crate::App;

/// Messages ingested together (one journal record per property).
const BATCH: usize = 1024;

/// How soon owed acknowledgements are tried again.
const ACK_RETRY: Duration = Duration::from_millis(1);

/// Ingests the messages of `rx` until it closes.
pub(super) async fn run(
    app: Arc<App>,
    mqtt: Arc<Mqtt>,
    client: AsyncClient,
    mut rx: mpsc::Receiver<Msg>,
    connection: Arc<AtomicU64>,
) {
    let mut acks = Acks {
        client,
        connection,
        mqtt: mqtt.clone(),
        owed: VecDeque::new(),
    };
    let mut marks = Marks::new();
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        acks.flush();
        let received = if acks.owed.is_empty() {
            rx.recv_many(&mut batch, BATCH).await
        } else {
            // Acknowledgements wait for room in rumqttc's channel: tried
            // again soon, whether or not more messages come.
            tokio::select! {
                n = rx.recv_many(&mut batch, BATCH) => n,
                () = tokio::time::sleep(ACK_RETRY) => continue,
            }
        };
        if received == 0 {
            break;
        }
        pipeline::take(&app, &mqtt, &mut marks, batch.drain(..), |msg| {
            acks.ack(&msg);
        })
        .await;
    }
}

/// Acknowledges messages on the connection they came on.
///
/// An acknowledgement goes through rumqttc's request channel, which its
/// event loop drains one request per turn, while a turn of reading takes
/// up to ten messages: when the broker sends more unacknowledged messages
/// than the channel holds (mosquitto may exceed the Receive Maximum on a
/// resumed session), a blocking send would wait on the reader, which waits
/// on this pipeline. So the acknowledgements that find the channel full
/// wait here, owed (a packet id and a few bytes each, the payload freed),
/// and are tried again before each batch and every millisecond.
struct Acks {
    client: AsyncClient,
    connection: Arc<AtomicU64>,
    mqtt: Arc<Mqtt>,
    owed: VecDeque<(u64, Publish)>,
}

impl Acks {
    fn ack(&mut self, msg: &Msg) {
        let mut skeleton = msg.publish.clone();
        skeleton.payload = bytes::Bytes::new();
        skeleton.topic = bytes::Bytes::new();
        self.owed.push_back((msg.connection, skeleton));
        self.flush();
    }

    /// Hands the owed acknowledgements to rumqttc, in order, until its
    /// channel is full.
    fn flush(&mut self) {
        let current = self.connection.load(Relaxed);
        while let Some((connection, publish)) = self.owed.front() {
            // A message from an earlier connection is sent again on this
            // one (under the same packet id, if the session was kept): its
            // redelivery is acknowledged, as a duplicate, not it.
            if *connection != current {
                self.owed.pop_front();
                continue;
            }
            match self.client.try_ack(publish) {
                Ok(()) => {
                    self.owed.pop_front();
                    self.mqtt.stats.acked.fetch_add(1, Relaxed);
                }
                // Full (or the event loop gone, at a shutdown: then
                // nothing is sent any more, and the broker sends the
                // messages again at the next start).
                Err(_) => break,
            }
        }
    }
}

//! Simulated power loss, as SQLite's crash tests do: the journal runs on a
//! file system that loses power at a seeded random operation and keeps
//! what was synced plus a random part of what was not (a prefix, zeros, or
//! garbage in the last page); then the journal is opened again on what is
//! left (every other round after a second cut during that recovery). Under `Power` every acknowledged ingest is there exactly once;
//! under `Process` the journal always opens and holds a prefix of them.

use std::path::Path;
use std::sync::Arc;

use super::super::journal::sim::{Rng, SimFs};
use super::super::journal::{Journal, Registered};
use super::super::{Durability, StoreOptions};
use super::{course, speed};
use crate::batch;
use mfstream_model::Instant;

/// Iterations per durability mode.
const ROUNDS: u64 = 1500;

fn options(durability: Durability) -> StoreOptions {
    StoreOptions {
        durability,
        // Small segments: rolls and compactions happen every few writes.
        segment_bytes: 1024,
        ..StoreOptions::default()
    }
}

/// The query that holds `speed` back: every instant of it stays live.
fn holder() -> Registered {
    Registered {
        id: "q".into(),
        property: speed(),
        running: true,
        start_seq: 0,
    }
}

/// One ingest: `n` instants whose values are `from..from + n`.
fn ingest(from: u64, n: u64) -> (u32, Vec<u8>) {
    let instants: Vec<Instant> = (from..from + n)
        .map(|v| Instant::number("2026-01-01T00:00:00Z", v as f64))
        .collect();
    let mut data = Vec::new();
    batch::encode(&instants, &mut data);
    (n as u32, data)
}

/// The values of `speed` read back, in log order, with their sequence
/// numbers.
fn read_back(journal: &Journal) -> Vec<(u64, u64)> {
    journal
        .instants(&speed(), 0, usize::MAX)
        .unwrap()
        .iter()
        .map(|i| (i.seq, i.instant.value.as_f64().unwrap() as u64))
        .collect()
}

/// Writes until the power goes; returns the values acknowledged, in order,
/// and those sent but not answered (the write in flight).
/// The sizes of the ingests sent, in order, come third.
fn write_until_cut(
    fs: &SimFs,
    rng: &mut Rng,
    durability: Durability,
) -> (Vec<u64>, Vec<u64>, Vec<usize>) {
    let dir = Path::new("/sim/state");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let journal = match Journal::open_on(
        Arc::new(fs.clone()),
        dir,
        &options(durability),
        vec![holder()],
    ) {
        Ok(journal) => journal,
        // The power went while the journal was opening.
        Err(_) => return (Vec::new(), Vec::new(), Vec::new()),
    };
    let (mut acked, mut in_flight, mut sizes) = (Vec::new(), Vec::new(), Vec::new());
    let mut next_value = 0;
    for _ in 0..200 {
        if rng.below(3) == 0 {
            // Another property's ingest, which no query holds: its
            // segments go dead, and are compacted or deleted.
            let (count, data) = ingest(1_000_000, 1 + rng.below(20));
            if runtime
                .block_on(journal.append_instants(&course(), count, data))
                .is_err()
            {
                break;
            }
            continue;
        }
        let n = 1 + rng.below(12);
        let (count, data) = ingest(next_value, n);
        let values: Vec<u64> = (next_value..next_value + n).collect();
        next_value += n;
        sizes.push(n as usize);
        match runtime.block_on(journal.append_instants(&speed(), count, data)) {
            Ok(seqs) => {
                assert_eq!(seqs.end - seqs.start, n);
                acked.extend(values);
            }
            Err(_) => {
                in_flight = values;
                break;
            }
        }
    }
    fs.cut();
    journal.close();
    (acked, in_flight, sizes)
}

fn run(durability: Durability, seed: u64) {
    let mut rng = Rng::new(seed);
    let fs = SimFs::cut_at(1 + rng.below(400));
    let (acked, in_flight, sizes) = write_until_cut(&fs, &mut rng, durability);
    let mut image = fs.image(&mut rng);
    // Every other round the power goes again while the journal recovers
    // (cutting tails, removing an unfinished segment, starting one): the
    // recovery itself must leave what a later one accepts.
    if seed % 2 == 0 {
        image.cut_after(1 + rng.below(6));
        if let Ok(journal) = Journal::open_on(
            Arc::new(image.clone()),
            Path::new("/sim/state"),
            &options(durability),
            vec![holder()],
        ) {
            journal.close();
        }
        image.cut();
        image = image.image(&mut rng);
    }
    let journal = Journal::open_on(
        Arc::new(image),
        Path::new("/sim/state"),
        &options(durability),
        vec![holder()],
    )
    .unwrap_or_else(|e| panic!("seed {seed}: the journal does not open after the cut: {e}"));
    let back = read_back(&journal);
    journal.close();
    let seqs: Vec<u64> = back.iter().map(|&(s, _)| s).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "seed {seed}: sequence numbers out of order or twice: {seqs:?}"
    );
    let values: Vec<u64> = back.iter().map(|&(_, v)| v).collect();
    // Whatever is back is what was sent, in order, each once: a prefix of
    // the acknowledged ingests and the one in flight.
    let sent: Vec<u64> = acked.iter().chain(&in_flight).copied().collect();
    assert!(
        values.len() <= sent.len() && values[..] == sent[..values.len()],
        "seed {seed}: {values:?} is not a prefix of {sent:?}"
    );
    // Each ingest is one record: back whole or not at all.
    let mut ends = vec![0];
    let mut at = 0;
    for size in sizes.iter().copied() {
        at += size;
        ends.push(at);
    }
    assert!(
        ends.contains(&values.len()),
        "seed {seed}: part of an ingest is back: {} of {ends:?}",
        values.len()
    );
    if durability == Durability::Power {
        assert!(
            values.len() >= acked.len(),
            "seed {seed}: {} acknowledged instants, {} back",
            acked.len(),
            values.len()
        );
    }
}

#[test]
fn under_power_durability_every_acknowledged_ingest_survives_a_power_cut_exactly_once() {
    for seed in 0..ROUNDS {
        run(Durability::Power, seed);
    }
}

#[test]
fn under_process_durability_the_journal_opens_after_a_power_cut_with_a_prefix() {
    for seed in 0..ROUNDS {
        run(Durability::Process, 1_000_000 + seed);
    }
}

/// Ingests a few times on `journal`, each acknowledged, from `next` on.
fn ingest_some(journal: &Journal, rng: &mut Rng, next: &mut u64, acked: &mut Vec<u64>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for _ in 0..1 + rng.below(4) {
        let n = 1 + rng.below(6);
        let (count, data) = ingest(*next, n);
        runtime
            .block_on(journal.append_instants(&speed(), count, data))
            .unwrap();
        acked.extend(*next..*next + n);
        *next += n;
    }
}

#[test]
fn a_process_killed_then_a_power_cut_after_its_restart_loses_only_a_suffix() {
    // A run under `Process` is killed with writes it never synced (the
    // kernel still has them); the next run starts a new segment and
    // ingests; then the power goes. The first run's unsynced end must not
    // be lost while the second run's records are kept.
    let dir = Path::new("/sim/state");
    for seed in 0..300 {
        let mut rng = Rng::new(seed);
        let fs = SimFs::default();
        let (mut acked, mut next) = (Vec::new(), 0);
        for _ in 0..2 {
            let journal = Journal::open_on(
                Arc::new(fs.clone()),
                dir,
                &options(Durability::Process),
                vec![holder()],
            )
            .unwrap();
            ingest_some(&journal, &mut rng, &mut next, &mut acked);
            // `kill -9`: nothing more reaches the disk, not even the sync
            // at close.
            fs.cut();
            journal.close();
            fs.restart_process();
        }
        fs.cut();
        let journal = Journal::open_on(
            Arc::new(fs.image(&mut rng)),
            dir,
            &options(Durability::Process),
            vec![holder()],
        )
        .unwrap_or_else(|e| panic!("seed {seed}: the journal does not open after the cut: {e}"));
        let values: Vec<u64> = read_back(&journal).iter().map(|&(_, v)| v).collect();
        journal.close();
        assert!(
            values.len() <= acked.len() && values[..] == acked[..values.len()],
            "seed {seed}: {values:?} is not a prefix of {acked:?}"
        );
    }
}

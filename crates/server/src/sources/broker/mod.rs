//! What the broker sources (MQTT, Kafka) share, from a message's bytes to
//! its acknowledgement: the payload forms (`payload`), topic patterns'
//! placeholders (`topic`), the pipeline (`pipeline`: grouping by property,
//! the duplicate rule, batches, acknowledgement only once the store took
//! the instants) and the counters with the bad messages by reason
//! (`stats`).
//!
//! A broker source is a sibling module of this one: its client, its
//! topic patterns' syntax, and how it acknowledges (an MQTT ack, a Kafka
//! commit); it hands its messages to [`pipeline::take`].

mod payload;
pub(crate) mod pipeline;
pub(crate) mod stats;
pub(crate) mod topic;

use super::Site;

/// A stable default identity (MQTT's client id, Kafka's group) for a
/// server at `site`: the same at every restart on the same state directory
/// (or, without one, the same address).
pub(crate) fn default_id(site: Site<'_>) -> String {
    derived_id(&match site.state {
        Some(dir) => std::fs::canonicalize(dir)
            .unwrap_or_else(|_| dir.to_owned())
            .display()
            .to_string(),
        None => site.addr.to_string(),
    })
}

/// `mfstream-` and 14 hex digits of a hash of `seed` (23 characters, as
/// MQTT 3.1.1 brokers must accept).
fn derived_id(seed: &str) -> String {
    // FNV-1a: stable across Rust versions, unlike the std hasher.
    let hash = seed.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("mfstream-{:014x}", hash >> 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_id_is_stable_short_and_differs_by_state_dir() {
        let a = derived_id("/var/lib/mfstream");
        assert_eq!(a, derived_id("/var/lib/mfstream"));
        assert_ne!(a, derived_id("/var/lib/other"));
        assert_eq!(a.len(), 23);
        assert!(a.starts_with("mfstream-"));
    }
}

//! A temporal property's name on the server: the leaf that the query table
//! and the durable layer both read, so neither imports the other for it.

/// A temporal property, `/collections/{cid}/items/{fid}/tproperties/{pname}`,
/// or a feature's positions, `/collections/{cid}/items/{fid}/tgsequence`.
///
/// Positions are keyed as a property whose name is empty
/// ([`PropertyKey::sequence`]): no path names a property so (an empty
/// property id is refused, 400), so the two never meet, and everything
/// keyed by property (the query table, ingest, the state store's log)
/// serves positions unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PropertyKey {
    pub(crate) collection: String,
    pub(crate) feature: String,
    pub(crate) property: String,
}

/// The name events and link objects give a feature's positions.
pub(crate) const TGSEQUENCE: &str = "tgsequence";

impl PropertyKey {
    /// The positions of `feature` in `collection`.
    pub(crate) fn sequence(collection: String, feature: String) -> PropertyKey {
        PropertyKey {
            collection,
            feature,
            property: String::new(),
        }
    }

    /// Whether this is a feature's positions.
    pub(crate) fn is_sequence(&self) -> bool {
        self.property.is_empty()
    }

    /// The name events carry as their `property`: the property's, or
    /// `tgsequence` for positions.
    pub(crate) fn name(&self) -> &str {
        if self.is_sequence() {
            TGSEQUENCE
        } else {
            &self.property
        }
    }

    /// The property's path, each id percent-encoded.
    pub(crate) fn path(&self) -> String {
        if self.is_sequence() {
            return format!(
                "/collections/{}/items/{}/{TGSEQUENCE}",
                encode(&self.collection),
                encode(&self.feature),
            );
        }
        format!(
            "/collections/{}/items/{}/tproperties/{}",
            encode(&self.collection),
            encode(&self.feature),
            encode(&self.property)
        )
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

//! The name of a temporal property: its collection, feature and property
//! ids, the one key the server's query table, the ingest path and the state
//! store all use.

/// A temporal property, `/collections/{collection}/items/{feature}/tproperties/{property}`,
/// or a feature's positions, `/collections/{collection}/items/{feature}/tgsequence`.
///
/// Positions are keyed as a property whose name is empty
/// (`PropertyPath::sequence`): no path names a property so (an empty
/// property id is refused, 400), so the two never meet, and everything
/// keyed by property (the query table, ingest, the state store's log)
/// serves positions unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PropertyPath {
    /// The collection id.
    pub collection: String,
    /// The feature id.
    pub feature: String,
    /// The temporal property's name.
    pub property: String,
}

/// The name events and link objects give a feature's positions.
pub(super) const TGSEQUENCE: &str = "tgsequence";

impl PropertyPath {
    /// The positions of `feature` in `collection`.
    pub fn sequence(collection: String, feature: String) -> PropertyPath {
        PropertyPath {
            collection,
            feature,
            property: String::new(),
        }
    }

    /// Whether this is a feature's positions.
    pub fn is_sequence(&self) -> bool {
        self.property.is_empty()
    }

    /// The name events carry as their `property`: the property's, or
    /// `tgsequence` for positions.
    pub fn name(&self) -> &str {
        if self.is_sequence() {
            TGSEQUENCE
        } else {
            &self.property
        }
    }

    /// The property's path in the API, each id percent-encoded.
    pub fn href(&self) -> String {
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

#[cfg(test)]
mod tests {
    use super::PropertyPath;

    #[test]
    fn href_percent_encodes_each_id() {
        let path = PropertyPath {
            collection: "ships".into(),
            feature: "a b/c".into(),
            property: "speed~1".into(),
        };
        assert_eq!(
            path.href(),
            "/collections/ships/items/a%20b%2Fc/tproperties/speed~1"
        );
    }
}

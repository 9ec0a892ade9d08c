//! The name of a temporal property: its collection, feature and property
//! ids, the one key the server's query table, the ingest path and the state
//! store all use.

/// A temporal property: `/collections/{collection}/items/{feature}/tproperties/{property}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PropertyPath {
    /// The collection id.
    pub collection: String,
    /// The feature id.
    pub feature: String,
    /// The temporal property's name.
    pub property: String,
}

impl PropertyPath {
    /// The property's path in the API, each id percent-encoded.
    pub(crate) fn href(&self) -> String {
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

//! A temporal property's name on the server: the leaf that the query table
//! and the durable layer both read, so neither imports the other for it.

/// A temporal property: `/collections/{cid}/items/{fid}/tproperties/{pname}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PropertyKey {
    pub(crate) collection: String,
    pub(crate) feature: String,
    pub(crate) property: String,
}

impl PropertyKey {
    /// The property's path, each id percent-encoded.
    pub(crate) fn path(&self) -> String {
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

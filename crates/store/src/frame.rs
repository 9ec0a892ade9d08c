//! The framing the store's records are written in: a field is a `u32`
//! length (little endian) and that many bytes. Batches, event batches and
//! the journal's segment rows all use it, so it lives below them all.
//!
//! Reading checks every length against what is left, so a damaged record
//! is an error, never a panic or a read past its end.

/// Appends `s` with its length.
pub(crate) fn put_str(s: &str, out: &mut Vec<u8>) {
    put_bytes(s.as_bytes(), out);
}

/// Appends `bytes` with their length.
pub(crate) fn put_bytes(bytes: &[u8], out: &mut Vec<u8>) {
    // Strings are bounded far below 4 GiB before they get here.
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&bytes[..len as usize]);
}

/// Why the bytes of a record, a batch or an event do not decode: they are
/// damaged (the record checked, so no unfinished write made them). Its
/// message goes into the store's [`JournalDamaged`] error.
///
/// [`JournalDamaged`]: super::StoreErrorKind::JournalDamaged
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DecodeError {
    /// A field longer than what is left.
    #[error("{expected} bytes expected, {left} left")]
    Short { expected: usize, left: usize },
    /// A string that is not UTF-8.
    #[error("{0}")]
    NotUtf8(String),
    /// A tag or flag of no known meaning.
    #[error("unknown {what} {tag}")]
    UnknownTag { what: &'static str, tag: u8 },
    /// An event whose kind is neither `instant` nor `window`.
    #[error("an event of unknown kind {0:?}")]
    UnknownEventKind(String),
    /// An instants record whose count or first number is out of range.
    #[error("an instants record of {count} instants from {first_seq}")]
    InstantsRange { count: u32, first_seq: u64 },
    /// An instants record holding another count than it says.
    #[error("an instants record says {said} instants but holds {held}")]
    InstantsCount { said: u32, held: u64 },
    /// An events record whose count or first id is out of range.
    #[error("an events record of {count} events from {first_id}")]
    EventsRange { count: u32, first_id: u64 },
    /// A checkpoint past the largest sequence number.
    #[error("a checkpoint after instant {after_seq} and event {last_event_id}")]
    CheckpointRange { after_seq: u64, last_event_id: u64 },
    /// An events record holding other counts than it says.
    #[error(
        "an events record says {said} events of {said_bytes} bytes but holds {held} of \
         {held_bytes}"
    )]
    EventsCount {
        said: u32,
        said_bytes: u64,
        held: u64,
        held_bytes: u64,
    },
    /// A record of another kind than the index says is there.
    #[error("a record of another kind than the index says")]
    WrongKind,
}

/// The next `n` bytes of `data`, which moves past them.
pub(crate) fn take<'a>(data: &mut &'a [u8], n: usize) -> Result<&'a [u8], DecodeError> {
    if data.len() < n {
        return Err(DecodeError::Short {
            expected: n,
            left: data.len(),
        });
    }
    let (head, rest) = data.split_at(n);
    *data = rest;
    Ok(head)
}

/// The next `N` bytes of `data`, as an array.
pub(crate) fn take_array<const N: usize>(data: &mut &[u8]) -> Result<[u8; N], DecodeError> {
    Ok(take(data, N)?.try_into().expect("take returns N bytes"))
}

/// The next bytes of `data` put with [`put_bytes`].
pub(crate) fn take_bytes<'a>(data: &mut &'a [u8]) -> Result<&'a [u8], DecodeError> {
    let len = take_array::<4>(data)?;
    take(data, u32::from_le_bytes(len) as usize)
}

/// The next string of `data` put with [`put_bytes`].
pub(crate) fn take_str(data: &mut &[u8]) -> Result<String, DecodeError> {
    String::from_utf8(take_bytes(data)?.to_vec()).map_err(|e| DecodeError::NotUtf8(e.to_string()))
}

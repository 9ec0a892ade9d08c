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

/// The next `n` bytes of `data`, which moves past them.
pub(crate) fn take<'a>(data: &mut &'a [u8], n: usize) -> Result<&'a [u8], String> {
    if data.len() < n {
        return Err(format!("{n} bytes expected, {} left", data.len()));
    }
    let (head, rest) = data.split_at(n);
    *data = rest;
    Ok(head)
}

/// The next bytes of `data` put with [`put_bytes`].
pub(crate) fn take_bytes<'a>(data: &mut &'a [u8]) -> Result<&'a [u8], String> {
    let len: [u8; 4] = take(data, 4)?
        .try_into()
        .map_err(|_| "a short length".to_owned())?;
    take(data, u32::from_le_bytes(len) as usize)
}

/// The next string of `data` put with [`put_bytes`].
pub(crate) fn take_str(data: &mut &[u8]) -> Result<String, String> {
    String::from_utf8(take_bytes(data)?.to_vec()).map_err(|e| e.to_string())
}

//! Bounded lines: the framing of every line protocol mfstream reads (a
//! bridge job's stdout, an isolated plugin's stdin, the input of
//! `mfstream run`).
//!
//! [`LineReader`] owns one buffer. The caller reads bytes into
//! [`LineReader::spare`] (from a pipe, a file, synchronously or not), says
//! how many with [`LineReader::filled`], then takes complete lines with
//! [`LineReader::next_line`]. Lines are borrowed from the buffer, so a line
//! that arrives whole in one read is never copied; only an incomplete tail
//! is moved to the front before the next read.
//!
//! Every line is bounded by [`MAX_LINE`] (or the reader's own bound): a
//! producer that never writes a newline would otherwise make the buffer grow
//! without end, which is why tokio-util's `LinesCodec::new` warns against
//! untrusted input. The buffer never exceeds the bound plus one read.

/// The longest line accepted, in bytes, newline excluded.
pub const MAX_LINE: usize = 1024 * 1024;

/// Bytes made room for at each read.
const READ_CHUNK: usize = 64 * 1024;

/// A line longer than the bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line} is longer than {max} bytes")]
pub struct LineTooLong {
    /// The line's 1-based number.
    pub line: u64,
    /// The bound.
    pub max: usize,
}

/// Splits bytes into bounded lines, numbering them from 1.
#[derive(Debug)]
pub struct LineReader {
    buf: Vec<u8>,
    /// The first byte not yet returned as part of a line.
    start: usize,
    /// The end of the bytes read.
    end: usize,
    /// `buf[start..scanned]` holds no newline.
    scanned: usize,
    line_no: u64,
    max: usize,
}

impl Default for LineReader {
    fn default() -> LineReader {
        LineReader::new(MAX_LINE)
    }
}

impl LineReader {
    /// A reader of lines of at most `max` bytes.
    pub fn new(max: usize) -> LineReader {
        LineReader {
            buf: vec![0; READ_CHUNK],
            start: 0,
            end: 0,
            scanned: 0,
            line_no: 0,
            max,
        }
    }

    /// Room to read into: the bytes already read but not returned are moved
    /// to the front first. Follow a read with [`LineReader::filled`].
    pub fn spare(&mut self) -> &mut [u8] {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.scanned -= self.start;
            self.start = 0;
        }
        if self.buf.len() - self.end < READ_CHUNK / 2 {
            self.buf.resize(self.end + READ_CHUNK, 0);
        }
        &mut self.buf[self.end..]
    }

    /// Records that `n` bytes were read into [`LineReader::spare`].
    pub fn filled(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }

    /// Reads once from `input` into the buffer: the bytes read, 0 at the
    /// end of input. Interrupted reads are retried.
    pub fn read_from(&mut self, input: &mut impl std::io::Read) -> std::io::Result<usize> {
        loop {
            match input.read(self.spare()) {
                Ok(n) => {
                    self.filled(n);
                    return Ok(n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The next complete line (without its newline) and its number, `None`
    /// when no complete line is buffered. A line longer than the bound is an
    /// error, as soon as that many bytes of it have arrived.
    pub fn next_line(&mut self) -> Result<Option<(u64, &[u8])>, LineTooLong> {
        match memchr::memchr(b'\n', &self.buf[self.scanned..self.end]) {
            Some(at) => {
                let nl = self.scanned + at;
                let line_start = self.start;
                self.start = nl + 1;
                self.scanned = self.start;
                self.line_no += 1;
                if nl - line_start > self.max {
                    return Err(self.too_long(self.line_no));
                }
                Ok(Some((self.line_no, &self.buf[line_start..nl])))
            }
            None => {
                self.scanned = self.end;
                if self.end - self.start > self.max {
                    return Err(self.too_long(self.line_no + 1));
                }
                Ok(None)
            }
        }
    }

    /// At the end of input: the last line if it has no newline.
    pub fn finish(&mut self) -> Option<(u64, &[u8])> {
        if self.start == self.end {
            return None;
        }
        let line = self.start..self.end;
        self.start = self.end;
        self.scanned = self.end;
        self.line_no += 1;
        Some((self.line_no, &self.buf[line]))
    }

    /// Drops every byte buffered, complete lines or not (the lines are
    /// still counted as they come): for output no longer trusted.
    pub fn discard(&mut self) {
        self.start = self.end;
        self.scanned = self.end;
    }

    /// Lines returned so far.
    pub fn line_no(&self) -> u64 {
        self.line_no
    }

    fn too_long(&self, line: u64) -> LineTooLong {
        LineTooLong {
            line,
            max: self.max,
        }
    }
}

/// A line as a message quotes it: lossy UTF-8, at most 200 bytes.
pub fn quote(line: &[u8]) -> String {
    const MAX: usize = 200;
    let shown = &line[..line.len().min(MAX)];
    let mut text = format!("{:?}", String::from_utf8_lossy(shown));
    if line.len() > MAX {
        text.push_str(&format!(" (first {MAX} of {} bytes)", line.len()));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line of `input` read `chunk` bytes at a time, then the tail.
    fn lines(input: &[u8], chunk: usize, max: usize) -> Result<Vec<(u64, Vec<u8>)>, LineTooLong> {
        let mut reader = LineReader::new(max);
        let mut out = Vec::new();
        for piece in input.chunks(chunk) {
            let spare = reader.spare();
            spare[..piece.len()].copy_from_slice(piece);
            reader.filled(piece.len());
            while let Some((n, line)) = reader.next_line()? {
                out.push((n, line.to_vec()));
            }
        }
        if let Some((n, line)) = reader.finish() {
            out.push((n, line.to_vec()));
        }
        Ok(out)
    }

    #[test]
    fn lines_split_across_reads_come_out_whole_and_numbered() {
        let input = b"one\ntwo\n\nthree\nfour";
        let expected: Vec<(u64, Vec<u8>)> = [&b"one"[..], b"two", b"", b"three", b"four"]
            .iter()
            .enumerate()
            .map(|(i, l)| (i as u64 + 1, l.to_vec()))
            .collect();
        for chunk in 1..=input.len() {
            assert_eq!(lines(input, chunk, 100).unwrap(), expected, "chunk {chunk}");
        }
    }

    #[test]
    fn a_line_over_the_bound_is_an_error_naming_it_before_it_ends() {
        let mut input = b"ok\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 1000));
        let error = lines(&input, 7, 100).unwrap_err();
        assert_eq!(error, LineTooLong { line: 2, max: 100 });
        assert_eq!(error.to_string(), "line 2 is longer than 100 bytes");
        // A whole line over the bound, arriving in one read.
        let error = lines(b"a\nbbbbbb\n", 64, 3).unwrap_err();
        assert_eq!(error.line, 2);
    }

    #[test]
    fn the_buffer_stays_bounded_by_one_read_past_the_longest_line() {
        let line = vec![b'y'; 10_000];
        let mut input = Vec::new();
        for _ in 0..100 {
            input.extend_from_slice(&line);
            input.push(b'\n');
        }
        let mut reader = LineReader::new(20_000);
        for piece in input.chunks(3_000) {
            reader.spare()[..piece.len()].copy_from_slice(piece);
            reader.filled(piece.len());
            while reader.next_line().unwrap().is_some() {}
            assert!(reader.buf.len() <= 20_000 + READ_CHUNK * 2);
        }
        assert_eq!(reader.line_no(), 100);
    }

    #[test]
    fn quoted_lines_are_bounded() {
        let long = vec![b'x'; 1000];
        assert!(quote(&long).ends_with("(first 200 of 1000 bytes)"));
        assert_eq!(quote(b"a\"b"), r#""a\"b""#);
    }
}

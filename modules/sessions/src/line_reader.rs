//! One pass over a JSON Lines file with a bounded line buffer.
//!
//! A transcript line can be large (a tool result holding a whole file), and a
//! damaged file may have no newline at all. Reading with `read_until` would
//! hold such a line whole; this reader keeps at most [`MAX_LINE_BYTES`] of a
//! line and skips the rest of a longer one without holding it, so memory per
//! file stays bounded whatever the file holds.

use std::io::{self, BufRead};

/// The longest line kept; a longer one is reported as oversized and skipped.
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// One line of the file.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// The line's bytes, without its `\n` (or `\r\n`).
    Text(&'a [u8]),
    /// Longer than the limit; its bytes were skipped.
    Oversized,
}

/// Reads lines of at most `max` bytes from `inner`.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    max: usize,
}

impl<R: BufRead> LineReader<R> {
    pub fn new(inner: R) -> Self {
        Self::with_limit(inner, MAX_LINE_BYTES)
    }

    pub fn with_limit(inner: R, max: usize) -> Self {
        LineReader {
            inner,
            buf: Vec::new(),
            max,
        }
    }

    /// The next line, or `None` at the end of the file.
    pub fn next_line(&mut self) -> io::Result<Option<Line<'_>>> {
        self.buf.clear();
        let mut oversized = false;
        let mut saw_bytes = false;
        loop {
            let available = match self.inner.fill_buf() {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                if !saw_bytes {
                    return Ok(None);
                }
                break;
            }
            saw_bytes = true;
            let (chunk, found_end) = match available.iter().position(|&b| b == b'\n') {
                Some(end) => (&available[..end], true),
                None => (available, false),
            };
            if !oversized {
                if self.buf.len() + chunk.len() > self.max {
                    oversized = true;
                    self.buf = Vec::new();
                } else {
                    self.buf.extend_from_slice(chunk);
                }
            }
            let used = chunk.len() + usize::from(found_end);
            self.inner.consume(used);
            if found_end {
                break;
            }
        }
        if oversized {
            return Ok(Some(Line::Oversized));
        }
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        Ok(Some(Line::Text(&self.buf)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], max: usize) -> Vec<Option<Vec<u8>>> {
        let mut reader = LineReader::with_limit(io::BufReader::with_capacity(4, input), max);
        let mut out = Vec::new();
        while let Some(line) = reader.next_line().unwrap() {
            out.push(match line {
                Line::Text(bytes) => Some(bytes.to_vec()),
                Line::Oversized => None,
            });
        }
        out
    }

    #[test]
    fn a_line_longer_than_the_limit_is_skipped_not_held_and_reading_goes_on() {
        let got = lines(b"short\r\n0123456789abcdef\nok\nlast-without-newline", 8);
        assert_eq!(
            got,
            [
                Some(b"short".to_vec()),
                None,
                Some(b"ok".to_vec()),
                None, // 20 bytes, over the limit
            ]
        );
        let got = lines(b"a\n\nb", 8);
        assert_eq!(
            got,
            [Some(b"a".to_vec()), Some(Vec::new()), Some(b"b".to_vec())]
        );
    }
}

//! The client's lines, read bounded and decoded without trusting a byte.
//!
//! Design decisions:
//!
//! - **Bytes, not text, until a line is whole.** UTF-8 is checked per line
//!   in [`decode`], so a line with invalid UTF-8 is one bad line, answered
//!   -32700, and the server reads on. (A `String` line reader fails the
//!   whole stream with `InvalidData`, which ended the server.)
//! - **A line is at most [`MAX_LINE_BYTES`].** Once the bytes held for a line
//!   would pass the cap, [`LineFramer`] lets go of them and discards the
//!   rest of the line up to its newline, counting only; the line is then
//!   reported as [`Framed::Oversized`] and answered by [`oversized_response`].
//!   So a client can make the server hold at most the cap (plus the
//!   reader's buffer) for a line, whatever it sends.
//! - **Pure.** [`LineFramer`] takes chunks and says what they complete;
//!   [`next_line`] is the few lines of I/O around it. The fuzz target
//!   (`modproto/fuzz/fuzz_targets/mcp_lines.rs`) drives the same framer and
//!   decoder with arbitrary bytes cut into arbitrary chunks.

use modproto::jsonrpc::decode_error_response;
use modproto::{ErrorCode, ErrorData, Id, Message, ModuleErrorKind, Response, RpcError};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The longest line the server accepts from its client: 4 MiB, newline
/// excluded. A longer one is skipped and answered with an error.
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// One line's worth of input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framed {
    /// A line within the cap, without its `\n`.
    Line(Vec<u8>),
    /// A line over the cap: `bytes` long (without its `\n`), none of it kept.
    Oversized { bytes: usize },
}

/// Splits a byte stream into [`Framed`] lines, holding at most `cap` bytes.
#[derive(Debug)]
pub struct LineFramer {
    cap: usize,
    held: Vec<u8>,
    /// Set while discarding an oversized line: its length so far.
    skipped: Option<usize>,
}

impl LineFramer {
    /// A framer for lines of at most `cap` bytes.
    pub fn new(cap: usize) -> LineFramer {
        LineFramer {
            cap,
            held: Vec::new(),
            skipped: None,
        }
    }

    /// Take bytes from the front of `chunk`, up to and including its first
    /// newline: how many were taken, and the line they completed, if any.
    pub fn push(&mut self, chunk: &[u8]) -> (usize, Option<Framed>) {
        let newline = chunk.iter().position(|b| *b == b'\n');
        let (part, taken) = match newline {
            Some(at) => (&chunk[..at], at + 1),
            None => (chunk, chunk.len()),
        };
        match &mut self.skipped {
            Some(bytes) => *bytes += part.len(),
            None if self.held.len() + part.len() > self.cap => {
                self.skipped = Some(self.held.len() + part.len());
                // Give the memory back now, not when the line ends.
                self.held = Vec::new();
            }
            None => self.held.extend_from_slice(part),
        }
        match newline {
            Some(_) => (taken, Some(self.take())),
            None => (taken, None),
        }
    }

    /// How many bytes are held for the line being read (never over the cap).
    pub fn held_bytes(&self) -> usize {
        self.held.len()
    }

    /// At the end of the stream: the last line if it had no newline.
    pub fn finish(&mut self) -> Option<Framed> {
        (self.skipped.is_some() || !self.held.is_empty()).then(|| self.take())
    }

    fn take(&mut self) -> Framed {
        match self.skipped.take() {
            Some(bytes) => Framed::Oversized { bytes },
            None => Framed::Line(std::mem::take(&mut self.held)),
        }
    }
}

/// The next line from `reader`; `None` at the end of the stream.
///
/// Cancel-safe only between lines: the server awaits it to completion.
pub async fn next_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    framer: &mut LineFramer,
) -> std::io::Result<Option<Framed>> {
    loop {
        let chunk = reader.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(framer.finish());
        }
        let (taken, framed) = framer.push(chunk);
        reader.consume(taken);
        if framed.is_some() {
            return Ok(framed);
        }
    }
}

/// What one line holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    /// Empty or whitespace only: ignored.
    Blank,
    Message(Message),
    /// Not a message: the error response to send (id null).
    Invalid(Response),
}

/// Decode one line (a trailing `\r` is dropped): invalid UTF-8 is a parse
/// error (-32700), anything else [`Message::parse`] refuses is answered as
/// it says.
pub fn decode(raw: &[u8]) -> Decoded {
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    let line = match std::str::from_utf8(raw) {
        Ok(line) => line,
        Err(e) => {
            let error = RpcError::new(
                ErrorCode::ParseError,
                format!(
                    "the line is not UTF-8 (invalid bytes at offset {}); it was skipped",
                    e.valid_up_to()
                ),
            )
            .with_data(ErrorData::new(
                ModuleErrorKind::Parse,
                "send one JSON-RPC 2.0 object per line, encoded as UTF-8",
            ));
            return Decoded::Invalid(Response::err(Id::Null, error));
        }
    };
    if line.trim().is_empty() {
        return Decoded::Blank;
    }
    match Message::parse(line) {
        Ok(message) => Decoded::Message(message),
        Err(e) => Decoded::Invalid(decode_error_response(&e)),
    }
}

/// The answer to a line over [`MAX_LINE_BYTES`] (-32600, id null: the id
/// was in the bytes that were not kept).
pub fn oversized_response(bytes: usize) -> Response {
    let error = RpcError::new(
        ErrorCode::InvalidRequest,
        format!(
            "the line is {bytes} bytes, over this server's cap of {MAX_LINE_BYTES} bytes (4 MiB) per line; it was skipped"
        ),
    )
    .with_data(ErrorData::new(
        ModuleErrorKind::InvalidRequest,
        "send smaller arguments: pass large content as a file path in the workspace instead of inline",
    ));
    Response::err(Id::Null, error)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every frame of `input` fed in chunks of `chunk` bytes.
    fn frames(input: &[u8], cap: usize, chunk: usize) -> Vec<Framed> {
        let mut framer = LineFramer::new(cap);
        let mut out = Vec::new();
        for mut piece in input.chunks(chunk) {
            while !piece.is_empty() {
                let (taken, framed) = framer.push(piece);
                assert!(taken > 0 && taken <= piece.len());
                out.extend(framed);
                piece = &piece[taken..];
            }
            assert!(framer.held.len() <= cap, "never more than the cap held");
        }
        out.extend(framer.finish());
        out
    }

    #[test]
    fn lines_are_split_whatever_the_chunks_and_a_long_one_is_counted_not_kept() {
        let input = b"ab\n\ncdefgh\nxyz";
        for chunk in 1..=input.len() {
            assert_eq!(
                frames(input, 4, chunk),
                vec![
                    Framed::Line(b"ab".to_vec()),
                    Framed::Line(vec![]),
                    Framed::Oversized { bytes: 6 },
                    Framed::Line(b"xyz".to_vec()),
                ],
                "chunk {chunk}"
            );
        }
        // Exactly the cap is accepted; an oversized last line without a
        // newline is still reported.
        assert_eq!(
            frames(b"abcd\nabcde", 4, 3),
            vec![
                Framed::Line(b"abcd".to_vec()),
                Framed::Oversized { bytes: 5 }
            ]
        );
        assert!(frames(b"", 4, 1).is_empty());
    }

    #[test]
    fn invalid_utf8_is_a_parse_error_and_blank_lines_are_ignored() {
        let Decoded::Invalid(r) = decode(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}")
        else {
            panic!("not refused")
        };
        assert_eq!(r.id, Id::Null);
        let error = r.outcome.unwrap_err();
        assert_eq!(error.code, -32700);
        assert!(error.message.contains("not UTF-8"), "{}", error.message);
        assert_eq!(decode(b"  \r"), Decoded::Blank);
        assert!(matches!(
            decode(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r"),
            Decoded::Message(Message::Request(_))
        ));
        let too_long = oversized_response(5 << 20).outcome.unwrap_err();
        assert_eq!(too_long.code, -32600);
        assert!(too_long.message.contains("4194304"), "{}", too_long.message);
    }
}

//! What an MCP client writes to `modhost mcp`, framed and decoded the way the
//! server does it (`modhost_mcp::line`, the very functions, not a copy).
//!
//! The input's first byte picks the chunk size the bytes arrive in (1 to 64)
//! and its second a small line cap (1 to 256 bytes), so oversized lines and
//! lines cut across chunks are the common case, not a rare one. Asserted:
//!
//! - the frames are exactly the input split on `\n` (a last line without a
//!   newline included when not empty), each line over the cap reported as
//!   oversized with its true length, whatever the chunking;
//! - the framer never holds more than the cap;
//! - decoding a line never panics; whatever it accepts re-encodes to a line
//!   it decodes to the same message, and whatever it refuses is answered
//!   with id null and -32700 or -32600.

#![no_main]

use libfuzzer_sys::fuzz_target;
use modhost_mcp::line::{Decoded, Framed, LineFramer, decode};
use modproto::Id;

fuzz_target!(|data: &[u8]| {
    let [chunk, cap, input @ ..] = data else {
        return;
    };
    let chunk = usize::from(chunk % 64) + 1;
    let cap = usize::from(*cap) + 1;

    let mut framer = LineFramer::new(cap);
    let mut frames = Vec::new();
    for mut piece in input.chunks(chunk) {
        while !piece.is_empty() {
            let (taken, framed) = framer.push(piece);
            assert!(
                taken > 0 && taken <= piece.len(),
                "took {taken} of {}",
                piece.len()
            );
            assert!(framer.held_bytes() <= cap, "held more than the cap");
            frames.extend(framed);
            piece = &piece[taken..];
        }
    }
    frames.extend(framer.finish());

    let mut expected: Vec<Framed> = Vec::new();
    let mut pieces: Vec<&[u8]> = input.split(|b| *b == b'\n').collect();
    if pieces.last().is_some_and(|last| last.is_empty()) {
        pieces.pop();
    }
    for piece in pieces {
        expected.push(if piece.len() > cap {
            Framed::Oversized { bytes: piece.len() }
        } else {
            Framed::Line(piece.to_vec())
        });
    }
    assert_eq!(frames, expected);

    for frame in &frames {
        let Framed::Line(raw) = frame else { continue };
        match decode(raw) {
            Decoded::Blank => {}
            Decoded::Message(message) => {
                let again = message.to_line();
                assert!(!again.contains('\n'), "to_line wrote a newline: {again}");
                assert_eq!(decode(again.as_bytes()), Decoded::Message(message));
            }
            Decoded::Invalid(response) => {
                assert_eq!(response.id, Id::Null);
                let code = response.outcome.expect_err("an error response").code;
                assert!(code == -32700 || code == -32600, "code {code}");
            }
        }
    }
});

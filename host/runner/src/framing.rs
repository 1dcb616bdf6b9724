//! The line framing both transports share: the rules themselves are
//! [`modproto::framing::Transcript`] (one response and nothing after it,
//! unique keys, unknown notifications ignored with a warning), which the
//! conformance battery applies too; here, the host's side: the request id,
//! forwarding kept notifications live, and splitting a byte stream into
//! lines. Both transports feed every stdout line through [`take_line`], so
//! both accept and refuse exactly the same bytes.

use modproto::Id;
use modproto::framing::Transcript;

use super::NotificationSink;

/// The JSON-RPC id the host uses for the one request of a call.
pub const REQUEST_ID: i64 = 1;

/// A transcript of the answer to the host's one request.
pub(super) fn transcript() -> Transcript {
    Transcript::new(Some(Id::Num(REQUEST_ID)))
}

/// Take one stdout line into `transcript`, forwarding a notification it
/// keeps to `sink` at once (an MCP server relays `progress` from there).
pub(super) fn take_line(
    transcript: &mut Transcript,
    sink: Option<&NotificationSink>,
    line: &[u8],
) -> Result<(), String> {
    if let (Some(notification), Some(sink)) = (transcript.line(line)?, sink) {
        // A closed receiver only means nobody listens live any more.
        let _ = sink.send(notification.clone());
    }
    Ok(())
}

/// Splits a byte stream into lines as it arrives.
#[derive(Debug, Default)]
pub(super) struct Lines {
    pending: Vec<u8>,
}

impl Lines {
    /// Append `bytes`; hand every completed line (without `\n`) to `each`,
    /// stopping at its first error.
    pub(super) fn push(
        &mut self,
        bytes: &[u8],
        mut each: impl FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<(), String> {
        let mut start = self.pending.len();
        self.pending.extend_from_slice(bytes);
        while let Some(offset) = self.pending[start..].iter().position(|b| *b == b'\n') {
            let end = start + offset;
            let result = each(&self.pending[..end]);
            self.pending.drain(..=end);
            result?;
            start = 0;
        }
        Ok(())
    }

    /// The bytes after the last newline (a last line without its newline
    /// still counts, at end of stream).
    pub(super) fn take_rest(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_across_chunks() {
        let mut lines = Lines::default();
        let mut got = Vec::new();
        for chunk in [&b"ab"[..], b"c\nd", b"e\n\nf"] {
            lines
                .push(chunk, |l| {
                    got.push(String::from_utf8_lossy(l).into_owned());
                    Ok(())
                })
                .unwrap();
        }
        assert_eq!(got, ["abc", "de", ""]);
        assert_eq!(lines.take_rest(), b"f");
    }

    #[test]
    fn kept_notifications_are_forwarded_live() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut t = transcript();
        let progress =
            br#"{"jsonrpc":"2.0","method":"progress","params":{"request_id":"r","progress":1}}"#;
        take_line(&mut t, Some(&tx), progress).unwrap();
        take_line(&mut t, Some(&tx), br#"{"jsonrpc":"2.0","method":"bogus"}"#).unwrap();
        assert_eq!(rx.try_recv().unwrap().method, "progress");
        assert!(
            rx.try_recv().is_err(),
            "an ignored notification was forwarded"
        );
        let err = take_line(&mut t, None, br#"{"jsonrpc":"2.0","id":2,"result":1}"#).unwrap_err();
        assert!(err.contains("id 2"), "{err}");
    }
}

//! The line framing both transports share: how the bytes a module writes to
//! stdout become notifications and its one response, or `bad_response`.
//!
//! The native transport feeds it lines read from a pipe, the wasm transport
//! lines written through WASI stdout; both build one [`Transcript`] per call,
//! so both accept and refuse exactly the same bytes (PROTOCOL.md sections 1
//! to 3 state these rules):
//!
//! - every non-blank line is one JSON-RPC 2.0 message with unique keys at
//!   every depth (`modproto::strict_json`);
//! - before the response: `progress` and `log` notifications with
//!   well-formed params are kept (and forwarded live); a notification the
//!   protocol does not define is **ignored with a host warning**, so a module
//!   written for a newer host still works; a request, or a known notification
//!   with malformed params, is `bad_response`;
//! - **exactly one response**, with the request's id (or null in an error
//!   response to a request the module could not read);
//! - after the response: nothing but blank lines. A second response or any
//!   other line is `bad_response`, not ignored.

use std::collections::BTreeMap;

use modproto::{Id, LogParams, Message, Notification, ProgressParams, Response};

use super::NotificationSink;

/// The JSON-RPC id the host uses for the one request of a call.
pub const REQUEST_ID: i64 = 1;

/// How many distinct unknown notification methods are named in warnings;
/// more are counted, not named (a module cannot flood the warnings).
const MAX_NAMED_UNKNOWN: usize = 8;

/// The stdout of one call, line by line.
#[derive(Debug)]
pub(super) struct Transcript<'a> {
    sink: Option<&'a NotificationSink>,
    line_number: usize,
    notifications: Vec<Notification>,
    /// Unknown notification methods and how often each came.
    ignored: BTreeMap<String, usize>,
    response: Option<Response>,
}

/// What a well-framed call produced.
#[derive(Debug)]
pub(super) struct Answer {
    pub response: Response,
    pub notifications: Vec<Notification>,
    /// What the host noticed and let pass (ignored notifications).
    pub warnings: Vec<String>,
}

impl<'a> Transcript<'a> {
    pub(super) fn new(sink: Option<&'a NotificationSink>) -> Self {
        Transcript {
            sink,
            line_number: 0,
            notifications: Vec::new(),
            ignored: BTreeMap::new(),
            response: None,
        }
    }

    /// Whether the one response has been read.
    pub(super) fn answered(&self) -> bool {
        self.response.is_some()
    }

    /// Take one stdout line (without its `\n`). `Err` is the problem that
    /// makes the call `bad_response`.
    pub(super) fn line(&mut self, raw: &[u8]) -> Result<(), String> {
        self.line_number += 1;
        let n = self.line_number;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let line = std::str::from_utf8(raw).map_err(|_| format!("stdout line {n} is not UTF-8"))?;
        if line.trim().is_empty() {
            return Ok(());
        }
        if self.response.is_some() {
            return Err(format!(
                "stdout line {n}: the module wrote more after its response ({}); a module writes exactly one response line and nothing after it",
                what_it_is(line)
            ));
        }
        let message =
            Message::parse(line).map_err(|e| format!("stdout line {n}: {e}: {}", excerpt(line)))?;
        match message {
            Message::Response(response) => {
                // A module that could not read the request answers with a null id.
                let id_ok = response.id == Id::Num(REQUEST_ID)
                    || (response.id == Id::Null && response.outcome.is_err());
                if !id_ok {
                    return Err(format!(
                        "stdout line {n}: response has id {} but the request had id {REQUEST_ID}",
                        response.id
                    ));
                }
                self.response = Some(response);
                Ok(())
            }
            Message::Notification(notification) => {
                match check_notification(&notification) {
                    Known::Valid => {}
                    Known::Malformed(problem) => return Err(format!("stdout line {n}: {problem}")),
                    Known::Unknown => {
                        *self.ignored.entry(notification.method).or_default() += 1;
                        return Ok(());
                    }
                }
                if let Some(sink) = self.sink {
                    // A closed receiver only means nobody listens live any more.
                    let _ = sink.send(notification.clone());
                }
                self.notifications.push(notification);
                Ok(())
            }
            Message::Request(request) => Err(format!(
                "stdout line {n}: the module sent a request ({:?}); modules may only send notifications and one response",
                request.method
            )),
        }
    }

    /// The response and what came with it; `None` when there was none.
    pub(super) fn finish(self) -> Option<Answer> {
        let response = self.response?;
        let mut warnings = Vec::new();
        if !self.ignored.is_empty() {
            let total: usize = self.ignored.values().sum();
            let mut named: Vec<String> = self
                .ignored
                .keys()
                .take(MAX_NAMED_UNKNOWN)
                .map(|m| format!("{m:?}"))
                .collect();
            if self.ignored.len() > MAX_NAMED_UNKNOWN {
                named.push(format!(
                    "and {} more",
                    self.ignored.len() - MAX_NAMED_UNKNOWN
                ));
            }
            warnings.push(format!(
                "ignored {total} notification(s) this host does not know ({}); only \"progress\" and \"log\" are defined",
                named.join(", ")
            ));
        }
        Some(Answer {
            response,
            notifications: self.notifications,
            warnings,
        })
    }
}

/// Whether a notification is one the protocol defines, with well-formed params.
enum Known {
    Valid,
    Malformed(String),
    Unknown,
}

fn check_notification(notification: &Notification) -> Known {
    let params = notification
        .params
        .clone()
        .unwrap_or(serde_json::Value::Null);
    let parsed = match notification.method.as_str() {
        modproto::METHOD_PROGRESS => serde_json::from_value::<ProgressParams>(params)
            .map(drop)
            .map_err(|e| format!("malformed progress notification: {e}")),
        modproto::METHOD_LOG => serde_json::from_value::<LogParams>(params)
            .map(drop)
            .map_err(|e| format!("malformed log notification: {e}")),
        _ => return Known::Unknown,
    };
    match parsed {
        Ok(()) => Known::Valid,
        Err(problem) => Known::Malformed(problem),
    }
}

/// For the message about a line after the response: a second response is
/// named as such.
fn what_it_is(line: &str) -> String {
    match Message::parse(line) {
        Ok(Message::Response(_)) => format!("a second response: {}", excerpt(line)),
        _ => excerpt(line),
    }
}

fn excerpt(line: &str) -> String {
    const MAX: usize = 80;
    if line.len() <= MAX {
        return format!("{line:?}");
    }
    let mut end = MAX;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}...", &line[..end])
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

    fn feed(lines: &[&str]) -> Result<Option<Answer>, String> {
        let mut t = Transcript::new(None);
        for line in lines {
            t.line(line.as_bytes())?;
        }
        Ok(t.finish())
    }

    const OK: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"output":1}}"#;

    #[test]
    fn an_unknown_notification_is_ignored_with_a_warning() {
        let answer = feed(&[r#"{"jsonrpc":"2.0","method":"bogus","params":{}}"#, OK])
            .unwrap()
            .unwrap();
        assert!(answer.notifications.is_empty());
        assert_eq!(answer.warnings.len(), 1);
        assert!(
            answer.warnings[0].contains("\"bogus\""),
            "{:?}",
            answer.warnings
        );
    }

    #[test]
    fn a_second_response_or_any_line_after_the_response_is_bad() {
        let err = feed(&[OK, OK]).unwrap_err();
        assert!(err.contains("second response"), "{err}");
        let err = feed(&[
            OK,
            r#"{"jsonrpc":"2.0","method":"log","params":{"level":"info","message":"late"}}"#,
        ])
        .unwrap_err();
        assert!(err.contains("after its response"), "{err}");
        // Blank lines are not messages.
        assert!(feed(&[OK, "", "  "]).unwrap().is_some());
    }

    #[test]
    fn a_duplicate_key_is_bad_not_last_wins() {
        let err =
            feed(&[r#"{"jsonrpc":"2.0","id":1,"result":{"output":1},"result":{"output":2}}"#])
                .unwrap_err();
        assert!(err.contains("duplicate key \"result\""), "{err}");
    }

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
}

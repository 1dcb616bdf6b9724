//! How the bytes a module writes to stdout become its notifications and
//! its one response, or a protocol error: the framing rules of PROTOCOL.md
//! sections 1 to 3, in one place, for every reader of a module's stdout
//! (the host's two transports and the conformance battery).
//!
//! - every non-blank line is one JSON-RPC 2.0 message with unique keys at
//!   every depth ([`crate::strict_json`]);
//! - before the response: `progress` and `log` notifications with
//!   well-formed params are kept (and handed back, to be forwarded live); a
//!   notification the protocol does not define is **ignored with a
//!   warning**, so a module written for a newer host still works; a
//!   request, or a known notification with malformed params, is an error;
//! - **exactly one response**, with the request's id (or null in an error
//!   response to a request the module could not read);
//! - after the response: nothing but blank lines. A second response or any
//!   other line is an error, not ignored.
//!
//! Pure: lines in, a verdict out. The host maps an error to `bad_response`.

use std::collections::BTreeMap;

use crate::jsonrpc::{Id, Message, Notification, Response};
use crate::notify::{LogParams, ProgressParams};

/// How many distinct unknown notification methods are named in warnings;
/// more are counted, not named (a module cannot flood the warnings).
const MAX_NAMED_UNKNOWN: usize = 8;

/// The stdout of one call, line by line.
#[derive(Debug)]
pub struct Transcript {
    /// The id the response must carry; `None` accepts any.
    expected_id: Option<Id>,
    line_number: usize,
    notifications: Vec<Notification>,
    /// Unknown notification methods and how often each came.
    ignored: BTreeMap<String, usize>,
    response: Option<Response>,
}

/// What a well-framed call produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub response: Response,
    pub notifications: Vec<Notification>,
    /// What the host noticed and let pass (ignored notifications).
    pub warnings: Vec<String>,
}

impl Transcript {
    /// A transcript of the answer to the request with id `expected_id`
    /// (`None`: any id, for a request the module cannot have read).
    pub fn new(expected_id: Option<Id>) -> Self {
        Transcript {
            expected_id,
            line_number: 0,
            notifications: Vec::new(),
            ignored: BTreeMap::new(),
            response: None,
        }
    }

    /// Whether the one response has been read.
    pub fn answered(&self) -> bool {
        self.response.is_some()
    }

    /// Take one stdout line (without its `\n`). `Ok(Some(_))` is a
    /// notification just kept, for the caller to forward live; `Err` is the
    /// problem that makes the call a protocol error (`bad_response`).
    pub fn line(&mut self, raw: &[u8]) -> Result<Option<&Notification>, String> {
        self.line_number += 1;
        let n = self.line_number;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let line = std::str::from_utf8(raw).map_err(|_| format!("stdout line {n} is not UTF-8"))?;
        if line.trim().is_empty() {
            return Ok(None);
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
                if let Some(expected) = &self.expected_id {
                    let id_ok = &response.id == expected
                        || (response.id == Id::Null && response.outcome.is_err());
                    if !id_ok {
                        return Err(format!(
                            "stdout line {n}: response has id {} but the request had id {expected}",
                            response.id
                        ));
                    }
                }
                self.response = Some(response);
                Ok(None)
            }
            Message::Notification(notification) => {
                match check_notification(&notification) {
                    Known::Valid => {}
                    Known::Malformed(problem) => return Err(format!("stdout line {n}: {problem}")),
                    Known::Unknown => {
                        *self.ignored.entry(notification.method).or_default() += 1;
                        return Ok(None);
                    }
                }
                self.notifications.push(notification);
                Ok(self.notifications.last())
            }
            Message::Request(request) => Err(format!(
                "stdout line {n}: the module sent a request ({:?}); modules may only send notifications and one response",
                request.method
            )),
        }
    }

    /// The response and what came with it; `None` when there was none.
    pub fn finish(self) -> Option<Answer> {
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
        crate::METHOD_PROGRESS => serde_json::from_value::<ProgressParams>(params)
            .map(drop)
            .map_err(|e| format!("malformed progress notification: {e}")),
        crate::METHOD_LOG => serde_json::from_value::<LogParams>(params)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(lines: &[&str]) -> Result<Option<Answer>, String> {
        let mut t = Transcript::new(Some(Id::Num(1)));
        for line in lines {
            t.line(line.as_bytes())?;
        }
        Ok(t.finish())
    }

    const OK: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"output":1}}"#;

    #[test]
    fn notifications_are_kept_and_handed_back() {
        let mut t = Transcript::new(Some(Id::Num(1)));
        let progress =
            r#"{"jsonrpc":"2.0","method":"progress","params":{"request_id":"r","progress":1}}"#;
        assert_eq!(
            t.line(progress.as_bytes()).unwrap().unwrap().method,
            "progress"
        );
        assert!(t.line(OK.as_bytes()).unwrap().is_none());
        let answer = t.finish().unwrap();
        assert_eq!(answer.notifications.len(), 1);
        assert!(answer.warnings.is_empty());
    }

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
    fn a_malformed_known_notification_or_a_request_is_an_error() {
        let err = feed(&[
            r#"{"jsonrpc":"2.0","method":"log","params":{"message":"x"}}"#,
            OK,
        ])
        .unwrap_err();
        assert!(err.contains("malformed log"), "{err}");
        let err = feed(&[r#"{"jsonrpc":"2.0","id":9,"method":"describe"}"#]).unwrap_err();
        assert!(err.contains("sent a request"), "{err}");
    }

    #[test]
    fn a_second_response_or_any_line_after_the_response_is_an_error() {
        let err = feed(&[OK, OK]).unwrap_err();
        assert!(err.contains("second response"), "{err}");
        let late = r#"{"jsonrpc":"2.0","method":"log","params":{"level":"info","message":"late"}}"#;
        let err = feed(&[OK, late]).unwrap_err();
        assert!(err.contains("after its response"), "{err}");
        // Blank lines are not messages.
        assert!(feed(&[OK, "", "  ", "\r"]).unwrap().is_some());
    }

    #[test]
    fn the_response_carries_the_request_id_or_null_with_an_error() {
        let err = feed(&[r#"{"jsonrpc":"2.0","id":7,"result":1}"#]).unwrap_err();
        assert!(err.contains("id 7"), "{err}");
        let null_error = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#;
        assert!(feed(&[null_error]).unwrap().is_some());
        let mut any = Transcript::new(None);
        any.line(br#"{"jsonrpc":"2.0","id":7,"result":1}"#).unwrap();
        assert!(any.answered());
    }

    #[test]
    fn a_duplicate_key_is_an_error_not_last_wins() {
        let err =
            feed(&[r#"{"jsonrpc":"2.0","id":1,"result":{"output":1},"result":{"output":2}}"#])
                .unwrap_err();
        assert!(err.contains("duplicate key \"result\""), "{err}");
    }
}

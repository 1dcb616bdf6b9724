//! Asking the user, through the client, to approve one call of a tool whose
//! approval verdict is `ask`.
//!
//! Design decisions:
//!
//! - **One question, one yes.** The form has one boolean, `approve`; the
//!   call runs only when the client answers `action: "accept"` with
//!   `content.approve == true`. Anything else (decline, cancel, accept of an
//!   empty or unticked form, an error response, no answer) is a no, and the
//!   module does not run. An approval covers this one call; the record the
//!   module receives says `by: "user"`.
//! - **Handshake revisions ask with a request** (`elicitation/create`, from
//!   2025-06-18), awaited by the call's own task; the reader hands the
//!   client's response over by id ([`Questions`]).
//! - **The stateless revision asks with a result** (`input_required`, the
//!   multi-round-trip pattern): the retry carries the answer and the
//!   `requestState` we minted. That state decides whether a module runs, so
//!   the spec requires it be unforgeable and not replayable: it is 128 random
//!   bits naming an entry kept here ([`PendingApprovals`]) that is bound to
//!   the tool and a digest of its arguments, expires, and is consumed by its
//!   first presentation. A made-up, reused, expired or re-targeted state is
//!   refused; it never runs anything.
//! - **The user sees every byte approved.** The question shows the
//!   arguments whole; a call whose arguments are too long to show
//!   ([`MAX_SHOWN_ARGUMENTS`]) is not asked about, and says how to allow it.
//! - **Only clients that said they can answer are asked** (the
//!   `elicitation` capability, form mode: an empty object means form).

use std::collections::HashMap;
use std::io::Read;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use modproto::{Id, Response};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::oneshot;

use super::revision::{AskUser, Revision};

/// The key of the approval question in an `input_required` result.
pub(crate) const APPROVAL_KEY: &str = "approval";

/// How long a handshake client has to answer an approval question; no
/// answer by then is a no.
pub(crate) const ANSWER_TIMEOUT: Duration = Duration::from_secs(600);

/// How long a stateless client has to come back with its answer.
pub(crate) const STATE_TTL: Duration = Duration::from_secs(600);

/// The most approval questions open at once for one client (stateless era);
/// a new one beyond it forgets the oldest, whose answer is then refused.
pub(crate) const MAX_PENDING_APPROVALS: usize = 64;

/// The longest arguments (as JSON) a question shows; a call with longer
/// ones is not asked about. Cutting them would ask the user to approve
/// bytes they were not shown: a model could pad a harmless-looking prefix
/// and put what matters after the cut.
pub(crate) const MAX_SHOWN_ARGUMENTS: usize = 4096;

/// Whether a client with these capabilities can answer a form question.
pub(crate) fn client_can_answer(capabilities: Option<&Value>) -> bool {
    let Some(Value::Object(elicitation)) = capabilities.and_then(|c| c.get("elicitation")) else {
        return false;
    };
    // `{}` is form mode (kept working from 2025-06-18); `{url: {}}` alone is not.
    elicitation.is_empty() || elicitation.contains_key("form")
}

/// The `elicitation/create` params asking to approve one call, in
/// `revision`'s shape.
pub(crate) fn question(revision: &Revision, tool: &str, rule: &str, arguments: &Value) -> Value {
    // Whole, never cut: the server asks only when they fit
    // ([`MAX_SHOWN_ARGUMENTS`]), since the yes covers every byte.
    let args = visible(&arguments.to_string());
    let mut params = json!({
        "message": format!(
            "Run {tool} once with {args}? It asks for approval ({rule}). \
             Tick approve to run this one call; anything else does not run it."
        ),
        "requestedSchema": {
            "type": "object",
            "properties": {
                "approve": {
                    "type": "boolean",
                    "title": "Approve this call",
                    "description": format!("Run {tool} this once."),
                    "default": false,
                }
            },
            "required": ["approve"],
        },
    });
    if matches!(
        revision.ask_user,
        AskUser::Request { mode: true } | AskUser::InputRequired
    ) {
        params["mode"] = json!("form");
    }
    params
}

/// `text` with every invisible or reordering character (bidirectional
/// controls, zero-width and other format characters, tags) written as a
/// `\u` escape: JSON escapes control characters but not these, and a model
/// could use them to make the arguments the user reads differ from the ones
/// that run (a right-to-left override turning `exe.txt` around, say).
fn visible(text: &str) -> String {
    let hidden = |c: char| {
        matches!(c,
            '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}'
            | '\u{17B5}' | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}' | '\u{FFF0}'..='\u{FFFB}'
            | '\u{1D173}'..='\u{1D17A}' | '\u{E0000}'..='\u{E0FFF}')
    };
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if hidden(c) {
            out.push_str(&format!("\\u{{{:04X}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// The user's answer, read from an `ElicitResult`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    Approved,
    /// Not approved, and why (shown to the model).
    Refused(String),
}

/// Read an `ElicitResult`: approved only on accept with `approve: true`.
pub(crate) fn read_answer(result: &Value) -> Answer {
    match result.get("action").and_then(Value::as_str) {
        Some("accept") if result.pointer("/content/approve") == Some(&json!(true)) => {
            Answer::Approved
        }
        Some("accept") => Answer::Refused("the user did not tick approve".into()),
        Some("decline") => Answer::Refused("the user declined".into()),
        Some("cancel") => Answer::Refused("the user dismissed the question".into()),
        _ => Answer::Refused(format!(
            "the client's answer is not an elicitation result: {result}"
        )),
    }
}

/// The answer to a server-to-client `elicitation/create` request.
pub(crate) fn read_response(response: Response) -> Answer {
    match response.outcome {
        Ok(result) => read_answer(&result),
        Err(e) => Answer::Refused(format!("the client could not ask the user ({})", e.message)),
    }
}

/// Server-to-client questions waiting for their response, by request id.
#[derive(Debug, Default)]
pub(crate) struct Questions {
    asked: Mutex<(u64, HashMap<Id, oneshot::Sender<Response>>)>,
}

impl Questions {
    /// A new question id and where its response will arrive. Dropping the
    /// receiver (the call was cancelled) leaves an entry that
    /// [`Questions::answered`] discards.
    pub(crate) fn open(&self) -> (Id, oneshot::Receiver<Response>) {
        let (sender, receiver) = oneshot::channel();
        let mut asked = self.asked.lock().unwrap_or_else(|e| e.into_inner());
        asked.0 += 1;
        let id = Id::Str(format!("modhost-elicit-{}", asked.0));
        asked.1.retain(|_, s| !s.is_closed());
        asked.1.insert(id.clone(), sender);
        (id, receiver)
    }

    /// Hand `response` to the question it answers; it comes back when it
    /// answers none of ours.
    pub(crate) fn answered(&self, response: Response) -> Option<Response> {
        let mut asked = self.asked.lock().unwrap_or_else(|e| e.into_inner());
        match asked.1.remove(&response.id) {
            Some(sender) => {
                let _ = sender.send(response);
                None
            }
            None => Some(response),
        }
    }
}

/// Why a presented `requestState` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StateRefused {
    #[error("requestState is not one this server issued, or it was already used")]
    Unknown,
    #[error("requestState expired (an approval question is open for {} s)", STATE_TTL.as_secs())]
    Expired,
    #[error("requestState was issued for another tool or other arguments")]
    OtherCall,
}

/// Approval questions the stateless era has asked and not yet had answered.
#[derive(Debug, Default)]
pub(crate) struct PendingApprovals {
    open: HashMap<String, Pending>,
}

#[derive(Debug)]
struct Pending {
    call: [u8; 32],
    expires: Instant,
}

impl PendingApprovals {
    /// Open a question for this call; the `requestState` naming it.
    pub(crate) fn open(&mut self, tool: &str, arguments: &Value) -> std::io::Result<String> {
        let now = Instant::now();
        self.open.retain(|_, p| p.expires > now);
        if self.open.len() >= MAX_PENDING_APPROVALS
            && let Some(oldest) = self
                .open
                .iter()
                .min_by_key(|(_, p)| p.expires)
                .map(|(k, _)| k.clone())
        {
            self.open.remove(&oldest);
        }
        let state = random_token()?;
        self.open.insert(
            state.clone(),
            Pending {
                call: call_digest(tool, arguments),
                expires: now + STATE_TTL,
            },
        );
        Ok(state)
    }

    /// Consume `state` for this call: `Ok` only when this server issued it,
    /// for this tool and these arguments, not long ago, and never before.
    pub(crate) fn redeem(
        &mut self,
        state: &str,
        tool: &str,
        arguments: &Value,
    ) -> Result<(), StateRefused> {
        let pending = self.open.remove(state).ok_or(StateRefused::Unknown)?;
        if pending.expires <= Instant::now() {
            return Err(StateRefused::Expired);
        }
        if pending.call != call_digest(tool, arguments) {
            return Err(StateRefused::OtherCall);
        }
        Ok(())
    }
}

/// What binds a state to one call: the tool and its exact arguments.
fn call_digest(tool: &str, arguments: &Value) -> [u8; 32] {
    let mut hash = Sha256::new();
    hash.update(tool.as_bytes());
    hash.update([0]);
    hash.update(arguments.to_string().as_bytes());
    hash.finalize().into()
}

/// 128 bits from the kernel's random source, in hex.
fn random_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::revision::find;

    #[test]
    fn only_an_accept_with_approve_ticked_approves() {
        let approved = json!({"action": "accept", "content": {"approve": true}});
        assert_eq!(read_answer(&approved), Answer::Approved);
        for no in [
            json!({"action": "accept", "content": {"approve": false}}),
            json!({"action": "accept"}),
            json!({"action": "accept", "content": {"approve": "true"}}),
            json!({"action": "decline", "content": {"approve": true}}),
            json!({"action": "cancel"}),
            json!({"approve": true}),
        ] {
            assert!(matches!(read_answer(&no), Answer::Refused(_)), "{no}");
        }
    }

    #[test]
    fn form_mode_is_named_only_where_the_revision_defines_it() {
        let args = json!({"url": "x"});
        assert!(
            question(find("2025-06-18").unwrap(), "t", "r", &args)
                .get("mode")
                .is_none()
        );
        assert_eq!(
            question(find("2025-11-25").unwrap(), "t", "r", &args)["mode"],
            json!("form")
        );
        assert!(client_can_answer(Some(&json!({"elicitation": {}}))));
        assert!(client_can_answer(Some(
            &json!({"elicitation": {"form": {}}})
        )));
        assert!(!client_can_answer(Some(
            &json!({"elicitation": {"url": {}}})
        )));
        assert!(!client_can_answer(Some(&json!({"roots": {}}))));
        assert!(!client_can_answer(None));
    }

    #[test]
    fn a_request_state_runs_one_call_once_and_cannot_be_forged_or_retargeted() {
        let mut pending = PendingApprovals::default();
        let args = json!({"url": "https://example.org"});
        let state = pending.open("web__get", &args).unwrap();
        assert_eq!(state.len(), 32);
        assert_eq!(
            pending.redeem("0123456789abcdef0123456789abcdef", "web__get", &args),
            Err(StateRefused::Unknown)
        );
        let other = json!({"url": "https://evil.example"});
        assert_eq!(
            pending.redeem(&state, "web__get", &other),
            Err(StateRefused::OtherCall)
        );
        // Presented once (even wrongly), it is gone.
        assert_eq!(
            pending.redeem(&state, "web__get", &args),
            Err(StateRefused::Unknown)
        );
        let state = pending.open("web__get", &args).unwrap();
        assert_eq!(pending.redeem(&state, "web__get", &args), Ok(()));
        assert_eq!(
            pending.redeem(&state, "web__get", &args),
            Err(StateRefused::Unknown)
        );
        for _ in 0..MAX_PENDING_APPROVALS + 5 {
            pending.open("t", &args).unwrap();
        }
        assert!(pending.open.len() <= MAX_PENDING_APPROVALS);
    }
}

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
//!   the spec requires it be unforgeable and not replayable, and the retry
//!   may reach another replica of the server (`modhost mcp --http` behind a
//!   load balancer, with no shared store). So the state holds everything
//!   itself ([`ApprovalStates`]): the tool, a SHA-256 digest of the tool
//!   and its exact arguments, the caller's principal and 128 random bits
//!   (a nonce), sealed with the servers' shared key for the purpose
//!   `requestState` and an expiry of [`STATE_TTL`] (`signed.rs`). A
//!   made-up, changed, cut, padded or oversized state, one sealed with
//!   another key or for another purpose (a session id), an expired one,
//!   one re-targeted to another tool or other arguments, and one presented
//!   by another principal are refused; they never run anything.
//! - **Once per replica, and what that allows.** Each server keeps the
//!   nonces it accepted until their states expire, so a state is spent by
//!   its first presentation there (even for the wrong call). Replicas share
//!   no store, so none knows what another accepted: a captured state,
//!   answered yes, could be presented once to each of N replicas within its
//!   lifetime, and run its call up to N times. Only that call, though:
//!   the same tool with the same arguments the user saw and approved, for
//!   the same principal (a state is useless to any other caller), within
//!   [`STATE_TTL`] of the question. Issue 35 asks for scale-out with no
//!   shared store; closing this would need one (a replay set every replica
//!   writes to, or sticky routing, which a plain round-robin balancer does
//!   not give). The trade is bounded by keeping the lifetime short (five
//!   minutes, time for a person to answer one yes/no question) and is the
//!   same one a signed session id makes. A tool whose repeated call does
//!   harm should be `deny`, or `ask` with a person at a stdio client.
//! - **The record is bounded, and fails closed.** A server keeps at most
//!   [`MAX_ACCEPTED_STATES`] accepted nonces; at the bound, a new state is
//!   refused (the caller asks again later), never let in by forgetting an
//!   older nonce, which would reopen it to replay. Issuing a state holds
//!   nothing: there is no table of open questions to fill.
//! - **The user sees every byte approved.** The question shows the
//!   arguments whole; a call whose arguments are too long to show
//!   ([`MAX_SHOWN_ARGUMENTS`]) is not asked about, and says how to allow it.
//! - **Only clients that said they can answer are asked** (the
//!   `elicitation` capability, form mode: an empty object means form).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use modproto::{Id, Response};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::oneshot;

use super::revision::{AskUser, Revision};
use super::signed::{SealError, SigningKey, now_ms, random_bytes};

/// The key of the approval question in an `input_required` result.
pub(crate) const APPROVAL_KEY: &str = "approval";

/// How long a handshake client has to answer an approval question; no
/// answer by then is a no.
pub(crate) const ANSWER_TIMEOUT: Duration = Duration::from_secs(600);

/// How long a stateless client has to come back with its answer: also how
/// long a captured state could be replayed to other replicas (module docs).
pub(crate) const STATE_TTL: Duration = Duration::from_secs(300);

/// The most states one server accepted within [`STATE_TTL`] that it
/// remembers; beyond it, a new state is refused until older ones expire.
/// A state is issued only through `[quotas] elicitations_per_minute` (each
/// principal its own, 30 a minute by default at each replica), so the bound
/// is reached only by many principals at once, or with that quota lifted.
pub(crate) const MAX_ACCEPTED_STATES: usize = 16_384;

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
    /// Whether a question is still waiting for its answer.
    pub(crate) fn waiting(&self) -> bool {
        let asked = self.asked.lock().unwrap_or_else(|e| e.into_inner());
        asked.1.values().any(|sender| !sender.is_closed())
    }

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

/// The purpose a `requestState` is sealed for ([`SigningKey::seal`]): a
/// token sealed for anything else (a session id) is never one.
pub(crate) const STATE_PURPOSE: &str = "requestState";

/// Why a presented `requestState` was refused. The message goes to the
/// client: it never names another caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StateRefused {
    #[error(
        "requestState is not one this server issued (made up, changed, cut, or sealed with \
         another key or for another purpose)"
    )]
    NotOurs,
    #[error("requestState was already used on this server")]
    Reused,
    #[error("requestState expired (an approval question is open for {} s)", STATE_TTL.as_secs())]
    Expired,
    #[error("requestState was issued for another tool or other arguments")]
    OtherCall,
    #[error("requestState was issued to another caller")]
    OtherPrincipal,
    #[error(
        "this server has accepted {MAX_ACCEPTED_STATES} approvals within the last {} s, its \
         bound; call the tool again in a minute",
        STATE_TTL.as_secs()
    )]
    TooManyAccepted,
}

/// Why an approval question could not be opened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CannotAsk {
    #[error("{0}")]
    NoRandomness(#[from] std::io::Error),
    #[error("its requestState cannot be sealed: {0}")]
    Seal(#[from] SealError),
}

/// The stateless era's approval states, as one replica issues and accepts
/// them: sealed with the (shared) key, and a record of the ones this
/// replica accepted. Clones share both; one value serves every connection
/// of a server.
#[derive(Debug, Clone)]
pub(crate) struct ApprovalStates {
    key: Arc<SigningKey>,
    accepted: Arc<Mutex<Accepted>>,
    ttl: Duration,
}

impl ApprovalStates {
    /// States sealed with `key`, a fresh record of accepted ones.
    pub(crate) fn new(key: Arc<SigningKey>) -> ApprovalStates {
        ApprovalStates {
            key,
            accepted: Arc::new(Mutex::new(Accepted::new(MAX_ACCEPTED_STATES))),
            ttl: STATE_TTL,
        }
    }

    /// States only this value can accept (a key of its own): stdio, where
    /// one connection is the whole server.
    pub(crate) fn ephemeral() -> std::io::Result<ApprovalStates> {
        Ok(ApprovalStates::new(Arc::new(SigningKey::ephemeral()?)))
    }

    /// The same states with another lifetime, and a record of accepted
    /// ones bounded at `bound` (tests).
    #[cfg(test)]
    pub(crate) fn with_limits(mut self, ttl: Duration, bound: usize) -> ApprovalStates {
        self.ttl = ttl;
        self.accepted = Arc::new(Mutex::new(Accepted::new(bound)));
        self
    }

    /// The `requestState` of a question about this call of `tool` with
    /// `arguments`, asked for `principal`.
    pub(crate) fn issue(
        &self,
        tool: &str,
        arguments: &Value,
        principal: &str,
    ) -> Result<String, CannotAsk> {
        let mut nonce = [0u8; NONCE_BYTES];
        random_bytes(&mut nonce)?;
        // `call` binds the tool and arguments; `tool` is there for whoever
        // decodes a state (the client can read it all: `signed.rs`).
        let payload = json!({
            "tool": tool,
            "call": hex(&call_digest(tool, arguments)),
            "principal": principal,
            "nonce": hex(&nonce),
        });
        Ok(self.key.seal(STATE_PURPOSE, &payload, self.ttl)?)
    }

    /// Accept `state` for this call by `principal`: `Ok` only when a
    /// server with this key issued it, unchanged, not long ago, for this
    /// tool, these arguments and this principal, and this replica has not
    /// accepted it before. An authentic, live state is spent by its first
    /// presentation here, whatever the call it comes with.
    pub(crate) fn redeem(
        &self,
        state: &str,
        tool: &str,
        arguments: &Value,
        principal: &str,
    ) -> Result<(), StateRefused> {
        let (payload, expires) = match self.key.open_with_expiry(STATE_PURPOSE, state) {
            Ok(opened) => opened,
            Err(SealError::Expired { .. }) => return Err(StateRefused::Expired),
            Err(_) => return Err(StateRefused::NotOurs),
        };
        let field = |name: &str| payload.get(name).and_then(Value::as_str);
        let (Some(call), Some(issued_to), Some(nonce)) =
            (field("call"), field("principal"), field("nonce"))
        else {
            // Sealed by us in another format (another modhost version).
            return Err(StateRefused::NotOurs);
        };
        let nonce = unhex(nonce).ok_or(StateRefused::NotOurs)?;
        // Kept until the state's own expiry, after which any presentation
        // is refused as expired (by this replica's clock, both).
        self.accepted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .admit(nonce, expires, now_ms())?;
        if call != hex(&call_digest(tool, arguments)) {
            return Err(StateRefused::OtherCall);
        }
        if issued_to != principal {
            return Err(StateRefused::OtherPrincipal);
        }
        Ok(())
    }
}

/// Random bytes in a state's nonce.
const NONCE_BYTES: usize = 16;

/// The nonces a replica accepted, each kept until its state could no
/// longer be accepted anyway.
#[derive(Debug)]
struct Accepted {
    nonces: HashSet<[u8; NONCE_BYTES]>,
    by_expiry: BTreeSet<(u64, [u8; NONCE_BYTES])>,
    bound: usize,
}

impl Accepted {
    fn new(bound: usize) -> Accepted {
        Accepted {
            nonces: HashSet::new(),
            by_expiry: BTreeSet::new(),
            bound,
        }
    }

    /// Record `nonce` (forgotten at `expires`), unless it is recorded
    /// already or the record is full.
    fn admit(
        &mut self,
        nonce: [u8; NONCE_BYTES],
        expires: u64,
        now: u64,
    ) -> Result<(), StateRefused> {
        while let Some(&(at, old)) = self.by_expiry.first()
            && at <= now
        {
            self.by_expiry.pop_first();
            self.nonces.remove(&old);
        }
        if self.nonces.contains(&nonce) {
            return Err(StateRefused::Reused);
        }
        // Full: refused, never evicted (an evicted nonce could be replayed).
        if self.nonces.len() >= self.bound {
            return Err(StateRefused::TooManyAccepted);
        }
        self.nonces.insert(nonce);
        self.by_expiry.insert((expires, nonce));
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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The nonce written by [`hex`].
fn unhex(text: &str) -> Option<[u8; NONCE_BYTES]> {
    let mut out = [0u8; NONCE_BYTES];
    if text.len() != NONCE_BYTES * 2 {
        return None;
    }
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
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
        let states = ApprovalStates::ephemeral().unwrap();
        let (me, args) = ("local:me", json!({"url": "https://example.org"}));
        let state = states.issue("web__get", &args, me).unwrap();
        assert_eq!(
            states.redeem("0123456789abcdef0123456789abcdef", "web__get", &args, me),
            Err(StateRefused::NotOurs)
        );
        let other = json!({"url": "https://evil.example"});
        assert_eq!(
            states.redeem(&state, "web__get", &other, me),
            Err(StateRefused::OtherCall)
        );
        // Presented once (even wrongly), it is spent here.
        assert_eq!(
            states.redeem(&state, "web__get", &args, me),
            Err(StateRefused::Reused)
        );
        let state = states.issue("web__get", &args, me).unwrap();
        assert_eq!(states.redeem(&state, "web__get", &args, me), Ok(()));
        assert_eq!(
            states.redeem(&state, "web__get", &args, me),
            Err(StateRefused::Reused)
        );
        // Another tool, the same arguments: another call.
        let state = states.issue("web__get", &args, me).unwrap();
        assert_eq!(
            states.redeem(&state, "web__post", &args, me),
            Err(StateRefused::OtherCall)
        );
    }

    #[test]
    fn a_state_issued_to_one_principal_is_refused_to_another() {
        let states = ApprovalStates::ephemeral().unwrap();
        let args = json!({});
        let state = states.issue("t", &args, "alice").unwrap();
        assert_eq!(
            states.redeem(&state, "t", &args, "mallory"),
            Err(StateRefused::OtherPrincipal)
        );
        // The refusal never names whom it was issued to.
        assert!(!StateRefused::OtherPrincipal.to_string().contains("alice"));
    }

    #[test]
    fn replicas_sharing_a_key_accept_a_state_once_each_and_others_never() {
        let key = Arc::new(SigningKey::ephemeral().unwrap());
        let (a, b) = (
            ApprovalStates::new(Arc::clone(&key)),
            ApprovalStates::new(Arc::clone(&key)),
        );
        let stranger = ApprovalStates::ephemeral().unwrap();
        let args = json!({"n": 1});
        let state = a.issue("t", &args, "p").unwrap();
        assert_eq!(
            stranger.redeem(&state, "t", &args, "p"),
            Err(StateRefused::NotOurs)
        );
        assert_eq!(b.redeem(&state, "t", &args, "p"), Ok(()));
        assert_eq!(b.redeem(&state, "t", &args, "p"), Err(StateRefused::Reused));
        // The documented bound: once more at each other replica, no more.
        assert_eq!(a.redeem(&state, "t", &args, "p"), Ok(()));
        assert_eq!(a.redeem(&state, "t", &args, "p"), Err(StateRefused::Reused));
        // A clone is the same replica (one server's connections).
        assert_eq!(
            a.clone().redeem(&state, "t", &args, "p"),
            Err(StateRefused::Reused)
        );
        // A session token of the same key is not a requestState.
        let session = key
            .seal("session", &json!({"principal": "p"}), STATE_TTL)
            .unwrap();
        assert_eq!(
            b.redeem(&session, "t", &args, "p"),
            Err(StateRefused::NotOurs)
        );
    }

    #[test]
    fn the_record_of_accepted_states_is_bounded_fails_closed_and_forgets_only_the_expired() {
        let ttl = Duration::from_millis(300);
        let states = ApprovalStates::ephemeral().unwrap().with_limits(ttl, 3);
        let args = json!({});
        let issued: Vec<String> = (0..5)
            .map(|_| states.issue("t", &args, "p").unwrap())
            .collect();
        for state in &issued[..3] {
            assert_eq!(states.redeem(state, "t", &args, "p"), Ok(()));
        }
        // Full: a fourth is refused, not let in by forgetting the first.
        assert_eq!(
            states.redeem(&issued[3], "t", &args, "p"),
            Err(StateRefused::TooManyAccepted)
        );
        assert_eq!(
            states.redeem(&issued[0], "t", &args, "p"),
            Err(StateRefused::Reused)
        );
        // Once the accepted ones expired, they are forgotten (and refused
        // as expired), and there is room again for a fresh state.
        std::thread::sleep(ttl + Duration::from_millis(50));
        assert_eq!(
            states.redeem(&issued[0], "t", &args, "p"),
            Err(StateRefused::Expired)
        );
        let fresh = states.issue("t", &args, "p").unwrap();
        assert_eq!(states.redeem(&fresh, "t", &args, "p"), Ok(()));
        let accepted = states.accepted.lock().unwrap();
        assert_eq!(accepted.nonces.len(), 1);
        assert_eq!(accepted.by_expiry.len(), 1);
    }
}

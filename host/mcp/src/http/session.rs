//! The handshake era's `Mcp-Session-Id` over HTTP: a sealed, self-contained
//! token (`signed.rs`, purpose `session`) rather than a key into memory, so
//! that any replica holding the signing key continues a session another
//! one began.
//!
//! Design decisions:
//!
//! - **It holds what serving the session needs, and no more:** the revision
//!   `initialize` negotiated, whether the client can answer a form
//!   question (the only client capability the server acts on over HTTP),
//!   the principal it was issued to, and a random nonce that tells two
//!   sessions apart (the replica-local state of `replica.rs` is keyed by
//!   it). The client can read it all; it is the client's own.
//! - **Bound to its principal.** A request bearing a session id is served
//!   only when its own credentials name the principal the session was
//!   issued to; otherwise it is answered as for an unknown session (404),
//!   which tells nothing about whose it is.
//! - **Expiring, never revoked.** A session lives [`SESSION_TTL`]; then,
//!   as for any unknown session, the answer is 404 and the client starts a
//!   new one (the transport's rule). `DELETE` cannot end a session on every
//!   replica without a shared store, so it is answered 405, which the
//!   transport allows ("the server does not allow clients to terminate
//!   sessions").

use std::time::Duration;

use serde_json::{Value, json};

use crate::elicitation::client_can_answer;
use crate::revision::{self, Era, Revision};
use crate::server::Session;
use crate::signed::{SealError, SigningKey, random_bytes};

/// The purpose a session id is sealed for: never an approval state.
pub(crate) const SESSION_PURPOSE: &str = "session";

/// How long a session id is honored after `initialize`.
pub(crate) const SESSION_TTL: Duration = Duration::from_secs(24 * 3600);

/// The header carrying the session id.
pub(crate) const SESSION_HEADER: &str = "mcp-session-id";

/// What a session id says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SessionState {
    pub(crate) revision: &'static Revision,
    /// The client declared form elicitation in `initialize`.
    pub(crate) can_answer: bool,
    /// Whom the session was issued to.
    pub(crate) principal: String,
    /// Random, unique per `initialize`: the key of this replica's state
    /// for the session.
    pub(crate) nonce: String,
}

/// Why a session id is not honored.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionRefused {
    #[error("this server issued no such session (or not with its signing key)")]
    Unknown,
    #[error("the session expired; start a new one with initialize")]
    Expired,
}

/// Why a session could not be started.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CannotStart {
    #[error("no randomness for the session id: {0}")]
    Random(#[from] std::io::Error),
    #[error("the session id cannot be sealed: {0}")]
    Seal(#[from] SealError),
}

impl SessionState {
    /// The session `initialize` starts for `principal`, and its id.
    pub(crate) fn start(
        key: &SigningKey,
        revision: &'static Revision,
        capabilities: &Value,
        principal: &str,
    ) -> Result<(String, SessionState), CannotStart> {
        let mut nonce = [0u8; 16];
        random_bytes(&mut nonce)?;
        let state = SessionState {
            revision,
            can_answer: client_can_answer(Some(capabilities)),
            principal: principal.to_owned(),
            nonce: nonce.iter().map(|b| format!("{b:02x}")).collect(),
        };
        let payload = json!({
            "revision": state.revision.version,
            "elicitation": state.can_answer,
            "principal": state.principal,
            "nonce": state.nonce,
        });
        let id = key.seal(SESSION_PURPOSE, &payload, SESSION_TTL)?;
        Ok((id, state))
    }

    /// The session `id` names, when this server's key sealed it and it
    /// has not expired.
    pub(crate) fn resume(key: &SigningKey, id: &str) -> Result<SessionState, SessionRefused> {
        let payload = key.open(SESSION_PURPOSE, id).map_err(|e| match e {
            SealError::Expired { .. } => SessionRefused::Expired,
            _ => SessionRefused::Unknown,
        })?;
        let text = |name: &str| payload.get(name).and_then(Value::as_str);
        let revision = text("revision")
            .and_then(revision::find)
            .filter(|r| r.era == Era::Handshake)
            .ok_or(SessionRefused::Unknown)?;
        let (Some(principal), Some(nonce), Some(can_answer)) = (
            text("principal"),
            text("nonce"),
            payload.get("elicitation").and_then(Value::as_bool),
        ) else {
            return Err(SessionRefused::Unknown);
        };
        Ok(SessionState {
            revision,
            can_answer,
            principal: principal.to_owned(),
            nonce: nonce.to_owned(),
        })
    }

    /// The server loop's view of the session; `can_ask` is false when this
    /// request's response cannot carry a question (no SSE).
    pub(crate) fn session(&self, can_ask: bool) -> Session {
        let capabilities = if self.can_answer && can_ask {
            json!({"elicitation": {"form": {}}})
        } else {
            json!({})
        };
        Session {
            revision: Some(self.revision),
            capabilities,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_id_resumes_with_its_key_and_nowhere_else() {
        let key = SigningKey::ephemeral().unwrap();
        let revision = revision::find("2025-11-25").unwrap();
        let caps = json!({"elicitation": {}, "roots": {"listChanged": true}});
        let (id, started) = SessionState::start(&key, revision, &caps, "ci-bot").unwrap();
        assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)), "{id}");
        let resumed = SessionState::resume(&key, &id).unwrap();
        assert_eq!(resumed, started);
        assert!(resumed.can_answer);
        assert_eq!(
            resumed.session(true).capabilities,
            json!({"elicitation": {"form": {}}})
        );
        assert_eq!(resumed.session(false).capabilities, json!({}));
        let (other, _) = SessionState::start(&key, revision, &caps, "ci-bot").unwrap();
        assert_ne!(
            SessionState::resume(&key, &other).unwrap().nonce,
            started.nonce
        );
        let stranger = SigningKey::ephemeral().unwrap();
        assert!(matches!(
            SessionState::resume(&stranger, &id),
            Err(SessionRefused::Unknown)
        ));
        let mut changed = id.clone();
        changed.insert(3, 'A');
        assert!(SessionState::resume(&key, &changed).is_err());
        // An approval state is never a session.
        let state = key
            .seal(
                "requestState",
                &json!({"revision": "2025-11-25"}),
                SESSION_TTL,
            )
            .unwrap();
        assert!(SessionState::resume(&key, &state).is_err());
    }
}

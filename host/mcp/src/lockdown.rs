//! One connection's lockdown (`modhost::lockdown`): entered when a result
//! of untrusted content was returned on it, kept until it ends.
//!
//! Design decisions:
//!
//! - **Entered before the result is sent.** The call's task records the
//!   lockdown its outcome starts ([`ToolOutcome::enters_lockdown`]), then
//!   writes the response: a call the client sends after reading that result
//!   is read after the record, so it is in lockdown. A call already
//!   running, or received before the result went out, was decided before
//!   the agent could have read the content, and keeps what it had.
//! - **The connection's, whatever the era.** A stateless request relies on
//!   no connection state to be served, but a lockdown is a restriction,
//!   not state it relies on: its `_meta` naming another revision does not
//!   lift it (as a withheld workspace is not given back either). A second
//!   connection (another `serve`) starts clean.
//! - **Visible.** One log line when the connection enters it, naming the
//!   tool; from then on every `tools/call` result, the one that started it
//!   included, carries `_meta["dev.modhost/lockdown"]` ([`meta`]).
//!
//! [`ToolOutcome::enters_lockdown`]: modhost::tools::ToolOutcome::enters_lockdown

use std::sync::Mutex;

use modhost::tools::Lockdown;
use serde_json::{Value, json};

/// The result `_meta` key of a connection's lockdown:
/// `{"active": true, "since": "<tool>"}`.
pub(crate) const META_LOCKDOWN: &str = "dev.modhost/lockdown";

/// Whether a connection is in lockdown, and since which tool.
#[derive(Debug, Default)]
pub(crate) struct ConnectionLockdown {
    entered: Mutex<Option<Lockdown>>,
    /// The connection's `session` MCP server processes
    /// (`modhost::SessionScope`), retired when the lockdown is entered: each
    /// was started with grants from before it.
    sessions: Option<modhost::SessionScope>,
}

impl ConnectionLockdown {
    /// The lockdown of a connection whose `session` MCP server processes
    /// live in `sessions`.
    pub(crate) fn with_sessions(sessions: modhost::SessionScope) -> ConnectionLockdown {
        ConnectionLockdown {
            entered: Mutex::default(),
            sessions: Some(sessions),
        }
    }

    /// The lockdown the connection is in, if any.
    pub(crate) fn current(&self) -> Option<Lockdown> {
        self.entered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Enter `lockdown`, unless the connection is in one already (the
    /// first one stays: it names the tool that started it).
    pub(crate) fn enter(&self, lockdown: Lockdown) {
        let mut entered = self.entered.lock().unwrap_or_else(|e| e.into_inner());
        if entered.is_some() {
            return;
        }
        tracing::warn!(
            "lockdown: {} returned untrusted content, so for the rest of this connection its calls reach only the [lockdown] allowed_hosts of config.toml, and tools that write or run programs run only after the user approves each call",
            lockdown.since
        );
        *entered = Some(lockdown);
        drop(entered);
        if let Some(sessions) = &self.sessions {
            sessions.retire_processes();
        }
    }
}

/// The `_meta` member of a result on a connection in `lockdown`.
pub(crate) fn meta(lockdown: &Lockdown) -> Value {
    json!({"active": true, "since": lockdown.since})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_lockdown_stays() {
        let state = ConnectionLockdown::default();
        assert_eq!(state.current(), None);
        state.enter(Lockdown {
            since: "web__get".into(),
        });
        state.enter(Lockdown {
            since: "mail__read".into(),
        });
        let current = state.current().expect("in lockdown");
        assert_eq!(current.since, "web__get");
        assert_eq!(meta(&current), json!({"active": true, "since": "web__get"}));
    }
}

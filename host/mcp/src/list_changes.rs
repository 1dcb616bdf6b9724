//! Announcing that the tool list changed, in each era's own way.
//!
//! Design decisions:
//!
//! - **The backend says when; this file says to whom.** The backend's
//!   [`super::Backend::tool_list_changes`] watch is bumped by whoever
//!   notices a change (the host's install, disable, pin, config edits); one
//!   task waits on it for the whole connection and, on each bump, sends one
//!   line to each listener that exists at that moment.
//! - **Handshake revisions:** the server declared `listChanged: true` in
//!   `initialize` (only when a watch exists), and the client becomes a
//!   listener once it sent `notifications/initialized`: nothing is announced
//!   before the handshake is done.
//! - **2026-07-28:** `notifications/tools/list_changed` goes only on a
//!   `subscriptions/listen` stream that asked for `toolsListChanged` and was
//!   acknowledged with it, tagged with that stream's id; the stream ends when
//!   the client cancels it, or with a closing result when the server stops.
//!   List results also carry `ttlMs` (`protocol::TTL_MS_LIVE` when the list
//!   can change), for clients that poll instead.
//! - **Bounded:** at most [`MAX_SUBSCRIPTIONS`] open streams per client;
//!   coalescing is the watch's (bumps while a send waits become one).

use std::sync::{Arc, Mutex};

use modproto::{Id, Message, Notification};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::protocol::{self, META_SUBSCRIPTION_ID};
use super::revision::Revision;

/// The most `subscriptions/listen` streams one client may hold open.
pub(crate) const MAX_SUBSCRIPTIONS: usize = 16;

/// Who hears about a change right now.
#[derive(Debug, Default)]
pub(crate) struct Listeners {
    /// A handshake client that finished its handshake, told `listChanged: true`.
    pub handshake: bool,
    /// Open `subscriptions/listen` streams: their request id and whether
    /// the tool list is among what was acknowledged.
    pub subscriptions: Vec<(Id, bool)>,
}

pub(crate) type SharedListeners = Arc<Mutex<Listeners>>;

impl Listeners {
    /// One line per listener for one change.
    fn announcements(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if self.handshake {
            lines.push(
                Message::Notification(Notification::new("notifications/tools/list_changed", None))
                    .to_line(),
            );
        }
        for (id, _) in self.subscriptions.iter().filter(|(_, tools)| *tools) {
            lines.push(on_stream(id, "notifications/tools/list_changed", json!({})));
        }
        lines
    }

    /// Forget the stream `id`; whether it was one.
    pub(crate) fn close(&mut self, id: &Id) -> bool {
        let before = self.subscriptions.len();
        self.subscriptions.retain(|(open, _)| open != id);
        self.subscriptions.len() != before
    }
}

/// A notification on stream `id`: `params` with the stream's id in `_meta`.
fn on_stream(id: &Id, method: &str, mut params: Value) -> String {
    params["_meta"] = json!({ META_SUBSCRIPTION_ID: id });
    Message::Notification(Notification::new(method, Some(params))).to_line()
}

/// The acknowledgment that opens stream `id`, honoring the tool list when
/// `tools`.
pub(crate) fn acknowledgment(id: &Id, tools: bool) -> String {
    let notifications = if tools {
        json!({"toolsListChanged": true})
    } else {
        json!({})
    };
    on_stream(
        id,
        "notifications/subscriptions/acknowledged",
        json!({ "notifications": notifications }),
    )
}

/// The result that closes stream `id` gracefully (the server is stopping).
pub(crate) fn closing_result(revision: &Revision, id: &Id) -> Value {
    protocol::stamp(revision, json!({"_meta": { META_SUBSCRIPTION_ID: id }}))
}

/// Announce every change of `changes` to the listeners of the moment, until
/// the watch's sender goes or the task is aborted.
pub(crate) fn announce(
    mut changes: watch::Receiver<u64>,
    listeners: SharedListeners,
    outbox: mpsc::Sender<String>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            let lines = listeners
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .announcements();
            for line in lines {
                if outbox.send(line).await.is_err() {
                    return;
                }
            }
        }
    })
}

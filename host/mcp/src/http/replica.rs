//! What one replica remembers about a handshake session between its
//! requests: the questions it asked the session's client and awaits
//! answers to, the calls it runs for the session (so that a
//! `notifications/cancelled` can stop one), and the session's lockdown.
//!
//! Design decisions:
//!
//! - **Only what cannot travel in the session id.** The id is sealed once,
//!   at `initialize`; whatever happens later in a session (a question
//!   asked, a call started, untrusted content returned) lives here, in the
//!   replica that saw it. So, behind a load balancer, the handshake era's
//!   server-to-client questions (elicitation for an `ask` tool) and its
//!   cancellations need session affinity (the answer or the cancellation
//!   must reach the replica that asked or runs the call); the 2026-07-28
//!   era needs none (its approval is an `input_required` result with a
//!   sealed state, and closing the stream is its cancellation). A
//!   session's lockdown holds in the replica that returned the untrusted
//!   content; another replica serving the same session does not know it.
//! - **Bounded per principal and overall, and one principal's sessions
//!   never push out another's.** A principal keeps at most
//!   [`MAX_SESSIONS_PER_PRINCIPAL`] sessions here, all principals together
//!   [`MAX_SESSIONS`]. Past a bound, the session unused longest that holds
//!   nothing is forgotten: of the same principal, or (the table being full)
//!   of the principal holding the most. A session that holds something (it
//!   is in lockdown, a question of it is open, a call of it runs, or a
//!   request of it is being served) is never forgotten before its id
//!   expires ([`SESSION_TTL`]): forgetting would lift its lockdown, lose
//!   the question and make its calls uncancellable. When nothing can be
//!   forgotten, the new session is refused (503, `Retry-After`,
//!   [`Full`]).
//! - **A forgotten session does not come back.** Its nonce is remembered
//!   (bounded, [`MAX_FORGOTTEN`]), and a later request of it is answered
//!   404 ([`Forgotten`]): the client starts a new session, knowing state
//!   was lost, rather than going on in one that silently lost it. (What is
//!   forgotten held nothing, so even a nonce that fell out of that bound
//!   comes back with no less than it had.)
//! - **A request id is one call at a time.** A `tools/call` reserves its
//!   id in the session ([`SessionLocal::reserve`]) before it is served; a
//!   second call with an id still running is refused (-32600, as stdio
//!   does), so `notifications/cancelled` naming it stops the one call.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use modproto::Id;
use tokio::task::AbortHandle;

use super::session::SESSION_TTL;
use crate::elicitation::Questions;
use crate::lockdown::ConnectionLockdown;

/// The most sessions one replica remembers.
pub(crate) const MAX_SESSIONS: usize = 10_000;

/// The most sessions one replica remembers for one principal.
pub(crate) const MAX_SESSIONS_PER_PRINCIPAL: usize = 2_000;

/// The most forgotten sessions remembered as forgotten.
pub(crate) const MAX_FORGOTTEN: usize = 4 * MAX_SESSIONS;

/// A call of the session, by its request id.
#[derive(Debug)]
struct RunningCall {
    /// Which reservation this is (a stale guard releases nothing else).
    serial: u64,
    /// Its task, once it runs.
    handle: Option<AbortHandle>,
    /// Cancelled before its task was known: stopped as soon as it is.
    cancelled: bool,
}

/// One session, as this replica knows it.
#[derive(Debug, Default)]
pub(crate) struct SessionLocal {
    /// Server-to-client questions awaiting the client's answer.
    pub(crate) questions: Arc<Questions>,
    pub(crate) lockdown: Arc<ConnectionLockdown>,
    /// The calls running for the session, by request id.
    running: Mutex<HashMap<Id, RunningCall>>,
    serials: AtomicU64,
}

/// A request id reserved for one call of a session; released when dropped
/// unless the call started (its end releases it then).
#[derive(Debug)]
pub(crate) struct Reserved {
    local: Arc<SessionLocal>,
    id: Id,
    serial: u64,
}

impl Drop for Reserved {
    fn drop(&mut self) {
        let mut running = self.local.running();
        if running
            .get(&self.id)
            .is_some_and(|call| call.serial == self.serial && call.handle.is_none())
        {
            running.remove(&self.id);
        }
    }
}

impl SessionLocal {
    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<Id, RunningCall>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reserve request `id` for a call; `None` while a call of that id
    /// runs (or is about to).
    pub(crate) fn reserve(self: &Arc<Self>, id: &Id) -> Option<Reserved> {
        let mut running = self.running();
        running.retain(|_, call| !call.handle.as_ref().is_some_and(AbortHandle::is_finished));
        if running.contains_key(id) {
            return None;
        }
        let serial = self.serials.fetch_add(1, Ordering::Relaxed);
        running.insert(
            id.clone(),
            RunningCall {
                serial,
                handle: None,
                cancelled: false,
            },
        );
        Some(Reserved {
            local: Arc::clone(self),
            id: id.clone(),
            serial,
        })
    }

    /// Remember the call of request `id`, to stop it on cancellation.
    pub(crate) fn started(&self, id: Id, call: AbortHandle) {
        let mut running = self.running();
        running.retain(|_, call| !call.handle.as_ref().is_some_and(AbortHandle::is_finished));
        let entry = running.entry(id).or_insert_with(|| RunningCall {
            serial: self.serials.fetch_add(1, Ordering::Relaxed),
            handle: None,
            cancelled: false,
        });
        if entry.cancelled {
            call.abort();
        }
        entry.handle = Some(call);
    }

    /// Forget the call of request `id` (it ended).
    pub(crate) fn ended(&self, id: &Id) {
        self.running().remove(id);
    }

    /// Stop the call of request `id`, if it runs here; whether one did.
    pub(crate) fn cancel(&self, id: &Id) -> bool {
        let mut running = self.running();
        match running.get_mut(id) {
            Some(RunningCall {
                handle: Some(handle),
                ..
            }) => {
                handle.abort();
                running.remove(id);
                true
            }
            Some(reserved) => {
                reserved.cancelled = true;
                true
            }
            None => false,
        }
    }

    /// Whether forgetting the session would lose something: its lockdown,
    /// an open question or a running call.
    fn holds_something(&self) -> bool {
        self.lockdown.current().is_some()
            || self.questions.waiting()
            || self
                .running()
                .values()
                .any(|call| !call.handle.as_ref().is_some_and(AbortHandle::is_finished))
    }
}

/// Why a session's state is not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Unavailable {
    /// Every session remembered holds something: none can make room.
    #[error(
        "this server remembers as many handshake sessions as it may ({0} for one caller, \
         {MAX_SESSIONS} in all), each of them in lockdown, waiting for an answer or running a \
         call; try again in a moment, or use MCP 2026-07-28, which needs no session"
    )]
    Full(usize),
    /// The session was forgotten here to make room.
    #[error(
        "this server forgot the session to make room for others (it was idle and held nothing)"
    )]
    Forgotten,
}

pub(crate) use Unavailable::{Forgotten, Full};

#[derive(Debug)]
struct Entry {
    local: Arc<SessionLocal>,
    used: Instant,
}

impl Entry {
    /// Whether the entry may be forgotten at `now`.
    fn forgettable(&self, now: Instant) -> bool {
        // A session unused for its whole lifetime has expired: its id is
        // honored nowhere.
        now.duration_since(self.used) >= SESSION_TTL
            || (Arc::strong_count(&self.local) == 1 && !self.local.holds_something())
    }
}

#[derive(Debug, Default)]
struct Table {
    /// principal -> nonce -> entry.
    by_principal: HashMap<String, HashMap<String, Entry>>,
    total: usize,
    forgotten: HashSet<String>,
    forgotten_order: VecDeque<String>,
}

impl Table {
    /// Forget the oldest forgettable session of `principal`; whether one was.
    fn forget_one_of(&mut self, principal: &str, now: Instant) -> bool {
        let Some(sessions) = self.by_principal.get_mut(principal) else {
            return false;
        };
        let Some(oldest) = sessions
            .iter()
            .filter(|(_, entry)| entry.forgettable(now))
            .min_by_key(|(_, entry)| entry.used)
            .map(|(nonce, _)| nonce.clone())
        else {
            return false;
        };
        sessions.remove(&oldest);
        if sessions.is_empty() {
            self.by_principal.remove(principal);
        }
        self.total -= 1;
        if self.forgotten.insert(oldest.clone()) {
            self.forgotten_order.push_back(oldest);
        }
        while self.forgotten_order.len() > MAX_FORGOTTEN {
            if let Some(old) = self.forgotten_order.pop_front() {
                self.forgotten.remove(&old);
            }
        }
        true
    }

    /// Forget one session of whoever holds the most; whether one was.
    fn forget_one(&mut self, now: Instant) -> bool {
        let mut holders: Vec<(usize, String)> = self
            .by_principal
            .iter()
            .map(|(principal, sessions)| (sessions.len(), principal.clone()))
            .collect();
        holders.sort_unstable_by_key(|holder| std::cmp::Reverse(holder.0));
        holders
            .into_iter()
            .any(|(_, principal)| self.forget_one_of(&principal, now))
    }
}

/// Every session this replica remembers, by principal and the nonce of
/// its id.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    table: Mutex<Table>,
}

impl Sessions {
    /// The state of `principal`'s session `nonce`, made on first use.
    pub(crate) fn get(
        &self,
        principal: &str,
        nonce: &str,
    ) -> Result<Arc<SessionLocal>, Unavailable> {
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if let Some(entry) = table
            .by_principal
            .get_mut(principal)
            .and_then(|sessions| sessions.get_mut(nonce))
        {
            entry.used = now;
            return Ok(Arc::clone(&entry.local));
        }
        if table.forgotten.contains(nonce) {
            return Err(Forgotten);
        }
        let held = table.by_principal.get(principal).map_or(0, HashMap::len);
        if held >= MAX_SESSIONS_PER_PRINCIPAL && !table.forget_one_of(principal, now) {
            return Err(Full(MAX_SESSIONS_PER_PRINCIPAL));
        }
        if table.total >= MAX_SESSIONS && !table.forget_one(now) {
            return Err(Full(MAX_SESSIONS_PER_PRINCIPAL));
        }
        let local = Arc::new(SessionLocal::default());
        table
            .by_principal
            .entry(principal.to_owned())
            .or_default()
            .insert(
                nonce.to_owned(),
                Entry {
                    local: Arc::clone(&local),
                    used: now,
                },
            );
        table.total += 1;
        Ok(local)
    }

    /// How many sessions are remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.table.lock().unwrap_or_else(|e| e.into_inner()).total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use modhost::tools::Lockdown;

    #[tokio::test]
    async fn a_cancellation_stops_the_sessions_call_and_only_it() {
        let local = Sessions::default().get("p", "a").unwrap();
        let call = tokio::spawn(std::future::pending::<()>());
        let other = tokio::spawn(std::future::pending::<()>());
        local.started(Id::Num(1), call.abort_handle());
        local.started(Id::Num(2), other.abort_handle());
        assert!(local.cancel(&Id::Num(1)));
        assert!(call.await.unwrap_err().is_cancelled());
        assert!(!local.cancel(&Id::Num(1)), "a call is cancelled once");
        assert!(!other.is_finished());
        local.ended(&Id::Num(2));
        assert!(!local.cancel(&Id::Num(2)));
        other.abort();
    }

    #[tokio::test]
    async fn a_request_id_is_one_call_at_a_time() {
        let local = Sessions::default().get("p", "a").unwrap();
        let id = Id::Str("dup".into());
        let reserved = local.reserve(&id).expect("free");
        assert!(local.reserve(&id).is_none(), "in use while reserved");
        // A reservation whose call never started is released with it.
        drop(reserved);
        let reserved = local.reserve(&id).expect("free again");
        let call = tokio::spawn(std::future::pending::<()>());
        local.started(id.clone(), call.abort_handle());
        drop(reserved);
        assert!(local.reserve(&id).is_none(), "in use while it runs");
        assert!(local.holds_something());
        assert!(local.cancel(&id));
        assert!(call.await.unwrap_err().is_cancelled());
        assert!(local.reserve(&id).is_some(), "free once it ended");
        // Cancelled before its task was known: stopped when it is.
        let early = local.reserve(&Id::Num(9)).unwrap();
        assert!(local.cancel(&Id::Num(9)));
        let call = tokio::spawn(std::future::pending::<()>());
        local.started(Id::Num(9), call.abort_handle());
        assert!(call.await.unwrap_err().is_cancelled());
        drop(early);
    }

    #[test]
    fn a_principals_flood_forgets_only_its_own_idle_sessions() {
        let sessions = Sessions::default();
        let locked = sessions.get("alice", "locked").unwrap();
        locked.lockdown.enter(Lockdown {
            since: "net__fetch".into(),
        });
        drop(locked);
        let idle = sessions.get("alice", "idle").unwrap();
        drop(idle);
        for n in 0..MAX_SESSIONS_PER_PRINCIPAL + 10 {
            sessions.get("bob", &n.to_string()).unwrap();
        }
        assert_eq!(sessions.len(), MAX_SESSIONS_PER_PRINCIPAL + 2);
        let locked = sessions.get("alice", "locked").unwrap();
        assert!(locked.lockdown.current().is_some(), "still in lockdown");
        assert!(sessions.get("alice", "idle").is_ok(), "alice's idle kept");
        // Bob's oldest were forgotten, and stay forgotten.
        let forgotten = (0..MAX_SESSIONS_PER_PRINCIPAL + 10)
            .filter(|n| matches!(sessions.get("bob", &n.to_string()), Err(Forgotten)))
            .count();
        assert_eq!(forgotten, 10);
        assert_eq!(sessions.len(), MAX_SESSIONS_PER_PRINCIPAL + 2);
    }

    #[test]
    fn sessions_that_hold_something_are_never_forgotten_and_then_new_ones_wait() {
        let sessions = Sessions::default();
        let mut held = Vec::new();
        for n in 0..MAX_SESSIONS_PER_PRINCIPAL {
            let local = sessions.get("alice", &n.to_string()).unwrap();
            local.lockdown.enter(Lockdown {
                since: "net__fetch".into(),
            });
            held.push(local);
        }
        drop(held);
        assert_eq!(
            sessions.get("alice", "one more").unwrap_err(),
            Full(MAX_SESSIONS_PER_PRINCIPAL)
        );
        for n in 0..MAX_SESSIONS_PER_PRINCIPAL {
            let local = sessions.get("alice", &n.to_string()).unwrap();
            assert!(local.lockdown.current().is_some());
        }
        // Another principal is not refused for alice's sessions.
        assert!(sessions.get("bob", "b").is_ok());
    }

    #[test]
    fn the_whole_table_is_bounded_and_the_biggest_holder_gives_way() {
        let sessions = Sessions::default();
        let per = MAX_SESSIONS_PER_PRINCIPAL;
        let principals = MAX_SESSIONS / per;
        for p in 0..principals {
            for n in 0..per {
                sessions.get(&format!("p{p}"), &format!("{p}-{n}")).unwrap();
            }
        }
        assert_eq!(sessions.len(), MAX_SESSIONS);
        sessions.get("newcomer", "x").unwrap();
        assert_eq!(sessions.len(), MAX_SESSIONS);
    }
}

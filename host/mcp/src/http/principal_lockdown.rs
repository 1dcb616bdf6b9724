//! The lockdown of a principal's 2026-07-28 requests on this server.
//!
//! Over stdio a lockdown is the connection's: once untrusted content
//! reached it, its later calls are narrowed. Over HTTP in 2026-07-28 every
//! request is a connection of its own, so a connection's lockdown would
//! never narrow the next request. Here the principal stands for the
//! connection: its stateless requests share one [`ConnectionLockdown`],
//! entered when one of them returns untrusted content, as a connection's
//! is, and applied to its later stateless requests on this server.
//!
//! Design decisions:
//!
//! - **This server's, not the cluster's.** With no shared store, another
//!   replica does not know this one's lockdown: a principal's request
//!   balanced to another replica runs as that replica knows it. Operators
//!   who need it everywhere pin a principal to a replica (affinity on the
//!   credential) or run one replica.
//! - **Idle for [`IDLE_EXPIRY`], then lifted.** A principal whose requests
//!   stop for an hour starts clean at its next one, as a new stdio
//!   connection does: an agent's task is long over by then, and a
//!   lockdown that never ends would push callers to new credentials. A
//!   principal whose requests keep coming stays in lockdown.
//! - **Bounded without lifting.** At most [`MAX_PRINCIPALS`] principals
//!   are remembered. A principal not in lockdown and with no request being
//!   served holds nothing and is forgotten first (and when idle); one in
//!   lockdown is kept until it expires. When every entry is in use or in
//!   lockdown, a new principal's request is refused (503, `Retry-After`)
//!   rather than any lockdown lifted. Principals are authenticated callers
//!   (each needs a token the operator issued or a valid OAuth token), so
//!   the bound is far beyond what a deployment has.
//! - **Handshake sessions keep their own** (`replica.rs`): a session is
//!   the connection there, as on stdio.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::lockdown::ConnectionLockdown;

/// How long a principal's lockdown outlives its last request.
pub(crate) const IDLE_EXPIRY: Duration = Duration::from_secs(3600);

/// The most principals one server remembers.
pub(crate) const MAX_PRINCIPALS: usize = 100_000;

/// Every principal's shared lockdown is in use or active.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "this server follows the lockdown of as many callers as it may ({MAX_PRINCIPALS}); try again \
     in a moment"
)]
pub(crate) struct TooManyPrincipals;

#[derive(Debug)]
struct Entry {
    lockdown: Arc<ConnectionLockdown>,
    used: Instant,
}

impl Entry {
    fn expired(&self, now: Instant) -> bool {
        Arc::strong_count(&self.lockdown) == 1 && now.duration_since(self.used) >= IDLE_EXPIRY
    }

    fn holds_nothing(&self) -> bool {
        Arc::strong_count(&self.lockdown) == 1 && self.lockdown.current().is_none()
    }
}

/// The lockdown of each principal's stateless requests.
#[derive(Debug, Default)]
pub(crate) struct PrincipalLockdowns {
    known: Mutex<HashMap<String, Entry>>,
}

impl PrincipalLockdowns {
    /// The lockdown `principal`'s next stateless request is served under.
    pub(crate) fn of(&self, principal: &str) -> Result<Arc<ConnectionLockdown>, TooManyPrincipals> {
        self.at(principal, Instant::now())
    }

    fn at(
        &self,
        principal: &str,
        now: Instant,
    ) -> Result<Arc<ConnectionLockdown>, TooManyPrincipals> {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = known.get_mut(principal) {
            if entry.expired(now) {
                known.remove(principal);
            } else {
                entry.used = now;
                return Ok(Arc::clone(&entry.lockdown));
            }
        }
        if known.len() >= MAX_PRINCIPALS {
            known.retain(|_, entry| !entry.expired(now) && !entry.holds_nothing());
            if known.len() >= MAX_PRINCIPALS {
                return Err(TooManyPrincipals);
            }
        }
        let lockdown = Arc::new(ConnectionLockdown::default());
        known.insert(
            principal.to_owned(),
            Entry {
                lockdown: Arc::clone(&lockdown),
                used: now,
            },
        );
        Ok(lockdown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use modhost::tools::Lockdown;

    fn fetched() -> Lockdown {
        Lockdown {
            since: "net__fetch".into(),
        }
    }

    #[test]
    fn a_principals_lockdown_holds_for_its_later_requests_only() {
        let table = PrincipalLockdowns::default();
        table.of("alice").unwrap().enter(fetched());
        assert_eq!(table.of("alice").unwrap().current(), Some(fetched()));
        assert_eq!(table.of("bob").unwrap().current(), None);
    }

    #[test]
    fn it_is_lifted_after_an_idle_hour_and_not_while_requests_come() {
        let table = PrincipalLockdowns::default();
        let start = Instant::now();
        table.at("alice", start).unwrap().enter(fetched());
        let later = start + IDLE_EXPIRY - Duration::from_secs(1);
        assert!(table.at("alice", later).unwrap().current().is_some());
        let still = later + IDLE_EXPIRY - Duration::from_secs(1);
        assert!(table.at("alice", still).unwrap().current().is_some());
        let idle = still + IDLE_EXPIRY;
        assert!(table.at("alice", idle).unwrap().current().is_none());
    }

    #[test]
    fn the_table_is_bounded_and_never_lifts_a_lockdown_to_make_room() {
        let table = PrincipalLockdowns::default();
        let now = Instant::now();
        for n in 0..MAX_PRINCIPALS {
            table.at(&n.to_string(), now).unwrap().enter(fetched());
        }
        assert_eq!(table.at("newcomer", now).unwrap_err(), TooManyPrincipals);
        assert!(table.at("0", now).unwrap().current().is_some());
        // Once they idled out, there is room.
        let later = now + IDLE_EXPIRY;
        assert!(table.at("newcomer", later).unwrap().current().is_none());
        // Principals in no lockdown make room at once.
        let table = PrincipalLockdowns::default();
        for n in 0..MAX_PRINCIPALS {
            table.at(&n.to_string(), now).unwrap();
        }
        assert!(table.at("newcomer", now).is_ok());
    }
}

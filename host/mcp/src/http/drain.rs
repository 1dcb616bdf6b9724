//! Graceful drain: what the server does between SIGTERM and its exit.
//!
//! Design decisions:
//!
//! - **Not ready, still answering.** From the first termination signal
//!   `/readyz` answers 503 (a Kubernetes Service stops routing to the pod;
//!   a load balancer's health check takes it out), and every new request
//!   to `/mcp` is answered 503 with `Retry-After` and `Connection: close`
//!   (so a client or balancer retries elsewhere), while the listener keeps
//!   accepting: a refused connection is slower to diagnose than a 503.
//! - **What runs, finishes.** Calls in flight run to their end and their
//!   responses are sent; `subscriptions/listen` and handshake `GET`
//!   streams are closed at once with their closing result (there is
//!   nothing to finish on them). The server exits when nothing is in
//!   flight, or after [`super::HttpLimits::drain_timeout`], whichever comes
//!   first; a second signal ends it at once. Whatever still runs then is
//!   stopped as on stdio's end: its module's process group is killed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};

/// Whether the server is draining, and what it still serves.
#[derive(Debug)]
pub(crate) struct Drain {
    draining: AtomicBool,
    signal: watch::Sender<bool>,
    busy: AtomicUsize,
    idle: Notify,
}

impl Default for Drain {
    fn default() -> Self {
        Drain {
            draining: AtomicBool::new(false),
            signal: watch::channel(false).0,
            busy: AtomicUsize::new(0),
            idle: Notify::new(),
        }
    }
}

/// One exchange in flight; the drain waits until none is.
#[derive(Debug)]
pub(crate) struct Busy(Arc<Drain>);

impl Drop for Busy {
    fn drop(&mut self) {
        if self.0.busy.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Drain {
    /// Whether a drain has begun.
    pub(crate) fn draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Begin draining: not ready, streams told to close.
    pub(crate) fn begin(&self) {
        self.draining.store(true, Ordering::Release);
        self.signal.send_replace(true);
    }

    /// Completes when a drain begins (at once if it has).
    pub(crate) fn begun(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut signal = self.signal.subscribe();
        async move {
            let _ = signal.wait_for(|draining| *draining).await;
        }
    }

    /// Count an exchange in flight until the guard drops.
    pub(crate) fn busy(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        Busy(Arc::clone(self))
    }

    /// Exchanges in flight.
    pub(crate) fn in_flight(&self) -> usize {
        self.busy.load(Ordering::Acquire)
    }

    /// Wait until nothing is in flight, or `timeout`; whether it emptied.
    pub(crate) async fn settled(&self, timeout: Duration) -> bool {
        let waited = tokio::time::timeout(timeout, async {
            loop {
                let idle = self.idle.notified();
                if self.in_flight() == 0 {
                    return;
                }
                idle.await;
            }
        });
        waited.await.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_drain_waits_for_what_is_in_flight_and_no_longer_than_its_timeout() {
        let drain = Arc::new(Drain::default());
        assert!(!drain.draining());
        let begun = drain.begun();
        let call = drain.busy();
        drain.begin();
        begun.await;
        assert!(drain.draining());
        assert!(!drain.settled(Duration::from_millis(50)).await);
        let waiter = {
            let drain = Arc::clone(&drain);
            tokio::spawn(async move { drain.settled(Duration::from_secs(10)).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(call);
        assert!(waiter.await.unwrap());
        assert_eq!(drain.in_flight(), 0);
        drain.begun().await;
    }
}

//! How a one-off command ends on SIGTERM, SIGINT or SIGHUP (`timeout`, a
//! terminal's Ctrl-C, a closed session): by dropping its work, so the
//! call's process group is killed and its audit record says `cancelled`,
//! then flushing the audit log, rather than dying with the record unwritten.
//! `modhost mcp` watches the same signals itself (`modhost_mcp`).

use tokio::signal::unix::{SignalKind, signal};

/// Completes with the signal's number when one of them arrives. A signal
/// that cannot be watched is never awaited.
pub(crate) async fn signalled() -> i32 {
    let watch = |kind: SignalKind| async move {
        match signal(kind) {
            Ok(mut watched) => {
                watched.recv().await;
                kind.as_raw_value()
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        number = watch(SignalKind::terminate()) => number,
        number = watch(SignalKind::interrupt()) => number,
        number = watch(SignalKind::hangup()) => number,
    }
}

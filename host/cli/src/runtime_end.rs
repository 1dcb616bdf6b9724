//! How a command's tokio runtime ends.
//!
//! Dropping a runtime waits for every blocking-pool task, and one can be
//! stuck in the kernel for good (a component's open of a fifo in its root,
//! a hung mount). A finished command, and `modhost mcp` once its client is
//! gone, give such tasks [`BLOCKING_TASKS_GRACE`] and then exit without
//! them: they end with the process.

use std::time::Duration;

/// How long a finished command waits for its blocking-pool tasks.
const BLOCKING_TASKS_GRACE: Duration = Duration::from_secs(1);

/// Shut `runtime` down, waiting at most [`BLOCKING_TASKS_GRACE`] for its
/// blocking-pool tasks.
pub(super) fn end(runtime: tokio::runtime::Runtime) {
    runtime.shutdown_timeout(BLOCKING_TASKS_GRACE);
}

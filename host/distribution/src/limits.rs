//! Bounds on a fetch, and how it reports progress.

use std::time::Duration;

/// How much and how long a fetch may take. Every limit is checked while the
/// bytes arrive, so an endless or stalled download ends with an error
/// naming the limit rather than filling the disk or hanging.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchLimits {
    /// The most bytes one artifact may have.
    pub max_bytes: u64,
    /// The whole fetch, connection to last byte.
    pub total: Duration,
    /// The longest wait for the next bytes.
    pub stall: Duration,
}

impl Default for FetchLimits {
    fn default() -> Self {
        FetchLimits {
            max_bytes: 512 * 1024 * 1024,
            total: Duration::from_secs(600),
            stall: Duration::from_secs(30),
        }
    }
}

/// Told about a download's progress (the CLI draws a bar on a terminal).
pub trait Progress: Send + Sync {
    /// A download of `what` starts; `total` when the server said its size.
    fn start(&self, what: &str, total: Option<u64>);
    /// `bytes` more arrived.
    fn advance(&self, bytes: u64);
    /// The download ended (complete or not).
    fn finish(&self);
}

/// No progress reporting.
#[derive(Debug)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&self, _what: &str, _total: Option<u64>) {}
    fn advance(&self, _bytes: u64) {}
    fn finish(&self) {}
}

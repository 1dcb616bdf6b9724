//! What a sync is asked to do, and how it reports progress.

use modhost_distribution::{NoProgress, Progress};

/// How [`crate::Host::sync`] runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct SyncOptions {
    /// Compute and return the plan; change nothing.
    pub dry_run: bool,
    /// Remove installed modules the lockfile does not name (their state is
    /// kept). Without it they are kept and listed in the plan.
    pub prune: bool,
    /// Install modules without a signature although `[signatures]`
    /// requires one (as `install --allow-unsigned`).
    pub allow_unsigned: bool,
}

/// Told how a sync goes, module by module (the CLI prints a line each).
pub trait SyncProgress: Send + Sync {
    /// Module `id` reached `stage` (`fetching`, `checking`, `staged`, ...).
    fn module(&self, id: &str, stage: &str);
    /// Every module is staged and checked; the commit begins.
    fn committing(&self) {}
    /// Where download progress goes.
    fn download(&self) -> &dyn Progress;
}

/// No progress reporting.
#[derive(Debug)]
pub struct Quiet;

impl SyncProgress for Quiet {
    fn module(&self, _id: &str, _stage: &str) {}
    fn download(&self) -> &dyn Progress {
        &NoProgress
    }
}

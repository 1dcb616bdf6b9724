//! `modhost sync`: converge a home to a lockfile ([`crate::lockfile`]),
//! all or nothing; and `modhost lock`, the lockfile of a home.
//!
//! Design decisions:
//!
//! - **The plan first, from what is recorded** (`sync/plan.rs`): each module of
//!   the lockfile is installed, upgraded, enabled, disabled or unchanged,
//!   judged by the digests its pin records, never by names or versions.
//!   `--dry-run` returns this plan and changes nothing; a second sync of
//!   the same file is a plan of no changes and does nothing (idempotent).
//! - **Modules the lockfile does not name are kept unless `prune`**, and
//!   listed as kept in the plan: a fleet file describing the shared modules
//!   does not silently delete what an operator added on one host, and
//!   deleting is asked for explicitly (`--prune`; state is kept, as
//!   `remove` keeps it).
//! - **All or nothing** (`sync/apply.rs`): every module is fetched, checked and
//!   staged before anything under `modules/`, `pins.json` or
//!   `config.sync.toml` changes; then one commit under the home's lock,
//!   `pins.json` written once, anything before it undone on failure. A bad
//!   entry anywhere in the file leaves the home as it was.
//! - **Two hosts, one file, the same pins:** what is pinned is the tree
//!   digest of exactly the bytes the lockfile's digest names, and with
//!   `tree` (which `lock` writes) that digest itself is checked before the
//!   commit.
//! - **Configuration beside, not inside, the operator's:** source roots and
//!   approval rules that come with a module go to `config.sync.toml`
//!   ([`crate::managed_config`]), replaced whole by each sync.
//! - **What a killed commit left is settled first** (`sync/leftovers.rs`):
//!   a module aside under `modules/.<id>.replaced-…` or `.<id>.removed-…`
//!   is put back when its id stands empty and its pin approves exactly it,
//!   else deleted; the sync then plans from the settled home. A dry run
//!   lists these asides and changes nothing.
//! - Installs go through the same path as `modhost install` (archive
//!   safety, describe confined, conformance, snapshot, pin): a sync never
//!   forces past findings.

mod apply;
pub(crate) mod leftovers;
mod lock_home;
mod options;
mod plan;

use std::path::PathBuf;

use serde::Serialize;

use crate::host::{Host, HostError};
use crate::lockfile::Lockfile;

pub use lock_home::LockOptions;
pub use options::{Quiet, SyncOptions, SyncProgress};
pub use plan::{ConfigChange, PlanStep, StepAction, SyncPlan};

/// What a sync did.
#[derive(Debug, Clone, Serialize)]
pub struct SyncReport {
    /// The plan it computed.
    pub plan: SyncPlan,
    /// Whether the plan was carried out (not with `dry_run`, nor when it
    /// changes nothing).
    pub applied: bool,
    /// What a killed commit had left under `modules/` and this sync
    /// settled before it planned, one line each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub swept: Vec<String>,
}

impl Host {
    /// Converge this home to `lockfile` (see the module docs).
    pub async fn sync(
        &self,
        lockfile: &Lockfile,
        options: &SyncOptions,
        progress: &dyn SyncProgress,
    ) -> Result<SyncReport, HostError> {
        let swept = match options.dry_run {
            true => Vec::new(),
            false => self.sweep_commit_leftovers()?,
        };
        let plan = plan::compute(self, lockfile, options.prune)?;
        if options.dry_run || plan.is_noop() {
            return Ok(SyncReport {
                plan,
                applied: false,
                swept,
            });
        }
        apply::apply(self, lockfile, &plan, options, progress).await?;
        Ok(SyncReport {
            plan,
            applied: true,
            swept,
        })
    }

    /// What [`Host::sync`] would do, changing nothing.
    pub fn sync_plan(&self, lockfile: &Lockfile, prune: bool) -> Result<SyncPlan, HostError> {
        plan::compute(self, lockfile, prune)
    }
}

/// The lockfile's path as the CLI defaults it: `./modhost.toml`.
pub fn default_lockfile() -> PathBuf {
    PathBuf::from(crate::lockfile::DEFAULT_FILE)
}

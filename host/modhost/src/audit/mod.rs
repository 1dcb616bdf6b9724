//! The audit log: one record per call, chained so that an edit, a deletion
//! or a reordering shows.
//!
//! Every call leaves one JSON line in `<home>/audit/audit.jsonl` (see
//! `record` for what a line says, and never says): a call that ran, failed,
//! was refused (an approval rule, a quota, the module's standing, the
//! machine's confinement) or was cancelled; made by `modhost invoke`, the
//! library, or `modhost mcp` (`observed_call`). Each line carries the
//! SHA-256 of the line before it; the first chains from [`GENESIS`]; the
//! file is rotated by size into `audit-<n>.jsonl` with the chain going on;
//! the head (`head`) holds where the log ends. [`verify`] walks it all and
//! names the first record that is not as written (`verify`), [`read`] and
//! [`Filter`] are what `modhost audit show` and `tail` print.
//!
//! Writing (`writer`): one `write` of a whole line with `O_APPEND`, under an
//! `flock` every host of the home takes, so two hosts keep one chain; a
//! torn last line is cut off by the next writer, which records that it did.
//!
//! `[audit]` in `config.toml` (`settings`): on by default; `copy_to` sends
//! each record to `stderr` or a file as well, for a collector.
//!
//! # API
//!
//! [`AuditConfig`]; [`AuditRecord`] with its [`Entry`], [`Outcome`],
//! [`Event`], [`CallGrants`], [`GrantedPath`], [`GrantedNetwork`],
//! [`ApprovalFacts`], [`Repair`]; [`read`], [`Records`], [`Filter`],
//! [`parse_since`], [`parse_outcome`]; [`verify`], [`Verification`],
//! [`Verdict`]; [`RefusedCall`] for [`crate::Host::record_refusal`];
//! [`local_principal`]; [`sha256_hex`]; [`AuditError`].

mod call_facts;
mod files;
mod head;
mod observed_call;
mod principal;
mod read;
mod record;
mod refused_call;
mod settings;
mod verify;
mod writer;

pub(crate) use call_facts::CallFacts;
pub use files::AuditError;
pub use principal::local_principal;
pub use read::{Filter, Records, parse_outcome, parse_since, read};
pub use record::{
    ApprovalFacts, AuditRecord, CallGrants, Entry, Event, GENESIS, GrantedNetwork, GrantedPath,
    Outcome, Repair, sha256_hex,
};
pub use refused_call::RefusedCall;
pub use settings::AuditConfig;
pub use verify::{Verdict, Verification, verify};
pub(crate) use writer::AuditLog;

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
//! `flock` every host of the home takes, so two hosts keep one chain; what
//! a crash leaves (a torn last line, a head one record behind, a rotation
//! under way) is repaired by the next writer, which records that it did;
//! anything else it finds (records gone, a last record changed, the head
//! gone) it records as such, and `verify` reports that log as not intact
//! for good. Records that could not be written are counted and said by a
//! `gap` record, also not intact.
//!
//! What the chain cannot do: someone who can write the files can rewrite
//! the whole chain and the head consistently, or remove `audit/` whole.
//! The anchor is a copy kept elsewhere: `[audit]` in `config.toml`
//! (`settings`) is on by default, and `copy_to` sends each record to
//! `stderr` or a file as well, for a collector the host's user cannot
//! rewrite.
//!
//! # API
//!
//! [`AuditConfig`]; [`AuditRecord`] with its [`Entry`], [`Outcome`],
//! [`Event`], [`CallGrants`], [`GrantedPath`], [`GrantedNetwork`],
//! [`ApprovalFacts`], [`Repair`], [`RepairFound`], [`Gap`],
//! [`MAX_CALLER_NAME`]; [`read`], [`each_record`], [`last_records`], [`Records`], [`Filter`],
//! [`parse_since`], [`parse_outcome`]; [`verify`], [`Verification`],
//! [`Verdict`], [`Flagged`]; [`RefusedCall`] for [`crate::Host::record_refusal`];
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
pub use read::{Filter, Records, each_record, last_records, parse_outcome, parse_since, read};
pub use record::{
    ApprovalFacts, AuditRecord, CallGrants, Entry, Event, GENESIS, Gap, GrantedNetwork,
    GrantedPath, MAX_CALLER_NAME, Outcome, Repair, RepairFound, sha256_hex,
};
pub use refused_call::RefusedCall;
pub use settings::AuditConfig;
pub use verify::{Flagged, Verdict, Verification, verify};
pub(crate) use writer::AuditLog;

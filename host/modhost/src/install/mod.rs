//! The parts of `modhost install` that touch untrusted bytes before anything
//! runs: unpacking an archive (or copying a folder), checking a digest,
//! finding the module inside.
//!
//! A pure library: no host state, no describing, no moving into `modules/`
//! (that is [`crate::manage`]'s job). Everything here writes only beneath a
//! staging folder it is given, and leaves nothing behind when it fails.

pub(crate) mod archive;
pub(crate) mod digest;
pub(crate) mod folder;
pub(crate) mod locate;

pub(crate) use archive::{ArchiveFormat, ArchiveLimits, extract};
pub(crate) use digest::{DigestError, receive};
pub(crate) use folder::copy_folder;
pub(crate) use locate::locate_module;

/// Names a module may not take: the host's own, and the folders of its home
/// (a module named `state` would read as the state folder in every listing).
pub(crate) const RESERVED_IDS: &[&str] = &[
    "modhost",
    "host",
    "modules",
    "state",
    "cache",
    "artifacts",
    "staging",
    "config",
    "pins",
];

/// Whether `id` is reserved. Names starting with `.` are hidden and never
/// valid module ids anyway (see [`crate::module_id::is_module_id`]).
pub(crate) fn is_reserved_id(id: &str) -> bool {
    id.starts_with('.') || RESERVED_IDS.contains(&id)
}

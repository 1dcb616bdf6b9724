//! The parts of `modhost install` that touch untrusted bytes before anything
//! runs: unpacking an archive (or copying a folder), checking a digest,
//! finding the module inside.
//!
//! A pure library: no host state, no describing, no moving into `modules/`
//! (that is [`crate::manage`]'s job). Everything here writes only beneath a
//! staging folder it is given, and leaves nothing behind when it fails.

pub mod archive;
pub mod digest;
pub mod folder;
pub mod locate;

pub use archive::{ArchiveFormat, ArchiveLimits, extract};
pub use digest::{DigestError, receive};
pub use folder::copy_folder;
pub use locate::locate_module;

/// Names a module may not take: the host's own, and the folders of its home
/// (a module named `state` would read as the state folder in every listing).
pub const RESERVED_IDS: &[&str] = &[
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
/// valid module ids anyway (see [`crate::discovery::is_module_id`]).
pub fn is_reserved_id(id: &str) -> bool {
    id.starts_with('.') || RESERVED_IDS.contains(&id)
}

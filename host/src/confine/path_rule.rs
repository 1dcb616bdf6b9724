//! One filesystem rule of a native call: a path and what it may be used
//! for. The rules are computed in `confine.rs` and built into a landlock
//! ruleset by `confine/ruleset.rs`.

use std::path::PathBuf;

/// What a path may be used for inside the domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathAccess {
    /// Read files, list folders.
    Read,
    /// Read and execute (system directories, the module's own folder).
    ReadExecute,
    /// Everything but execute (granted write roots, `/dev/null`).
    ReadWrite,
}

/// One filesystem rule of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathRule {
    pub path: PathBuf,
    pub access: PathAccess,
}

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

/// How a rule's path is opened when its rule is added (a landlock rule
/// binds the inode the path names then).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// Following symbolic links: system paths (`/lib64` and
    /// `/etc/localtime` are links on many systems), the module's own files.
    FollowingLinks,
    /// Through no symbolic link at all: a path the host resolved (canonical)
    /// and checked before, a call's grant (it overlaps no modhost home), the
    /// interpreter chain and its prefixes, a snapshot program. A link in it
    /// now was swapped in since by someone who can write beside it (a module
    /// writing an enclosing root), and would bind the rule to wherever the
    /// link points; the call is refused instead.
    NoLinks,
}

/// One filesystem rule of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathRule {
    pub path: PathBuf,
    pub access: PathAccess,
    pub opening: Opening,
}

impl PathRule {
    /// The access and opening as one byte, for the ruleset cache's key.
    pub(crate) fn kind_byte(&self) -> u8 {
        self.access as u8 | (self.opening as u8) << 4
    }
}

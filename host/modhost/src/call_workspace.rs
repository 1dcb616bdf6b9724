//! Which workspace one call gets.
//!
//! Three answers, not two: a caller that says nothing gets the host's own
//! workspace (the operator chose it by `--workspace` or by starting modhost
//! there); a caller that names a folder (an MCP client's root) gets that
//! one; and a caller that named its folders when none of them may be
//! granted (each is `/`, the user's home or overlaps the modhost home) gets
//! **none**. The last must not fall back to the host's: the caller said
//! where it works, and running its call on another folder would read or
//! change files it never pointed at.

use std::path::{Path, PathBuf};

/// The workspace one call gets (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CallWorkspace {
    /// The host's own workspace, when it has one.
    #[default]
    Host,
    /// This directory (an MCP client's root); it must be a directory.
    Given(PathBuf),
    /// None: the caller named folders and none may be granted, for this
    /// reason. A capability that reads or writes the workspace is refused
    /// (`no_workspace`) with it.
    Withheld(String),
}

impl CallWorkspace {
    /// The directory the caller named, if it named a usable one.
    pub fn given(&self) -> Option<&Path> {
        match self {
            CallWorkspace::Given(dir) => Some(dir),
            CallWorkspace::Host | CallWorkspace::Withheld(_) => None,
        }
    }

    /// The directory this call works in, `host` being the host's own.
    pub fn resolve<'a>(&'a self, host: Option<&'a Path>) -> Option<&'a Path> {
        match self {
            CallWorkspace::Host => host,
            CallWorkspace::Given(dir) => Some(dir),
            CallWorkspace::Withheld(_) => None,
        }
    }
}

//! The workspace walk shared by `files.search` and `files.list`.
//!
//! `ignore` walks with std paths, so the walk is kept beneath the root by
//! construction: it always starts at the root itself (so the root's
//! `.gitignore` applies to every subdirectory), never reads ignore files
//! above the root or the user's global excludes, never follows symlinks,
//! and prunes every directory that is neither on the way to nor inside the
//! requested subdirectory. File contents are then read through the sdk's
//! confined [`Root`], never through the walker's paths, so even a directory
//! swapped for a symlink mid-walk cannot make the module read outside.

use std::path::{Path, PathBuf};

use ignore::WalkBuilder;
use ignore::overrides::OverrideBuilder;
use modsdk::{EntryKind, ModError, Root, clean_relative};

/// The requested subdirectory, checked: relative, inside the root, existing.
pub fn subdirectory(root: &Root, path: Option<&str>) -> Result<PathBuf, ModError> {
    let requested = path.unwrap_or(".");
    let rel = clean_relative(Path::new(requested))
        .map_err(|why| ModError::path_escape(format!("workspace:{requested}: {why}")))?;
    // Through the root handle: a symlink out is refused here.
    root.metadata(&rel)?;
    Ok(rel)
}

/// A walk from the root, limited to `sub` (a directory or a single file),
/// in file-name order. `max_depth` counts from `sub`.
pub fn walk(
    root: &Root,
    sub: &Path,
    max_depth: Option<usize>,
    glob: Option<&str>,
) -> Result<ignore::Walk, ModError> {
    let mut builder = builder(root, sub, max_depth, glob)?;
    Ok(builder.sort_by_file_name(std::cmp::Ord::cmp).build())
}

/// The walk of [`walk`], unsorted, to build sequentially or in parallel
/// (`files.search` orders its own results).
pub fn builder(
    root: &Root,
    sub: &Path,
    max_depth: Option<usize>,
    glob: Option<&str>,
) -> Result<WalkBuilder, ModError> {
    let base = root.path().to_owned();
    let sub_depth = if sub == Path::new(".") {
        0
    } else {
        sub.components().count()
    };
    let mut builder = WalkBuilder::new(&base);
    builder
        .hidden(false)
        .parents(false)
        .git_global(false)
        .require_git(false)
        .follow_links(false)
        .max_depth(max_depth.map(|d| d + sub_depth));
    if let Some(glob) = glob {
        let mut overrides = OverrideBuilder::new(&base);
        overrides
            .add(glob)
            .map_err(|e| ModError::invalid_input(format!("glob {glob:?}: {e}")))?;
        builder.overrides(
            overrides
                .build()
                .map_err(|e| ModError::invalid_input(format!("glob {glob:?}: {e}")))?,
        );
    }
    let sub = sub.to_owned();
    let whole_root = sub == Path::new(".");
    builder.filter_entry(move |entry| {
        if entry.file_name() == ".git" {
            return false;
        }
        // The walk starts at the root: with nothing to prune, every entry
        // but `.git` is kept without taking its path apart.
        if whole_root {
            return true;
        }
        let Some(rel) = relative(&base, entry.path()) else {
            return false;
        };
        rel.starts_with(&sub) || sub.starts_with(&rel)
    });
    Ok(builder)
}

/// `entry` relative to the root, if it lies beneath it.
pub fn relative(base: &Path, path: &Path) -> Option<PathBuf> {
    path.strip_prefix(base).ok().map(Path::to_path_buf)
}

/// A relative path as the module reports it: `/`-separated.
pub fn to_slash(rel: &Path) -> String {
    let parts: Vec<_> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect();
    parts.join("/")
}

/// What an entry the walker found is, judged through the root: a symlink
/// counts as what it points to when that stays inside the root, and is
/// skipped (`None`) when it points out or nowhere.
pub fn kind_through_root(
    root: &Root,
    rel: &Path,
    walker_says: Option<std::fs::FileType>,
) -> Option<(EntryKind, u64)> {
    let is_symlink = walker_says.is_none_or(|t| t.is_symlink());
    let stat = if is_symlink {
        root.metadata(rel).ok()?
    } else {
        root.symlink_metadata(rel).ok()?
    };
    Some((stat.kind, stat.len))
}

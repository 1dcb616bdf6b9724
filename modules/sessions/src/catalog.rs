//! Which transcript files the `transcripts` root holds, most recent first,
//! and which of them a call names.
//!
//! Design decisions:
//!
//! - **Recency is the file's modification time**, read with one `fstat`
//!   per file and no content: "the last three sessions" must not cost a
//!   read of every transcript, and a session's last write is when it was
//!   last active (how both agents order their own resume lists).
//! - **A name is matched against what the walk found, never opened as a
//!   path.** A session is named by its path relative to the root (what every
//!   output calls `session`), its file stem (Claude Code's session id), or
//!   the end of the stem after a `-` (Codex's `rollout-<time>-<uuid>`); a
//!   name like `../x` therefore matches nothing and reads nothing.
//! - The walk follows no symlink (a link is reported, not read), stops at
//!   [`MAX_DEPTH`] and [`MAX_FILES`], and says when it stopped.

use std::time::SystemTime;

use modsdk::{EntryKind, ModError, Root};
use schemars::JsonSchema;
use serde::Serialize;

use crate::session::Unreadable;

/// The source root holding the transcripts.
pub const TRANSCRIPTS: &str = "transcripts";

/// Folder depth below the root that is walked (`YYYY/MM/DD` needs 4).
const MAX_DEPTH: usize = 8;
/// Transcript files considered per call.
pub const MAX_FILES: usize = 50_000;
/// The extension of a transcript file.
const EXTENSION: &str = ".jsonl";

/// One transcript file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Relative to the root, `/`-separated (`.` for a root that is one file).
    pub path: String,
    pub modified: Option<SystemTime>,
}

/// Every transcript file under the root, most recently modified first.
#[derive(Debug, Default)]
pub struct Catalog {
    pub files: Vec<Candidate>,
    /// Files and folders left out, with why.
    pub skipped: Vec<Unreadable>,
    /// Whether the walk stopped at [`MAX_FILES`].
    pub truncated: bool,
}

/// Which sessions a call asks for.
#[derive(Debug, Clone, Copy)]
pub enum Selection<'a> {
    /// The `n` most recent (all when `None`).
    Recent(Option<usize>),
    /// These names.
    Named(&'a [String]),
}

/// The sessions a call selected, and the names that matched nothing.
#[derive(Debug, Default, Serialize, JsonSchema)]
pub struct Selected {
    #[serde(skip)]
    #[schemars(skip)]
    pub files: Vec<Candidate>,
    pub not_found: Vec<String>,
}

/// Walk `root` for transcript files.
pub fn walk(root: &Root) -> Result<Catalog, ModError> {
    let mut catalog = Catalog::default();
    if root.is_file() {
        catalog.files.push(Candidate {
            path: ".".to_owned(),
            modified: modified(root, "."),
        });
        return Ok(catalog);
    }
    // The root itself must be listable: an unreadable root is the call's failure.
    let top = root.read_dir(".")?;
    let mut pending: Vec<(String, usize, Vec<modsdk::DirEntry>)> = vec![(String::new(), 0, top)];
    while let Some((dir, depth, entries)) = pending.pop() {
        for entry in entries {
            let path = if dir.is_empty() {
                entry.name.clone()
            } else {
                format!("{dir}/{}", entry.name)
            };
            match entry.kind {
                EntryKind::Dir if depth + 1 < MAX_DEPTH => match root.read_dir(&path) {
                    Ok(children) => pending.push((path, depth + 1, children)),
                    Err(e) => catalog.skipped.push(Unreadable {
                        session: path,
                        reason: format!("folder not read: {}", e.message()),
                    }),
                },
                EntryKind::File if path.ends_with(EXTENSION) => {
                    if catalog.files.len() == MAX_FILES {
                        catalog.truncated = true;
                        break;
                    }
                    let modified = modified(root, &path);
                    catalog.files.push(Candidate { path, modified });
                }
                EntryKind::Symlink if path.ends_with(EXTENSION) => {
                    catalog.skipped.push(Unreadable {
                        session: path,
                        reason: "a symbolic link; links are not followed".to_owned(),
                    });
                }
                _ => {}
            }
        }
    }
    // Most recent first; equal times by path, so the order is stable.
    catalog.files.sort_by(|a, b| {
        b.modified
            .cmp(&a.modified)
            .then_with(|| a.path.cmp(&b.path))
    });
    Ok(catalog)
}

fn modified(root: &Root, path: &str) -> Option<SystemTime> {
    root.open_file(path).ok()?.metadata().ok()?.modified().ok()
}

impl Catalog {
    /// The files `selection` names, most recent first.
    pub fn select(&self, selection: Selection<'_>) -> Selected {
        match selection {
            Selection::Recent(n) => Selected {
                files: self
                    .files
                    .iter()
                    .take(n.unwrap_or(usize::MAX))
                    .cloned()
                    .collect(),
                not_found: Vec::new(),
            },
            Selection::Named(names) => {
                let mut selected = Selected::default();
                for name in names {
                    let before = selected.files.len();
                    for file in self.files.iter().filter(|f| names_file(name, &f.path)) {
                        if !selected.files.contains(file) {
                            selected.files.push(file.clone());
                        }
                    }
                    if selected.files.len() == before && !already_named(&selected, name) {
                        selected.not_found.push(name.clone());
                    }
                }
                selected
            }
        }
    }
}

fn already_named(selected: &Selected, name: &str) -> bool {
    selected.files.iter().any(|f| names_file(name, &f.path))
}

/// Whether the session name `name` refers to the file at `path`.
pub fn names_file(name: &str, path: &str) -> bool {
    let name = name.trim();
    if name.is_empty() {
        return false;
    }
    if name == path || path.strip_suffix(EXTENSION) == Some(name) {
        return true;
    }
    let file = path.rsplit('/').next().unwrap_or(path);
    let stem = file.strip_suffix(EXTENSION).unwrap_or(file);
    stem == name
        || stem
            .strip_suffix(name)
            .is_some_and(|head| head.ends_with('-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_named_by_path_stem_or_codex_uuid_and_nothing_else() {
        let claude = "-home-u-app/4f1c2a.jsonl";
        let codex = "2025/10/29/rollout-2025-10-29T00-59-38-019a2d7a-41c4.jsonl";
        assert!(names_file(claude, claude));
        assert!(names_file("-home-u-app/4f1c2a", claude));
        assert!(names_file("4f1c2a", claude));
        assert!(names_file("019a2d7a-41c4", codex));
        assert!(names_file("41c4", codex));
        for not_it in ["", " ", "1c2a", "../4f1c2a.jsonl", "/4f1c2a", "app/4f1c2a"] {
            assert!(!names_file(not_it, claude), "{not_it:?}");
        }
    }
}

//! `files.list`: the tree under a directory of the workspace.
//!
//! Same walk as `files.search` (`.gitignore` respected, `.git` skipped, no
//! symlink followed out of the root), sorted by path, bounded to
//! [`MAX_ENTRIES`] so a huge tree cannot flood the answer.

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use modsdk::{EntryKind, ModError, Root};

use crate::walk;

pub const DESCRIPTION: &str = "List files and directories in the workspace, recursively, sorted by path. `path` is a directory \
relative to the workspace (default: the whole workspace); `max_depth` 1 lists only its direct children. \
Respects .gitignore and skips .git. Each entry has its path (relative to the workspace, `/`-separated), `kind` (`file` or `dir`) \
and `bytes` (0 for a directory). `truncated` is true when there were more than 2000 entries.";

/// The most entries returned in one call.
pub const MAX_ENTRIES: usize = 2000;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListInput {
    /// Directory to list, relative to the workspace. Default: the whole workspace.
    #[serde(default)]
    pub path: Option<String>,
    /// How deep to go: 1 is the directory's children only. Default: no limit.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_depth: Option<usize>,
}

#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct ListOutput {
    pub entries: Vec<Entry>,
    /// Whether more entries exist than were returned.
    pub truncated: bool,
}

#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct Entry {
    /// Relative to the workspace, `/`-separated.
    pub path: String,
    pub kind: Kind,
    /// Size of a file; 0 for a directory.
    pub bytes: u64,
}

#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    File,
    Dir,
}

pub fn run(root: &Root, input: &ListInput) -> Result<ListOutput, ModError> {
    let sub = walk::subdirectory(root, input.path.as_deref())?;
    let mut output = ListOutput {
        entries: Vec::new(),
        truncated: false,
    };
    for entry in walk::walk(root, &sub, input.max_depth, None)? {
        let Ok(entry) = entry else { continue };
        let Some(rel) = walk::relative(root.path(), entry.path()) else {
            continue;
        };
        // The start itself and the directories on the way to it are not listed.
        let whole_root = sub == Path::new(".");
        if rel.as_os_str().is_empty() || !(whole_root || (rel.starts_with(&sub) && rel != sub)) {
            continue;
        }
        let (kind, bytes) = match walk::kind_through_root(root, &rel, entry.file_type()) {
            Some((EntryKind::File, len)) => (Kind::File, len),
            Some((EntryKind::Dir, _)) => (Kind::Dir, 0),
            _ => continue,
        };
        if output.entries.len() == MAX_ENTRIES {
            output.truncated = true;
            break;
        }
        output.entries.push(Entry {
            path: walk::to_slash(&rel),
            kind,
            bytes,
        });
    }
    output.entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::workspace;

    fn list(root: &Root, input: serde_json::Value) -> Result<ListOutput, ModError> {
        run(root, &serde_json::from_value(input).unwrap())
    }

    fn paths(out: &ListOutput) -> Vec<&str> {
        out.entries.iter().map(|e| e.path.as_str()).collect()
    }

    #[test]
    fn lists_recursively_sorted_with_kinds_and_sizes() {
        let (_dir, root) = workspace(&[
            ("src/lib.rs", "abc"),
            ("README.md", "hello"),
            ("src/deep/x.rs", ""),
        ]);
        let out = list(&root, serde_json::json!({})).unwrap();
        assert_eq!(
            paths(&out),
            [
                "README.md",
                "src",
                "src/deep",
                "src/deep/x.rs",
                "src/lib.rs"
            ]
        );
        assert_eq!(
            out.entries[0],
            Entry {
                path: "README.md".into(),
                kind: Kind::File,
                bytes: 5
            }
        );
        assert_eq!(out.entries[1].kind, Kind::Dir);
        assert!(!out.truncated);
    }

    #[test]
    fn max_depth_counts_from_the_requested_directory() {
        let (_dir, root) = workspace(&[("src/lib.rs", ""), ("src/deep/x.rs", ""), ("top.txt", "")]);
        let out = list(&root, serde_json::json!({"max_depth": 1})).unwrap();
        assert_eq!(paths(&out), ["src", "top.txt"]);
        let out = list(&root, serde_json::json!({"path": "src", "max_depth": 1})).unwrap();
        assert_eq!(paths(&out), ["src/deep", "src/lib.rs"]);
    }

    #[test]
    fn respects_gitignore_and_skips_git() {
        let (_dir, root) = workspace(&[
            (".gitignore", "target/\n"),
            ("target/x", ""),
            (".git/HEAD", ""),
            ("a.rs", ""),
        ]);
        let out = list(&root, serde_json::json!({})).unwrap();
        assert_eq!(paths(&out), [".gitignore", "a.rs"]);
    }

    #[test]
    fn stops_at_the_bound() {
        let files: Vec<(String, &str)> = (0..MAX_ENTRIES + 5)
            .map(|i| (format!("f{i:05}"), ""))
            .collect();
        let refs: Vec<(&str, &str)> = files.iter().map(|(p, c)| (p.as_str(), *c)).collect();
        let (_dir, root) = workspace(&refs);
        let out = list(&root, serde_json::json!({})).unwrap();
        assert_eq!(out.entries.len(), MAX_ENTRIES);
        assert!(out.truncated);
    }

    #[cfg(unix)]
    #[test]
    fn a_path_outside_the_root_is_refused_and_links_out_are_not_listed() {
        let (dir, root) = workspace(&[("a.rs", ""), ("src/b.rs", "")]);
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        std::os::unix::fs::symlink("src/b.rs", dir.path().join("inside.rs")).unwrap();
        for path in ["..", "/", "out"] {
            let err = list(&root, serde_json::json!({"path": path})).unwrap_err();
            assert_eq!(err.kind(), "path_escape", "{path}: {err}");
        }
        let out = list(&root, serde_json::json!({})).unwrap();
        assert_eq!(paths(&out), ["a.rs", "inside.rs", "src", "src/b.rs"]);
    }
}

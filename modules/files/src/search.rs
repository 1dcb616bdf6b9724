//! `files.search`: a regular expression over the workspace's text files.
//!
//! Like ripgrep's defaults: `.gitignore` is respected, `.git` and binary
//! files (a NUL byte in the first 8 KiB) are skipped, and a matched line is
//! cut at [`MAX_LINE_CHARS`] characters so one minified file cannot flood
//! the answer. Stops at `max_results` or at the deadline, and says so.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::time::Instant;

use modsdk::{EntryKind, ModError, Root};
use regex::{Regex, RegexBuilder};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::walk;

pub const DESCRIPTION: &str = "Search the workspace's text files for lines matching a regular expression (Rust regex syntax, like ripgrep). \
Respects .gitignore, skips .git and binary files. Returns each matching line with its path (relative to the workspace, `/`-separated) \
and 1-based line number; long lines are cut at 500 characters. Narrow with `path` (a subdirectory or file) and `glob` (e.g. `*.rs`). \
`truncated` is true when more matches exist than `max_results`.";

/// Bytes inspected for a NUL to decide a file is binary.
const BINARY_PROBE_BYTES: usize = 8 * 1024;
/// Longest line text returned, in characters.
pub const MAX_LINE_CHARS: usize = 500;
/// Upper bound on `max_results`, whatever the caller asks.
const MAX_RESULTS_CAP: usize = 10_000;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchInput {
    /// Regular expression matched against each line (Rust regex syntax).
    pub pattern: String,
    /// Directory or file to search, relative to the workspace. Default: the whole workspace.
    #[serde(default)]
    pub path: Option<String>,
    /// Only search files matching this glob, e.g. `*.rs` or `src/**/*.toml`.
    #[serde(default)]
    pub glob: Option<String>,
    /// Match regardless of case.
    #[serde(default)]
    pub case_insensitive: bool,
    /// The most matches to return (1 to 10000).
    #[serde(default = "default_max_results")]
    #[schemars(range(min = 1, max = 10_000))]
    pub max_results: usize,
}

fn default_max_results() -> usize {
    100
}

#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct SearchOutput {
    pub matches: Vec<Match>,
    /// Whether the search stopped before the end (max_results or the deadline).
    pub truncated: bool,
}

#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct Match {
    /// Relative to the workspace, `/`-separated.
    pub path: String,
    /// 1-based.
    pub line: u64,
    /// The line without its line ending, cut at 500 characters (marked with `…`).
    pub text: String,
}

pub fn run(root: &Root, input: &SearchInput, deadline: Instant) -> Result<SearchOutput, ModError> {
    let regex = RegexBuilder::new(&input.pattern)
        .case_insensitive(input.case_insensitive)
        .build()
        .map_err(|e| ModError::invalid_input(format!("pattern {:?}: {e}", input.pattern)))?;
    let sub = walk::subdirectory(root, input.path.as_deref())?;
    let max_results = input.max_results.clamp(1, MAX_RESULTS_CAP);
    let mut output = SearchOutput {
        matches: Vec::new(),
        truncated: false,
    };
    for entry in walk::walk(root, &sub, None, input.glob.as_deref())? {
        // An unreadable directory is not a reason to fail the whole search.
        let Ok(entry) = entry else { continue };
        let Some(rel) = walk::relative(root.path(), entry.path()) else {
            continue;
        };
        if !matches!(
            walk::kind_through_root(root, &rel, entry.file_type()),
            Some((EntryKind::File, _))
        ) {
            continue;
        }
        if Instant::now() >= deadline {
            output.truncated = true;
            break;
        }
        if search_file(root, &rel, &regex, max_results, &mut output) {
            break;
        }
    }
    Ok(output)
}

/// Append the matches in one file; true when the search must stop.
fn search_file(
    root: &Root,
    rel: &Path,
    regex: &Regex,
    max_results: usize,
    output: &mut SearchOutput,
) -> bool {
    // A file that vanished or cannot be opened since the walk saw it is skipped.
    let Ok(file) = root.open_file(rel) else {
        return false;
    };
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let Ok(head) = reader.fill_buf() else {
        return false;
    };
    if head[..head.len().min(BINARY_PROBE_BYTES)].contains(&0) {
        return false;
    }
    let path = walk::to_slash(rel);
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        match reader.by_ref().read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return false,
            Ok(_) => {}
        }
        number += 1;
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        if !regex.is_match(text) {
            continue;
        }
        if output.matches.len() == max_results {
            output.truncated = true;
            return true;
        }
        output.matches.push(Match {
            path: path.clone(),
            line: number,
            text: cut(text, MAX_LINE_CHARS),
        });
    }
}

/// At most `max` characters, cut on a char boundary, marked when cut.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{far_deadline, workspace};

    fn search(root: &Root, input: serde_json::Value) -> Result<SearchOutput, ModError> {
        run(
            root,
            &serde_json::from_value(input).unwrap(),
            far_deadline(),
        )
    }

    fn found(output: &SearchOutput) -> Vec<(String, u64)> {
        output
            .matches
            .iter()
            .map(|m| (m.path.clone(), m.line))
            .collect()
    }

    #[test]
    fn finds_lines_with_paths_and_line_numbers() {
        let (_dir, root) = workspace(&[
            ("src/lib.rs", "fn a() {}\n// TODO: b\n"),
            ("README.md", "todo later\n"),
        ]);
        let out = search(&root, serde_json::json!({"pattern": "TODO"})).unwrap();
        assert_eq!(found(&out), [("src/lib.rs".to_owned(), 2)]);
        assert_eq!(out.matches[0].text, "// TODO: b");
        assert!(!out.truncated);

        let out = search(
            &root,
            serde_json::json!({"pattern": "todo", "case_insensitive": true}),
        )
        .unwrap();
        assert_eq!(
            found(&out),
            [("README.md".to_owned(), 1), ("src/lib.rs".to_owned(), 2)]
        );
    }

    #[test]
    fn respects_gitignore_and_skips_binary_files() {
        let (_dir, root) = workspace(&[
            (".gitignore", "target/\n*.log\n"),
            ("target/debug/out.txt", "needle\n"),
            ("build.log", "needle\n"),
            ("blob.bin", "needle\0\0\0"),
            ("src/keep.rs", "needle\n"),
        ]);
        let out = search(&root, serde_json::json!({"pattern": "needle"})).unwrap();
        assert_eq!(found(&out), [("src/keep.rs".to_owned(), 1)]);
    }

    #[test]
    fn the_root_gitignore_applies_when_searching_a_subdirectory() {
        let (_dir, root) = workspace(&[
            (".gitignore", "*.gen.rs\n"),
            ("src/a.gen.rs", "needle\n"),
            ("src/a.rs", "needle\n"),
            ("docs/b.md", "needle\n"),
        ]);
        let out = search(
            &root,
            serde_json::json!({"pattern": "needle", "path": "src"}),
        )
        .unwrap();
        assert_eq!(found(&out), [("src/a.rs".to_owned(), 1)]);
    }

    #[test]
    fn glob_narrows_the_files() {
        let (_dir, root) = workspace(&[("src/a.rs", "needle\n"), ("src/b.md", "needle\n")]);
        let out = search(
            &root,
            serde_json::json!({"pattern": "needle", "glob": "*.rs"}),
        )
        .unwrap();
        assert_eq!(found(&out), [("src/a.rs".to_owned(), 1)]);
    }

    #[test]
    fn stops_at_max_results_and_says_truncated() {
        let (_dir, root) = workspace(&[("a.txt", "x\nx\nx\n")]);
        let out = search(&root, serde_json::json!({"pattern": "x", "max_results": 2})).unwrap();
        assert_eq!(out.matches.len(), 2);
        assert!(out.truncated);
        let out = search(&root, serde_json::json!({"pattern": "x", "max_results": 3})).unwrap();
        assert!(!out.truncated);
    }

    #[test]
    fn long_lines_are_cut_on_a_char_boundary() {
        let long = "é".repeat(MAX_LINE_CHARS + 20);
        let (_dir, root) = workspace(&[("a.txt", &format!("{long}\n"))]);
        let out = search(&root, serde_json::json!({"pattern": "é"})).unwrap();
        assert_eq!(out.matches[0].text.chars().count(), MAX_LINE_CHARS + 1);
        assert!(out.matches[0].text.ends_with('…'));
    }

    #[test]
    fn a_bad_regex_is_invalid_input() {
        let (_dir, root) = workspace(&[("a.txt", "x\n")]);
        let err = search(&root, serde_json::json!({"pattern": "("})).unwrap_err();
        assert_eq!(err.kind(), "invalid_input");
    }

    #[test]
    fn a_path_outside_the_root_is_refused() {
        let (dir, root) = workspace(&[("a.txt", "x\n")]);
        for path in ["..", "/etc", "a/../.."] {
            let err = search(&root, serde_json::json!({"pattern": "x", "path": path})).unwrap_err();
            assert_eq!(err.kind(), "path_escape", "{path}: {err}");
        }
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "x\n").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        let err = search(&root, serde_json::json!({"pattern": "x", "path": "out"})).unwrap_err();
        assert_eq!(err.kind(), "path_escape", "{err}");
        // Walking the whole root never follows the link out either.
        let out = search(&root, serde_json::json!({"pattern": "x"})).unwrap();
        assert_eq!(found(&out), [("a.txt".to_owned(), 1)]);
    }
}

//! `files.read`: a line range of one text file.
//!
//! The content is returned exactly as stored (line endings kept, invalid
//! UTF-8 replaced), bounded to [`MAX_CONTENT_BYTES`] on a line boundary so
//! one huge file cannot flood the answer; `total_lines` always counts the
//! whole file, so the caller knows what to ask for next.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use modsdk::{EntryKind, ModError, Root, clean_relative};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::walk;

pub const DESCRIPTION: &str = "Read a text file in the workspace, whole or a range of lines. `path` is relative to the workspace; \
`start_line` and `end_line` are 1-based and inclusive. Returns the content with its line endings, `total_lines` of the whole file, \
and `truncated` when the range was cut at 256 KiB (ask again from the next line). Binary files and directories are refused.";

/// The most content bytes returned in one call.
pub const MAX_CONTENT_BYTES: usize = 256 * 1024;
const BINARY_PROBE_BYTES: usize = 8 * 1024;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadInput {
    /// The file, relative to the workspace.
    pub path: String,
    /// First line to return, 1-based. Default: 1.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub start_line: Option<u64>,
    /// Last line to return, inclusive. Default: the end of the file.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub end_line: Option<u64>,
}

#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct ReadOutput {
    /// Relative to the workspace, `/`-separated.
    pub path: String,
    pub content: String,
    /// Lines in the whole file.
    pub total_lines: u64,
    /// Whether the content stops before the requested end (size bound).
    pub truncated: bool,
}

pub fn run(root: &Root, input: &ReadInput) -> Result<ReadOutput, ModError> {
    let rel = clean_relative(Path::new(&input.path))
        .map_err(|why| ModError::path_escape(format!("workspace:{}: {why}", input.path)))?;
    let start = input.start_line.unwrap_or(1).max(1);
    let end = input.end_line.unwrap_or(u64::MAX);
    if end < start {
        return Err(ModError::invalid_input(format!(
            "end_line {end} is before start_line {start}"
        )));
    }
    let path = walk::to_slash(&rel);
    match root.metadata(&rel)?.kind {
        EntryKind::File => {}
        EntryKind::Dir => {
            return Err(
                ModError::invalid_input(format!("workspace:{path}: is a directory"))
                    .with_remedy("use files.list to see what it contains"),
            );
        }
        _ => {
            return Err(ModError::invalid_input(format!(
                "workspace:{path}: not a regular file"
            )));
        }
    }
    let mut reader = BufReader::with_capacity(64 * 1024, root.open_file(&rel)?);
    let head = reader
        .fill_buf()
        .map_err(|e| ModError::io(format!("workspace:{path}"), &e))?;
    if head[..head.len().min(BINARY_PROBE_BYTES)].contains(&0) {
        return Err(
            ModError::invalid_input(format!("workspace:{path}: a binary file"))
                .with_remedy("files.read returns text only"),
        );
    }

    let mut content = Vec::new();
    let mut truncated = false;
    let mut total_lines = 0u64;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader
            .by_ref()
            .read_until(b'\n', &mut line)
            .map_err(|e| ModError::io(format!("workspace:{path}"), &e))?;
        if n == 0 {
            break;
        }
        total_lines += 1;
        if total_lines < start || total_lines > end || truncated {
            continue;
        }
        if content.len() + line.len() > MAX_CONTENT_BYTES {
            truncated = true;
            if content.is_empty() {
                // A single line larger than the bound: return its head.
                content.extend_from_slice(&line[..MAX_CONTENT_BYTES]);
            }
            continue;
        }
        content.extend_from_slice(&line);
    }
    if start > total_lines && !(start == 1 && total_lines == 0) {
        return Err(ModError::invalid_input(format!(
            "workspace:{path}: start_line {start} is past the end ({total_lines} lines)"
        )));
    }
    let content = String::from_utf8_lossy(&content).into_owned();
    Ok(ReadOutput {
        path,
        content,
        total_lines,
        truncated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::workspace;

    fn read(root: &Root, input: serde_json::Value) -> Result<ReadOutput, ModError> {
        run(root, &serde_json::from_value(input).unwrap())
    }

    #[test]
    fn reads_a_whole_file_and_a_range() {
        let (_dir, root) = workspace(&[("src/a.txt", "one\ntwo\r\nthree\nfour")]);
        let out = read(&root, serde_json::json!({"path": "src/a.txt"})).unwrap();
        assert_eq!(out.content, "one\ntwo\r\nthree\nfour");
        assert_eq!(
            (out.path.as_str(), out.total_lines, out.truncated),
            ("src/a.txt", 4, false)
        );

        let out = read(
            &root,
            serde_json::json!({"path": "./src/a.txt", "start_line": 2, "end_line": 3}),
        )
        .unwrap();
        assert_eq!(out.content, "two\r\nthree\n");
        assert_eq!(out.path, "src/a.txt");
        assert_eq!(out.total_lines, 4);
    }

    #[test]
    fn a_bad_range_is_invalid_input() {
        let (_dir, root) = workspace(&[("a.txt", "one\n")]);
        let err = read(
            &root,
            serde_json::json!({"path": "a.txt", "start_line": 3, "end_line": 2}),
        )
        .unwrap_err();
        assert_eq!(err.kind(), "invalid_input");
        let err = read(&root, serde_json::json!({"path": "a.txt", "start_line": 5})).unwrap_err();
        assert!(err.message().contains("past the end (1 lines)"), "{err}");
    }

    #[test]
    fn content_is_bounded_on_a_line_boundary() {
        let line = format!("{}\n", "x".repeat(1023));
        let body = line.repeat(300); // 300 KiB
        let (_dir, root) = workspace(&[("big.txt", &body)]);
        let out = read(&root, serde_json::json!({"path": "big.txt"})).unwrap();
        assert!(out.truncated);
        assert_eq!(out.content.len(), MAX_CONTENT_BYTES);
        assert!(out.content.ends_with('\n'));
        assert_eq!(out.total_lines, 300);
    }

    #[test]
    fn directories_binaries_and_missing_files_are_errors() {
        let (_dir, root) = workspace(&[("src/a.txt", "x"), ("b.bin", "a\0b")]);
        assert_eq!(
            read(&root, serde_json::json!({"path": "src"}))
                .unwrap_err()
                .kind(),
            "invalid_input"
        );
        assert_eq!(
            read(&root, serde_json::json!({"path": "b.bin"}))
                .unwrap_err()
                .kind(),
            "invalid_input"
        );
        assert_eq!(
            read(&root, serde_json::json!({"path": "nope.txt"}))
                .unwrap_err()
                .kind(),
            "not_found"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_path_outside_the_root_is_refused() {
        let (dir, root) = workspace(&[("a.txt", "x")]);
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "secret").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), dir.path().join("leak"))
            .unwrap();
        let escape = outside.path().join("secret.txt");
        for path in ["../secret.txt", escape.to_str().unwrap(), "leak"] {
            let err = read(&root, serde_json::json!({"path": path})).unwrap_err();
            assert_eq!(err.kind(), "path_escape", "{path}: {err}");
        }
    }
}

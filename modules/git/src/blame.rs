//! `git.blame`: who last changed each line of a range of one file.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use modsdk::ModError;

use crate::input;
use crate::run::Git;

pub const DESCRIPTION: &str = "Who last changed each line of `path` (relative to the workspace) from `start_line` to `end_line` \
(1-based, inclusive, at most 500 lines), in the working tree or at `revision`. Returns each line's number, commit hash, author, \
author time (Unix seconds), commit subject and content.";

const MAX_LINES: u64 = 500;
const MAX_BYTES: usize = 2 << 20;
const MAX_CONTENT_CHARS: usize = 1000;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BlameInput {
    /// The file, relative to the workspace.
    pub path: String,
    /// First line, 1-based.
    #[schemars(range(min = 1))]
    pub start_line: u64,
    /// Last line, inclusive (at most 500 lines after start_line).
    #[schemars(range(min = 1))]
    pub end_line: u64,
    /// Blame the file as of this revision instead of the working tree.
    #[serde(default)]
    pub revision: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct BlameOutput {
    pub path: String,
    pub lines: Vec<BlameLine>,
}

#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq, Eq)]
pub struct BlameLine {
    /// The line number in the file.
    pub line: u64,
    pub commit: String,
    pub author: String,
    /// Unix seconds.
    pub author_time: i64,
    pub summary: String,
    /// The line's text, without its line ending.
    pub content: String,
}

pub fn run(git: &Git, input: &BlameInput) -> Result<BlameOutput, ModError> {
    let path = input::path("path", &input.path)?;
    let revision = input
        .revision
        .as_deref()
        .map(|r| input::revision("revision", r))
        .transpose()?;
    let (start, end) = (input.start_line, input.end_line);
    if start == 0 || end < start {
        return Err(ModError::invalid_input(format!(
            "lines {start} to {end}: start_line is at least 1 and end_line at least start_line"
        )));
    }
    if end - start >= MAX_LINES {
        return Err(ModError::invalid_input(format!(
            "lines {start} to {end}: at most {MAX_LINES} lines at once"
        ))
        .with_remedy("ask for the range in several calls"));
    }
    let range = format!("-L{start},{end}");
    // No `--end-of-options` here: git before 2.42 misparses it in blame and
    // reads the argument after `--` as an option (`-- --output=FILE` wrote
    // FILE with git 2.39). The revision cannot start with `-` (checked
    // above) and the path comes after `--`, which every version honours.
    let mut args = vec!["blame", "--porcelain", "--no-textconv", &range];
    args.extend(revision);
    args.extend(["--", path.as_str()]);
    let captured = git.run(&args, MAX_BYTES)?;
    Ok(BlameOutput {
        path,
        lines: parse(&captured.stdout),
    })
}

/// Parse `--porcelain`: a `<hash> <orig> <final> [<count>]` line opens each
/// line's entry; the commit's headers follow the first time it appears; a
/// tab-prefixed line is the content.
pub fn parse(bytes: &[u8]) -> Vec<BlameLine> {
    let text = String::from_utf8_lossy(bytes);
    let mut headers: HashMap<String, HashMap<String, String>> = HashMap::new();
    let mut current: Option<(String, u64)> = None;
    let mut lines = Vec::new();
    for line in text.lines() {
        if let Some(content) = line.strip_prefix('\t') {
            if let Some((commit, number)) = current.take() {
                let fields = headers.get(&commit);
                let field = |k: &str| fields.and_then(|f| f.get(k)).cloned().unwrap_or_default();
                lines.push(BlameLine {
                    line: number,
                    author_time: field("author-time").parse().unwrap_or(0),
                    author: field("author"),
                    summary: field("summary"),
                    content: content.chars().take(MAX_CONTENT_CHARS).collect(),
                    commit,
                });
            }
            continue;
        }
        let mut words = line.split(' ');
        let first = words.next().unwrap_or_default();
        let is_hash =
            matches!(first.len(), 40 | 64) && first.bytes().all(|b| b.is_ascii_hexdigit());
        if is_hash {
            let number = words.nth(1).and_then(|n| n.parse().ok()).unwrap_or(0);
            headers.entry(first.to_owned()).or_default();
            current = Some((first.to_owned(), number));
        } else if let (Some((commit, _)), Some((key, value))) = (&current, line.split_once(' ')) {
            headers
                .entry(commit.clone())
                .or_default()
                .entry(key.to_owned())
                .or_insert_with(|| value.to_owned());
        }
    }
    lines
}

pub fn render(output: &BlameOutput) -> String {
    output
        .lines
        .iter()
        .map(|l| {
            format!(
                "{:>5} {} {:<16} {}",
                l.line,
                &l.commit[..l.commit.len().min(8)],
                l.author,
                l.content
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_porcelain_with_repeated_commits() {
        let h = "a".repeat(40);
        let bytes = format!(
            "{h} 1 1 2\nauthor Ann\nauthor-time 100\nsummary first\nfilename f\n\tone\n{h} 2 2\n\ttwo\n"
        );
        let lines = parse(bytes.as_bytes());
        assert_eq!(lines.len(), 2);
        assert_eq!(
            (
                lines[1].line,
                lines[1].author.as_str(),
                lines[1].content.as_str()
            ),
            (2, "Ann", "two")
        );
        assert_eq!(lines[0].author_time, 100);
    }
}

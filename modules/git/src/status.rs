//! `git.status`: the branch and the changed, untracked and conflicted files.
//!
//! Parsed from `git status --porcelain=v2 --branch -z`, the format git
//! promises to keep stable for scripts. Submodules are not looked into
//! (that would start a git per submodule, in a repository this module has
//! not vetted).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use modsdk::ModError;

use crate::input;
use crate::run::Git;

pub const DESCRIPTION: &str = "The git status of the workspace: the branch, its upstream and how far ahead or behind it is, \
and every changed, staged, untracked or conflicted file (paths relative to the workspace), optionally only under `path`. \
`index` and `worktree` are git's one-letter codes (M modified, A added, D deleted, R renamed, C copied, U unmerged, . unchanged). \
Read-only: the index is never rewritten. At most 1000 entries; `truncated` says when there were more.";

const MAX_ENTRIES: usize = 1000;
const MAX_BYTES: usize = 1 << 20;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusInput {
    /// Only files under this path (relative to the workspace).
    #[serde(default)]
    pub path: Option<String>,
    /// List untracked files too (default true).
    #[serde(default = "yes")]
    pub untracked: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Default, Serialize, JsonSchema, PartialEq, Eq)]
pub struct StatusOutput {
    pub branch: Branch,
    pub entries: Vec<Entry>,
    pub truncated: bool,
}

#[derive(Debug, Default, Serialize, JsonSchema, PartialEq, Eq)]
pub struct Branch {
    /// The branch name, or null when HEAD is detached.
    pub head: Option<String>,
    /// The commit HEAD points at, or null before the first commit.
    pub commit: Option<String>,
    pub upstream: Option<String>,
    pub ahead: Option<u64>,
    pub behind: Option<u64>,
}

#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct Entry {
    pub path: String,
    /// For a rename or copy: the path it came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// `changed`, `renamed`, `unmerged` or `untracked`.
    pub kind: String,
    /// The staged change (one letter; `.` none).
    pub index: String,
    /// The unstaged change (one letter; `.` none).
    pub worktree: String,
}

pub fn run(git: &Git, input: &StatusInput) -> Result<StatusOutput, ModError> {
    let path = input
        .path
        .as_deref()
        .map(|p| input::path("path", p))
        .transpose()?;
    let untracked = if input.untracked {
        "--untracked-files=normal"
    } else {
        "--untracked-files=no"
    };
    let mut args = vec![
        "status",
        "--porcelain=v2",
        "--branch",
        "-z",
        untracked,
        "--ignore-submodules=all",
        "--",
    ];
    args.extend(path.as_deref());
    let captured = git.run(&args, MAX_BYTES)?;
    let mut output = parse(&captured.stdout);
    output.truncated |= captured.cut;
    Ok(output)
}

/// Parse porcelain v2 with `-z`: NUL-terminated records; a rename record is
/// followed by its origin path as a record of its own.
pub fn parse(bytes: &[u8]) -> StatusOutput {
    let mut output = StatusOutput::default();
    let mut records = bytes
        .split(|&b| b == 0)
        .map(|r| String::from_utf8_lossy(r).into_owned());
    while let Some(record) = records.next() {
        if let Some(header) = record.strip_prefix("# ") {
            branch_header(&mut output.branch, header);
            continue;
        }
        let entry = match record.as_bytes().first() {
            Some(b'1') => fields(&record, 9).map(|f| entry(f[8], None, "changed", f[1])),
            Some(b'2') => fields(&record, 10).map(|f| {
                let from = records.next();
                entry(f[9], from, "renamed", f[1])
            }),
            Some(b'u') => fields(&record, 11).map(|f| entry(f[10], None, "unmerged", f[1])),
            Some(b'?') => record.get(2..).map(|p| entry(p, None, "untracked", "..")),
            _ => None,
        };
        if let Some(entry) = entry {
            if output.entries.len() == MAX_ENTRIES {
                output.truncated = true;
                break;
            }
            output.entries.push(entry);
        }
    }
    output
}

/// The first `n` space-separated fields, the last one taking the rest (a
/// path may contain spaces).
fn fields(record: &str, n: usize) -> Option<Vec<&str>> {
    let fields: Vec<&str> = record.splitn(n, ' ').collect();
    (fields.len() == n).then_some(fields)
}

fn entry(path: &str, from: Option<String>, kind: &str, xy: &str) -> Entry {
    let mut codes = xy.chars().map(String::from);
    Entry {
        path: path.to_owned(),
        from,
        kind: kind.to_owned(),
        index: codes.next().unwrap_or_else(|| ".".into()),
        worktree: codes.next().unwrap_or_else(|| ".".into()),
    }
}

fn branch_header(branch: &mut Branch, header: &str) {
    let Some((key, value)) = header.split_once(' ') else {
        return;
    };
    match key {
        "branch.oid" if value != "(initial)" => branch.commit = Some(value.to_owned()),
        "branch.head" if value != "(detached)" => branch.head = Some(value.to_owned()),
        "branch.upstream" => branch.upstream = Some(value.to_owned()),
        "branch.ab" => {
            let mut counts = value.split(' ');
            branch.ahead = counts
                .next()
                .and_then(|a| a.trim_start_matches('+').parse().ok());
            branch.behind = counts
                .next()
                .and_then(|b| b.trim_start_matches('-').parse().ok());
        }
        _ => {}
    }
}

/// One line per entry, git's short-status style.
pub fn render(output: &StatusOutput) -> String {
    let mut text = format!(
        "on {}",
        output.branch.head.as_deref().unwrap_or("a detached HEAD")
    );
    if let (Some(ahead), Some(behind)) = (output.branch.ahead, output.branch.behind) {
        text.push_str(&format!(" (ahead {ahead}, behind {behind})"));
    }
    if output.entries.is_empty() {
        text.push_str(", nothing changed");
    }
    for e in &output.entries {
        let code = if e.kind == "untracked" {
            "??".to_owned()
        } else {
            format!("{}{}", e.index, e.worktree).replace('.', " ")
        };
        match &e.from {
            Some(from) => text.push_str(&format!("\n{code} {from} -> {}", e.path)),
            None => text.push_str(&format!("\n{code} {}", e.path)),
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_porcelain_v2() {
        let bytes = b"# branch.oid 1234\0# branch.head main\0# branch.upstream origin/main\0# branch.ab +2 -1\0\
1 .M N... 100644 100644 100644 aaa bbb src/a file.rs\0\
2 R. N... 100644 100644 100644 aaa bbb R100 new.rs\0old.rs\0\
u UU N... 100644 100644 100644 100644 a b c both.rs\0\
? notes.txt\0";
        let out = parse(bytes);
        assert_eq!(out.branch.head.as_deref(), Some("main"));
        assert_eq!((out.branch.ahead, out.branch.behind), (Some(2), Some(1)));
        let got: Vec<(&str, Option<&str>, &str, &str, &str)> = out
            .entries
            .iter()
            .map(|e| {
                (
                    e.path.as_str(),
                    e.from.as_deref(),
                    e.kind.as_str(),
                    e.index.as_str(),
                    e.worktree.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("src/a file.rs", None, "changed", ".", "M"),
                ("new.rs", Some("old.rs"), "renamed", "R", "."),
                ("both.rs", None, "unmerged", "U", "U"),
                ("notes.txt", None, "untracked", ".", "."),
            ]
        );
    }
}

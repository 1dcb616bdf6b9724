//! `git.log`: recent commits, bounded.
//!
//! Fields are separated by the ASCII unit separator and commits by the
//! record separator (`%x1f`, `%x1e`), which a commit subject cannot hold in
//! any way that matters; one more commit than asked is requested to tell
//! "that was all" from "there are more".

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use modsdk::ModError;

use crate::input;
use crate::run::Git;

pub const DESCRIPTION: &str = "Recent commits of the workspace's repository, newest first: hash, author, email, date (ISO 8601) \
and subject. Optionally from `revision` (a branch, tag, commit or range like main..feature; default HEAD) and only those touching \
`path`. Returns at most `max_count` commits (default 20, at most 200); `truncated` says there are more (use `skip` to page).";

const MAX_COUNT: usize = 200;
const MAX_BYTES: usize = 1 << 20;
/// A subject is cut at this many characters.
const MAX_SUBJECT_CHARS: usize = 500;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogInput {
    /// Where to start: a branch, tag, commit or range. Default HEAD.
    #[serde(default)]
    pub revision: Option<String>,
    /// Only commits touching this path (relative to the workspace).
    #[serde(default)]
    pub path: Option<String>,
    /// The most commits to return (1 to 200, default 20).
    #[serde(default)]
    #[schemars(range(min = 1, max = 200))]
    pub max_count: Option<usize>,
    /// Commits to skip first, to page through history.
    #[serde(default)]
    pub skip: Option<usize>,
}

#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct LogOutput {
    pub commits: Vec<Commit>,
    pub truncated: bool,
}

#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct Commit {
    pub hash: String,
    pub author: String,
    pub email: String,
    /// Author date, ISO 8601 with the author's offset.
    pub date: String,
    pub subject: String,
}

pub fn run(git: &Git, input: &LogInput) -> Result<LogOutput, ModError> {
    let max_count = input.max_count.unwrap_or(20).clamp(1, MAX_COUNT);
    let revision = input
        .revision
        .as_deref()
        .map(|r| input::revision("revision", r))
        .transpose()?;
    let path = input
        .path
        .as_deref()
        .map(|p| input::path("path", p))
        .transpose()?;
    let count = format!("--max-count={}", max_count + 1);
    let skip = format!("--skip={}", input.skip.unwrap_or(0));
    let mut args = vec![
        "log",
        "--no-show-signature",
        "--no-ext-diff",
        "--no-textconv",
        "--no-color",
        "--no-mailmap",
        "--format=%H%x1f%an%x1f%ae%x1f%aI%x1f%s%x1e",
        &count,
        &skip,
        "--end-of-options",
    ];
    args.extend(revision);
    args.push("--");
    args.extend(path.as_deref());
    let captured = git.run(&args, MAX_BYTES)?;
    let mut commits = parse(&captured.stdout);
    let truncated = captured.cut || commits.len() > max_count;
    commits.truncate(max_count);
    Ok(LogOutput { commits, truncated })
}

/// The complete records of `bytes` (a record cut by the output bound is dropped).
pub fn parse(bytes: &[u8]) -> Vec<Commit> {
    let text = String::from_utf8_lossy(bytes);
    let mut records: Vec<&str> = text.split('\x1e').collect();
    records.pop(); // after the last separator: empty, or a cut record
    records
        .into_iter()
        .filter_map(|record| {
            let mut fields = record.trim_start_matches('\n').splitn(5, '\x1f');
            Some(Commit {
                hash: fields.next()?.to_owned(),
                author: fields.next()?.to_owned(),
                email: fields.next()?.to_owned(),
                date: fields.next()?.to_owned(),
                subject: fields.next()?.chars().take(MAX_SUBJECT_CHARS).collect(),
            })
        })
        .collect()
}

pub fn render(output: &LogOutput) -> String {
    let mut lines: Vec<String> = output
        .commits
        .iter()
        .map(|c| {
            format!(
                "{} {} {} {}",
                &c.hash[..c.hash.len().min(10)],
                &c.date,
                c.author,
                c.subject
            )
        })
        .collect();
    if output.truncated {
        lines.push("… more commits (use skip)".into());
    }
    if lines.is_empty() {
        return "no commits".into();
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_record_is_dropped() {
        let bytes =
            b"h1\x1fA\x1fa@x\x1f2026-01-01T00:00:00+00:00\x1fone\x1e\nh2\x1fB\x1fb@x\x1f2026";
        let commits = parse(bytes);
        assert_eq!(commits.len(), 1);
        assert_eq!(commits[0].subject, "one");
    }
}

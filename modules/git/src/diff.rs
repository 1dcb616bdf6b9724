//! `git.diff`: what changed, as a per-file summary and a bounded patch; the
//! whole patch is written as an artifact when the inline one is cut.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use modsdk::{Ctx, ModError};

use crate::input;
use crate::run::Git;

pub const DESCRIPTION: &str = "The diff of the workspace's repository: by default the unstaged changes (working tree against the \
index); with `staged`, the staged ones (index against HEAD, or against `from`); with `from`, the working tree against that revision; \
with `from` and `to`, between two revisions. Optionally only `paths`. Returns the changed files with lines added and deleted \
(null for binary files) and the patch, cut at `max_bytes` (default 64 KiB, at most 512 KiB) on a line boundary; when cut, the whole \
patch (up to 32 MiB) is written as an artifact and named in `artifact`.";

const DEFAULT_INLINE_BYTES: usize = 64 * 1024;
const MAX_INLINE_BYTES: usize = 512 * 1024;
/// The most bytes of patch kept at all (the artifact's bound).
const MAX_PATCH_BYTES: usize = 32 << 20;
const MAX_PATHS: usize = 64;
const MAX_FILES: usize = 2000;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffInput {
    /// Compare the index (staged changes) instead of the working tree.
    #[serde(default)]
    pub staged: bool,
    /// The revision to compare against (default: the index, or HEAD with `staged`).
    #[serde(default)]
    pub from: Option<String>,
    /// A second revision: compare `from` with it (not with `staged`).
    #[serde(default)]
    pub to: Option<String>,
    /// Only these paths (relative to the workspace).
    #[serde(default)]
    #[schemars(length(max = 64))]
    pub paths: Vec<String>,
    /// The most bytes of patch returned inline (1024 to 524288, default 65536).
    #[serde(default)]
    #[schemars(range(min = 1024, max = 524_288))]
    pub max_bytes: Option<usize>,
}

#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct DiffOutput {
    pub files: Vec<FileChange>,
    /// The patch, cut at `max_bytes` on a line boundary.
    pub patch: String,
    /// Whether `patch` is cut.
    pub truncated: bool,
    /// The whole patch's size in bytes (at least this, when it passed 32 MiB).
    pub total_bytes: usize,
    /// Where the whole patch was written when `patch` is cut (artifacts root).
    pub artifact: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema, PartialEq, Eq)]
pub struct FileChange {
    pub path: String,
    /// Lines added; null for a binary file.
    pub added: Option<u64>,
    /// Lines deleted; null for a binary file.
    pub deleted: Option<u64>,
}

pub fn run(ctx: &mut Ctx, git: &Git, input: &DiffInput) -> Result<DiffOutput, ModError> {
    let from = input
        .from
        .as_deref()
        .map(|r| input::revision("from", r))
        .transpose()?;
    let to = input
        .to
        .as_deref()
        .map(|r| input::revision("to", r))
        .transpose()?;
    if to.is_some() && (from.is_none() || input.staged) {
        return Err(ModError::invalid_input(
            "`to` needs `from` and cannot be combined with `staged`",
        ));
    }
    if input.paths.len() > MAX_PATHS {
        return Err(ModError::invalid_input(format!(
            "at most {MAX_PATHS} paths"
        )));
    }
    let paths = input
        .paths
        .iter()
        .map(|p| input::path("paths", p))
        .collect::<Result<Vec<_>, _>>()?;
    let inline = input
        .max_bytes
        .unwrap_or(DEFAULT_INLINE_BYTES)
        .clamp(1024, MAX_INLINE_BYTES);

    let diff_args = |format: &[&'static str]| {
        let mut args: Vec<&str> = vec![
            "diff",
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            "--ignore-submodules=all",
        ];
        args.extend_from_slice(format);
        if input.staged {
            args.push("--cached");
        }
        args.push("--end-of-options");
        args.extend(from);
        args.extend(to);
        args.push("--");
        args.extend(paths.iter().map(String::as_str));
        args
    };
    let numstat = git.run(&diff_args(&["--numstat", "-z"]), 4 << 20)?;
    let files = parse_numstat(&numstat.stdout);
    let whole = git.run(&diff_args(&["--patch"]), MAX_PATCH_BYTES)?;
    if whole.cut {
        ctx.warn(format!(
            "the patch is larger than {} MiB; the artifact holds its first {} MiB",
            MAX_PATCH_BYTES >> 20,
            MAX_PATCH_BYTES >> 20
        ));
    }
    let total_bytes = whole.stdout.len();
    let cut_at = line_boundary(&whole.stdout, inline);
    let truncated = cut_at < total_bytes;
    let artifact = if truncated {
        let name = format!("diff-{}.patch", safe_name(ctx.request_id()));
        ctx.write_artifact(
            &name,
            &whole.stdout,
            Some("text/x-diff"),
            Some("the whole diff"),
        )?;
        Some(name)
    } else {
        None
    };
    let patch = String::from_utf8_lossy(&whole.stdout[..cut_at]).into_owned();
    Ok(DiffOutput {
        files,
        patch,
        truncated,
        total_bytes,
        artifact,
    })
}

/// The end of the last whole line within `limit` bytes (all of `bytes`
/// when they fit; the first `limit` bytes when one line is longer).
fn line_boundary(bytes: &[u8], limit: usize) -> usize {
    if bytes.len() <= limit {
        return bytes.len();
    }
    bytes[..limit]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(limit, |i| i + 1)
}

/// A request id as a file name: letters, digits, `-` and `_` only.
fn safe_name(id: &str) -> String {
    let name: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if name.is_empty() { "call".into() } else { name }
}

/// `git diff --numstat -z`: `added\tdeleted\tpath\0`, or for a rename
/// `added\tdeleted\t\0from\0to\0`; `-` counts mean binary.
pub fn parse_numstat(bytes: &[u8]) -> Vec<FileChange> {
    let mut files = Vec::new();
    let mut records = bytes.split(|&b| b == 0).map(String::from_utf8_lossy);
    while let Some(record) = records.next() {
        let mut fields = record.splitn(3, '\t');
        let (Some(added), Some(deleted), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let path = if path.is_empty() {
            let _from = records.next();
            records.next().map(|to| to.into_owned()).unwrap_or_default()
        } else {
            path.to_owned()
        };
        if files.len() == MAX_FILES {
            break;
        }
        files.push(FileChange {
            path,
            added: added.parse().ok(),
            deleted: deleted.parse().ok(),
        });
    }
    files
}

pub fn render(output: &DiffOutput) -> String {
    if output.files.is_empty() {
        return "no changes".into();
    }
    let mut text: String = output
        .files
        .iter()
        .map(|f| match (f.added, f.deleted) {
            (Some(a), Some(d)) => format!("{} +{a} -{d}\n", f.path),
            _ => format!("{} (binary)\n", f.path),
        })
        .collect();
    text.push('\n');
    text.push_str(&output.patch);
    if let Some(artifact) = &output.artifact {
        text.push_str(&format!(
            "\n… cut at {} of {} bytes; the whole patch is the artifact {artifact}",
            output.patch.len(),
            output.total_bytes
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numstat_with_renames_and_binaries() {
        let files = parse_numstat(b"3\t1\tsrc/a.rs\0-\t-\timg.png\x000\t0\t\0old.rs\0new.rs\0");
        let got: Vec<(&str, Option<u64>)> =
            files.iter().map(|f| (f.path.as_str(), f.added)).collect();
        assert_eq!(
            got,
            [
                ("src/a.rs", Some(3)),
                ("img.png", None),
                ("new.rs", Some(0))
            ]
        );
    }

    #[test]
    fn cuts_on_a_line_boundary() {
        assert_eq!(line_boundary(b"ab\ncd\nef", 7), 6);
        assert_eq!(line_boundary(b"ab\ncd\n", 10), 6);
        assert_eq!(line_boundary(b"abcdef", 3), 3);
        assert_eq!(safe_name("r-1/../x"), "r-1____x");
    }
}

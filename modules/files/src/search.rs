//! `files.search`: a regular expression over the workspace's text files.
//!
//! Like ripgrep's defaults: `.gitignore` is respected, `.git` and binary
//! files (a NUL byte in the first 8 KiB) are skipped, and a matched line is
//! cut at [`MAX_LINE_CHARS`] characters so one minified file cannot flood
//! the answer. Stops at `max_results` or at the deadline, and says so.
//!
//! Design decisions:
//!
//! - **ripgrep's engine.** Lines are found by `grep-searcher` with a
//!   `grep-regex` matcher (literal prefilters, a search over the whole buffer
//!   rather than a regex per line), over `ignore`'s parallel walker natively;
//!   a component has no threads, so it walks the same tree sequentially.
//! - **The same answer whatever the threads did.** Matches are kept by path
//!   in the order of a walk sorted by file name (a `BTreeMap` of relative
//!   paths: component-wise order is exactly that), so the result is the first
//!   `max_results` matches of that walk, and `truncated` says a further one
//!   exists. Only what can still be in the answer is held: once more than
//!   `max_results` matches are kept, files after the last one needed are
//!   dropped and no longer searched, and each file stops after
//!   `max_results + 1` matches.
//! - **Bounded by the deadline.** Every worker checks it before each file;
//!   past it the walk stops and the answer is `truncated`.
//! - File contents are read through the sdk's confined [`Root`], never
//!   through the walker's paths.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use grep_matcher::LineTerminator;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder};
use ignore::WalkState;
use modsdk::{EntryKind, ModError, Root};
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
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(input.case_insensitive)
        // Lines are matched without their ending, `\r\n` included.
        .line_terminator(Some(b'\n'))
        .crlf(true)
        .build(&input.pattern)
        .map_err(|e| ModError::invalid_input(format!("pattern {:?}: {e}", input.pattern)))?;
    let sub = walk::subdirectory(root, input.path.as_deref())?;
    let max_results = input.max_results.clamp(1, MAX_RESULTS_CAP);
    let found = Mutex::new(Found::new(max_results + 1));
    let visit = |entry: Result<ignore::DirEntry, ignore::Error>, searcher: &mut Searcher| {
        if Instant::now() >= deadline {
            lock(&found).out_of_time = true;
            return WalkState::Quit;
        }
        // An unreadable directory is not a reason to fail the whole search.
        let Ok(entry) = entry else {
            return WalkState::Continue;
        };
        let Some(rel) = walk::relative(root.path(), entry.path()) else {
            return WalkState::Continue;
        };
        // A regular file as listed is opened and checked on its descriptor
        // (`search_file`); a link is looked at through the root first, so
        // what it leads to (a fifo, a device) is not even opened unless it
        // is a regular file inside the root.
        let is_a_file = match entry.file_type() {
            Some(kind) if kind.is_file() => true,
            Some(kind) if !kind.is_symlink() => false,
            _ => matches!(
                walk::kind_through_root(root, &rel, entry.file_type()),
                Some((EntryKind::File, _))
            ),
        };
        if !is_a_file || !lock(&found).may_hold(&rel) {
            return WalkState::Continue;
        }
        let matches = search_file(root, &rel, &matcher, searcher, max_results + 1);
        lock(&found).add(rel, matches);
        WalkState::Continue
    };
    let mut walker = walk::builder(root, &sub, None, input.glob.as_deref())?;
    if cfg!(target_os = "wasi") {
        let mut searcher = searcher();
        for entry in walker.build() {
            if visit(entry, &mut searcher) == WalkState::Quit {
                break;
            }
        }
    } else {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
        walker.threads(threads).build_parallel().run(|| {
            let visit = &visit;
            let mut searcher = searcher();
            Box::new(move |entry| visit(entry, &mut searcher))
        });
    }
    let found = found
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    Ok(found.into_output(max_results))
}

fn lock(found: &Mutex<Found>) -> std::sync::MutexGuard<'_, Found> {
    found
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The searcher each worker reuses: line numbers on, binary files decided
/// by [`search_file`]'s own probe (as before: a NUL in the first 8 KiB).
fn searcher() -> Searcher {
    SearcherBuilder::new()
        // As the matcher's: lines end at `\n`, a `\r` before it is no part of the line.
        .line_terminator(LineTerminator::crlf())
        .line_number(true)
        .binary_detection(BinaryDetection::none())
        .build()
}

/// The matches kept so far, by path in sorted-walk order.
struct Found {
    by_path: BTreeMap<PathBuf, Vec<Match>>,
    count: usize,
    /// `max_results + 1`: enough to answer and to know there is more.
    keep: usize,
    out_of_time: bool,
}

impl Found {
    fn new(keep: usize) -> Found {
        Found {
            by_path: BTreeMap::new(),
            count: 0,
            keep,
            out_of_time: false,
        }
    }

    /// Whether matches in `rel` could still be part of the answer.
    fn may_hold(&self, rel: &Path) -> bool {
        self.count < self.keep
            || self
                .by_path
                .last_key_value()
                .is_some_and(|(last, _)| rel < last.as_path())
    }

    fn add(&mut self, rel: PathBuf, matches: Vec<Match>) {
        if matches.is_empty() {
            return;
        }
        self.count += matches.len();
        self.by_path.insert(rel, matches);
        // Drop the last files while the others hold enough without them.
        while let Some(entry) = self.by_path.last_entry() {
            if self.count - entry.get().len() < self.keep {
                break;
            }
            self.count -= entry.remove().len();
        }
    }

    fn into_output(self, max_results: usize) -> SearchOutput {
        let truncated = self.out_of_time || self.count > max_results;
        let mut matches: Vec<Match> = self.by_path.into_values().flatten().collect();
        matches.truncate(max_results);
        SearchOutput { matches, truncated }
    }
}

/// The first `keep` matching lines of one text file (none for a binary
/// file, for anything but a regular file, or for one that vanished or
/// cannot be opened since the walk saw it). The kind is checked on the open
/// file: one `fstat`, where a `stat` through the root first would cost
/// three system calls per file. The file is read to its end, whatever size
/// its `fstat` said (procfs, sysfs and some network file systems report
/// less than they hold); a file the binary probe read to its end (most of
/// a source tree) is searched in that buffer, not read again.
fn search_file(
    root: &Root,
    rel: &Path,
    matcher: &RegexMatcher,
    searcher: &mut Searcher,
    keep: usize,
) -> Vec<Match> {
    let Ok(mut file) = root.open_regular_file(rel) else {
        return Vec::new();
    };
    let mut head = Vec::with_capacity(BINARY_PROBE_BYTES);
    if (&mut file)
        .take(BINARY_PROBE_BYTES as u64)
        .read_to_end(&mut head)
        .is_err()
        || head.contains(&0)
    {
        return Vec::new();
    }
    // Most files match nothing: their path is written out at the first match.
    let mut path: Option<String> = None;
    let mut matches = Vec::new();
    let sink = Lossy(|number, line| {
        matches.push(Match {
            path: path.get_or_insert_with(|| walk::to_slash(rel)).clone(),
            line: number,
            text: cut(line.trim_end_matches(['\n', '\r']), MAX_LINE_CHARS),
        });
        Ok(matches.len() < keep)
    });
    // A read error ends the file with the matches found so far, as before.
    // A probe shorter than its limit met the end of the file.
    let _ = if head.len() < BINARY_PROBE_BYTES {
        searcher.search_slice(matcher, &head, sink)
    } else {
        searcher.search_reader(matcher, std::io::Cursor::new(head).chain(file), sink)
    };
    matches
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
    use crate::test_support::{far_deadline, workspace};
    use modsdk::{Access, RootKind};

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

    /// Every size around the binary probe is searched to its last byte: an
    /// empty file, files the probe read to their end (the last line without
    /// its newline), one a byte longer, and one read on past the probe. A
    /// NUL within the probe still makes a file binary.
    #[test]
    fn files_shorter_and_longer_than_the_probe_are_searched_to_their_last_byte() {
        let padded = |len: usize| {
            let tail = "needle";
            let mut text = "x\n".repeat((len - tail.len()) / 2);
            while text.len() + tail.len() < len {
                text.push('\n');
            }
            text.push_str(tail);
            assert_eq!(text.len(), len);
            text
        };
        let sizes = [
            BINARY_PROBE_BYTES - 1,
            BINARY_PROBE_BYTES,
            BINARY_PROBE_BYTES + 1,
            3 * BINARY_PROBE_BYTES + 5,
        ];
        let texts: Vec<(String, String)> = sizes
            .iter()
            .map(|&len| (format!("f{len}.txt"), padded(len)))
            .collect();
        let mut files: Vec<(&str, &str)> = texts
            .iter()
            .map(|(name, text)| (name.as_str(), text.as_str()))
            .collect();
        files.push(("empty.txt", ""));
        files.push(("binary.txt", "needle\n\0\n"));
        let (_dir, root) = workspace(&files);
        let out = search(&root, serde_json::json!({"pattern": "needle$"})).unwrap();
        let mut expected: Vec<(String, u64)> = texts
            .iter()
            .map(|(name, text)| (name.clone(), text.lines().count() as u64))
            .collect();
        expected.sort();
        assert_eq!(found(&out), expected);
        assert!(out.matches.iter().all(|m| m.text == "needle"));
    }

    /// procfs says its files hold nothing (`st_size` 0) and sysfs says 4096
    /// bytes; some network and FUSE file systems understate too. A file is
    /// read to its end whatever its size said.
    #[test]
    fn a_file_is_searched_to_its_end_whatever_size_it_reports() {
        let status = std::path::Path::new("/proc/self/status");
        assert_eq!(
            std::fs::metadata(status).unwrap().len(),
            0,
            "procfs reports no size"
        );
        let root =
            Root::open("workspace", "/proc/self", RootKind::Workspace, Access::Read).unwrap();
        let out = search(
            &root,
            serde_json::json!({"pattern": "^(Name|Pid):", "path": "status"}),
        )
        .unwrap();
        let names: Vec<&str> = out.matches.iter().map(|m| &m.text[..4]).collect();
        assert_eq!(names, ["Name", "Pid:"], "{out:?}");
    }

    /// What the listing says is a file, or a link, is checked on the open
    /// file: a link to a file inside is searched, a link out of the root is
    /// not, and a fifo behind a link (which no writer opens) is skipped
    /// without hanging the search on its open.
    #[test]
    fn only_regular_files_inside_the_root_are_searched_and_a_fifo_never_blocks() {
        let (dir, root) = workspace(&[("src/a.txt", "needle\n")]);
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "needle\n").unwrap();
        let link = |target: &std::path::Path, name: &str| {
            std::os::unix::fs::symlink(target, dir.path().join(name)).unwrap();
        };
        link(std::path::Path::new("src/a.txt"), "inside.txt");
        link(&outside.path().join("secret.txt"), "out.txt");
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        link(std::path::Path::new("pipe"), "pipe.txt");
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let out = search(&root, serde_json::json!({"pattern": "needle"}));
            let _ = sender.send(out.map(|out| found(&out)));
        });
        let found = receiver
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("a fifo behind a link hung the search")
            .unwrap();
        assert_eq!(
            found,
            [("inside.txt".to_owned(), 1), ("src/a.txt".to_owned(), 1)]
        );
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

    /// However the workers interleave, the answer is the first
    /// `max_results` matches of the walk sorted by file name, and
    /// `truncated` says whether one more exists.
    #[test]
    fn matches_come_in_sorted_walk_order_and_the_cut_is_deterministic() {
        let names: Vec<String> = (0..40)
            .map(|i| format!("d{}/sub{}/f{:02}.txt", i % 3, i % 2, i))
            .chain(["a.txt".into(), "d1.txt".into(), "d1/z.txt".into()])
            .collect();
        let files: Vec<(&str, &str)> = names
            .iter()
            .map(|n| (n.as_str(), "needle\nhay\nneedle\n"))
            .collect();
        let (_dir, root) = workspace(&files);
        let mut sorted: Vec<std::path::PathBuf> =
            names.iter().map(std::path::PathBuf::from).collect();
        sorted.sort();
        let expected: Vec<(String, u64)> = sorted
            .iter()
            .flat_map(|p| [(walk::to_slash(p), 1), (walk::to_slash(p), 3)])
            .collect();
        assert_eq!(expected[0].0, "a.txt");
        assert_eq!(
            expected[2].0, "d0/sub0/f00.txt",
            "a folder's files before its later siblings"
        );
        let all = search(
            &root,
            serde_json::json!({"pattern": "needle", "max_results": 1000}),
        )
        .unwrap();
        assert_eq!(found(&all), expected);
        assert!(!all.truncated);
        for max in [1, 7, 40, 85, 86] {
            for _ in 0..5 {
                let out = search(
                    &root,
                    serde_json::json!({"pattern": "needle", "max_results": max}),
                )
                .unwrap();
                assert_eq!(
                    found(&out),
                    expected[..max.min(expected.len())],
                    "max {max}"
                );
                assert_eq!(out.truncated, max < expected.len(), "max {max}");
            }
        }
    }

    #[test]
    fn a_line_ends_before_its_carriage_return() {
        let (_dir, root) = workspace(&[("a.txt", "end\r\nnot the end here\r\n")]);
        let out = search(&root, serde_json::json!({"pattern": "end$"})).unwrap();
        assert_eq!(found(&out), [("a.txt".to_owned(), 1)]);
        assert_eq!(out.matches[0].text, "end");
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

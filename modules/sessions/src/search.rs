//! `sessions.search`: text in the user and assistant turns of recent
//! sessions, each match with its session, turn and line.
//!
//! The query is literal and matched ignoring ASCII case, on the text as
//! written (tool inputs and outputs are not turns and are not searched).
//! Sessions are searched most recent first, each in one pass, and the search
//! stops at `max_results`, at the deadline, or at the end; one match per
//! text, its snippet cut around the match so the answer stays bounded.

use std::time::Instant;

use modsdk::{ModError, Root};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::catalog::{self, Selection};
use crate::session::{Role, Unreadable};
use crate::transcript;

pub const DESCRIPTION: &str = "Search the user and assistant turns of agent sessions (Claude Code and Codex transcripts) for a text, \
most recent sessions first. Literal text, ASCII case ignored. Each match gives the `session` reference, the 1-based `turn` and file `line`, \
the role, the timestamp and a snippet around the match (at most 240 characters). Narrow with `role`, `last` (only the N most recent sessions) \
or `sessions` (names from sessions.list). `truncated` is true when the search stopped at `max_results` or the deadline.";

/// Characters of context kept before a match in a snippet.
const SNIPPET_BEFORE: usize = 80;
/// Longest snippet, in characters.
pub const MAX_SNIPPET_CHARS: usize = 240;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchInput {
    /// The text to find (literal; ASCII case is ignored).
    #[schemars(length(min = 1, max = 500))]
    pub query: String,
    /// Only turns by this role.
    #[serde(default)]
    pub role: Option<Role>,
    /// Only the N most recent sessions (default: all).
    #[serde(default)]
    #[schemars(range(min = 1, max = 100000))]
    pub last: Option<usize>,
    /// Only these sessions: a `session` reference, a session file name without `.jsonl`, or a Codex session uuid.
    #[serde(default)]
    #[schemars(length(max = 100))]
    pub sessions: Vec<String>,
    /// The most matches to return (1 to 200).
    #[serde(default = "default_max_results")]
    #[schemars(range(min = 1, max = 200))]
    pub max_results: usize,
}

fn default_max_results() -> usize {
    20
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SearchOutput {
    pub matches: Vec<Match>,
    /// Transcripts read as sessions (completely or up to the stop); skipped files are not counted.
    pub sessions_searched: usize,
    /// Named sessions that matched no transcript file.
    pub not_found: Vec<String>,
    pub skipped: Vec<Unreadable>,
    pub truncated: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Match {
    pub session: String,
    /// 1-based turn of the session (user and assistant turns together).
    pub turn: u64,
    /// 1-based line of the transcript file.
    pub line: u64,
    pub role: Role,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// The text around the match, on one line.
    pub snippet: String,
}

pub fn run(root: &Root, input: &SearchInput, deadline: Instant) -> Result<SearchOutput, ModError> {
    if input.query.trim().is_empty() {
        return Err(ModError::invalid_input("query is empty")
            .with_remedy("give the text to search for in `query`"));
    }
    let catalog = catalog::walk(root)?;
    let selection = if input.sessions.is_empty() {
        Selection::Recent(input.last)
    } else {
        Selection::Named(&input.sessions)
    };
    let selected = catalog.select(selection);
    let max_results = input.max_results.clamp(1, 200);
    let mut output = SearchOutput {
        matches: Vec::new(),
        sessions_searched: 0,
        not_found: selected.not_found,
        skipped: catalog.skipped,
        truncated: catalog.truncated,
    };
    let query = input.query.as_bytes();
    for file in &selected.files {
        if output.matches.len() >= max_results || Instant::now() >= deadline {
            output.truncated = true;
            break;
        }
        let matches = &mut output.matches;
        let mut full = false;
        let read = transcript::read(root, &file.path, deadline, &mut |text| {
            if full || input.role.is_some_and(|role| role != text.role) {
                return;
            }
            let Some(at) = find_ignoring_ascii_case(text.text.as_bytes(), query) else {
                return;
            };
            if matches.len() == max_results {
                full = true;
                return;
            }
            matches.push(Match {
                session: file.path.clone(),
                turn: text.turn,
                line: text.line,
                role: text.role,
                timestamp: text.timestamp.map(str::to_owned),
                snippet: snippet(text.text, at),
            });
        });
        match read {
            Ok(session) => {
                output.sessions_searched += 1;
                output.truncated |= full || !session.complete;
            }
            Err(unreadable) => output.skipped.push(unreadable),
        }
    }
    Ok(output)
}

/// The first byte offset where `needle` occurs in `haystack`, ASCII letters
/// compared without case, every other byte exactly (so the offset is always
/// on a character boundary of valid UTF-8).
pub fn find_ignoring_ascii_case(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || needle.len() > haystack.len() {
        return None;
    }
    haystack
        .windows(needle.len())
        .position(|window| window.eq_ignore_ascii_case(needle))
}

/// Up to [`MAX_SNIPPET_CHARS`] characters of `text` from a little before the
/// match at byte `at`, whitespace runs folded to one space, `…` where cut.
pub fn snippet(text: &str, at: usize) -> String {
    let before: Vec<(usize, char)> = text[..at]
        .char_indices()
        .rev()
        .take(SNIPPET_BEFORE)
        .collect();
    let start = before.last().map_or(at, |(i, _)| *i);
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    let mut chars = 0;
    let mut last_space = false;
    let mut cut = false;
    for c in text[start..].chars() {
        if chars >= MAX_SNIPPET_CHARS {
            cut = true;
            break;
        }
        if c.is_whitespace() {
            if !last_space {
                out.push(' ');
                chars += 1;
            }
            last_space = true;
        } else {
            out.push(c);
            chars += 1;
            last_space = false;
        }
    }
    if cut {
        out.push('…');
    }
    out
}

/// One line per match.
pub fn render(output: &SearchOutput) -> String {
    let mut text = String::new();
    for m in &output.matches {
        text.push_str(&format!(
            "{} turn {} (line {}, {}): {}\n",
            m.session,
            m.turn,
            m.line,
            m.role.label(),
            m.snippet
        ));
    }
    if output.matches.is_empty() {
        text.push_str(&format!(
            "no matches in {} sessions\n",
            output.sessions_searched
        ));
    }
    if output.truncated {
        text.push_str("(stopped early: narrow the search or raise max_results)\n");
    }
    for name in &output.not_found {
        text.push_str(&format!("not found: {name}\n"));
    }
    for skip in &output.skipped {
        text.push_str(&format!("skipped {}: {}\n", skip.session, skip.reason));
    }
    text
}

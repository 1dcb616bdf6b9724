//! One transcript file read in one pass into a [`Session`]: its summary, and
//! every user and assistant text handed to a callback as it goes by.
//!
//! Design decisions:
//!
//! - **One pass, bounded memory.** The file is streamed line by line
//!   ([`LineReader`]); what is kept per file is the summary (counters, a
//!   capped map of tool names, a few models) and the pending usage of the
//!   current message, never the lines. Search sees each text through the
//!   callback while the line is in hand, so no capability reads a file twice.
//! - **The format is detected per file**, from its first records
//!   ([`crate::transcript`]): Claude Code's (`~/.claude/projects/<project>/<session>.jsonl`)
//!   or Codex's (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`, both the
//!   envelope format and the older bare one). A file in neither is
//!   [`Unreadable`] with the reason, never guessed at.
//! - **A bad line is counted, not fatal.** A transcript being written ends
//!   in a half line, and one corrupt line should not hide a session; lines
//!   that are not JSON (or too long to hold) are counted in
//!   `unreadable_lines`, and the first one is named in `first_unreadable`.
//! - The parsers of each format ([`crate::claude`], [`crate::codex`], driven
//!   by [`crate::transcript`]) only call the [`Recorder`]; what a turn, a
//!   tool call or an error is in the output is decided here once.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::timestamp::parse_millis;

/// Distinct tool names kept per session; more are counted under [`OTHER_TOOLS`].
const MAX_TOOL_NAMES: usize = 200;
/// Where tool calls beyond [`MAX_TOOL_NAMES`] distinct names are counted.
pub const OTHER_TOOLS: &str = "(other tools)";
/// Distinct models kept per session.
const MAX_MODELS: usize = 8;
/// Longest id, project, model or tool name kept, in bytes.
const MAX_NAME_BYTES: usize = 200;

/// The agent that wrote a transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// Claude Code: `~/.claude/projects/<project>/<session>.jsonl`.
    ClaudeCode,
    /// Codex CLI: `~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`.
    Codex,
}

impl Format {
    pub fn label(self) -> &'static str {
        match self {
            Format::ClaudeCode => "claude-code",
            Format::Codex => "codex",
        }
    }
}

/// Who wrote a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

impl Role {
    pub fn label(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// Token usage as the agent recorded it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Tokens {
    /// Input tokens not read from a cache.
    pub input: u64,
    pub output: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read: u64,
    /// Input tokens written to the prompt cache (Claude Code only).
    pub cache_write: u64,
}

impl Tokens {
    pub fn add(&mut self, other: Tokens) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
    }

    /// Field by field, the larger: streaming records repeat a message's
    /// usage, growing, and the last word is the largest.
    pub fn max(self, other: Tokens) -> Tokens {
        Tokens {
            input: self.input.max(other.input),
            output: self.output.max(other.output),
            cache_read: self.cache_read.max(other.cache_read),
            cache_write: self.cache_write.max(other.cache_write),
        }
    }
}

/// Turns by role.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Turns {
    pub user: u64,
    pub assistant: u64,
}

/// What one transcript says about its session.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Session {
    /// The transcript's path relative to the `transcripts` root: the
    /// reference to pass back as a session name.
    pub session: String,
    pub format: Format,
    /// The session id the agent recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The working directory the agent ran in (Claude Code: else the project folder name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// Models that answered, in order of first appearance.
    pub models: Vec<String>,
    /// The first timestamp recorded (RFC 3339, as written).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    /// The last timestamp recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    /// From the first to the last timestamp, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<u64>,
    /// Lines in the file.
    pub lines: u64,
    pub turns: Turns,
    /// Tool calls by tool name.
    pub tool_calls: BTreeMap<String, u64>,
    /// Tool calls whose result the agent recorded as an error (Codex: a non-zero exit code).
    pub tool_errors: u64,
    /// API and agent errors recorded in the transcript.
    pub errors: u64,
    /// Token usage, when the agent recorded it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Tokens>,
    /// Lines that are not JSON or too long to read; they are skipped.
    pub unreadable_lines: u64,
    /// The first unreadable line: its number and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_unreadable: Option<String>,
    /// False when the call's deadline stopped the reading before the end.
    pub complete: bool,
    #[serde(skip)]
    #[schemars(skip)]
    pub(crate) started_ms: Option<i64>,
    #[serde(skip)]
    #[schemars(skip)]
    pub(crate) ended_ms: Option<i64>,
}

impl Session {
    pub(crate) fn new(path: &str, format: Format) -> Session {
        Session {
            session: path.to_owned(),
            format,
            id: None,
            project: None,
            models: Vec::new(),
            started: None,
            ended: None,
            duration_seconds: None,
            lines: 0,
            turns: Turns::default(),
            tool_calls: BTreeMap::new(),
            tool_errors: 0,
            errors: 0,
            tokens: None,
            unreadable_lines: 0,
            first_unreadable: None,
            complete: true,
            started_ms: None,
            ended_ms: None,
        }
    }

    /// All tool calls, whatever the tool.
    pub fn tool_calls_total(&self) -> u64 {
        self.tool_calls.values().sum()
    }
}

/// A transcript that could not be read, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Unreadable {
    /// The file, relative to the `transcripts` root.
    pub session: String,
    pub reason: String,
}

/// One user or assistant text, as it is read.
#[derive(Debug)]
pub struct TurnText<'a> {
    /// 1-based number of the turn in its session (user and assistant turns together).
    pub turn: u64,
    pub role: Role,
    /// 1-based line of the file it is on.
    pub line: u64,
    pub timestamp: Option<&'a str>,
    pub text: &'a str,
}

/// What the format parsers report to; the one place that decides what
/// counts as what.
pub struct Recorder<'a> {
    pub(crate) session: Session,
    pub(crate) on_text: &'a mut dyn FnMut(&TurnText<'_>),
    pub(crate) line: u64,
    pub(crate) stamp: String,
}

impl std::fmt::Debug for Recorder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("session", &self.session)
            .field("line", &self.line)
            .finish_non_exhaustive()
    }
}

impl Recorder<'_> {
    /// A record's timestamp: moves the session's start and end.
    pub fn timestamp(&mut self, text: &str) {
        let Some(ms) = parse_millis(text) else {
            return;
        };
        self.stamp.clear();
        self.stamp.push_str(text);
        let session = &mut self.session;
        if session.started_ms.is_none_or(|start| ms < start) {
            session.started_ms = Some(ms);
            session.started = Some(text.to_owned());
        }
        if session.ended_ms.is_none_or(|end| ms > end) {
            session.ended_ms = Some(ms);
            session.ended = Some(text.to_owned());
        }
    }

    pub fn id(&mut self, id: &str) {
        if self.session.id.is_none() && !id.is_empty() {
            self.session.id = Some(capped(id));
        }
    }

    pub fn project(&mut self, project: &str) {
        if self.session.project.is_none() && !project.is_empty() {
            self.session.project = Some(capped(project));
        }
    }

    pub fn model(&mut self, model: &str) {
        let models = &mut self.session.models;
        if !model.is_empty() && models.len() < MAX_MODELS && !models.iter().any(|m| m == model) {
            models.push(capped(model));
        }
    }

    /// A user turn with its text.
    pub fn user_turn(&mut self, text: &str) {
        self.session.turns.user += 1;
        self.text(Role::User, text);
    }

    /// A new assistant turn (its texts follow with [`Recorder::assistant_text`]).
    pub fn assistant_turn(&mut self) {
        self.session.turns.assistant += 1;
    }

    /// Text of the current assistant turn.
    pub fn assistant_text(&mut self, text: &str) {
        self.text(Role::Assistant, text);
    }

    pub fn tool_call(&mut self, name: &str) {
        let calls = &mut self.session.tool_calls;
        let name = if calls.contains_key(name) || calls.len() < MAX_TOOL_NAMES {
            capped(name)
        } else {
            OTHER_TOOLS.to_owned()
        };
        *calls.entry(name).or_default() += 1;
    }

    pub fn tool_error(&mut self) {
        self.session.tool_errors += 1;
    }

    pub fn error(&mut self) {
        self.session.errors += 1;
    }

    /// Usage to add to the session's total.
    pub fn add_tokens(&mut self, tokens: Tokens) {
        self.session.tokens.get_or_insert_default().add(tokens);
    }

    /// A running total that replaces the session's (Codex reports cumulative usage).
    pub fn total_tokens(&mut self, tokens: Tokens) {
        self.session.tokens = Some(tokens);
    }

    fn text(&mut self, role: Role, text: &str) {
        if text.is_empty() {
            return;
        }
        let turns = self.session.turns;
        (self.on_text)(&TurnText {
            turn: turns.user + turns.assistant,
            role,
            line: self.line,
            timestamp: (!self.stamp.is_empty()).then_some(self.stamp.as_str()),
            text,
        });
    }

    pub(crate) fn unreadable(&mut self, why: impl FnOnce() -> String) {
        self.session.unreadable_lines += 1;
        if self.session.first_unreadable.is_none() {
            self.session.first_unreadable = Some(format!("line {}: {}", self.line, why()));
        }
    }
}

/// `text` cut to [`MAX_NAME_BYTES`] on a character boundary.
fn capped(text: &str) -> String {
    if text.len() <= MAX_NAME_BYTES {
        return text.to_owned();
    }
    let mut end = MAX_NAME_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

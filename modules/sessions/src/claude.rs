//! Claude Code transcripts: `~/.claude/projects/<project>/<session>.jsonl`
//! (and subagents' `<session>/subagents/agent-*.jsonl`).
//!
//! Each line is a record with a `type`: `user` and `assistant` carry an
//! Anthropic Messages API `message` (`role`, `content` as a string or an
//! array of blocks: `text`, `thinking`, `tool_use`, `tool_result`; an
//! assistant message has `id`, `model` and `usage`); `system`, `summary`,
//! `queue-operation`, `file-history-snapshot` and others are bookkeeping.
//! Records carry `sessionId`, `cwd` and `timestamp`.
//!
//! Two things the format does that a naive count gets wrong:
//! - **One API message is written as several records** (one per content
//!   block while streaming), each with the same `message.id` and a copy of
//!   its usage. A turn is a message id, and its usage is counted once (the
//!   largest of its copies), as ccusage and ccstats do.
//! - **Tool results come back as `user` records** (`tool_result` blocks,
//!   `is_error` on failure). They are not user turns.
//!
//! `isMeta` user records (caveats the CLI injects) are not turns either, and
//! the `<synthetic>` model of locally made messages is not a model.

use serde_json::{Map, Value};

use crate::session::{Recorder, Tokens};

/// The record types this reader knows; any of them identifies the format.
const RECORD_TYPES: &[&str] = &[
    "user",
    "assistant",
    "system",
    "summary",
    "queue-operation",
    "file-history-snapshot",
];

/// Whether `record` is a Claude Code record (Codex's carry a `payload`).
pub fn recognizes(record: &Map<String, Value>) -> bool {
    let known = record
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| RECORD_TYPES.contains(&t));
    known && !record.contains_key("payload")
}

/// The message being streamed, so its repeated records count once.
#[derive(Debug, Default)]
pub struct State {
    message_id: Option<String>,
    usage: Option<Tokens>,
}

impl State {
    pub fn apply(&mut self, record: &Map<String, Value>, recorder: &mut Recorder<'_>) {
        if let Some(id) = record.get("sessionId").and_then(Value::as_str) {
            recorder.id(id);
        }
        if let Some(cwd) = record.get("cwd").and_then(Value::as_str) {
            recorder.project(cwd);
        }
        let message = record.get("message").and_then(Value::as_object);
        match (record.get("type").and_then(Value::as_str), message) {
            (Some("user"), Some(message)) => user(record, message, recorder),
            (Some("assistant"), Some(message)) => self.assistant(record, message, recorder),
            (Some("system"), _) if record.get("level").and_then(Value::as_str) == Some("error") => {
                recorder.error();
            }
            _ => {}
        }
    }

    /// Count the usage of the last message.
    pub fn finish(mut self, recorder: &mut Recorder<'_>) {
        self.commit(recorder);
    }

    fn assistant(
        &mut self,
        record: &Map<String, Value>,
        message: &Map<String, Value>,
        recorder: &mut Recorder<'_>,
    ) {
        let id = message.get("id").and_then(Value::as_str);
        let continues = id.is_some() && id == self.message_id.as_deref();
        if !continues {
            self.commit(recorder);
            self.message_id = id.map(str::to_owned);
            recorder.assistant_turn();
        }
        if let Some(model) = message.get("model").and_then(Value::as_str)
            && model != "<synthetic>"
        {
            recorder.model(model);
        }
        if let Some(usage) = message.get("usage").and_then(Value::as_object) {
            let tokens = Tokens {
                input: number(usage, "input_tokens"),
                output: number(usage, "output_tokens"),
                cache_read: number(usage, "cache_read_input_tokens"),
                cache_write: number(usage, "cache_creation_input_tokens"),
            };
            self.usage = Some(self.usage.map_or(tokens, |seen| seen.max(tokens)));
        }
        if record.get("isApiErrorMessage").and_then(Value::as_bool) == Some(true) {
            recorder.error();
        }
        for block in blocks(message) {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    if let Some(text) = block.get("text").and_then(Value::as_str) {
                        recorder.assistant_text(text);
                    }
                }
                Some("tool_use" | "server_tool_use") => {
                    let name = block.get("name").and_then(Value::as_str).unwrap_or("?");
                    recorder.tool_call(name);
                }
                _ => {}
            }
        }
    }

    fn commit(&mut self, recorder: &mut Recorder<'_>) {
        if let Some(usage) = self.usage.take() {
            recorder.add_tokens(usage);
        }
        self.message_id = None;
    }
}

fn user(record: &Map<String, Value>, message: &Map<String, Value>, recorder: &mut Recorder<'_>) {
    let is_meta = record.get("isMeta").and_then(Value::as_bool) == Some(true);
    let mut text = String::new();
    match message.get("content") {
        Some(Value::String(content)) => text.push_str(content),
        _ => {
            for block in blocks(message) {
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        if let Some(part) = block.get("text").and_then(Value::as_str) {
                            if !text.is_empty() {
                                text.push('\n');
                            }
                            text.push_str(part);
                        }
                    }
                    Some("tool_result")
                        if block.get("is_error").and_then(Value::as_bool) == Some(true) =>
                    {
                        recorder.tool_error();
                    }
                    _ => {}
                }
            }
        }
    }
    if !is_meta && !text.is_empty() {
        recorder.user_turn(&text);
    }
}

/// The content blocks of a message (none when `content` is a string).
fn blocks(message: &Map<String, Value>) -> impl Iterator<Item = &Map<String, Value>> {
    message
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
}

fn number(map: &Map<String, Value>, key: &str) -> u64 {
    map.get(key).and_then(Value::as_u64).unwrap_or(0)
}

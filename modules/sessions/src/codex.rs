//! Codex CLI transcripts: `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl`.
//!
//! Current Codex writes envelopes, `{timestamp, type, payload}`, with `type`
//! one of `session_meta` (id, cwd, cli version), `turn_context` (cwd, model),
//! `response_item` (the Responses API items: `message` with `role` and
//! `input_text`/`output_text` content, `function_call`, `custom_tool_call`,
//! `local_shell_call` and their `*_output`, `reasoning`), `event_msg` (UI
//! events: `user_message`, `agent_message`, `token_count` with the running
//! `total_token_usage`, `error`) and `compacted`. Codex before the envelope
//! (spring 2025) wrote a bare first line `{id, timestamp, instructions, git}`
//! and then the response items themselves, one per line.
//!
//! Turns are counted from `response_item` messages only: the `event_msg`
//! echoes of the same text would count every turn twice. The context Codex
//! injects as user messages (`<environment_context>`, `<user_instructions>`,
//! the AGENTS.md text) is not a user turn. Usage is cumulative in Codex, so
//! the last `token_count` is the session's total.

use serde_json::{Map, Value};

use crate::session::{Recorder, Tokens};

const ENVELOPE_TYPES: &[&str] = &[
    "session_meta",
    "turn_context",
    "response_item",
    "event_msg",
    "compacted",
];

/// User messages Codex writes itself, recognized by how they start.
const INJECTED_PREFIXES: &[&str] = &[
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<permissions instructions>",
];

/// The parser of a Codex file: envelopes, or the older bare items.
#[derive(Debug, Clone, Copy)]
pub struct State {
    bare: bool,
}

/// Whether `record` starts a Codex transcript, and which kind.
pub fn recognizes(record: &Map<String, Value>) -> Option<State> {
    let kind = record.get("type").and_then(Value::as_str);
    if kind.is_some_and(|t| ENVELOPE_TYPES.contains(&t))
        && record.get("payload").is_some_and(Value::is_object)
    {
        return Some(State { bare: false });
    }
    let bare_meta = kind.is_none()
        && record.get("id").is_some_and(Value::is_string)
        && record.get("timestamp").is_some_and(Value::is_string)
        && (record.contains_key("instructions") || record.contains_key("git"));
    bare_meta.then_some(State { bare: true })
}

impl State {
    pub fn apply(self, record: &Map<String, Value>, recorder: &mut Recorder<'_>) {
        if self.bare {
            match record.get("type").and_then(Value::as_str) {
                Some(_) => item(record, recorder),
                None => meta(record, recorder),
            }
            return;
        }
        let Some(payload) = record.get("payload").and_then(Value::as_object) else {
            return;
        };
        match record.get("type").and_then(Value::as_str) {
            Some("session_meta") => meta(payload, recorder),
            Some("turn_context") => {
                if let Some(model) = payload.get("model").and_then(Value::as_str) {
                    recorder.model(model);
                }
                if let Some(cwd) = payload.get("cwd").and_then(Value::as_str) {
                    recorder.project(cwd);
                }
            }
            Some("response_item") => item(payload, recorder),
            Some("event_msg") => event(payload, recorder),
            _ => {}
        }
    }
}

fn meta(meta: &Map<String, Value>, recorder: &mut Recorder<'_>) {
    if let Some(id) = meta.get("id").and_then(Value::as_str) {
        recorder.id(id);
    }
    if let Some(cwd) = meta.get("cwd").and_then(Value::as_str) {
        recorder.project(cwd);
    }
    if let Some(stamp) = meta.get("timestamp").and_then(Value::as_str) {
        recorder.timestamp(stamp);
    }
}

fn item(item: &Map<String, Value>, recorder: &mut Recorder<'_>) {
    match item.get("type").and_then(Value::as_str) {
        Some("message") => message(item, recorder),
        Some("function_call" | "custom_tool_call") => {
            recorder.tool_call(item.get("name").and_then(Value::as_str).unwrap_or("?"));
        }
        Some("local_shell_call") => recorder.tool_call("local_shell"),
        Some("web_search_call") => recorder.tool_call("web_search"),
        Some("function_call_output" | "custom_tool_call_output")
            if output_failed(item.get("output")) =>
        {
            recorder.tool_error();
        }
        _ => {}
    }
}

fn message(item: &Map<String, Value>, recorder: &mut Recorder<'_>) {
    let role = item.get("role").and_then(Value::as_str);
    let mut text = String::new();
    for part in item
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let kind = part.get("type").and_then(Value::as_str);
        if matches!(kind, Some("input_text" | "output_text" | "text"))
            && let Some(part) = part.get("text").and_then(Value::as_str)
        {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(part);
        }
    }
    match role {
        Some("user") => {
            let injected = INJECTED_PREFIXES
                .iter()
                .any(|prefix| text.trim_start().starts_with(prefix));
            if !injected && !text.is_empty() {
                recorder.user_turn(&text);
            }
        }
        Some("assistant") => {
            recorder.assistant_turn();
            recorder.assistant_text(&text);
        }
        _ => {}
    }
}

fn event(event: &Map<String, Value>, recorder: &mut Recorder<'_>) {
    match event.get("type").and_then(Value::as_str) {
        Some("token_count") => {
            let total = event
                .get("info")
                .and_then(|info| info.get("total_token_usage"))
                .and_then(Value::as_object);
            if let Some(total) = total {
                let count = |key| total.get(key).and_then(Value::as_u64).unwrap_or(0);
                let cached = count("cached_input_tokens");
                recorder.total_tokens(Tokens {
                    // Codex's input_tokens include the cached ones.
                    input: count("input_tokens").saturating_sub(cached),
                    output: count("output_tokens"),
                    cache_read: cached,
                    cache_write: 0,
                });
            }
        }
        Some("error" | "stream_error") => recorder.error(),
        _ => {}
    }
}

/// Whether a tool's output says it failed: a JSON output whose
/// `metadata.exit_code` is not 0, `success: false`, or a text output that
/// begins `Exit code: N` with N not 0.
fn output_failed(output: Option<&Value>) -> bool {
    match output {
        Some(Value::String(text)) => {
            if let Ok(Value::Object(parsed)) = serde_json::from_str::<Value>(text) {
                return object_failed(&parsed);
            }
            text.strip_prefix("Exit code: ")
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|code| code.parse::<i64>().ok())
                .is_some_and(|code| code != 0)
        }
        Some(Value::Object(object)) => object_failed(object),
        _ => false,
    }
}

fn object_failed(object: &Map<String, Value>) -> bool {
    let exit = object
        .get("metadata")
        .and_then(|m| m.get("exit_code"))
        .and_then(Value::as_i64);
    exit.is_some_and(|code| code != 0)
        || object.get("success").and_then(Value::as_bool) == Some(false)
}

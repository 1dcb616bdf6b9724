//! `sessions.assay`: for the last N sessions (or named ones), what happened
//! in each (turns, tool calls by tool, errors, token usage, duration),
//! returned as data and written as a Markdown report artifact.
//!
//! Progress is reported per session (`progress` notifications, `n` of
//! `total`, naming the session), since an assay over many long transcripts
//! is the one call here that takes noticeable time. The report is named
//! after the call's request id, so two assays never overwrite each other.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Instant;

use modsdk::{Ctx, ModError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::catalog::TRANSCRIPTS;
use crate::catalog::{self, Selection};
use crate::session::{Session, Tokens, Unreadable};
use crate::transcript;

pub const DESCRIPTION: &str = "Assay agent sessions (Claude Code and Codex transcripts): for the `last` N sessions (default 3), \
or the `sessions` named (references from sessions.list), report per session the turns, tool calls by tool, tool errors, \
API errors, token usage where recorded, and duration, plus totals. Writes the same as a Markdown report artifact and reports progress per session. \
Unreadable files are listed in `skipped` with the reason, names that match nothing in `not_found`.";

/// Most sessions one assay covers.
const MAX_SESSIONS: usize = 100;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AssayInput {
    /// The N most recent sessions (1 to 100); ignored when `sessions` is given.
    #[serde(default = "default_last")]
    #[schemars(range(min = 1, max = 100))]
    pub last: usize,
    /// These sessions: a `session` reference, a session file name without `.jsonl`, or a Codex session uuid.
    #[serde(default)]
    #[schemars(length(max = 100))]
    pub sessions: Vec<String>,
}

fn default_last() -> usize {
    3
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct AssayOutput {
    pub sessions: Vec<Session>,
    pub totals: Totals,
    pub not_found: Vec<String>,
    pub skipped: Vec<Unreadable>,
    /// The Markdown report, relative to the artifacts root.
    pub report: String,
    /// Whether the deadline stopped the assay before every session was read.
    pub truncated: bool,
}

#[derive(Debug, Default, Serialize, JsonSchema)]
pub struct Totals {
    pub sessions: usize,
    pub user_turns: u64,
    pub assistant_turns: u64,
    pub tool_calls: BTreeMap<String, u64>,
    pub tool_errors: u64,
    pub errors: u64,
    /// Summed over the sessions that recorded usage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Tokens>,
    pub duration_seconds: u64,
}

pub fn run(ctx: &mut Ctx, input: &AssayInput, deadline: Instant) -> Result<AssayOutput, ModError> {
    let request_id = ctx.request_id().to_owned();
    let root = ctx.root(TRANSCRIPTS)?;
    let catalog = catalog::walk(root)?;
    let selection = if input.sessions.is_empty() {
        Selection::Recent(Some(input.last.clamp(1, MAX_SESSIONS)))
    } else {
        Selection::Named(&input.sessions)
    };
    let mut selected = catalog.select(selection);
    selected.files.truncate(MAX_SESSIONS);
    let mut sessions = Vec::new();
    let mut skipped = catalog.skipped;
    let mut truncated = catalog.truncated;
    let total = selected.files.len();
    for (index, file) in selected.files.iter().enumerate() {
        if Instant::now() >= deadline {
            truncated = true;
            break;
        }
        let message = format!("reading {}", file.path);
        ctx.progress(index as f64, Some(total as f64), Some(&message));
        let root = ctx.root(TRANSCRIPTS)?;
        match transcript::read(root, &file.path, deadline, &mut |_| {}) {
            Ok(session) => {
                truncated |= !session.complete;
                sessions.push(session);
            }
            Err(unreadable) => skipped.push(unreadable),
        }
    }
    ctx.progress(total as f64, Some(total as f64), Some("writing the report"));
    let totals = totals(&sessions);
    let mut output = AssayOutput {
        sessions,
        totals,
        not_found: selected.not_found,
        skipped,
        report: report_path(&request_id),
        truncated,
    };
    let markdown = render(&output);
    let artifact = ctx.write_artifact(
        &output.report,
        markdown.as_bytes(),
        Some("text/markdown"),
        Some("Session assay"),
    )?;
    output.report = artifact.path;
    ctx.set_text(markdown);
    Ok(output)
}

/// `assay/<request id>.md`, the id reduced to characters safe in a file name.
fn report_path(request_id: &str) -> String {
    let safe: String = request_id
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
    let name = if safe.is_empty() { "report" } else { &safe };
    format!("assay/{name}.md")
}

fn totals(sessions: &[Session]) -> Totals {
    let mut totals = Totals {
        sessions: sessions.len(),
        ..Totals::default()
    };
    for s in sessions {
        totals.user_turns += s.turns.user;
        totals.assistant_turns += s.turns.assistant;
        for (tool, count) in &s.tool_calls {
            *totals.tool_calls.entry(tool.clone()).or_default() += count;
        }
        totals.tool_errors += s.tool_errors;
        totals.errors += s.errors;
        if let Some(tokens) = s.tokens {
            totals.tokens.get_or_insert_default().add(tokens);
        }
        totals.duration_seconds += s.duration_seconds.unwrap_or(0);
    }
    totals
}

/// The Markdown report: totals, then one section per session.
pub fn render(output: &AssayOutput) -> String {
    let mut md = String::new();
    let t = &output.totals;
    let _ = writeln!(md, "# Session assay\n");
    let _ = writeln!(
        md,
        "{} sessions, {} user and {} assistant turns, {} tool calls ({} failed), {} errors, {} in total.\n",
        t.sessions,
        t.user_turns,
        t.assistant_turns,
        t.tool_calls.values().sum::<u64>(),
        t.tool_errors,
        t.errors,
        duration(t.duration_seconds)
    );
    if let Some(tokens) = t.tokens {
        let _ = writeln!(md, "Tokens: {}.\n", tokens_line(tokens));
    }
    if !t.tool_calls.is_empty() {
        let _ = writeln!(md, "| tool | calls |\n|---|---:|");
        for (tool, count) in by_count(&t.tool_calls) {
            let _ = writeln!(md, "| {} | {count} |", cell(tool));
        }
        md.push('\n');
    }
    for s in &output.sessions {
        let _ = writeln!(md, "## {}\n", cell(&s.session));
        let _ = writeln!(md, "- format: {}", s.format.label());
        if let Some(id) = &s.id {
            let _ = writeln!(md, "- id: {}", cell(id));
        }
        if let Some(project) = &s.project {
            let _ = writeln!(md, "- project: {}", cell(project));
        }
        if !s.models.is_empty() {
            let _ = writeln!(md, "- models: {}", cell(&s.models.join(", ")));
        }
        let _ = writeln!(
            md,
            "- time: {} to {} ({})",
            s.started.as_deref().unwrap_or("?"),
            s.ended.as_deref().unwrap_or("?"),
            s.duration_seconds.map_or_else(|| "?".to_owned(), duration)
        );
        let _ = writeln!(
            md,
            "- turns: {} user, {} assistant; {} lines",
            s.turns.user, s.turns.assistant, s.lines
        );
        let _ = writeln!(
            md,
            "- tool calls: {} ({} failed); errors: {}",
            s.tool_calls_total(),
            s.tool_errors,
            s.errors
        );
        if !s.tool_calls.is_empty() {
            let tools: Vec<String> = by_count(&s.tool_calls)
                .map(|(tool, count)| format!("{} {count}", cell(tool)))
                .collect();
            let _ = writeln!(md, "- by tool: {}", tools.join(", "));
        }
        if let Some(tokens) = s.tokens {
            let _ = writeln!(md, "- tokens: {}", tokens_line(tokens));
        }
        if s.unreadable_lines > 0 {
            let _ = writeln!(
                md,
                "- unreadable lines: {} (first: {})",
                s.unreadable_lines,
                cell(s.first_unreadable.as_deref().unwrap_or("?"))
            );
        }
        if !s.complete {
            let _ = writeln!(md, "- read only in part: the call's deadline came first");
        }
        md.push('\n');
    }
    if !output.not_found.is_empty() || !output.skipped.is_empty() || output.truncated {
        let _ = writeln!(md, "## Not assayed\n");
        for name in &output.not_found {
            let _ = writeln!(md, "- {}: no transcript by that name", cell(name));
        }
        for skip in &output.skipped {
            let _ = writeln!(md, "- {}: {}", cell(&skip.session), cell(&skip.reason));
        }
        if output.truncated {
            let _ = writeln!(md, "- the call's deadline stopped the assay early");
        }
    }
    md
}

/// Tools by descending count, then name.
fn by_count(calls: &BTreeMap<String, u64>) -> impl Iterator<Item = (&String, u64)> {
    let mut sorted: Vec<(&String, u64)> = calls.iter().map(|(k, v)| (k, *v)).collect();
    sorted.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    sorted.into_iter()
}

fn tokens_line(t: Tokens) -> String {
    format!(
        "{} input, {} output, {} cache read, {} cache write",
        t.input, t.output, t.cache_read, t.cache_write
    )
}

fn duration(seconds: u64) -> String {
    let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    if h > 0 {
        format!("{h}h {m:02}m")
    } else if m > 0 {
        format!("{m}m {s:02}s")
    } else {
        format!("{s}s")
    }
}

/// Text from a transcript, made safe inside one Markdown line or table cell:
/// no line breaks, no `|`, no markup that could start a heading or a link.
fn cell(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\n' | '\r' | '\t' => ' ',
            '|' => '¦',
            '<' => '‹',
            '>' => '›',
            '[' => '(',
            ']' => ')',
            _ => c,
        })
        .collect()
}

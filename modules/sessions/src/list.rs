//! `sessions.list`: the most recent sessions, newest first, with when they
//! started, how long they are, the project and the model.

use std::time::Instant;

use modsdk::{ModError, Root};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::catalog;
use crate::session::{Format, Unreadable};
use crate::transcript;

pub const DESCRIPTION: &str = "List the most recent agent sessions (Claude Code and Codex transcripts), newest activity first: \
for each its `session` reference (pass it to sessions.search or sessions.assay), format, session id, project (working directory), \
models, start and end time, duration, lines and turns. `project` keeps only sessions whose project or path contains it. \
Files that are not readable transcripts are listed in `skipped` with the reason.";

/// Most sessions one call lists.
const MAX_LAST: usize = 500;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListInput {
    /// How many sessions to list, most recent first (1 to 500).
    #[serde(default = "default_last")]
    #[schemars(range(min = 1, max = 500))]
    pub last: usize,
    /// Only sessions whose project (working directory) or path contains this text.
    #[serde(default)]
    pub project: Option<String>,
}

fn default_last() -> usize {
    20
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ListOutput {
    pub sessions: Vec<Listed>,
    /// Transcript files under the root.
    pub files: usize,
    /// Files that could not be read as transcripts, with why.
    pub skipped: Vec<Unreadable>,
    /// Whether more matching sessions exist than were listed (or the deadline stopped the listing).
    pub truncated: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Listed {
    /// Path relative to the `transcripts` root; the name to pass back.
    pub session: String,
    pub format: Format,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    pub models: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<u64>,
    pub lines: u64,
    /// User and assistant turns together.
    pub turns: u64,
}

pub fn run(root: &Root, input: &ListInput, deadline: Instant) -> Result<ListOutput, ModError> {
    let catalog = catalog::walk(root)?;
    let last = input.last.clamp(1, MAX_LAST);
    let filter = input.project.as_deref().map(str::to_lowercase);
    let mut output = ListOutput {
        sessions: Vec::new(),
        files: catalog.files.len(),
        skipped: catalog.skipped,
        truncated: catalog.truncated,
    };
    for file in &catalog.files {
        if output.sessions.len() == last {
            // Files remain: more sessions may match.
            output.truncated = true;
            break;
        }
        if Instant::now() >= deadline {
            output.truncated = true;
            break;
        }
        let session = match transcript::read(root, &file.path, deadline, &mut |_| {}) {
            Ok(session) => session,
            Err(unreadable) => {
                output.skipped.push(unreadable);
                continue;
            }
        };
        let wanted = filter.as_ref().is_none_or(|filter| {
            file.path.to_lowercase().contains(filter.as_str())
                || session
                    .project
                    .as_deref()
                    .is_some_and(|p| p.to_lowercase().contains(filter.as_str()))
        });
        if wanted {
            output.truncated |= !session.complete;
            output.sessions.push(Listed {
                turns: session.turns.user + session.turns.assistant,
                session: session.session,
                format: session.format,
                id: session.id,
                project: session.project,
                models: session.models,
                started: session.started,
                ended: session.ended,
                duration_seconds: session.duration_seconds,
                lines: session.lines,
            });
        }
    }
    Ok(output)
}

/// One line per session, for people and models.
pub fn render(output: &ListOutput) -> String {
    let mut text = String::new();
    for s in &output.sessions {
        text.push_str(&format!(
            "{}  {}  {}  {} turns, {} lines{}{}\n",
            s.started.as_deref().unwrap_or("?"),
            s.format.label(),
            s.session,
            s.turns,
            s.lines,
            s.project
                .as_deref()
                .map(|p| format!(", project {p}"))
                .unwrap_or_default(),
            s.models
                .first()
                .map(|m| format!(", model {m}"))
                .unwrap_or_default(),
        ));
    }
    if output.sessions.is_empty() {
        text.push_str("no sessions\n");
    }
    for skip in &output.skipped {
        text.push_str(&format!("skipped {}: {}\n", skip.session, skip.reason));
    }
    text
}

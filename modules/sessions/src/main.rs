//! `sessions`: agent session transcripts, read-only: list, search and assay.
//!
//! The operator points the source root `transcripts` at the folder an agent
//! writes its transcripts to (`~/.claude/projects` for Claude Code,
//! `~/.codex/sessions` for Codex, or a folder holding both); the format is
//! detected per file ([`session`]). Three capabilities, one file each:
//! [`list`] (recent sessions), [`search`] (text in the turns) and [`assay`]
//! (what happened in each session, also written as a Markdown artifact).
//!
//! Design decisions:
//!
//! - **Read-only over the transcripts.** The root is a `source` root, which
//!   the host always grants read-only; every capability names it in
//!   `effects.reads` only. Only `assay` writes, and only to this module's
//!   own artifacts root.
//! - **One pass per file per call, bounded memory** ([`transcript::read`]),
//!   so a transcript of tens of thousands of lines costs one read, and the
//!   walk decides recency from file times, not contents ([`catalog`]).
//! - **Contract 2**: each capability is one operation, whose semantics
//!   say what it reads and, for assay, that it changes the artifacts root.
//! - The knowledge skill `using-sessions` (`knowledge/using-sessions.md`,
//!   beside the binary) tells an agent how to use the three together; its
//!   digest is computed from the same bytes, so it cannot drift.

mod assay;
mod catalog;
mod claude;
mod codex;
mod line_reader;
mod list;
mod search;
mod session;
mod timestamp;
mod transcript;

use std::time::{Duration, Instant};

use modsdk::{Access, Capability, Cost, Ctx, Effects, KnowledgeDoc, Module, RootKind, Semantics};
use serde_json::json;
use sha2::{Digest, Sha256};

use catalog::TRANSCRIPTS;

/// Where `assay` writes its report.
const ARTIFACTS: &str = "artifacts";
/// The knowledge skill every capability refers to.
const SKILL_ID: &str = "using-sessions";
const SKILL_PATH: &str = "knowledge/using-sessions.md";
const SKILL_TEXT: &str = include_str!("../knowledge/using-sessions.md");
/// Time kept back from the host's deadline to finish the answer.
const ANSWER_MARGIN: Duration = Duration::from_millis(500);

fn module() -> Module {
    Module::new("sessions", env!("CARGO_PKG_VERSION"))
        .contract_version("2.0.0")
        .title("Agent sessions")
        .description(
            "List, search and assay agent session transcripts (Claude Code, Codex). Read-only over the transcripts; the assay report is written as an artifact.",
        )
        .root(
            TRANSCRIPTS,
            RootKind::Source,
            Access::Read,
            "agent transcripts: ~/.claude/projects (Claude Code), ~/.codex/sessions (Codex), or a folder holding both",
        )
        .root(
            ARTIFACTS,
            RootKind::Artifacts,
            Access::ReadWrite,
            "where assay reports are written",
        )
        .skill(KnowledgeDoc {
            id: SKILL_ID.to_owned(),
            title: "Using sessions.list, sessions.search and sessions.assay together".to_owned(),
            path: SKILL_PATH.to_owned(),
            sha256: sha256_hex(SKILL_TEXT.as_bytes()),
        })
        .capability(
            Capability::new("sessions.list", |ctx: &mut Ctx, input: list::ListInput| {
                let deadline = working_deadline(ctx);
                let output = list::run(ctx.root(TRANSCRIPTS)?, &input, deadline)?;
                ctx.set_text(list::render(&output));
                Ok(output)
            })
            .title("List agent sessions")
            .description(list::DESCRIPTION)
            .effects(modsdk::reads(&[TRANSCRIPTS], Cost::Local))
            .skill(SKILL_ID)
            .example("the five most recent sessions", json!({"last": 5})),
        )
        .capability(
            Capability::new(
                "sessions.search",
                |ctx: &mut Ctx, input: search::SearchInput| {
                    let deadline = working_deadline(ctx);
                    let output = search::run(ctx.root(TRANSCRIPTS)?, &input, deadline)?;
                    ctx.set_text(search::render(&output));
                    Ok(output)
                },
            )
            .title("Search agent sessions")
            .description(search::DESCRIPTION)
            .effects(modsdk::reads(&[TRANSCRIPTS], Cost::Local))
            .skill(SKILL_ID)
            .example(
                "where an error was discussed",
                json!({"query": "error", "max_results": 5}),
            ),
        )
        .capability(
            Capability::new("sessions.assay", |ctx: &mut Ctx, input: assay::AssayInput| {
                let deadline = working_deadline(ctx);
                assay::run(ctx, &input, deadline)
            })
            .title("Assay agent sessions")
            .description(assay::DESCRIPTION)
            .effects(Effects {
                reads: vec![TRANSCRIPTS.to_owned()],
                writes: vec![ARTIFACTS.to_owned()],
                cost: Cost::Local,
                ..Effects::default()
            })
            .skill(SKILL_ID)
            .example("the last session", json!({"last": 1})),
        )
        .operation("list", "sessions.list", reads_transcripts())
        .operation("search", "sessions.search", reads_transcripts())
        .operation(
            "assay",
            "sessions.assay",
            Semantics {
                mutates: vec![ARTIFACTS.to_owned()],
                ..reads_transcripts()
            },
        )
}

fn reads_transcripts() -> Semantics {
    Semantics {
        reads: vec![TRANSCRIPTS.to_owned()],
        ..Semantics::default()
    }
}

/// The host's deadline less the time needed to write the answer.
fn working_deadline(ctx: &Ctx) -> Instant {
    let deadline = ctx.deadline();
    deadline.checked_sub(ANSWER_MARGIN).unwrap_or(deadline)
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn main() {
    module().serve()
}

#[cfg(test)]
mod tests;

//! `notes`: a small persistent notebook in the module's state root.
//!
//! Four capabilities, one file each: [`add`], [`list`] (by tag), [`search`]
//! and [`remove`]. The notebook is the module's only state: the host gives
//! each module its own `state` folder and grants it per call, read-write to
//! `notes.add` and `notes.remove` (they name it in `effects.writes`),
//! read-only to `notes.list` and `notes.search`. Contract 2: each operation
//! says whether it mutates the state.
//!
//! Storage is an append-only log that a crash cannot corrupt; [`log`] says
//! why a log rather than an atomically replaced file. Ids are positions in
//! that log, so they never change and never repeat.
//!
//! The example of a module with state for authors: the same source builds
//! natively and as a wasm32-wasip2 component, and gives the same answers.

mod add;
mod list;
mod log;
mod notebook;
mod remove;
mod search;

use modsdk::{Access, Capability, Cost, Effects, Module, RootKind, Semantics, reads};
use serde_json::json;

use notebook::STATE;

fn module() -> Module {
    Module::new("notes", env!("CARGO_PKG_VERSION"))
        .contract_version("2.0.0")
        .title("Notes")
        .description(
            "A small notebook that persists between calls: add notes with tags, list them by tag, search them, remove them.",
        )
        .root(
            STATE,
            RootKind::State,
            Access::ReadWrite,
            "the notebook (notes.jsonl, an append-only log)",
        )
        .capability(
            Capability::new("notes.add", |ctx, input| add::run(ctx, &input))
                .title("Add a note")
                .description(add::DESCRIPTION)
                .effects(writes_state())
                .example(
                    "a note with a tag",
                    json!({"text": "Check the deploy logs after the release", "tags": ["todo"]}),
                ),
        )
        .capability(
            Capability::new("notes.list", |ctx, input| list::run(ctx, &input))
                .title("List notes")
                .description(list::DESCRIPTION)
                .effects(reads(&[STATE], Cost::Trivial))
                .example("the newest notes", json!({"limit": 10}))
                .example("the notes tagged todo", json!({"tag": "todo"})),
        )
        .capability(
            Capability::new("notes.search", |ctx, input| search::run(ctx, &input))
                .title("Search notes")
                .description(search::DESCRIPTION)
                .effects(reads(&[STATE], Cost::Trivial))
                .example("notes mentioning deploy", json!({"query": "deploy"})),
        )
        .capability(
            Capability::new("notes.remove", |ctx, input| remove::run(ctx, &input))
                .title("Remove a note")
                .description(remove::DESCRIPTION)
                .effects(writes_state()),
        )
        .operation("add-note", "notes.add", mutates_state())
        .operation("list-notes", "notes.list", reads_state())
        .operation("search-notes", "notes.search", reads_state())
        .operation("remove-note", "notes.remove", mutates_state())
}

fn writes_state() -> Effects {
    Effects {
        reads: vec![STATE.to_owned()],
        writes: vec![STATE.to_owned()],
        cost: Cost::Trivial,
        ..Effects::default()
    }
}

fn reads_state() -> Semantics {
    Semantics {
        reads: vec![STATE.to_owned()],
        ..Semantics::default()
    }
}

fn mutates_state() -> Semantics {
    Semantics {
        reads: vec![STATE.to_owned()],
        mutates: vec![STATE.to_owned()],
        ..Semantics::default()
    }
}

fn main() {
    module().serve()
}

#[cfg(test)]
mod tests;

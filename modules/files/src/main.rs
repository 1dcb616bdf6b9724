//! `files`: a read-only modhost module over the workspace root.
//!
//! Three capabilities, one file each: [`search`] (regex over text files,
//! respecting `.gitignore`), [`read`] (a line range of one file) and
//! [`list`] (a directory tree). Every path in and out is relative to the
//! workspace root and `/`-separated; a path that would leave the root is a
//! `path_escape` error, never a read.
//!
//! It is also the reference example of a module built on `modsdk`: the same
//! source builds natively and as a wasm32-wasip2 component.

mod list;
mod read;
mod search;
mod walk;

use modsdk::{Access, Capability, Cost, Module, RootKind, Semantics, reads};
use serde_json::json;

/// The root every capability reads.
const WORKSPACE: &str = "workspace";

fn module() -> Module {
    Module::new("files", env!("CARGO_PKG_VERSION"))
        .contract_version("2.0.0")
        .title("Workspace files")
        .description(
            "Search, read and list the files of the workspace. Read-only: nothing is ever written.",
        )
        .root(
            WORKSPACE,
            RootKind::Workspace,
            Access::Read,
            "the files to search, read and list",
        )
        .capability(
            Capability::new("files.search", |ctx, input| {
                let deadline = ctx.deadline();
                search::run(ctx.root(WORKSPACE)?, &input, deadline)
            })
            .title("Search files")
            .description(search::DESCRIPTION)
            .effects(reads(&[WORKSPACE], Cost::Local))
            .example(
                "find TODO comments",
                json!({"pattern": "TODO", "max_results": 5}),
            ),
        )
        .capability(
            Capability::new("files.read", |ctx, input| {
                read::run(ctx.root(WORKSPACE)?, &input)
            })
            .title("Read a file")
            .description(read::DESCRIPTION)
            .effects(reads(&[WORKSPACE], Cost::Trivial)),
        )
        .capability(
            Capability::new("files.list", |ctx, input| {
                list::run(ctx.root(WORKSPACE)?, &input)
            })
            .title("List files")
            .description(list::DESCRIPTION)
            .effects(reads(&[WORKSPACE], Cost::Trivial))
            .example("the top level of the workspace", json!({"max_depth": 1})),
        )
        .operation("search", "files.search", read_only())
        .operation("read", "files.read", read_only())
        .operation("list", "files.list", read_only())
}

fn read_only() -> Semantics {
    Semantics {
        reads: vec![WORKSPACE.to_owned()],
        ..Semantics::default()
    }
}

fn main() {
    module().serve()
}

#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;

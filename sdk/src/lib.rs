//! `modsdk`: write a modhost module in a few lines.
//!
//! A module is a program that answers one JSON-RPC request per run on
//! stdin/stdout (see `modproto/PROTOCOL.md`). This crate does the protocol:
//! you declare what the module is and what each capability takes and
//! returns, and write the handlers.
//!
//! ```no_run
//! use modsdk::{Access, Capability, Cost, Ctx, ModError, Module, RootKind, reads};
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct CountInput {
//!     /// File to count, relative to the workspace.
//!     path: String,
//! }
//!
//! #[derive(Serialize, JsonSchema)]
//! struct CountOutput {
//!     lines: usize,
//! }
//!
//! fn count(ctx: &mut Ctx, CountInput { path }: CountInput) -> Result<CountOutput, ModError> {
//!     // Relative to the root; `..`, absolute paths and symlinks out are refused.
//!     let lines = ctx.root("workspace")?.read_to_string(&path)?.lines().count();
//!     ctx.progress(1.0, Some(1.0), Some("counted"));
//!     ctx.set_text(format!("{path}: {lines} lines"));
//!     Ok(CountOutput { lines })
//! }
//!
//! fn main() {
//!     Module::new("lines", "0.1.0")
//!         .title("Line counter")
//!         .root("workspace", RootKind::Workspace, Access::Read, "the files to count")
//!         .capability(
//!             Capability::new("lines.count", count)
//!                 .description("Count the lines of one file in the workspace.")
//!                 .effects(reads(&["workspace"], Cost::Trivial)),
//!         )
//!         .serve()
//! }
//! ```
//!
//! Design decisions:
//!
//! - **One request per process.** [`Module::serve`] reads one line, answers
//!   it, and exits; a module keeps no state between calls except what it
//!   writes into its state root. This is what lets the host grant roots per
//!   call.
//! - **Roots are capability handles** ([`Root`]): paths are relative,
//!   cannot leave the root (`..`, absolute, symlinks out are `path_escape`),
//!   and a read grant refuses writes — the same on native and wasm32-wasip2.
//! - **Failures are values** ([`ModError`]): a kind, a message naming what
//!   failed, a remedy. A panic still becomes a JSON-RPC error, never a
//!   silent exit.
//! - **Network hosts are declared by name and checked at build**
//!   ([`Capability::network_hosts`], [`Capability::any_public_host`]): an
//!   entry the host would refuse panics on the author's first run, naming
//!   the fix.
//! - **Secrets are declared by name and read through the context**
//!   ([`Capability::secrets`], [`Ctx::secret`]): a name the host could not
//!   grant panics on the author's first run; a call gets a secret as an
//!   environment variable only when the operator granted it.
//! - The sdk depends on `modproto` only, never on the host.

mod ctx;
mod error;
mod input_check;
mod module;
mod network;
mod root;
mod serve;
#[cfg(test)]
mod serve_tests;

pub use ctx::Ctx;
pub use error::ModError;
pub use module::{Capability, Module, NoInput, reads};
pub use network::{HostEntryError, host_list};
pub use root::{DirEntry, EntryKind, Root, Stat, clean_relative};
pub use serve::MAX_REQUEST_BYTES;

pub use modproto::{
    self, Access, Cost, Effects, HostPattern, KnowledgeDoc, Network, RootKind, Semantics,
};

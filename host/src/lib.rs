//! modhost: a plugin host for AI agents.
//!
//! See `ARCHITECTURE.md` at the repository root for the map.
//!
//! # Library API
//!
//! Everything starts from [`Host`]: open a home, [`Host::discover`] the
//! installed modules, [`Host::invoke`] a capability.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use modhost::{Host, HostOptions, InvokeRequest};
//!
//! let host = Host::open(HostOptions { home: Some("/tmp/home".into()), workspace: None })?;
//! let modules = host.discover().await; // Vec<InstalledModule>, broken ones included
//! let mut request = InvokeRequest::new("files", "files.read", serde_json::json!({"path": "README.md"}));
//! request.deadline = Some(std::time::Duration::from_secs(5));
//! match host.invoke(request).await {
//!     Ok(outcome) => println!("{}", outcome.result.output),
//!     Err(e) => eprintln!("{}: {} ({})", e.kind(), e, e.remedy()),
//! }
//! # Ok(()) }
//! ```
//!
//! Layers, bottom up: [`runner`] (one call over a transport: native process
//! or component), [`discovery`] with its [`describe_cache`], [`grants`]
//! (roots per call), [`request`] and [`validate`] (building and checking a
//! call), [`artifacts`], then [`host`], [`invoke`] and [`manage`], which
//! compose them. The CLI lives in the binary (`src/cli/`).

pub(crate) mod approval;
pub(crate) mod artifacts;
pub(crate) mod atomic_file;
pub(crate) mod config;
pub(crate) mod confine;
#[cfg(feature = "cli")]
pub(crate) mod conformance_caller;
pub(crate) mod contract;
pub(crate) mod describe_cache;
pub(crate) mod discovery;
pub(crate) mod file_identity;
pub(crate) mod grants;
pub(crate) mod home;
pub(crate) mod home_lock;
pub(crate) mod host;
pub(crate) mod install;
pub(crate) mod invoke;
pub(crate) mod knowledge;
pub(crate) mod manage;
pub mod mcp;
pub(crate) mod module_tree;
pub(crate) mod overrides;
pub(crate) mod pins;
pub(crate) mod request;
pub(crate) mod runner;
pub(crate) mod snapshot;
pub mod tools;
pub(crate) mod validate;

/// The `modhost` command line; `src/main.rs` is `modhost::cli::main()`.
#[cfg(feature = "cli")]
pub mod cli;

/// Not API: what the benches and the fuzz targets drive directly, behind the
/// non-default `internals` feature. Hidden from the docs; any release may
/// change it.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals {
    /// The MCP server's line framing and decoding (`fuzz_targets/mcp_lines.rs`).
    pub mod line {
        pub use crate::mcp::line::{Decoded, Framed, LineFramer, decode};
    }
    #[cfg(feature = "wasm")]
    pub use crate::runner::wasm::{LoadOrigin, WasmEngine};
    pub use crate::runner::{Call, CallLimits};
}

// The CLI was a client of this crate from the outside and names it
// `modhost::...`; inside the crate that path is this crate.
#[cfg(feature = "cli")]
extern crate self as modhost;

#[cfg(test)]
mod test_modules;

pub use discovery::{InstalledModule, ModuleError, ModuleStatus};
pub use host::{Host, HostError, HostOptions};
pub use invoke::{InvokeError, InvokeOutcome, InvokeRequest};
pub use manage::{InstallReport, InstallRequest, RemoveReport};
pub use runner::{NotificationSink, Transport};

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

pub mod approval;
pub mod artifacts;
pub mod atomic_file;
pub mod config;
pub mod confine;
pub mod conformance_caller;
pub mod contract;
pub mod describe_cache;
pub mod discovery;
mod error;
pub mod file_identity;
pub mod grants;
pub mod home;
pub mod home_lock;
pub mod host;
pub mod install;
pub mod invoke;
pub mod knowledge;
pub mod manage;
pub mod mcp;
mod module_error;
pub mod module_tree;
pub mod overrides;
pub mod pins;
pub mod request;
pub mod runner;
pub mod snapshot;
pub mod tools;
pub mod validate;

#[cfg(test)]
mod test_modules;

pub use config::Config;
pub use discovery::{InstalledModule, ModuleError, ModuleStatus};
pub use home::HomeLayout;
pub use host::{Host, HostError, HostOptions};
pub use invoke::{InvokeError, InvokeOutcome, InvokeRequest};
pub use manage::{InstallReport, InstallRequest, RemoveReport};
pub use runner::{NotificationSink, Transport};

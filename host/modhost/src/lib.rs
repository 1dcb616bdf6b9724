//! modhost: a plugin host for AI agents.
//!
//! See `ARCHITECTURE.md` at the repository root for the map.
//!
//! # Library API
//!
//! Everything starts from [`Host`]: open a home, [`Host::discover`] the
//! installed modules (each one's standing, and with
//! [`InstalledModule::summary`] why), [`Host::invoke`] a capability; for an
//! agent, [`tools::open_toolbox`] turns the enabled capabilities into tools
//! and [`tools::export()`] writes them in a provider's shape. The MCP server
//! (the `modhost-mcp` crate) is a client of the same API, and so is the
//! command line (`modhost-cli`), which also reads the operator's
//! configuration, plans grants and checks knowledge through the public
//! modules below (`approval`, `config`, `discovery`, `grants`, `home`,
//! `knowledge`, `overrides`, `pins`, ...). No public item reaches a type a
//! user cannot name (`#![deny(unnameable_types)]` below).
//!
//! This example writes a one-capability module (a shell script speaking the
//! protocol) into a fresh home and drives it as a library user would:
//!
//! ```
//! # #[cfg(unix)]
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::os::unix::fs::PermissionsExt;
//! use modhost::{Host, HostOptions, InvokeRequest, ModuleStatus, tools};
//!
//! let home = tempfile::tempdir()?;
//! let describe = r#"{"jsonrpc":"2.0","id":1,"result":{"id":"hello","version":"1.0.0","capabilities":[{"id":"hello.greet","description":"Say hello.","input_schema":{"type":"object"},"output_schema":{"type":"object"}}]}}"#;
//! let greet = r#"{"jsonrpc":"2.0","id":1,"result":{"output":{"greeting":"hello"}}}"#;
//! let script = format!(
//!     "#!/bin/sh\nread line\ncase \"$line\" in\n  *'\"method\":\"describe\"'*) printf '%s\\n' '{describe}' ;;\n  *) printf '%s\\n' '{greet}' ;;\nesac\n"
//! );
//! let entry = home.path().join("modules/hello/hello");
//! std::fs::create_dir_all(entry.parent().unwrap())?;
//! std::fs::write(&entry, script)?;
//! std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o755))?;
//!
//! let runtime = tokio::runtime::Runtime::new()?;
//! runtime.block_on(async {
//!     let host = Host::open(HostOptions { home: Some(home.path().into()), workspace: None })?;
//!     // The operator approves these bytes (pins are enforced by default).
//!     host.pin("hello").await?;
//!     let modules = host.discover().await; // broken ones included, with the reason
//!     assert_eq!(modules.len(), 1);
//!     assert!(matches!(modules[0].status, ModuleStatus::Enabled), "{:?}", modules[0].error);
//!     assert_eq!(modules[0].summary().pin, "pinned"); // the standing's parts, and why
//!
//!     let mut request = InvokeRequest::new("hello", "hello.greet", serde_json::json!({}));
//!     request.deadline = Some(std::time::Duration::from_secs(10));
//!     match host.invoke(request).await {
//!         Ok(outcome) => assert_eq!(outcome.result.output["greeting"], "hello"),
//!         Err(e) => panic!("{}: {e} ({})", e.kind(), e.remedy()),
//!     }
//!
//!     let toolbox = tools::open_toolbox(&host).await?;
//!     let listed = toolbox.tools();
//!     let names: Vec<&str> = listed.iter().map(|t| t.name.as_str()).collect();
//!     assert_eq!(names, ["hello__hello_greet"]); // module, then capability
//!     assert_eq!(listed[0].verdict(), tools::PolicyVerdict::Allow); // the operator's policy
//!
//!     // Ready to paste into a provider's request; what the policy denies left out.
//!     let offered = listed.iter().filter(|t| t.is_offered());
//!     let export = tools::export(offered, tools::Format::Anthropic, false);
//!     assert_eq!(export.tools[0]["name"], "hello__hello_greet");
//!     assert!(export.left_out.is_empty());
//!     Ok(())
//! })
//! # }
//! # #[cfg(not(unix))]
//! # fn main() {}
//! ```
//!
//! # The crates around this one
//!
//! Below it, `modhost-sandbox` (the Linux confinement of a native call) and
//! `modhost-runner` (one call of a native process or a component). Above
//! it, `modhost-mcp` (the MCP server, built from a [`Host`] as `modhost mcp`
//! builds it) and `modhost-cli` (the `modhost` binary, a client of the
//! public APIs only). This crate has no clap, anyhow or MCP code.
//!
//! # What is public
//!
//! The types at the crate root (re-exported below) are the API most users
//! need. The public modules are what an operator's tool needs beyond a call,
//! each for one concept, and nothing else is `pub` (`unreachable_pub` is
//! denied below):
//!
//! - [`home`] and [`home_lock`]: where a home keeps what, and the one-writer lock;
//! - [`config`], [`approval`] and [`overrides`]: what the operator decides in
//!   `config.toml` (limits, approval rules, per-capability overrides);
//! - [`lockdown`]: what a connection that received untrusted content may
//!   still do (`[lockdown]`), for a caller that keeps connections;
//! - [`discovery`], [`contract`] and [`pins`]: what is installed, which
//!   contract governs it, and the operator's approval of its exact bytes;
//! - [`grants`]: which paths a call's roots and binaries resolve to;
//! - [`staged_module`]: a module folder, archive or file staged as install
//!   stages it, to check without installing (`modhost conformance`);
//! - [`secrets`]: the operator's secrets file, which secret a call gets,
//!   and what `modhost describe` shows of them (names, never values);
//! - [`storage_bound`]: the bound on a module's `state` and `artifacts`
//!   folders, and why a call passed it;
//! - [`knowledge`]: the markdown overlays and skills a module ships;
//! - [`conformance_caller`]: how `modhost conformance` reaches a live module;
//! - [`tools`]: every enabled capability as an agent tool, its policy, its
//!   call, and [`tools::export()`] to a provider's shape;
//! - [`host`]: [`Host`] and the workspace rules;
//! - [`lockfile`], [`sync`] and [`managed_config`]: a fleet's module set
//!   (`modhost.toml`), converging a home to it all or nothing and writing it
//!   from a home, and the roots and rules it brings (`config.sync.toml`);
//! - [`audit`], [`quota`] and [`telemetry`]: the record of every call
//!   (`[audit]`, read back by `modhost audit`), how often and how many at
//!   once (`[quotas]`), and traces and metrics over OTLP (`[telemetry]`).
//!
//! Features: `wasm` (default) runs WebAssembly components; without it the
//! host is native-only and refuses a component with a clear error.

// A public field, signature or trait impl that reaches a type a user
// cannot name is a compile error, so an internal type never leaks into the
// API unlisted (it is either made private or named here on purpose).
#![deny(unnameable_types)]
#![deny(unreachable_pub)]

pub mod approval;
pub(crate) mod artifacts;
pub mod audit;
pub(crate) mod call_network;
pub(crate) mod call_workspace;
pub mod caller;
pub mod config;
pub mod conformance_caller;
pub mod contract;
pub(crate) mod describe_cache;
pub mod discovery;
pub(crate) mod discovery_memo;
pub mod distribution_config;
pub(crate) mod error;
pub mod fetch_source;
pub mod grants;
pub mod home;
pub mod home_lock;
pub mod host;
pub mod http_config;
pub(crate) mod install;
pub(crate) mod install_origin;
pub(crate) mod invoke;
pub mod knowledge;
pub mod lockdown;
pub mod lockfile;
pub(crate) mod manage;
pub mod managed_config;
pub(crate) mod mcp_install;
pub mod mcpb;
pub(crate) mod module_error;
pub mod module_id;
pub(crate) mod module_tree;
pub mod network_config;
pub(crate) mod network_grant;
pub mod overrides;
pub mod pins;
pub mod quota;
pub(crate) mod redact;
pub(crate) mod request;
pub mod secrets;
pub mod server_json;
pub(crate) mod session_server;
pub mod signature_policy;
pub(crate) mod snapshot;
pub mod staged_module;
pub mod storage_bound;
pub mod sync;
pub mod telemetry;
pub mod tools;
pub(crate) mod user_home;
pub(crate) mod validate;

pub use artifacts::CheckedArtifact;
pub use call_workspace::CallWorkspace;
pub use caller::Caller;
pub use config::ConfigError;
pub use contract::ContractReport;
pub use discovery::{InstalledModule, ModuleError, ModuleStatus, ModuleSummary};
pub use grants::UndeclaredSourceRoot;
pub use home::{HomeLayout, NoHome};
pub use home_lock::HomeLockError;
pub use host::{Host, HostError, HostOptions, default_workspace, never_a_workspace};
pub use invoke::{InvokeError, InvokeOutcome, InvokeRequest};
pub use manage::{InstallReport, InstallRequest, RemoveReport, ReplacedModule};
pub use mcp_install::{McpInstallReport, McpInstallRequest, McpLifetime, McpToolChanges};
pub use modhost_egress::{Contacts, Refusal as NetworkRefusal};
pub use modhost_runner::RunError;
pub use modhost_runner::{NotificationSink, Transport};
pub use network_grant::NetworkView;
pub use overrides::OverrideError;
pub use pins::{PinCovers, PinOutcome, PinProvenance, PinRecord, PinsError};
pub use redact::mask_log_line;
pub use session_server::SessionScope;
pub use user_home::user_homes;

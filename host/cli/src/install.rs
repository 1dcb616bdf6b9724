//! `modhost install PATH [--id ID] [--sha256 HEX] [--upgrade] [--force]`,
//! and `modhost install --mcp FOLDER|ARCHIVE [--id ID] [--env NAME=VALUE]...
//! [--upgrade] [-- COMMAND ARGS...]` for an existing MCP server ([`mcp`]),
//! and `modhost install --bundled [NAME...] [--upgrade]` for the modules
//! shipped with modhost ([`bundled`]).
//!
//! Refused (exit 2, nothing written) when the module would be broken,
//! refused or nonconforming, listing every finding with its remedy; with
//! `--force` it is installed unpinned and the findings are printed on
//! stderr. An installed id is replaced only with `--upgrade`.

mod bundled;
mod mcp;
mod remote;
mod report;

use std::path::PathBuf;
use std::process::ExitCode;

use modhost::{Host, InstallRequest};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A local native executable, `.wasm` component, module folder, or
    /// `.tar.gz` / `.zip` archive holding one (at its top or in one
    /// top-level folder); an `https://` URL of such a file (with --sha256);
    /// an `oci://registry/repository:tag` or `@sha256:…` reference; with
    /// --mcp, the folder holding an MCP server's code, or such an archive of it.
    #[arg(required_unless_present = "bundled")]
    path: Option<PathBuf>,
    /// The module id (default: the file name without extension).
    #[arg(long)]
    id: Option<String>,
    /// The expected sha256 of the file (or archive); nothing is installed
    /// on mismatch. Required for an https:// source.
    #[arg(long, value_name = "HEX", conflicts_with = "mcp")]
    sha256: Option<String>,
    /// Replace the installed module of the same id (its state is kept; the
    /// new bytes are checked and pinned, the old ones removed).
    #[arg(long)]
    upgrade: bool,
    /// Install even when the checks find errors: unpinned, so not
    /// invocable until reviewed and pinned (`modhost pin ID`).
    #[arg(long, conflicts_with = "mcp")]
    force: bool,
    /// For a remote source: its signature or Sigstore bundle, a local
    /// file or an https:// URL (checked against `[signatures]`).
    #[arg(long, value_name = "FILE|URL", conflicts_with = "mcp")]
    signature: Option<String>,
    /// For a remote source: install without a verified signature although
    /// `[signatures]` requires one.
    #[arg(long, conflicts_with = "mcp")]
    allow_unsigned: bool,
    #[command(flatten)]
    mcp: mcp::McpArgs,
    #[command(flatten)]
    bundled: bundled::BundledArgs,
}

pub async fn run(host: &Host, args: &Args) -> anyhow::Result<ExitCode> {
    if args.bundled.bundled.is_some() {
        return bundled::run(host, &args.bundled, args.upgrade).await;
    }
    let Some(path) = &args.path else {
        anyhow::bail!("name what to install: a PATH, or --bundled");
    };
    // A local `.json` file is a server.json entry, a `.mcpb` an MCP bundle
    // (an MCP server whose manifest names its command): no module is either.
    let remote = remote::is_remote(path);
    let server_json = !remote && modhost::server_json::is_server_json(path);
    let bundle = modhost::mcpb::is_bundle(path);
    let entry_args = crate::server_json::InstallArgs {
        id: args.id.clone(),
        upgrade: args.upgrade,
        sha256: args.sha256.clone(),
        signature: args.signature.clone(),
        allow_unsigned: args.allow_unsigned,
    };
    if (server_json || bundle) && args.force {
        anyhow::bail!(
            "--force is not for a server.json or an MCP bundle: a bundle is installed as an MCP server, its tools listed and pinned"
        );
    }
    if (server_json || (bundle && !remote)) && (args.sha256.is_some() || args.signature.is_some()) {
        anyhow::bail!(
            "--sha256 and --signature are for a remote source: a server.json carries its package's sha256, and a local bundle is read as it is"
        );
    }
    if server_json {
        return crate::server_json::install(host, path, entry_args).await;
    }
    if bundle && remote {
        return crate::server_json::install_remote_bundle(host, path, entry_args).await;
    }
    if args.mcp.mcp || bundle {
        return mcp::run(host, path, args.id.clone(), args.upgrade, &args.mcp).await;
    }
    if remote::is_remote(path) {
        let wanted = remote::RemoteInstall {
            id: args.id.clone(),
            sha256: args.sha256.clone(),
            signature: args.signature.clone(),
            allow_unsigned: args.allow_unsigned,
            force: args.force,
            upgrade: args.upgrade,
        };
        return remote::run(host, path, &wanted).await;
    }
    if args.signature.is_some() {
        anyhow::bail!(
            "--signature is checked for an https:// or oci:// source; {} is local, and installing it is your approval (nothing was installed)",
            path.display()
        );
    }
    let report = host
        .install(InstallRequest {
            source: path.clone(),
            id: args.id.clone(),
            sha256: args.sha256.clone(),
            force: args.force,
            upgrade: args.upgrade,
            provenance: None,
        })
        .await?;
    report::print_report(&report);
    Ok(ExitCode::SUCCESS)
}

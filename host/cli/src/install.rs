//! `modhost install PATH [--id ID] [--sha256 HEX] [--upgrade] [--force]`,
//! and `modhost install --mcp FOLDER|ARCHIVE [--id ID] [--env NAME=VALUE]...
//! [--upgrade] [-- COMMAND ARGS...]` for an existing MCP server ([`mcp`]).
//!
//! Refused (exit 2, nothing written) when the module would be broken,
//! refused or nonconforming, listing every finding with its remedy; with
//! `--force` it is installed unpinned and the findings are printed on
//! stderr. An installed id is replaced only with `--upgrade`.

mod mcp;

use std::path::PathBuf;
use std::process::ExitCode;

use modhost::{Host, InstallRequest};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A local native executable, `.wasm` component, module folder, or
    /// `.tar.gz` / `.zip` archive holding one (at its top or in one
    /// top-level folder); with --mcp, the folder holding an MCP server's
    /// code, or such an archive of it.
    path: PathBuf,
    /// The module id (default: the file name without extension).
    #[arg(long)]
    id: Option<String>,
    /// The expected sha256 of the file (or archive); nothing is installed on mismatch.
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
    #[command(flatten)]
    mcp: mcp::McpArgs,
}

pub async fn run(host: &Host, args: &Args) -> anyhow::Result<ExitCode> {
    if args.mcp.mcp {
        return mcp::run(host, &args.path, args.id.clone(), args.upgrade, &args.mcp).await;
    }
    let report = host
        .install(InstallRequest {
            source: args.path.clone(),
            id: args.id.clone(),
            sha256: args.sha256.clone(),
            force: args.force,
            upgrade: args.upgrade,
        })
        .await?;
    for finding in &report.findings {
        eprintln!("{finding}");
    }
    let module = &report.module;
    let version = module.version.as_deref().unwrap_or("-");
    match &report.replaced {
        Some(old) => outln!(
            "upgraded {} {} -> {version} at {}",
            module.id,
            old.version.as_deref().unwrap_or("-"),
            module.path.display()
        ),
        None => outln!(
            "installed {} {version} at {}",
            module.id,
            module.path.display()
        ),
    }
    if !report.pinned {
        eprintln!(
            "warning: {} is installed UNPINNED (--force past the errors above): it is not invocable until you fix it, or review it and run `modhost pin {}`",
            module.id, module.id
        );
    }
    Ok(ExitCode::SUCCESS)
}

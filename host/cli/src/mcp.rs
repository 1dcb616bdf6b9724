//! `modhost mcp [--delegate-approval]`: serve the tools over MCP on stdio
//! (MCP 2026-07-28 per request, or a handshake revision from 2024-11-05 to
//! 2025-11-25) until stdin closes. Nothing but protocol lines goes to
//! stdout; warnings go to stderr.
//!
//! The workspace of its calls: the client's first root when the client
//! sends roots (`modhost_mcp`), else the host's: `--workspace`, else
//! `MODHOST_WORKSPACE` (JSON client configs can set env and args only),
//! else the current directory unless that is `/` or the home, where none
//! is granted and a call that needs one is refused with the remedy.

use std::process::ExitCode;

use modhost::Host;
use modhost_mcp::{HostServer, ServeOptions};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Let the client approve every call of a tool whose approval verdict is
    /// `ask` (recorded as approved by "client"), instead of the user being
    /// asked for each call through the client (elicitation).
    #[arg(long)]
    delegate_approval: bool,
    #[command(flatten)]
    source_roots: super::source_roots::SourceRootArgs,
}

pub async fn run(host: &Host, args: &Args) -> anyhow::Result<ExitCode> {
    let host = super::source_roots::apply(host, &args.source_roots).await?;
    let options = ServeOptions {
        delegate_approval: args.delegate_approval,
    };
    let server = HostServer::open(&host, options).await?;
    for problem in server.problems() {
        eprintln!("warning: {problem}");
    }
    server.serve_stdio().await?;
    Ok(ExitCode::SUCCESS)
}

//! `modhost mcp [--delegate-approval]`: serve the tools over MCP on stdio
//! until stdin closes. Nothing but protocol lines goes to stdout; warnings go
//! to stderr.

use std::process::ExitCode;
use std::sync::Arc;

use modhost::Host;
use modhost::mcp::{ToolboxBackend, serve_stdio};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Also offer tools whose approval verdict is `ask`; the client is then
    /// responsible for approving each call (recorded as approved by "client").
    #[arg(long)]
    delegate_approval: bool,
}

pub async fn run(host: &Host, args: &Args) -> anyhow::Result<ExitCode> {
    let toolbox = modhost::tools::open_toolbox(host).await?;
    for problem in toolbox.problems() {
        eprintln!("warning: {problem}");
    }
    let backend = Arc::new(ToolboxBackend {
        toolbox,
        delegate_approval: args.delegate_approval,
    });
    serve_stdio(backend).await?;
    Ok(ExitCode::SUCCESS)
}

//! `modhost tools [--format json|openai|anthropic|mcp]`: the tool definitions
//! of every enabled, allowed capability, in a provider's exact shape, ready to
//! paste into an API request. Denied tools are left out; tools that ask are
//! included (whoever pastes them decides) and marked in `--format json`.

use std::process::ExitCode;

use modhost::Host;
use modhost::approval::Verdict;
use modhost::tools::export::{self, Format};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// json (modhost's own, with effects and approval), openai, anthropic or mcp.
    #[arg(long, default_value = "json", value_parser = |s: &str| s.parse::<Format>())]
    format: Format,
    /// Accepted for symmetry with the other listing commands; the output is always JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(host: &Host, args: &Args) -> anyhow::Result<ExitCode> {
    let toolbox = modhost::tools::open_toolbox(host).await?;
    for problem in toolbox.problems() {
        eprintln!("warning: {problem}");
    }
    let tools = toolbox.tools();
    let offered = tools.iter().filter(|t| t.approval.verdict != Verdict::Deny);
    super::print_json(&export::export(offered, args.format))?;
    Ok(ExitCode::SUCCESS)
}

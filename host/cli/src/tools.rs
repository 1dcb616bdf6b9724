//! `modhost tools [--format json|mcp|openai|openai-responses|anthropic] [--strict]`:
//! the tool definitions of every enabled, allowed capability, in a
//! provider's exact shape, ready to paste into an API request. Denied tools
//! are left out; tools that ask are included (whoever pastes them decides)
//! and marked in `--format json`. A tool the chosen provider would reject is
//! left out of that export with a warning on stderr naming it and why; with
//! `--strict`, each tool that cannot be made strict without changing its
//! meaning is exported as it is and reported the same way.

use std::process::ExitCode;

use modhost::Host;
use modhost::tools::export::{self, Format};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output shape: json (modhost's own, with effects and approval), mcp
    /// (tools/list entries), openai (Chat Completions), openai-responses
    /// (Responses API) or anthropic (Messages). Always JSON on stdout.
    #[arg(long, default_value = "json", value_parser = |s: &str| s.parse::<Format>())]
    format: Format,
    /// OpenAI strict mode (openai and openai-responses only): every tool that
    /// can be made strict without changing its meaning gets `"strict": true`.
    #[arg(long)]
    strict: bool,
    /// The same as `--format json` (every listing command takes `--json`).
    #[arg(long, conflicts_with = "format")]
    json: bool,
    #[command(flatten)]
    source_roots: super::source_roots::SourceRootArgs,
}

pub async fn run(host: &Host, args: &Args) -> anyhow::Result<ExitCode> {
    let host = &super::source_roots::apply(host, &args.source_roots).await?;
    let format = if args.json { Format::Json } else { args.format };
    if args.strict && !format.has_strict_mode() {
        anyhow::bail!(
            "--strict is OpenAI's strict mode: use it with --format openai or --format openai-responses, not {}",
            format.as_str()
        );
    }
    let toolbox = modhost::tools::open_toolbox(host).await?;
    for problem in toolbox.problems() {
        eprintln!("warning: {problem}");
    }
    // The same predicate as `modhost mcp`'s tools/list: the two agree.
    let tools = toolbox.tools();
    let offered = tools.iter().filter(|t| t.is_offered());
    let exported = export::export(offered, format, args.strict);
    for omission in &exported.left_out {
        eprintln!(
            "warning: {} left out of the {} export: {}",
            omission.tool,
            format.as_str(),
            omission.reason
        );
    }
    for omission in &exported.not_strict {
        eprintln!(
            "warning: {} exported without strict mode: {}",
            omission.tool, omission.reason
        );
    }
    super::stdout::print_json(&exported.tools)?;
    Ok(ExitCode::SUCCESS)
}

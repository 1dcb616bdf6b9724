//! `modhost pin MODULE [--json]` and `modhost unpin MODULE [--json]`.
//!
//! Pinning approves the module exactly as installed now (bytes, descriptor,
//! contract). Under `pins = "enforce"` (the default) only pinned, unchanged
//! modules are invoked; see `modhost::pins`.

use std::process::ExitCode;

use modhost::Host;
use serde_json::json;

use super::exit_code::EXIT_USAGE;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Module id.
    module: String,
    /// Print what was recorded (or removed) as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn pin(host: &Host, args: &Args) -> anyhow::Result<ExitCode> {
    let outcome = host.pin(&args.module).await?;
    if args.json {
        super::stdout::print_json(&outcome)?;
        return Ok(ExitCode::SUCCESS);
    }
    let record = &outcome.record;
    let what = match (outcome.before, &outcome.change) {
        ("changed", Some(change)) => format!("re-pinned, accepting: {change}"),
        ("pinned", _) => "pinned (unchanged since its last pin)".to_owned(),
        _ => "pinned".to_owned(),
    };
    outln!("{} {} {what}", record.module, record.version);
    outln!("  digest:     {}", record.digest);
    outln!("  descriptor: {}", record.descriptor_digest);
    outln!("  contract:   {}", record.contract_version);
    Ok(ExitCode::SUCCESS)
}

pub async fn unpin(host: &Host, args: &Args) -> anyhow::Result<ExitCode> {
    let removed = host.unpin(&args.module)?;
    if args.json {
        super::stdout::print_json(&json!({"module": args.module, "unpinned": removed}))?;
    } else if removed {
        outln!(
            "{} unpinned; it cannot be invoked until pinned again",
            args.module
        );
    } else {
        eprintln!("error: {} is not pinned; nothing was changed", args.module);
    }
    Ok(if removed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_USAGE)
    })
}

//! `modhost list [--json]`.

use std::process::ExitCode;

use modhost::Host;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// One JSON array of module entries on stdout.
    #[arg(long)]
    json: bool,
}

pub async fn run(host: &Host, args: &Args) -> anyhow::Result<ExitCode> {
    let modules = host.discover().await;
    if args.json {
        let entries: Vec<_> = modules.iter().map(|m| m.summary()).collect();
        super::print_json(&entries)?;
        return Ok(ExitCode::SUCCESS);
    }
    if modules.is_empty() {
        println!(
            "no modules installed in {}",
            host.layout().modules_dir().display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let id_width = modules.iter().map(|m| m.id.len()).max().unwrap_or(2).max(2);
    let version_width = modules
        .iter()
        .map(|m| m.version.as_deref().unwrap_or("-").len())
        .max()
        .unwrap_or(7)
        .max(7);
    println!(
        "{:id_width$}  {:version_width$}  {:8}  CAPABILITIES",
        "ID", "VERSION", "STATUS"
    );
    for module in &modules {
        println!(
            "{:id_width$}  {:version_width$}  {:8}  {}",
            module.id,
            module.version.as_deref().unwrap_or("-"),
            module.status.as_str(),
            module.capability_ids().join(", ")
        );
        if let Some(error) = &module.error {
            println!("    error: {}", error.message);
        }
        for warning in &module.warnings {
            println!("    warning: {warning}");
        }
        for warning in &module.host_warnings {
            println!("    host warning: {warning}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

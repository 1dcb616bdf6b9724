//! `modhost remove MODULE [--purge]`.

use std::process::ExitCode;

use modhost::Host;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Module id.
    module: String,
    /// Also delete the module's state and artifacts.
    #[arg(long)]
    purge: bool,
}

pub async fn run(host: &Host, args: &Args) -> anyhow::Result<ExitCode> {
    let report = host.remove(&args.module, args.purge).await?;
    outln!("removed {} ({})", report.id, report.removed.display());
    for dir in &report.purged {
        outln!("purged {}", dir.display());
    }
    if let Some(state) = &report.kept_state {
        outln!(
            "kept its state in {} (remove --purge deletes it)",
            state.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

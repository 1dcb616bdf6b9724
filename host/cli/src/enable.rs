//! `modhost enable MODULE` and `modhost disable MODULE`.

use std::process::ExitCode;

use modhost::Host;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Module id.
    module: String,
}

pub async fn run(host: &Host, args: &Args, enable: bool) -> anyhow::Result<ExitCode> {
    let module = if enable {
        host.enable(&args.module).await?
    } else {
        host.disable(&args.module).await?
    };
    outln!("{} {}", module.id, module.status.as_str());
    Ok(ExitCode::SUCCESS)
}

//! `modhost install PATH [--id ID] [--sha256 HEX]`.

use std::path::PathBuf;
use std::process::ExitCode;

use modhost::{Host, InstallRequest};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A local native executable, `.wasm` component, or `.tar.gz` / `.zip`
    /// archive holding one (at its top or in one top-level folder).
    path: PathBuf,
    /// The module id (default: the file name without extension).
    #[arg(long)]
    id: Option<String>,
    /// The expected sha256 of the file (or archive); nothing is installed on mismatch.
    #[arg(long, value_name = "HEX")]
    sha256: Option<String>,
}

pub async fn run(host: &Host, args: &Args) -> anyhow::Result<ExitCode> {
    let module = host
        .install(InstallRequest {
            source: args.path.clone(),
            id: args.id.clone(),
            sha256: args.sha256.clone(),
        })
        .await?;
    outln!(
        "installed {} {} at {}",
        module.id,
        module.version.as_deref().unwrap_or("-"),
        module.path.display()
    );
    Ok(ExitCode::SUCCESS)
}

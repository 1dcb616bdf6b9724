//! MCP registry interop: `modhost server-json MODULE [--name NAMESPACE/SERVER]
//! [--output FILE]` writes a server.json entry for an installed module
//! (`Host::server_json_entry`), and `modhost install ./server.json [--id ID]
//! [--upgrade] [--allow-unsigned]` installs the package of one modhost can
//! pin ([`install`], dispatched from `install.rs` for any local `.json`
//! file: no module is one), and `modhost install https://…/NAME.mcpb
//! --sha256 HEX` fetches an MCP bundle ([`install_remote_bundle`]).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use modhost::Host;
use modhost::server_json::{ServerJsonInstallRequest, ServerJsonInstalled};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The installed module, fetched from an OCI registry or as an MCP
    /// bundle over https (its pin names where from).
    module: String,
    /// The entry's name, `namespace/server` in reverse-DNS form (default
    /// `io.github.OWNER/MODULE` for a source on GitHub or ghcr.io, else
    /// `local.modhost/MODULE`).
    #[arg(long, value_name = "NAMESPACE/SERVER")]
    name: Option<String>,
    /// Write the entry to FILE (replaced whole) instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
}

pub async fn run(host: &Host, args: &Args) -> anyhow::Result<ExitCode> {
    let entry = host
        .server_json_entry(&args.module, args.name.as_deref())
        .await?;
    let text = format!("{}\n", serde_json::to_string_pretty(&entry)?);
    match &args.output {
        None => crate::stdout::write(format_args!("{text}")),
        Some(path) => {
            write_whole(path, &text)?;
            eprintln!(
                "wrote the server.json entry for {} to {}",
                args.module,
                path.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Replace `path` with `text`: a temporary file beside it, renamed over it.
fn write_whole(path: &Path, text: &str) -> anyhow::Result<()> {
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let mut file = tempfile::NamedTempFile::new_in(folder)
        .with_context(|| format!("could not write in {}", folder.display()))?;
    file.write_all(text.as_bytes())?;
    file.as_file().sync_all()?;
    file.persist(path)
        .with_context(|| format!("could not write {}", path.display()))?;
    Ok(())
}

/// The MCP bridge: `$MODHOST_MCP_BRIDGE`, else `mcp_bridge` beside this
/// `modhost`.
fn bridge() -> anyhow::Result<PathBuf> {
    match std::env::var_os("MODHOST_MCP_BRIDGE") {
        Some(bridge) => Ok(PathBuf::from(bridge)),
        None => Ok(std::env::current_exe()
            .context("could not tell where modhost runs from, to find the MCP bridge beside it; name it with MODHOST_MCP_BRIDGE=PATH")?
            .with_file_name("mcp_bridge")),
    }
}

/// What `install` was asked, for a server.json or a remote bundle.
#[derive(Debug, Clone)]
pub(crate) struct InstallArgs {
    pub(crate) id: Option<String>,
    pub(crate) upgrade: bool,
    pub(crate) sha256: Option<String>,
    pub(crate) signature: Option<String>,
    pub(crate) allow_unsigned: bool,
}

/// `modhost install https://…/NAME.mcpb --sha256 HEX`: the bundle fetched,
/// checked and installed as an MCP server module.
pub(crate) async fn install_remote_bundle(
    host: &Host,
    url: &Path,
    args: InstallArgs,
) -> anyhow::Result<ExitCode> {
    let progress = crate::download_progress::DownloadProgress::for_stderr();
    let report = host
        .install_remote_bundle(
            &modhost::fetch_source::FetchRequest {
                source: url.to_string_lossy().into_owned(),
                sha256: args.sha256,
                signature: args.signature,
                allow_unsigned: args.allow_unsigned,
            },
            modhost::McpInstallRequest {
                id: args.id,
                bridge: bridge()?,
                upgrade: args.upgrade,
                ..Default::default()
            },
            &progress,
        )
        .await?;
    print_mcp(&report, &url.to_string_lossy());
    Ok(ExitCode::SUCCESS)
}

/// What an MCP bundle's install did.
fn print_mcp(report: &modhost::McpInstallReport, from: &str) {
    let install = &report.install;
    for finding in &install.findings {
        eprintln!("{finding}");
    }
    let module = &install.module;
    let verb = match install.replaced {
        Some(_) => "upgraded",
        None => "installed",
    };
    outln!(
        "{verb} {} {} from {from} at {}: an MCP server, started afresh for every call",
        module.id,
        module.version.as_deref().unwrap_or("-"),
        module.folder.as_deref().unwrap_or(&module.path).display()
    );
    print_tools(report);
}

/// The tools of an MCP server module and how to grant them.
fn print_tools(mcp: &modhost::McpInstallReport) {
    let id = &mcp.install.module.id;
    outln!(
        "tools ({}, each granted nothing but running `{}`):",
        mcp.tools.len(),
        mcp.command
    );
    for tool in &mcp.tools {
        outln!("  {id}.{tool}");
    }
    outln!(
        "To grant a tool roots, hosts, programs or secrets, edit {} and approve the edit with `modhost pin {id}`.",
        mcp.manifest.display()
    );
}

/// `modhost install FILE.json`: the package of the server.json `file`
/// modhost can pin, fetched, checked and installed.
pub(crate) async fn install(
    host: &Host,
    file: &Path,
    args: InstallArgs,
) -> anyhow::Result<ExitCode> {
    let progress = crate::download_progress::DownloadProgress::for_stderr();
    let report = host
        .install_server_json(
            ServerJsonInstallRequest {
                file: file.to_path_buf(),
                id: args.id,
                upgrade: args.upgrade,
                bridge: bridge()?,
                allow_unsigned: args.allow_unsigned,
            },
            &progress,
        )
        .await?;
    let install = report.installed.install();
    for finding in &install.findings {
        eprintln!("{finding}");
    }
    let module = &install.module;
    let verb = match install.replaced {
        Some(_) => "upgraded",
        None => "installed",
    };
    outln!(
        "{verb} {} {} from {} ({} package {}) at {}",
        module.id,
        module.version.as_deref().unwrap_or("-"),
        report.name,
        report.package.registry_type(),
        report.package.source(),
        module.folder.as_deref().unwrap_or(&module.path).display()
    );
    if let ServerJsonInstalled::McpServer(mcp) = &report.installed {
        outln!("an MCP server, started afresh for every call");
        print_tools(mcp);
    }
    Ok(ExitCode::SUCCESS)
}

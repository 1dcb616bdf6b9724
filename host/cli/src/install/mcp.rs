//! `modhost install --mcp FOLDER|ARCHIVE [--id ID] [--env NAME=VALUE]...
//! [--bridge PATH] [--lifetime call|session] [--upgrade] [--json] [-- COMMAND ARGS...]`: an existing
//! stdio MCP server as a module (`modhost::McpInstallRequest`). The command
//! may be left out when the folder carries the operator's own
//! `mcp-server.toml`.
//!
//! Prints what was installed and, since every tool starts with no grant at
//! all, what the operator grants and how: the manifest to edit, the pin
//! that approves the edit, and the approval rule that lets calls run
//! without asking (each tool runs the server's interpreter, which the
//! default policy asks about).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use modhost::{Host, McpInstallRequest, McpLifetime};
use serde_json::json;

#[derive(Debug, Clone, clap::Args)]
pub struct McpArgs {
    /// Install an existing stdio MCP server: PATH is the folder holding its
    /// code (an npm project after `npm ci`, a `pip install --target`
    /// folder) or a .tar.gz/.tgz/.zip archive of it; the command that runs
    /// it follows `--` (optional when the folder holds mcp-server.toml).
    #[arg(long)]
    pub(super) mcp: bool,
    /// With --mcp: a variable the server gets (`{module}` in the value is the
    /// module's folder). Repeatable.
    #[arg(long = "env", value_name = "NAME=VALUE", requires = "mcp")]
    env: Vec<String>,
    /// With --mcp: the MCP bridge program (default: `mcp_bridge` beside
    /// this `modhost`).
    #[arg(
        long,
        value_name = "PATH",
        env = "MODHOST_MCP_BRIDGE",
        requires = "mcp"
    )]
    bridge: Option<PathBuf>,
    /// With --mcp: how long one server process lives. `call` (the
    /// default): a fresh process per call, with that call's grants.
    /// `session`: one process per `modhost mcp` stdio connection, confined
    /// to the union of every tool's grants (see MODULES.md, "What session
    /// weakens"). Without it, the folder's mcp-server.toml (or, with
    /// --upgrade, the installed module) decides.
    #[arg(long, value_name = "call|session", requires = "mcp")]
    lifetime: Option<Lifetime>,
    /// With --mcp: print the report as JSON.
    #[arg(long, requires = "mcp")]
    json: bool,
    /// With --mcp, after `--`: the server's command (a binary configured
    /// under [binaries] in config.toml) and its arguments (`{module}` is the
    /// module's folder, an argument `{roots}` the call's granted roots).
    #[arg(last = true, value_name = "COMMAND")]
    server_command: Vec<String>,
}

/// `--lifetime`'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Lifetime {
    Call,
    Session,
}

pub async fn run(
    host: &Host,
    source: &Path,
    id: Option<String>,
    upgrade: bool,
    args: &McpArgs,
) -> anyhow::Result<ExitCode> {
    let (command, server_args) = match args.server_command.split_first() {
        Some((command, server_args)) => (Some(command.clone()), server_args.to_vec()),
        None => (None, Vec::new()),
    };
    if command.is_none() && !args.env.is_empty() {
        bail!(
            "--env is for the command given after `--`; without one, set the server's variables in [server] env of mcp-server.toml"
        );
    }
    let mut env = BTreeMap::new();
    for pair in &args.env {
        let Some((name, value)) = pair.split_once('=') else {
            bail!("--env {pair:?} is not NAME=VALUE");
        };
        env.insert(name.to_owned(), value.to_owned());
    }
    let bridge = match &args.bridge {
        Some(bridge) => bridge.clone(),
        None => std::env::current_exe()
            .context("could not tell where modhost runs from, to find the MCP bridge beside it; name it with --bridge PATH")?
            .with_file_name("mcp_bridge"),
    };
    let report = host
        .install_mcp(McpInstallRequest {
            source: source.to_path_buf(),
            id,
            command,
            args: server_args,
            env,
            bridge,
            upgrade,
            lifetime: args.lifetime.map(|lifetime| match lifetime {
                Lifetime::Call => McpLifetime::Call,
                Lifetime::Session => McpLifetime::Session,
            }),
        })
        .await?;
    let module = &report.install.module;
    let command = &report.command;
    let version = module.version.as_deref().unwrap_or("-");
    for finding in &report.install.findings {
        eprintln!("{finding}");
    }
    if args.json {
        super::super::stdout::print_json(&json!({
            "id": module.id,
            "version": module.version,
            "path": module.path,
            "manifest": report.manifest,
            "tools": report.tools,
            "changes": report.changes,
            "pinned": report.install.pinned,
            "command": command,
            "operator_manifest": report.operator_manifest,
            "lifetime": report.lifetime,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    let verb = if report.install.replaced.is_some() {
        "upgraded"
    } else {
        "installed"
    };
    let lifetime = match report.lifetime {
        McpLifetime::Session => {
            "one process per `modhost mcp` stdio connection, confined to the union of its tools' grants (per call elsewhere)"
        }
        _ => "started afresh for every call",
    };
    outln!(
        "{verb} {} {version} at {}: an MCP server, {lifetime}",
        module.id,
        module.folder.as_deref().unwrap_or(&module.path).display()
    );
    match report.operator_manifest {
        true => outln!(
            "tools ({}, granted as the folder's mcp-server.toml says, each running `{command}`):",
            report.tools.len()
        ),
        false => outln!(
            "tools ({}, each granted nothing but running `{command}`):",
            report.tools.len()
        ),
    }
    for tool in &report.tools {
        outln!("  {}.{tool}", module.id);
    }
    if let Some(changes) = &report.changes {
        for (what, names) in [
            ("new (granted nothing)", &changes.added),
            ("gone", &changes.removed),
            ("redefined (grants kept: review them)", &changes.changed),
        ] {
            if !names.is_empty() {
                outln!("{what}: {}", names.join(", "));
            }
        }
    }
    outln!(
        "To grant a tool roots, hosts, programs or secrets, edit {} ([roots.NAME], then [tools.NAME]) and approve the edit with `modhost pin {}`.",
        report.manifest.display(),
        module.id
    );
    outln!(
        "Calls ask for approval by default (each tool runs `{command}`); to let them run without asking, add to config.toml:\n  [[approval.rules]]\n  module = \"{}\"\n  decision = \"allow\"",
        module.id
    );
    Ok(ExitCode::SUCCESS)
}

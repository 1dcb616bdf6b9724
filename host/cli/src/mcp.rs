//! `modhost mcp [--delegate-approval] [--http [ADDR]]`: serve the tools over
//! MCP (2026-07-28 per request, or a handshake revision from 2024-11-05 to
//! 2025-11-25).
//!
//! On stdio (the default) it serves one client until stdin closes; nothing
//! but protocol lines goes to stdout, warnings go to stderr.
//!
//! With `--http` it serves the streamable HTTP transport at
//! `http://ADDR/mcp` (default `127.0.0.1:8750`) until SIGTERM or SIGINT,
//! then drains (`modhost_mcp::http`). Who may call it, and its bounds, are
//! `[http]` in `config.toml`; beyond the loopback it needs authentication
//! configured there. It prints one line to stderr once it listens,
//! `modhost mcp: serving MCP over HTTP at http://ADDR/mcp` (with the real
//! port when ADDR's is 0), then one JSON object per request (the request
//! log: method, path, status, principal, tool, result, duration).
//!
//! The workspace of its calls: on stdio the client's first root when the
//! client sends roots (`modhost_mcp`), else the host's: `--workspace`, else
//! `MODHOST_WORKSPACE` (JSON client configs can set env and args only),
//! else the current directory unless that is `/` or the home, where none
//! is granted and a call that needs one is refused with the remedy. Over
//! HTTP always the host's.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use modhost::Host;
use modhost_mcp::http::{AccessLog, AccessRecord};
use modhost_mcp::{HostServer, ServeOptions, SigningKey};

/// Where `--http` listens when given no address.
const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:8750";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Let the client approve every call of a tool whose approval verdict is
    /// `ask` (recorded as approved by "client"), instead of the user being
    /// asked for each call through the client (elicitation).
    #[arg(long)]
    delegate_approval: bool,
    /// Serve MCP's streamable HTTP transport at http://ADDR/mcp instead of
    /// stdio (ADDR defaults to 127.0.0.1:8750; port 0 picks a free port).
    /// Beyond the loopback, [http] in config.toml must configure
    /// authentication.
    #[arg(
        long,
        value_name = "ADDR",
        num_args = 0..=1,
        default_missing_value = DEFAULT_HTTP_ADDR
    )]
    http: Option<SocketAddr>,
    #[command(flatten)]
    source_roots: super::source_roots::SourceRootArgs,
}

pub async fn run(host: &Host, args: &Args) -> anyhow::Result<ExitCode> {
    let host = super::source_roots::apply(host, &args.source_roots).await?;
    let signing_key = match (&args.http, host.config().http.signing_key_path()) {
        (Some(_), Some(path)) => Some(Arc::new(SigningKey::load(&path)?)),
        _ => None,
    };
    let options = ServeOptions {
        delegate_approval: args.delegate_approval,
        signing_key,
    };
    let server = HostServer::open(&host, options).await?;
    for problem in server.problems() {
        eprintln!("warning: {problem}");
    }
    let Some(addr) = args.http else {
        server.serve_stdio().await?;
        return Ok(ExitCode::SUCCESS);
    };
    let server = server
        .bind_http(addr, Some(request_log()))
        .await
        .with_context(|| format!("modhost mcp --http {addr}"))?;
    for warning in server.warnings() {
        eprintln!("warning: {warning}");
    }
    eprintln!(
        "modhost mcp: serving MCP over HTTP at http://{}/mcp",
        server.local_addr()
    );
    server.serve_until_signalled().await?;
    Ok(ExitCode::SUCCESS)
}

/// The request log: one JSON object per line on stderr.
fn request_log() -> AccessLog {
    Arc::new(|record: &AccessRecord| {
        let mut line = record.to_line();
        line.push('\n');
        // A closed stderr loses the log, not the request.
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    })
}

//! `modhost mcp [--delegate-approval]`: serve the tools over MCP on stdio
//! (MCP 2026-07-28 per request, or a handshake revision from 2024-11-05 to
//! 2025-11-25) until stdin closes. Nothing but protocol lines goes to
//! stdout; warnings go to stderr.
//!
//! The workspace of its calls: the client's first root when the client
//! sends roots (`crate::mcp`), else the host's: `--workspace`, else
//! `MODHOST_WORKSPACE` (JSON client configs can set env and args only),
//! else the current directory unless that is `/` or the home, where none
//! is granted and a call that needs one is refused with the remedy.

use std::process::ExitCode;
use std::sync::Arc;

use crate::Host;
use crate::mcp::{ToolboxBackend, serve_stdio};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Let the client approve every call of a tool whose approval verdict is
    /// `ask` (recorded as approved by "client"), instead of the user being
    /// asked for each call through the client (elicitation).
    #[arg(long)]
    delegate_approval: bool,
    #[command(flatten)]
    source_roots: super::source_roots::SourceRootArgs,
}

pub async fn run(host: &Host, args: &Args) -> anyhow::Result<ExitCode> {
    let host = super::source_roots::apply(host, &args.source_roots).await?;
    // A server calls the same tools over and over: each call's process is
    // started ahead, while the client is busy elsewhere.
    let host = host.keep_warm();
    host.engines()
        .set_up_wasm_ahead(&host.layout().modules_dir());
    // Follows the operator's changes while it serves (`tools::live`).
    let toolbox = crate::tools::open_live_toolbox(&host).await?;
    for problem in toolbox.problems() {
        eprintln!("warning: {problem}");
    }
    let backend = Arc::new(ToolboxBackend {
        toolbox,
        delegate_approval: args.delegate_approval,
    });
    serve_on_one_thread(host, backend).await?;
    Ok(ExitCode::SUCCESS)
}

/// Serve on a single-threaded runtime of its own.
///
/// A call is a short chain of wakeups (a request line, a spawn, the module's
/// answer, a response line); on the multi-threaded runtime each link could
/// hop between worker threads, and on a busy two-core machine every hop is a
/// context switch on the latency path. One thread keeps the chain on one
/// core; blocking work (a native module's spawn and reaping, what a
/// component call does after its first slice) goes to the runtime's
/// blocking pool, in the runner (`runner::native::start`,
/// `runner::run_component`), so neither a slow start nor a busy guest
/// stalls the reader.
///
/// The processes started ahead belong to that runtime, so they are stopped
/// on it, after the last call and before it goes.
async fn serve_on_one_thread(
    host: Host,
    backend: Arc<ToolboxBackend<crate::tools::HostInvoker>>,
) -> anyhow::Result<()> {
    let (done, finished) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("modhost-mcp".into())
        .spawn(move || {
            let result = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(anyhow::Error::from)
                .and_then(|runtime| {
                    let served = runtime.block_on(async {
                        let served = serve_stdio(backend).await;
                        host.shutdown().await;
                        served
                    });
                    super::runtime_end::end(runtime);
                    Ok(served?)
                });
            let _ = done.send(result);
        })?;
    finished
        .await
        .map_err(|_| anyhow::anyhow!("the MCP server thread died"))?
}

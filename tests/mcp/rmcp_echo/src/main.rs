//! `echo`: the same tool as the SDK's echo example, served by rmcp in one
//! long-lived process (no process or instance per call): the floor an MCP
//! server in Rust can reach, which `bench_mcp.py` (stdio) and
//! `bench_mcp_http.py` (streamable HTTP) compare modhost against. The output
//! mirrors FastMCP's for a `dict` result: the object as structured content
//! and as its JSON text, no output schema.
//!
//! `rmcp_echo` serves stdio; `rmcp_echo --http ADDR` serves streamable HTTP
//! at `http://ADDR/mcp` (port 0: any free port) and prints
//! `rmcp_echo: serving MCP over HTTP at http://ADDR/mcp` on stderr once it
//! listens, the line `modhost mcp --http` prints, so the benchmark starts
//! both the same way. HTTP mode is rmcp's stateless server (no sessions:
//! every 2026-07-28 request stands alone, as modhost serves it), answering
//! with a JSON body rather than an SSE stream when the call sends nothing
//! before its result, on a multi-threaded runtime with a worker per core,
//! as a deployment would run it.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize, JsonSchema)]
struct EchoInput {
    /// The text to send back.
    message: String,
}

#[derive(Clone)]
struct Echo {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Echo {
    /// Return the message unchanged.
    #[tool]
    async fn echo(
        &self,
        Parameters(EchoInput { message }): Parameters<EchoInput>,
    ) -> CallToolResult {
        CallToolResult::structured(json!({ "message": message }))
    }
}

// The router the server was built with. The macro's default,
// `Self::tool_router()`, builds a new router on every call and leaves the
// stored one unread (a compiler warning); the floor this benchmark
// compares against should carry neither.
#[tool_handler(router = self.tool_router)]
impl ServerHandler for Echo {}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => stdio(),
        [flag, addr] if flag == "--http" => http(addr),
        _ => Err("usage: rmcp_echo [--http ADDR]".into()),
    }
}

fn echo() -> Echo {
    Echo {
        tool_router: Echo::tool_router(),
    }
}

/// One client on stdin/stdout, on a single thread (what the stdio
/// benchmark measures).
fn stdio() -> Result<(), Box<dyn std::error::Error>> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(async {
            let server = echo().serve(rmcp::transport::stdio()).await?;
            server.waiting().await?;
            Ok(())
        })
}

/// Streamable HTTP at `/mcp`, stateless, JSON answers; hyper serves each
/// connection (HTTP/1.1 keep-alive) on its own task.
fn http(addr: &str) -> Result<(), Box<dyn std::error::Error>> {
    use hyper_util::rt::TokioIo;
    use hyper_util::service::TowerToHyperService;
    use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    use std::sync::Arc;

    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(async {
            let config = StreamableHttpServerConfig::default()
                .with_legacy_session_mode(false)
                .with_json_response(true)
                .with_sse_keep_alive(None);
            let service = StreamableHttpService::new(
                || Ok(echo()),
                Arc::new(NeverSessionManager::default()),
                config,
            );
            let listener = tokio::net::TcpListener::bind(addr).await?;
            eprintln!(
                "rmcp_echo: serving MCP over HTTP at http://{}/mcp",
                listener.local_addr()?
            );
            loop {
                let (stream, _) = listener.accept().await?;
                let _ = stream.set_nodelay(true);
                let service = TowerToHyperService::new(service.clone());
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        })
}

//! `echo`: the same tool as the SDK's echo example, served by rmcp over
//! stdio in one long-lived process (no process or instance per call): the
//! floor an MCP server in Rust can reach, which `bench_mcp.py` compares
//! modhost against. The output mirrors FastMCP's for a `dict` result: the
//! object as structured content and as its JSON text, no output schema.

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

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let echo = Echo {
        tool_router: Echo::tool_router(),
    };
    let server = echo.serve(rmcp::transport::stdio()).await?;
    server.waiting().await?;
    Ok(())
}

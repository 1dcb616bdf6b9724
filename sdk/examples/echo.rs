//! The smallest useful module: `echo.echo` returns its message.
//!
//! `cargo build -p modsdk --example echo`, then install the binary with
//! `modhost install`. The MCP benchmark (`tests/mcp/bench_mcp.py`) serves
//! this module against a FastMCP server with the same tool.

use modsdk::{Capability, Cost, Ctx, ModError, Module, reads};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EchoInput {
    /// The text to send back.
    message: String,
}

/// The output is left untyped (`Value`), so no output schema is declared:
/// an MCP client then has nothing to validate it against, like the tool it
/// is benchmarked against.
fn echo(_ctx: &mut Ctx, EchoInput { message }: EchoInput) -> Result<Value, ModError> {
    Ok(json!({ "message": message }))
}

fn main() {
    Module::new("echo", "1.0.0")
        .title("Echo")
        .description("Sends its input back.")
        .capability(
            Capability::new("echo.echo", echo)
                .title("Echo")
                .description("Return the message unchanged.")
                .effects(reads(&[], Cost::Trivial)),
        )
        .serve()
}

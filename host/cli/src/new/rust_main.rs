//! {{NAME}}: a modhost module (made with `modhost new`).
//!
//! Build it, install the binary, check it, call it:
//!
//!     cargo build --release
//!     modhost install target/release/{{NAME}}     (--upgrade after a change)
//!     modhost conformance {{NAME}}
//!     modhost invoke {{NAME}} greet --input @example-input.json

use modsdk::{Access, Capability, Cost, Ctx, Effects, ModError, Module, RootKind};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GreetInput {
    /// Who to greet.
    name: String,
}

#[derive(Serialize, JsonSchema)]
struct Greeting {
    greeting: String,
    /// How many greetings this module has given so far.
    count: u64,
}

fn greet(ctx: &mut Ctx, GreetInput { name }: GreetInput) -> Result<Greeting, ModError> {
    let state = ctx.root("state")?;
    let count = state
        .read_to_string("count")
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok())
        .unwrap_or(0)
        + 1;
    state.write("count", format!("{count}\n").as_bytes())?;
    Ok(Greeting {
        greeting: format!("Hello, {name}!"),
        count,
    })
}

fn main() {
    Module::new("{{NAME}}", "0.1.0")
        .title("{{NAME}}")
        .description("Greets someone and counts the greetings it gave (made with `modhost new`).")
        .root(
            "state",
            RootKind::State,
            Access::ReadWrite,
            "where it keeps its greeting count",
        )
        .capability(
            Capability::new("{{NAME}}.greet", greet)
                .title("Greet")
                .description("Greet someone by name; returns the greeting and how many greetings this module has given so far.")
                .effects(Effects {
                    reads: vec!["state".into()],
                    writes: vec!["state".into()],
                    cost: Cost::Trivial,
                    ..Effects::default()
                })
                .example("greet the world", serde_json::json!({"name": "world"})),
        )
        .serve()
}

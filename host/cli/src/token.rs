//! `modhost token new|hash`: static bearer tokens for `modhost mcp --http`,
//! so that no operator hashes one by hand.
//!
//! - `new --principal NAME [--scope S]...`: a fresh random token. The token
//!   alone goes to stdout (`TOKEN=$(modhost token new ...)`), shown this
//!   once and stored nowhere; the `[[http.tokens]]` lines to add to
//!   `config.toml` go to stderr, for the person at the terminal.
//! - `hash --principal NAME [--scope S]...`: the lines for a token the
//!   operator already has (from a secret manager), read from stdin; the
//!   lines go to stdout, ready to append (`... < token >> config.toml`).
//!
//! `--json` prints one document instead (`principal`, `sha256`, `scopes`,
//! `config_lines`, and `token` for `new`).
//!
//! Design decisions: the name is `token`, a new top-level command: the CLI
//! surface (DESIGN.md) has no command about callers, and `modhost mcp`'s
//! own arguments are the server's; `token new` reads as what it does. It
//! opens no home and writes no file: `config.toml` is the operator's to
//! edit (comments, review, a ConfigMap), and a token written anywhere would
//! outlive its one showing.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use modhost_mcp::http::auth::NewStaticToken;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: TokenCommand,
}

#[derive(Debug, clap::Subcommand)]
enum TokenCommand {
    /// Make a random token: the token on stdout, the config.toml lines on stderr.
    New(EntryArgs),
    /// The config.toml lines for a token read from stdin.
    Hash(EntryArgs),
}

#[derive(Debug, clap::Args)]
struct EntryArgs {
    /// Who requests with this token are from (letters, digits, -_.@).
    #[arg(long, value_name = "NAME")]
    principal: String,
    /// A scope the token grants (repeat for several).
    #[arg(long = "scope", value_name = "SCOPE")]
    scopes: Vec<String>,
    /// Print one JSON document on stdout.
    #[arg(long)]
    json: bool,
}

/// The largest token read from stdin.
const MAX_STDIN_BYTES: u64 = 64 * 1024;

pub fn run(home: Option<&Path>, args: &Args) -> anyhow::Result<ExitCode> {
    let config_path = modhost::home::HomeLayout::resolve(home)
        .map(|root| {
            modhost::home::HomeLayout::new(root)
                .config_path()
                .display()
                .to_string()
        })
        .unwrap_or_else(|_| "config.toml".to_owned());
    match &args.command {
        TokenCommand::New(entry) => {
            let made = NewStaticToken::generate(&entry.principal, &entry.scopes)?;
            if entry.json {
                print(&made, true)?;
            } else {
                outln!("{}", made.token);
                eprintln!(
                    "The token above is shown this once and stored nowhere; the client sends it as \
                     `Authorization: Bearer <token>`.\nAdd these lines to {config_path}:\n\n{}",
                    made.toml_lines()
                );
            }
        }
        TokenCommand::Hash(entry) => {
            let mut token = String::new();
            std::io::stdin()
                .take(MAX_STDIN_BYTES)
                .read_to_string(&mut token)
                .context("could not read the token from stdin")?;
            let made = NewStaticToken::for_token(&token, &entry.principal, &entry.scopes)?;
            if entry.json {
                print(&made, false)?;
            } else {
                out!("{}", made.toml_lines());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print(made: &NewStaticToken, with_token: bool) -> anyhow::Result<()> {
    let mut document = serde_json::json!({
        "principal": made.principal,
        "sha256": made.sha256,
        "scopes": made.scopes,
        "config_lines": made.toml_lines(),
    });
    if with_token {
        document["token"] = serde_json::json!(made.token);
    }
    crate::stdout::print_json(&document)
}

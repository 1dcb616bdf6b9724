//! The `modhost` command line: one module per subcommand.
//!
//! Exit codes (`exit_code.rs`, printed by `modhost --help`): 0 ok, 1 the
//! capability ran and failed (or `conformance` found an error), 2 anything
//! refused or not done: a usage error (clap's own exit 2 too), a host
//! error, and every refusal, whichever part of the host refused (an
//! approval rule, a module's standing, input that does not fit its schema,
//! an install that would be broken). Logs go to stderr through
//! `tracing`, quiet by default (warnings), `-v` for info, `-vv` debug,
//! `-vvv` trace; `RUST_LOG` overrides.
//!
//! Conventions: `--color auto|always|never` and `NO_COLOR` (`color`);
//! `--format text|json` / `--json` on every report (`output_format`);
//! read-only commands never create a home (`require_home`); an error's
//! causes are printed once each (`error_text`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use modhost::{Host, HostOptions};

#[macro_use]
mod stdout;

mod audit;
mod color;
mod conformance;
mod describe;
mod doctor;
mod download_progress;
mod enable;
mod exit_code;
mod install;
mod invoke;
mod knowledge;
mod list;
mod lock;
mod mcp;
mod new;
mod output_format;
mod pin;
mod remove;
mod runtime_end;
mod server_json;
mod source_roots;
#[cfg(feature = "wasm")]
mod status_line;
mod sync;
mod termination;
mod token;
mod tools;

use exit_code::{EXIT_CODES, EXIT_USAGE};

/// Shown after `modhost --help`: the conventions every command follows.
const CONVENTIONS: &str = "Output: reports print text for people; --format json (or --json) prints one JSON \
document on stdout instead (list, describe, knowledge, doctor; tools --format also takes mcp, openai, \
openai-responses and anthropic). Colour: --color auto|always|never, and NO_COLOR=1 means never.
Home: read-only commands (list, describe, tools, knowledge, doctor, mcp, audit) never create one; \
`modhost install` does.";

#[derive(Debug, Parser)]
#[command(name = "modhost", version, about = "A plugin host for AI agents")]
#[command(after_help = format!("{CONVENTIONS}\n\n{EXIT_CODES}"))]
pub(crate) struct Cli {
    /// The host home (default: $MODHOST_HOME, else the XDG data dir).
    #[arg(long, global = true, value_name = "DIR")]
    home: Option<PathBuf>,
    /// The workspace granted as the `workspace` root (default: the current
    /// directory, unless it is / or your home directory: then none).
    #[arg(long, global = true, value_name = "DIR", env = "MODHOST_WORKSPACE")]
    workspace: Option<PathBuf>,
    /// More logging on stderr (-v info, -vv debug, -vvv trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Colour on stderr: auto (a terminal, unless NO_COLOR is set), always or never.
    #[arg(long, global = true, value_enum, value_name = "WHEN")]
    color: Option<color::ColorChoice>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List installed modules.
    List(list::Args),
    /// Show a module's descriptor and what the host would grant it.
    Describe(describe::Args),
    /// Enable a module.
    Enable(enable::Args),
    /// Disable a module (it stays installed).
    Disable(enable::Args),
    /// Invoke one capability.
    Invoke(invoke::Args),
    /// Install a module from a local executable, component, folder or archive, or an MCP server (`--mcp`).
    Install(install::Args),
    /// Remove a module (its state stays unless --purge).
    Remove(remove::Args),
    /// What this machine and home support.
    Doctor(doctor::Args),
    /// Print the agent tool definitions (json, openai, anthropic or mcp shape).
    Tools(tools::Args),
    /// Print a module's verified knowledge documents.
    Knowledge(knowledge::Args),
    /// Serve the tools as an MCP server on stdio.
    Mcp(mcp::Args),
    /// Approve a module exactly as installed now (bytes, descriptor, contract).
    Pin(pin::Args),
    /// Remove a module's pin.
    Unpin(pin::Args),
    /// Check a module (installed, or a path to an executable) against the contract.
    Conformance(conformance::Args),
    /// Write a new module's skeleton (rust, python, node or sh) that
    /// installs, conforms and answers as it is.
    New(new::Args),
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish).
    Completions(CompletionsArgs),
    /// Check and read the record of every call (verify, show, tail).
    Audit(audit::Args),
    /// Make a static bearer token for `modhost mcp --http` (and its config.toml lines).
    Token(token::Args),
    /// Converge this home to a lockfile (modhost.toml): all or nothing.
    Sync(sync::Args),
    /// Write a lockfile (modhost.toml) from this home.
    Lock(lock::Args),
    /// Write an MCP registry server.json entry for a module.
    ServerJson(server_json::Args),
}

#[derive(Debug, clap::Args)]
struct CompletionsArgs {
    /// The shell, for example `modhost completions bash > /etc/bash_completion.d/modhost`.
    shell: clap_complete::Shell,
}

impl Command {
    /// Commands that only read the home: they must never create one.
    fn only_reads_the_home(&self) -> bool {
        matches!(
            self,
            Command::List(_)
                | Command::Describe(_)
                | Command::Tools(_)
                | Command::Knowledge(_)
                | Command::Doctor(_)
                | Command::Mcp(_)
                | Command::Audit(_)
                | Command::Lock(_)
        )
    }
}

/// Run the `modhost` command on this process's arguments (see `modhost --help`).
pub fn main() -> ExitCode {
    // The colour decision comes first, so clap's own help and errors follow it.
    let raw: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let color = color::ColorChoice::resolve(color::ColorChoice::from_args(&raw));
    let matches = Cli::command().color(color.for_clap()).get_matches_from(raw);
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let color = color::ColorChoice::resolve(cli.color);
    init_logging(cli.verbose, color.stderr());
    #[cfg(feature = "wasm")]
    status_line::install(color.stderr());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: could not start the async runtime: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let outcome = runtime.block_on(run(cli));
    runtime_end::end(runtime);
    // The last spans and metrics, when `[telemetry]` is on (bounded).
    modhost::telemetry::shutdown();
    // Every module process was killed and reaped with its call (or the
    // server's processes started ahead, at its shutdown).
    #[cfg(target_os = "linux")]
    {
        modhost_sandbox::pids::remove_host_cgroup();
        modhost_sandbox::memory_cgroup::remove_host_cgroups();
    }
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", error_text(&e));
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// The error and its causes, each cause once: a library error that already
/// quotes its source (`could not read X: No such file`) is not followed by
/// the same source again.
fn error_text(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if text.contains(&cause) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    text
}

/// Refuse a read-only command on a home that does not exist, with the remedy,
/// rather than creating an empty one and reporting nothing installed.
fn require_home(options: &HostOptions) -> anyhow::Result<()> {
    let home = modhost::home::HomeLayout::resolve(options.home.as_deref())?;
    if !home.exists() {
        anyhow::bail!(
            "no modhost home at {}: nothing is installed there. Install a module first (`modhost install PATH`, \
             which creates the home), or point --home or MODHOST_HOME at an existing home",
            home.display()
        );
    }
    Ok(())
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let options = HostOptions {
        home: cli.home,
        workspace: cli.workspace,
    };
    if let Command::Token(args) = &cli.command {
        // Prints a token and the lines to add; no home is opened or created.
        return token::run(options.home.as_deref(), args);
    }
    if let Command::New(args) = &cli.command {
        // Writes one folder; no host home is opened or created.
        return new::run(args);
    }
    if let Command::Completions(args) = &cli.command {
        // Generated into memory, then written as every output is: a closed
        // pipe (`| head`) ends quietly instead of panicking in the generator.
        let mut script = Vec::new();
        clap_complete::generate(args.shell, &mut Cli::command(), "modhost", &mut script);
        out!("{}", String::from_utf8_lossy(&script));
        return Ok(ExitCode::SUCCESS);
    }
    if let Command::Doctor(args) = &cli.command {
        // The doctor must report a broken or missing home, not die on it.
        return doctor::run(options, args).await;
    }
    if let Command::Audit(args) = &cli.command {
        // Read-only, and without config.toml: a broken one must not hide
        // the record of what ran.
        require_home(&options)?;
        let home = modhost::home::HomeLayout::resolve(options.home.as_deref())?;
        return audit::run(&home, args);
    }
    if cli.command.only_reads_the_home() {
        require_home(&options)?;
    }
    let host = Host::open(options)?;
    match cli.command {
        Command::List(args) => list::run(&host, &args).await,
        Command::Describe(args) => describe::run(&host, &args).await,
        Command::Enable(args) => enable::run(&host, &args, true).await,
        Command::Disable(args) => enable::run(&host, &args, false).await,
        Command::Invoke(args) => invoke::run(&host, args).await,
        Command::Install(args) => install::run(&host, &args).await,
        Command::Remove(args) => remove::run(&host, &args).await,
        Command::Tools(args) => tools::run(&host, &args).await,
        Command::Knowledge(args) => knowledge::run(&host, &args).await,
        Command::Mcp(args) => mcp::run(&host, &args).await,
        Command::Pin(args) => pin::pin(&host, &args).await,
        Command::Unpin(args) => pin::unpin(&host, &args).await,
        Command::Conformance(args) => conformance::run(&host, &args).await,
        Command::Sync(args) => sync::run(&host, &args).await,
        Command::Lock(args) => lock::run(&host, &args).await,
        Command::ServerJson(args) => server_json::run(&host, &args).await,
        Command::Doctor(_)
        | Command::New(_)
        | Command::Completions(_)
        | Command::Audit(_)
        | Command::Token(_) => {
            unreachable!("handled above")
        }
    }
}

/// The log's stderr, each line masked with the secret values the process
/// handed to calls (`modhost::mask_log_line`): a module's words can reach a
/// log line by ways that skip its call's masked outcome. The formatter
/// writes one whole event per `write`.
struct MaskedStderr;

impl std::io::Write for MaskedStderr {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let masked = std::str::from_utf8(bytes)
            .ok()
            .and_then(modhost::mask_log_line);
        match masked {
            Some(line) => std::io::stderr().write_all(line.as_bytes()),
            None => std::io::stderr().write_all(bytes),
        }?;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

fn init_logging(verbose: u8, ansi: bool) {
    let default = match verbose {
        // Warnings, and the one progress note of long work: compiling a
        // component the first time.
        0 => "warn,modhost_runner::wasm=info",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colours only for a person at a terminal (or `--color always`), never
    // in a log file or an MCP client's stderr capture.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| MaskedStderr)
        .with_target(false)
        .with_ansi(ansi)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::error_text;

    #[test]
    fn a_cause_already_quoted_by_its_error_is_not_printed_again() {
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let quoted = anyhow::Error::new(std::io::Error::new(io.kind(), io.to_string()))
            .context(format!("could not read /nonexistent: {io}"));
        assert_eq!(
            error_text(&quoted),
            format!("could not read /nonexistent: {io}")
        );
        let fresh = anyhow::anyhow!("disk on fire").context("could not install");
        assert_eq!(error_text(&fresh), "could not install: disk on fire");
    }
}

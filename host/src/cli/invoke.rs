//! `modhost invoke MODULE CAPABILITY` or `modhost invoke MODULE.CAPABILITY`.
//!
//! Human output: the result's `text` (else the pretty `output`), then one
//! `@artifact {json}` line per artifact; warnings go to stderr. With
//! `--json`: the outcome on stdout, or `{"error": {"kind", "message",
//! "remedy"}}`. Exit 1 when the capability failed, 2 for usage and host
//! errors (unknown module or capability).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use modhost::config::is_root_name;
use modhost::{Host, HostError, InvokeError, InvokeRequest};
use serde_json::Value;

use super::{EXIT_FAILED, EXIT_USAGE};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A module id, or `MODULE.CAPABILITY` / a unique capability id.
    target: String,
    /// The capability id (`files.search` or `search`).
    capability: Option<String>,
    /// Arguments: inline JSON, `@FILE`, or `-` for stdin (default `{}`).
    #[arg(long, value_name = "JSON|@FILE|-")]
    input: Option<String>,
    /// Grant a source root for this call (wins over config.toml).
    #[arg(long = "source-root", value_name = "NAME=PATH", value_parser = parse_source_root)]
    source_roots: Vec<(String, PathBuf)>,
    #[arg(long, value_name = "N")]
    deadline_ms: Option<u64>,
    #[arg(long, value_name = "N")]
    max_output_bytes: Option<u64>,
    /// Print the result (or the error) as JSON.
    #[arg(long)]
    json: bool,
}

/// Parse `NAME=PATH` (the same name rule as `[source_roots]`).
pub fn parse_source_root(raw: &str) -> Result<(String, PathBuf), String> {
    let (name, path) = raw.split_once('=').ok_or("expected NAME=PATH")?;
    if !is_root_name(name) {
        return Err(format!(
            "{name:?} is not a root name (letters, digits, '-' and '_')"
        ));
    }
    if path.is_empty() {
        return Err("the path is empty".into());
    }
    Ok((name.to_owned(), PathBuf::from(path)))
}

fn read_input(raw: Option<&str>) -> anyhow::Result<Value> {
    let text = match raw {
        None => return Ok(Value::Object(Default::default())),
        Some("-") => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("reading the input from stdin")?;
            text
        }
        Some(raw) => match raw.strip_prefix('@') {
            Some(path) => std::fs::read_to_string(path)
                .with_context(|| format!("reading the input file {path}"))?,
            None => raw.to_owned(),
        },
    };
    serde_json::from_str(&text).context("the input is not valid JSON")
}

pub async fn run(host: &Host, args: Args) -> anyhow::Result<ExitCode> {
    let input = read_input(args.input.as_deref())?;
    let mut request = InvokeRequest {
        args: input,
        source_roots: args
            .source_roots
            .iter()
            .cloned()
            .collect::<BTreeMap<_, _>>(),
        deadline: args.deadline_ms.map(Duration::from_millis),
        max_output_bytes: args.max_output_bytes,
        ..InvokeRequest::default()
    };
    let result = match &args.capability {
        Some(capability) => {
            request.module = args.target.clone();
            request.capability = capability.clone();
            host.invoke(request).await
        }
        None => invoke_single_target(host, &args.target, request).await,
    };
    match result {
        Ok(outcome) => {
            if args.json {
                let mut value = serde_json::to_value(&outcome)?;
                value["artifacts"] = serde_json::to_value(&outcome.artifacts)?;
                super::print_json(&value)?;
            } else {
                match &outcome.result.text {
                    Some(text) => {
                        print!("{text}");
                        if !text.ends_with('\n') {
                            println!();
                        }
                    }
                    None => println!("{}", serde_json::to_string_pretty(&outcome.result.output)?),
                }
                for artifact in &outcome.artifacts {
                    println!(
                        "{}{}",
                        modproto::ARTIFACT_MARKER,
                        serde_json::to_string(artifact)?
                    );
                }
            }
            for warning in &outcome.result.warnings {
                eprintln!("warning: {warning}");
            }
            for warning in &outcome.host_warnings {
                eprintln!("host warning: {warning}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            if args.json {
                super::print_json(&serde_json::json!({ "error": error.to_json() }))?;
            } else {
                eprintln!("error[{}]: {error}", error.kind());
                for problem in error.problems() {
                    eprintln!("  - {problem}");
                }
                eprintln!("  remedy: {}", error.remedy());
                let tail = error.stderr_tail().trim_end();
                if !tail.is_empty() {
                    eprintln!("  module stderr (tail):");
                    for line in tail.lines() {
                        eprintln!("    {line}");
                    }
                }
            }
            Ok(ExitCode::from(if error.is_usage_error() {
                EXIT_USAGE
            } else {
                EXIT_FAILED
            }))
        }
    }
}

/// `invoke files.search`: the module named by the prefix when it has that
/// capability, else the one module (of all) that has a capability of that id.
async fn invoke_single_target(
    host: &Host,
    target: &str,
    mut request: InvokeRequest,
) -> Result<modhost::InvokeOutcome, InvokeError> {
    if let Some((prefix, _)) = target.split_once('.')
        && let Ok(module) = host.module(prefix).await
        && module
            .descriptor
            .as_ref()
            .is_some_and(|d| d.capability(target).is_some())
    {
        request.capability = target.to_owned();
        return host.invoke_module(&module, request).await;
    }
    let modules = host.discover().await;
    let mut owners: Vec<_> = modules
        .iter()
        .filter(|m| {
            m.descriptor
                .as_ref()
                .is_some_and(|d| d.capability(target).is_some())
        })
        .collect();
    match owners.len() {
        1 => {
            let module = owners.remove(0);
            request.capability = target.to_owned();
            request.module = module.id.clone();
            host.invoke_module(module, request).await
        }
        0 => {
            // Perhaps just a module id, missing its capability.
            if let Some(module) = modules.iter().find(|m| m.id == target) {
                return Err(InvokeError::UnknownCapability {
                    module: module.id.clone(),
                    capability: String::new(),
                    available: module.capability_ids(),
                });
            }
            let (module, _) = target.split_once('.').unwrap_or((target, ""));
            Err(InvokeError::Host(HostError::UnknownModule {
                id: module.to_owned(),
                known: modules.iter().map(|m| m.id.clone()).collect(),
            }))
        }
        _ => Err(InvokeError::Host(HostError::Refused(format!(
            "the capability {target:?} is offered by several modules ({}); name the module: modhost invoke MODULE {target}",
            owners
                .iter()
                .map(|m| m.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )))),
    }
}

//! `modhost invoke TOOL_NAME`, `modhost invoke MODULE CAPABILITY` or
//! `modhost invoke MODULE.CAPABILITY` (see [`modhost::tools::target`]).
//!
//! Before anything runs: the operator's `[capabilities]` overrides are
//! checked against what is installed (one naming nothing is an error, exit
//! 2), then the policy gate ([`modhost::tools::gate`]): a capability disabled
//! by an override or denied by a rule is refused naming the override or
//! rule; one whose verdict is `ask` runs only with `--approve`, or after an
//! interactive yes when stdin and stderr are a terminal (and stdin is not the
//! input). A call that runs carries the host's approval record; an
//! `approval` key in the caller's arguments is dropped with a warning.
//!
//! Human output: the result's `text` (else the pretty `output`), then one
//! `@artifact {json}` line per artifact; warnings go to stderr. With
//! `--json`: the outcome on stdout, or `{"error": {"kind", "message",
//! "remedy"}}` (a refusal adds `rule`). Exit 1 only when the capability ran
//! and failed; 2 for usage and host errors and for every call the host
//! refused to run (an approval rule, a module's standing, input that does
//! not fit: [`InvokeError::capability_ran`]): the module never ran, so a
//! script can tell "the host said no" from "the tool failed".

use std::io::Read;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use modhost::approval::{ApprovedBy, Refusal};
use modhost::{Host, InvokeError, InvokeRequest};
use serde_json::Value;

use super::exit_code::{EXIT_FAILED, EXIT_REFUSED};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A tool name (`files__files_search`), a module id, or
    /// `MODULE.CAPABILITY` / a unique capability id.
    target: String,
    /// The capability id (`files.search` or `search`).
    capability: Option<String>,
    /// Arguments: inline JSON, `@FILE`, or `-` for stdin (default `{}`).
    #[arg(long, value_name = "JSON|@FILE|-")]
    input: Option<String>,
    #[command(flatten)]
    source_roots: super::source_roots::SourceRootArgs,
    #[arg(long, value_name = "N")]
    deadline_ms: Option<u64>,
    #[arg(long, value_name = "N")]
    max_output_bytes: Option<u64>,
    /// Approve a call whose approval verdict is `ask` (a `deny` stays refused).
    #[arg(long)]
    approve: bool,
    /// Print the result (or the error) as JSON.
    #[arg(long)]
    json: bool,
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
    let discovered = host.discover().await;
    let config = host.config();
    // At startup, before resolving anything: a typo in an override must not
    // leave a capability the operator meant to disable runnable.
    modhost::overrides::validate_overrides(
        &config.capabilities,
        discovered.iter().filter_map(|m| m.descriptor.as_deref()),
    )?;
    modhost::overrides::validate_quota_tools(
        &config.quotas.tools,
        discovered.iter().filter_map(|m| m.descriptor.as_deref()),
    )?;
    let target = match modhost::tools::target::resolve(
        &discovered,
        &args.target,
        args.capability.as_deref(),
    ) {
        Ok(target) => target,
        Err(error) => return report_error(&error, args.json),
    };
    let mut request = InvokeRequest::new(&target.module.id, target.capability, input);
    request.source_roots = args.source_roots.map();
    request.deadline = args.deadline_ms.map(Duration::from_millis);
    request.max_output_bytes = args.max_output_bytes;
    // The gate applies to what can run; a disabled, broken or unknown
    // capability goes on to the pipeline, which says why it cannot.
    if target.module.is_invocable()
        && let Some(descriptor) = &target.module.descriptor
        && let Some(capability) = descriptor.capability(target.capability)
    {
        let approver = args.approve.then_some(ApprovedBy::Flag);
        let gate = |approver| {
            modhost::tools::gate(
                &config.approval,
                &config.capabilities,
                descriptor,
                capability,
                approver,
            )
        };
        let decided = match gate(approver) {
            Err(Refusal::NeedsApproval { tool, rule })
                if may_prompt(args.input.as_deref()) && ask(&tool, &rule) =>
            {
                gate(Some(ApprovedBy::Prompt))
            }
            other => other,
        };
        match decided {
            Ok(record) => request.approval = record,
            Err(refusal) => {
                // Refused before it reached the host's pipeline: recorded
                // here, as the toolbox's gate records its own.
                let tool = modconform::tool_name(&descriptor.id, &capability.id);
                let mut refused =
                    modhost::audit::RefusedCall::new(&tool, &request.args, refusal.kind());
                refused.module = Some(&target.module.id);
                refused.capability = Some(&capability.id);
                refused.digest = target.module.digest.as_deref();
                refused.rule = refusal.rule();
                host.record_refusal(&refused);
                host.flush_audit_log();
                return report_refusal(&refusal, args.json);
            }
        }
    }
    let invoked = tokio::select! {
        invoked = host.invoke_module(target.module, request) => invoked,
        number = super::termination::signalled() => {
            // The call's future is dropped: its process group is killed and
            // its audit record says `cancelled` (`termination.rs`).
            host.flush_audit_log();
            eprintln!("error: ended by signal {number}; the call was cancelled");
            return Ok(ExitCode::from(128u8.saturating_add(u8::try_from(number).unwrap_or(0))));
        }
    };
    // The record is written before anything is printed: a closed stdout
    // ends this process at once (`stdout.rs`).
    host.flush_audit_log();
    match invoked {
        Ok(outcome) => {
            if args.json {
                let mut value = serde_json::to_value(&outcome)?;
                value["artifacts"] = serde_json::to_value(&outcome.artifacts)?;
                super::stdout::print_json(&value)?;
            } else {
                match &outcome.result.text {
                    Some(text) => {
                        out!("{text}");
                        if !text.ends_with('\n') {
                            outln!();
                        }
                    }
                    None => outln!("{}", serde_json::to_string_pretty(&outcome.result.output)?),
                }
                for artifact in &outcome.artifacts {
                    outln!(
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
            if let Some(network) = &outcome.network {
                if !network.contacted.is_empty() {
                    eprintln!("network: contacted {}", network.contacted.join(", "));
                }
                for refusal in &network.refused {
                    eprintln!("network: refused {}: {}", refusal.host, refusal.reason);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => report_error(&error, args.json),
    }
}

fn report_error(error: &InvokeError, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        super::stdout::print_json(&serde_json::json!({ "error": error.to_json() }))?;
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
    Ok(ExitCode::from(if error.capability_ran() {
        EXIT_FAILED
    } else {
        EXIT_REFUSED
    }))
}

/// The host refused to run the call: exit 2 (see the module docs).
fn report_refusal(refusal: &Refusal, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        let mut error = serde_json::json!({
            "kind": refusal.kind(),
            "message": refusal.to_string(),
            "remedy": refusal.remedy(),
        });
        if let Some(rule) = refusal.rule() {
            error["rule"] = rule.into();
        }
        super::stdout::print_json(&serde_json::json!({ "error": error }))?;
    } else {
        eprintln!("error[{}]: {refusal}", refusal.kind());
        eprintln!("  remedy: {}", refusal.remedy());
    }
    Ok(ExitCode::from(EXIT_REFUSED))
}

/// Whether a person can be asked: stdin and stderr are a terminal, and stdin
/// is not carrying the input.
fn may_prompt(input: Option<&str>) -> bool {
    use std::io::IsTerminal;
    input != Some("-") && std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// Ask on the terminal; only an explicit yes approves.
fn ask(tool: &str, rule: &str) -> bool {
    use std::io::Write;
    eprint!("{tool} needs approval ({rule}). Run it? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    if std::io::stdin().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

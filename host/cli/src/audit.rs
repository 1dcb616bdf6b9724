//! `modhost audit verify|show|tail`: the record of every call, checked and
//! read back.
//!
//! - `verify`: is every record there as written, in order? Exit 0 when the
//!   log is intact; 1 when it is not, naming the first bad record (file and
//!   line) and what is wrong, a record that says records were lost or
//!   changed (a repair no crash explains) or never written (a gap), or a
//!   torn last line (a writer stopped in the middle of a record, which the
//!   next writer cuts off: not tampering).
//! - `show [filters]`: every record that matches, oldest first.
//! - `tail [-n N] [filters]`: the last N that match (20 by default).
//!
//! Filters: `--module`, `--capability` (a capability id or a tool name),
//! `--principal`, `--outcome ok|failed|refused|cancelled`, `--since` (an
//! RFC 3339 time, or a span back from now: `10m`, `2h`). `--json` prints
//! the records (or the verification) as one JSON document.
//!
//! Text output escapes control characters: a record's fields (a tool name
//! an MCP client made up) must not forge lines or drive the terminal.
//!
//! Read-only: never creates a home or an audit log, and does not read
//! `config.toml` (a broken one must not hide the record).

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use modhost::audit::{self, AuditRecord, Filter, Verdict};
use modhost::home::HomeLayout;

use super::exit_code::EXIT_FAILED;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: AuditCommand,
}

#[derive(Debug, clap::Subcommand)]
enum AuditCommand {
    /// Check that every record is there as written, in order (exit 1 if not).
    Verify(VerifyArgs),
    /// Print the records that match, oldest first.
    Show(ShowArgs),
    /// Print the last records that match.
    Tail(TailArgs),
}

#[derive(Debug, clap::Args)]
struct VerifyArgs {
    #[command(flatten)]
    output: super::output_format::OutputArgs,
}

#[derive(Debug, clap::Args)]
struct FilterArgs {
    /// Only calls of this module (its id).
    #[arg(long, value_name = "ID")]
    module: Option<String>,
    /// Only calls of this capability (`files.search`) or tool (`files__files_search`).
    #[arg(long, value_name = "CAPABILITY")]
    capability: Option<String>,
    /// Only calls made for this principal (`local:alice`).
    #[arg(long, value_name = "PRINCIPAL")]
    principal: Option<String>,
    /// Only calls that ended so: ok, failed, refused or cancelled.
    #[arg(long, value_name = "OUTCOME")]
    outcome: Option<String>,
    /// Only records since this time (2025-06-18T12:00:00Z) or span back (10m, 2h, 3days).
    #[arg(long, value_name = "WHEN")]
    since: Option<String>,
    #[command(flatten)]
    output: super::output_format::OutputArgs,
}

#[derive(Debug, clap::Args)]
struct ShowArgs {
    #[command(flatten)]
    filter: FilterArgs,
}

#[derive(Debug, clap::Args)]
struct TailArgs {
    /// How many records.
    #[arg(short = 'n', long, value_name = "N", default_value_t = 20)]
    lines: usize,
    #[command(flatten)]
    filter: FilterArgs,
}

pub fn run(home: &Path, args: &Args) -> anyhow::Result<ExitCode> {
    let layout = HomeLayout::new(home);
    match &args.command {
        AuditCommand::Verify(args) => verify(&layout, args),
        AuditCommand::Show(args) => show(&layout, &args.filter, None),
        AuditCommand::Tail(args) => show(&layout, &args.filter, Some(args.lines)),
    }
}

fn verify(layout: &HomeLayout, args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    let found = audit::verify(layout)?;
    let code = if found.is_intact() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    };
    if args.output.is_json() {
        super::stdout::print_json(&found)?;
        return Ok(code);
    }
    let files = if found.files.is_empty() {
        "has no file yet".to_owned()
    } else {
        format!("is {}", found.files.join(", "))
    };
    match &found.verdict {
        Verdict::Intact => outln!(
            "intact: {} record{}; the log {files}",
            found.records,
            if found.records == 1 { "" } else { "s" }
        ),
        Verdict::TornTail { file, line, bytes } => outln!(
            "torn tail: {file} line {line} is {bytes} bytes without a newline, what a writer stopped in the middle of a record leaves; the {} records before it are intact, and the next record written cuts it off (and says so)",
            found.records
        ),
        Verdict::Tampered {
            file,
            line,
            seq,
            problem,
        } => {
            let record = seq.map(|s| format!(" (record {s})")).unwrap_or_default();
            outln!("NOT INTACT: {file} line {line}{record}: {problem}");
            outln!(
                "the {} records before it are intact; the log {files}",
                found.records
            );
        }
        Verdict::Flagged { .. } => {
            outln!(
                "NOT INTACT: the chain of {} records is whole, but records in it say the log is not; the log {files}",
                found.records
            );
        }
    }
    for flagged in &found.flagged {
        outln!(
            "flagged: {} line {} (record {}): {}",
            flagged.file,
            flagged.line,
            flagged.seq,
            printable(&flagged.problem)
        );
    }
    for note in &found.notes {
        outln!("note: {}", printable(note));
    }
    Ok(code)
}

fn show(layout: &HomeLayout, args: &FilterArgs, last: Option<usize>) -> anyhow::Result<ExitCode> {
    let filter = Filter {
        module: args.module.clone(),
        capability: args.capability.clone(),
        principal: args.principal.clone(),
        outcome: args
            .outcome
            .as_deref()
            .map(audit::parse_outcome)
            .transpose()
            .map_err(anyhow::Error::msg)
            .context("--outcome")?,
        since: args
            .since
            .as_deref()
            .map(|since| audit::parse_since(since, std::time::SystemTime::now()))
            .transpose()
            .map_err(anyhow::Error::msg)
            .context("--since")?,
    };
    let json = args.output.is_json();
    let unreadable = match last {
        // The newest records, read backwards from the end of the log.
        Some(count) => {
            let found = audit::last_records(layout, &filter, count)?;
            if json {
                super::stdout::print_json(&found.records)?;
            } else {
                for record in &found.records {
                    outln!("{}", printable(&line(record)));
                }
            }
            found.unreadable
        }
        // Every record, printed as it is read: one line in memory at a time.
        None => {
            let mut shown = 0usize;
            let mut failed = None;
            let unreadable = audit::each_record(layout, |record| {
                if failed.is_some() || !filter.matches(&record) {
                    return;
                }
                if json {
                    match serde_json::to_string(&record) {
                        Ok(text) => out!("{}{text}", if shown == 0 { "[\n" } else { ",\n" }),
                        Err(e) => failed = Some(e),
                    }
                } else {
                    outln!("{}", printable(&line(&record)));
                }
                shown += 1;
            })?;
            if let Some(e) = failed {
                return Err(e).context("encode a record as JSON");
            }
            if json {
                outln!("{}", if shown == 0 { "[]" } else { "\n]" });
            }
            unreadable
        }
    };
    if unreadable > 0 {
        eprintln!(
            "warning: {unreadable} lines of the audit log are not records; `modhost audit verify` names them"
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `text` with every control character (a newline, an escape sequence's
/// ESC) written as a Rust escape: a record's fields came from callers and
/// modules, and must not forge lines or drive the terminal.
fn printable(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_owned();
    }
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// One record as a line for people: when, which, who, what came of it.
fn line(record: &AuditRecord) -> String {
    let entry = &record.entry;
    let mut text = format!("{}  #{}", entry.time, record.seq);
    if let Some(repair) = &entry.repair {
        let crash = if repair.after_crash() {
            ""
        } else {
            " (NOT explained by a crash)"
        };
        text.push_str(&format!("  repair{crash}: {}", repair.reason));
        return text;
    }
    if let Some(gap) = &entry.gap {
        text.push_str(&format!(
            "  gap: {} records could not be written since {} ({})",
            gap.records, gap.since, gap.error
        ));
        return text;
    }
    let dash = || "-".to_owned();
    text.push_str(&format!(
        "  {}  {}  {}",
        entry.principal.clone().unwrap_or_else(dash),
        entry.tool.clone().unwrap_or_else(dash),
        entry.outcome.map_or("-", |o| o.as_str())
    ));
    if let Some(kind) = &entry.kind {
        text.push_str(&format!(" ({kind})"));
    }
    if let Some(ms) = entry.duration_ms {
        text.push_str(&format!("  {ms:.1} ms"));
    }
    if let Some(bytes) = entry.output_bytes {
        text.push_str(&format!("  {bytes} B out"));
    }
    if let Some(approval) = &entry.approval {
        if let Some(by) = &approval.by {
            text.push_str(&format!("  approved by {by}"));
        }
        if let Some(rule) = &approval.rule {
            text.push_str(&format!("  [{rule}]"));
        }
    }
    if let Some(retry) = entry.retry_after_s {
        text.push_str(&format!("  retry after {retry} s"));
    }
    if entry.sandbox_denied {
        text.push_str("  (the sandbox denied an access)");
    }
    if let Some(network) = &entry.network {
        if !network.contacted.is_empty() {
            text.push_str(&format!("  contacted {}", network.contacted.join(", ")));
        }
        if !network.refused.is_empty() {
            let hosts: Vec<&str> = network.refused.iter().map(|r| r.host.as_str()).collect();
            text.push_str(&format!("  refused {}", hosts.join(", ")));
        }
    }
    text
}

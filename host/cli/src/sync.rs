//! `modhost sync [FILE] [--dry-run] [--json] [--prune]`: converge this home
//! to a lockfile (default `./modhost.toml`), all or nothing.
//!
//! The plan is printed one module a line (text) or as one JSON document
//! (`--json`, the library's `SyncReport`); progress goes to stderr, one line
//! per module and stage, plus a download bar on a terminal.

use std::path::PathBuf;
use std::process::ExitCode;

use modhost::Host;
use modhost::lockfile::Lockfile;
use modhost::sync::{StepAction, SyncOptions, SyncPlan, SyncProgress};

use crate::download_progress::DownloadProgress;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The lockfile (`modhost lock` writes one).
    #[arg(default_value = "modhost.toml")]
    file: PathBuf,
    /// Print the plan and change nothing.
    #[arg(long)]
    dry_run: bool,
    /// `--json` (or `--format json`): the plan, and whether it was
    /// applied, as one JSON document.
    #[command(flatten)]
    output: crate::output_format::OutputArgs,
    /// Remove installed modules the lockfile does not name (their state is kept).
    #[arg(long)]
    prune: bool,
    /// Install modules without a signature although [signatures] requires one.
    #[arg(long)]
    allow_unsigned: bool,
}

/// One stderr line per module and stage.
struct Lines {
    download: DownloadProgress,
}

impl SyncProgress for Lines {
    fn module(&self, id: &str, stage: &str) {
        eprintln!("sync: {id}: {stage}");
    }

    fn committing(&self) {
        eprintln!("sync: every module staged and checked; committing");
    }

    fn download(&self) -> &dyn modhost::fetch_source::Progress {
        &self.download
    }
}

pub async fn run(host: &Host, args: &Args) -> anyhow::Result<ExitCode> {
    let lockfile = Lockfile::load(&args.file)?;
    let options = SyncOptions {
        dry_run: args.dry_run,
        prune: args.prune,
        allow_unsigned: args.allow_unsigned,
    };
    let progress = Lines {
        download: DownloadProgress::for_stderr(),
    };
    let report = host.sync(&lockfile, &options, &progress).await?;
    if args.output.is_json() {
        outln!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    for line in &report.swept {
        eprintln!("sync: settled {line}");
    }
    print_plan(&report.plan);
    if report.plan.is_noop() {
        outln!("already in sync: nothing to do");
    } else if args.dry_run {
        outln!(
            "dry run: {} change(s) planned, nothing was changed",
            report.plan.changes()
        );
    } else {
        outln!("synced: {} change(s) applied", report.plan.changes());
    }
    Ok(ExitCode::SUCCESS)
}

fn print_plan(plan: &SyncPlan) {
    outln!("plan for {}:", plan.lockfile.display());
    let width = plan.steps.iter().map(|s| s.id.len()).max().unwrap_or(0);
    for step in &plan.steps {
        let state = match (step.action, step.enabled) {
            (StepAction::Remove, _) => String::new(),
            (_, true) => String::new(),
            (_, false) => " (disabled)".into(),
        };
        outln!(
            "  {:<9}  {:<width$}  {}{state}",
            step.action.as_str(),
            step.id,
            step.reason
        );
    }
    if let Some(config) = &plan.config {
        let roots = match config.source_roots.is_empty() {
            true => "no source roots".to_owned(),
            false => format!("source roots {}", config.source_roots.join(", ")),
        };
        outln!(
            "  {:<9}  {}: {roots}, {} approval rule(s)",
            "config",
            config.path.display(),
            config.approval_rules
        );
        // What the file grants, spelled out: a dry run of a fleet file shows
        // every folder it names and every rule's decision before they hold.
        for root in &config.roots {
            outln!("  {:<9}  source root {root}", "");
        }
        for rule in &config.rules {
            outln!("  {:<9}  rule {rule}", "");
        }
    }
    for name in &plan.leftovers {
        outln!(
            "  {:<9}  {name}: left by a killed commit; the sync puts it back or removes it first",
            "settle"
        );
    }
    for id in &plan.kept {
        outln!(
            "  {:<9}  {id:<width$}  installed, not in the lockfile (--prune removes it)",
            "kept"
        );
    }
}

//! `modhost list [--format text|json] [--json]`.
//!
//! Each entry carries `status` (`enabled`, `disabled`, `broken`, and under
//! `pins = "enforce"` `unpinned` or `changed`), `contract` (`v1`, `v2`,
//! `refused`, `unevaluated`) with its `contract_standing`, and `pin`
//! (`pinned`, `unpinned`, `changed`, `off`). Human output says, under each
//! module that cannot be invoked, why and what to run.

use std::process::ExitCode;

use modhost::{Host, ModuleStatus};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    output: super::output_format::OutputArgs,
}

pub async fn run(host: &Host, args: &Args) -> anyhow::Result<ExitCode> {
    let modules = host.discover().await;
    if args.output.is_json() {
        let entries: Vec<_> = modules.iter().map(|m| m.summary()).collect();
        super::stdout::print_json(&entries)?;
        return Ok(ExitCode::SUCCESS);
    }
    if modules.is_empty() {
        outln!(
            "no modules installed in {}",
            host.layout().modules_dir().display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let id_width = modules.iter().map(|m| m.id.len()).max().unwrap_or(2).max(2);
    let version_width = modules
        .iter()
        .map(|m| m.version.as_deref().unwrap_or("-").len())
        .max()
        .unwrap_or(7)
        .max(7);
    outln!(
        "{:id_width$}  {:version_width$}  {:8}  {:11}  {:8}  CAPABILITIES",
        "ID",
        "VERSION",
        "STATUS",
        "CONTRACT",
        "PIN"
    );
    for module in &modules {
        outln!(
            "{:id_width$}  {:version_width$}  {:8}  {:11}  {:8}  {}",
            module.id,
            module.version.as_deref().unwrap_or("-"),
            module.status.as_str(),
            module.contract.label(),
            module.pin_label(),
            module.capability_ids().join(", ")
        );
        if let Some(error) = &module.error {
            outln!("    error[{}]: {}", error.kind, error.message);
        }
        let report = module.contract.report();
        if report.refusal.is_some() {
            for finding in report.findings.iter().filter(|f| f.is_error()) {
                let on = finding
                    .capability
                    .as_deref()
                    .map(|c| format!(" {c}"))
                    .unwrap_or_default();
                outln!("    finding[{}]{on}: {}", finding.id, finding.reason);
            }
            outln!(
                "    remedy: {} (`modhost describe {}` has each finding's remedy)",
                report.remedy,
                module.id
            );
        }
        if matches!(
            module.status,
            ModuleStatus::Unpinned | ModuleStatus::Changed
        ) && let Some(refusal) = module.pin.as_ref().and_then(|p| p.refusal(&module.id))
        {
            outln!("    {}: {refusal}", module.status.as_str());
        }
        for warning in &module.warnings {
            outln!("    warning: {warning}");
        }
        for warning in &module.host_warnings {
            outln!("    host warning: {warning}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

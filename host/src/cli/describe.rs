//! `modhost describe MODULE [--json] [--source-root NAME=PATH]...`: the
//! descriptor plus the host's findings (what each root would be granted as,
//! which source roots are missing, warnings), the contract standing
//! (requested version, what the host supports, reason, remedy, and for
//! contract 2 every no-weakening finding) and the pin standing.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use modhost::Host;
use serde_json::json;

use super::invoke::parse_source_root;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Module id.
    module: String,
    /// Preview with this source root (as `invoke --source-root`).
    #[arg(long = "source-root", value_name = "NAME=PATH", value_parser = parse_source_root)]
    source_roots: Vec<(String, PathBuf)>,
    #[arg(long)]
    json: bool,
}

pub async fn run(host: &Host, args: &Args) -> anyhow::Result<ExitCode> {
    let module = host.module_for_review(&args.module).await?;
    let overrides: BTreeMap<String, PathBuf> = args.source_roots.iter().cloned().collect();
    let plan = host.grants(&module, &overrides, false)?;
    let mut host_warnings = module.host_warnings.clone();
    host_warnings.extend(plan.warnings());
    // Knowledge documents that would be left out (missing, altered): the
    // operator should see them here, not only when an agent asks.
    if let Some(descriptor) = &module.descriptor {
        host_warnings.extend(
            modhost::knowledge::check(descriptor, module.knowledge_dir())
                .into_iter()
                .map(|w| format!("knowledge: {w}")),
        );
    }
    let grants: Vec<_> = plan
        .roots
        .iter()
        .map(|g| {
            json!({
                "name": g.name,
                "kind": plan.kinds.get(&g.name).map(|k| k.as_str()),
                "access": g.access.as_str(),
                "path": g.host,
            })
        })
        .collect();

    if args.json {
        let mut value = serde_json::to_value(module.summary())?;
        value["host_warnings"] = json!(host_warnings);
        value["descriptor"] = json!(module.descriptor.as_deref());
        value["grants"] = json!(grants);
        value["missing_roots"] = json!(plan.missing);
        value["binaries"] = json!(plan.binaries);
        super::print_json(&value)?;
        return Ok(ExitCode::SUCCESS);
    }

    outln!("{} {}", module.id, module.version.as_deref().unwrap_or("-"));
    outln!("  status:    {}", module.status.as_str());
    outln!("  path:      {}", module.path.display());
    outln!("  transport: {}", module.transport.as_str());
    if let Some(error) = &module.error {
        outln!("  error:     {} ({})", error.message, error.kind);
    }
    let contract = module.contract.report();
    outln!("contract: {}", contract.contract);
    outln!(
        "  requested: {}",
        contract
            .requested
            .as_deref()
            .unwrap_or("(none declared: contract 1)")
    );
    if let Some(effective) = &contract.effective {
        outln!("  spoken as: {effective}");
    }
    outln!("  host supports: {}", contract.supported);
    outln!("  reason: {}", contract.reason);
    if !contract.remedy.is_empty() {
        outln!("  remedy: {}", contract.remedy);
    }
    for finding in &contract.findings {
        for (n, line) in finding.to_string().lines().enumerate() {
            outln!("  {}{line}", if n == 0 { "" } else { "  " });
        }
    }
    match &module.pin {
        None => outln!("pin: off (pins = \"off\" in config.toml)"),
        Some(standing) => {
            outln!("pin: {}", standing.label());
            if let Some(refusal) = standing.refusal(&module.id) {
                outln!("  {refusal}");
            }
        }
    }
    if let Some(descriptor) = &module.descriptor {
        if !descriptor.title.is_empty() {
            outln!("  title:     {}", descriptor.title);
        }
        if !descriptor.description.is_empty() {
            outln!("  {}", descriptor.description);
        }
        outln!("roots:");
        for decl in &descriptor.roots {
            let granted = plan.roots.iter().find(|g| g.name == decl.name);
            match granted {
                Some(g) => outln!(
                    "  {} ({}, {}) -> {}",
                    decl.name,
                    decl.kind.as_str(),
                    g.access.as_str(),
                    g.host.display()
                ),
                None => outln!("  {} ({}) -> NOT GRANTED", decl.name, decl.kind.as_str()),
            }
        }
        outln!("capabilities:");
        for capability in &descriptor.capabilities {
            let effects = &capability.effects;
            outln!("  {}  {}", capability.id, capability.title);
            if !capability.description.is_empty() {
                outln!("      {}", capability.description);
            }
            outln!(
                "      reads: [{}]  writes: [{}]  network: {}  cost: {}",
                effects.reads.join(", "),
                effects.writes.join(", "),
                effects.network,
                effects.cost.as_str()
            );
        }
    }
    for warning in &module.warnings {
        outln!("warning: {warning}");
    }
    for warning in &host_warnings {
        outln!("host warning: {warning}");
    }
    Ok(ExitCode::SUCCESS)
}

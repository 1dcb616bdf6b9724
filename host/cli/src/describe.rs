//! `modhost describe MODULE [--format text|json] [--json] [--source-root NAME=PATH]...`: the
//! descriptor plus the host's findings (what each capability's call would be
//! granted, from the same plan `invoke` grants from, which source roots are
//! missing, which secrets it would get and from where, never their
//! values, warnings), the contract standing
//! (requested version, what the host supports, reason, remedy, and for
//! contract 2 every no-weakening finding) and the pin standing.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use modhost::Host;
use serde_json::json;

use super::source_roots::parse_source_root;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Module id.
    module: String,
    /// Preview with this source root (as `invoke --source-root`).
    #[arg(long = "source-root", value_name = "NAME=PATH", value_parser = parse_source_root)]
    source_roots: Vec<(String, PathBuf)>,
    #[command(flatten)]
    output: super::output_format::OutputArgs,
}

pub async fn run(host: &Host, args: &Args) -> anyhow::Result<ExitCode> {
    let module = host.module_for_review(&args.module).await?;
    let overrides: BTreeMap<String, PathBuf> = args.source_roots.iter().cloned().collect();
    // Authority is per capability: preview each one's plan exactly as a
    // call would get it (`Host::grants`), without touching the disk.
    let mut plans = BTreeMap::new();
    let mut networks = BTreeMap::new();
    // Which secrets each call would get, granted or not, from where: names
    // and sources only, never a value (`modhost::secrets`).
    let mut secrets = BTreeMap::new();
    if let Some(descriptor) = &module.descriptor {
        for capability in &descriptor.capabilities {
            let plan = host.grants(&module, capability, &overrides, false)?;
            plans.insert(capability.id.clone(), plan);
            networks.insert(
                capability.id.clone(),
                host.network_grant(&module, capability),
            );
            secrets.insert(
                capability.id.clone(),
                host.secret_views(&module, capability),
            );
        }
    }
    let mut host_warnings = module.host_warnings.clone();
    let mut missing = Vec::new();
    for plan in plans.values() {
        for gap in &plan.missing {
            if !missing.contains(gap) {
                missing.push(gap.clone());
                host_warnings.push(gap.warning());
            }
        }
    }
    // Knowledge documents that would be left out (missing, altered): the
    // operator should see them here, not only when an agent asks.
    if let Some(descriptor) = &module.descriptor {
        host_warnings.extend(
            modhost::knowledge::check(descriptor, module.knowledge_dir())
                .into_iter()
                .map(|w| format!("knowledge: {w}")),
        );
    }
    let grants: serde_json::Map<String, serde_json::Value> = plans
        .iter()
        .map(|(capability, plan)| {
            let roots: Vec<_> = plan
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
            (
                capability.clone(),
                json!({
                    "roots": roots,
                    "binaries": plan.binaries,
                    "network": networks.get(capability),
                    "secrets": secrets.get(capability),
                    "untrusted_output": module
                        .descriptor
                        .as_deref()
                        .and_then(|d| d.capability(capability))
                        .map(|c| host.output_is_untrusted(&module, c)),
                }),
            )
        })
        .collect();

    if args.output.is_json() {
        let mut value = serde_json::to_value(module.summary())?;
        value["host_warnings"] = json!(host_warnings);
        value["descriptor"] = json!(module.descriptor.as_deref());
        value["grants"] = json!(grants);
        value["missing_roots"] = json!(missing);
        super::stdout::print_json(&value)?;
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
            let named = descriptor.capabilities.iter().any(|c| {
                c.effects.reads.contains(&decl.name) || c.effects.writes.contains(&decl.name)
            });
            outln!(
                "  {} ({}, declared {}){}",
                decl.name,
                decl.kind.as_str(),
                decl.effective_access().as_str(),
                if named {
                    ""
                } else {
                    ": named by no capability, never granted"
                }
            );
        }
        outln!("capabilities (each call is granted only what its effects name):");
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
                effects.network.summary(),
                effects.cost.as_str()
            );
            if effects.network.is_used() {
                match networks.get(&capability.id).and_then(Option::as_ref) {
                    Some(view) => outln!(
                        "      connects to: {} (through the host's egress proxy)",
                        view.summary
                    ),
                    None => outln!("      connects to: nothing (config.toml grants it no host)"),
                }
            }
            // What a `modhost mcp` connection in lockdown (one that
            // received untrusted content) would let this call do.
            if let Some(view) = networks.get(&capability.id).and_then(Option::as_ref) {
                outln!(
                    "      in lockdown: connects to {} ([lockdown] allowed_hosts)",
                    view.under_lockdown
                );
            }
            if !effects.writes.is_empty() || !effects.spawns.is_empty() {
                outln!(
                    "      in lockdown: runs only after a person approves each call (it writes or runs programs)"
                );
            }
            if host.output_is_untrusted(&module, capability) {
                outln!(
                    "      output: untrusted content; a `modhost mcp` connection that receives it is locked down ([lockdown] in config.toml)"
                );
            } else if effects.network.is_used() {
                outln!(
                    "      output: declared trusted although it reaches the network; no lockdown follows it (untrusted_output = true under its [capabilities] entry in config.toml overrides that)"
                );
            }
            let Some(plan) = plans.get(&capability.id) else {
                continue;
            };
            if plan.roots.is_empty() {
                outln!("      grants: no root");
            }
            for g in &plan.roots {
                outln!(
                    "      grants: {} ({}) -> {}",
                    g.name,
                    g.access.as_str(),
                    g.host.display()
                );
            }
            for gap in &plan.missing {
                outln!("      not granted: {} ({})", gap.name, gap.reason);
            }
            for (name, path) in &plan.binaries {
                outln!("      runs: {name} -> {}", path.display());
            }
            for view in secrets.get(&capability.id).into_iter().flatten() {
                let from = view
                    .source
                    .as_deref()
                    .map(|source| format!(", from {source}"))
                    .unwrap_or_default();
                match (&view.problem, view.granted) {
                    (None, _) => outln!("      secret: {} (granted{from})", view.name),
                    (Some(problem), true) => outln!(
                        "      secret: {} (granted{from}, but a call is refused: {problem})",
                        view.name
                    ),
                    (Some(problem), false) => {
                        outln!("      secret: {} (a call is refused: {problem})", view.name)
                    }
                }
            }
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

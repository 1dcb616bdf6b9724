//! `modhost conformance MODULE-OR-PATH [--json]`: the conformance kit
//! (`modconform`) on one module: static checks over its descriptor, then the
//! behavioural battery against the live executable.
//!
//! The target is an installed module id, or a path to an executable or a
//! WebAssembly component (any argument with a `/`, or a file that exists when
//! no module has that id).
//! Every finding is reported, each with severity, capability, reason and
//! remedy. Exit 0 when no finding is an error, 1 otherwise, 2 when the
//! target cannot be checked at all.
//!
//! The module is run as the host runs it (natively a fresh process per call,
//! cleared environment, confined; a component a fresh instance per call with
//! its roots preopened at `/roots/<name>`); examples get scratch `state` and `artifacts`
//! roots, the workspace read-only, and the configured source roots and
//! binaries, each invoke exactly what `modhost invoke` grants its capability
//! (see `modhost::conformance_caller`). An example that fails with its
//! capability's grants but succeeds when also granted a declared root the
//! capability does not name is reported (`battery.reads_unnamed_root`),
//! with the root to name in `effects.reads`.
//!
//! A native module whose confined describe fails is described once more
//! unconfined: one that answers then fails only when confined, and the
//! finding (`battery.fails_only_when_confined`) says so, with the path its
//! stderr shows denied, instead of blaming its protocol.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use modconform::{BatteryOptions, ConformanceReport, Finding, check_module_with};
use modhost::conformance_caller::{
    ConformanceRoots, NativeCaller, PlannedCaller, describe, unnamed_root_findings,
};
use modhost::{Host, Transport};
use modhost_sandbox::ConfinementMode;
use modproto::Descriptor;
use serde_json::json;

use super::exit_code::{EXIT_FAILED, EXIT_USAGE};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// An installed module id, or a path to a module executable.
    target: String,
    /// One JSON object: module, path, conforms, error and warning counts, findings.
    #[arg(long)]
    json: bool,
    /// Source roots for the examples (a name the module does not declare
    /// is an error).
    #[command(flatten)]
    source_roots: super::source_roots::SourceRootArgs,
}

/// What is being checked.
struct Target {
    label: String,
    program: PathBuf,
    transport: Transport,
    /// Where its knowledge files live.
    folder: Option<PathBuf>,
}

pub async fn run(host: &Host, args: &Args) -> anyhow::Result<ExitCode> {
    let target = resolve(host, &args.target).await?;
    #[cfg(feature = "wasm")]
    let wasm_engine = match target.transport {
        Transport::Component => match host.engines().wasm() {
            Ok(engine) => Some(engine.clone()),
            Err(problem) => {
                eprintln!("error: {}: {problem}", target.program.display());
                return Ok(ExitCode::from(EXIT_USAGE));
            }
        },
        Transport::Native => None,
    };
    #[cfg(not(feature = "wasm"))]
    if target.transport == Transport::Component {
        eprintln!(
            "error: {} is a WebAssembly component, and this modhost was built without component support (the `wasm` cargo feature)",
            target.program.display()
        );
        return Ok(ExitCode::from(EXIT_USAGE));
    }
    let scratch = tempfile::Builder::new()
        .prefix("modhost-conformance-")
        .tempdir()
        .context("creating a scratch directory for the conformance run")?;
    let confinement = host.config().limits.confinement;
    // No workspace granted (started in / or the home), or one overlapping
    // the modhost home (never granted, and the battery's scratch home is not
    // that home): an empty one in the scratch directory, so the battery
    // still runs; beside the scratch home (`scratch/home`), since no root
    // inside a home is ever granted.
    let workspace = match host
        .workspace()
        .filter(|dir| !modhost::grants::overlaps_the_home(dir, host.home()))
    {
        Some(dir) => dir.to_path_buf(),
        None => {
            let empty = scratch.path().join("workspace");
            std::fs::create_dir(&empty).context("creating an empty workspace for the run")?;
            empty
        }
    };
    let overrides = args.source_roots.map();
    let source_roots = modhost::grants::merge_source_roots(&host.config().source_roots, &overrides);
    let binaries = host.config().binaries.clone();
    let scratch_path = scratch.path().join("home");
    let home = host.home().to_path_buf();
    let program_for_output = target.program.clone();
    #[cfg(feature = "wasm")]
    let runtime = tokio::runtime::Handle::current();
    // The battery blocks on child processes (or on component calls driven on
    // `runtime`): off the async workers.
    let verdict = tokio::task::spawn_blocking(move || -> anyhow::Result<ConformanceReport> {
        let roots = ConformanceRoots {
            scratch: &scratch_path,
            home: &home,
            workspace: &workspace,
            source_roots: &source_roots,
            binaries: &binaries,
        };
        #[cfg(feature = "wasm")]
        if let Some(engine) = wasm_engine {
            let caller = match modhost::conformance_caller::WasmCaller::new(
                &engine,
                &target.program,
                runtime,
            ) {
                Ok(caller) => caller,
                Err(problem) => {
                    return Ok(ConformanceReport::new(
                        target.label,
                        vec![Finding::error(
                            "battery.describe_failed",
                            problem.to_string(),
                            "build the module as a wasm32-wasip2 command component that imports only WASI",
                        )],
                    ));
                }
            };
            return battery(
                caller,
                target,
                roots,
                |caller, descriptor, roots| caller.grant(descriptor, roots),
                |descriptor| check_source_roots(descriptor, &overrides),
                |_, _| None,
            );
        }
        let caller = NativeCaller::new(&target.program, confinement);
        battery(
            caller,
            target,
            roots,
            |caller, descriptor, roots| caller.grant(descriptor, roots),
                |descriptor| check_source_roots(descriptor, &overrides),
            |target, problem| fails_only_when_confined(target, problem, confinement),
        )
    })
    .await
    .context("the conformance run panicked")??;
    drop(scratch);

    if args.json {
        super::stdout::print_json(&json!({
            "module": verdict.module,
            "path": program_for_output,
            "conforms": verdict.conforms(),
            "errors": verdict.errors().count(),
            "warnings": verdict.warnings().count(),
            "findings": verdict.findings,
            "secrets": verdict.secrets,
        }))?;
    } else {
        outln!("{}", verdict.render());
    }
    Ok(if verdict.conforms() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    })
}

/// When the confined describe fails, the same describe unconfined: a module
/// that answers only unconfined is stopped by the sandbox, and the finding
/// says so, with the denied path when its stderr names one.
///
/// Running the module unconfined is what the operator asked for by running
/// the conformance kit on it, and happens only after it failed confined.
fn fails_only_when_confined(
    target: &Target,
    problem: &str,
    confinement: ConfinementMode,
) -> Option<Finding> {
    if confinement == ConfinementMode::Off {
        return None;
    }
    let timeout = BatteryOptions::default().timeout;
    NativeCaller::new(&target.program, ConfinementMode::Off)
        .describe(timeout)
        .ok()?;
    let denial = modhost_sandbox::denial::permission_denial(problem);
    let denied = match denial.as_ref().and_then(|d| d.path.as_deref()) {
        Some(path) => format!("; denied: {path}"),
        None => String::new(),
    };
    Some(Finding::error(
        "battery.fails_only_when_confined",
        format!(
            "{}: describe fails only when confined ({problem}){denied}",
            target.program.display()
        ),
        denial
            .map(|d| d.remedy(&target.label))
            .unwrap_or_else(|| {
                "the module answers describe unconfined but not in the host's sandbox: it reads, runs or connects to something it does not declare; declare it (a root, a program in `effects.spawns`, or `network`), or run `modhost doctor` to see what the sandbox enforces".into()
            }),
    ))
}

/// Every `--source-root` name (`overrides`) must be a source root the
/// module declares: a typo is an error, not a silently ungranted root.
fn check_source_roots(
    descriptor: &Descriptor,
    overrides: &std::collections::BTreeMap<String, PathBuf>,
) -> anyhow::Result<()> {
    modhost::grants::check_source_root_names(&descriptor.id, descriptor, overrides.keys())?;
    Ok(())
}

/// Describe the module through `caller`, grant what it declares (`grant`)
/// once `check` accepts it,
/// then run the static checks and the battery. A failed describe is
/// reported as `explain` says, when it can say more (the sandbox).
fn battery<C: PlannedCaller>(
    mut caller: C,
    target: Target,
    roots: ConformanceRoots<'_>,
    grant: impl FnOnce(&mut C, &Descriptor, ConformanceRoots<'_>) -> std::io::Result<()>,
    check: impl FnOnce(&Descriptor) -> anyhow::Result<()>,
    explain: impl FnOnce(&Target, &str) -> Option<Finding>,
) -> anyhow::Result<ConformanceReport> {
    let options = BatteryOptions::default();
    let descriptor = match describe(&mut caller, options.timeout) {
        Ok(descriptor) => descriptor,
        Err(problem) => {
            if let Some(finding) = explain(&target, &problem) {
                return Ok(ConformanceReport::new(target.label, vec![finding]));
            }
            return Ok(ConformanceReport::new(
                target.label,
                vec![Finding::error(
                    "battery.describe_failed",
                    format!("{}: {problem}", target.program.display()),
                    "answer a describe request with exactly one response line holding the descriptor, then exit",
                )],
            ));
        }
    };
    check(&descriptor)?;
    grant(&mut caller, &descriptor, roots)
        .with_context(|| format!("preparing scratch roots in {}", roots.scratch.display()))?;
    let mut verdict =
        check_module_with(&mut caller, &descriptor, target.folder.as_deref(), &options);
    let unnamed =
        unnamed_root_findings(&mut caller, &descriptor, &verdict.findings, options.timeout);
    verdict.findings.extend(unnamed);
    Ok(verdict)
}

/// An installed module by id, else a path.
async fn resolve(host: &Host, raw: &str) -> anyhow::Result<Target> {
    let as_path = Path::new(raw);
    if !raw.contains('/') {
        match host.module(raw).await {
            Ok(module) if module.program.is_file() => {
                return Ok(Target {
                    label: module.id.clone(),
                    program: module.program.clone(),
                    transport: module.transport,
                    folder: module.knowledge_dir().map(Path::to_path_buf),
                });
            }
            Ok(module) => anyhow::bail!(
                "module {raw} has no executable to check ({}): {}",
                module.path.display(),
                module
                    .error
                    .map(|e| e.message)
                    .unwrap_or_else(|| "not found".into())
            ),
            Err(e) if !as_path.is_file() => return Err(e.into()),
            Err(_) => {}
        }
    }
    let program = std::fs::canonicalize(as_path)
        .with_context(|| format!("{raw} is neither an installed module nor a readable file"))?;
    anyhow::ensure!(program.is_file(), "{} is not a file", program.display());
    let label = program
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| raw.to_owned());
    Ok(Target {
        label,
        transport: Transport::of_path(&program),
        folder: program.parent().map(Path::to_path_buf),
        program,
    })
}

//! `modhost conformance MODULE-OR-PATH [--json]`: the conformance kit
//! (`modconform`) on one module: static checks over its descriptor, then the
//! behavioural battery against the live executable.
//!
//! The target is anything `modhost install` takes: an installed module id;
//! a path (any argument with a `/`, or one that exists when no module has
//! that id) to an executable, a WebAssembly component, a module folder (what
//! `modhost new` writes) or a `.tar.gz` / `.tgz` / `.zip` archive of one; or
//! an `https://` (with `--sha256`) or `oci://` URL. A folder, an archive and
//! a URL are staged exactly as install stages them
//! (`modhost::staged_module`, the install path's own copy, unpacking and
//! module lookup; a URL first through `Host::fetch_source`, its digest and
//! signature policy checked), in a temporary folder outside the home that is
//! removed afterwards: nothing is installed, and an archive install would
//! refuse is refused with the same reason. A bare executable or component
//! runs where it lies (its knowledge files beside it), unless `--sha256`
//! asks for its digest to be checked: then the checked copy runs.
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
use modhost::fetch_source::FetchRequest;
use modhost::staged_module::{StagedModule, is_archive, stage_module};
use modhost::{Host, Transport};
use modhost_sandbox::ConfinementMode;
use modproto::Descriptor;
use serde_json::json;

use super::exit_code::{EXIT_FAILED, EXIT_USAGE};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// An installed module id; a module executable, `.wasm` component,
    /// module folder or `.tar.gz` / `.zip` archive; or an `https://` or
    /// `oci://` URL of one.
    target: String,
    /// The id to check it as, choosing among several executables in a
    /// folder or archive (as `install --id`).
    #[arg(long)]
    id: Option<String>,
    /// The expected sha256 of the file, archive or https download (required
    /// for https://); nothing is checked on mismatch.
    #[arg(long, value_name = "HEX")]
    sha256: Option<String>,
    /// For a URL: a signature or Sigstore bundle (a path or https URL).
    #[arg(long, value_name = "PATH-OR-URL")]
    signature: Option<String>,
    /// For a URL: check it even though `[signatures]` requires a signature
    /// it does not have.
    #[arg(long)]
    allow_unsigned: bool,
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
    /// What the operator named (a path or URL), for the report.
    shown: PathBuf,
    /// The staged copy of a folder, archive or URL, removed when the check
    /// is done.
    _staged: Option<StagedModule>,
}

pub async fn run(host: &Host, args: &Args) -> anyhow::Result<ExitCode> {
    let target = resolve(host, args).await?;
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
    // The roots this module would be granted: a root another module's
    // lockfile entry brings is not its.
    let source_roots = modhost::grants::merge_source_roots(
        &host.config().source_roots_for(&target.label),
        &overrides,
    );
    let binaries = host.config().binaries.clone();
    let scratch_path = scratch.path().join("home");
    let home = host.home().to_path_buf();
    let program_for_output = target.shown.clone();
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

/// An installed module by id, else a URL, a folder or archive (staged),
/// or a file (where it lies).
async fn resolve(host: &Host, args: &Args) -> anyhow::Result<Target> {
    let raw = args.target.as_str();
    let as_path = Path::new(raw);
    if raw.contains("://") {
        // Fetched as install fetches it (digest, signature policy), then
        // staged from the fetched file; the download goes when staged.
        let fetched = host
            .fetch_source(
                &FetchRequest {
                    source: raw.to_owned(),
                    sha256: args.sha256.clone(),
                    signature: args.signature.clone(),
                    allow_unsigned: args.allow_unsigned,
                },
                &crate::download_progress::DownloadProgress::for_stderr(),
            )
            .await?;
        let staged = stage_module(&fetched.file, args.id.as_deref(), None)?;
        drop(fetched);
        return Ok(staged_target(staged, raw.into()));
    }
    if !raw.contains('/') {
        match host.module(raw).await {
            Ok(module) if module.program.is_file() => {
                return Ok(Target {
                    label: module.id.clone(),
                    program: module.program.clone(),
                    transport: module.transport,
                    folder: module.knowledge_dir().map(Path::to_path_buf),
                    shown: module.program.clone(),
                    _staged: None,
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
            Err(e) if std::fs::symlink_metadata(as_path).is_err() => return Err(e.into()),
            Err(_) => {}
        }
    }
    let program = std::fs::canonicalize(as_path).with_context(|| {
        format!("{raw} is neither an installed module nor a readable file or folder")
    })?;
    if program.is_dir() || is_archive(&program) || (program.is_file() && args.sha256.is_some()) {
        let staged = stage_module(&program, args.id.as_deref(), args.sha256.as_deref())?;
        return Ok(staged_target(staged, program));
    }
    anyhow::ensure!(
        program.is_file(),
        "{} is neither a file nor a folder",
        program.display()
    );
    let label = args.id.clone().unwrap_or_else(|| {
        program
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| raw.to_owned())
    });
    Ok(Target {
        label,
        transport: Transport::of_path(&program),
        folder: program.parent().map(Path::to_path_buf),
        shown: program.clone(),
        program,
        _staged: None,
    })
}

/// The target a staged module is; `shown` is what the operator named.
fn staged_target(staged: StagedModule, shown: PathBuf) -> Target {
    Target {
        label: staged.id.clone(),
        program: staged.program.clone(),
        transport: staged.transport,
        folder: Some(staged.folder.clone()),
        shown,
        _staged: Some(staged),
    }
}

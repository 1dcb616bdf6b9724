//! `git`: read-only git over the workspace, through the git binary the
//! operator grants (`[binaries] git = "/usr/bin/git"` in `config.toml`).
//!
//! Four capabilities, one file each: [`status`], [`log`] (bounded), [`diff`]
//! (bounded, the whole patch as an artifact when cut) and [`blame`] (a line
//! range). Each names `git` in `effects.spawns`, so the host grants the
//! binary to these calls only, and the workspace read-only: a git this
//! module starts runs inside the module's confinement, where it can execute
//! nothing but itself and write nothing in the workspace.
//!
//! [`run`] is the one way git is started (no shell, a clean environment, the
//! repository's own configuration unable to run programs, bounded output);
//! [`input`] keeps every revision and path from being read as an option.
//! The example for authors of a module that spawns a granted binary. Native
//! only: a component cannot start processes.

mod blame;
mod diff;
mod input;
mod log;
mod run;
mod status;

use modsdk::{Access, Capability, Cost, Ctx, Effects, ModError, Module, RootKind, Semantics};

use crate::run::Git;

/// The root git reads.
const WORKSPACE: &str = "workspace";
/// Where `git.diff` writes a whole patch.
const ARTIFACTS: &str = "artifacts";
/// The binary's name in the descriptor and in `[binaries]`.
const GIT: &str = "git";

fn module() -> Module {
    Module::new("git", env!("CARGO_PKG_VERSION"))
        .contract_version("2.0.0")
        .title("Git (read-only)")
        .description(
            "Read the workspace's git repository: status, log, diff and blame. Never changes the repository; runs the operator's git binary with the repository's hooks, pagers, filters and external diff tools turned off.",
        )
        .root(WORKSPACE, RootKind::Workspace, Access::Read, "the git repository (its top folder)")
        .root(ARTIFACTS, RootKind::Artifacts, Access::ReadWrite, "whole diffs too large to return inline")
        .binary(GIT, "git, to read the repository (configured by the operator under [binaries])")
        .capability(
            Capability::new("git.status", |ctx, input| {
                let output = status::run(&open(ctx)?, &input)?;
                ctx.set_text(status::render(&output));
                Ok(output)
            })
            .title("Git status")
            .description(status::DESCRIPTION)
            .effects(runs_git(&[])),
        )
        .capability(
            Capability::new("git.log", |ctx, input| {
                let output = log::run(&open(ctx)?, &input)?;
                ctx.set_text(log::render(&output));
                Ok(output)
            })
            .title("Git log")
            .description(log::DESCRIPTION)
            .effects(runs_git(&[])),
        )
        .capability(
            Capability::new("git.diff", |ctx, input| {
                let git = open(ctx)?;
                let output = diff::run(ctx, &git, &input)?;
                ctx.set_text(diff::render(&output));
                Ok(output)
            })
            .title("Git diff")
            .description(diff::DESCRIPTION)
            .effects(runs_git(&[ARTIFACTS])),
        )
        .capability(
            Capability::new("git.blame", |ctx, input| {
                let output = blame::run(&open(ctx)?, &input)?;
                ctx.set_text(blame::render(&output));
                Ok(output)
            })
            .title("Git blame")
            .description(blame::DESCRIPTION)
            .effects(runs_git(&[])),
        )
        .operation("status", "git.status", reads_with_git(&[]))
        .operation("log", "git.log", reads_with_git(&[]))
        .operation("diff", "git.diff", reads_with_git(&[ARTIFACTS]))
        .operation("blame", "git.blame", reads_with_git(&[]))
}

/// The granted git over the granted workspace.
fn open(ctx: &mut Ctx) -> Result<Git, ModError> {
    let binary = ctx
        .binary(GIT)
        .map_err(|missing| missing.with_remedy(grant_remedy(SYSTEM_GITS)))?
        .to_owned();
    let workspace = ctx.root(WORKSPACE)?.path().to_owned();
    Git::open(&binary, &workspace)
}

/// Where a system's package manager puts git.
const SYSTEM_GITS: &[&str] = &["/usr/bin/git", "/bin/git"];

/// What the operator does when git is not granted, in one line: the line
/// to add, naming the git this system has. The host never grants a program
/// the operator did not name (`[binaries]`), so the module says how, and
/// does not look for one itself.
fn grant_remedy(candidates: &[&str]) -> String {
    let git = candidates
        .iter()
        .find(|path| std::path::Path::new(path).is_file())
        .copied()
        .unwrap_or("/absolute/path/of/git");
    format!(
        "grant git to this module: add `git = \"{git}\"` under [binaries] in the modhost home's config.toml (the host's message names the file), then call again"
    )
}

/// Reads the workspace and runs git; writes `writes` (artifacts) too.
fn runs_git(writes: &[&str]) -> Effects {
    Effects {
        reads: vec![WORKSPACE.to_owned()],
        writes: writes.iter().map(|w| (*w).to_owned()).collect(),
        spawns: vec![GIT.to_owned()],
        cost: Cost::Local,
        ..Effects::default()
    }
}

fn reads_with_git(mutates: &[&str]) -> Semantics {
    Semantics {
        reads: vec![WORKSPACE.to_owned()],
        mutates: mutates.iter().map(|m| (*m).to_owned()).collect(),
        runs: vec![GIT.to_owned()],
        ..Semantics::default()
    }
}

fn main() {
    module().serve()
}

#[cfg(test)]
mod tests;

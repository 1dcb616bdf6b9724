//! `modhost lock [--output FILE] [--allow-local]`: write the lockfile of
//! this home (every installed module's source, digest, tree, signer,
//! enabled state, and the source roots and rules it brings), to stdout or
//! to FILE (replaced whole, never half-written).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use modhost::Host;
use modhost::sync::LockOptions;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Write the lockfile here (default: print it). Local paths are written
    /// relative to its folder.
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Write the local path of a module installed from one, instead of
    /// refusing it (only hosts that see the same path can sync it).
    #[arg(long)]
    allow_local: bool,
}

pub async fn run(host: &Host, args: &Args) -> anyhow::Result<ExitCode> {
    let output = args
        .output
        .clone()
        .unwrap_or_else(modhost::sync::default_lockfile);
    if let Some(path) = &args.output {
        host.check_lock_output(path)?;
    }
    let lockfile = host.lock(&LockOptions {
        output: output.clone(),
        allow_local: args.allow_local,
    })?;
    let text = lockfile.render();
    let Some(path) = &args.output else {
        out!("{text}");
        return Ok(ExitCode::SUCCESS);
    };
    write_whole(path, text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!(
        "wrote {} ({} module(s)); `modhost sync {}` converges a home to it",
        path.display(),
        lockfile.modules.len(),
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Write `bytes` to a temporary file beside `path` (created exclusively,
/// under a random name: a link planted at a guessable name would have the
/// write go wherever it points), then rename it over.
fn write_whole(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    modhost_runner::atomic_file::write_atomically(path, |file| {
        file.write_all(bytes)?;
        // A lockfile is shared, not secret: readable like any config file.
        file.set_permissions(std::fs::Permissions::from_mode(0o644))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// The attack: a link at the name the temporary file once had
    /// (`.<name>.<pid>.tmp`, guessable) pointing at a file someone else
    /// wants overwritten. Writing the lockfile must not follow it.
    #[test]
    fn a_link_planted_beside_the_output_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let output = dir.path().join("modhost.toml");
        let planted = dir
            .path()
            .join(format!(".modhost.toml.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        write_whole(&output, b"version = 1\n").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(!std::fs::symlink_metadata(&output).unwrap().is_symlink());
        assert_eq!(std::fs::read(&output).unwrap(), b"version = 1\n");
        let mode = std::fs::metadata(&output).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
    }
}

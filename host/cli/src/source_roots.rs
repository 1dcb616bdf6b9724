//! `--source-root NAME=PATH`, the same flag on every command that runs
//! module code (`invoke`, `conformance`, `mcp`, `tools`): one struct,
//! flattened into each command's arguments, so the flag means the same
//! everywhere.
//!
//! A source root given here wins over `[source_roots]` in `config.toml`.
//! Its NAME must be a source root the module declares (for `mcp` and
//! `tools`, some installed module): a mistyped name is an error listing the
//! declared ones, never silently ignored.

use std::collections::BTreeMap;
use std::path::PathBuf;

use modhost::Host;
use modhost::config::is_root_name;
use modhost::discovery::InstalledModule;
use modhost::grants::{UndeclaredSourceRoot, check_source_root_names_any};

#[derive(Debug, Clone, Default, clap::Args)]
pub struct SourceRootArgs {
    /// Grant a source root the module declares (wins over config.toml
    /// [source_roots]); repeatable.
    #[arg(long = "source-root", value_name = "NAME=PATH", value_parser = parse_source_root)]
    pub source_roots: Vec<(String, PathBuf)>,
}

impl SourceRootArgs {
    /// The roots by name (a name given twice: the last wins).
    pub fn map(&self) -> BTreeMap<String, PathBuf> {
        self.source_roots.iter().cloned().collect()
    }

    /// Check every name against what the discovered `modules` declare.
    pub fn check_any(&self, modules: &[InstalledModule]) -> Result<(), UndeclaredSourceRoot> {
        check_source_root_names_any(
            modules
                .iter()
                .filter_map(|m| Some((m.id.as_str(), m.descriptor.as_deref()?))),
            self.source_roots.iter().map(|(name, _)| name),
        )
    }
}

/// Parse `NAME=PATH` (the same name rule as `[source_roots]`).
pub fn parse_source_root(raw: &str) -> Result<(String, PathBuf), String> {
    let (name, path) = raw.split_once('=').ok_or("expected NAME=PATH")?;
    if !is_root_name(name) {
        return Err(format!(
            "{name:?} is not a root name (letters, digits, '-' and '_')"
        ));
    }
    if path.is_empty() {
        return Err("the path is empty".into());
    }
    Ok((name.to_owned(), PathBuf::from(path)))
}

/// `host` granting `args`' source roots on every call, after checking each
/// name is declared by some installed module (for the commands that serve
/// every module: `tools`, `mcp`).
pub async fn apply(host: &Host, args: &SourceRootArgs) -> anyhow::Result<Host> {
    if args.source_roots.is_empty() {
        return Ok(host.clone());
    }
    args.check_any(&host.discover().await)?;
    Ok(host.clone().with_source_roots(&args.map()))
}

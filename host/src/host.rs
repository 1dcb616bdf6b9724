//! [`Host`]: one opened host home, and the operations on it.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use modhost::{Host, HostOptions, InvokeRequest};
//!
//! let host = Host::open(HostOptions::default())?;
//! for module in host.discover().await {
//!     println!("{} {:?} {}", module.id, module.version, module.status.as_str());
//! }
//! let outcome = host
//!     .invoke(InvokeRequest::new("files", "files.search", serde_json::json!({"pattern": "TODO"})))
//!     .await?;
//! println!("{}", outcome.result.output);
//! # Ok(()) }
//! ```
//!
//! Design decisions: a `Host` is a cheap, cloneable value (paths and the
//! parsed config); it holds no processes and no open files, so it can be
//! shared across tasks. Clones share one [`Engines`]: the wasm engine is
//! created on the first component call and then reused, so each component
//! is compiled (or loaded from `cache/components/`) once per host. Every
//! call re-reads `modules/` (cheaply, through the describe cache), so what
//! is on disk is always the truth; a long-running caller (the MCP server)
//! may still discover once and call [`Host::invoke_module`] with what it
//! found. The one exception to "holds no processes" is opt-in:
//! [`Host::keep_warm`] keeps a few started module processes per call shape
//! waiting, and [`Host::shutdown`] ends them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::{Config, ConfigError};
use crate::discovery::{self, InstalledModule};
use crate::grants::{self, GrantContext, GrantPlan};
use crate::home::HomeLayout;
use crate::runner::Engines;
use crate::validate::Validators;

/// How to open a host.
#[derive(Debug, Clone, Default)]
pub struct HostOptions {
    /// The home; `None` resolves `$MODHOST_HOME`, then the XDG data dir.
    pub home: Option<PathBuf>,
    /// The workspace granted as the `workspace` root; `None` is the current
    /// directory, unless that is `/` or the user's home (`$HOME`): then no
    /// workspace is granted (`default_workspace`).
    pub workspace: Option<PathBuf>,
}

/// The workspace when none was given: the current directory, unless it is
/// `/` or `home` (the user's home directory).
///
/// Why not always the current directory: MCP clients start their servers
/// wherever they happen to run, often `/` or the home directory, and a
/// workspace there would grant a module the whole filesystem or every file
/// the user owns. Better no workspace, and a call that needs one refused
/// with the remedy ([`HostError::NoWorkspace`]).
pub fn default_workspace(current: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let current = canonical(current);
    let is_home = home.is_some_and(|h| !h.as_os_str().is_empty() && canonical(h) == current);
    (current != Path::new("/") && !is_home).then_some(current)
}

/// What to do when a call needs a workspace and none is granted.
pub const NO_WORKSPACE_REMEDY: &str = "pass --workspace DIR or set MODHOST_WORKSPACE=DIR (for an MCP client: in the server's args or env), or use an MCP client that sends its roots";

/// A failure of the host itself (as opposed to a module's).
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("no host home: pass --home, set $MODHOST_HOME, or set $HOME")]
    NoHome,
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("could not {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the workspace {path} is not usable: {reason}")]
    Workspace { path: PathBuf, reason: String },
    /// The capability reads or writes the workspace, and none is granted.
    #[error(
        "{capability} works on the workspace, and no workspace is granted: modhost was started in / or the home directory, which are never taken as the workspace"
    )]
    NoWorkspace { capability: String },
    #[error("no module {id:?} is installed{}", known_suffix(.known))]
    UnknownModule { id: String, known: Vec<String> },
    #[error(
        "{id:?} is not a valid module id: lowercase letters, digits, '-' and '_', starting with a letter"
    )]
    InvalidId { id: String },
    #[error("a module {id:?} is already installed at {}", .path.display())]
    ModuleExists { id: String, path: PathBuf },
    #[error("sha256 mismatch for {}: expected {expected}, got {actual}; nothing was installed", .path.display())]
    Sha256Mismatch {
        path: PathBuf,
        expected: String,
        actual: String,
    },
    #[error("{} is not a working module: {reason}; nothing was installed", .path.display())]
    NotAModule { path: PathBuf, reason: String },
    #[error("{0}")]
    Refused(String),
    /// `pins.json` is unreadable or corrupt (never silently reset).
    #[error(transparent)]
    Pins(#[from] crate::pins::PinsError),
    /// The home's lock could not be taken.
    #[error(transparent)]
    Lock(#[from] crate::home_lock::HomeLockError),
    /// `install` found what the host would refuse (every finding, each with
    /// its remedy); nothing was installed.
    #[error(
        "{} would not work as a module: {}; nothing was installed (fix the module, or install it anyway, unpinned, with --force){}",
        .path.display(),
        error_count(.findings),
        crate::manage::render_findings(.findings)
    )]
    InstallRefused {
        path: PathBuf,
        findings: Vec<modconform::Finding>,
    },
}

fn error_count(findings: &[modconform::Finding]) -> String {
    match findings.iter().filter(|f| f.is_error()).count() {
        1 => "1 error".to_owned(),
        n => format!("{n} errors"),
    }
}

fn known_suffix(known: &[String]) -> String {
    if known.is_empty() {
        " (no modules are installed)".to_owned()
    } else {
        format!(" (installed: {})", known.join(", "))
    }
}

/// The canonical `dir`, which must be a directory.
pub(crate) fn check_workspace(dir: &Path) -> Result<PathBuf, HostError> {
    let workspace = std::fs::canonicalize(dir).map_err(|e| HostError::Workspace {
        path: dir.to_path_buf(),
        reason: e.to_string(),
    })?;
    if !workspace.is_dir() {
        return Err(HostError::Workspace {
            path: workspace,
            reason: "not a directory".into(),
        });
    }
    Ok(workspace)
}

impl HostError {
    pub(crate) fn io(action: &'static str, path: &Path, source: std::io::Error) -> Self {
        HostError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// An opened host home.
#[derive(Debug, Clone)]
pub struct Host {
    layout: HomeLayout,
    /// `None`: no workspace is granted (see `default_workspace`).
    workspace: Option<PathBuf>,
    config: Config,
    engines: Engines,
    /// Compiled input and output schemas, shared by clones.
    validators: Arc<Validators>,
    /// `pins.json` as each call re-reads it, shared by clones.
    pins: Arc<crate::pins::PinsWatch>,
}

impl Host {
    /// Resolve and open the home (created if missing), read `config.toml`,
    /// and resolve the workspace.
    pub fn open(options: HostOptions) -> Result<Host, HostError> {
        let home = HomeLayout::resolve(options.home.as_deref())?;
        std::fs::create_dir_all(&home).map_err(|e| HostError::io("create the home", &home, e))?;
        let home = std::fs::canonicalize(&home)
            .map_err(|e| HostError::io("resolve the home", &home, e))?;
        let layout = HomeLayout::new(home);
        let config = Config::load(&layout.config_path())?;
        if config.pins != crate::pins::PinsMode::Off {
            // A corrupt pins.json stops the host here, naming the file, rather
            // than letting every module quietly count as unpinned.
            crate::pins::Pins::load(layout.root())?;
        }
        let workspace = match options.workspace {
            Some(dir) => Some(dir),
            None => {
                let current = std::env::current_dir()
                    .map_err(|e| HostError::io("read the current directory", Path::new("."), e))?;
                let home = std::env::var_os("HOME").map(PathBuf::from);
                default_workspace(&current, home.as_deref())
            }
        };
        let workspace = workspace.map(|dir| check_workspace(&dir)).transpose()?;
        let engines = Engines::new(
            layout.component_cache_dir(),
            config.limits.memory_limit_bytes,
        );
        Ok(Host {
            layout,
            workspace,
            config,
            engines,
            validators: Arc::default(),
            pins: Arc::default(),
        })
    }

    pub fn layout(&self) -> &HomeLayout {
        &self.layout
    }

    pub fn home(&self) -> &Path {
        self.layout.root()
    }

    /// The workspace granted as the `workspace` root; `None` when none is.
    pub fn workspace(&self) -> Option<&Path> {
        self.workspace.as_deref()
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// This host with `config.toml` read again, as a long-running server
    /// sees an operator's edit (`tools::live`). Engines, compiled schemas
    /// and the pins watch are shared; what the engines were built with
    /// (`limits.memory_limit_bytes`, `warm_processes`) keeps its start-up
    /// value.
    pub fn with_current_config(&self) -> Result<Host, HostError> {
        let config = Config::load(&self.layout.config_path())?;
        if config.pins != crate::pins::PinsMode::Off {
            crate::pins::Pins::load(self.layout.root())?;
        }
        Ok(Host {
            config,
            ..self.clone()
        })
    }

    /// The engines every call of this host runs on (the wasm engine is
    /// created on first use).
    pub fn engines(&self) -> &Engines {
        &self.engines
    }

    /// The compiled schemas every call of this host checks against.
    pub fn validators(&self) -> &Validators {
        &self.validators
    }

    /// The operator's pins as they are now (one `stat` when unchanged).
    pub(crate) fn current_pins(&self) -> Result<Arc<crate::pins::Pins>, crate::pins::PinsError> {
        self.pins.current(self.layout.root())
    }

    /// This host, starting the next native process of each call shape ahead
    /// of its call, unless `config.toml` says `warm_processes = false`. For
    /// a host that serves many calls; it must [`Host::shutdown`] before it
    /// ends. Clones made before this keep starting processes on call.
    pub fn keep_warm(mut self) -> Host {
        if self.config.warm_processes {
            self.engines = self.engines.keep_warm();
        }
        self
    }

    /// This host with `source_roots` (a command's `--source-root`s) over
    /// the configured `[source_roots]`: every call it makes, through any
    /// caller (the toolbox, the MCP server), grants them.
    pub fn with_source_roots(mut self, source_roots: &BTreeMap<String, PathBuf>) -> Host {
        self.config.source_roots =
            grants::merge_source_roots(&self.config.source_roots, source_roots);
        self
    }

    /// Stop what this host keeps running between calls (processes started
    /// ahead); a no-op for a host that keeps nothing.
    pub async fn shutdown(&self) {
        self.engines.shutdown().await;
    }

    /// Every installed module, described (from cache where unchanged), sorted
    /// by folder or file name. Broken modules are included, with the reason.
    pub async fn discover(&self) -> Vec<InstalledModule> {
        self.discover_reviewing(None).await
    }

    /// [`Host::discover`], describing the changed files of `review` (the
    /// module the operator asked about) rather than withholding them.
    async fn discover_reviewing(&self, review: Option<&str>) -> Vec<InstalledModule> {
        let policy = discovery::PinPolicy {
            mode: self.config.pins,
            review,
        };
        let mut modules =
            discovery::discover(&self.layout, &self.config.limits, &self.engines, policy).await;
        // Pins: each module's standing, and a pinned module whose files are
        // gone listed as broken, never silently dropped.
        discovery::apply_pins(&self.layout, &mut modules, self.config.pins);
        modules
    }

    /// The installed module `id` (any status, broken included).
    ///
    /// Discovers everything (cheap when cached): a duplicate id elsewhere
    /// makes this module broken, and only a full look can tell.
    pub async fn module(&self, id: &str) -> Result<InstalledModule, HostError> {
        self.find_module(id, None).await
    }

    /// The installed module `id` as the operator reviews it: under `pins =
    /// "enforce"`, files changed since its pin are described (run, confined,
    /// once) so that `modhost describe` can show them and `modhost pin` can
    /// approve them. Discovery on behalf of anyone else never runs them.
    pub async fn module_for_review(&self, id: &str) -> Result<InstalledModule, HostError> {
        self.find_module(id, Some(id)).await
    }

    async fn find_module(
        &self,
        id: &str,
        review: Option<&str>,
    ) -> Result<InstalledModule, HostError> {
        let all = self.discover_reviewing(review).await;
        let known = all.iter().map(|m| m.id.clone()).collect();
        // Two entries can share an id only when both are broken duplicates;
        // either describes the problem.
        all.into_iter()
            .find(|m| m.id == id)
            .ok_or_else(|| HostError::UnknownModule {
                id: id.to_owned(),
                known,
            })
    }

    /// The grants one call of `capability` of `module` would get (or gets):
    /// exactly what the capability's effects name (`grants::authority`),
    /// source roots from the config, overridden by `source_roots`. With
    /// `create`, writable private directories are created; without, the
    /// disk is not touched.
    ///
    /// A module that did not describe itself gets nothing.
    pub fn grants(
        &self,
        module: &InstalledModule,
        capability: &modproto::Capability,
        source_roots: &BTreeMap<String, PathBuf>,
        create: bool,
    ) -> Result<GrantPlan, HostError> {
        self.grants_in(
            module,
            capability,
            source_roots,
            self.workspace.as_deref(),
            create,
        )
    }

    /// [`Host::grants`] with `workspace` (canonical) instead of the host's.
    pub(crate) fn grants_in(
        &self,
        module: &InstalledModule,
        capability: &modproto::Capability,
        source_roots: &BTreeMap<String, PathBuf>,
        workspace: Option<&Path>,
        create: bool,
    ) -> Result<GrantPlan, HostError> {
        let Some(descriptor) = &module.descriptor else {
            return Ok(GrantPlan::default());
        };
        let sources = grants::merge_source_roots(&self.config.source_roots, source_roots);
        let context = GrantContext {
            layout: &self.layout,
            // No workspace: an empty path, which never resolves, so a
            // declared workspace root is reported missing (reworded below).
            workspace: workspace.unwrap_or(Path::new("")),
            source_roots: &sources,
            binaries: &self.config.binaries,
        };
        let mut plan = grants::plan(
            descriptor,
            &capability.effects,
            &module.id,
            module.transport,
            context,
            create,
        )
        .map_err(|e| {
            HostError::io(
                "prepare the roots of",
                &self.layout.root().join(&module.id),
                e,
            )
        })?;
        if workspace.is_none() {
            for missing in &mut plan.missing {
                if missing.kind == modproto::RootKind::Workspace.as_str() {
                    missing.reason =
                        "no workspace is granted (modhost was started in / or the home directory)"
                            .into();
                    missing.remedy = NO_WORKSPACE_REMEDY.into();
                }
            }
        }
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_workspace_is_never_the_root_or_the_home() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let project = home.join("project");
        std::fs::create_dir_all(&project).unwrap();
        assert_eq!(default_workspace(Path::new("/"), Some(&home)), None);
        assert_eq!(default_workspace(&home, Some(&home)), None);
        // The same home reached through `..` is still the home.
        assert_eq!(default_workspace(&project.join(".."), Some(&home)), None);
        assert_eq!(
            default_workspace(&project, Some(&home)),
            Some(std::fs::canonicalize(&project).unwrap())
        );
        assert_eq!(
            default_workspace(&home, None),
            Some(std::fs::canonicalize(&home).unwrap())
        );
    }
}

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

use crate::config::Config;
use crate::discovery::{self, InstalledModule};
pub use crate::error::HostError;
use crate::grants::{self, GrantContext, GrantPlan};
use crate::home::HomeLayout;
use crate::network_grant::NetworkView;
use crate::validate::Validators;
use modhost_runner::Engines;

/// How to open a host.
#[derive(Debug, Clone, Default)]
pub struct HostOptions {
    /// The home; `None` resolves `$MODHOST_HOME`, then the XDG data dir.
    pub home: Option<PathBuf>,
    /// The workspace granted as the `workspace` root; `None` is the current
    /// directory, unless that is `/` or the user's home (or holds it): then
    /// no workspace is granted (`default_workspace`).
    pub workspace: Option<PathBuf>,
}

/// The workspace when none was given: the current directory, unless it is
/// never a workspace ([`never_a_workspace`]: `/`, a user's home or a folder
/// holding one).
///
/// Why not always the current directory: MCP clients start their servers
/// wherever they happen to run, often `/` or the home directory, and a
/// workspace there would grant a module the whole filesystem or every file
/// the user owns. Better no workspace, and a call that needs one refused
/// with the remedy ([`HostError::NoWorkspace`]).
pub fn default_workspace(current: &Path, user_homes: &[PathBuf]) -> Option<PathBuf> {
    let current = std::fs::canonicalize(current).unwrap_or_else(|_| current.to_path_buf());
    never_a_workspace(&current, user_homes, &[])
        .is_none()
        .then_some(current)
}

/// Folders that are never a workspace whatever is mounted there (a
/// container's `/dev` is a `tmpfs`).
const SYSTEM_FOLDERS: [&str; 4] = ["/proc", "/sys", "/dev", "/run"];

/// Why the canonical directory `path` may never be a workspace, if so: it is
/// `/`, a user's home (`user_homes`, canonical) or a folder holding one (a
/// module writing there could write every file the user owns), it is or
/// holds one of the kernel's filesystems (`/proc`, `/sys`, `/dev`: a module
/// writing there as root could write a disk or a kernel setting), or it
/// overlaps a `protected` directory (the modhost home, whose approval rules
/// and modules a module could rewrite). Checked when a client names a root
/// and again at each call, by the path as it resolves then: a root swapped
/// for a link to the home after it was accepted is refused.
pub fn never_a_workspace(
    path: &Path,
    user_homes: &[PathBuf],
    protected: &[PathBuf],
) -> Option<String> {
    if path == Path::new("/") {
        return Some("it is the root of the filesystem".into());
    }
    if SYSTEM_FOLDERS.iter().any(|folder| path.starts_with(folder)) {
        return Some("it is a system folder (processes, kernel settings, devices or runtime sockets), not a project".into());
    }
    // By name, and through the mount table: a bind mount of the home shows
    // it under another name.
    let mounts = modhost_sandbox::mount_table::current();
    if user_homes
        .iter()
        .any(|home| home.starts_with(path) || mounts.holds(path, home))
    {
        return Some("it is or holds the user's home directory".into());
    }
    if let Some(fstype) = mounts.kernel_filesystem(path) {
        return Some(format!(
            "it is or holds the kernel's `{fstype}` filesystem (processes, settings or devices, not a project)"
        ));
    }
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    // The rule every grant follows (`grants::overlaps_the_home`), so that
    // a client is told at once what its calls would be refused.
    protected
        .iter()
        .map(|p| canonical(p))
        .find(|p| crate::grants::overlaps_the_home(path, p))
        .map(|p| format!("it overlaps the modhost home {}", p.display()))
}

/// What to do when a call needs a workspace and none is granted.
pub const NO_WORKSPACE_REMEDY: &str = "pass --workspace DIR or set MODHOST_WORKSPACE=DIR (for an MCP client: in the server's args or env), or use an MCP client that sends its roots";

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
    /// The last discovery `Host::module` may reuse, shared by clones.
    discovered: Arc<crate::discovery_memo::DiscoveryMemo>,
    /// The egress proxy of calls with network, started by the first one
    /// (`crate::call_network`), shared by clones.
    pub(crate) egress: Arc<std::sync::OnceLock<modhost_egress::Proxy>>,
    /// The home's audit log (`crate::audit`), shared by clones.
    pub(crate) audit: Arc<crate::audit::AuditLog>,
    /// The counts behind `[quotas]` (`crate::quota`), shared by clones.
    pub(crate) quotas: Arc<crate::quota::counters::Quotas>,
}

impl Host {
    /// A host whose home and workspace are both `home` (the crate's tests).
    #[cfg(test)]
    pub(crate) fn open_at(home: &Path) -> Host {
        Host::open(HostOptions {
            home: Some(home.to_path_buf()),
            workspace: Some(home.to_path_buf()),
        })
        .unwrap()
    }

    /// Resolve and open the home (created if missing), read `config.toml`,
    /// and resolve the workspace.
    pub fn open(options: HostOptions) -> Result<Host, HostError> {
        // A `From<NoHome>` impl would put the layout's private type in the
        // public API; the variant says the same.
        let home = HomeLayout::resolve(options.home.as_deref())
            .map_err(|crate::home::NoHome| HostError::NoHome)?;
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
                default_workspace(&current, crate::user_home::user_homes())
            }
        };
        let workspace = workspace.map(|dir| check_workspace(&dir)).transpose()?;
        let engines = Engines::new(
            layout.component_cache_dir(),
            config.limits.memory_limit_bytes,
        );
        crate::telemetry::start(&config.telemetry);
        Ok(Host {
            audit: Arc::new(crate::audit::AuditLog::new(&layout)),
            quotas: Arc::default(),
            layout,
            workspace,
            config,
            engines,
            validators: Arc::default(),
            pins: Arc::default(),
            discovered: Arc::default(),
            egress: Arc::default(),
        })
    }

    /// Where everything of this host's home lives.
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

    /// The configuration this host runs with (`config.toml`).
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// This host with `config.toml` read again, as a long-running server
    /// sees an operator's edit (`tools::live`). Engines, compiled schemas
    /// and the pins watch are shared; what the engines were built with
    /// (`limits.memory_limit_bytes`, `warm_processes`) keeps its start-up
    /// value.
    pub(crate) fn with_current_config(&self) -> Result<Host, HostError> {
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
    pub(crate) fn validators(&self) -> &Validators {
        &self.validators
    }

    /// For a host that keeps processes warm (a long-running host): compile
    /// `schemas` on a background thread, so the first call of each
    /// capability does not pay for its compile. Nothing runs a module.
    pub(crate) fn prepare_schemas_ahead(&self, schemas: Vec<serde_json::Value>) {
        if !self.engines.keeps_warm() || schemas.is_empty() {
            return;
        }
        let validators = Arc::clone(&self.validators);
        let preparing = std::thread::Builder::new()
            .name("modhost-schemas-ahead".into())
            .spawn(move || {
                for schema in &schemas {
                    validators.prepare(schema);
                }
            });
        if let Err(e) = preparing {
            tracing::debug!("not compiling schemas ahead: {e}");
        }
    }

    /// How `descriptor`, served by bytes with digest `digest`, stands
    /// against the operator's pins now (one `stat` of `pins.json`; compared
    /// again only for new pins or a new descriptor, see `pins::PinsWatch`).
    pub(crate) fn pin_standing_now(
        &self,
        descriptor: &Arc<modproto::Descriptor>,
        digest: &str,
        glance: &modhost_runner::file_identity::Glance,
    ) -> Result<crate::pins::PinStanding, crate::pins::PinsError> {
        self.pins
            .standing(self.layout.root(), descriptor, digest, glance)
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
        // A root the command line names is the operator's, for every module.
        for name in source_roots.keys() {
            self.config.managed_roots.remove(name);
        }
        self
    }

    /// Stop what this host keeps running between calls (processes started
    /// ahead) and wait until every record of its calls is in the audit log.
    /// A server ends its process soon after: the host's last clone may
    /// still be held by a thread that has not finished, so dropping it is
    /// not a promise that the writer thread has written everything.
    pub async fn shutdown(&self) {
        self.engines.shutdown().await;
        self.flush_audit_log();
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
        // The compiled code of a component no longer found (removed, or
        // replaced by new bytes and pinned again) is forgotten: a program
        // that keeps one host for a long time would otherwise keep every
        // version's machine code, and a descriptor for each.
        self.engines.keep_loaded_only_for(
            modules
                .iter()
                .filter(|m| m.transport == modhost_runner::Transport::Component)
                .map(|m| m.program.as_path()),
        );
        modules
    }

    /// The installed module `id` (any status, broken included).
    ///
    /// Discovers everything (cheap when cached): a duplicate id elsewhere
    /// makes this module broken, and only a full look can tell. Under
    /// `pins = "enforce"` the last such look is reused while no path an
    /// operator change touches has changed (`discovery_memo`: one `stat` per
    /// module folder and three more); what the call then runs is checked
    /// again by the call itself.
    pub async fn module(&self, id: &str) -> Result<InstalledModule, HostError> {
        // Only where the call's own check refuses a tree changed in place
        // (`pins = "enforce"`): elsewhere a new discovery describes it anew.
        let reusable = self.config.pins == crate::pins::PinsMode::Enforce;
        // (The memo is shared with clones, and `with_current_config` gives a
        // clone another config: a host that must not reuse never does.)
        let all = match self.discovered.reuse().filter(|_| reusable) {
            Some(all) => all,
            None => {
                let started = std::time::SystemTime::now();
                let all: Arc<[InstalledModule]> = self.discover_reviewing(None).await.into();
                if reusable {
                    self.discovered
                        .remember(&self.layout, started, Arc::clone(&all));
                }
                all
            }
        };
        find_in(&all, id)
    }

    /// Whether the next [`Host::module`] would reuse the last discovery.
    #[cfg(test)]
    pub(crate) fn reuses_its_last_discovery(&self) -> bool {
        self.discovered.reuse().is_some()
    }

    /// The installed module `id` as the operator reviews it: under `pins =
    /// "enforce"`, files changed since its pin are described (run, confined,
    /// once) so that `modhost describe` can show them and `modhost pin` can
    /// approve them. Discovery on behalf of anyone else never runs them.
    pub async fn module_for_review(&self, id: &str) -> Result<InstalledModule, HostError> {
        find_in(&self.discover_reviewing(Some(id)).await, id)
    }

    /// The grants one call of `capability` of `module` would get (or gets):
    /// exactly what the capability's effects name (`grants::authority`),
    /// source roots from the config, overridden by `source_roots`. With
    /// `create`, writable private directories are created; without, the
    /// disk is not touched.
    ///
    /// A module that did not describe itself gets nothing. (`modhost
    /// describe` previews them; calls plan theirs in `invoke`.)
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
        let sources =
            grants::merge_source_roots(&self.config.source_roots_for(&module.id), source_roots);
        let context = GrantContext {
            layout: &self.layout,
            home: self.layout.root(),
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

    /// Whether what a call of `capability` of `module` returns is untrusted
    /// content (a `modhost mcp` connection that receives it is locked
    /// down): `config.toml`'s `untrusted_output` line for it when there is
    /// one, else the module's declaration.
    pub fn output_is_untrusted(
        &self,
        module: &InstalledModule,
        capability: &modproto::Capability,
    ) -> bool {
        let over =
            crate::overrides::find_override(&self.config.capabilities, &module.id, &capability.id);
        crate::overrides::output_is_untrusted(capability, over)
    }

    /// The network a call of `capability` of `module` would get now: its
    /// declaration as `config.toml` narrows it (`crate::network_grant`),
    /// and what is left of it on a connection in lockdown
    /// (`crate::lockdown`); `None` for none.
    pub fn network_grant(
        &self,
        module: &InstalledModule,
        capability: &modproto::Capability,
    ) -> Option<NetworkView> {
        let over =
            crate::overrides::find_override(&self.config.capabilities, &module.id, &capability.id);
        let grant =
            crate::network_grant::call_grant(capability, crate::overrides::network_lines(over))?;
        let locked = crate::lockdown::narrow(&grant, &self.config.lockdown.patterns());
        Some(NetworkView::new(&grant, &locked))
    }
}

/// The module `id` among `all`.
fn find_in(all: &[InstalledModule], id: &str) -> Result<InstalledModule, HostError> {
    // Two entries can share an id only when both are broken duplicates;
    // either describes the problem.
    all.iter()
        .find(|m| m.id == id)
        .cloned()
        .ok_or_else(|| HostError::UnknownModule {
            id: id.to_owned(),
            known: all.iter().map(|m| m.id.clone()).collect(),
        })
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
        let homes = [std::fs::canonicalize(&home).unwrap()];
        assert_eq!(default_workspace(Path::new("/"), &homes), None);
        assert_eq!(default_workspace(&home, &homes), None);
        // The same home reached through `..` is still the home.
        assert_eq!(default_workspace(&project.join(".."), &homes), None);
        // A folder holding it holds every file the user owns.
        assert_eq!(default_workspace(dir.path(), &homes), None);
        assert_eq!(
            default_workspace(&project, &homes),
            Some(std::fs::canonicalize(&project).unwrap())
        );
        assert_eq!(
            default_workspace(&home, &[]),
            Some(std::fs::canonicalize(&home).unwrap())
        );
    }

    /// The attack through a bind mount: the user's home shown under another
    /// name (a view of it, or of the folder holding it) is still the home;
    /// a view of a project inside it is not. Needs root, as CI runs.
    #[test]
    fn the_users_home_under_another_name_is_never_a_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (home, project) = (root.join("home/alice"), root.join("home/alice/project"));
        let (view, view_of_parent, view_of_project) = (
            root.join("view"),
            root.join("view_of_parent"),
            root.join("view_of_project"),
        );
        for folder in [&project, &view, &view_of_parent, &view_of_project] {
            std::fs::create_dir_all(folder).unwrap();
        }
        let _views = [
            modhost_test_support::mounts::bind(&home, &view),
            modhost_test_support::mounts::bind(&root.join("home"), &view_of_parent),
            modhost_test_support::mounts::bind(&project, &view_of_project),
        ];
        let homes = [home.clone()];
        for refused in [&view, &view_of_parent] {
            let why = never_a_workspace(refused, &homes, &[]);
            assert!(
                why.as_deref().is_some_and(|w| w.contains("home")),
                "{}: {why:?}",
                refused.display()
            );
        }
        assert_eq!(never_a_workspace(&view_of_project, &homes, &[]), None);
        for system in ["/proc", "/sys/kernel", "/dev", "/dev/shm", "/run"] {
            assert!(
                never_a_workspace(Path::new(system), &homes, &[]).is_some(),
                "{system}"
            );
        }
        // A kernel filesystem mounted anywhere else, and a folder holding it.
        let proc_view = root.join("elsewhere/proc");
        std::fs::create_dir_all(&proc_view).unwrap();
        let _proc = modhost_test_support::mounts::proc(&proc_view);
        for refused in [&proc_view, &root.join("elsewhere")] {
            let why = never_a_workspace(refused, &homes, &[]);
            assert!(
                why.as_deref().is_some_and(|w| w.contains("proc")),
                "{}: {why:?}",
                refused.display()
            );
        }
    }

    /// A program that keeps one host for a long time: a component removed
    /// (or replaced and pinned again) is forgotten by the host's next look at
    /// its home, machine code and descriptor, while what is still found is
    /// kept as loaded.
    #[cfg(feature = "wasm")]
    #[tokio::test]
    async fn a_component_no_longer_found_is_forgotten_by_the_next_look() {
        use modhost_test_support::guests::guest;
        let dir = tempfile::tempdir().unwrap();
        for name in ["echo", "remember"] {
            let program = dir.path().join(format!("modules/{name}/{name}.wasm"));
            std::fs::create_dir_all(program.parent().unwrap()).unwrap();
            std::fs::copy(guest(name), &program).unwrap();
        }
        let host = Host::open_at(dir.path());
        host.pin("echo").await.unwrap();
        host.pin("remember").await.unwrap();
        // Snapshots just made vouch for their digests once settled.
        std::thread::sleep(
            modhost_runner::file_identity::RACY + std::time::Duration::from_millis(50),
        );
        let engine = host.engines().wasm().unwrap();
        let echo = host.module("echo").await.unwrap();
        let remember = host.module("remember").await.unwrap();
        let kept = engine.load_async(&echo.program).await.unwrap();
        engine.load_async(&remember.program).await.unwrap();
        let forgotten = engine.digest_of(&remember.program).expect("loaded");

        host.discover().await;
        assert!(engine.keeps(&forgotten).0, "both are still found");

        std::fs::remove_dir_all(dir.path().join("modules/remember")).unwrap();
        host.discover().await;
        assert!(!engine.keeps(&forgotten).0, "remember was removed");
        assert!(
            std::sync::Arc::ptr_eq(&engine.load(&echo.program).unwrap(), &kept),
            "echo is kept as loaded"
        );
    }
}

#[cfg(test)]
mod snapshot_tests {
    use crate::Host;
    use modhost_test_support::modules::{descriptor, install, script, write_executable};
    use sha2::Digest;
    use std::time::Instant;

    #[tokio::test]
    async fn a_long_running_host_reads_knowledge_from_the_approved_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), "confinement = \"off\"\n").unwrap();
        let folder = dir.path().join("modules/guide");
        let text = "Use guide.run first.\n";
        std::fs::create_dir_all(folder.join("knowledge")).unwrap();
        std::fs::write(folder.join("knowledge/intro.md"), text).unwrap();
        let sha: String = sha2::Sha256::digest(text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let mut described = descriptor("guide");
        described["knowledge"] = serde_json::json!({
            "overlays": [{"id": "intro", "path": "knowledge/intro.md", "sha256": sha}]
        });
        let answer = serde_json::json!({"result": {"output": {"ok": true}}});
        write_executable(
            &folder.join("guide"),
            &script(&described, &answer, &dir.path().join("guide.describes")),
        );
        let host = Host::open_at(dir.path());
        host.pin("guide").await.unwrap();
        // Discovered once, as the MCP server does; then the folder's copy of
        // the document is removed.
        let module = host.module("guide").await.unwrap();
        std::fs::remove_file(folder.join("knowledge/intro.md")).unwrap();
        let knowledge_dir = module.knowledge_dir().unwrap();
        assert!(
            knowledge_dir.starts_with(host.layout().snapshots_dir()),
            "{}",
            knowledge_dir.display()
        );
        let loaded = crate::knowledge::load(
            module.descriptor.as_ref().unwrap(),
            Some(knowledge_dir),
            crate::knowledge::Selection::All,
        );
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        assert_eq!(loaded.overlays[0].content, text);
    }

    /// The per-call check of a pinned module reads no file while nothing
    /// changed (one `stat` per file of its tree), and a tree restored byte
    /// for byte is digested once, then vouched for by its new identities.
    /// Run with `--nocapture` to see what each check costs, against the one
    /// `stat` the entry-file check cost before snapshots; the assertions
    /// count digests, not time.
    #[tokio::test]
    async fn the_per_call_check_costs_a_stat_per_file() {
        use crate::module_tree::DIGESTS_ON_THIS_THREAD;
        let digests = || DIGESTS_ON_THIS_THREAD.with(std::cell::Cell::get);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), "confinement = \"off\"\n").unwrap();
        let (entry, _) = install(dir.path(), "one", false);
        install(dir.path(), "many", false);
        for i in 0..20 {
            write_executable(
                &dir.path().join(format!("modules/many/lib/helper{i}.sh")),
                "echo helper\n",
            );
        }
        let host = Host::open_at(dir.path());
        host.pin("one").await.unwrap();
        host.pin("many").await.unwrap();
        let one = host.module("one").await.unwrap();
        let many = host.module("many").await.unwrap();
        assert!(one.program_identity.is_some(), "runs from its snapshot");
        const ROUNDS: u32 = 2_000;
        let holds = |module: &crate::discovery::InstalledModule| {
            module
                .drift(&modhost_runner::file_identity::Glance::default())
                .unwrap()
                .is_none()
        };
        let time = |check: &dyn Fn() -> bool| {
            let started = Instant::now();
            for _ in 0..ROUNDS {
                assert!(check());
            }
            started.elapsed() / ROUNDS
        };
        let before = digests();
        let baseline =
            time(&|| modhost_runner::file_identity::FileIdentity::of_path(&entry).is_ok());
        let single = time(&|| holds(&one));
        let tree = time(&|| holds(&many));
        assert_eq!(digests(), before, "an unchanged tree is never read");

        // A helper rewritten with the same bytes (as a restore does): one
        // digest, then stats again.
        let helper = dir.path().join("modules/many/lib/helper0.sh");
        write_executable(&helper, "echo helper\n");
        std::thread::sleep(
            modhost_runner::file_identity::RACY + std::time::Duration::from_millis(50),
        );
        let started = Instant::now();
        assert!(holds(&many));
        let rehash = started.elapsed();
        assert_eq!(digests(), before + 1, "a restored tree is digested once");
        let restored = time(&|| holds(&many));
        assert_eq!(
            digests(),
            before + 1,
            "a restored tree is vouched for by its new state from then on"
        );
        println!(
            "per-call check: baseline (one stat of the entry) {baseline:?}; snapshot check, 1-file module {single:?}; 22-entry module {tree:?}; after a restore: first call {rehash:?}, then {restored:?}"
        );
    }
}

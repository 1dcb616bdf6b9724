//! `config.toml`: what the operator decides.
//!
//! ```toml
//! pins = "enforce"                 # "enforce" | "warn" | "off"
//! confinement = "best-effort"      # "required" | "best-effort" | "off" (see crate::confine)
//! warm_processes = true            # `modhost mcp` readies each tool's next process or instance ahead
//!
//! [source_roots]                   # name = absolute path, granted read-only
//! transcripts = "/home/me/.sessions"
//!
//! [binaries]                       # name = absolute path of a program a module may run
//! git = "/usr/bin/git"
//!
//! [limits]
//! deadline_ms = 30000
//! max_output_bytes = 1048576
//! describe_timeout_ms = 10000
//! describe_concurrency = 4
//! memory_limit_bytes = 268435456   # per component call (wasm linear memory)
//! native_memory_bytes = 2147483648 # per native call, its processes together (memory cgroup)
//! storage_bytes = 1073741824       # per module: its state/ and artifacts/ folders together
//! storage_files = 100000           # per module: files and folders in them together
//!
//! [limits.modules."<module id>"]   # one module's own bounds (any of the three above)
//! native_memory_bytes = 8589934592
//! storage_files = 1000000
//!
//! [approval]                       # see crate::approval
//! [capabilities."files.files.search"]  # see crate::overrides
//!
//! [lockdown]                       # see crate::lockdown
//! enabled = true                   # a connection that received untrusted content is locked down
//! allowed_hosts = []               # what its calls may still reach: host entries as in effects.network
//!
//! [network]                        # see crate::network_config
//! public_ranges = []               # CIDR ranges of a lab, reachable as if public
//!
//! [audit]                          # see crate::audit (on by default)
//! [telemetry]                      # see crate::telemetry (off by default)
//! [quotas]                         # see crate::quota
//! [http]                           # see crate::http_config (`modhost mcp --http`)
//! [signatures]                     # see crate::signature_policy (remote modules' signers)
//! ```
//!
//! Design decisions: a missing file is an empty configuration (a fresh home
//! works), but anything present is read strictly. An unknown key is an error
//! naming the key and the file, because a typo such as `[source_root]` would
//! otherwise silently grant nothing and the operator would never learn why.
//!
//! Resource bounds are per module where modules differ: one module may
//! need 8 GiB to index a repository while the rest stay at 2, so
//! `[limits.modules."<module id>"]` (the id as `modhost list` shows it)
//! overrides `native_memory_bytes`, `storage_bytes` and `storage_files`
//! for that module alone; what it leaves out comes from `[limits]`. Per
//! module, not per capability: the storage bound is on the module's own
//! folders, shared by all its capabilities, and a memory limit is what an
//! operator raises for a module they know. A line naming a module that is
//! not installed is kept (it may be installed later); `modhost doctor`
//! shows every module's bounds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::approval::ApprovalConfig;
use crate::lockdown::LockdownConfig;
use crate::network_config::NetworkConfig;
use crate::overrides::CapabilityOverride;
pub use crate::pins::PinsMode;
use crate::storage_bound::StorageBound;
use modhost_runner::CallLimits;
use modhost_sandbox::ConfinementMode;

/// The parsed `config.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// How integrity pins are applied (see [`crate::pins`]).
    #[serde(default)]
    pub pins: PinsMode,
    /// How native calls are confined (landlock, resource limits).
    #[serde(default)]
    pub confinement: ConfinementMode,
    /// Whether a long-running host (`modhost mcp`) starts the next native
    /// process of each tool ahead of its call (see
    /// [`modhost_runner::native::warm`]). Off for modules that act before
    /// reading their request, which the protocol asks them not to.
    #[serde(default = "default_warm_processes")]
    pub warm_processes: bool,
    /// Operator-supplied source roots by name.
    #[serde(default)]
    pub source_roots: BTreeMap<String, PathBuf>,
    /// Programs modules may ask for, by name.
    #[serde(default)]
    pub binaries: BTreeMap<String, PathBuf>,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub approval: ApprovalConfig,
    /// Per-capability overrides, keyed by tool name or `module.capability`.
    #[serde(default)]
    pub capabilities: BTreeMap<String, CapabilityOverride>,
    /// What a connection that received untrusted content may still do
    /// (see [`crate::lockdown`]).
    #[serde(default)]
    pub lockdown: LockdownConfig,
    /// What the egress proxy counts as public (see
    /// [`crate::network_config`]).
    #[serde(default)]
    pub network: NetworkConfig,
    /// The record of every call (see [`crate::audit`]).
    #[serde(default)]
    pub audit: crate::audit::AuditConfig,
    /// Traces and metrics over OTLP (see [`crate::telemetry`]).
    #[serde(default)]
    pub telemetry: crate::telemetry::TelemetryConfig,
    /// Calls per minute and at once, per tool and per caller (see
    /// [`crate::quota`]).
    #[serde(default)]
    pub quotas: crate::quota::QuotaConfig,
    /// `modhost mcp --http`: its URL, bounds and callers' tokens (see
    /// [`crate::http_config`]).
    #[serde(default)]
    pub http: crate::http_config::HttpConfig,
    /// Remote sources: extra CAs, download bounds (see
    /// [`crate::distribution_config`]).
    #[serde(default)]
    pub distribution: crate::distribution_config::DistributionConfig,
    /// Which signatures a remote module must carry (see
    /// [`crate::signature_policy`]).
    #[serde(default)]
    pub signatures: crate::signature_policy::SignaturePolicyConfig,
    /// The source roots `config.sync.toml` brings that `config.toml` does
    /// not name, by name: the modules whose lockfile entries bring each.
    /// Such a root is granted to those modules only
    /// ([`Config::source_roots_for`]); `config.toml`'s are every module's.
    #[serde(skip)]
    pub(crate) managed_roots: BTreeMap<String, std::collections::BTreeSet<String>>,
}

fn default_warm_processes() -> bool {
    true
}

impl Default for Config {
    fn default() -> Self {
        Config {
            pins: PinsMode::default(),
            confinement: ConfinementMode::default(),
            warm_processes: default_warm_processes(),
            source_roots: BTreeMap::new(),
            binaries: BTreeMap::new(),
            limits: Limits::default(),
            approval: ApprovalConfig::default(),
            capabilities: BTreeMap::new(),
            lockdown: LockdownConfig::default(),
            network: NetworkConfig::default(),
            audit: Default::default(),
            telemetry: Default::default(),
            quotas: Default::default(),
            http: Default::default(),
            distribution: Default::default(),
            signatures: Default::default(),
            managed_roots: BTreeMap::new(),
        }
    }
}

/// `[limits]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Wall-clock budget of one invoke.
    pub deadline_ms: u64,
    /// The most stdout bytes read from one call.
    pub max_output_bytes: u64,
    /// Budget of one `describe` during discovery.
    pub describe_timeout_ms: u64,
    /// How many modules are described at once.
    pub describe_concurrency: usize,
    /// The cap on one component call's linear memory.
    pub memory_limit_bytes: u64,
    /// The memory one native call's processes may use together
    /// ([`modhost_sandbox::DEFAULT_NATIVE_MEMORY_BYTES`] by default).
    pub native_memory_bytes: u64,
    /// The bytes a module's `state` and `artifacts` folders may hold
    /// together ([`crate::storage_bound`]).
    pub storage_bytes: u64,
    /// The files and folders they may hold together.
    pub storage_files: u64,
    /// One module's own bounds, by module id (`[limits.modules."<id>"]`).
    pub modules: BTreeMap<String, ModuleLimits>,
    /// Copied from the top-level `confinement` key so every call built from
    /// these limits (invoke and describe alike) carries it.
    #[serde(skip)]
    pub confinement: ConfinementMode,
}

impl Default for Limits {
    fn default() -> Self {
        let call = CallLimits::default();
        Limits {
            deadline_ms: call.deadline.as_millis() as u64,
            max_output_bytes: call.max_output_bytes,
            describe_timeout_ms: 10_000,
            describe_concurrency: 4,
            memory_limit_bytes: modhost_runner::DEFAULT_MEMORY_LIMIT_BYTES,
            native_memory_bytes: call.native_memory_bytes,
            storage_bytes: crate::storage_bound::DEFAULT_STORAGE_BYTES,
            storage_files: crate::storage_bound::DEFAULT_STORAGE_FILES,
            modules: BTreeMap::new(),
            confinement: call.confinement,
        }
    }
}

/// `[limits.modules."<module id>"]`: one module's own bounds; a key left
/// out is `[limits]`'s.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModuleLimits {
    pub native_memory_bytes: Option<u64>,
    pub storage_bytes: Option<u64>,
    pub storage_files: Option<u64>,
}

/// The smallest memory limit taken: below it not even a shell starts, so
/// a smaller value is a typo (a missing digit), refused with the file.
pub const MIN_NATIVE_MEMORY_BYTES: u64 = 16 << 20;

impl Limits {
    /// The bounds of one invoke (of any module: [`Self::native_memory_for`]
    /// is the module's own memory limit).
    pub fn invoke(&self) -> CallLimits {
        CallLimits {
            deadline: Duration::from_millis(self.deadline_ms),
            max_output_bytes: self.max_output_bytes,
            confinement: self.confinement,
            native_memory_bytes: self.native_memory_bytes,
        }
    }

    /// The bounds of one describe.
    pub fn describe(&self) -> CallLimits {
        CallLimits {
            deadline: Duration::from_millis(self.describe_timeout_ms),
            max_output_bytes: self.max_output_bytes,
            confinement: self.confinement,
            native_memory_bytes: self.native_memory_bytes,
        }
    }

    /// The memory limit of a native call of `module`.
    pub fn native_memory_for(&self, module: &str) -> u64 {
        self.modules
            .get(module)
            .and_then(|m| m.native_memory_bytes)
            .unwrap_or(self.native_memory_bytes)
    }

    /// The bound on `module`'s `state` and `artifacts` folders.
    pub fn storage_for(&self, module: &str) -> StorageBound {
        let own = self.modules.get(module).copied().unwrap_or_default();
        StorageBound {
            bytes: own.storage_bytes.unwrap_or(self.storage_bytes),
            files: own.storage_files.unwrap_or(self.storage_files),
        }
    }

    /// What is wrong with the bounds, each naming its line.
    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let memory = std::iter::once(("[limits]".to_owned(), Some(self.native_memory_bytes)))
            .chain(
                self.modules
                    .iter()
                    .map(|(id, m)| (format!("[limits.modules.{id:?}]"), m.native_memory_bytes)),
            );
        for (table, bytes) in memory {
            if let Some(bytes) = bytes.filter(|b| *b < MIN_NATIVE_MEMORY_BYTES) {
                problems.push(format!(
                    "{table} native_memory_bytes = {bytes}: a limit below {MIN_NATIVE_MEMORY_BYTES} bytes (16 MiB) starts no program; the value is in bytes"
                ));
            }
        }
        problems
    }
}

/// Why `config.toml` could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("could not read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Malformed TOML or an unknown key; the message carries line and column.
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

impl Config {
    /// Read `path`; a file that does not exist is the default configuration.
    /// What `modhost sync` manages beside it (`config.sync.toml`, see
    /// [`crate::managed_config`]) joins it.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let mut config = match std::fs::read_to_string(path) {
            Ok(text) => Config::parse(&text, path)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Config::default(),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        config.join_managed(&path.with_file_name(crate::home::MANAGED_CONFIG_FILE))?;
        Ok(config)
    }

    /// Join the managed file at `path` (when there is one): its source
    /// roots to `[source_roots]`, its rules to `[[approval.rules]]`, each
    /// for its module. A root name given two paths is an error naming both.
    fn join_managed(&mut self, path: &Path) -> Result<(), ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let Some(managed) =
            crate::managed_config::ManagedConfig::read(path).map_err(|message| {
                ConfigError::Parse {
                    path: path.to_path_buf(),
                    message,
                }
            })?
        else {
            return Ok(());
        };
        let mut named_by: BTreeMap<String, String> = BTreeMap::new();
        for (module, entry) in &managed.modules {
            // Its rules and roots are one module's: a key that is no module
            // id (the host's own names included) would make them another's.
            if !crate::module_id::is_module_id(module) || crate::install::is_reserved_id(module) {
                return Err(invalid(format!(
                    "[modules.{module:?}] is not a module id; the file is written by `modhost sync`: sync again"
                )));
            }
            for (name, root) in &entry.source_roots {
                if !is_root_name(name) || !root.is_absolute() {
                    return Err(invalid(format!(
                        "module {module}: source root {name} = {:?}: a name is letters, digits, '-' and '_', and the path must be absolute",
                        root.display().to_string()
                    )));
                }
                match self.source_roots.get(name) {
                    Some(known) if known != root => {
                        let from = named_by
                            .get(name)
                            .cloned()
                            .unwrap_or_else(|| "config.toml".into());
                        return Err(invalid(format!(
                            "module {module} names source root {name} = {:?}, and {from} names it {:?}; give the root one path (or another name) in the lockfile and sync again",
                            root.display().to_string(),
                            known.display().to_string()
                        )));
                    }
                    known => {
                        // A root config.toml names stays every module's;
                        // one only the lockfile brings is its entries'.
                        if known.is_none() || named_by.contains_key(name) {
                            self.managed_roots
                                .entry(name.clone())
                                .or_default()
                                .insert(module.clone());
                        }
                        named_by.insert(name.clone(), format!("module {module}"));
                        self.source_roots.insert(name.clone(), root.clone());
                    }
                }
            }
            self.approval
                .rules
                .extend(entry.approval.iter().map(|rule| rule.to_rule(module)));
        }
        let problems = self.approval.problems();
        if !problems.is_empty() {
            return Err(invalid(problems.join("; ")));
        }
        Ok(())
    }

    /// The source roots module `module` may be granted: every root
    /// `config.toml` names, and of those only a lockfile brings
    /// (`config.sync.toml`), the ones `module`'s own entry brings. An entry
    /// grants its module a folder, never another module that declares a
    /// root of the same name.
    pub fn source_roots_for(&self, module: &str) -> BTreeMap<String, PathBuf> {
        self.source_roots
            .iter()
            .filter(|(name, _)| {
                self.managed_roots
                    .get(*name)
                    .is_none_or(|owners| owners.contains(module))
            })
            .map(|(name, path)| (name.clone(), path.clone()))
            .collect()
    }

    /// Parse the text of a config file; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        config.limits.confinement = config.confinement;
        let invalid = |message: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        for (section, map) in [
            ("source_roots", &config.source_roots),
            ("binaries", &config.binaries),
        ] {
            for (name, value) in map {
                if !is_root_name(name) {
                    return Err(invalid(format!(
                        "[{section}] {name:?}: a name is letters, digits, '-' and '_'"
                    )));
                }
                if !value.is_absolute() {
                    return Err(invalid(format!(
                        "[{section}] {name} = {:?}: the path must be absolute",
                        value.display().to_string()
                    )));
                }
            }
        }
        let mut approval = config.approval.problems();
        if let Some(oauth) = &config.http.oauth {
            approval.extend(config.approval.oauth_issuer_problems(&oauth.issuer));
        }
        if !approval.is_empty() {
            return Err(invalid(approval.join("; ")));
        }
        let lockdown = config.lockdown.problems();
        if !lockdown.is_empty() {
            return Err(invalid(lockdown.join("; ")));
        }
        let network = config.network.problems();
        if !network.is_empty() {
            return Err(invalid(network.join("; ")));
        }
        let observing = [
            config.audit.problems(),
            config.telemetry.problems(),
            config.quotas.problems(),
            config.http.problems(),
            config.distribution.problems(),
            config.signatures.problems(),
        ]
        .concat();
        if !observing.is_empty() {
            return Err(invalid(observing.join("; ")));
        }
        let limits = config.limits.problems();
        if !limits.is_empty() {
            return Err(invalid(limits.join("; ")));
        }
        if config.limits.describe_concurrency == 0 {
            return Err(invalid(
                "[limits] describe_concurrency must be at least 1".into(),
            ));
        }
        Ok(config)
    }
}

/// Whether `name` can name a root or binary: the same shape rule applies to
/// the config file and to `--source-root NAME=PATH`.
pub fn is_root_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("/h/config.toml"))
    }

    #[test]
    fn empty_config_is_default() {
        let config = parse("").unwrap();
        assert_eq!(config.pins, PinsMode::Enforce);
        assert_eq!(config.limits, Limits::default());
        assert!(config.source_roots.is_empty());
        assert!(
            config.warm_processes,
            "on unless the operator says otherwise"
        );
        assert!(Config::default().warm_processes);
    }

    #[test]
    fn full_config_parses() {
        let config = parse(
            r#"
pins = "warn"
warm_processes = false
[source_roots]
transcripts = "/var/sessions"
[binaries]
git = "/usr/bin/git"
[limits]
deadline_ms = 5000
describe_concurrency = 2
[approval]
[capabilities."files.search"]
"#,
        )
        .unwrap();
        assert_eq!(config.pins, PinsMode::Warn);
        assert!(!config.warm_processes);
        assert_eq!(
            config.source_roots["transcripts"],
            Path::new("/var/sessions")
        );
        assert_eq!(config.binaries["git"], Path::new("/usr/bin/git"));
        assert_eq!(config.limits.deadline_ms, 5000);
        assert_eq!(config.limits.describe_concurrency, 2);
        assert_eq!(config.limits.max_output_bytes, 1024 * 1024);
        assert!(config.capabilities.contains_key("files.search"));
    }

    #[test]
    fn unknown_top_level_key_names_key_and_file() {
        let err = parse("[source_root]\nx = \"/a\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("/h/config.toml"), "{err}");
        assert!(err.contains("source_root"), "{err}");
    }

    #[test]
    fn unknown_limit_key_is_refused() {
        let err = parse("[limits]\ndeadline = 5\n").unwrap_err().to_string();
        assert!(err.contains("deadline"), "{err}");
    }

    #[test]
    fn malformed_config_names_file_and_line() {
        let err = parse("pins = \"warn\"\n[limits\n").unwrap_err().to_string();
        assert!(err.contains("/h/config.toml"), "{err}");
        assert!(err.contains("line 2"), "{err}");
    }

    #[test]
    fn bad_pins_value_is_refused() {
        assert!(parse("pins = \"sometimes\"").is_err());
    }

    #[test]
    fn relative_source_root_is_refused() {
        let err = parse("[source_roots]\ndata = \"rel/path\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("absolute"), "{err}");
    }

    /// A typo in `allowed_hosts` must not silently leave the operator's
    /// documentation host unreachable, nor be guessed at: the file is
    /// refused, naming the entry and the fix.
    #[test]
    fn lockdown_is_on_with_no_host_and_a_malformed_entry_is_refused_naming_it() {
        let config = parse("").unwrap();
        assert!(config.lockdown.enabled);
        assert!(config.lockdown.allowed_hosts.is_empty());
        let config = parse(
            "[lockdown]\nenabled = false\nallowed_hosts = [\"docs.rs:443\", \"*.example.org\"]\n",
        )
        .unwrap();
        assert!(!config.lockdown.enabled);
        assert_eq!(config.lockdown.patterns().len(), 2);
        let err = parse("[lockdown]\nallowed_hosts = [\"docs.rs\", \"https://example.org/x\"]\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("/h/config.toml"), "{err}");
        assert!(
            err.contains("[lockdown] allowed_hosts entry \"https://example.org/x\""),
            "{err}"
        );
        assert!(err.contains("did you mean \"example.org:443\""), "{err}");
        assert!(
            !err.contains("\"docs.rs\""),
            "a good entry is not named: {err}"
        );
        let err = parse("[lockdown]\nallowed_host = []\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("allowed_host"), "{err}");
    }

    #[test]
    fn resource_bounds_default_and_a_modules_own_line_wins() {
        let config = parse("").unwrap();
        assert_eq!(config.limits.native_memory_for("any"), 2 << 30);
        assert_eq!(
            config.limits.storage_for("any"),
            StorageBound {
                bytes: 1 << 30,
                files: 100_000
            }
        );
        let config = parse(
            "[limits]\nnative_memory_bytes = 536870912\nstorage_files = 500\n\
             [limits.modules.big]\nnative_memory_bytes = 8589934592\n\
             [limits.modules.\"notes\"]\nstorage_bytes = 1048576\n",
        )
        .unwrap();
        assert_eq!(config.limits.native_memory_for("big"), 8 << 30);
        assert_eq!(config.limits.native_memory_for("notes"), 512 << 20);
        assert_eq!(config.limits.invoke().native_memory_bytes, 512 << 20);
        assert_eq!(
            config.limits.storage_for("notes"),
            StorageBound {
                bytes: 1 << 20,
                files: 500
            }
        );
        assert_eq!(config.limits.storage_for("big").files, 500);
    }

    #[test]
    fn a_memory_limit_too_small_to_start_anything_or_a_mistyped_key_is_refused() {
        let err = parse("[limits.modules.m]\nnative_memory_bytes = 2048\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("[limits.modules.\"m\"] native_memory_bytes = 2048"),
            "{err}"
        );
        let err = parse("[limits.modules.m]\nnative_memory = 1\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("native_memory"), "{err}");
    }

    #[test]
    fn missing_file_is_default() {
        let config = Config::load(Path::new("/nonexistent/modhost/config.toml")).unwrap();
        assert!(config.source_roots.is_empty());
    }
}

//! Secrets: credentials a capability's calls get as environment variables,
//! each only where the module declared it and the operator granted it.
//!
//! ```toml
//! # <home>/secrets.toml: mode 0600 (or stricter), owned by the user modhost runs as
//! GITHUB_TOKEN = "ghp_..."                 # the value itself
//! OPENAI_API_KEY = { env = "OPENAI_KEY" }  # read from the host's environment at each call
//!
//! # <home>/config.toml: who gets which
//! [capabilities."gh.gh.issues"]
//! secrets = ["GITHUB_TOKEN"]
//! ```
//!
//! Design decisions:
//!
//! - **Values and grants live apart.** `secrets.toml` holds values and
//!   nothing else, readable by its owner only; `config.toml` says which
//!   capability gets which name, next to the rest of what the operator
//!   grants it (network, overrides). The policy can be shown, reviewed and
//!   shared without a single value in it.
//! - **A call gets a secret only when its capability declares it
//!   (`effects.secrets`) and the operator granted it to that capability.**
//!   Not the module's other capabilities, not `describe`, not another
//!   module. A grant of a name the capability does not declare stops the
//!   host at startup (`crate::overrides::secret_grant_problems`), as a widening network line
//!   does: it would grant nothing, and is almost always a typo.
//! - **Declared but not granted refuses the call** (`secret_unavailable`),
//!   with the lines to add. Running without it would fail later with the
//!   module's own, vaguer error (an HTTP 401 from a remote service), or
//!   worse, succeed unauthenticated with different results (public data
//!   only, tighter rate limits) that nobody notices. The same for a grant
//!   with no value: a missing entry, an unset variable, a file refused.
//! - **Read at each call that needs one, never before.** Discovery,
//!   `describe` and every call of a capability without secrets never open
//!   the file; a call that needs one reads it again, so a rotated value (or
//!   a revoked grant) takes effect on the next call of a running
//!   `modhost mcp`.
//! - **The file must be the operator's alone:** a regular file (no link),
//!   owned by the user the host runs as, no group or other permission bit;
//!   anything else is refused with the `chmod`/`chown` that fixes it. A
//!   module cannot read it in any case: no grant ever points into the home.
//! - **A value is at least [`MIN_SECRET_BYTES`] long.** Every value is
//!   masked in what a call returns (`crate::redact`); masking a short value
//!   would cut ordinary words out of every output, and a value that short
//!   is no credential worth the name. At most [`MAX_SECRET_BYTES`], without
//!   NUL (it must fit an environment variable).
//! - **An environment pointer never names a variable every module gets**
//!   (`PATH`, `LANG`, `TZ`, `LC_*`, `MODHOST_*`: `modhost_sandbox::environment`):
//!   a secret kept there would reach every native module of the host.
//! - **No value is ever printed**: not by an error (a TOML error names the
//!   line and column, never quotes it), not by `Debug`, not by describe.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use modhost_runner::CallSecret;
use modproto::Capability;

use crate::discovery::InstalledModule;
use crate::host::Host;

pub use crate::home::SECRETS_FILE;

/// The shortest value accepted, in bytes.
pub const MIN_SECRET_BYTES: usize = 8;

/// The longest value accepted, in bytes (a PEM private key fits).
pub const MAX_SECRET_BYTES: usize = 64 * 1024;

/// The largest secrets file read.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Where a secret's value comes from.
#[derive(Clone, PartialEq, Eq)]
enum Entry {
    /// The value, written in the file.
    Value(String),
    /// The host's environment variable holding it.
    Env(String),
}

/// The operator's secrets file, read and checked. Its `Debug` shows names
/// and sources only.
#[derive(Clone)]
pub struct SecretsFile {
    path: PathBuf,
    entries: BTreeMap<String, Entry>,
}

impl std::fmt::Debug for SecretsFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sources: BTreeMap<&str, String> = self
            .entries
            .keys()
            .map(|name| (name.as_str(), self.source(name).unwrap_or_default()))
            .collect();
        f.debug_struct("SecretsFile")
            .field("path", &self.path)
            .field("sources", &sources)
            .finish()
    }
}

/// Why the secrets file cannot be used. Never carries a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretsFileError {
    /// Someone other than its owner could read or change it.
    #[error("{path} is refused as the secrets file: {why}")]
    Unsafe {
        path: PathBuf,
        why: String,
        /// The command that fixes it.
        fix: String,
    },
    #[error("{path} cannot be read: {why}")]
    Unreadable { path: PathBuf, why: String },
    #[error("{path}: {problem}")]
    Malformed { path: PathBuf, problem: String },
}

impl SecretsFileError {
    /// What the operator can do.
    pub fn remedy(&self) -> String {
        match self {
            SecretsFileError::Unsafe { fix, .. } => fix.clone(),
            SecretsFileError::Unreadable { path, .. } => format!(
                "make {} a regular file readable by the user modhost runs as (mode 0600)",
                path.display()
            ),
            SecretsFileError::Malformed { path, .. } => format!(
                "fix {}: each line is NAME = \"value\" or NAME = {{ env = \"VARIABLE\" }}",
                path.display()
            ),
        }
    }
}

impl SecretsFile {
    /// Read the secrets file at `path`: `None` when there is none. Refused
    /// unless it is a regular file, owned by the user this process runs as,
    /// with no permission for its group or others.
    pub fn load(path: &Path) -> Result<Option<SecretsFile>, SecretsFileError> {
        use rustix::fs::{Mode, OFlags};
        let unreadable = |why: String| SecretsFileError::Unreadable {
            path: path.to_path_buf(),
            why,
        };
        // Through no link: what is checked is what is read.
        let fd = match rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(rustix::io::Errno::LOOP) => {
                return Err(SecretsFileError::Unsafe {
                    path: path.to_path_buf(),
                    why: "it is a symbolic link; the secrets file must be a regular file".into(),
                    fix: format!(
                        "replace the link {} with the file itself (mode 0600)",
                        path.display()
                    ),
                });
            }
            Err(e) => return Err(unreadable(e.to_string())),
        };
        let file = std::fs::File::from(fd);
        let meta = file.metadata().map_err(|e| unreadable(e.to_string()))?;
        check_ownership(path, &meta)?;
        if meta.len() > MAX_FILE_BYTES {
            return Err(SecretsFileError::Malformed {
                path: path.to_path_buf(),
                problem: format!("it is larger than {MAX_FILE_BYTES} bytes"),
            });
        }
        let mut text = String::new();
        file.take(MAX_FILE_BYTES)
            .read_to_string(&mut text)
            .map_err(|e| unreadable(e.to_string()))?;
        SecretsFile::parse(path, &text).map(Some)
    }

    /// Parse `text`, the contents of the file at `path`.
    fn parse(path: &Path, text: &str) -> Result<SecretsFile, SecretsFileError> {
        let malformed = |problem: String| SecretsFileError::Malformed {
            path: path.to_path_buf(),
            problem,
        };
        // A TOML error's own text quotes the line it is on, which may hold
        // a value: only its message and position are shown.
        let table: toml::Table = toml::from_str(text).map_err(|e| {
            let at = e
                .span()
                .map(|span| {
                    let before = &text[..span.start.min(text.len())];
                    let line = before.matches('\n').count() + 1;
                    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                    format!("line {line}, column {column}: ")
                })
                .unwrap_or_default();
            malformed(format!("{at}{}", e.message().trim_end()))
        })?;
        let mut entries = BTreeMap::new();
        for (name, value) in table {
            if let Err(error) = modproto::check_secret_name(&name) {
                return Err(malformed(error.to_string()));
            }
            let entry = match value {
                toml::Value::String(value) => Entry::Value(value),
                toml::Value::Table(pointer) => match env_pointer(&pointer) {
                    Some(variable) => Entry::Env(variable.to_owned()),
                    None => {
                        return Err(malformed(format!(
                            "{name}: a pointer is {{ env = \"VARIABLE\" }}, with no other key"
                        )));
                    }
                },
                other => {
                    return Err(malformed(format!(
                        "{name}: expected a string or {{ env = \"VARIABLE\" }}, found a {}",
                        other.type_str()
                    )));
                }
            };
            if let Entry::Env(variable) = &entry
                && modhost_sandbox::environment::is_allowed_env(variable)
            {
                return Err(malformed(format!(
                    "{name}: ${variable} reaches every native module's environment (PATH, LANG, TZ, LC_* and MODHOST_* do), so a secret kept there is no secret; keep it in a variable of another name"
                )));
            }
            entries.insert(name, entry);
        }
        Ok(SecretsFile {
            path: path.to_path_buf(),
            entries,
        })
    }

    /// Where the value of `name` comes from, for people: `secrets.toml`,
    /// or `$VARIABLE (the host's environment)`; `None` when the file does
    /// not name it.
    pub fn source(&self, name: &str) -> Option<String> {
        match self.entries.get(name)? {
            Entry::Value(_) => Some(SECRETS_FILE.to_owned()),
            Entry::Env(variable) => Some(format!("${variable} (the host's environment)")),
        }
    }

    /// The value of `name`, checked; the problem (never the value) when it
    /// has none that can be given to a call.
    fn value(&self, name: &str) -> Result<String, String> {
        let value = match self.entries.get(name) {
            None => {
                return Err(format!(
                    "{} holds no {name}; add a line {name} = \"...\" (or {name} = {{ env = \"VARIABLE\" }})",
                    self.path.display()
                ));
            }
            Some(Entry::Value(value)) => value.clone(),
            Some(Entry::Env(variable)) => match std::env::var_os(variable) {
                None => {
                    return Err(format!(
                        "{name} points at ${variable}, which is not set in the host's environment; set it where modhost is started, or store the value in {}",
                        self.path.display()
                    ));
                }
                Some(value) => value
                    .into_string()
                    .map_err(|_| format!("${variable}, where {name} points, is not UTF-8"))?,
            },
        };
        check_value(name, &value)?;
        Ok(value)
    }
}

/// The variable of a `{ env = "VARIABLE" }` pointer, when `pointer` is one.
fn env_pointer(pointer: &toml::Table) -> Option<&str> {
    match (pointer.len(), pointer.get("env")) {
        (1, Some(toml::Value::String(variable))) if !variable.is_empty() => Some(variable),
        _ => None,
    }
}

/// Refuse a file another user could read or change.
fn check_ownership(path: &Path, meta: &std::fs::Metadata) -> Result<(), SecretsFileError> {
    let unsafe_file = |why: String, fix: String| SecretsFileError::Unsafe {
        path: path.to_path_buf(),
        why,
        fix,
    };
    if !meta.file_type().is_file() {
        return Err(unsafe_file(
            "it is not a regular file".into(),
            format!("make {} a regular file (mode 0600)", path.display()),
        ));
    }
    let us = rustix::process::geteuid().as_raw();
    if meta.uid() != us {
        return Err(unsafe_file(
            format!(
                "it is owned by uid {}, not by uid {us}, the user modhost runs as, so another user can change it",
                meta.uid()
            ),
            format!(
                "run `chown {us} {}` (as root), or write the file again as the user modhost runs as",
                path.display()
            ),
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(unsafe_file(
            format!(
                "its mode is {mode:04o}, which lets its group or others read or change it; it must be 0600 or stricter"
            ),
            format!("run `chmod 600 {}`", path.display()),
        ));
    }
    Ok(())
}

/// A value a call can be given: long enough to mask without mangling
/// ordinary output, short enough for an environment variable, no NUL.
fn check_value(name: &str, value: &str) -> Result<(), String> {
    if value.len() < MIN_SECRET_BYTES {
        return Err(format!(
            "the value of {name} is {} bytes, shorter than {MIN_SECRET_BYTES}: the host masks every value in what a call returns, and masking one this short would cut ordinary text out of every output; use the real credential",
            value.len()
        ));
    }
    if value.len() > MAX_SECRET_BYTES {
        return Err(format!(
            "the value of {name} is {} bytes, longer than {MAX_SECRET_BYTES}",
            value.len()
        ));
    }
    if value.contains('\0') {
        return Err(format!(
            "the value of {name} holds a NUL byte, which no environment variable can"
        ));
    }
    Ok(())
}

/// Why a call cannot get the secrets its capability declares: the host
/// refuses it (`secret_unavailable`) before anything runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretRefusal {
    /// The operator has not granted them to the capability.
    #[error(
        "{capability} needs secret{} {}, which the operator has not granted it",
        if names.len() == 1 { "" } else { "s" },
        names.join(", ")
    )]
    NotGranted {
        capability: String,
        names: Vec<String>,
        /// The `[capabilities."..."]` key to add them under.
        key: String,
        config: PathBuf,
        secrets_file: PathBuf,
    },
    /// Granted, but no value can be given.
    #[error("{capability} needs secret {name}, granted but without a usable value: {why}")]
    NoValue {
        capability: String,
        name: String,
        why: String,
    },
    /// The secrets file itself is refused.
    #[error("{capability} needs secrets, and {source}")]
    File {
        capability: String,
        #[source]
        source: SecretsFileError,
    },
}

impl SecretRefusal {
    /// What the operator can do.
    pub fn remedy(&self) -> String {
        match self {
            SecretRefusal::NotGranted {
                names,
                key,
                config,
                secrets_file,
                ..
            } => format!(
                "grant {} in {}: secrets = [{}] under [capabilities.{key:?}], with each value in {} (mode 0600); or leave the capability unused",
                if names.len() == 1 { "it" } else { "them" },
                config.display(),
                names
                    .iter()
                    .map(|n| format!("{n:?}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                secrets_file.display()
            ),
            SecretRefusal::NoValue { why, .. } => why.clone(),
            SecretRefusal::File { source, .. } => source.remedy(),
        }
    }
}

/// One secret a capability declares, as `modhost describe` shows it: never
/// its value.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SecretView {
    pub name: String,
    /// Whether `config.toml` grants it to the capability.
    pub granted: bool,
    /// Where its value comes from (`secrets.toml`, `$VAR (the host's
    /// environment)`), when the secrets file names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Why a call would be refused for it, if it would.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

impl Host {
    /// `secrets.toml` as it is now (`None` when there is none).
    pub fn secrets_file(&self) -> Result<Option<SecretsFile>, SecretsFileError> {
        SecretsFile::load(&self.layout().secrets_path())
    }

    /// The secrets one call of `capability` of `module` gets, with their
    /// values; refused when one it declares is not granted or has no value.
    /// Reads nothing when the capability declares none.
    pub(crate) fn call_secrets(
        &self,
        module: &InstalledModule,
        capability: &Capability,
    ) -> Result<Vec<CallSecret>, SecretRefusal> {
        let declared = &capability.effects.secrets;
        if declared.is_empty() {
            return Ok(Vec::new());
        }
        let cap = format!("{}.{}", module.id, capability.id);
        let entry = crate::overrides::find_override_entry(
            &self.config().capabilities,
            &module.id,
            &capability.id,
        );
        let granted: &[String] = entry.map_or(&[], |(_, over)| &over.secrets);
        let missing: Vec<String> = declared
            .iter()
            .filter(|name| !granted.contains(name))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(SecretRefusal::NotGranted {
                capability: cap.clone(),
                names: missing,
                key: entry.map_or(cap, |(key, _)| key.to_owned()),
                config: self.layout().config_path(),
                secrets_file: self.layout().secrets_path(),
            });
        }
        let file = self.secrets_file().map_err(|source| SecretRefusal::File {
            capability: cap.clone(),
            source,
        })?;
        let mut secrets = Vec::with_capacity(declared.len());
        for name in declared {
            let value = match &file {
                Some(file) => file.value(name),
                None => Err(format!(
                    "there is no {}; create it (mode 0600) with a line {name} = \"...\"",
                    self.layout().secrets_path().display()
                )),
            }
            .map_err(|why| SecretRefusal::NoValue {
                capability: cap.clone(),
                name: name.clone(),
                why,
            })?;
            if !secrets.iter().any(|s: &CallSecret| s.name() == name) {
                secrets.push(CallSecret::new(name.clone(), value));
            }
        }
        Ok(secrets)
    }

    /// The values a call of `module` is masked with beyond its own
    /// secrets: those the operator granted to any capability of the module.
    /// A module can keep a value one capability was given (in its state, an
    /// artifact) and print it from another that was given nothing; masking
    /// by module closes that. Reads the secrets file only when some
    /// capability of the module is granted a secret it declares; a value
    /// that cannot be read was never handed out, so it is skipped.
    pub(crate) fn module_secrets_to_mask(
        &self,
        descriptor: &modproto::Descriptor,
        module: &InstalledModule,
    ) -> Vec<CallSecret> {
        let mut names: Vec<&String> = Vec::new();
        for capability in &descriptor.capabilities {
            let granted = crate::overrides::find_override_entry(
                &self.config().capabilities,
                &module.id,
                &capability.id,
            )
            .map_or(&[][..], |(_, over)| &over.secrets[..]);
            for name in &capability.effects.secrets {
                if granted.contains(name) && !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        if names.is_empty() {
            return Vec::new();
        }
        let Ok(Some(file)) = self.secrets_file() else {
            return Vec::new();
        };
        names
            .into_iter()
            .filter_map(|name| {
                let value = file.value(name).ok()?;
                Some(CallSecret::new(name.clone(), value))
            })
            .collect()
    }

    /// What `modhost describe` shows of `capability`'s secrets: each name
    /// it declares, whether it is granted, where its value comes from, and
    /// what would refuse a call. Values are checked (length, a variable
    /// that is set) but never shown. Reads nothing when it declares none.
    pub fn secret_views(
        &self,
        module: &InstalledModule,
        capability: &Capability,
    ) -> Vec<SecretView> {
        let declared = &capability.effects.secrets;
        if declared.is_empty() {
            return Vec::new();
        }
        let over = crate::overrides::find_override(
            &self.config().capabilities,
            &module.id,
            &capability.id,
        );
        let file = self.secrets_file();
        declared
            .iter()
            .map(|name| {
                let granted = over.is_some_and(|o| o.secrets.contains(name));
                let (source, problem) = match &file {
                    Ok(Some(file)) => (file.source(name), file.value(name).err()),
                    Ok(None) => (
                        None,
                        Some(format!(
                            "there is no {}",
                            self.layout().secrets_path().display()
                        )),
                    ),
                    Err(e) => (None, Some(e.to_string())),
                };
                let problem = if granted {
                    problem
                } else {
                    Some(format!(
                        "not granted: add secrets = [{name:?}] under [capabilities.\"{}.{}\"] in config.toml",
                        module.id, capability.id
                    ))
                };
                SecretView {
                    name: name.clone(),
                    granted,
                    source,
                    problem,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn write(dir: &Path, text: &str, mode: u32) -> PathBuf {
        let path = dir.join(SECRETS_FILE);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn values_and_pointers_are_read_and_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            dir.path(),
            "GITHUB_TOKEN = \"ghp_value_in_file\"\nNPM_TOKEN = { env = \"SECRETS_TEST_UNSET_VAR_7\" }\n",
            0o600,
        );
        let file = SecretsFile::load(&path).unwrap().unwrap();
        assert_eq!(file.value("GITHUB_TOKEN").unwrap(), "ghp_value_in_file");
        assert_eq!(file.source("GITHUB_TOKEN").as_deref(), Some(SECRETS_FILE));
        assert_eq!(
            file.source("NPM_TOKEN").as_deref(),
            Some("$SECRETS_TEST_UNSET_VAR_7 (the host's environment)")
        );
        let unset = file.value("NPM_TOKEN").unwrap_err();
        assert!(unset.contains("not set"), "{unset}");
        assert!(file.value("OTHER").unwrap_err().contains("holds no OTHER"));
        let shown = format!("{file:?}");
        assert!(!shown.contains("ghp_value_in_file"), "{shown}");
        assert!(shown.contains("GITHUB_TOKEN"), "{shown}");
    }

    #[test]
    fn a_missing_file_is_none() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            SecretsFile::load(&dir.path().join(SECRETS_FILE))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_file_others_may_read_is_refused_with_the_chmod() {
        let dir = tempfile::tempdir().unwrap();
        for mode in [0o644, 0o640, 0o604, 0o660] {
            let path = write(dir.path(), "A_TOKEN = \"long-enough-value\"\n", mode);
            let error = SecretsFile::load(&path).unwrap_err();
            let text = error.to_string();
            assert!(text.contains(&format!("{mode:04o}")), "{text}");
            assert!(text.contains(&path.display().to_string()), "{text}");
            assert_eq!(
                error.remedy(),
                format!("run `chmod 600 {}`", path.display())
            );
        }
        for mode in [0o600, 0o400] {
            let path = write(dir.path(), "A_TOKEN = \"long-enough-value\"\n", mode);
            assert!(SecretsFile::load(&path).unwrap().is_some(), "{mode:o}");
        }
    }

    #[test]
    fn a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere.toml");
        std::fs::write(&target, "A_TOKEN = \"long-enough-value\"\n").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.path().join(SECRETS_FILE);
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let error = SecretsFile::load(&link).unwrap_err();
        assert!(error.to_string().contains("symbolic link"), "{error}");
    }

    #[test]
    fn malformed_files_name_the_line_never_the_value() {
        let dir = tempfile::tempdir().unwrap();
        for (text, expected) in [
            ("A_TOKEN = \"unterminated-secret-value\n", "line 1"),
            ("github-token = \"a-secret-value\"\n", "GITHUB_TOKEN"),
            ("A_TOKEN = 12345678901\n", "found a integer"),
            ("A_TOKEN = { env = \"X\", other = 1 }\n", "no other key"),
            (
                "A_TOKEN = { env = \"MODHOST_TOKEN\" }\n",
                "every native module",
            ),
            ("A_TOKEN = { env = \"PATH\" }\n", "every native module"),
        ] {
            let path = write(dir.path(), text, 0o600);
            let error = SecretsFile::load(&path).unwrap_err();
            let shown = format!("{error} {error:?} {}", error.remedy());
            assert!(shown.contains(expected), "{text:?}: {shown}");
            for value in ["unterminated-secret-value", "a-secret-value", "12345678901"] {
                assert!(!shown.contains(value), "{text:?}: {shown}");
            }
        }
    }

    #[test]
    fn short_long_and_nul_values_are_refused() {
        assert!(
            check_value("A", "1234567")
                .unwrap_err()
                .contains("shorter than 8")
        );
        assert!(check_value("A", "12345678").is_ok());
        assert!(
            check_value("A", &"x".repeat(MAX_SECRET_BYTES + 1))
                .unwrap_err()
                .contains("longer")
        );
        assert!(
            check_value("A", "1234\u{0}5678")
                .unwrap_err()
                .contains("NUL")
        );
    }

    #[test]
    fn a_grant_of_an_undeclared_or_malformed_name_is_a_problem() {
        let capability: Capability = serde_json::from_value(serde_json::json!({
            "id": "gh.issues", "input_schema": {"type": "object"},
            "effects": {"secrets": ["GITHUB_TOKEN"]}
        }))
        .unwrap();
        let over = |names: &[&str]| crate::overrides::CapabilityOverride {
            secrets: names.iter().map(|n| (*n).to_owned()).collect(),
            ..crate::overrides::CapabilityOverride::default()
        };
        assert!(
            crate::overrides::secret_grant_problems(
                "gh.gh.issues",
                &capability,
                &over(&["GITHUB_TOKEN"])
            )
            .is_empty()
        );
        let problems = crate::overrides::secret_grant_problems(
            "gh.gh.issues",
            &capability,
            &over(&["NPM_TOKEN", "github-token"]),
        );
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("does not declare it (it declares GITHUB_TOKEN)"));
        assert!(problems[1].contains("did you mean \"GITHUB_TOKEN\""));
    }
}

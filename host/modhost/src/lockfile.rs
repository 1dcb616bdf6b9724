//! `modhost.toml`: the declarative module set a fleet converges to
//! (`modhost sync`, [`crate::sync`]) and `modhost lock` writes from a home.
//!
//! ```toml
//! version = 1
//!
//! [[module]]
//! id = "sessions"
//! source = "https://releases.example.com/sessions-1.4.0.tar.gz"
//! sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
//! tree = "…"                      # optional: the module tree digest the pin must be
//! signer = "release@example.com"  # optional: who the verified signature must name
//! issuer = "https://accounts.example.com"  # optional, keyless: the signer's certificate issuer
//! signature = "https://releases.example.com/sessions-1.4.0.tar.gz.sig"  # optional (https sources)
//! enabled = true                  # default true
//! source_roots = { transcripts = "/srv/sessions" }
//!
//! [[module.approval]]             # rules for this module's capabilities only
//! effect = "writes"
//! decision = "deny"
//!
//! [[module]]
//! id = "files"
//! source = "oci://registry.example.com/modhost/files@sha256:…"
//!
//! [[module]]
//! id = "notes"
//! source = "modules/notes.tar.gz"  # a local path, relative to this file's folder
//! sha256 = "…"
//! ```
//!
//! Design decisions:
//!
//! - **A lockfile pins bytes, never names.** An `https://` source needs its
//!   `sha256`; an `oci://` source needs a digest (`@sha256:…` in the
//!   reference, or `sha256` beside a tag, and then the digest is what is
//!   fetched, the tag only a label). A tag alone is refused: it names
//!   whatever the registry holds today, and two hosts syncing a day apart
//!   would run different bytes. `modhost lock` writes the digest the home
//!   pinned. Plain `http://` and other schemes are refused.
//! - **`tree` pins what runs.** The file digest checks what was fetched;
//!   `tree` (what `modhost lock` writes: the pin's tree digest) checks the
//!   installed module's whole folder after unpacking, so two hosts synced
//!   from one file provably pin the same trees. A local folder has no file
//!   digest; its `tree` is its check.
//! - **Local paths are for development and labs:** relative to the
//!   lockfile's folder, so a checked-out repository syncs wherever it lies.
//! - **Strict:** an unknown key, a malformed digest, a duplicate id, a bad
//!   root name or rule is an error naming the file and the line, because a
//!   typo would otherwise install or grant something other than written.
//! - **A signature travels with its entry.** An `https://` source may name
//!   its signature or Sigstore bundle (`signature`: an `https://` URL, or a
//!   path relative to the lockfile's folder), checked against `[signatures]`
//!   as `install --signature` checks it; the pin records where it came
//!   from and `modhost lock` writes it back. An OCI artifact's signatures
//!   are found in its registry, and a local source is the operator's own
//!   approval, so neither takes one.
//! - **Bounded:** a lockfile larger than [`MAX_BYTES`] is refused before
//!   it is parsed (a fleet file is a few KiB; a huge one is a mistake or an
//!   attempt to exhaust memory).
//! - Source roots and approval rules that belong with a module are part
//!   of its entry; sync writes them to `config.sync.toml`
//!   ([`crate::managed_config`]), never into the operator's `config.toml`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::managed_config::{ManagedConfig, ManagedModule, ModuleRule};

/// The format version this modhost reads and writes.
pub const VERSION: u32 = 1;

/// The file name `modhost sync` and `modhost lock` use by default.
pub const DEFAULT_FILE: &str = "modhost.toml";

/// The largest lockfile read: 4 MiB (thousands of entries).
pub const MAX_BYTES: u64 = 4 * 1024 * 1024;

/// A parsed, checked lockfile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lockfile {
    /// Where it was read from (local sources are relative to its folder).
    pub path: PathBuf,
    pub modules: Vec<LockedModule>,
}

/// One `[[module]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockedModule {
    pub id: String,
    pub source: LockedSource,
    /// The source as written in the file.
    pub source_text: String,
    /// sha256 (hex) of the file; for OCI the manifest digest's hex.
    pub sha256: Option<String>,
    /// The module tree digest its pin must have.
    pub tree: Option<String>,
    /// Who the verified signature must name.
    pub signer: Option<String>,
    /// The OIDC issuer a keyless signer's certificate must name (the same
    /// identity under another issuer is someone else).
    pub issuer: Option<String>,
    /// The signature or Sigstore bundle of an `https://` source, as written:
    /// an `https://` URL or a path relative to the lockfile's folder
    /// ([`Lockfile::signature_location`] resolves it).
    pub signature: Option<String>,
    pub enabled: bool,
    pub source_roots: BTreeMap<String, PathBuf>,
    pub approval: Vec<ModuleRule>,
    /// The entry's line in the file (for messages).
    pub line: usize,
}

impl LockedModule {
    /// Whether `verified` is the signer this entry names: the same identity
    /// or key and, when the entry names an issuer, the same issuer (one
    /// email under two issuers is two signers).
    pub(crate) fn names_the_signer(
        &self,
        verified: Option<&modhost_distribution::signature::Verified>,
    ) -> bool {
        let Some(verified) = verified else {
            return false;
        };
        self.signer.as_deref() == Some(verified.signer.as_str())
            && self
                .issuer
                .as_ref()
                .is_none_or(|issuer| verified.issuer.as_ref() == Some(issuer))
    }
}

/// Where a module's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockedSource {
    /// An `https://` URL.
    Https(String),
    /// An OCI reference, and the manifest digest (`sha256:…`) that is fetched.
    Oci { reference: String, digest: String },
    /// A local file or folder (resolved against the lockfile's folder).
    Local(PathBuf),
}

impl LockedSource {
    /// Whether the bytes can be fetched again elsewhere (not a local path).
    pub fn is_remote(&self) -> bool {
        !matches!(self, LockedSource::Local(_))
    }
}

/// Why a lockfile was refused.
#[derive(Debug, thiserror::Error)]
pub enum LockfileError {
    #[error("cannot read the lockfile {}: {source}; name one with `modhost sync FILE`, or write one with `modhost lock`", .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Malformed TOML or an unknown key; the message carries line and column.
    #[error("{}: {message}", .path.display())]
    Parse { path: PathBuf, message: String },
    #[error("the lockfile {} is larger than {max} bytes: a lockfile lists modules by source and digest (a few KiB); check that this is the file you meant", .path.display())]
    TooLarge { path: PathBuf, max: u64 },
    /// A value that parses but cannot be right.
    #[error("{}:{line}: {message}", .path.display())]
    Invalid {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// The file's shape, as read.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    version: toml::Spanned<u32>,
    #[serde(default, rename = "module")]
    modules: Vec<RawModule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModule {
    id: toml::Spanned<String>,
    source: String,
    #[serde(default)]
    sha256: Option<String>,
    #[serde(default)]
    tree: Option<String>,
    #[serde(default)]
    signer: Option<String>,
    #[serde(default)]
    issuer: Option<String>,
    #[serde(default)]
    signature: Option<String>,
    #[serde(default = "enabled_by_default")]
    enabled: bool,
    #[serde(default)]
    source_roots: BTreeMap<String, PathBuf>,
    #[serde(default)]
    approval: Vec<ModuleRule>,
}

fn enabled_by_default() -> bool {
    true
}

/// The file's shape, as written.
#[derive(Serialize)]
struct WrittenFile<'a> {
    version: u32,
    module: Vec<WrittenModule<'a>>,
}

#[derive(Serialize)]
struct WrittenModule<'a> {
    id: &'a str,
    source: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    sha256: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tree: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    signer: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    issuer: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    signature: Option<&'a str>,
    enabled: bool,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    source_roots: &'a BTreeMap<String, PathBuf>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    approval: &'a [ModuleRule],
}

impl Lockfile {
    /// Read and check `path`.
    pub fn load(path: &Path) -> Result<Lockfile, LockfileError> {
        use std::io::Read;
        let read_error = |source| LockfileError::Read {
            path: path.to_path_buf(),
            source,
        };
        // Read at most one byte past the bound: a larger file (or one that
        // never ends, `/dev/zero`) is refused without reading it whole.
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|file| file.take(MAX_BYTES + 1).read_to_end(&mut bytes))
            .map_err(read_error)?;
        if bytes.len() as u64 > MAX_BYTES {
            return Err(LockfileError::TooLarge {
                path: path.to_path_buf(),
                max: MAX_BYTES,
            });
        }
        let text = String::from_utf8(bytes)
            .map_err(|e| read_error(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
        Lockfile::parse(&text, path)
    }

    /// Where `module`'s signature is read from: its `https://` URL as
    /// written, or its path resolved against this lockfile's folder.
    pub fn signature_location(&self, module: &LockedModule) -> Option<String> {
        let written = module.signature.as_deref()?;
        if written.starts_with("https://") {
            return Some(written.to_owned());
        }
        let folder = self.path.parent().unwrap_or(Path::new("."));
        Some(folder.join(written).display().to_string())
    }

    /// Parse and check the text of a lockfile read from `path`.
    pub fn parse(text: &str, path: &Path) -> Result<Lockfile, LockfileError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| LockfileError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
        let invalid = |line: usize, message: String| LockfileError::Invalid {
            path: path.to_path_buf(),
            line,
            message,
        };
        if *raw.version.get_ref() != VERSION {
            return Err(invalid(
                line_of(raw.version.span().start),
                format!(
                    "version = {}: this modhost reads lockfile version {VERSION}; write it with this modhost's `modhost lock`",
                    raw.version.get_ref()
                ),
            ));
        }
        let folder = path.parent().unwrap_or(Path::new("."));
        let mut modules: Vec<LockedModule> = Vec::new();
        let mut roots: BTreeMap<String, (PathBuf, String)> = BTreeMap::new();
        for raw in raw.modules {
            let RawModule {
                id,
                source,
                sha256,
                tree,
                signer,
                issuer,
                signature,
                enabled,
                source_roots,
                approval,
            } = raw;
            let line = line_of(id.span().start);
            let fields = Fields {
                source,
                sha256,
                tree,
                signer,
                issuer,
                signature,
                enabled,
                source_roots,
                approval,
            };
            let module = check_module(id.into_inner(), fields, folder, line)
                .map_err(|message| invalid(line, message))?;
            if let Some(first) = modules.iter().find(|m| m.id == module.id) {
                return Err(invalid(
                    line,
                    format!(
                        "module {:?} is listed twice (first on line {}); keep one entry",
                        module.id, first.line
                    ),
                ));
            }
            for (name, root) in &module.source_roots {
                if let Some((known, by)) = roots.get(name)
                    && known != root
                {
                    return Err(invalid(
                        line,
                        format!(
                            "module {} names source root {name} = {:?}, and module {by} names it {:?}; a root has one path: use another name",
                            module.id,
                            root.display().to_string(),
                            known.display().to_string()
                        ),
                    ));
                }
                roots.insert(name.clone(), (root.clone(), module.id.clone()));
            }
            modules.push(module);
        }
        Ok(Lockfile {
            path: path.to_path_buf(),
            modules,
        })
    }

    /// The file's text: what [`Lockfile::parse`] reads back as the same set.
    pub fn render(&self) -> String {
        let file = WrittenFile {
            version: VERSION,
            module: self
                .modules
                .iter()
                .map(|m| WrittenModule {
                    id: &m.id,
                    source: &m.source_text,
                    sha256: m.sha256.as_deref(),
                    tree: m.tree.as_deref(),
                    signer: m.signer.as_deref(),
                    issuer: m.issuer.as_deref(),
                    signature: m.signature.as_deref(),
                    enabled: m.enabled,
                    source_roots: &m.source_roots,
                    approval: &m.approval,
                })
                .collect(),
        };
        let body = toml::to_string(&file).unwrap_or_default();
        format!(
            "# The modules of a modhost home: `modhost sync` converges a home to this file.\n# Written by `modhost lock`; digests pin the exact bytes (see `modhost help sync`).\n{body}"
        )
    }

    /// The source roots and approval rules its modules bring, as
    /// `config.sync.toml` holds them.
    pub fn managed_config(&self) -> ManagedConfig {
        ManagedConfig {
            modules: self
                .modules
                .iter()
                .map(|m| {
                    (
                        m.id.clone(),
                        ManagedModule {
                            source_roots: m.source_roots.clone(),
                            approval: m.approval.clone(),
                        },
                    )
                })
                .filter(|(_, managed)| !managed.is_empty())
                .collect(),
        }
    }
}

/// A raw entry without its id.
struct Fields {
    source: String,
    sha256: Option<String>,
    tree: Option<String>,
    signer: Option<String>,
    issuer: Option<String>,
    signature: Option<String>,
    enabled: bool,
    source_roots: BTreeMap<String, PathBuf>,
    approval: Vec<ModuleRule>,
}

/// Check one entry; the message names the module.
fn check_module(
    id: String,
    fields: Fields,
    folder: &Path,
    line: usize,
) -> Result<LockedModule, String> {
    let at = |message: String| format!("module {id:?}: {message}");
    if !crate::module_id::is_module_id(&id) || crate::install::is_reserved_id(&id) {
        return Err(at(
            "not a module id a module may take: lowercase letters, digits, '-' and '_', starting with a letter, and not a name of the host's own".into(),
        ));
    }
    let sha256 = fields
        .sha256
        .map(|hex| {
            let hex = hex.strip_prefix("sha256:").unwrap_or(&hex).to_ascii_lowercase();
            match is_hex_digest(&hex) {
                true => Ok(hex),
                false => Err(at(format!(
                    "sha256 = {hex:?} is not a sha256: 64 hexadecimal digits (`sha256sum FILE` prints it)"
                ))),
            }
        })
        .transpose()?;
    let tree = fields
        .tree
        .map(|hex| match is_hex_digest(&hex.to_ascii_lowercase()) {
            true => Ok(hex.to_ascii_lowercase()),
            false => Err(at(format!(
                "tree = {hex:?} is not a tree digest: 64 hexadecimal digits, as `modhost lock` writes it"
            ))),
        })
        .transpose()?;
    if fields
        .signer
        .as_deref()
        .is_some_and(|s| s.trim().is_empty())
    {
        return Err(at(
            "signer = \"\" names nobody; leave it out or name the signer (an identity or sha256:<key fingerprint>)".into(),
        ));
    }
    if fields.issuer.is_some() && fields.signer.is_none() {
        return Err(at(
            "issuer names whose certificate the signer's is, and no signer is named; name the signer too (as `modhost lock` writes them)".into(),
        ));
    }
    let text = fields.source.trim().to_owned();
    // An MCP bundle is installed as an MCP server (`modhost install
    // X.mcpb`), which sync does not do: installed as a module, it would be
    // a zip taken for an executable.
    let last = text.split(['?', '#']).next().unwrap_or_default();
    if crate::mcpb::is_bundle(Path::new(last)) {
        return Err(at(format!(
            "source {text:?} is an MCP bundle, which sync cannot install (it installs modules): install it with `modhost install {text}` on each host, and leave it out of the lockfile"
        )));
    }
    let source = if let Some(rest) = text.strip_prefix("oci://") {
        let (reference, digest) = match rest.rsplit_once('@') {
            Some((name, digest)) => {
                let hex = digest.strip_prefix("sha256:").unwrap_or("");
                if !is_hex_digest(hex) {
                    return Err(at(format!(
                        "source {text:?}: the digest after '@' must be sha256:<64 hexadecimal digits>"
                    )));
                }
                if let Some(sha256) = &sha256
                    && sha256 != hex
                {
                    return Err(at(format!(
                        "source names digest sha256:{hex} and sha256 = {sha256:?}; they must agree (keep one)"
                    )));
                }
                (format!("oci://{name}"), format!("sha256:{hex}"))
            }
            None => match &sha256 {
                Some(sha256) => (text.clone(), format!("sha256:{sha256}")),
                None => {
                    return Err(at(format!(
                        "source {text:?} names a tag, which can move: a lockfile pins digests; add sha256 = \"<manifest digest>\" (or @sha256:… in the reference); `modhost lock` writes it from a home that installed it"
                    )));
                }
            },
        };
        LockedSource::Oci { reference, digest }
    } else if text.starts_with("https://") {
        if sha256.is_none() {
            return Err(at(format!(
                "source {text:?} needs sha256 = \"<hex>\" (the file's sha256): a lockfile pins bytes, not a URL"
            )));
        }
        LockedSource::Https(text.clone())
    } else if text.starts_with("http://") {
        return Err(at(format!(
            "source {text:?} is plain http, which anyone on the way can change: use https://"
        )));
    } else if text.contains("://") || text.is_empty() {
        return Err(at(format!(
            "source {text:?}: give an https:// URL, an oci:// reference or a local path (relative to the lockfile's folder)"
        )));
    } else {
        LockedSource::Local(folder.join(&text))
    };
    if let Some(signature) = &fields.signature {
        check_signature(signature, &source, &text).map_err(at)?;
    }
    for (name, root) in &fields.source_roots {
        if !crate::config::is_root_name(name) {
            return Err(at(format!(
                "source root {name:?}: a name is letters, digits, '-' and '_'"
            )));
        }
        if !root.is_absolute() {
            return Err(at(format!(
                "source root {name} = {:?}: the path must be absolute",
                root.display().to_string()
            )));
        }
    }
    let rules = crate::approval::ApprovalConfig {
        rules: fields.approval.iter().map(|r| r.to_rule(&id)).collect(),
    };
    let problems = rules.problems();
    if !problems.is_empty() {
        return Err(at(problems.join("; ")));
    }
    Ok(LockedModule {
        id,
        source,
        source_text: text,
        sha256,
        tree,
        signer: fields.signer,
        issuer: fields.issuer,
        signature: fields.signature,
        enabled: fields.enabled,
        source_roots: fields.source_roots,
        approval: fields.approval,
        line,
    })
}

/// A `signature` fits its entry: only an `https://` source takes one, and
/// it is an `https://` URL or a relative or absolute path.
fn check_signature(signature: &str, source: &LockedSource, text: &str) -> Result<(), String> {
    match source {
        LockedSource::Https(_) => {}
        LockedSource::Oci { .. } => {
            return Err(format!(
                "signature = {signature:?}: an OCI artifact's signatures are found in its registry (cosign's sha256-<hex>.sig beside {text}); leave signature out"
            ));
        }
        LockedSource::Local(_) => {
            return Err(format!(
                "signature = {signature:?}: a local source is installed as the operator's own approval, and no signature is checked for it; leave signature out, or publish it over https://"
            ));
        }
    }
    if signature.trim().is_empty() {
        return Err("signature = \"\" names nothing; leave it out or name the signature (an https:// URL or a path relative to the lockfile)".into());
    }
    if signature.contains("://") && !signature.starts_with("https://") {
        return Err(format!(
            "signature = {signature:?}: a signature is an https:// URL or a path relative to the lockfile's folder"
        ));
    }
    Ok(())
}

/// 64 lowercase hexadecimal digits.
fn is_hex_digest(hex: &str) -> bool {
    hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    fn parse(text: &str) -> Result<Lockfile, String> {
        Lockfile::parse(text, Path::new("/fleet/modhost.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn every_kind_of_source_parses_and_renders_back_the_same() {
        let text = format!(
            r#"version = 1

[[module]]
id = "sessions"
source = "https://releases.example.com/sessions.tar.gz"
sha256 = "{DIGEST}"
tree = "{DIGEST}"
signer = "release@example.com"
signature = "sigs/sessions.sig"
source_roots = {{ transcripts = "/srv/sessions" }}

[[module.approval]]
effect = "writes"
decision = "deny"

[[module]]
id = "files"
source = "oci://registry.example.com/modhost/files@sha256:{DIGEST}"

[[module]]
id = "git"
source = "oci://registry.example.com/modhost/git:1.2"
sha256 = "{DIGEST}"
enabled = false

[[module]]
id = "notes"
source = "modules/notes"
"#
        );
        let file = parse(&text).unwrap();
        assert_eq!(file.modules.len(), 4);
        assert_eq!(
            file.modules[1].source,
            LockedSource::Oci {
                reference: "oci://registry.example.com/modhost/files".into(),
                digest: format!("sha256:{DIGEST}"),
            }
        );
        assert_eq!(
            file.modules[3].source,
            LockedSource::Local("/fleet/modules/notes".into())
        );
        assert!(!file.modules[2].enabled && file.modules[0].enabled);
        assert_eq!(
            file.signature_location(&file.modules[0]).as_deref(),
            Some("/fleet/sigs/sessions.sig")
        );
        assert_eq!(file.modules[0].line, 4);
        let back = parse(&file.render()).unwrap();
        let strip = |f: Lockfile| {
            f.modules
                .into_iter()
                .map(|mut m| {
                    m.line = 0;
                    m
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(strip(back), strip(file));
    }

    #[test]
    fn what_would_not_pin_exact_bytes_is_refused_naming_the_line() {
        let cases = [
            ("source = \"oci://r.example/m:latest\"", "names a tag"),
            ("source = \"https://r.example/m.tar.gz\"", "needs sha256"),
            (
                "source = \"http://r.example/m.tar.gz\"\nsha256 = \"{D}\"",
                "plain http",
            ),
            ("source = \"ftp://r.example/m\"", "give an https:// URL"),
            ("source = \"m\"\nsha256 = \"abc\"", "is not a sha256"),
            (
                "source = \"oci://r.example/m@sha256:{D}\"\nsha256 = \"{E}\"",
                "must agree",
            ),
            (
                "source = \"m\"\nsource_roots = { x = \"rel\" }",
                "must be absolute",
            ),
            ("source = \"m\"\nsigner = \"\"", "names nobody"),
            (
                "source = \"https://r.example/server.mcpb\"\nsha256 = \"{D}\"",
                "is an MCP bundle",
            ),
            (
                "source = \"oci://r.example/m@sha256:{D}\"\nsignature = \"m.sig\"",
                "found in its registry",
            ),
            (
                "source = \"m\"\nsignature = \"m.sig\"",
                "no signature is checked",
            ),
            (
                "source = \"https://r.example/m\"\nsha256 = \"{D}\"\nsignature = \"http://r.example/m.sig\"",
                "an https:// URL or a path",
            ),
        ];
        for (body, expected) in cases {
            let body = body.replace("{D}", DIGEST).replace("{E}", &"e".repeat(64));
            let text = format!("version = 1\n\n[[module]]\nid = \"m\"\n{body}\n");
            let err = parse(&text).unwrap_err();
            assert!(err.contains(expected), "{body}: {err}");
            assert!(
                err.starts_with("/fleet/modhost.toml:4: module \"m\""),
                "{err}"
            );
        }
    }

    /// The attack: a lockfile of endless or enormous bytes (a device, a
    /// generated file) must be refused without being read whole.
    #[test]
    fn a_lockfile_past_the_bound_is_refused_before_it_is_parsed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("modhost.toml");
        let mut text = String::from("version = 1\n");
        while (text.len() as u64) <= MAX_BYTES {
            text.push_str("# padding padding padding padding padding padding padding\n");
        }
        std::fs::write(&path, &text).unwrap();
        let err = Lockfile::load(&path).unwrap_err().to_string();
        assert!(err.contains("larger than 4194304 bytes"), "{err}");
        let err = Lockfile::load(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("larger than"), "{err}");
        std::fs::write(&path, "version = 1\n").unwrap();
        assert!(Lockfile::load(&path).unwrap().modules.is_empty());
    }

    #[test]
    fn unknown_keys_duplicates_and_other_versions_are_refused() {
        let err = parse("version = 1\n[[module]]\nid = \"a\"\nsource = \"a\"\nsha265 = \"x\"\n")
            .unwrap_err();
        assert!(err.contains("sha265") && err.contains("line 5"), "{err}");
        let err = parse("version = 2\n").unwrap_err();
        assert!(err.contains(":1: version = 2"), "{err}");
        let err = parse(
            "version = 1\n[[module]]\nid = \"a\"\nsource = \"a\"\n[[module]]\nid = \"a\"\nsource = \"b\"\n",
        )
        .unwrap_err();
        assert!(
            err.contains(":6:") && err.contains("first on line 3"),
            "{err}"
        );
        let err = parse("version = 1\n[[module]]\nid = \"modules\"\nsource = \"a\"\n").unwrap_err();
        assert!(err.contains("not a module id"), "{err}");
        let err = parse(
            "version = 1\n[[module]]\nid = \"a\"\nsource = \"a\"\n[[module.approval]]\nmodule = \"b\"\ndecision = \"allow\"\n",
        )
        .unwrap_err();
        assert!(err.contains("unknown field `module`"), "{err}");
        let err = parse(
            "version = 1\n[[module]]\nid = \"a\"\nsource = \"a\"\nsource_roots = { r = \"/x\" }\n[[module]]\nid = \"b\"\nsource = \"b\"\nsource_roots = { r = \"/y\" }\n",
        )
        .unwrap_err();
        assert!(err.contains("a root has one path"), "{err}");
    }

    /// One email under two issuers is two signers: a lockfile naming the
    /// issuer accepts only that one; naming none, the identity alone.
    #[test]
    fn a_signer_is_the_identity_and_the_issuer_the_lockfile_names() {
        use modhost_distribution::signature::{SignatureKind, Verified};
        let lockfile = Lockfile::parse(
            "version = 1\n\n[[module]]\nid = \"a\"\nsource = \"https://example.org/a\"\nsha256 = \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"\nsigner = \"alice@example.org\"\nissuer = \"https://issuer.one\"\n",
            Path::new("/srv/modhost.toml"),
        )
        .unwrap();
        let mut entry = lockfile.modules[0].clone();
        let signed_by = |issuer: &str| Verified {
            kind: SignatureKind::Keyless,
            signer: "alice@example.org".into(),
            issuer: Some(issuer.into()),
            digest: "sha256:00".into(),
        };
        assert!(entry.names_the_signer(Some(&signed_by("https://issuer.one"))));
        assert!(!entry.names_the_signer(Some(&signed_by("https://issuer.two"))));
        assert!(!entry.names_the_signer(None));
        entry.issuer = None;
        assert!(entry.names_the_signer(Some(&signed_by("https://issuer.two"))));
        // An issuer without a signer names nobody.
        let refused = Lockfile::parse(
            "version = 1\n\n[[module]]\nid = \"a\"\nsource = \"https://example.org/a\"\nsha256 = \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"\nissuer = \"https://issuer.one\"\n",
            Path::new("/srv/modhost.toml"),
        );
        assert!(
            refused
                .unwrap_err()
                .to_string()
                .contains("no signer is named")
        );
    }
}

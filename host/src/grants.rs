//! Per-invocation grants: which paths a module's declared roots (and
//! binaries) point at for one call.
//!
//! A module declares names and kinds; the host decides the paths. This is
//! where "installing a module grants nothing" becomes concrete:
//!
//! - `state` is `<home>/state/<id>/` and `artifacts` is
//!   `<home>/artifacts/<id>/`: each module's own, so modules never see each
//!   other's state. Created only when granted for writing and only when a call
//!   is about to run (a preview never changes the disk).
//! - `workspace` is the caller's workspace, with the access the declaration asks
//!   for.
//! - `source` roots come only from the operator (`[source_roots]`, then
//!   `--source-root NAME=PATH`, which wins), are always read-only, must exist
//!   and be a directory or a regular file. One that does not resolve is left
//!   out and reported ([`MissingGrant`]), never substituted: the module then
//!   fails closed (`root_missing`) instead of reading something the operator
//!   did not point it at.
//!
//! Every granted path is canonical and absolute.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use modproto::{Access, Descriptor, GrantedRoot, RootKind};
use serde::Serialize;

use crate::home::HomeLayout;
use crate::runner::{Grant, Transport};

/// The operator's inputs to a grant decision.
#[derive(Debug, Clone, Copy)]
pub struct GrantContext<'a> {
    pub layout: &'a HomeLayout,
    /// Canonical workspace directory.
    pub workspace: &'a Path,
    /// Source roots by name, config and command line already merged.
    pub source_roots: &'a BTreeMap<String, PathBuf>,
    /// Binaries by name, from the config.
    pub binaries: &'a BTreeMap<String, PathBuf>,
}

/// A declared root or binary the host will not grant, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MissingGrant {
    pub name: String,
    /// `source`, `workspace`, ... for roots; `binary` for binaries.
    pub kind: String,
    pub reason: String,
    pub remedy: String,
}

impl MissingGrant {
    /// One line for `host_warnings`.
    pub fn warning(&self) -> String {
        format!(
            "{} {:?} is not granted: {}; {}",
            self.kind_label(),
            self.name,
            self.reason,
            self.remedy
        )
    }

    fn kind_label(&self) -> String {
        match self.kind.as_str() {
            "binary" => "binary".into(),
            kind => format!("{kind} root"),
        }
    }
}

/// What one call of a module gets.
#[derive(Debug, Clone, Default)]
pub struct GrantPlan {
    pub roots: Vec<Grant>,
    /// The kind of each granted root, by name.
    pub kinds: BTreeMap<String, RootKind>,
    pub binaries: BTreeMap<String, PathBuf>,
    pub missing: Vec<MissingGrant>,
}

impl GrantPlan {
    /// The `roots` member of the invoke request.
    pub fn request_roots(&self) -> BTreeMap<String, GrantedRoot> {
        self.roots
            .iter()
            .map(|g| {
                let kind = self.kinds.get(&g.name).copied().unwrap_or(RootKind::Source);
                (
                    g.name.clone(),
                    GrantedRoot {
                        path: g.guest.clone(),
                        kind,
                        access: g.access,
                    },
                )
            })
            .collect()
    }

    /// The `binaries` member of the invoke request.
    pub fn request_binaries(&self) -> BTreeMap<String, String> {
        self.binaries
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string_lossy().into_owned()))
            .collect()
    }

    pub fn warnings(&self) -> Vec<String> {
        self.missing.iter().map(MissingGrant::warning).collect()
    }
}

/// Decide the grants for `descriptor` (the module `module_id`). With
/// `create`, writable `state`/`artifacts` directories are created (a call is
/// about to run); without, nothing on disk changes (a preview for
/// `describe`).
pub fn plan(
    descriptor: &Descriptor,
    module_id: &str,
    transport: Transport,
    context: GrantContext<'_>,
    create: bool,
) -> Result<GrantPlan, std::io::Error> {
    let mut plan = GrantPlan::default();
    for decl in &descriptor.roots {
        if plan.kinds.contains_key(&decl.name) || plan.missing.iter().any(|m| m.name == decl.name) {
            continue;
        }
        let access = decl.effective_access();
        let resolved = match decl.kind {
            RootKind::State => Ok(private_dir(
                &context.layout.state_dir(module_id),
                access,
                create,
            )?),
            RootKind::Artifacts => Ok(private_dir(
                &context.layout.artifacts_dir(module_id),
                access,
                create,
            )?),
            RootKind::Workspace => resolve_workspace(context.workspace),
            RootKind::Source => match context.source_roots.get(&decl.name) {
                Some(path) => resolve_source_root(path),
                None => Err("the operator configured no path for it".to_owned()),
            },
        };
        match resolved {
            Ok(host) => {
                plan.kinds.insert(decl.name.clone(), decl.kind);
                plan.roots.push(Grant {
                    name: decl.name.clone(),
                    guest: transport.guest_path(&decl.name, &host),
                    host,
                    access,
                });
            }
            Err(reason) => plan.missing.push(MissingGrant {
                name: decl.name.clone(),
                kind: decl.kind.as_str().to_owned(),
                remedy: match decl.kind {
                    RootKind::Source => format!(
                        "set `{0} = \"/absolute/path\"` under [source_roots] in {1}, or pass --source-root {0}=PATH",
                        decl.name,
                        context.layout.config_path().display()
                    ),
                    _ => "check the host home and the workspace directory".to_owned(),
                },
                reason,
            }),
        }
    }
    for decl in &descriptor.binaries {
        match context.binaries.get(&decl.name).map(|p| resolve_binary(p)) {
            Some(Ok(path)) => {
                plan.binaries.insert(decl.name.clone(), path);
            }
            other => plan.missing.push(MissingGrant {
                name: decl.name.clone(),
                kind: "binary".into(),
                reason: match other {
                    Some(Err(reason)) => reason,
                    _ => "the operator configured no path for it".into(),
                },
                remedy: format!(
                    "set `{} = \"/absolute/path\"` under [binaries] in {}",
                    decl.name,
                    context.layout.config_path().display()
                ),
            }),
        }
    }
    Ok(plan)
}

/// A module's own directory under the home: created when a call that may
/// write is about to run, canonical when it exists.
fn private_dir(path: &Path, access: Access, create: bool) -> Result<PathBuf, std::io::Error> {
    if create && access.is_write() {
        std::fs::create_dir_all(path).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("could not create {}: {e}", path.display()),
            )
        })?;
    }
    Ok(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()))
}

fn resolve_workspace(workspace: &Path) -> Result<PathBuf, String> {
    match std::fs::canonicalize(workspace) {
        Ok(path) if path.is_dir() => Ok(path),
        Ok(path) => Err(format!("{} is not a directory", path.display())),
        Err(e) => Err(format!("{}: {e}", workspace.display())),
    }
}

/// Check one source root: it must exist and be a directory or a regular
/// file (a store kept as one database file is as good as a directory); a
/// socket, device or FIFO is refused. Returns the canonical path.
pub fn resolve_source_root(path: &Path) -> Result<PathBuf, String> {
    let canonical = std::fs::canonicalize(path)
        .map_err(|e| format!("{} does not resolve: {e}", path.display()))?;
    let meta =
        std::fs::metadata(&canonical).map_err(|e| format!("{}: {e}", canonical.display()))?;
    if meta.is_dir() || meta.is_file() {
        Ok(canonical)
    } else {
        Err(format!(
            "{} is neither a directory nor a regular file (a socket, device or pipe is never granted)",
            canonical.display()
        ))
    }
}

fn resolve_binary(path: &Path) -> Result<PathBuf, String> {
    let canonical = std::fs::canonicalize(path)
        .map_err(|e| format!("{} does not resolve: {e}", path.display()))?;
    if canonical.is_file() {
        Ok(canonical)
    } else {
        Err(format!("{} is not a file", canonical.display()))
    }
}

/// Merge the configured source roots with command-line ones; the command
/// line wins.
pub fn merge_source_roots(
    configured: &BTreeMap<String, PathBuf>,
    overrides: &BTreeMap<String, PathBuf>,
) -> BTreeMap<String, PathBuf> {
    let mut merged = configured.clone();
    merged.extend(overrides.iter().map(|(k, v)| (k.clone(), v.clone())));
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use modproto::RootDecl;

    fn descriptor(roots: &[RootDecl]) -> Descriptor {
        serde_json::from_value(serde_json::json!({
            "id": "m", "version": "1.0.0", "capabilities": [], "roots": roots
        }))
        .unwrap()
    }

    fn root(name: &str, kind: RootKind, access: Option<Access>) -> RootDecl {
        RootDecl {
            name: name.into(),
            kind,
            description: String::new(),
            access,
        }
    }

    struct Fixture {
        _dir: tempfile::TempDir,
        layout: HomeLayout,
        workspace: PathBuf,
        data: PathBuf,
    }

    impl Fixture {
        /// The grant context of this fixture's home and workspace.
        fn ctx<'a>(
            &'a self,
            source_roots: &'a BTreeMap<String, PathBuf>,
            binaries: &'a BTreeMap<String, PathBuf>,
        ) -> GrantContext<'a> {
            GrantContext {
                layout: &self.layout,
                workspace: &self.workspace,
                source_roots,
                binaries,
            }
        }
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let workspace = root.join("ws");
        let data = root.join("data");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::create_dir_all(&data).unwrap();
        Fixture {
            layout: HomeLayout::new(root.join("home")),
            workspace,
            data,
            _dir: dir,
        }
    }

    #[test]
    fn kinds_map_to_the_homes_paths() {
        let f = fixture();
        let d = descriptor(&[
            root("state", RootKind::State, None),
            root("out", RootKind::Artifacts, None),
            root("workspace", RootKind::Workspace, Some(Access::ReadWrite)),
            root("data", RootKind::Source, Some(Access::ReadWrite)),
        ]);
        let sources = BTreeMap::from([("data".to_owned(), f.data.clone())]);
        let binaries = BTreeMap::new();
        let ctx = f.ctx(&sources, &binaries);
        let plan = plan(&d, "m", Transport::Native, ctx, true).unwrap();
        assert!(plan.missing.is_empty(), "{:?}", plan.missing);
        let by_name: BTreeMap<_, _> = plan.roots.iter().map(|g| (g.name.as_str(), g)).collect();
        assert_eq!(by_name["state"].host, f.layout.state_dir("m"));
        assert!(
            f.layout.state_dir("m").is_dir(),
            "a writable state root is created"
        );
        assert_eq!(by_name["out"].host, f.layout.artifacts_dir("m"));
        assert_eq!(by_name["workspace"].access, Access::ReadWrite);
        assert_eq!(by_name["data"].host, f.data);
        assert_eq!(
            by_name["data"].access,
            Access::Read,
            "a source root is always read-only"
        );
        assert_eq!(by_name["data"].guest, f.data.to_string_lossy());

        let request = plan.request_roots();
        assert_eq!(request["state"].kind, RootKind::State);
    }

    #[test]
    fn preview_creates_nothing() {
        let f = fixture();
        let d = descriptor(&[root("state", RootKind::State, None)]);
        let none = BTreeMap::new();
        let ctx = f.ctx(&none, &none);
        plan(&d, "m", Transport::Native, ctx, false).unwrap();
        assert!(!f.layout.state_dir("m").exists());
    }

    #[test]
    fn state_roots_of_two_modules_differ() {
        let f = fixture();
        let d = descriptor(&[root("state", RootKind::State, None)]);
        let none = BTreeMap::new();
        let ctx = f.ctx(&none, &none);
        let a = plan(&d, "a", Transport::Native, ctx, true).unwrap();
        let b = plan(&d, "b", Transport::Native, ctx, true).unwrap();
        assert_ne!(a.roots[0].host, b.roots[0].host);
    }

    #[test]
    fn missing_source_root_is_left_out_not_substituted() {
        let f = fixture();
        let d = descriptor(&[
            root("unset", RootKind::Source, None),
            root("gone", RootKind::Source, None),
        ]);
        let sources = BTreeMap::from([("gone".to_owned(), f.data.join("nope"))]);
        let none = BTreeMap::new();
        let ctx = f.ctx(&sources, &none);
        let plan = plan(&d, "m", Transport::Native, ctx, true).unwrap();
        assert!(plan.roots.is_empty());
        assert_eq!(plan.missing.len(), 2);
        let warning = plan.missing[0].warning();
        assert!(warning.contains("--source-root"), "{warning}");
        assert!(plan.request_roots().is_empty());
    }

    #[test]
    fn sockets_are_refused_files_accepted() {
        let f = fixture();
        let socket = f.data.join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        assert!(
            resolve_source_root(&socket)
                .unwrap_err()
                .contains("neither")
        );
        let file = f.data.join("db.sqlite");
        std::fs::write(&file, b"x").unwrap();
        assert_eq!(resolve_source_root(&file).unwrap(), file);
    }

    #[test]
    fn command_line_source_roots_win() {
        let configured = BTreeMap::from([("a".to_owned(), PathBuf::from("/config"))]);
        let overrides = BTreeMap::from([("a".to_owned(), PathBuf::from("/cli"))]);
        assert_eq!(
            merge_source_roots(&configured, &overrides)["a"],
            Path::new("/cli")
        );
    }

    #[test]
    fn component_sees_roots_under_slash_roots() {
        let f = fixture();
        let d = descriptor(&[root("workspace", RootKind::Workspace, None)]);
        let none = BTreeMap::new();
        let ctx = f.ctx(&none, &none);
        let plan = plan(&d, "m", Transport::Component, ctx, false).unwrap();
        assert_eq!(plan.roots[0].guest, "/roots/workspace");
        assert_eq!(plan.roots[0].host, f.workspace);
    }
}

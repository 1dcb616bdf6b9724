//! Per-invocation grants: which paths one capability's roots (and binaries)
//! point at for one call.
//!
//! A module declares names and kinds; the host decides the paths. This is
//! where "installing a module grants nothing" becomes concrete.
//!
//! **Authority follows the capability, not the module**, and it is decided
//! here only ([`authority`]): a call is granted exactly the roots its
//! capability names in `effects.reads` and `effects.writes`, and nothing
//! else. A root named in `writes` is read-write when its declaration allows
//! it; every other named root is read-only. A binary is granted only when the
//! capability names it in `effects.spawns`. A name the module does not
//! declare is never granted (and reported). The tool description, the MCP
//! annotations, `modhost describe` and the `roots` member the module receives
//! are all rendered from this one decision, so they cannot disagree.
//!
//! - `state` is `<home>/state/<id>/` and `artifacts` is
//!   `<home>/artifacts/<id>/`: each module's own, so modules never see each
//!   other's state. Created when granted (for reading too: an empty folder
//!   of its own reads as "nothing yet", not as a missing root) and only when
//!   a call is about to run (a preview never changes the disk).
//! - `workspace` is the caller's workspace, with the access decided above.
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

use modproto::{Access, Descriptor, Effects, GrantedRoot, RootKind};
use serde::Serialize;

use crate::home::HomeLayout;
use modhost_runner::{Grant, Transport};

/// The operator's inputs to a grant decision.
#[derive(Debug, Clone, Copy)]
pub struct GrantContext<'a> {
    /// Where `state` and `artifacts` roots are made.
    pub layout: &'a HomeLayout,
    /// The modhost home (canonical): no root overlaps it, no binary lies in
    /// it. The layout's root, but for a conformance run, whose layout is a
    /// scratch home and which must still not reach the operator's.
    pub home: &'a Path,
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

/// What one call of a capability gets: its [`authority`], resolved to paths.
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
    pub(crate) fn request_roots(&self) -> BTreeMap<String, GrantedRoot> {
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
    pub(crate) fn request_binaries(&self) -> BTreeMap<String, String> {
        self.binaries
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string_lossy().into_owned()))
            .collect()
    }

    pub fn warnings(&self) -> Vec<String> {
        self.missing.iter().map(MissingGrant::warning).collect()
    }
}

/// One root a capability may use, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RootAuthority {
    pub name: String,
    pub kind: RootKind,
    pub access: Access,
}

/// What one capability may touch, decided from the declarations alone (no
/// paths, no operator configuration): the one statement every surface that
/// describes a capability's authority renders, and the one the grant plan
/// resolves.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Authority {
    /// The roots granted, in the module's declaration order.
    pub roots: Vec<RootAuthority>,
    /// The binaries it may be given, in the module's declaration order.
    pub binaries: Vec<String>,
    /// Root names in `effects.reads`/`effects.writes` the module does not
    /// declare: never granted.
    pub undeclared_roots: Vec<String>,
    /// Binary names in `effects.spawns` the module does not declare: never
    /// granted.
    pub undeclared_binaries: Vec<String>,
}

impl Authority {
    /// The roots granted read-write.
    pub fn writable(&self) -> impl Iterator<Item = &RootAuthority> {
        self.roots.iter().filter(|r| r.access.is_write())
    }

    /// Writes no root and runs no program (network is the caller's to add).
    pub(crate) fn touches_nothing_but_reads(&self) -> bool {
        self.writable().next().is_none() && self.binaries.is_empty()
    }
}

/// The authority of a capability with `effects` in `descriptor`: exactly
/// the roots named in `effects.reads` and `effects.writes` (read-write only
/// when named in `writes` and the declaration allows writing), and the
/// binaries named in `effects.spawns`; nothing the module declares but the
/// capability does not name.
pub fn authority(descriptor: &Descriptor, effects: &Effects) -> Authority {
    let mut authority = Authority::default();
    for decl in &descriptor.roots {
        if authority.roots.iter().any(|r| r.name == decl.name) {
            continue;
        }
        let writes = effects.writes.contains(&decl.name);
        if !writes && !effects.reads.contains(&decl.name) {
            continue;
        }
        let access = if writes {
            decl.effective_access()
        } else {
            Access::Read
        };
        authority.roots.push(RootAuthority {
            name: decl.name.clone(),
            kind: decl.kind,
            access,
        });
    }
    for name in effects.reads.iter().chain(&effects.writes) {
        if descriptor.root(name).is_none() && !authority.undeclared_roots.contains(name) {
            authority.undeclared_roots.push(name.clone());
        }
    }
    for decl in &descriptor.binaries {
        if effects.spawns.contains(&decl.name) && !authority.binaries.contains(&decl.name) {
            authority.binaries.push(decl.name.clone());
        }
    }
    for name in &effects.spawns {
        let declared = descriptor.binaries.iter().any(|b| &b.name == name);
        if !declared && !authority.undeclared_binaries.contains(name) {
            authority.undeclared_binaries.push(name.clone());
        }
    }
    authority
}

/// Decide the grants for one call of a capability with `effects` of
/// `descriptor` (the module `module_id`): its [`authority`], resolved to
/// paths. With `create`, writable `state`/`artifacts` directories are
/// created (a call is about to run); without, nothing on disk changes (a
/// preview for `describe`).
pub fn plan(
    descriptor: &Descriptor,
    effects: &Effects,
    module_id: &str,
    transport: Transport,
    context: GrantContext<'_>,
    create: bool,
) -> Result<GrantPlan, std::io::Error> {
    let authority = authority(descriptor, effects);
    let mut plan = GrantPlan::default();
    for root in &authority.roots {
        let access = root.access;
        let resolved = match root.kind {
            RootKind::State => Ok(private_dir(&context.layout.state_dir(module_id), create)?),
            RootKind::Artifacts => Ok(private_dir(
                &context.layout.artifacts_dir(module_id),
                create,
            )?),
            RootKind::Workspace => resolve_workspace(context.workspace)
                .and_then(|path| outside_the_homes(path, context)),
            RootKind::Source => match context.source_roots.get(&root.name) {
                Some(path) => {
                    resolve_source_root(path).and_then(|path| outside_the_homes(path, context))
                }
                None => Err("the operator configured no path for it".to_owned()),
            },
        };
        match resolved {
            Ok(host) => {
                plan.kinds.insert(root.name.clone(), root.kind);
                plan.roots.push(Grant {
                    name: root.name.clone(),
                    guest: transport.guest_path(&root.name, &host),
                    host,
                    access,
                });
            }
            Err(reason) => plan.missing.push(MissingGrant {
                name: root.name.clone(),
                kind: root.kind.as_str().to_owned(),
                remedy: match root.kind {
                    RootKind::Source => format!(
                        "set `{0} = \"/absolute/path\"` (outside the modhost home) under [source_roots] in {1}, or pass --source-root {0}=PATH",
                        root.name,
                        context.layout.config_path().display()
                    ),
                    _ => "use a workspace directory that exists and neither holds nor lies in the modhost home (--workspace DIR)".to_owned(),
                },
                reason,
            }),
        }
    }
    for name in &authority.undeclared_roots {
        plan.missing.push(MissingGrant {
            name: name.clone(),
            kind: "undeclared".into(),
            reason: "the capability names it in its effects but the module declares no such root".into(),
            remedy: "the module's author must declare it in roots or fix the name in effects (`modhost conformance` reports it)".into(),
        });
    }
    for name in &authority.binaries {
        let resolved = context
            .binaries
            .get(name)
            .map(|p| resolve_binary(p).and_then(|path| outside_module_writes(path, context)));
        match resolved {
            Some(Ok(path)) => {
                plan.binaries.insert(name.clone(), path);
            }
            other => plan.missing.push(MissingGrant {
                name: name.clone(),
                kind: "binary".into(),
                reason: match other {
                    Some(Err(reason)) => reason,
                    _ => "the operator configured no path for it".into(),
                },
                remedy: format!(
                    "set `{} = \"{}\"` (outside the workspace and the modhost home) under [binaries] in {}",
                    name,
                    system_program(name).unwrap_or_else(|| "/absolute/path".into()),
                    context.layout.config_path().display()
                ),
            }),
        }
    }
    for name in &authority.undeclared_binaries {
        plan.missing.push(MissingGrant {
            name: name.clone(),
            kind: "binary".into(),
            reason: "the capability names it in effects.spawns but the module declares no such binary".into(),
            remedy: "the module's author must declare it in binaries or fix the name in effects.spawns (`modhost conformance` reports it)".into(),
        });
    }
    Ok(plan)
}

/// A module's own directory under the home: created when a call granted it
/// is about to run, canonical when it exists.
fn private_dir(path: &Path, create: bool) -> Result<PathBuf, std::io::Error> {
    if create {
        std::fs::create_dir_all(path).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("could not create {}: {e}", path.display()),
            )
        })?;
    }
    Ok(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()))
}

/// `path` (canonical) unless it overlaps the host's `home` (canonical): is
/// in it, or holds it. A module granted such a root could rewrite the
/// host's own `config.toml` (turning confinement off for its next call),
/// `pins.json` and approval rules, or its approved snapshot, and read every
/// module's state. Only a module's own `state` and `artifacts` folders are
/// granted inside the home.
fn outside_the_homes(path: PathBuf, context: GrantContext<'_>) -> Result<PathBuf, String> {
    let path = outside_the_home(path, context.home)?;
    // Only a conformance run has a layout (its scratch home) other than the
    // home.
    if context.layout.root() == context.home {
        return Ok(path);
    }
    outside_the_home(path, context.layout.root())
}

fn outside_the_home(path: PathBuf, home: &Path) -> Result<PathBuf, String> {
    if overlaps_the_home(&path, home) {
        return Err(format!(
            "{} overlaps the modhost home {}: a module granted it would reach the host's configuration, pins, approvals and every module's state",
            path.display(),
            home.display()
        ));
    }
    Ok(path)
}

/// Whether `path` is in `home` or holds it (both canonical): by their names,
/// and through the mount table (`mount_table`), so that a folder reached
/// under another name overlaps too: a bind mount of the home's parent, of a
/// folder inside the home, a mount below `path` showing part of it, or a
/// home that is itself a bind mount of a folder inside `path`.
pub fn overlaps_the_home(path: &Path, home: &Path) -> bool {
    modhost_sandbox::mount_table::current().overlap(path, home)
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
pub(crate) fn resolve_source_root(path: &Path) -> Result<PathBuf, String> {
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

/// `binary` (canonical) unless it lies where modules write: the workspace
/// (some capability may write it) or the modhost home (modules' state). A
/// module could replace it there, and the calls granted it would run that
/// module's bytes with their own grants.
fn outside_module_writes(binary: PathBuf, context: GrantContext<'_>) -> Result<PathBuf, String> {
    let workspace = Some(context.workspace).filter(|w| !w.as_os_str().is_empty());
    let place = if workspace.is_some_and(|w| binary.starts_with(w)) {
        "the workspace"
    } else if binary.starts_with(context.home) || binary.starts_with(context.layout.root()) {
        "the modhost home"
    } else {
        return Ok(binary);
    };
    Err(format!(
        "{} lies in {place}, where modules write: one could replace it, and this call would run its bytes",
        binary.display()
    ))
}

/// `name` in the system's own program folders (`/usr/bin`, `/bin`, which
/// only its administrator writes): the path a remedy suggests. Only
/// suggested: a binary is granted only as `[binaries]` names it.
fn system_program(name: &str) -> Option<String> {
    // A declared name is the module author's: `/tmp/x` or `../../tmp/x`
    // joined to `/usr/bin` would name a program outside those folders.
    if !is_plain_file_name(name) {
        return None;
    }
    ["/usr/bin", "/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|path| path.is_file())
        .map(|path| path.display().to_string())
}

/// One file name: no `/`, not `.` or `..`.
fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/')
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

/// A `--source-root NAME=PATH` whose NAME the modules it is meant for do
/// not declare as a source root: a typo that would otherwise be ignored
/// silently, and the call run without the root the operator meant to give.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--source-root {name}: {owner} declares no source root {name:?}; {}", declared_list(.declared))]
pub struct UndeclaredSourceRoot {
    pub name: String,
    /// `module "x"`, or `no installed module`.
    pub owner: String,
    /// The source roots that are declared (`module.root` when several
    /// modules are meant).
    pub declared: Vec<String>,
}

fn declared_list(declared: &[String]) -> String {
    if declared.is_empty() {
        "none is declared, so no --source-root applies".to_owned()
    } else {
        format!("the declared ones are: {}", declared.join(", "))
    }
}

/// Check that every name in `names` is a source root `descriptor` (the
/// module `module_id`) declares.
pub fn check_source_root_names<'a>(
    module_id: &str,
    descriptor: &Descriptor,
    names: impl IntoIterator<Item = &'a String>,
) -> Result<(), UndeclaredSourceRoot> {
    let declared: Vec<String> = descriptor
        .roots
        .iter()
        .filter(|r| r.kind == RootKind::Source)
        .map(|r| r.name.clone())
        .collect();
    match names.into_iter().find(|n| !declared.contains(n)) {
        None => Ok(()),
        Some(name) => Err(UndeclaredSourceRoot {
            name: name.clone(),
            owner: format!("module {module_id:?}"),
            declared,
        }),
    }
}

/// Check that every name in `names` is a source root at least one of
/// `modules` (id and descriptor) declares: for commands that serve every
/// module (`tools`, `mcp`).
pub fn check_source_root_names_any<'a, 'd>(
    modules: impl IntoIterator<Item = (&'d str, &'d Descriptor)>,
    names: impl IntoIterator<Item = &'a String>,
) -> Result<(), UndeclaredSourceRoot> {
    let declared: Vec<(String, String)> = modules
        .into_iter()
        .flat_map(|(id, d)| {
            d.roots
                .iter()
                .filter(|r| r.kind == RootKind::Source)
                .map(move |r| (id.to_owned(), r.name.clone()))
        })
        .collect();
    match names
        .into_iter()
        .find(|n| !declared.iter().any(|(_, root)| root == *n))
    {
        None => Ok(()),
        Some(name) => Err(UndeclaredSourceRoot {
            name: name.clone(),
            owner: "no installed module".into(),
            declared: declared
                .iter()
                .map(|(id, root)| format!("{root} ({id})"))
                .collect(),
        }),
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

    /// Effects naming `reads` and `writes`.
    fn effects(reads: &[&str], writes: &[&str]) -> Effects {
        Effects {
            reads: reads.iter().map(|r| (*r).to_owned()).collect(),
            writes: writes.iter().map(|w| (*w).to_owned()).collect(),
            ..Effects::default()
        }
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
                home: self.layout.root(),
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

    /// A workspace or source root that holds the home or lies in it is left
    /// out and reported, read or write: granted, a module could rewrite the
    /// host's configuration and pins, or read every module's state. Its
    /// own state and artifacts are granted inside the home as always.
    #[test]
    fn no_root_overlapping_the_home_is_granted_but_the_modules_own() {
        let f = fixture();
        let home = f.layout.root().to_path_buf();
        let other_state = f.layout.state_dir("other");
        std::fs::create_dir_all(&other_state).unwrap();
        let d = descriptor(&[
            root("state", RootKind::State, None),
            root("workspace", RootKind::Workspace, Some(Access::ReadWrite)),
            root("data", RootKind::Source, None),
        ]);
        let binaries = BTreeMap::new();
        let holding = home.parent().unwrap().to_path_buf();
        for (workspace, data) in [(&holding, &other_state), (&other_state, &holding)] {
            let sources = BTreeMap::from([("data".to_owned(), data.clone())]);
            let ctx = GrantContext {
                workspace,
                ..f.ctx(&sources, &binaries)
            };
            for all in [
                effects(&["state", "workspace", "data"], &[]),
                effects(&[], &["state", "workspace", "data"]),
            ] {
                let plan = plan(&d, &all, "m", Transport::Native, ctx, true).unwrap();
                let granted: Vec<&str> = plan.roots.iter().map(|g| g.name.as_str()).collect();
                assert_eq!(granted, ["state"], "{:?}", plan.roots);
                let missing: Vec<&str> = plan.missing.iter().map(|m| m.name.as_str()).collect();
                assert_eq!(missing, ["workspace", "data"]);
                for m in &plan.missing {
                    assert!(
                        m.reason.contains("overlaps the modhost home"),
                        "{}: {}",
                        m.name,
                        m.reason
                    );
                }
            }
        }
    }

    /// The attack: a folder that reaches the home under another name, a
    /// bind mount of the home's parent (a container's or a user's view of
    /// their files). By name it overlaps nothing; through the mount table it holds the
    /// home. Needs root, as CI runs: it fails rather than skip without.
    #[test]
    fn a_folder_reaching_the_home_under_another_name_overlaps_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (home, view, other) = (root.join("home"), root.join("view"), root.join("other"));
        for folder in [&home, &view, &other] {
            std::fs::create_dir(folder).unwrap();
        }
        let _mount = modhost_test_support::mounts::bind(&root, &view);
        assert!(overlaps_the_home(&view, &home), "a view holding the home");
        assert!(
            overlaps_the_home(&view.join("home"), &home),
            "the home under another name"
        );
        assert!(!overlaps_the_home(&other, &home), "a sibling");
        assert!(
            !overlaps_the_home(&view.join("other"), &home),
            "a sibling, seen through the view"
        );
    }

    /// The attack through the mount table: a workspace that is a bind mount
    /// of another module's state (names and ancestors say nothing: its
    /// parent is an ordinary folder), and a home that is itself a bind
    /// mount of a folder inside the workspace. Neither is granted. Needs
    /// root, as CI runs: it fails rather than skip without.
    #[test]
    fn a_bind_mount_of_a_folder_inside_the_home_is_never_granted() {
        let f = fixture();
        let other_state = f.layout.state_dir("other");
        std::fs::create_dir_all(&other_state).unwrap();
        std::fs::write(other_state.join("token"), "secret").unwrap();
        let _state_view = modhost_test_support::mounts::bind(&other_state, &f.workspace);
        assert!(f.workspace.join("token").exists(), "the mount took");
        let d = descriptor(&[root("workspace", RootKind::Workspace, None)]);
        let (sources, binaries) = (BTreeMap::new(), BTreeMap::new());
        let reads = effects(&["workspace"], &[]);
        let plan = plan(
            &d,
            &reads,
            "m",
            Transport::Native,
            f.ctx(&sources, &binaries),
            true,
        )
        .unwrap();
        assert!(plan.roots.is_empty(), "{:?}", plan.roots);
        assert!(
            plan.missing[0].reason.contains("overlaps the modhost home"),
            "{:?}",
            plan.missing
        );
        // The other way round: the home is a view of a folder inside `data`.
        let real_home = f.data.join("deep/modhost");
        std::fs::create_dir_all(&real_home).unwrap();
        let home_view = f.layout.root().parent().unwrap().join("view");
        std::fs::create_dir_all(&home_view).unwrap();
        let _home_view = modhost_test_support::mounts::bind(&real_home, &home_view);
        assert!(
            overlaps_the_home(&f.data, &home_view),
            "a folder holding the home's real place"
        );
        assert!(
            !overlaps_the_home(&f.data.join("deep2"), &home_view),
            "a sibling of it"
        );
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
        let all = effects(&[], &["state", "out", "workspace", "data"]);
        let plan = plan(&d, &all, "m", Transport::Native, ctx, true).unwrap();
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
        plan(
            &d,
            &effects(&[], &["state"]),
            "m",
            Transport::Native,
            ctx,
            false,
        )
        .unwrap();
        assert!(!f.layout.state_dir("m").exists());
    }

    #[test]
    fn state_roots_of_two_modules_differ() {
        let f = fixture();
        let d = descriptor(&[root("state", RootKind::State, None)]);
        let none = BTreeMap::new();
        let ctx = f.ctx(&none, &none);
        let e = effects(&["state"], &[]);
        let a = plan(&d, &e, "a", Transport::Native, ctx, true).unwrap();
        let b = plan(&d, &e, "b", Transport::Native, ctx, true).unwrap();
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
        let e = effects(&["unset", "gone"], &[]);
        let plan = plan(&d, &e, "m", Transport::Native, ctx, true).unwrap();
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

    /// The attack: a module declaring a binary named by a path, so the
    /// remedy's suggested line would point outside `/usr/bin` and `/bin`.
    #[test]
    fn a_remedy_suggests_only_a_program_in_the_system_folders() {
        let dir = tempfile::tempdir().unwrap();
        let planted = dir.path().join("sh");
        std::fs::write(&planted, b"#!/bin/sh\n").unwrap();
        let absolute = planted.display().to_string();
        let climbing = format!("../..{absolute}");
        for name in [absolute.as_str(), climbing.as_str(), ".", ".."] {
            assert_eq!(system_program(name), None, "{name}");
        }
        assert_eq!(system_program("sh").as_deref(), Some("/usr/bin/sh"));
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
        let e = effects(&["workspace"], &[]);
        let plan = plan(&d, &e, "m", Transport::Component, ctx, false).unwrap();
        assert_eq!(plan.roots[0].guest, "/roots/workspace");
        assert_eq!(plan.roots[0].host, f.workspace);
    }

    /// The whole module's roots, for the tests of per-capability authority.
    fn every_kind() -> Descriptor {
        let mut d = descriptor(&[
            root("state", RootKind::State, None),
            root("out", RootKind::Artifacts, None),
            root("workspace", RootKind::Workspace, Some(Access::ReadWrite)),
            root("docs", RootKind::Workspace, None),
            root("data", RootKind::Source, None),
        ]);
        d.binaries = vec![
            modproto::BinaryDecl {
                name: "git".into(),
                description: String::new(),
            },
            modproto::BinaryDecl {
                name: "curl".into(),
                description: String::new(),
            },
        ];
        d
    }

    #[test]
    fn a_capability_naming_nothing_is_granted_nothing() {
        let f = fixture();
        let d = every_kind();
        let sources = BTreeMap::from([("data".to_owned(), f.data.clone())]);
        let binaries = BTreeMap::from([("git".to_owned(), PathBuf::from("/bin/sh"))]);
        let ctx = f.ctx(&sources, &binaries);
        let plan = plan(&d, &Effects::default(), "m", Transport::Native, ctx, true).unwrap();
        assert!(plan.roots.is_empty(), "{:?}", plan.roots);
        assert!(plan.request_roots().is_empty());
        assert!(plan.binaries.is_empty());
        assert!(plan.missing.is_empty(), "nothing named, nothing missing");
        assert!(
            !f.layout.state_dir("m").exists() && !f.layout.artifacts_dir("m").exists(),
            "a root not granted is not even created"
        );
    }

    #[test]
    fn named_roots_are_read_only_unless_written_and_writable() {
        let d = every_kind();
        let e = effects(&["workspace", "data"], &["state", "docs", "data"]);
        let a = authority(&d, &e);
        let access: Vec<(&str, Access)> = a
            .roots
            .iter()
            .map(|r| (r.name.as_str(), r.access))
            .collect();
        assert_eq!(
            access,
            [
                ("state", Access::ReadWrite),
                ("workspace", Access::Read),
                ("docs", Access::Read),
                ("data", Access::Read),
            ],
            "a read of a writable root stays a read; a write to a read-only declaration stays a read"
        );
        assert!(a.undeclared_roots.is_empty());
        assert!(!a.touches_nothing_but_reads());
        assert!(authority(&d, &effects(&["workspace", "out"], &[])).touches_nothing_but_reads());
    }

    #[test]
    fn binaries_only_when_spawned_and_declared() {
        let f = fixture();
        let d = every_kind();
        let e = Effects {
            spawns: vec!["curl".into(), "rm".into()],
            ..Effects::default()
        };
        let a = authority(&d, &e);
        assert_eq!(a.binaries, ["curl"]);
        assert_eq!(a.undeclared_binaries, ["rm"]);
        let none = BTreeMap::new();
        let binaries = BTreeMap::from([
            ("git".to_owned(), PathBuf::from("/bin/sh")),
            ("curl".to_owned(), PathBuf::from("/bin/sh")),
        ]);
        let plan = plan(
            &d,
            &e,
            "m",
            Transport::Native,
            f.ctx(&none, &binaries),
            false,
        )
        .unwrap();
        assert_eq!(
            plan.binaries.keys().collect::<Vec<_>>(),
            ["curl"],
            "git is configured but not spawned by this capability"
        );
        assert!(
            plan.warnings().iter().any(|w| w.contains("\"rm\"")),
            "{:?}",
            plan.warnings()
        );
    }

    /// A configured binary in the workspace or the home, where modules
    /// write, is never granted: a module that replaced it would have every
    /// call granted it run its bytes with that call's grants. One outside
    /// both is.
    #[test]
    fn no_binary_is_granted_where_modules_write() {
        let f = fixture();
        let d = every_kind();
        let e = Effects {
            spawns: vec!["curl".into()],
            ..Effects::default()
        };
        let none = BTreeMap::new();
        let in_workspace = f.workspace.join("curl");
        let in_home = f.layout.state_dir("other").join("curl");
        std::fs::create_dir_all(in_home.parent().unwrap()).unwrap();
        for (place, path) in [
            ("the workspace", &in_workspace),
            ("the modhost home", &in_home),
        ] {
            std::fs::copy("/bin/sh", path).unwrap();
            let binaries = BTreeMap::from([("curl".to_owned(), path.clone())]);
            let ctx = f.ctx(&none, &binaries);
            let plan = plan(&d, &e, "m", Transport::Native, ctx, false).unwrap();
            assert!(plan.binaries.is_empty(), "{place}: {:?}", plan.binaries);
            assert!(
                plan.missing
                    .iter()
                    .any(|m| m.name == "curl" && m.reason.contains(place)),
                "{place}: {:?}",
                plan.missing
            );
        }
        let binaries = BTreeMap::from([("curl".to_owned(), PathBuf::from("/bin/sh"))]);
        let plan = plan(
            &d,
            &e,
            "m",
            Transport::Native,
            f.ctx(&none, &binaries),
            false,
        )
        .unwrap();
        assert_eq!(plan.binaries.keys().collect::<Vec<_>>(), ["curl"]);
    }

    #[test]
    fn a_root_the_module_does_not_declare_is_never_granted_and_reported() {
        let f = fixture();
        let d = every_kind();
        let e = effects(&["ghost", "workspace"], &["ghost"]);
        let a = authority(&d, &e);
        assert_eq!(a.undeclared_roots, ["ghost"], "reported once");
        let none = BTreeMap::new();
        let plan = plan(&d, &e, "m", Transport::Native, f.ctx(&none, &none), false).unwrap();
        assert_eq!(
            plan.roots
                .iter()
                .map(|g| g.name.as_str())
                .collect::<Vec<_>>(),
            ["workspace"]
        );
        let warnings = plan.warnings();
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("undeclared root \"ghost\"") && w.contains("conformance")),
            "{warnings:?}"
        );
    }
}

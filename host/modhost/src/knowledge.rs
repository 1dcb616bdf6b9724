//! Module knowledge: the markdown overlays and skills a descriptor lists,
//! loaded only when their bytes match the declared sha256.
//!
//! Design decisions:
//!
//! - **Digest or nothing.** A document enters an agent's context only when its
//!   bytes hash to what the descriptor declared. The descriptor is what the
//!   operator reviewed and pinned; a file edited beside the binary afterwards
//!   is not the module's word.
//! - **Problems are warnings, not failures.** A missing or altered document is
//!   left out and reported (on `describe`, in `modhost knowledge`, in the
//!   knowledge tool's answer): a silently missing overlay would make an agent
//!   behave differently with no visible reason, but one bad document must not
//!   hide the good ones.
//! - **Provenance travels with the text.** Every loaded document is rendered
//!   under a line naming module, version, document id and digest, so a later
//!   reader of a transcript can tell where an instruction came from.
//! - **Read from what runs.** For a pinned module the folder given here is its
//!   approved snapshot (`InstalledModule::knowledge_dir`, see
//!   `crate::snapshot`), so the documents are the approved bytes even if
//!   `modules/<id>/` is edited later.
//! - Paths are untrusted: a declared path must be clean and relative and must
//!   resolve (after symlinks) inside the module's own folder. A module
//!   installed as a bare executable has no folder of its own and so no
//!   knowledge.

use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use modproto::{Descriptor, KnowledgeDoc};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// The most bytes one document may have; a larger file is left out.
pub(crate) const MAX_DOCUMENT_BYTES: u64 = 256 * 1024;

/// Overlay or skill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DocKind {
    /// Always-relevant instructions.
    Overlay,
    /// Loaded on demand.
    Skill,
}

impl DocKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            DocKind::Overlay => "overlay",
            DocKind::Skill => "skill",
        }
    }
}

/// One verified document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Document {
    pub module: String,
    pub version: String,
    pub kind: DocKind,
    pub id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub title: String,
    /// As declared, relative to the module's folder.
    pub path: String,
    pub sha256: String,
    pub content: String,
}

impl Document {
    /// The attribution line rendered above the document.
    pub fn provenance(&self) -> String {
        format!(
            "[modhost knowledge: module {} {}, {} {:?}, sha256 {}]",
            self.module,
            self.version,
            self.kind.as_str(),
            self.id,
            self.sha256
        )
    }
}

/// What was loaded for one module, and what was left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Loaded {
    pub overlays: Vec<Document>,
    pub skills: Vec<Document>,
    /// One line per declared document that was left out (or skill not found).
    pub warnings: Vec<String>,
}

impl Loaded {
    /// Everything loaded, each document under its provenance line, followed
    /// by the warnings; what `modhost knowledge` and the knowledge tool show.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for doc in self.overlays.iter().chain(&self.skills) {
            if !out.is_empty() {
                out.push('\n');
            }
            let _ = writeln!(out, "{}", doc.provenance());
            out.push_str(&doc.content);
            if !doc.content.ends_with('\n') {
                out.push('\n');
            }
        }
        for w in &self.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
        out
    }
}

/// Which documents to load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection<'a> {
    /// Every overlay and every skill.
    All,
    /// One skill by id (overlays are left out: the caller asked for the skill).
    Skill(&'a str),
}

/// Load `descriptor`'s knowledge from `module_dir` (the module's own folder;
/// `None` for a bare executable).
pub fn load(
    descriptor: &Descriptor,
    module_dir: Option<&Path>,
    selection: Selection<'_>,
) -> Loaded {
    let mut loaded = Loaded::default();
    let declared = &descriptor.knowledge;
    let wanted_skills: Vec<&KnowledgeDoc> = match selection {
        Selection::All => declared.skills.iter().collect(),
        Selection::Skill(id) => {
            let found: Vec<&KnowledgeDoc> = declared.skills.iter().filter(|s| s.id == id).collect();
            if found.is_empty() {
                let known: Vec<&str> = declared.skills.iter().map(|s| s.id.as_str()).collect();
                loaded.warnings.push(format!(
                    "module {} declares no skill {id:?} (it declares: {})",
                    descriptor.id,
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ));
            }
            found
        }
    };
    let overlays: &[KnowledgeDoc] = if matches!(selection, Selection::All) {
        &declared.overlays
    } else {
        &[]
    };
    for (kind, doc) in overlays
        .iter()
        .map(|d| (DocKind::Overlay, d))
        .chain(wanted_skills.into_iter().map(|d| (DocKind::Skill, d)))
    {
        match load_one(descriptor, module_dir, kind, doc) {
            Ok(document) => match kind {
                DocKind::Overlay => loaded.overlays.push(document),
                DocKind::Skill => loaded.skills.push(document),
            },
            Err(problem) => loaded.warnings.push(format!(
                "{} {:?} ({}) left out: {problem}",
                kind.as_str(),
                doc.id,
                doc.path
            )),
        }
    }
    loaded
}

/// The warnings alone, for `describe`: every declared document checked.
pub fn check(descriptor: &Descriptor, module_dir: Option<&Path>) -> Vec<String> {
    load(descriptor, module_dir, Selection::All).warnings
}

fn load_one(
    descriptor: &Descriptor,
    module_dir: Option<&Path>,
    kind: DocKind,
    doc: &KnowledgeDoc,
) -> Result<Document, String> {
    let Some(dir) = module_dir else {
        return Err("the module is a bare executable with no folder of its own".into());
    };
    let path = resolve_inside(dir, &doc.path)?;
    let file = std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_DOCUMENT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_DOCUMENT_BYTES {
        return Err(format!(
            "{}: larger than {MAX_DOCUMENT_BYTES} bytes",
            path.display()
        ));
    }
    let actual = hex(&Sha256::digest(&bytes));
    let expected = doc.sha256.trim().to_ascii_lowercase();
    if actual != expected {
        return Err(format!(
            "{}: sha256 is {actual}, the descriptor declares {}; reinstall the module or update its descriptor",
            path.display(),
            doc.sha256
        ));
    }
    let content = String::from_utf8(bytes).map_err(|_| format!("{}: not UTF-8", path.display()))?;
    Ok(Document {
        module: descriptor.id.clone(),
        version: descriptor.version.clone(),
        kind,
        id: doc.id.clone(),
        title: doc.title.clone(),
        path: doc.path.clone(),
        sha256: actual,
        content,
    })
}

/// `relative` under `dir`, refusing anything that leaves it, symlinks included.
fn resolve_inside(dir: &Path, relative: &str) -> Result<PathBuf, String> {
    if !modproto::invoke::is_clean_relative_path(relative) {
        return Err("the path is not a clean relative path".into());
    }
    let base = dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let joined = base.join(relative);
    let real = joined
        .canonicalize()
        .map_err(|e| format!("{}: {e}", joined.display()))?;
    if !real.starts_with(&base) {
        return Err(format!(
            "{} resolves outside the module's folder",
            joined.display()
        ));
    }
    Ok(real)
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sha(text: &str) -> String {
        hex(&Sha256::digest(text.as_bytes()))
    }

    fn setup() -> (tempfile::TempDir, Descriptor) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("knowledge")).unwrap();
        std::fs::write(
            dir.path().join("knowledge/intro.md"),
            "# Intro\nUse search first.\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("knowledge/guide.md"),
            "edited after pinning",
        )
        .unwrap();
        std::fs::write(dir.path().join("knowledge/ok.md"), "skill text").unwrap();
        let d: Descriptor = serde_json::from_value(json!({
            "id": "files", "version": "0.2.0", "capabilities": [],
            "knowledge": {
                "overlays": [{"id": "intro", "path": "knowledge/intro.md", "sha256": sha("# Intro\nUse search first.\n")}],
                "skills": [
                    {"id": "guide", "path": "knowledge/guide.md", "sha256": sha("original")},
                    {"id": "ok", "path": "knowledge/ok.md", "sha256": sha("skill text")},
                    {"id": "gone", "path": "knowledge/gone.md", "sha256": sha("x")},
                    {"id": "escape", "path": "../outside.md", "sha256": sha("x")}
                ]
            }
        }))
        .unwrap();
        (dir, d)
    }

    #[test]
    fn loads_only_documents_whose_digest_matches_and_warns_about_the_rest() {
        let (dir, d) = setup();
        let loaded = load(&d, Some(dir.path()), Selection::All);
        assert_eq!(loaded.overlays.len(), 1);
        assert_eq!(
            loaded
                .skills
                .iter()
                .map(|s| s.id.as_str())
                .collect::<Vec<_>>(),
            ["ok"]
        );
        assert_eq!(loaded.warnings.len(), 3, "{:?}", loaded.warnings);
        assert!(
            loaded.warnings[0].contains("\"guide\"") && loaded.warnings[0].contains("sha256 is")
        );
        assert!(loaded.warnings[1].contains("\"gone\""));
        assert!(loaded.warnings[2].contains("not a clean relative path"));
        assert_eq!(check(&d, Some(dir.path())), loaded.warnings);
    }

    #[test]
    fn rendered_documents_carry_provenance() {
        let (dir, d) = setup();
        let text = load(&d, Some(dir.path()), Selection::All).render();
        let first = text.lines().next().unwrap();
        assert_eq!(
            first,
            format!(
                "[modhost knowledge: module files 0.2.0, overlay \"intro\", sha256 {}]",
                sha("# Intro\nUse search first.\n")
            )
        );
        assert!(text.contains("Use search first."));
        assert!(!text.contains("edited after pinning"));
    }

    #[test]
    fn one_skill_by_id_and_unknown_skill_warns() {
        let (dir, d) = setup();
        let loaded = load(&d, Some(dir.path()), Selection::Skill("ok"));
        assert!(loaded.overlays.is_empty());
        assert_eq!(loaded.skills.len(), 1);
        let loaded = load(&d, Some(dir.path()), Selection::Skill("nope"));
        assert!(loaded.skills.is_empty());
        assert!(loaded.warnings[0].contains("declares no skill \"nope\""));
    }

    #[test]
    fn a_symlink_out_of_the_folder_is_refused() {
        let (dir, mut d) = setup();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.md"), "secret").unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("secret.md"),
            dir.path().join("knowledge/link.md"),
        )
        .unwrap();
        d.knowledge.skills = vec![KnowledgeDoc {
            id: "link".into(),
            title: String::new(),
            path: "knowledge/link.md".into(),
            sha256: sha("secret"),
        }];
        let loaded = load(&d, Some(dir.path()), Selection::All);
        assert!(loaded.skills.is_empty());
        assert!(
            loaded
                .warnings
                .iter()
                .any(|w| w.contains("outside the module's folder"))
        );
    }

    #[test]
    fn a_bare_module_has_no_knowledge() {
        let (_dir, d) = setup();
        let loaded = load(&d, None, Selection::All);
        assert!(loaded.overlays.is_empty() && loaded.skills.is_empty());
        assert!(loaded.warnings[0].contains("bare executable"));
    }
}

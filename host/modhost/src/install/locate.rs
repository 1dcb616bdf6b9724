//! Finding the module inside an unpacked archive.
//!
//! An archive holds one module: a single executable or `.wasm` component,
//! either at the top or inside one top-level folder (the way release tarballs
//! are usually packed: `tool-1.2/tool`, `tool-1.2/knowledge/...`). Anything
//! else is ambiguous and refused with the candidates named, rather than
//! guessed: guessing which of two executables to run is how the wrong one runs.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Where the module sits in an unpacked tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Located {
    /// The folder that becomes `modules/<id>/` (the tree's root, or its one
    /// top-level folder).
    pub folder: PathBuf,
    /// The executable or component, inside `folder`.
    pub program: PathBuf,
}

/// Why no single module could be found.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LocateError {
    #[error("could not read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{folder}: no executable file or .wasm component at the top of the archive or in its one top-level folder"
    )]
    NoModule { folder: PathBuf },
    #[error(
        "{folder}: more than one candidate module ({}); pass --id to choose the one named after it",
        candidates.join(", ")
    )]
    Ambiguous {
        folder: PathBuf,
        candidates: Vec<String>,
    },
}

/// Find the module in the unpacked tree at `root`. When several candidates
/// exist, the one whose name (without `.wasm`) is `preferred` wins.
pub(crate) fn locate_module(root: &Path, preferred: Option<&str>) -> Result<Located, LocateError> {
    let entries = read_entries(root)?;
    // One top-level folder and nothing else: the module lives in it.
    let folder = match entries.as_slice() {
        [only] if only.is_dir => only.path.clone(),
        _ => root.to_path_buf(),
    };
    let entries = if folder == root {
        entries
    } else {
        read_entries(&folder)?
    };
    let candidates: Vec<&Entry> = entries.iter().filter(|e| e.is_candidate()).collect();
    let program = match candidates.as_slice() {
        [] => {
            return Err(LocateError::NoModule { folder });
        }
        [one] => one.path.clone(),
        many => match preferred.and_then(|id| preferred_entry(many, id)) {
            Some(chosen) => chosen.path.clone(),
            None => {
                let mut candidates: Vec<String> = many.iter().map(|e| e.name()).collect();
                candidates.sort();
                return Err(LocateError::Ambiguous { folder, candidates });
            }
        },
    };
    Ok(Located { folder, program })
}

/// The entry of module `id` among `candidates`, in discovery's order
/// (`<id>` before `<id>.wasm`, whatever order the folder lists them in):
/// the entry install checks is the one that runs once installed.
fn preferred_entry<'a>(candidates: &[&'a Entry], id: &str) -> Option<&'a Entry> {
    crate::discovery::entry_names(id)
        .into_iter()
        .find_map(|entry| candidates.iter().copied().find(|e| e.name() == entry))
}

#[derive(Debug)]
struct Entry {
    path: PathBuf,
    is_dir: bool,
    is_file: bool,
    executable: bool,
}

impl Entry {
    fn name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// A regular executable file or a `.wasm` file; dotfiles never count.
    fn is_candidate(&self) -> bool {
        let name = self.name();
        self.is_file && !name.starts_with('.') && (self.executable || name.ends_with(".wasm"))
    }
}

fn read_entries(dir: &Path) -> Result<Vec<Entry>, LocateError> {
    let read_error = |source| LocateError::Read {
        path: dir.to_path_buf(),
        source,
    };
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_error)? {
        let entry = entry.map_err(read_error)?;
        // symlink_metadata: a link is neither the folder nor the module.
        let meta = entry.path().symlink_metadata().map_err(read_error)?;
        entries.push(Entry {
            path: entry.path(),
            is_dir: meta.is_dir(),
            is_file: meta.is_file(),
            executable: meta.permissions().mode() & 0o111 != 0,
        });
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &Path, executable: bool) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "x").unwrap();
        let mode = if executable { 0o755 } else { 0o644 };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn executable_at_the_top() {
        let dir = tempfile::tempdir().unwrap();
        file(&dir.path().join("tool"), true);
        file(&dir.path().join("README.md"), false);
        let found = locate_module(dir.path(), None).unwrap();
        assert_eq!(found.folder, dir.path());
        assert_eq!(found.program, dir.path().join("tool"));
    }

    #[test]
    fn component_in_one_top_level_folder() {
        let dir = tempfile::tempdir().unwrap();
        file(&dir.path().join("tool-1.0/tool.wasm"), false);
        file(&dir.path().join("tool-1.0/knowledge/intro.md"), false);
        let found = locate_module(dir.path(), None).unwrap();
        assert_eq!(found.folder, dir.path().join("tool-1.0"));
        assert_eq!(found.program, dir.path().join("tool-1.0/tool.wasm"));
    }

    #[test]
    fn two_candidates_need_a_preference() {
        let dir = tempfile::tempdir().unwrap();
        file(&dir.path().join("a"), true);
        file(&dir.path().join("b"), true);
        let err = locate_module(dir.path(), None).unwrap_err();
        assert!(err.to_string().contains("a, b"), "{err}");
        assert_eq!(
            locate_module(dir.path(), Some("b")).unwrap().program,
            dir.path().join("b")
        );
    }

    /// The attack: a folder with the component `m.wasm` and a native `m`.
    /// Install must check the entry discovery will run (the native one),
    /// not describe the component while the native file runs afterwards,
    /// whatever order the directory lists them in.
    #[test]
    fn the_entry_checked_is_the_one_discovery_runs() {
        let dir = tempfile::tempdir().unwrap();
        file(&dir.path().join("m"), true);
        file(&dir.path().join("m.wasm"), false);
        let entry = |name: &str| Entry {
            path: dir.path().join(name),
            is_dir: false,
            is_file: true,
            executable: name == "m",
        };
        let (native, component) = (entry("m"), entry("m.wasm"));
        for listed in [[&component, &native], [&native, &component]] {
            let chosen = preferred_entry(&listed, "m").unwrap();
            assert_eq!(chosen.path, native.path, "listed {listed:?}");
        }
        assert_eq!(
            locate_module(dir.path(), Some("m")).unwrap().program,
            dir.path().join("m")
        );
    }

    #[test]
    fn nothing_runnable_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        file(&dir.path().join("notes.txt"), false);
        assert!(matches!(
            locate_module(dir.path(), None),
            Err(LocateError::NoModule { .. })
        ));
    }
}

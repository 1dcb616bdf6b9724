//! [`Root`]: one granted root, opened as a capability handle.
//!
//! Design decisions:
//!
//! - **Every path is relative to the root and checked twice.** First
//!   lexically, the same on every target: an absolute path or any `..`
//!   component is refused as `path_escape` before the filesystem is touched
//!   (even `a/../b`, so both targets agree on what is legal). Then by the
//!   platform: natively through a cap-std [`cap_std::fs::Dir`], whose
//!   resolution cannot leave the directory (a symlink out is refused, also
//!   as `path_escape`); inside a wasm component through `std::fs` on the
//!   preopened guest path, which the runtime already confines the same way.
//! - **Access is enforced here too.** A root granted `read` refuses writes
//!   with `denied` before any syscall, so a module behaves the same whether
//!   or not the host also confines the process.
//! - **A root may be a single file** (an operator can grant a source root that
//!   is one log file). Such a root answers only the path `.` (or `""`).
//! - Errors carry the root name and the relative path, ripgrep style.

use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};

use modproto::{Access, RootKind};

use crate::ModError;

/// A granted root, opened for this call.
#[derive(Debug)]
pub struct Root {
    name: String,
    path: PathBuf,
    kind: RootKind,
    access: Access,
    handle: Handle,
}

/// What a path inside a root is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    /// A socket, device or fifo.
    Other,
}

/// The metadata of one path inside a root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub kind: EntryKind,
    /// Size in bytes (of the link itself for a symlink).
    pub len: u64,
}

/// One entry of [`Root::read_dir`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The file name (lossy UTF-8).
    pub name: String,
    /// Not following symlinks.
    pub kind: EntryKind,
}

impl Root {
    /// Open the root at `path`, as the module sees it.
    pub fn open(name: &str, path: &str, kind: RootKind, access: Access) -> io::Result<Root> {
        let handle = Handle::open(Path::new(path))?;
        Ok(Root {
            name: name.to_owned(),
            path: PathBuf::from(path),
            kind,
            access,
            handle,
        })
    }

    /// The declared name (`workspace`, `state`, ...).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The path the root was opened from, as the module sees it: a host path
    /// natively, `/roots/<name>` inside a component. Only for code that needs
    /// std paths (a directory walker); open files through the root instead.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn kind(&self) -> RootKind {
        self.kind
    }

    pub fn access(&self) -> Access {
        self.access
    }

    /// Whether the root is a single file rather than a directory.
    pub fn is_file(&self) -> bool {
        self.handle.is_file()
    }

    /// The cap-std directory handle, for operations this type does not wrap.
    /// `None` for a file root. Native only.
    #[cfg(not(target_os = "wasi"))]
    pub fn dir(&self) -> Option<&cap_std::fs::Dir> {
        match &self.handle {
            Handle::Dir(dir) => Some(dir),
            Handle::File(_) => None,
        }
    }

    /// Open a file for reading.
    pub fn open_file(&self, path: impl AsRef<Path>) -> Result<std::fs::File, ModError> {
        let rel = self.check(path.as_ref())?;
        self.handle
            .open_file(&rel)
            .map_err(|e| self.io_error(&rel, &e))
    }

    /// Open a file for reading only if it is a regular file, refused with
    /// `invalid_input` when it is anything else. For a caller that already
    /// knows from a directory listing that the entry is a regular file
    /// (not a link): natively it is opened without blocking (a fifo swapped
    /// in since the listing cannot hang the call) and checked with one
    /// `fstat` on the descriptor, where [`Root::metadata`] first would cost
    /// three system calls (the parent folder is opened beneath the root to
    /// look in it). Inside a component, where the runtime opens without
    /// that flag, the path is looked at first and then opened.
    ///
    /// An entry listed as a link is better looked at with [`Root::metadata`]
    /// first: opening what a link leads to (a fifo, a device) is already
    /// an effect on it.
    pub fn open_regular_file(&self, path: impl AsRef<Path>) -> Result<std::fs::File, ModError> {
        let rel = self.check(path.as_ref())?;
        match self.handle.open_regular(&rel) {
            Ok(Some(file)) => Ok(file),
            Ok(None) => Err(ModError::invalid_input(format!(
                "{}: not a regular file",
                self.display(&rel)
            ))),
            Err(e) => Err(self.io_error(&rel, &e)),
        }
    }

    /// Read a whole file.
    pub fn read(&self, path: impl AsRef<Path>) -> Result<Vec<u8>, ModError> {
        let rel = self.check(path.as_ref())?;
        let mut bytes = Vec::new();
        self.handle
            .open_file(&rel)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(|e| self.io_error(&rel, &e))?;
        Ok(bytes)
    }

    /// Read a whole UTF-8 file.
    pub fn read_to_string(&self, path: impl AsRef<Path>) -> Result<String, ModError> {
        let rel = self.check(path.as_ref())?;
        let bytes = self.read(&rel)?;
        String::from_utf8(bytes)
            .map_err(|_| ModError::invalid_input(format!("{}: not UTF-8 text", self.display(&rel))))
    }

    /// Metadata, following a final symlink (which must stay inside the root).
    pub fn metadata(&self, path: impl AsRef<Path>) -> Result<Stat, ModError> {
        let rel = self.check(path.as_ref())?;
        self.handle
            .metadata(&rel, true)
            .map_err(|e| self.io_error(&rel, &e))
    }

    /// Metadata of the path itself, not following a final symlink.
    pub fn symlink_metadata(&self, path: impl AsRef<Path>) -> Result<Stat, ModError> {
        let rel = self.check(path.as_ref())?;
        self.handle
            .metadata(&rel, false)
            .map_err(|e| self.io_error(&rel, &e))
    }

    /// The entries of a directory, sorted by name.
    pub fn read_dir(&self, path: impl AsRef<Path>) -> Result<Vec<DirEntry>, ModError> {
        let rel = self.check(path.as_ref())?;
        let mut entries = self
            .handle
            .read_dir(&rel)
            .map_err(|e| self.io_error(&rel, &e))?;
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    /// Create or replace a file with `bytes`, creating parent directories.
    /// Refused with `denied` on a root granted `read`.
    pub fn write(&self, path: impl AsRef<Path>, bytes: &[u8]) -> Result<(), ModError> {
        let rel = self.check(path.as_ref())?;
        self.check_writable(&rel)?;
        if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.handle
                .create_dir_all(parent)
                .map_err(|e| self.io_error(parent, &e))?;
        }
        self.handle
            .create_file(&rel)
            .and_then(|mut f| f.write_all(bytes).and_then(|()| f.flush()))
            .map_err(|e| self.io_error(&rel, &e))
    }

    /// Create a directory and its parents. Refused on a root granted `read`.
    pub fn create_dir_all(&self, path: impl AsRef<Path>) -> Result<(), ModError> {
        let rel = self.check(path.as_ref())?;
        self.check_writable(&rel)?;
        self.handle
            .create_dir_all(&rel)
            .map_err(|e| self.io_error(&rel, &e))
    }

    /// Remove a file. Refused on a root granted `read`.
    pub fn remove_file(&self, path: impl AsRef<Path>) -> Result<(), ModError> {
        let rel = self.check(path.as_ref())?;
        self.check_writable(&rel)?;
        self.handle
            .remove_file(&rel)
            .map_err(|e| self.io_error(&rel, &e))
    }

    /// The lexical check shared by both targets; returns the path with `.`
    /// components removed (`.` itself for the root).
    fn check(&self, path: &Path) -> Result<PathBuf, ModError> {
        clean_relative(path)
            .map_err(|why| ModError::path_escape(format!("{}: {why}", self.display(path))))
    }

    fn check_writable(&self, rel: &Path) -> Result<(), ModError> {
        if self.access.is_write() {
            return Ok(());
        }
        Err(ModError::denied(format!(
            "{}: root `{}` is granted read-only for this call",
            self.display(rel),
            self.name
        ))
        .with_remedy(format!(
            "write only to roots granted read-write; `{}` may only be read",
            self.name
        )))
    }

    fn io_error(&self, rel: &Path, err: &io::Error) -> ModError {
        ModError::io(self.display(rel), err)
    }

    /// `workspace:src/main.rs`, so every error names root and path.
    fn display(&self, rel: &Path) -> String {
        format!("{}:{}", self.name, rel.display())
    }
}

/// Normalize a path that must stay beneath a root: no root or prefix, no
/// `..`, no NUL; `.` components dropped; empty means the root itself.
pub fn clean_relative(path: &Path) -> Result<PathBuf, &'static str> {
    if path.as_os_str().as_encoded_bytes().contains(&0) {
        return Err("a path may not contain NUL");
    }
    let mut clean = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => clean.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err("`..` would leave the root"),
            Component::RootDir | Component::Prefix(_) => {
                return Err("an absolute path would leave the root; give a path relative to it");
            }
        }
    }
    if clean.as_os_str().is_empty() {
        clean.push(".");
    }
    Ok(clean)
}

fn is_root_itself(rel: &Path) -> bool {
    rel == Path::new(".")
}

fn not_a_directory() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        "this root is a single file; only `.` names it",
    )
}

#[cfg(not(target_os = "wasi"))]
mod platform {
    //! Native: cap-std handles. Resolution beneath the directory is the
    //! kernel's (`openat2(RESOLVE_BENEATH)`) or cap-std's own, never ours.
    use super::*;
    use cap_std::ambient_authority;
    use cap_std::fs::{Dir, File, OpenOptions};

    #[derive(Debug)]
    pub(super) enum Handle {
        Dir(Dir),
        File(File),
    }

    impl Handle {
        pub(super) fn open(path: &Path) -> io::Result<Handle> {
            match Dir::open_ambient_dir(path, ambient_authority()) {
                Ok(dir) => Ok(Handle::Dir(dir)),
                Err(dir_err) => match std::fs::metadata(path) {
                    Ok(meta) if meta.is_file() => {
                        File::open_ambient(path, ambient_authority()).map(Handle::File)
                    }
                    _ => Err(dir_err),
                },
            }
        }

        pub(super) fn is_file(&self) -> bool {
            matches!(self, Handle::File(_))
        }

        /// The file at `rel` if it is a regular file: opened without
        /// blocking, checked on the descriptor.
        pub(super) fn open_regular(&self, rel: &Path) -> io::Result<Option<std::fs::File>> {
            use cap_std::fs::OpenOptionsExt;
            let file = match self {
                Handle::Dir(dir) => dir
                    .open_with(
                        rel,
                        OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK),
                    )
                    .map(File::into_std)?,
                Handle::File(_) => self.open_file(rel)?,
            };
            Ok(file.metadata()?.is_file().then_some(file))
        }

        pub(super) fn open_file(&self, rel: &Path) -> io::Result<std::fs::File> {
            match self {
                Handle::Dir(dir) => dir.open(rel).map(File::into_std),
                Handle::File(file) if is_root_itself(rel) => {
                    let file = file.try_clone()?.into_std();
                    // A cloned descriptor shares the offset; start from the top.
                    std::io::Seek::rewind(&mut &file)?;
                    Ok(file)
                }
                Handle::File(_) => Err(not_a_directory()),
            }
        }

        pub(super) fn create_file(&self, rel: &Path) -> io::Result<std::fs::File> {
            match self {
                Handle::Dir(dir) => {
                    let mut options = OpenOptions::new();
                    options.write(true).create(true).truncate(true);
                    dir.open_with(rel, &options).map(File::into_std)
                }
                Handle::File(_) => Err(not_a_directory()),
            }
        }

        pub(super) fn metadata(&self, rel: &Path, follow: bool) -> io::Result<Stat> {
            let meta = match self {
                Handle::Dir(dir) if follow => dir.metadata(rel)?,
                Handle::Dir(dir) => dir.symlink_metadata(rel)?,
                Handle::File(file) if is_root_itself(rel) => file.metadata()?,
                Handle::File(_) => return Err(not_a_directory()),
            };
            Ok(Stat {
                kind: kind_of(meta.file_type()),
                len: meta.len(),
            })
        }

        pub(super) fn read_dir(&self, rel: &Path) -> io::Result<Vec<DirEntry>> {
            let Handle::Dir(dir) = self else {
                return Err(not_a_directory());
            };
            let mut entries = Vec::new();
            for entry in dir.read_dir(rel)? {
                let entry = entry?;
                entries.push(DirEntry {
                    name: entry.file_name().to_string_lossy().into_owned(),
                    kind: kind_of(entry.file_type()?),
                });
            }
            Ok(entries)
        }

        pub(super) fn create_dir_all(&self, rel: &Path) -> io::Result<()> {
            let Handle::Dir(dir) = self else {
                return Err(not_a_directory());
            };
            dir.create_dir_all(rel)
        }

        pub(super) fn remove_file(&self, rel: &Path) -> io::Result<()> {
            let Handle::Dir(dir) = self else {
                return Err(not_a_directory());
            };
            dir.remove_file(rel)
        }
    }

    fn kind_of(file_type: cap_std::fs::FileType) -> EntryKind {
        if file_type.is_symlink() {
            EntryKind::Symlink
        } else if file_type.is_dir() {
            EntryKind::Dir
        } else if file_type.is_file() {
            EntryKind::File
        } else {
            EntryKind::Other
        }
    }
}

#[cfg(target_os = "wasi")]
mod platform {
    //! Inside a component: the root is a preopened guest path and the
    //! runtime resolves every path beneath it (symlinks included), so plain
    //! std::fs on `base.join(rel)` is confined once the lexical check passed.
    use super::*;

    #[derive(Debug)]
    pub(super) enum Handle {
        Dir(PathBuf),
        File(PathBuf),
    }

    impl Handle {
        pub(super) fn open(path: &Path) -> io::Result<Handle> {
            let meta = std::fs::metadata(path)?;
            if meta.is_dir() {
                Ok(Handle::Dir(path.to_owned()))
            } else if meta.is_file() {
                Ok(Handle::File(path.to_owned()))
            } else {
                Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "not a directory or regular file",
                ))
            }
        }

        pub(super) fn is_file(&self) -> bool {
            matches!(self, Handle::File(_))
        }

        fn resolve(&self, rel: &Path) -> io::Result<PathBuf> {
            match self {
                Handle::Dir(base) => Ok(base.join(rel)),
                Handle::File(path) if is_root_itself(rel) => Ok(path.clone()),
                Handle::File(_) => Err(not_a_directory()),
            }
        }

        pub(super) fn open_file(&self, rel: &Path) -> io::Result<std::fs::File> {
            std::fs::File::open(self.resolve(rel)?)
        }

        /// The file at `rel` if it is a regular file. The runtime opens
        /// without `O_NONBLOCK` and follows links, so what the path leads to
        /// is looked at before it is opened (a fifo there would hold the
        /// open); a second look on the open file would come after any such
        /// wait, so none is taken (each costs a call into the runtime).
        pub(super) fn open_regular(&self, rel: &Path) -> io::Result<Option<std::fs::File>> {
            let path = self.resolve(rel)?;
            if !std::fs::metadata(&path)?.is_file() {
                return Ok(None);
            }
            std::fs::File::open(path).map(Some)
        }

        pub(super) fn create_file(&self, rel: &Path) -> io::Result<std::fs::File> {
            let Handle::Dir(base) = self else {
                return Err(not_a_directory());
            };
            std::fs::File::create(base.join(rel))
        }

        pub(super) fn metadata(&self, rel: &Path, follow: bool) -> io::Result<Stat> {
            let path = self.resolve(rel)?;
            let meta = if follow {
                std::fs::metadata(path)?
            } else {
                std::fs::symlink_metadata(path)?
            };
            Ok(Stat {
                kind: kind_of(meta.file_type()),
                len: meta.len(),
            })
        }

        pub(super) fn read_dir(&self, rel: &Path) -> io::Result<Vec<DirEntry>> {
            let Handle::Dir(base) = self else {
                return Err(not_a_directory());
            };
            let mut entries = Vec::new();
            for entry in std::fs::read_dir(base.join(rel))? {
                let entry = entry?;
                entries.push(DirEntry {
                    name: entry.file_name().to_string_lossy().into_owned(),
                    kind: kind_of(entry.file_type()?),
                });
            }
            Ok(entries)
        }

        pub(super) fn create_dir_all(&self, rel: &Path) -> io::Result<()> {
            let Handle::Dir(base) = self else {
                return Err(not_a_directory());
            };
            std::fs::create_dir_all(base.join(rel))
        }

        pub(super) fn remove_file(&self, rel: &Path) -> io::Result<()> {
            let Handle::Dir(base) = self else {
                return Err(not_a_directory());
            };
            std::fs::remove_file(base.join(rel))
        }
    }

    fn kind_of(file_type: std::fs::FileType) -> EntryKind {
        if file_type.is_symlink() {
            EntryKind::Symlink
        } else if file_type.is_dir() {
            EntryKind::Dir
        } else if file_type.is_file() {
            EntryKind::File
        } else {
            EntryKind::Other
        }
    }
}

use platform::Handle;

#[cfg(test)]
mod tests {
    use super::*;
    use modproto::ModuleErrorKind;

    fn workspace(access: Access) -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), "fn main() {}\n").unwrap();
        let root = Root::open(
            "workspace",
            dir.path().to_str().unwrap(),
            RootKind::Workspace,
            access,
        )
        .unwrap();
        (dir, root)
    }

    #[test]
    fn reads_inside_the_root() {
        let (_dir, root) = workspace(Access::Read);
        assert_eq!(root.read_to_string("src/lib.rs").unwrap(), "fn main() {}\n");
        assert_eq!(
            root.read_to_string("./src/./lib.rs").unwrap(),
            "fn main() {}\n"
        );
        assert_eq!(root.metadata("").unwrap().kind, EntryKind::Dir);
        let names: Vec<_> = root
            .read_dir(".")
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["src"]);
    }

    #[test]
    fn parent_and_absolute_paths_are_refused_before_any_read() {
        let (dir, root) = workspace(Access::Read);
        let outside = dir.path().parent().unwrap().join("secret.txt");
        for path in ["../secret.txt", "src/../../secret.txt", "src/../src/lib.rs"] {
            let err = root.read(path).unwrap_err();
            assert_eq!(err.kind(), &ModuleErrorKind::PathEscape, "{path}: {err}");
            assert!(err.message().contains("workspace:"), "{err}");
        }
        let err = root.read(&outside).unwrap_err();
        assert_eq!(err.kind(), &ModuleErrorKind::PathEscape, "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_out_of_the_root_is_refused() {
        let (dir, root) = workspace(Access::Read);
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "secret").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), dir.path().join("leak"))
            .unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("leakdir")).unwrap();
        std::os::unix::fs::symlink("src/lib.rs", dir.path().join("inside")).unwrap();

        for path in ["leak", "leakdir/secret.txt"] {
            let err = root.read(path).unwrap_err();
            assert_eq!(err.kind(), &ModuleErrorKind::PathEscape, "{path}: {err}");
        }
        assert_eq!(
            root.symlink_metadata("leak").unwrap().kind,
            EntryKind::Symlink
        );
        assert_eq!(root.read_to_string("inside").unwrap(), "fn main() {}\n");
    }

    #[cfg(unix)]
    #[test]
    fn only_a_regular_file_inside_the_root_opens_as_one_and_a_fifo_never_blocks() {
        let (dir, root) = workspace(Access::Read);
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "secret").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), dir.path().join("leak"))
            .unwrap();
        std::os::unix::fs::symlink("src/lib.rs", dir.path().join("inside")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(dir.path().join("pipe"))
            .status()
            .unwrap();
        assert!(made.success());

        let mut text = String::new();
        root.open_regular_file("inside")
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "fn main() {}\n");
        assert_eq!(
            root.open_regular_file("leak").unwrap_err().kind(),
            &ModuleErrorKind::PathEscape
        );
        // No writer ever opens the fifo: a blocking open would never return.
        for path in ["pipe", "src"] {
            let err = root.open_regular_file(path).unwrap_err();
            assert_eq!(err.kind(), &ModuleErrorKind::InvalidInput, "{path}: {err}");
            assert!(err.message().contains("not a regular file"), "{err}");
        }
    }

    #[test]
    fn writes_through_a_read_grant_are_denied() {
        let (dir, root) = workspace(Access::Read);
        let err = root.write("new.txt", b"x").unwrap_err();
        assert_eq!(err.kind(), &ModuleErrorKind::Denied, "{err}");
        assert!(!dir.path().join("new.txt").exists());
        assert_eq!(
            root.remove_file("src/lib.rs").unwrap_err().kind(),
            &ModuleErrorKind::Denied
        );
        assert!(dir.path().join("src/lib.rs").exists());
    }

    #[test]
    fn writes_through_a_write_grant_create_parents() {
        let (dir, root) = workspace(Access::ReadWrite);
        root.write("out/deep/report.txt", b"done").unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("out/deep/report.txt")).unwrap(),
            b"done"
        );
        assert_eq!(
            root.write("../x", b"x").unwrap_err().kind(),
            &ModuleErrorKind::PathEscape
        );
    }

    #[test]
    fn a_file_root_answers_only_dot() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("log.txt");
        std::fs::write(&file, "line\n").unwrap();
        let root = Root::open(
            "log",
            file.to_str().unwrap(),
            RootKind::Source,
            Access::Read,
        )
        .unwrap();
        assert!(root.is_file());
        assert_eq!(root.read_to_string(".").unwrap(), "line\n");
        assert_eq!(root.read_to_string("").unwrap(), "line\n");
        assert_eq!(
            root.read("other").unwrap_err().kind(),
            &ModuleErrorKind::NotFound
        );
    }
}

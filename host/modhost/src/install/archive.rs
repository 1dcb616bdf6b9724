//! Unpacking a `.tar.gz` or `.zip` module archive into a staging folder.
//!
//! The archive is untrusted input. Design decisions:
//!
//! - **Paths are checked before anything is written.** An entry name that is
//!   absolute, contains `..`, or is empty is refused, as is any entry whose
//!   parent folder inside the staging tree is a symlink (a link planted by an
//!   earlier entry must not redirect a later write).
//! - **Links stay inside.** A symlink must be relative and resolve beneath
//!   the staging root; a hard link must name a file the archive already
//!   unpacked, and is materialized as a copy so no inode is shared. After
//!   unpacking, every symlink is resolved once more against the real tree
//!   (defence in depth: lexical checks alone miss links through links).
//! - **Caps count real bytes.** Headers can lie about sizes, so the cap is
//!   applied to the bytes actually decompressed, with the file count capped
//!   too: a small archive cannot fill the disk or the inode table.
//! - **Only files, folders and links.** Devices, fifos and the like are
//!   refused; permissions reduce to "executable or not" (`0755`/`0644`), so
//!   nothing arrives setuid or world-writable.
//! - **All or nothing.** The staging folder is created here and removed
//!   entirely on any failure.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

/// Bounds on what one archive may unpack to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ArchiveLimits {
    /// Total bytes of file contents, after decompression.
    pub max_total_bytes: u64,
    /// Entries of any kind (files, folders, links).
    pub max_entries: usize,
}

impl Default for ArchiveLimits {
    fn default() -> Self {
        ArchiveLimits {
            max_total_bytes: 256 * 1024 * 1024,
            max_entries: 10_000,
        }
    }
}

/// The archive formats `install` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArchiveFormat {
    TarGz,
    Zip,
}

impl ArchiveFormat {
    /// The format a file name announces (`.tar.gz`, `.tgz`, `.zip`), if any.
    pub(crate) fn of_path(path: &Path) -> Option<ArchiveFormat> {
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
            Some(ArchiveFormat::TarGz)
        } else if name.ends_with(".zip") {
            Some(ArchiveFormat::Zip)
        } else {
            None
        }
    }
}

/// Why an archive was refused. Every variant names the archive.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ArchiveError {
    #[error("{archive}: {source}")]
    Io {
        archive: PathBuf,
        source: std::io::Error,
    },
    #[error("{archive}: not a readable {format} archive: {message}")]
    Corrupt {
        archive: PathBuf,
        format: &'static str,
        message: String,
    },
    #[error("{archive}: entry {entry:?} is refused: {reason}")]
    UnsafeEntry {
        archive: PathBuf,
        entry: String,
        reason: String,
    },
    #[error("{archive}: unpacks to more than {limit} bytes")]
    TooBig { archive: PathBuf, limit: u64 },
    #[error("{archive}: has more than {limit} entries")]
    TooManyEntries { archive: PathBuf, limit: usize },
    #[error("staging folder {path} already exists")]
    StagingExists { path: PathBuf },
}

/// Unpack `archive` (of `format`) into `into`, which must not exist yet.
///
/// Returns the regular files written, relative to `into`, in archive order.
/// On any error `into` is removed.
pub(crate) fn extract(
    archive: &Path,
    format: ArchiveFormat,
    into: &Path,
    limits: ArchiveLimits,
) -> Result<Vec<PathBuf>, ArchiveError> {
    if std::fs::symlink_metadata(into).is_ok() {
        return Err(ArchiveError::StagingExists {
            path: into.to_path_buf(),
        });
    }
    std::fs::create_dir_all(into).map_err(|source| ArchiveError::Io {
        archive: archive.to_path_buf(),
        source,
    })?;
    let mut sink = Sink {
        archive,
        root: into,
        limits,
        bytes: 0,
        entries: 0,
        files: Vec::new(),
    };
    let result = match format {
        ArchiveFormat::TarGz => unpack_tar_gz(&mut sink),
        ArchiveFormat::Zip => unpack_zip(&mut sink),
    }
    .and_then(|()| verify_links(archive, into));
    match result {
        Ok(()) => Ok(sink.files),
        Err(e) => {
            let _ = std::fs::remove_dir_all(into);
            Err(e)
        }
    }
}

/// Writes entries beneath `root`, enforcing paths and caps.
struct Sink<'a> {
    archive: &'a Path,
    root: &'a Path,
    limits: ArchiveLimits,
    bytes: u64,
    entries: usize,
    files: Vec<PathBuf>,
}

impl Sink<'_> {
    fn io(&self, source: std::io::Error) -> ArchiveError {
        ArchiveError::Io {
            archive: self.archive.to_path_buf(),
            source,
        }
    }

    fn unsafe_entry(&self, entry: &str, reason: impl Into<String>) -> ArchiveError {
        ArchiveError::UnsafeEntry {
            archive: self.archive.to_path_buf(),
            entry: entry.to_owned(),
            reason: reason.into(),
        }
    }

    /// Count one entry against the cap.
    fn count(&mut self) -> Result<(), ArchiveError> {
        self.entries += 1;
        if self.entries > self.limits.max_entries {
            return Err(ArchiveError::TooManyEntries {
                archive: self.archive.to_path_buf(),
                limit: self.limits.max_entries,
            });
        }
        Ok(())
    }

    /// The checked relative path of entry `name`, with its parent folders
    /// created (and checked not to be symlinks). `None` for the root itself.
    fn prepare(&self, name: &str) -> Result<Option<PathBuf>, ArchiveError> {
        let relative = safe_relative(name).map_err(|reason| self.unsafe_entry(name, reason))?;
        if relative.as_os_str().is_empty() {
            return Ok(None);
        }
        let mut at = self.root.to_path_buf();
        if let Some(parent) = relative.parent() {
            for component in parent.components() {
                at.push(component);
                match std::fs::symlink_metadata(&at) {
                    Ok(meta) if meta.is_dir() => {}
                    Ok(meta) if meta.file_type().is_symlink() => {
                        return Err(self.unsafe_entry(name, "its path goes through a symlink"));
                    }
                    Ok(_) => {
                        return Err(self.unsafe_entry(name, "its parent is a file"));
                    }
                    Err(_) => std::fs::create_dir(&at).map_err(|e| self.io(e))?,
                }
            }
        }
        Ok(Some(relative))
    }

    fn dir(&mut self, name: &str) -> Result<(), ArchiveError> {
        self.count()?;
        let Some(relative) = self.prepare(name)? else {
            return Ok(());
        };
        let path = self.root.join(&relative);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => Ok(()),
            Ok(_) => Err(self.unsafe_entry(name, "a folder replaces an earlier entry")),
            Err(_) => std::fs::create_dir(&path).map_err(|e| self.io(e)),
        }
    }

    fn file(
        &mut self,
        name: &str,
        executable: bool,
        contents: &mut dyn Read,
    ) -> Result<(), ArchiveError> {
        self.count()?;
        let relative = self
            .prepare(name)?
            .ok_or_else(|| self.unsafe_entry(name, "a file cannot be the archive root"))?;
        let path = self.root.join(&relative);
        // create_new: no overwriting an earlier entry, and never following a
        // symlink at the final component.
        let mut file = File::options()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => self.unsafe_entry(name, "it appears twice"),
                _ => self.io(e),
            })?;
        self.copy_capped(contents, &mut file)?;
        set_mode(&path, executable).map_err(|e| self.io(e))?;
        self.files.push(relative);
        Ok(())
    }

    fn copy_capped(
        &mut self,
        contents: &mut dyn Read,
        file: &mut File,
    ) -> Result<(), ArchiveError> {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let n = match contents.read(&mut buffer) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.io(e)),
            };
            self.bytes += n as u64;
            if self.bytes > self.limits.max_total_bytes {
                return Err(ArchiveError::TooBig {
                    archive: self.archive.to_path_buf(),
                    limit: self.limits.max_total_bytes,
                });
            }
            file.write_all(&buffer[..n]).map_err(|e| self.io(e))?;
        }
    }

    fn symlink(&mut self, name: &str, target: &Path) -> Result<(), ArchiveError> {
        self.count()?;
        let relative = self
            .prepare(name)?
            .ok_or_else(|| self.unsafe_entry(name, "a link cannot be the archive root"))?;
        let parent = relative.parent().unwrap_or(Path::new(""));
        if !link_stays_inside(parent, target) {
            return Err(self.unsafe_entry(
                name,
                format!("symlink to {} points outside the archive", target.display()),
            ));
        }
        std::os::unix::fs::symlink(target, self.root.join(&relative)).map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => self.unsafe_entry(name, "it appears twice"),
            _ => self.io(e),
        })
    }

    /// A hard link to an earlier entry, materialized as a copy.
    fn hard_link(&mut self, name: &str, target: &str) -> Result<(), ArchiveError> {
        let target_relative = safe_relative(target)
            .ok()
            .filter(|t| self.files.contains(t))
            .ok_or_else(|| {
                self.unsafe_entry(
                    name,
                    format!("hard link to {target:?}, which is not a file unpacked before it"),
                )
            })?;
        let source = self.root.join(&target_relative);
        let executable = {
            use std::os::unix::fs::PermissionsExt;
            std::fs::symlink_metadata(&source)
                .map_err(|e| self.io(e))?
                .permissions()
                .mode()
                & 0o111
                != 0
        };
        let mut contents = File::open(&source).map_err(|e| self.io(e))?;
        self.file(name, executable, &mut contents)
    }
}

/// `name` as a relative path of normal components only: no root, no `..`,
/// no drive prefix; `.` components are dropped.
fn safe_relative(name: &str) -> Result<PathBuf, &'static str> {
    if name.contains('\0') {
        return Err("its name contains a NUL byte");
    }
    let path = Path::new(name);
    let mut clean = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => clean.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err("its path contains '..'"),
            Component::RootDir | Component::Prefix(_) => return Err("its path is absolute"),
        }
    }
    Ok(clean)
}

/// Whether a symlink in folder `parent` (relative to the root, itself free of
/// symlinks) with `target` resolves beneath the root, lexically. The target
/// must be relative, and may only climb (`..`) before descending: `a/../..`
/// could climb out through a link named `a`.
fn link_stays_inside(parent: &Path, target: &Path) -> bool {
    let mut depth = parent.components().count();
    let mut descended = false;
    for component in target.components() {
        match component {
            Component::Normal(_) => {
                descended = true;
                depth += 1;
            }
            Component::CurDir => {}
            Component::ParentDir => {
                if descended || depth == 0 {
                    return false;
                }
                depth -= 1;
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

fn set_mode(path: &Path, executable: bool) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = if executable { 0o755 } else { 0o644 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Every symlink under `root` must resolve to something beneath it.
fn verify_links(archive: &Path, root: &Path) -> Result<(), ArchiveError> {
    let io = |source| ArchiveError::Io {
        archive: archive.to_path_buf(),
        source,
    };
    let canonical_root = root.canonicalize().map_err(io)?;
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).map_err(io)? {
            let path = entry.map_err(io)?.path();
            let meta = std::fs::symlink_metadata(&path).map_err(io)?;
            if meta.is_dir() {
                pending.push(path);
            } else if meta.file_type().is_symlink() {
                let inside = path
                    .canonicalize()
                    .is_ok_and(|resolved| resolved.starts_with(&canonical_root));
                if !inside {
                    let entry = path
                        .strip_prefix(root)
                        .unwrap_or(&path)
                        .display()
                        .to_string();
                    return Err(ArchiveError::UnsafeEntry {
                        archive: archive.to_path_buf(),
                        entry,
                        reason: "symlink does not resolve to a file inside the archive".into(),
                    });
                }
            }
        }
    }
    Ok(())
}

fn unpack_tar_gz(sink: &mut Sink<'_>) -> Result<(), ArchiveError> {
    let corrupt = |message: String| ArchiveError::Corrupt {
        archive: sink.archive.to_path_buf(),
        format: "tar.gz",
        message,
    };
    let file = File::open(sink.archive).map_err(|e| sink.io(e))?;
    let mut archive =
        tar::Archive::new(flate2::read::GzDecoder::new(std::io::BufReader::new(file)));
    let entries = archive.entries().map_err(|e| corrupt(e.to_string()))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| corrupt(e.to_string()))?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let kind = entry.header().entry_type();
        match kind {
            tar::EntryType::Directory => sink.dir(&name)?,
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let executable = entry.header().mode().is_ok_and(|m| m & 0o111 != 0);
                sink.file(&name, executable, &mut entry)?;
            }
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name()
                    .map_err(|e| corrupt(e.to_string()))?
                    .ok_or_else(|| sink.unsafe_entry(&name, "symlink without a target"))?
                    .into_owned();
                sink.symlink(&name, &target)?;
            }
            tar::EntryType::Link => {
                let target = entry
                    .link_name_bytes()
                    .map(|t| String::from_utf8_lossy(&t).into_owned())
                    .ok_or_else(|| sink.unsafe_entry(&name, "hard link without a target"))?;
                sink.hard_link(&name, &target)?;
            }
            // Metadata records (pax globals) carry no file.
            tar::EntryType::XGlobalHeader => {}
            other => {
                return Err(
                    sink.unsafe_entry(&name, format!("entries of type {other:?} are not allowed"))
                );
            }
        }
    }
    Ok(())
}

fn unpack_zip(sink: &mut Sink<'_>) -> Result<(), ArchiveError> {
    let corrupt = |message: String| ArchiveError::Corrupt {
        archive: sink.archive.to_path_buf(),
        format: "zip",
        message,
    };
    let file = File::open(sink.archive).map_err(|e| sink.io(e))?;
    let mut archive =
        zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(|e| corrupt(e.to_string()))?;
    // The central directory says how many entries there are: refuse early.
    if archive.len() > sink.limits.max_entries {
        return Err(ArchiveError::TooManyEntries {
            archive: sink.archive.to_path_buf(),
            limit: sink.limits.max_entries,
        });
    }
    for index in 0..archive.len() {
        let mut entry = archive
            .by_index(index)
            .map_err(|e| corrupt(e.to_string()))?;
        let name = String::from_utf8_lossy(entry.name_raw()).into_owned();
        if entry.is_symlink() {
            let mut target = String::new();
            // A link target is a path, never large.
            (&mut entry)
                .take(4096)
                .read_to_string(&mut target)
                .map_err(|e| corrupt(e.to_string()))?;
            sink.symlink(&name, Path::new(&target))?;
        } else if entry.is_dir() {
            sink.dir(&name)?;
        } else {
            let mode = entry.unix_mode().unwrap_or(0o644);
            let kind = mode & 0o170000;
            // 0 means "not recorded" (archives made on other systems).
            if kind != 0 && kind != 0o100000 {
                return Err(sink.unsafe_entry(&name, "special files are not allowed"));
            }
            sink.file(&name, mode & 0o111 != 0, &mut entry)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;

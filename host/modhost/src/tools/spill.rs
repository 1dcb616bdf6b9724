//! The full-output spill: where the host keeps a tool result it cut to fit
//! a model's context, so the caller can still read all of it.
//!
//! Design decisions:
//!
//! - **The host never writes where a module can.** The spill lives under
//!   `<home>/spill/<module>/` ([`HomeLayout::spill_dir`]), a folder no grant
//!   ever points at. It used to live in the module's writable artifacts
//!   root, where a module could replace the folder with a symlink and have
//!   the unconfined host write module-chosen bytes wherever it pointed.
//! - **Nothing on the way is followed.** Each folder below the home is
//!   created by the host and opened with `O_NOFOLLOW | O_DIRECTORY` relative
//!   to its parent's descriptor, and the file is created with `O_CREAT |
//!   O_EXCL | O_NOFOLLOW`: a symlink planted anywhere below the home makes
//!   the spill fail (and the result says so), never redirects it. The home
//!   itself is the operator's choice and is opened as given.
//! - Names come from the host: the module id (folder-name syntax, checked
//!   again here) and the tool name, a timestamp and the process id.
//! - **Bounded: the newest [`KEEP_PER_MODULE`] spills of each module.**
//!   After a new spill is written, the module's spill folder is pruned to
//!   its newest files (by modification time, the new one always among
//!   them), so the folder holds at most that many outputs each at most the
//!   output cap, whatever runs for however long. A count rather than an
//!   age, because a count bounds the disk: a busy hour writes as much as a
//!   quiet month. A caller reads a spill right after the result names it;
//!   64 later spills of the same module before it does are unlikely.
//!   Pruning goes through the same descriptor as the write, unlinks only
//!   regular files (`unlinkat` never follows a symlink) and is best effort:
//!   a spill that was written is never failed by its pruning.

use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use crate::home::HomeLayout;

/// How many spills of one module are kept: the newest ones.
pub(crate) const KEEP_PER_MODULE: usize = 64;

/// A saved full output: where it is on the host and its file name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Spilled {
    pub file: PathBuf,
    pub file_name: String,
}

/// Save `body` as `<home>/spill/<module>/<tool>-<unique>.txt`, following no
/// symlink below the home.
pub(crate) fn save(
    home: &HomeLayout,
    module: &str,
    tool: &str,
    body: &str,
) -> std::io::Result<Spilled> {
    for name in [module, tool] {
        if !is_plain_name(name) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{name:?} cannot name a file in the spill folder"),
            ));
        }
    }
    let home_fd = rustix::fs::open(
        home.root(),
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| with_path(e, home.root().display()))?;
    let spill = home.spill_dir();
    let spill_name = spill
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("spill");
    let spill_fd =
        own_dir(home_fd.as_fd(), spill_name).map_err(|e| with_path(e, spill.display()))?;
    let module_dir = spill.join(module);
    let module_fd =
        own_dir(spill_fd.as_fd(), module).map_err(|e| with_path(e, module_dir.display()))?;

    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let file_name = format!("{tool}-{nanos}-{}.txt", std::process::id());
    let file = module_dir.join(&file_name);
    let fd = rustix::fs::openat(
        module_fd.as_fd(),
        file_name.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| with_path(e, file.display()))?;
    let mut writer = std::fs::File::from(fd);
    writer.write_all(body.as_bytes())?;
    drop(writer);
    prune(module_fd.as_fd(), &file_name, KEEP_PER_MODULE);
    Ok(Spilled { file, file_name })
}

/// Remove all but the newest `keep` regular files of the folder open as
/// `dir`, never `just_written`. Best effort: what cannot be read or removed
/// is left (another host may be pruning the same folder).
fn prune(dir: BorrowedFd<'_>, just_written: &str, keep: usize) {
    let Ok(listing) = rustix::fs::Dir::read_from(dir) else {
        return;
    };
    let mut files: Vec<(i64, i64, std::ffi::CString)> = listing
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_owned();
            let stat =
                rustix::fs::statat(dir, name.as_c_str(), rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                    .ok()?;
            let regular = rustix::fs::FileType::from_raw_mode(stat.st_mode)
                == rustix::fs::FileType::RegularFile;
            regular.then_some((stat.st_mtime as i64, stat.st_mtime_nsec as i64, name))
        })
        .collect();
    if files.len() <= keep {
        return;
    }
    // Newest first.
    files.sort_by(|a, b| b.cmp(a));
    for (_, _, name) in files.into_iter().skip(keep) {
        if name.as_bytes() != just_written.as_bytes() {
            let _ = rustix::fs::unlinkat(dir, name.as_c_str(), rustix::fs::AtFlags::empty());
        }
    }
}

/// Create the folder `name` in `parent` (if it is not there) and open it,
/// refusing a symlink in its place.
fn own_dir(parent: BorrowedFd<'_>, name: &str) -> Result<OwnedFd, Errno> {
    match rustix::fs::mkdirat(parent, name, Mode::from_raw_mode(0o700)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(e),
    }
    rustix::fs::openat(
        parent,
        name,
        OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

fn with_path(e: Errno, path: impl std::fmt::Display) -> std::io::Error {
    let e = std::io::Error::from(e);
    let hint = if e.raw_os_error() == Some(Errno::LOOP.raw_os_error())
        || e.raw_os_error() == Some(Errno::NOTDIR.raw_os_error())
    {
        " (a symlink or a file stands where the host keeps its own folder; remove it)"
    } else {
        ""
    };
    std::io::Error::new(e.kind(), format!("{path}: {e}{hint}"))
}

/// One path component the host chose: no separator, not `.`/`..`, not hidden.
fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && !name.starts_with('.') && !name.contains('/') && !name.contains('\0')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saves_under_the_spill_folder_readable_in_full() {
        let dir = tempfile::tempdir().unwrap();
        let home = HomeLayout::new(dir.path());
        let saved = save(&home, "files", "files__files_read", "all of it").unwrap();
        assert!(saved.file.starts_with(home.spill_dir().join("files")));
        assert_eq!(std::fs::read_to_string(&saved.file).unwrap(), "all of it");
    }

    #[test]
    fn a_symlink_in_place_of_a_folder_is_refused_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let home = HomeLayout::new(dir.path().join("home"));
        std::fs::create_dir_all(home.root()).unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        // In place of the spill folder itself.
        std::os::unix::fs::symlink(&outside, home.spill_dir()).unwrap();
        let err = save(&home, "m", "t", "pwned").unwrap_err();
        assert!(err.to_string().contains("symlink"), "{err}");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        // In place of the module's folder.
        std::fs::remove_file(home.spill_dir()).unwrap();
        std::fs::create_dir(home.spill_dir()).unwrap();
        std::os::unix::fs::symlink(&outside, home.spill_dir().join("m")).unwrap();
        assert!(save(&home, "m", "t", "pwned").is_err());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    }

    #[test]
    fn the_spill_folder_keeps_only_the_newest_outputs_of_each_module() {
        let dir = tempfile::tempdir().unwrap();
        let home = HomeLayout::new(dir.path());
        let first = save(&home, "m", "t", "oldest").unwrap();
        let other = save(&home, "other", "t", "another module").unwrap();
        // Back-date the first so it is unambiguously the oldest.
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        std::fs::File::options()
            .write(true)
            .open(&first.file)
            .unwrap()
            .set_modified(old)
            .unwrap();
        // Something that is not a spill: a symlink pointing outside.
        let outside = dir.path().join("outside.txt");
        std::fs::write(&outside, "not the host's").unwrap();
        std::os::unix::fs::symlink(&outside, home.spill_dir().join("m").join("link.txt")).unwrap();
        let mut last = None;
        for n in 0..KEEP_PER_MODULE + 10 {
            last = Some(save(&home, "m", "t", &format!("output {n}")).unwrap());
        }
        let files: Vec<_> = std::fs::read_dir(home.spill_dir().join("m"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file() && !p.is_symlink())
            .collect();
        assert_eq!(files.len(), KEEP_PER_MODULE, "bounded: {}", files.len());
        assert!(!first.file.exists(), "the oldest spill is gone");
        let last = last.unwrap();
        assert_eq!(
            std::fs::read_to_string(&last.file).unwrap(),
            format!("output {}", KEEP_PER_MODULE + 9),
            "the newest spill stays readable"
        );
        assert!(other.file.exists(), "another module's spills are its own");
        assert_eq!(
            std::fs::read_to_string(&outside).unwrap(),
            "not the host's",
            "nothing outside is touched through a link"
        );
    }

    #[test]
    fn names_that_would_leave_the_folder_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let home = HomeLayout::new(dir.path());
        for (module, tool) in [("..", "t"), ("m", "../x"), ("", "t"), ("m", ".hidden")] {
            assert!(save(&home, module, tool, "x").is_err(), "{module} {tool}");
        }
    }
}

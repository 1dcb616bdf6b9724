//! Replacing a file atomically: what the host writes is seen whole or not at all.
//!
//! Every file the host owns (`pins.json`, the describe cache, compiled
//! components) goes through [`write_atomically`]: a uniquely named temp file
//! in the same directory (mode 0600, created exclusively), fsync, rename over
//! the target, fsync of the directory. A reader sees the old bytes or the new
//! ones, never half of either, even if the host dies mid-write; concurrent
//! writers in one process never share a temp file.

use std::fs::File;
use std::io::Write;
use std::path::Path;

/// Write `path` through `write`, atomically, creating its directory when
/// needed. On any error the temp file is removed and `path` is untouched.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut temp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)?;
    write(temp.as_file_mut())?;
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|e| e.error)?;
    // Make the rename itself durable.
    File::open(dir)?.sync_all()
}

/// [`write_atomically`] for bytes already in memory.
pub fn write_bytes_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomically(path, |file| file.write_all(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("f");
        write_bytes_atomically(&path, b"one").unwrap();
        write_bytes_atomically(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1
        );
    }

    #[test]
    fn a_failed_write_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        write_bytes_atomically(&path, b"old").unwrap();
        let err = write_atomically(&path, |file| {
            file.write_all(b"half")?;
            Err(std::io::Error::other("disk full"))
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "disk full");
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}

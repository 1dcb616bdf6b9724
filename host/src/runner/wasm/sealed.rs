//! Bytes in a sealed memfd: memory that no one, this process included, can
//! change once it is sealed.
//!
//! A compiled-cache entry is about 1.6 MB of machine code for a small
//! component. Read into the host's memory, it took a fresh buffer (one page
//! fault per page as the read filled it) and then wasmtime's copy of it (as
//! many again): on a virtual machine, where a first touch of a page is
//! expensive, most of a first call's load. Here the payload is written
//! into a memfd as it is hashed, the memfd is sealed, and wasmtime maps it
//! (`Component::deserialize_file` on `/proc/self/fd/N`): the kernel copies
//! the file's pages once, and nothing is faulted in twice.
//!
//! Design decisions:
//!
//! - **The bytes hashed are the bytes mapped.** Every chunk is hashed and
//!   written from the same buffer; the seals (`F_SEAL_WRITE`,
//!   `F_SEAL_SHRINK`, `F_SEAL_GROW`, then `F_SEAL_SEAL` so none can be
//!   removed) make the memfd's contents final before its digest is
//!   compared, so no writer can swap code in between the check and the
//!   mapping, and no truncation can fault the host (`SIGBUS`) while it runs
//!   the code. A mapping of the cache file itself would have both holes.
//! - **Where memfds or `/proc` are missing, the caller reads into memory
//!   instead** ([`SealedWriter::new`] fails, the caller keeps a `Vec`): the
//!   same checks, one copy more.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use rustix::fs::{MemfdFlags, SealFlags};

/// Where this process reaches its own descriptors by path.
const OWN_FDS: &str = "/proc/self/fd";

/// A memfd being filled; [`SealedWriter::seal`] makes it final.
pub(super) struct SealedWriter(File);

impl SealedWriter {
    /// An empty memfd, or `Err` where the kernel has none or `/proc` is not
    /// mounted (wasmtime could not map it by path).
    pub(super) fn new(name: &str) -> std::io::Result<SealedWriter> {
        if !Path::new(OWN_FDS).is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{OWN_FDS} is not mounted"),
            ));
        }
        let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
        Ok(SealedWriter(File::from(fd)))
    }

    pub(super) fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.0.write_all(bytes)
    }

    /// Seal the contents: from now on no write, growth or shrinking, and
    /// no change of the seals, by anyone.
    pub(super) fn seal(self) -> std::io::Result<Sealed> {
        rustix::fs::fcntl_add_seals(
            &self.0,
            SealFlags::WRITE | SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL,
        )?;
        Ok(Sealed(self.0))
    }
}

/// A sealed memfd: its contents can no longer change.
pub(super) struct Sealed(File);

impl Sealed {
    /// A path that opens this memfd (for APIs that take a path); valid while
    /// `self` lives.
    pub(super) fn path(&self) -> PathBuf {
        Path::new(OWN_FDS).join(self.0.as_raw_fd().to_string())
    }

    /// The whole contents (tests).
    #[cfg(test)]
    pub(super) fn contents(&self) -> Vec<u8> {
        std::fs::read(self.path()).expect("reading a sealed memfd")
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::fs::FileExt;

    use super::*;

    /// The attack this prevents: code verified, then changed before (or
    /// while) it runs. Every way to change a sealed memfd is refused, even
    /// to this process, through a fresh writable open of its path too.
    #[test]
    fn sealed_bytes_cannot_be_changed_by_anyone() {
        let mut writer = SealedWriter::new("test").expect("memfds on this kernel");
        writer.write_all(b"verified code").unwrap();
        let sealed = writer.seal().unwrap();
        assert_eq!(sealed.contents(), b"verified code");

        let refused = |result: std::io::Result<()>, what: &str| {
            let error = result.expect_err(what);
            assert_eq!(error.raw_os_error(), Some(libc::EPERM), "{what}: {error}");
        };
        refused(sealed.0.write_all_at(b"evil", 0), "overwriting");
        refused(sealed.0.set_len(4), "truncating");
        refused(sealed.0.set_len(64), "growing");
        let mut reopened = std::fs::OpenOptions::new()
            .write(true)
            .open(sealed.path())
            .unwrap();
        refused(reopened.write_all(b"evil"), "writing through a new open");
        refused(
            rustix::fs::fcntl_add_seals(&sealed.0, SealFlags::empty()).map_err(Into::into),
            "changing the seals",
        );
        assert_eq!(sealed.contents(), b"verified code");
    }
}

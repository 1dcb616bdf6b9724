//! Bytes in a sealed memfd: memory that no one, this process included, can
//! change once it is sealed.
//!
//! A compiled-cache entry is about 1.6 MB of machine code for a small
//! component. Read into the host's memory, it took a fresh buffer (one page
//! fault per page as the read filled it) and then wasmtime's copy of it (as
//! many again): on a virtual machine, where a first touch of a page is
//! expensive, most of a first call's load. Here the payload is copied into
//! a memfd, the memfd is sealed, its digest is taken over the sealed
//! contents, and wasmtime maps it (`Component::deserialize_file` on
//! `/proc/self/fd/N`): the kernel copies the file's pages once, and nothing
//! is faulted in twice.
//!
//! Design decisions:
//!
//! - **The bytes hashed are the bytes mapped.** The seals (`F_SEAL_WRITE`,
//!   `F_SEAL_SHRINK`, `F_SEAL_GROW`, then `F_SEAL_SEAL` so none can be
//!   removed) make the contents final first; only then are they hashed
//!   ([`Sealed::digest`]), so no writer can change code between the check
//!   and the mapping (not even one that reaches the memfd through
//!   `/proc/<host>/fd` while it is being filled), and no truncation can
//!   fault the host (`SIGBUS`) while it runs the code. A mapping of the
//!   cache file itself would have both holes.
//! - **The path must lead to this memfd.** wasmtime opens a path, not a
//!   descriptor, so [`Sealed::verified_path`] checks that `/proc/self/fd`
//!   is procfs and that the path opens the very inode sealed here;
//!   otherwise the caller reads the sealed bytes through the descriptor.
//! - **Where memfds are missing, the caller reads into memory instead**
//!   ([`SealedWriter::new`] fails, the caller keeps a `Vec`): the same
//!   checks, one copy more.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use rustix::fs::{MemfdFlags, SealFlags};

use super::own_fd;

/// A memfd being filled; [`SealedWriter::seal`] makes it final.
pub(super) struct SealedWriter(File);

impl SealedWriter {
    /// An empty memfd, or `Err` where the kernel has none.
    pub(super) fn new(name: &str) -> std::io::Result<SealedWriter> {
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
    /// A path that opens this memfd (for APIs that take a path), valid while
    /// `self` lives ([`own_fd::verified_path`]).
    pub(super) fn verified_path(&self) -> std::io::Result<PathBuf> {
        own_fd::verified_path(&self.0)
    }

    /// The blake3 digest of the sealed contents.
    pub(super) fn digest(&self) -> std::io::Result<blake3::Hash> {
        let mut hasher = blake3::Hasher::new();
        self.each_chunk(|chunk| {
            hasher.update(chunk);
        })?;
        Ok(hasher.finalize())
    }

    /// The sealed contents, read through the descriptor.
    pub(super) fn contents(&self) -> std::io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.each_chunk(|chunk| bytes.extend_from_slice(chunk))?;
        Ok(bytes)
    }

    fn each_chunk(&self, mut take: impl FnMut(&[u8])) -> std::io::Result<()> {
        let mut buffer = vec![0u8; CHUNK];
        let mut offset = 0u64;
        loop {
            match self.0.read_at(&mut buffer, offset) {
                Ok(0) => return Ok(()),
                Ok(n) => {
                    take(&buffer[..n]);
                    offset += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// How much is copied or read back at a time (a buffer that stays in cache).
pub(super) const CHUNK: usize = 64 * 1024;

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::fd::AsRawFd;
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
        assert_eq!(sealed.contents().unwrap(), b"verified code");
        assert_eq!(sealed.digest().unwrap(), blake3::hash(b"verified code"));

        let refused = |result: std::io::Result<()>, what: &str| {
            let error = result.expect_err(what);
            assert_eq!(error.raw_os_error(), Some(libc::EPERM), "{what}: {error}");
        };
        refused(sealed.0.write_all_at(b"evil", 0), "overwriting");
        refused(sealed.0.set_len(4), "truncating");
        refused(sealed.0.set_len(64), "growing");
        let mut reopened = std::fs::OpenOptions::new()
            .write(true)
            .open(sealed.verified_path().unwrap())
            .unwrap();
        refused(reopened.write_all(b"evil"), "writing through a new open");
        refused(
            rustix::fs::fcntl_add_seals(&sealed.0, SealFlags::empty()).map_err(Into::into),
            "changing the seals",
        );
        assert_eq!(sealed.contents().unwrap(), b"verified code");
    }

    /// wasmtime maps what the path opens, so only a path that opens the
    /// sealed memfd itself is handed out: not one under a directory that
    /// merely looks like `/proc/self/fd` (a filesystem mounted over it,
    /// holding other code under the same number), nor one that leads to
    /// another inode with the same bytes.
    #[test]
    fn only_a_path_to_the_sealed_memfd_itself_is_handed_out() {
        let mut writer = SealedWriter::new("test").unwrap();
        writer.write_all(b"verified code").unwrap();
        let sealed = writer.seal().unwrap();
        let path = sealed.verified_path().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"verified code");

        let fake_fds = tempfile::tempdir().unwrap();
        let number = sealed.0.as_raw_fd().to_string();
        let impostor = fake_fds.path().join(&number);
        std::fs::write(&impostor, b"verified code").unwrap();
        let error = own_fd::verified_path_in(&sealed.0, fake_fds.path()).unwrap_err();
        assert!(error.to_string().contains("not procfs"), "{error}");

        assert!(own_fd::opens_the_same_inode(&path, &sealed.0).unwrap());
        assert!(!own_fd::opens_the_same_inode(&impostor, &sealed.0).unwrap());
    }
}

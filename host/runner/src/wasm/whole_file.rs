//! Reading a component's file whole into memory faulted in up front.
//!
//! A buffer of a few hundred kilobytes is fresh memory: filled by `read`,
//! it takes one page fault per page, and on a virtual machine those cost
//! more than the read itself (a 0.6 MB component: about 1.2 ms, against
//! 0.6 ms into memory mapped with `MAP_POPULATE`, which takes them all in
//! one system call). The first call of a server waits for this read.

use std::fs::File;
use std::io::Read;
use std::ops::Deref;

use memmap2::{MmapMut, MmapOptions};

/// Below this, a plain `Vec` (a few faults at most).
const MAPPED_FROM: usize = 64 * 1024;
/// Above this, a plain `Vec` too: the size a file reports is committed up
/// front, and a file that claims far more than it holds (a network or FUSE
/// filesystem's stale size) must not commit memory it never fills.
const MAPPED_UP_TO: usize = 256 * 1024 * 1024;

/// A file's bytes.
pub(super) enum WholeFile {
    Mapped { map: MmapMut, len: usize },
    Read(Vec<u8>),
}

impl Deref for WholeFile {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            WholeFile::Mapped { map, len } => &map[..*len],
            WholeFile::Read(bytes) => bytes,
        }
    }
}

/// Read `file` to its end; `size` is its length when opened (a file that
/// changed length since is still read whole, only not pre-faulted).
pub(super) fn read_whole(file: &mut File, size: u64) -> std::io::Result<WholeFile> {
    let expected = usize::try_from(size).unwrap_or(usize::MAX);
    if !(MAPPED_FROM..=MAPPED_UP_TO).contains(&expected) {
        return read_rest(file, Vec::new());
    }
    let Ok(mut map) = MmapOptions::new().len(expected).populate().map_anon() else {
        return read_rest(file, Vec::new());
    };
    let mut len = 0;
    while len < expected {
        match file.read(&mut map[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    if len == expected {
        // It may have grown: what is beyond goes with the rest, in a `Vec`.
        let mut beyond = [0u8; 1];
        loop {
            match file.read(&mut beyond) {
                Ok(0) => break,
                Ok(n) => {
                    let mut bytes = map[..len].to_vec();
                    bytes.extend_from_slice(&beyond[..n]);
                    return read_rest(file, bytes);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(WholeFile::Mapped { map, len })
}

fn read_rest(file: &mut File, mut bytes: Vec<u8>) -> std::io::Result<WholeFile> {
    file.read_to_end(&mut bytes)?;
    Ok(WholeFile::Read(bytes))
}

#[cfg(test)]
mod tests {
    use std::io::{Seek, Write};

    use super::*;

    #[test]
    fn a_file_is_read_whole_whatever_its_size_did_since_it_was_opened() {
        let content: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&content).unwrap();
        let read = |file: &mut File, size: u64| {
            file.rewind().unwrap();
            read_whole(file, size).unwrap()
        };
        let whole = read(&mut file, content.len() as u64);
        assert!(matches!(whole, WholeFile::Mapped { .. }));
        assert_eq!(&*whole, &content[..]);
        // Grew after its size was taken: the rest is read too.
        assert_eq!(&*read(&mut file, 100_000), &content[..]);
        // Shrank: what is there.
        assert_eq!(&*read(&mut file, 300_000), &content[..]);
        // Small files and empty ones.
        assert_eq!(&*read(&mut file, 10), &content[..]);
        let mut empty = tempfile::tempfile().unwrap();
        assert!(read(&mut empty, 0).is_empty());
    }
}

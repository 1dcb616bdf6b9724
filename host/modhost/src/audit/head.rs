//! `audit/head`: where the log ends, as its last writer left it.
//!
//! The chain proves every record but the last: a line changed or removed
//! breaks the link of the line after it, and the last line has none after
//! it. The head holds the last record's number and hash, the rotation
//! generation and the size `audit.jsonl` had then, so `verify` also sees a
//! last record changed or removed, and a writer sees at once whether the
//! log ends where the head says (one `fstat`), or needs repair.
//!
//! Design decisions: **one fixed-width line** (128 bytes), rewritten in
//! place with one `pwrite` at offset 0 after each record: no rename, no
//! temporary file, nothing a crash can leave half-named. A head torn or
//! behind the log is what a crash between the two writes leaves; the next
//! writer rebuilds it from the log and records that it did. The file is
//! also what writers `flock`, so it is never replaced.
//!
//! After the head line, a writer that could not write records (a full
//! disk, `audit.jsonl` made immutable or replaced by a link) notes how
//! many ([`Unwritten`]): a `modhost invoke` that fails its one record
//! ends before any other record could say so, and the next writer of the
//! home, any process, writes the `gap` record from this note and clears
//! it. `verify` reports a note still there as records missing.

use std::fs::File;
use std::os::unix::fs::FileExt;

/// The bytes of a head line.
pub(crate) const HEAD_BYTES: usize = 128;

/// Where the log ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Head {
    /// How many times `audit.jsonl` was rotated (`audit-<generation>.jsonl`
    /// is the newest rotated file).
    pub generation: u64,
    /// The last record's `seq`; 0 before the first.
    pub seq: u64,
    /// The size of `audit.jsonl` after the last record.
    pub size: u64,
    /// The last record's hash; `GENESIS` before the first.
    pub hash: String,
}

impl Head {
    pub(crate) fn encode(&self) -> String {
        let line = format!(
            "{:020} {:020} {:020} {}\n",
            self.generation, self.seq, self.size, self.hash
        );
        debug_assert_eq!(line.len(), HEAD_BYTES);
        line
    }

    /// A head line; `None` for anything else (empty, torn, edited).
    pub(crate) fn decode(bytes: &[u8]) -> Option<Head> {
        let text = std::str::from_utf8(bytes.get(..HEAD_BYTES)?).ok()?;
        let text = text.strip_suffix('\n')?;
        let mut parts = text.split(' ');
        let mut number = || -> Option<u64> {
            let part = parts.next()?;
            (part.len() == 20).then_some(())?;
            part.parse().ok()
        };
        let (generation, seq, size) = (number()?, number()?, number()?);
        let hash = parts.next()?;
        let hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
        if parts.next().is_some() || hash.len() != 64 || !hash.chars().all(hex) {
            return None;
        }
        Some(Head {
            generation,
            seq,
            size,
            hash: hash.to_owned(),
        })
    }

    /// The head in `file`; `Ok(None)` when it holds none (a new log, or a
    /// head a crash or a person damaged).
    pub(crate) fn read(file: &File) -> std::io::Result<Option<Head>> {
        let mut bytes = [0u8; HEAD_BYTES];
        let mut filled = 0;
        while filled < HEAD_BYTES {
            match file.read_at(&mut bytes[filled..], filled as u64) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Head::decode(&bytes[..filled]))
    }

    /// Write this head over the one in `file`.
    pub(crate) fn write(&self, file: &File) -> std::io::Result<()> {
        file.write_all_at(self.encode().as_bytes(), 0)
    }
}

/// The most bytes of the note of unwritten records.
const UNWRITTEN_BYTES: usize = 1024;

/// Records writers could not write, noted after the head line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unwritten {
    pub records: u64,
    /// When the first failed (RFC 3339).
    pub since: String,
    /// Why the last failed.
    pub error: String,
}

impl Unwritten {
    /// The note in `file`; `None` when there is none (or it is unreadable).
    pub(crate) fn read(file: &File) -> Option<Unwritten> {
        let mut bytes = vec![0u8; UNWRITTEN_BYTES];
        let mut filled = 0;
        while filled < UNWRITTEN_BYTES {
            match file.read_at(&mut bytes[filled..], (HEAD_BYTES + filled) as u64) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
        let text = std::str::from_utf8(&bytes[..filled]).ok()?;
        let text = text.strip_prefix("unwritten ")?.lines().next()?;
        let mut parts = text.splitn(3, ' ');
        let records = parts.next()?.parse().ok()?;
        let since = parts.next()?.to_owned();
        let error = parts.next().unwrap_or_default().to_owned();
        (records > 0).then_some(Unwritten {
            records,
            since,
            error,
        })
    }

    /// Write this note after the head in `file` (over any there was).
    pub(crate) fn write(&self, file: &File) -> std::io::Result<()> {
        let error: String = self
            .error
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(UNWRITTEN_BYTES / 2)
            .collect();
        let text = format!("unwritten {} {} {error}\n", self.records, self.since);
        let text = &text.as_bytes()[..text.len().min(UNWRITTEN_BYTES)];
        file.write_all_at(text, HEAD_BYTES as u64)?;
        file.set_len((HEAD_BYTES + text.len()) as u64)
    }

    /// Remove the note from `file`.
    pub(crate) fn clear(file: &File) -> std::io::Result<()> {
        if file.metadata()?.len() > HEAD_BYTES as u64 {
            file.set_len(HEAD_BYTES as u64)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_round_trips_and_anything_else_is_none() {
        let head = Head {
            generation: 3,
            seq: 1234,
            size: 98_765,
            hash: super::super::record::sha256_hex(b"x"),
        };
        let line = head.encode();
        assert_eq!(line.len(), HEAD_BYTES);
        assert_eq!(Head::decode(line.as_bytes()), Some(head.clone()));
        assert_eq!(Head::decode(b""), None);
        assert_eq!(Head::decode(&line.as_bytes()[..100]), None, "torn");
        let edited = line.replacen("0000000003", "000000000x", 1);
        assert_eq!(Head::decode(edited.as_bytes()), None);
        let upper = line.to_uppercase();
        assert_eq!(Head::decode(upper.as_bytes()), None);
    }

    #[test]
    fn a_note_of_unwritten_records_follows_the_head_and_is_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("head");
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .unwrap();
        let head = Head {
            generation: 0,
            seq: 7,
            size: 700,
            hash: super::super::record::sha256_hex(b"x"),
        };
        head.write(&file).unwrap();
        assert_eq!(Unwritten::read(&file), None);
        let note = Unwritten {
            records: 3,
            since: "2026-01-01T00:00:00.000Z".into(),
            error: "could not open\naudit.jsonl".into(),
        };
        note.write(&file).unwrap();
        let read = Unwritten::read(&file).unwrap();
        assert_eq!(read.records, 3);
        assert_eq!(read.error, "could not open audit.jsonl");
        assert_eq!(Head::read(&file).unwrap(), Some(head.clone()));
        head.write(&file).unwrap();
        assert_eq!(Unwritten::read(&file).map(|u| u.records), Some(3));
        Unwritten::clear(&file).unwrap();
        assert_eq!(Unwritten::read(&file), None);
        assert_eq!(Head::read(&file).unwrap(), Some(head));
    }
}

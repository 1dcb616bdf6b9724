//! The notebook on disk: one append-only JSON Lines file, `notes.jsonl`, in
//! the state root. Every change is one line appended: `{"add": {...}}` or
//! `{"remove": {"id": N}}`; nothing written is ever rewritten.
//!
//! Why a log and not a file replaced atomically (temp file, fsync, rename):
//!
//! - **A crash cannot touch what is already written.** An append only adds
//!   bytes after the last complete line, so a process killed mid-write
//!   leaves at worst a *torn tail*: a last line without its `\n`. The reader
//!   ([`parse`]) takes only `\n`-terminated lines that decode, and skips (and
//!   counts, so the caller is told) anything else; a strict prefix of a JSON
//!   object never decodes, so a torn record is never half-applied.
//! - **The next write repairs nothing in place.** When the file does not end
//!   in `\n`, [`append`] starts its line with one, so the torn fragment stays
//!   a line of its own (skipped forever) instead of swallowing the new
//!   record. Truncating it instead could cut a concurrent writer's line.
//! - **Concurrent calls lose nothing.** The host may run two `notes.add` at
//!   once (an MCP client's parallel tool calls). Each appends one line with a
//!   single `write` on an `O_APPEND` descriptor, so both land; a
//!   read-modify-replace would keep only the last one without a lock, and
//!   WASI has no `flock`.
//! - **Durable when answered.** The line is `fdatasync`ed before the call
//!   answers, on both targets (`sync_data`).
//!
//! The cost: removing a note adds a line rather than shrinking the file, so
//! the log only grows. It is capped at [`MAX_LOG_BYTES`] (tens of thousands
//! of notes); past it `notes.add` refuses with the remedy rather than
//! compacting, because a compaction (an atomic replace) could drop a
//! concurrent append.
//!
//! Natively the file is opened through the root's cap-std directory; inside a
//! component through std on the preopened guest path. Same bytes either way.

use std::io::{Read, Seek, SeekFrom, Write};

use modsdk::modproto::ModuleErrorKind;
use modsdk::{ModError, Root};
use serde::{Deserialize, Serialize};

/// The log's name in the state root.
pub const LOG: &str = "notes.jsonl";
/// The largest log the module reads or appends to.
pub const MAX_LOG_BYTES: u64 = 16 << 20;

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Record {
    Add(Added),
    Remove { id: u64 },
}

/// A note as recorded when it was added. Its id is not stored: it is the
/// position of this record among the log's `add` records, fixed forever
/// because the log is only appended to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Added {
    /// Unique per call, so the writer can find its own record (and so its
    /// id) among concurrent appends.
    pub nonce: String,
    pub text: String,
    pub tags: Vec<String>,
    /// RFC 3339, UTC.
    pub created: String,
}

/// What the log holds.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Contents {
    /// The complete, decodable records, in order.
    pub records: Vec<Record>,
    /// Lines that were cut short or do not decode, skipped.
    pub skipped: usize,
}

/// The records of `bytes`: every `\n`-terminated line that decodes. Empty
/// lines (left by a repair) are not counted as skipped; a last line without
/// `\n` (a torn or in-progress write) and undecodable lines are.
pub fn parse(bytes: &[u8]) -> Contents {
    let mut contents = Contents::default();
    let mut lines = bytes.split(|&b| b == b'\n');
    let last = lines.next_back();
    for line in lines {
        if line.is_empty() {
            continue;
        }
        match serde_json::from_slice(line) {
            Ok(record) => contents.records.push(record),
            Err(_) => contents.skipped += 1,
        }
    }
    if last.is_some_and(|tail| !tail.is_empty()) {
        contents.skipped += 1;
    }
    contents
}

/// Read the log of `root`; a missing log is an empty notebook.
pub fn read(root: &Root) -> Result<Contents, ModError> {
    let file = match root.open_file(LOG) {
        Ok(file) => file,
        Err(e) if *e.kind() == ModuleErrorKind::NotFound => return Ok(Contents::default()),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    file.take(MAX_LOG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ModError::io(display(), &e))?;
    if bytes.len() as u64 > MAX_LOG_BYTES {
        return Err(too_big());
    }
    Ok(parse(&bytes))
}

/// Append `record` as one line and sync it to disk before returning.
pub fn append(root: &Root, record: &Record) -> Result<(), ModError> {
    if !root.access().is_write() {
        return Err(ModError::denied(format!(
            "{}: the state root was granted read-only for this call",
            display()
        )));
    }
    let mut line = serde_json::to_vec(record)?;
    line.push(b'\n');
    if !ends_with_newline(root)? {
        line.insert(0, b'\n');
    }
    let mut file = open_for_append(root).map_err(|e| ModError::io(display(), &e))?;
    file.write_all(&line)
        .and_then(|()| file.sync_data())
        .map_err(|e| ModError::io(display(), &e))
}

/// Whether the log is absent, empty, or ends with a complete line; refuses
/// a log past [`MAX_LOG_BYTES`].
fn ends_with_newline(root: &Root) -> Result<bool, ModError> {
    let mut file = match root.open_file(LOG) {
        Ok(file) => file,
        Err(e) if *e.kind() == ModuleErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(e),
    };
    let io = |e: std::io::Error| ModError::io(display(), &e);
    let len = file.metadata().map_err(io)?.len();
    if len > MAX_LOG_BYTES {
        return Err(too_big());
    }
    if len == 0 {
        return Ok(true);
    }
    let mut last = [0u8; 1];
    file.seek(SeekFrom::End(-1)).map_err(io)?;
    file.read_exact(&mut last).map_err(io)?;
    Ok(last[0] == b'\n')
}

#[cfg(not(target_os = "wasi"))]
fn open_for_append(root: &Root) -> std::io::Result<std::fs::File> {
    let dir = root.dir().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            "the state root is not a directory",
        )
    })?;
    let mut options = cap_std::fs::OpenOptions::new();
    options.append(true).create(true);
    Ok(dir.open_with(LOG, &options)?.into_std())
}

#[cfg(target_os = "wasi")]
fn open_for_append(root: &Root) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(root.path().join(LOG))
}

fn display() -> String {
    format!("state:{LOG}")
}

fn too_big() -> ModError {
    ModError::failed(format!(
        "{}: the notebook is larger than {} MiB",
        display(),
        MAX_LOG_BYTES >> 20
    ))
    .with_remedy("archive the notebook: move notes.jsonl out of the module's state folder (state/notes/ in the host home) and start a new one")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(text: &str) -> Record {
        Record::Add(Added {
            nonce: format!("n-{text}"),
            text: text.into(),
            tags: vec![],
            created: "2026-01-01T00:00:00Z".into(),
        })
    }

    fn line(record: &Record) -> String {
        format!("{}\n", serde_json::to_string(record).unwrap())
    }

    #[test]
    fn a_torn_tail_is_skipped_and_earlier_records_kept() {
        let whole = line(&add("one")) + &line(&add("two"));
        let torn = line(&add("three"));
        for cut in 1..torn.len() - 1 {
            let bytes = format!("{whole}{}", &torn[..cut]);
            let contents = parse(bytes.as_bytes());
            assert_eq!(contents.records, [add("one"), add("two")], "cut at {cut}");
            assert_eq!(contents.skipped, 1, "cut at {cut}");
        }
    }

    #[test]
    fn a_repaired_fragment_stays_its_own_skipped_line() {
        let bytes = line(&add("one")) + "{\"add\":{\"te" + "\n" + &line(&add("two")) + "\n";
        let contents = parse(bytes.as_bytes());
        assert_eq!(contents.records, [add("one"), add("two")]);
        assert_eq!(contents.skipped, 1, "the empty line is not a skip");
    }

    #[test]
    fn append_after_a_torn_tail_keeps_both_sides() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(
            "state",
            dir.path().to_str().unwrap(),
            modsdk::RootKind::State,
            modsdk::Access::ReadWrite,
        )
        .unwrap();
        append(&root, &add("one")).unwrap();
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join(LOG))
            .unwrap();
        file.write_all(b"{\"add\":{\"nonce\":\"torn").unwrap();
        append(&root, &add("two")).unwrap();
        let contents = read(&root).unwrap();
        assert_eq!(contents.records, [add("one"), add("two")]);
        assert_eq!(contents.skipped, 1);
    }

    #[test]
    fn a_read_only_grant_appends_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(
            "state",
            dir.path().to_str().unwrap(),
            modsdk::RootKind::State,
            modsdk::Access::Read,
        )
        .unwrap();
        let err = append(&root, &add("one")).unwrap_err();
        assert_eq!(err.kind(), "denied", "{err}");
        assert!(!dir.path().join(LOG).exists());
    }
}

//! The files of one audit log, oldest first: `audit-1.jsonl`,
//! `audit-2.jsonl`, ..., then `audit.jsonl`.

use std::path::PathBuf;

use crate::home::{HomeLayout, rotated_audit_log_number};

/// Why the audit log could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("could not {doing} {}: {source}", .path.display())]
pub struct AuditError {
    /// What the host was doing (`append to`, `read`, `lock`, ...).
    pub doing: &'static str,
    pub path: PathBuf,
    pub source: std::io::Error,
}

impl AuditError {
    pub(crate) fn io(
        doing: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        AuditError {
            doing,
            path: path.into(),
            source,
        }
    }
}

/// One file of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogFile {
    /// The rotation number; `None` for `audit.jsonl`, the current file.
    pub rotated: Option<u64>,
    pub path: PathBuf,
}

impl LogFile {
    /// The file's name, as a report names it.
    pub(crate) fn name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// The rotated files of the log in `layout`'s home, oldest first, each
/// with its number. A missing `audit/` is an empty list.
pub(crate) fn rotated(layout: &HomeLayout) -> Result<Vec<LogFile>, AuditError> {
    let dir = layout.audit_dir();
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(AuditError::io("list", dir, e)),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| AuditError::io("list", &dir, e))?;
        if let Some(n) = entry
            .file_name()
            .to_str()
            .and_then(rotated_audit_log_number)
        {
            files.push(LogFile {
                rotated: Some(n),
                path: entry.path(),
            });
        }
    }
    files.sort_by_key(|f| f.rotated);
    Ok(files)
}

/// Every file of the log, oldest first: the rotated ones, then
/// `audit.jsonl` when it exists.
pub(crate) fn all(layout: &HomeLayout) -> Result<Vec<LogFile>, AuditError> {
    let mut files = rotated(layout)?;
    let current = layout.audit_log_path();
    if current.exists() {
        files.push(LogFile {
            rotated: None,
            path: current,
        });
    }
    Ok(files)
}

/// The last whole line of `content` (each line ending in `\n`), without
/// its newline; bytes after the last newline are not a line.
pub(crate) fn last_line(content: &[u8]) -> Option<&[u8]> {
    let end = content.iter().rposition(|&b| b == b'\n')?;
    let start = content[..end]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    Some(&content[start..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotated_files_come_in_number_order_then_the_current_one() {
        let dir = tempfile::tempdir().unwrap();
        let layout = HomeLayout::new(dir.path());
        assert!(all(&layout).unwrap().is_empty(), "no audit/ yet");
        std::fs::create_dir_all(layout.audit_dir()).unwrap();
        for n in [10, 2, 1] {
            std::fs::write(layout.rotated_audit_log_path(n), "").unwrap();
        }
        std::fs::write(layout.audit_log_path(), "").unwrap();
        std::fs::write(layout.audit_dir().join("notes.txt"), "").unwrap();
        let names: Vec<String> = all(&layout).unwrap().iter().map(LogFile::name).collect();
        assert_eq!(
            names,
            [
                "audit-1.jsonl",
                "audit-2.jsonl",
                "audit-10.jsonl",
                "audit.jsonl"
            ]
        );
    }

    #[test]
    fn the_last_line_is_the_last_one_ended_by_a_newline() {
        assert_eq!(last_line(b"a\nb\n"), Some(&b"b"[..]));
        assert_eq!(last_line(b"a\nb\ntorn"), Some(&b"b"[..]));
        assert_eq!(last_line(b"only\n"), Some(&b"only"[..]));
        assert_eq!(last_line(b"torn"), None);
        assert_eq!(last_line(b""), None);
    }
}

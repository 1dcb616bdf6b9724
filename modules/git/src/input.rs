//! Checks on what a caller passes to git, so that input can only ever be
//! what its field says: a revision or a path, never an option.
//!
//! This is one of two locks: the argument lists also put revisions after
//! `--end-of-options` and paths after `--`, so a value that passed these
//! checks still could not be read as an option.

use std::path::Path;

use modsdk::{ModError, clean_relative};

/// The longest revision accepted.
const MAX_REVISION: usize = 256;

/// A revision (`HEAD~2`, `main`, `v1.0..HEAD`, a hash): not empty, at most
/// 256 bytes, no leading `-`, no whitespace or control characters.
pub fn revision<'a>(field: &str, rev: &'a str) -> Result<&'a str, ModError> {
    let bad = rev.is_empty()
        || rev.len() > MAX_REVISION
        || rev.starts_with('-')
        || rev.chars().any(|c| c.is_whitespace() || c.is_control());
    if bad {
        return Err(ModError::invalid_input(format!(
            "{field} {rev:?} is not a revision: give a commit, branch, tag or expression like HEAD~2 or main..feature \
             (not starting with '-', no spaces, at most {MAX_REVISION} bytes)"
        )));
    }
    Ok(rev)
}

/// A path inside the workspace, `/`-separated; `..` and absolute paths are
/// refused as `path_escape`.
pub fn path(field: &str, path: &str) -> Result<String, ModError> {
    let clean = clean_relative(Path::new(path))
        .map_err(|why| ModError::path_escape(format!("{field} {path:?}: {why}")))?;
    let parts: Vec<_> = clean
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect();
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_never_pass_as_revisions() {
        for bad in [
            "--output=/tmp/x",
            "-c",
            "-ccore.pager=sh",
            "",
            "a b",
            "HEAD\n--all",
            &"a".repeat(257),
        ] {
            assert_eq!(
                revision("revision", bad).unwrap_err().kind(),
                "invalid_input",
                "{bad:?}"
            );
        }
        for good in [
            "HEAD",
            "HEAD~2",
            "main..feature",
            "v1.0^{commit}",
            "a1b2c3",
            "HEAD@{1}",
        ] {
            assert_eq!(revision("revision", good).unwrap(), good);
        }
    }

    #[test]
    fn paths_stay_inside() {
        assert_eq!(path("path", "./src//lib.rs").unwrap(), "src/lib.rs");
        assert_eq!(
            path("path", "-c").unwrap(),
            "-c",
            "after `--` a dash is a name"
        );
        for bad in ["../x", "/etc/passwd", "a/../../b"] {
            assert_eq!(
                path("path", bad).unwrap_err().kind(),
                "path_escape",
                "{bad:?}"
            );
        }
    }
}

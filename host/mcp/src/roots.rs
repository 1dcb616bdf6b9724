//! The client's roots (`roots/list`), and which one is the workspace.
//!
//! modhost grants one workspace per call, so of several roots the first
//! `file://` root that is an existing directory is taken (clients list the
//! folder the user opened first), and the server logs that the others are
//! not granted. A root that is not a directory here is skipped with its
//! reason, never granted as something else. A client that named roots
//! when none is usable gets no workspace at all (`CallWorkspace::Withheld`),
//! not the host's; one that lists none keeps the host's.
//!
//! A root is the client's word, so it is held to the rule the host's own
//! default workspace follows (`host::never_a_workspace`): `/` and the user's
//! home directory (or a folder holding it) are never a workspace (a module
//! writing there could write every file the user owns), and neither is any
//! directory that overlaps
//! the modhost home (an ancestor of it, it, or inside it): a module granted
//! that workspace could rewrite `config.toml`'s approval rules or an
//! installed module's bytes, and so run what the user never approved.

use std::path::PathBuf;

use serde_json::Value;

use modhost::never_a_workspace;

/// The workspace the client's roots name, from a `roots/list` result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientWorkspace {
    /// Canonical, and a directory.
    pub path: PathBuf,
    /// How many roots the client sent (more than one: the rest are not granted).
    pub offered: usize,
}

/// Why a `roots/list` result names no workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NoWorkspace {
    /// The client lists no roots: it names no folder (the host's stays).
    NoRoots,
    /// The client named roots and none may be granted (or the answer is
    /// malformed), for these reasons: its calls get no workspace.
    Refused(String),
}

/// The first usable root of a `roots/list` result, or why there is none.
/// `protected` are directories no workspace may overlap (the modhost home).
pub(crate) fn workspace_from_roots(
    result: &Value,
    protected: &[PathBuf],
) -> Result<ClientWorkspace, NoWorkspace> {
    let roots = result
        .get("roots")
        .and_then(Value::as_array)
        .ok_or_else(|| NoWorkspace::Refused("the roots/list result has no `roots` array".into()))?;
    let mut problems = Vec::new();
    for root in roots {
        let Some(uri) = root.get("uri").and_then(Value::as_str) else {
            problems.push("a root without a `uri`".to_owned());
            continue;
        };
        let Some(path) = file_uri_path(uri) else {
            problems.push(format!("{uri} is not a file:// URI of an absolute path"));
            continue;
        };
        match std::fs::canonicalize(&path) {
            Ok(path) if path.is_dir() => {
                let user_homes = modhost::user_homes();
                if let Some(why) = never_a_workspace(&path, user_homes, protected) {
                    problems.push(format!("{} is never granted: {why}", path.display()));
                    continue;
                }
                return Ok(ClientWorkspace {
                    path,
                    offered: roots.len(),
                });
            }
            Ok(path) => problems.push(format!("{} is not a directory", path.display())),
            Err(e) => problems.push(format!("{}: {e}", path.display())),
        }
    }
    if problems.is_empty() {
        return Err(NoWorkspace::NoRoots);
    }
    Err(NoWorkspace::Refused(problems.join("; ")))
}

/// The path of a `file://` URI (`file:///a%20b` is `/a b`); `None` for any
/// other scheme, a host other than empty or `localhost`, or bad escapes.
pub(crate) fn file_uri_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return None;
    }
    let mut bytes = Vec::with_capacity(rest.len());
    let mut input = rest.bytes();
    while let Some(b) = input.next() {
        if b == b'%' {
            let hex = [input.next()?, input.next()?];
            let hex = std::str::from_utf8(&hex).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
        } else if b == b'?' || b == b'#' {
            break;
        } else {
            bytes.push(b);
        }
    }
    if bytes.contains(&0) {
        return None;
    }
    use std::os::unix::ffi::OsStringExt;
    Some(PathBuf::from(std::ffi::OsString::from_vec(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn file_uris_become_paths_and_anything_else_is_refused() {
        assert_eq!(file_uri_path("file:///a%20b/c"), Some("/a b/c".into()));
        assert_eq!(file_uri_path("file://localhost/x"), Some("/x".into()));
        assert_eq!(file_uri_path("file://server/x"), None);
        assert_eq!(file_uri_path("https://x/y"), None);
        assert_eq!(file_uri_path("file:///a%2"), None);
        assert_eq!(file_uri_path("file:///a%00b"), None);
    }

    #[test]
    fn the_first_directory_root_is_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let first = dir.path().join("first");
        let second = dir.path().join("second");
        std::fs::create_dir_all(&first).unwrap();
        std::fs::create_dir_all(&second).unwrap();
        let uri = |p: &std::path::Path| format!("file://{}", p.display());
        let result = json!({"roots": [
            {"uri": uri(&dir.path().join("missing"))},
            {"uri": "https://example.com"},
            {"uri": uri(&first), "name": "first"},
            {"uri": uri(&second)},
        ]});
        let chosen = workspace_from_roots(&result, &[]).unwrap();
        assert_eq!(chosen.path, std::fs::canonicalize(&first).unwrap());
        assert_eq!(chosen.offered, 4);
        let none = workspace_from_roots(&json!({"roots": [{"uri": "https://x"}]}), &[]);
        assert!(
            matches!(&none, Err(NoWorkspace::Refused(why)) if why.contains("not a file:// URI")),
            "{none:?}"
        );
        assert_eq!(
            workspace_from_roots(&json!({"roots": []}), &[]),
            Err(NoWorkspace::NoRoots)
        );
    }
}

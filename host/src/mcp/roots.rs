//! The client's roots (`roots/list`), and which one is the workspace.
//!
//! modhost grants one workspace per call, so of several roots the first
//! `file://` root that is an existing directory is taken (clients list the
//! folder the user opened first), and the server logs that the others are
//! not granted. A root that is not a directory here is skipped with its
//! reason, never granted as something else.

use std::path::PathBuf;

use serde_json::Value;

/// The workspace the client's roots name, from a `roots/list` result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientWorkspace {
    /// Canonical, and a directory.
    pub path: PathBuf,
    /// How many roots the client sent (more than one: the rest are not granted).
    pub offered: usize,
}

/// The first usable root of a `roots/list` result, or why there is none.
pub fn workspace_from_roots(result: &Value) -> Result<ClientWorkspace, String> {
    let roots = result
        .get("roots")
        .and_then(Value::as_array)
        .ok_or("the roots/list result has no `roots` array")?;
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
        return Err("the client sent no roots".to_owned());
    }
    Err(problems.join("; "))
}

/// The path of a `file://` URI (`file:///a%20b` is `/a b`); `None` for any
/// other scheme, a host other than empty or `localhost`, or bad escapes.
pub fn file_uri_path(uri: &str) -> Option<PathBuf> {
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
        let chosen = workspace_from_roots(&result).unwrap();
        assert_eq!(chosen.path, std::fs::canonicalize(&first).unwrap());
        assert_eq!(chosen.offered, 4);
        let none = workspace_from_roots(&json!({"roots": [{"uri": "https://x"}]})).unwrap_err();
        assert!(none.contains("not a file:// URI"), "{none}");
        assert!(workspace_from_roots(&json!({"roots": []})).is_err());
    }
}

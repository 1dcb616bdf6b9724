//! Telling an MCP bundle from a module by its file name.

use std::path::Path;

/// Whether `path` names an MCP bundle (`.mcpb`, or the older `.dxt`).
pub fn is_bundle(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("mcpb") || e.eq_ignore_ascii_case("dxt"))
}

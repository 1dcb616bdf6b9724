//! The agent-facing tool name of a capability: THE single implementation.
//!
//! The host registers tools under this name and the conformance kit checks
//! that a module's names stay distinct under it; both must agree byte for
//! byte, so there is exactly one function.
//!
//! Providers accept tool names of at most 64 ASCII letters, digits, `_` and
//! `-`, and reject the whole request when one name is anything else, so one
//! module's odd capability id would take down every tool call. The name is
//! `<module>__<capability>` (the module prefix keeps two modules' `search`
//! apart); every character outside `[A-Za-z0-9_]` becomes `_` (`-` too, which
//! keeps the alphabet as small as the strictest provider's); a name past 64
//! characters is cut and given a digest suffix of the *unmangled* name, so
//! two long names that differ only past the cut, or only in mangled
//! characters, stay distinct. Short names that still collide after mangling
//! (`a.b` and `a-b`) are a conformance error, not silently disambiguated:
//! a name that depends on which capability was registered first would not be
//! stable.

use sha2::{Digest, Sha256};

/// The longest tool name providers accept.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// Hex digits of digest appended to a cut name.
const DIGEST_SUFFIX_LEN: usize = 8;

/// The name an agent sees for `capability_id` of `module_id`.
pub fn tool_name(module_id: &str, capability_id: &str) -> String {
    let raw = raw_tool_name(module_id, capability_id);
    let mangled: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if mangled.len() <= MAX_TOOL_NAME_LEN {
        return mangled;
    }
    let digest = Sha256::digest(raw.as_bytes());
    let suffix: String = digest
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()[..DIGEST_SUFFIX_LEN]
        .into();
    // `mangled` is pure ASCII by construction, so byte slicing is char slicing.
    let keep = MAX_TOOL_NAME_LEN - DIGEST_SUFFIX_LEN - 1;
    format!("{}_{suffix}", &mangled[..keep])
}

/// The name before mangling and cutting: what a person wrote.
pub fn raw_tool_name(module_id: &str, capability_id: &str) -> String {
    format!("{module_id}__{capability_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_module_and_capability_and_replaces_unsafe_characters() {
        assert_eq!(tool_name("files", "files.search"), "files__files_search");
        assert_eq!(tool_name("my-mod", "do it/now"), "my_mod__do_it_now");
        // Non-ASCII characters become one underscore each, never bytes.
        assert_eq!(tool_name("m", "caf\u{e9}"), "m__caf_");
        assert_eq!(tool_name("m", "Up_9"), "m__Up_9");
    }

    #[test]
    fn exactly_64_is_kept_whole() {
        let cap = "c".repeat(MAX_TOOL_NAME_LEN - "m__".len());
        let name = tool_name("m", &cap);
        assert_eq!(name.len(), MAX_TOOL_NAME_LEN);
        assert_eq!(name, format!("m__{cap}"));
    }

    #[test]
    fn long_names_are_cut_to_64_with_a_digest_suffix() {
        let long = "x".repeat(100);
        let name = tool_name("mod", &long);
        assert_eq!(name.len(), MAX_TOOL_NAME_LEN);
        assert!(name.starts_with("mod__xxx"));
        let (_, suffix) = name.rsplit_once('_').unwrap();
        assert_eq!(suffix.len(), DIGEST_SUFFIX_LEN);
        assert!(suffix.chars().all(|c| c.is_ascii_hexdigit()));
        // Stable across calls: the host and the kit compute it separately.
        assert_eq!(name, tool_name("mod", &long));
    }

    #[test]
    fn long_names_differing_past_the_cut_stay_distinct() {
        let a = format!("{}a", "x".repeat(80));
        let b = format!("{}b", "x".repeat(80));
        assert_ne!(tool_name("mod", &a), tool_name("mod", &b));
        // ...and so do long names differing only in mangled characters.
        let c = format!("{}.", "x".repeat(80));
        let d = format!("{}-", "x".repeat(80));
        assert_ne!(tool_name("mod", &c), tool_name("mod", &d));
    }

    #[test]
    fn short_names_differing_only_in_mangled_characters_collide() {
        // Not disambiguated on purpose; the static check reports it.
        assert_eq!(tool_name("m", "a.b"), tool_name("m", "a-b"));
    }
}

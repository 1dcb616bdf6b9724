//! What a module id may be: it names a folder under `modules/`, a tool
//! prefix and a key in `config.toml`, so it is kept to a safe alphabet.

/// Whether `id` is a valid module id: lowercase ASCII letters, digits, `-`
/// and `_`, starting with a letter, at most 64 characters.
pub fn is_module_id(id: &str) -> bool {
    id.len() <= 64
        && id.starts_with(|c: char| c.is_ascii_lowercase())
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

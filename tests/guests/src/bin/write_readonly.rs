//! Hostile: writes into a root granted read-only (`/roots/ro`): creates a file,
//! overwrites an existing one, removes one. Answers `denied` when every attempt
//! failed, or a result listing what got through.

use serde_json::json;

fn main() {
    let request = modhost_guests::read_request();
    type Attempt = fn() -> std::io::Result<()>;
    let attempts: [(&str, Attempt); 4] = [
        ("create", || {
            std::fs::write("/roots/ro/created.txt", b"pwned")
        }),
        ("overwrite", || {
            std::fs::write("/roots/ro/existing.txt", b"pwned")
        }),
        ("remove", || std::fs::remove_file("/roots/ro/existing.txt")),
        ("mkdir", || std::fs::create_dir("/roots/ro/newdir")),
    ];
    let succeeded: Vec<&str> = attempts
        .iter()
        .filter(|(_, attempt)| attempt().is_ok())
        .map(|(name, _)| *name)
        .collect();
    if succeeded.is_empty() {
        modhost_guests::answer_error(
            &request,
            "denied",
            "every write to the read-only root failed",
        );
    } else {
        modhost_guests::answer(&request, json!({"wrote": succeeded}));
    }
}

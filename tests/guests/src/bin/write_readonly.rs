//! Hostile: writes into its root `ro` (the workspace, granted read-only):
//! creates a file, overwrites an existing one, removes one, makes a directory.
//! Answers `denied` when every attempt failed, or a result listing what got
//! through.

use serde_json::json;

fn main() {
    let request =
        modhost_guests::serve(&json!([{"name": "ro", "kind": "workspace"}]), &["ro"], &[]);
    let root = modhost_guests::root_path(&request, "ro");
    let at = |name: &str| format!("{root}/{name}");
    let attempts: [(&str, std::io::Result<()>); 4] = [
        ("create", std::fs::write(at("created.txt"), b"pwned")),
        ("overwrite", std::fs::write(at("existing.txt"), b"pwned")),
        ("remove", std::fs::remove_file(at("existing.txt"))),
        ("mkdir", std::fs::create_dir(at("newdir"))),
    ];
    let succeeded: Vec<&str> = attempts
        .iter()
        .filter(|(_, result)| result.is_ok())
        .map(|(name, _)| *name)
        .collect();
    if succeeded.is_empty() {
        modhost_guests::answer_error(
            &request,
            "denied",
            "every write to the read-only root failed",
        );
    } else {
        modhost_guests::answer_output(&request, &json!({"wrote": succeeded}));
    }
}

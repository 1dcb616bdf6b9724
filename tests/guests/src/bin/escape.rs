//! Hostile: tries to leave its root `rw` (its state root, granted
//! read-write) by `..`, by an absolute path, and through a symlink the test
//! planted inside the root (`<rw>/link` pointing outside), both reading and
//! writing. Answers `path_escape` when every attempt failed, or a result
//! listing what got through. The test passes the outside path as
//! `input.outside`.

use serde_json::{Value, json};

fn main() {
    let request =
        modhost_guests::serve(&json!([{"name": "rw", "kind": "state"}]), &["rw"], &["rw"]);
    let outside = modhost_guests::input(&request)
        .get("outside")
        .and_then(Value::as_str)
        .unwrap_or("/etc/passwd")
        .to_owned();
    let root = modhost_guests::root_path(&request, "rw");
    let at = |rel: &str| format!("{root}/{rel}");
    let attempts: [(&str, std::io::Result<()>); 8] = [
        (
            "read ..",
            std::fs::read(at("../../../../etc/passwd")).map(drop),
        ),
        (
            "read ../sibling",
            std::fs::read(at("../outside.txt")).map(drop),
        ),
        ("read absolute", std::fs::read(&outside).map(drop)),
        ("write absolute", std::fs::write(&outside, b"pwned")),
        ("list /", std::fs::read_dir("/").map(drop)),
        ("read symlink", std::fs::read(at("link")).map(drop)),
        ("write symlink", std::fs::write(at("link"), b"pwned")),
        ("write ..", std::fs::write(at("../escaped.txt"), b"pwned")),
    ];
    let got_through: Vec<&str> = attempts
        .iter()
        .filter(|(_, result)| result.is_ok())
        .map(|(name, _)| *name)
        .collect();
    if got_through.is_empty() {
        modhost_guests::answer_error(
            &request,
            "path_escape",
            "every attempt to leave the root failed",
        );
    } else {
        modhost_guests::answer_output(&request, &json!({"escaped": got_through}));
    }
}

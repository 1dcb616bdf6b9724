//! Hostile: tries to leave its root (`/roots/rw`, granted read-write) by `..`,
//! by an absolute path, and through a symlink the test planted inside the
//! root (`/roots/rw/link` pointing outside), both reading and writing. Answers
//! `path_escape` when every attempt failed, or a result listing what got
//! through. The test passes the outside path as `params.outside`.

use serde_json::{Value, json};

fn main() {
    let request = modhost_guests::read_request();
    let outside = request
        .pointer("/params/outside")
        .and_then(Value::as_str)
        .unwrap_or("/etc/passwd")
        .to_owned();
    let mut got_through = Vec::new();
    let mut try_it = |name: &str, result: std::io::Result<()>| {
        if result.is_ok() {
            got_through.push(name.to_owned());
        }
    };
    try_it(
        "read ..",
        std::fs::read("/roots/rw/../../../../etc/passwd").map(drop),
    );
    try_it(
        "read ../sibling",
        std::fs::read("/roots/rw/../outside.txt").map(drop),
    );
    try_it("read absolute", std::fs::read(&outside).map(drop));
    try_it("write absolute", std::fs::write(&outside, b"pwned"));
    try_it("list /", std::fs::read_dir("/").map(drop));
    try_it("read symlink", std::fs::read("/roots/rw/link").map(drop));
    try_it("write symlink", std::fs::write("/roots/rw/link", b"pwned"));
    try_it(
        "write .. ",
        std::fs::write("/roots/rw/../escaped.txt", b"pwned"),
    );
    if got_through.is_empty() {
        modhost_guests::answer_error(
            &request,
            "path_escape",
            "every attempt to leave the root failed",
        );
    } else {
        modhost_guests::answer(&request, json!({"escaped": got_through}));
    }
}

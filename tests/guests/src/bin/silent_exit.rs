//! Hostile: writes to stderr and exits with status 3 without answering.
//!
//! WASI preview 2's `exit` carries only success or failure, so the host sees
//! status 1: what matters is that a non-zero exit without a response is a
//! crash.

fn main() {
    let _request = modhost_guests::serve(&serde_json::json!([]), &[], &[]);
    eprintln!("silent_exit: leaving without a word");
    std::process::exit(3);
}

//! Hostile: floods stdout with an endless line (never a newline, so no
//! response ever parses).

use std::io::Write;

fn main() {
    let _request = modhost_guests::serve(&serde_json::json!([]), &[], &[]);
    let chunk = [b'x'; 64 * 1024];
    let mut out = std::io::stdout().lock();
    loop {
        if out.write_all(&chunk).is_err() {
            // Keep trying: the host must stop us, not our politeness.
            continue;
        }
    }
}

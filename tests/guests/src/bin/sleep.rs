//! Hostile: blocks in a host call (a one-hour sleep), where epoch interruption
//! never fires; the host's deadline must still end it.

fn main() {
    let _request = modhost_guests::serve(&serde_json::json!([]), &[], &[]);
    std::thread::sleep(std::time::Duration::from_secs(3600));
    println!("woke up");
}

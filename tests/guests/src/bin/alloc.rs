//! Hostile: allocates (and touches) memory without end.

fn main() {
    let _request = modhost_guests::serve(&serde_json::json!([]), &[], &[]);
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        hoard.push(vec![0xA5; 1 << 20]);
        std::hint::black_box(&hoard);
    }
}

//! Hostile: right after reading its request, fills most of its memory in one
//! `memory.fill` (a single instruction, which epoch interruption cannot cut),
//! then spins.

fn main() {
    let _request = modhost_guests::serve(&serde_json::json!([]), &[], &[]);
    let hoard = vec![0xA5u8; 200 << 20];
    std::hint::black_box(&hoard);
    let mut counter: u64 = 0;
    loop {
        counter = std::hint::black_box(counter.wrapping_add(1));
    }
}

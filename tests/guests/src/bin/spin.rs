//! Hostile: spins forever in pure computation (no host calls), so only epoch
//! interruption can stop it.

fn main() {
    let _request = modhost_guests::serve(&serde_json::json!([]), &[], &[]);
    let mut counter: u64 = 0;
    loop {
        counter = std::hint::black_box(counter.wrapping_add(1));
    }
}

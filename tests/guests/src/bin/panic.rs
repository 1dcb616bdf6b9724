//! Hostile: panics after reading the request (on wasm32-wasip2 a panic aborts,
//! which is a trap).

fn main() {
    let _request = modhost_guests::serve(&serde_json::json!([]), &[], &[]);
    let nothing: Option<u8> = std::hint::black_box(None);
    panic!("guest gave up: {:?}", nothing.expect("deliberate panic"));
}

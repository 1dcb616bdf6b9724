//! Hostile: tries to carry state from one call into the next.
//!
//! Input `{"token": "<text>"}`. The guest reports what it finds of an
//! earlier call, then leaves its own traces for the next one:
//!
//! - `counter`: a `static` initialized to 7 in the data segment, read and then
//!   incremented (a reused instance would report 8 or more);
//! - `found`: whether the token, stored XORed with 0x5A (so the request's
//!   own copy of the token never matches), is anywhere in linear memory
//!   (a reused or unscrubbed memory would still hold it in the heap);
//! - `zeroed`: whether 1 MiB of memory grown past the allocator's reach
//!   (`memory.grow`, so the same addresses the last call filled) reads as
//!   zeros.
//!
//! Then it fills that grown MiB with the XORed token, leaks a copy in the
//! heap, checks that the probes above see these traces
//! (`own_traces_found`: they would see an earlier call's), and answers. Nothing here may survive into the next call.

// Reading linear memory that this call never wrote is the attack.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::json;

/// In the data segment (not .bss): a fresh instance starts it at 7.
static COUNTER: AtomicU32 = AtomicU32::new(7);

const SCRAMBLE: u8 = 0x5A;

fn main() {
    let request = modhost_guests::serve(&json!([]), &[], &[]);
    let input = modhost_guests::input(&request);
    let token = input
        .get("token")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("no token")
        .as_bytes()
        .to_vec();

    let counter = COUNTER.fetch_add(1, Ordering::SeqCst);
    let found = memory_holds_scrambled(&token);
    let scrambled: Vec<u8> = token.iter().map(|b| b ^ SCRAMBLE).collect();
    let zeroed = grown_pages_are_zero_then_fill(&scrambled);
    // A copy in the heap too, never freed.
    std::mem::forget(scrambled);
    // The same probes see this call's own traces: they would see an
    // earlier call's.
    let own_traces_found =
        memory_holds_scrambled(&token) && COUNTER.load(Ordering::SeqCst) == counter + 1;

    modhost_guests::answer_output(
        &request,
        &json!({"counter": counter, "found": found, "zeroed": zeroed, "own_traces_found": own_traces_found}),
    );
}

/// Whether `token`, each byte XORed with [`SCRAMBLE`], appears anywhere in
/// linear memory (compared byte by byte, never materialized).
fn memory_holds_scrambled(token: &[u8]) -> bool {
    if token.is_empty() {
        return false;
    }
    let read = |address: usize| {
        // SAFETY: wasm32 linear memory is readable from 1 up to its size.
        unsafe { std::ptr::read_volatile(address as *const u8) }
    };
    (1..memory_bytes().saturating_sub(token.len())).any(|start| {
        token
            .iter()
            .enumerate()
            .all(|(i, b)| read(start + i) == b ^ SCRAMBLE)
    })
}

/// Grow linear memory by 1 MiB outside the allocator, report whether it
/// reads as zeros, then fill it with `pattern`.
fn grown_pages_are_zero_then_fill(pattern: &[u8]) -> bool {
    const BYTES: usize = 1 << 20;
    let Some(start) = grow(BYTES) else {
        return true;
    };
    let region = start..start + BYTES;
    // SAFETY: the pages were just grown: this call owns them.
    let zeroed = region
        .clone()
        .all(|address| unsafe { std::ptr::read_volatile(address as *const u8) } == 0);
    for (address, byte) in region.zip(pattern.iter().cycle()) {
        // SAFETY: as above.
        unsafe { std::ptr::write_volatile(address as *mut u8, *byte) };
    }
    zeroed
}

/// The size of linear memory in bytes (0 when not built for wasm32).
fn memory_bytes() -> usize {
    #[cfg(target_arch = "wasm32")]
    return core::arch::wasm32::memory_size(0) * 65536;
    #[cfg(not(target_arch = "wasm32"))]
    return 0;
}

/// Grow linear memory by `bytes`: where the new bytes start (None when not
/// built for wasm32, or refused).
fn grow(bytes: usize) -> Option<usize> {
    #[cfg(target_arch = "wasm32")]
    {
        let pages = core::arch::wasm32::memory_grow(0, bytes / 65536);
        (pages != usize::MAX).then(|| pages * 65536)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = bytes;
        None
    }
}

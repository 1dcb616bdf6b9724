//! Pooled instance slots: what makes a fresh instance per call cheap.
//!
//! With wasmtime's default (on-demand) allocation every call mapped a new
//! linear memory, a new fiber stack and new tables, and unmapped them at its
//! end; and every page the guest touched was a page fault, every unmap a TLB
//! shootdown: most of a small component's call. The pooling allocator
//! reserves [`SLOTS`] of each up front and hands a call a slot that an
//! earlier call of the same component used, its copy-on-write memory image
//! still mapped and the pages it dirtied still resident.
//!
//! Design decisions:
//!
//! - **Still a fresh instance per call.** A slot is reset when its instance is
//!   dropped, before any other call can get it: every page of linear memory
//!   and tables the guest wrote (the kernel's `PAGEMAP_SCAN` lists them; 1
//!   MiB of them at most) is rewritten from the component's initial image or
//!   zeroed, and the rest is discarded (`madvise`), so memory reads as it did
//!   at instantiation and memory beyond the initial size reads as zeros.
//!   Globals and the instance's state are rebuilt on instantiation. The fiber
//!   stack is zeroed too (`async_stack_zeroing`): the guest cannot read it,
//!   but host calls of one call run on it and nothing of them should wait
//!   there for the next. Without `PAGEMAP_SCAN` (Linux before 6.7) all of it
//!   is discarded, as before, only slower.
//! - **Limits that cannot run out.** [`CallSlots`] lets at most [`SLOTS`] calls
//!   hold an instance at once (a call beyond waits, within its deadline), and
//!   the pool has room for [`SLOTS`] components each at the per-component
//!   maxima below, so an admitted call never meets an exhausted pool. A
//!   component beyond the per-component maxima is refused when it is loaded,
//!   with wasmtime's message naming the limit.
//! - **The memory cap stays the store's limiter.** Pool slots allow 4 GiB
//!   (all a 32-bit memory can address); the call's cap is enforced by
//!   `MemoryCap`, which sees every growth first and records the refusal, so
//!   it is still reported as `memory_limit`.
//! - **Bounds checked in code, no guard pages.** Every load and store the
//!   guest makes is checked against its memory's current size (Spectre
//!   safe, as wasmtime emits them), so no access outside linear memory
//!   depends on page protections; what that buys is a slot whose accessible
//!   extent need not be reset, and so no `mprotect` per call. Pages beyond
//!   a call's memory are still reset to zeros before the next call.
//! - **Address space, not memory.** Each memory slot reserves about 4 GiB of
//!   address space (no memory until touched): [`SLOTS`] ×
//!   [`MEMORIES_PER_COMPONENT`] slots are about 0.5 TiB of the 128 TiB a
//!   Linux x86-64 process can address.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::{Config, Enabled, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How many component calls may hold an instance at once: twice what one
/// `modhost mcp` client may run concurrently, so a second client or a
/// library caller does not queue behind it at once.
pub(super) const SLOTS: u32 = 32;

/// Per-component maxima: generous for what compilers emit (a Rust or C
/// `wasm32-wasip2` command has one memory, one or two tables and a handful of
/// core instances, adapter and shims included).
const CORE_INSTANCES_PER_COMPONENT: u32 = 32;
const MEMORIES_PER_COMPONENT: u32 = 4;
const TABLES_PER_COMPONENT: u32 = 16;
const TABLES_PER_MODULE: u32 = 4;
const MEMORIES_PER_MODULE: u32 = 2;

/// The most elements a table may grow to: the same bound the store's
/// limiter applies (tables hold references, not data).
pub(super) const TABLE_ELEMENTS: usize = 1 << 20;

/// How much of a slot's linear memory, tables and fiber stack is reset in
/// place (rewritten to the initial image or zeros) rather than discarded;
/// beyond this the rest is discarded (`madvise`). A small call dirties a
/// few hundred KiB of memory and a few KiB of stack.
const MEMORY_KEPT_RESIDENT: usize = 1 << 20;
const TABLE_KEPT_RESIDENT: usize = 64 << 10;
const STACK_KEPT_RESIDENT: usize = 64 << 10;

/// Switch `config` to pooled slots sized as above.
pub(super) fn use_pooled_slots(config: &mut Config) {
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(SLOTS)
        .total_core_instances(SLOTS * CORE_INSTANCES_PER_COMPONENT)
        .total_memories(SLOTS * MEMORIES_PER_COMPONENT)
        .total_tables(SLOTS * TABLES_PER_COMPONENT)
        .total_stacks(SLOTS)
        .max_core_instances_per_component(CORE_INSTANCES_PER_COMPONENT)
        .max_memories_per_component(MEMORIES_PER_COMPONENT)
        .max_tables_per_component(TABLES_PER_COMPONENT)
        .max_tables_per_module(TABLES_PER_MODULE)
        .max_memories_per_module(MEMORIES_PER_MODULE)
        .table_elements(TABLE_ELEMENTS);
    // Reset by rewriting what the guest dirtied, found by the kernel's
    // page map, instead of discarding it and faulting it back in on the
    // next call (page faults and TLB shootdowns were most of a small call).
    // Without the scan the first bytes would be rewritten blindly, which
    // costs more than it saves: then memory is only discarded.
    if PoolingAllocationConfig::is_pagemap_scan_available() {
        pool.pagemap_scan(Enabled::Yes)
            .linear_memory_keep_resident(MEMORY_KEPT_RESIDENT)
            .table_keep_resident(TABLE_KEPT_RESIDENT);
    }
    pool.async_stack_keep_resident(STACK_KEPT_RESIDENT);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    // Bounds checks in the compiled code rather than guard pages: a slot
    // then keeps its read/write extent from call to call. With guard
    // pages, every call that grew memory (the SDK's guests grow it by a
    // page to read their request) paid an `mprotect` to open the page and
    // another at reset to close it, each a TLB shootdown across the host's
    // threads: 7% of a call's CPU, against a few percent more time in the
    // guest's own code.
    config.signals_based_traps(false);
    config.memory_guard_size(0);
    config.async_stack_zeroing(true);
}

/// Admission to the pool: a call holds a [`CallSlot`] for as long as its
/// store (and so its instance) lives.
#[derive(Debug, Clone)]
pub(super) struct CallSlots {
    free: Arc<Semaphore>,
}

/// One admitted call; dropping it frees the slot.
#[derive(Debug)]
pub(super) struct CallSlot {
    _permit: OwnedSemaphorePermit,
}

impl CallSlots {
    pub(super) fn new() -> CallSlots {
        CallSlots {
            free: Arc::new(Semaphore::new(SLOTS as usize)),
        }
    }

    /// A free slot, if there is one now.
    pub(super) fn try_acquire(&self) -> Option<CallSlot> {
        let permit = Arc::clone(&self.free).try_acquire_owned().ok()?;
        Some(CallSlot { _permit: permit })
    }

    /// How many slots are free now.
    pub(super) fn free(&self) -> usize {
        self.free.available_permits()
    }

    /// Wait for a free slot.
    pub(super) async fn acquire(&self) -> CallSlot {
        let permit = Arc::clone(&self.free)
            .acquire_owned()
            .await
            .expect("the call slots' semaphore is never closed");
        CallSlot { _permit: permit }
    }
}

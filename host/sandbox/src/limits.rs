//! The resource limits of one native call and the constants they are built
//! from. Preparation in the parent, the clone child and the support report
//! all read them, so they sit below all three.

/// Resource limits of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceLimits {
    /// Processes the module's user may have. Counted per user by the kernel,
    /// so this is the user's current count plus a margin (see `process_cap` in `lib.rs`).
    pub processes: u64,
    /// The largest file the module may write, in bytes.
    pub file_size: u64,
}

/// The largest file a module may write: 1 GiB.
pub const MAX_FILE_SIZE: u64 = 1 << 30;

/// How many more processes than the user already runs a call may create.
pub const PROCESS_MARGIN: u64 = 256;

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

/// The memory one native call may use, all its processes together, unless
/// `config.toml` says otherwise (`[limits] native_memory_bytes`, or per
/// module): 2 GiB.
///
/// Sized for the machines this host is written for, 24 GiB and 2 cores:
///
/// - **Room for what modules really do.** A Python or Node module loading
///   a large file, `git` walking a big repository, a language server's
///   index: hundreds of MiB, rarely a GiB. Node sizes its heap from the
///   cgroup's limit, so it lives within 2 GiB rather than dying at it.
/// - **A few at once still leave the machine standing.** An MCP client
///   runs at most 16 calls at once, but on 2 cores a handful are busy at
///   a time: four calls at their limit are 8 GiB, a third of the machine,
///   leaving the operator's editor, browser and agent (and the kernel's
///   page cache) the rest. A module that needs more is a module the
///   operator knows about and raises the limit for, by name.
/// - **Far below what invites the kernel's OOM killer onto the host.**
///   The measurement that opened issue 39 was a module taking 3 GiB in one
///   call; at 2 GiB that call stops, alone, at the limit.
pub const DEFAULT_NATIVE_MEMORY_BYTES: u64 = 2 << 30;

/// `bytes` as a person reads a limit: "256 MiB", "2 GiB", "1.5 GiB",
/// "1000 bytes".
pub fn bytes_in_words(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (size, unit) in UNITS {
        if bytes >= size {
            return if bytes.is_multiple_of(size) {
                format!("{} {unit}", bytes / size)
            } else {
                format!("{:.1} {unit}", bytes as f64 / size as f64)
            };
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    #[test]
    fn limits_read_as_people_write_them() {
        use super::bytes_in_words;
        assert_eq!(bytes_in_words(super::DEFAULT_NATIVE_MEMORY_BYTES), "2 GiB");
        assert_eq!(bytes_in_words(256 << 20), "256 MiB");
        assert_eq!(bytes_in_words(3 << 29), "1.5 GiB");
        assert_eq!(bytes_in_words(1000), "1000 bytes");
    }
}

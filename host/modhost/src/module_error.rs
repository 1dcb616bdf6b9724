//! Why a module is broken: the one error value discovery, the contract
//! gate and the describe cache share, below all three.

use serde::Serialize;

/// Why a module is broken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModuleError {
    /// Machine-readable: a `RunError::kind` (`timeout`, `crashed`,
    /// `bad_response`, ...) or one of `describe_failed`, `bad_descriptor`,
    /// `id_mismatch`, `duplicate_id`, `no_executable`, `ambiguous_executable`,
    /// `missing`, `contract_refused`, `nonconforming` (see `contract.rs`).
    pub kind: modproto::ErrorKind,
    pub message: String,
}

//! Why a tool call did not run at all, as opposed to ran and failed.

use crate::approval::Refusal;

/// Why a tool call did not run at all (as opposed to ran and failed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("no tool named {0:?}; `modhost tools` lists them")]
    UnknownTool(String),
    #[error(transparent)]
    Refused(#[from] Refusal),
}

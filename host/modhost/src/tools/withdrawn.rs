//! A tool an earlier load offered and the current one does not: a client
//! that calls it is told why, and nothing runs.

use super::call_error::CallError;
use super::execute::{self, InvokeFailure, ToolOutcome};
use super::tool_def::ToolDef;
use crate::approval::Refusal;

/// A tool an earlier load offered and this one does not, and why.
#[derive(Debug, Clone)]
pub(crate) struct Withdrawn {
    pub tool: ToolDef,
    pub why: Why,
}

/// Why a tool is gone: an operator override (a refusal), or the module's
/// standing (disabled, unpinned, changed, broken, removed).
#[derive(Debug, Clone)]
pub(crate) enum Why {
    Refused(Refusal),
    Failed(InvokeFailure),
}

impl Withdrawn {
    /// The answer to a call of this tool: the reason, nothing run.
    pub(crate) fn answer(&self) -> Result<ToolOutcome, CallError> {
        match &self.why {
            Why::Refused(refusal) => Err(CallError::Refused(refusal.clone())),
            Why::Failed(failure) => Ok(ToolOutcome::failure(execute::failure_text(
                &self.tool, failure,
            ))),
        }
    }
}

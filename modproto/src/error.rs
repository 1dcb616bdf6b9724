//! The machine-readable `error.data` of an error response.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error_kind::ErrorKind;

/// The `data` member of a modhost error: what kind of failure, and what a
/// person can do about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorData {
    /// Machine-readable kind ([`crate::error_kind`]): a module's
    /// ([`crate::ModuleErrorKind`]) or the host's ([`crate::HostErrorKind`]).
    pub kind: ErrorKind,
    /// One sentence a person can act on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remedy: Option<String>,
    /// Every individual problem, when there are several (schema violations).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// Anything else the sender wants to say; kept, never interpreted.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ErrorData {
    pub fn new(kind: impl Into<ErrorKind>, remedy: impl Into<String>) -> Self {
        ErrorData {
            kind: kind.into(),
            remedy: Some(remedy.into()),
            problems: Vec::new(),
            extra: Map::new(),
        }
    }

    pub fn with_problems(mut self, problems: Vec<String>) -> Self {
        self.problems = problems;
        self
    }
}

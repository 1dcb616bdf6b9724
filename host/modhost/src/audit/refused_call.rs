//! A call refused before the invoke pipeline saw it, as its refuser
//! reports it to the audit log: an approval rule at the toolbox's gate or
//! `modhost invoke`'s, an MCP server's own bounds (too many calls at once,
//! a question it cannot or may not ask, a user's no).

/// One refused call. Only what the refuser knows is given; the host adds
/// the time, the principal (the local user unless named) and the input's
/// digest.
#[derive(Debug, Clone)]
pub struct RefusedCall<'a> {
    /// The tool name as the caller named it.
    pub tool: &'a str,
    /// The module and capability the tool stands for, when it is known.
    pub module: Option<&'a str>,
    pub capability: Option<&'a str>,
    /// The digest of the module's approved bytes, when known.
    pub digest: Option<&'a str>,
    /// The caller's arguments (only their digest is recorded).
    pub input: &'a serde_json::Value,
    /// Why, as a kind: `approval_required`, `denied`, `disabled`,
    /// `rate_limited`, ...
    pub kind: modproto::ErrorKind,
    /// The rule (or the server's bound) that refused, in the host's words.
    pub rule: Option<&'a str>,
    /// Who answered no, when someone was asked (`user`).
    pub by: Option<&'a str>,
    /// Seconds after which a quota's refusal may be retried.
    pub retry_after_s: Option<u64>,
    /// The caller; `None` is the local user.
    pub principal: Option<&'a str>,
}

impl<'a> RefusedCall<'a> {
    /// A refusal of `tool` with `input`, of `kind`, with nothing else known.
    pub fn new(tool: &'a str, input: &'a serde_json::Value, kind: modproto::ErrorKind) -> Self {
        RefusedCall {
            tool,
            module: None,
            capability: None,
            digest: None,
            input,
            kind,
            rule: None,
            by: None,
            retry_after_s: None,
            principal: None,
        }
    }
}

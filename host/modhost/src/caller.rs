//! Who a call is made for: a principal and the scopes it was granted.
//!
//! `modhost invoke`, the library and `modhost mcp` on stdio act for the
//! local user ([`Caller::local`]); `modhost mcp --http` authenticates each
//! request (a static bearer token or an OAuth access token) and names its
//! caller. Approval rules and tool filtering can name principals and
//! scopes (`principal`, `scope`, `without_scope` in `[[approval.rules]]`,
//! see `crate::approval`); the audit log and `[quotas]` count by the
//! principal.
//!
//! Design decisions:
//!
//! - **A caller is named by whoever authenticated it, never by itself.**
//!   There is no command-line flag that makes a local user another
//!   principal: the audit log must not say a remote principal called what
//!   the local user did.
//! - **A principal is matched, never matching.** Approval rules match the
//!   principal with a glob; the principal itself is plain text, so a name
//!   holding `*` or `?` matches only the globs its literal characters
//!   match. Scopes are compared whole and exactly.
//! - **The local user has no scopes**, so no scope matcher restricts it;
//!   only a rule naming its principal (`local:*`, `local:alice`) does.

use std::collections::BTreeSet;
use std::sync::OnceLock;

/// One caller of the host's tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// `local:<user>` for the local user; for an HTTP caller, the name the
    /// operator gave its token, or `oauth:<issuer>#<subject>`.
    pub principal: String,
    /// The scopes the caller was granted (a token's); empty for the local
    /// user, whom no scope rule restricts.
    pub scopes: BTreeSet<String>,
    /// Whether the caller is the local user (stdio, `invoke`, the library).
    pub local: bool,
}

impl Caller {
    /// The local user (`crate::audit::local_principal`).
    pub fn local() -> Caller {
        Caller {
            principal: crate::audit::local_principal().to_owned(),
            scopes: BTreeSet::new(),
            local: true,
        }
    }

    /// An authenticated remote caller.
    pub fn remote(
        principal: impl Into<String>,
        scopes: impl IntoIterator<Item = String>,
    ) -> Caller {
        Caller {
            principal: principal.into(),
            scopes: scopes.into_iter().collect(),
            local: false,
        }
    }

    /// The local user, made once: for the paths that decide for the local
    /// user on every call without building a caller each time.
    pub(crate) fn the_local_user() -> &'static Caller {
        static LOCAL: OnceLock<Caller> = OnceLock::new();
        LOCAL.get_or_init(Caller::local)
    }

    /// Whether this is exactly [`Caller::local`]: the caller the toolbox
    /// decided each tool's verdict for when it registered it, so its
    /// verdicts need no second look.
    pub(crate) fn is_the_local_user(&self) -> bool {
        self.local && self.scopes.is_empty() && self.principal == crate::audit::local_principal()
    }

    /// The principal a call names, `None` for the local user (whom the
    /// pipeline names itself: `crate::audit::local_principal`).
    pub(crate) fn principal_unless_local(&self) -> Option<&str> {
        (!self.is_the_local_user()).then_some(self.principal.as_str())
    }

    /// Whether the caller holds `scope`, compared whole and exactly. The
    /// local user holds none.
    pub(crate) fn holds(&self, scope: &str) -> bool {
        !self.local && self.scopes.contains(scope)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_user_holds_no_scope_and_a_remote_caller_only_its_own() {
        let local = Caller::local();
        assert!(local.is_the_local_user());
        assert!(Caller::the_local_user().is_the_local_user());
        assert!(!local.holds(""));
        // A remote caller claiming the local user's name is not the local
        // user: its verdicts are decided for it.
        let claims = Caller::remote(local.principal.clone(), []);
        assert!(!claims.is_the_local_user());
        let remote = Caller::remote("ci-bot", ["files:write".to_owned()]);
        assert!(remote.holds("files:write"));
        for near in ["files:*", "files:write ", "FILES:WRITE", "files", ""] {
            assert!(!remote.holds(near), "{near:?}");
        }
        // A local caller never holds a scope, even one it was given.
        let odd = Caller {
            local: true,
            ..remote.clone()
        };
        assert!(!odd.holds("files:write"));
        assert!(!odd.is_the_local_user());
    }
}

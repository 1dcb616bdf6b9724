//! Why a request was not let in, as the client reads it: a status and a
//! `WWW-Authenticate` challenge (RFC 6750 §3, RFC 9728 §5.1).
//!
//! Design decisions:
//!
//! - **No credentials: a bare challenge.** A request without a token gets
//!   401 with `resource_metadata` (where to learn how to get one) and the
//!   `scope` a token needs, but no `error`: RFC 6750 §3.1 asks for none when
//!   the request carried no authentication at all. Every rejected token is
//!   `error="invalid_token"` (401), a token without the required scopes
//!   `error="insufficient_scope"` with the scopes (403), and a malformed
//!   request (two `Authorization` headers, a token in the query string)
//!   `error="invalid_request"` (400). A server with no authentication
//!   refuses another local account's request with 403 and a bare
//!   challenge: no token it could send would be accepted.
//! - **Descriptions say what was wrong with the token, never the token.**
//!   Expired, another resource's, an unknown key: what the client can act
//!   on. Nothing from the token itself is quoted, and every parameter is
//!   cut to the characters a quoted string may hold, so no header can be
//!   injected through one.

use http::StatusCode;

/// What kind of refusal, with its RFC 6750 error code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RefusalKind {
    /// No bearer token at all (401, no error code).
    Missing,
    /// A token that does not let anyone in (401 `invalid_token`).
    InvalidToken,
    /// A good token without the scopes needed (403 `insufficient_scope`).
    InsufficientScope,
    /// A malformed request (400 `invalid_request`).
    InvalidRequest,
    /// Nothing configured, and the request is not the local user's, or
    /// whose it is cannot be told (403, no error code: no token helps).
    NotTheLocalUser,
}

/// A request refused by the [`Authenticator`](super::Authenticator).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthRefusal {
    pub(crate) kind: RefusalKind,
    /// What was wrong, for the client and the log.
    pub(crate) description: Option<String>,
    /// The protected resource metadata's URL, when the server has one.
    pub(crate) resource_metadata: Option<String>,
    /// The scopes a token needs (space-separated), when any are required.
    pub(crate) scope: Option<String>,
}

impl AuthRefusal {
    /// The response's status: 401, 403 or 400.
    pub fn status(&self) -> StatusCode {
        match self.kind {
            RefusalKind::Missing | RefusalKind::InvalidToken => StatusCode::UNAUTHORIZED,
            RefusalKind::InsufficientScope | RefusalKind::NotTheLocalUser => StatusCode::FORBIDDEN,
            RefusalKind::InvalidRequest => StatusCode::BAD_REQUEST,
        }
    }

    /// The `WWW-Authenticate` header's value.
    pub fn www_authenticate(&self) -> String {
        let mut params: Vec<(&str, String)> = Vec::new();
        if let Some(url) = &self.resource_metadata {
            params.push(("resource_metadata", url.clone()));
        }
        let error = match self.kind {
            RefusalKind::Missing | RefusalKind::NotTheLocalUser => None,
            RefusalKind::InvalidToken => Some("invalid_token"),
            RefusalKind::InsufficientScope => Some("insufficient_scope"),
            RefusalKind::InvalidRequest => Some("invalid_request"),
        };
        if let Some(error) = error {
            params.push(("error", error.to_owned()));
        }
        if let Some(scope) = &self.scope
            && self.kind != RefusalKind::InvalidRequest
        {
            params.push(("scope", scope.clone()));
        }
        if let Some(description) = &self.description
            && error.is_some()
        {
            params.push(("error_description", description.clone()));
        }
        let params: Vec<String> = params
            .into_iter()
            .map(|(name, value)| format!("{name}=\"{}\"", quotable(&value)))
            .collect();
        if params.is_empty() {
            "Bearer".to_owned()
        } else {
            format!("Bearer {}", params.join(", "))
        }
    }

    /// What was wrong, in words (also the challenge's `error_description`).
    pub fn description(&self) -> &str {
        self.description
            .as_deref()
            .unwrap_or("no bearer token: send `Authorization: Bearer <token>`")
    }
}

impl std::fmt::Display for AuthRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status().as_u16(), self.description())
    }
}

impl std::error::Error for AuthRefusal {}

/// `text` cut to what an RFC 6750 quoted parameter may hold (%x20-21,
/// %x23-5B, %x5D-7E): a `"`, `\`, control or non-ASCII character becomes
/// `'`, `/` or `?`.
fn quotable(text: &str) -> String {
    text.chars()
        .take(300)
        .map(|c| match c {
            '"' => '\'',
            '\\' => '/',
            ' '..='~' => c,
            _ => '?',
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(kind: RefusalKind, description: Option<&str>) -> AuthRefusal {
        AuthRefusal {
            kind,
            description: description.map(str::to_owned),
            resource_metadata: Some(
                "https://mcp.example.com/.well-known/oauth-protected-resource/mcp".into(),
            ),
            scope: Some("mcp:tools files:read".into()),
        }
    }

    #[test]
    fn each_kind_has_its_status_and_challenge() {
        let missing = refusal(RefusalKind::Missing, None);
        assert_eq!(missing.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(
            missing.www_authenticate(),
            "Bearer resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\", \
             scope=\"mcp:tools files:read\""
        );
        let invalid = refusal(RefusalKind::InvalidToken, Some("the token has expired"));
        assert_eq!(invalid.status(), StatusCode::UNAUTHORIZED);
        assert!(
            invalid
                .www_authenticate()
                .ends_with("error=\"invalid_token\", scope=\"mcp:tools files:read\", error_description=\"the token has expired\""),
            "{}",
            invalid.www_authenticate()
        );
        let scope = refusal(RefusalKind::InsufficientScope, Some("needs more"));
        assert_eq!(scope.status(), StatusCode::FORBIDDEN);
        assert!(
            scope
                .www_authenticate()
                .contains("error=\"insufficient_scope\"")
        );
        let bad = refusal(RefusalKind::InvalidRequest, Some("two headers"));
        assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
        assert!(bad.www_authenticate().contains("error=\"invalid_request\""));
        assert!(!bad.www_authenticate().contains("scope="));
    }

    /// A description can never end the quoted string, start a new header
    /// or smuggle bytes a client's parser chokes on.
    #[test]
    fn a_description_cannot_break_out_of_its_quotes() {
        let hostile = refusal(
            RefusalKind::InvalidToken,
            Some("x\", error=\"none\r\nSet-Cookie: a=b\\é"),
        );
        let header = hostile.www_authenticate();
        assert!(http::HeaderValue::from_str(&header).is_ok(), "{header}");
        assert_eq!(header.matches('"').count() % 2, 0, "{header}");
        assert!(!header.contains("error=\"none\""), "{header}");
        assert!(!header.contains('\r') && !header.contains('\n'), "{header}");
    }
}

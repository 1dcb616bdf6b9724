//! Who an HTTP request is from: `modhost mcp --http`'s authentication.
//!
//! Every request to the MCP endpoint goes through
//! `Authenticator::authenticate_request` before its body is read. It
//! yields the [`Caller`] that approval rules, tool filtering, quotas and
//! the audit log then name, or an [`AuthRefusal`] the transport sends as
//! is (status and `WWW-Authenticate`).
//!
//! Two kinds of credential, both `Authorization: Bearer`:
//!
//! - **Static tokens** (`[[http.tokens]]`, `static_tokens.rs`): the
//!   operator lists each token's sha256 with a principal name and scopes;
//!   `modhost token new` makes them (`new_token.rs`).
//! - **OAuth 2.1 access tokens** (`[http.oauth]`, `jwt.rs`): JWTs from the
//!   operator's authorization server, checked against its JWKS (`jwks.rs`,
//!   `key_set.rs`) for signature, issuer, audience (this server's
//!   canonical URL) and time. The caller is `oauth:<issuer>#<subject>`.
//!
//! Design decisions:
//!
//! - **One door.** The MCP specification wants authorization on every
//!   request; the transport calls this for each, and nothing else in the
//!   server reads `Authorization`. The token is consumed here: it is
//!   never logged, never put in a `Caller`, never forwarded to a module
//!   (modules get no request headers at all).
//! - **Static tokens first, then OAuth.** A digest lookup costs one
//!   sha256; only a token that is no static token and has a JWT's shape
//!   reaches the JWT checks (and possibly the network, for keys).
//! - **Scopes: the token's, closed under `[http.implied_scopes]`.**
//!   `[http.oauth] required_scopes` applies to OAuth tokens (403
//!   `insufficient_scope` naming all of them at once, as the specification
//!   asks); a static token carries exactly what the operator wrote for it.
//! - **Nothing configured: the local user, and only the local user.**
//!   Without `[[http.tokens]]` or `[http.oauth]` a request is
//!   [`Caller::local`], like stdio, when its connection comes from a
//!   socket of the account the server runs as; the transport serves only
//!   the loopback then ([`Authenticator::is_configured`]). Every account
//!   of the machine reaches the loopback, so the client socket's owner is
//!   looked up in the kernel's socket tables (`../peer_uid.rs`): another
//!   account's request, or one whose account cannot be told, is refused
//!   (403, saying to configure tokens), never served as the operator.
//! - **Refused is refused.** An expired, forged, foreign or unverifiable
//!   token is a 401 whatever the reason, an unreachable JWKS included:
//!   nothing here fails open, and nothing here panics on a client's bytes.
//!
//! # API
//!
//! [`Authenticator`] (built from `modhost::http_config::HttpConfig`),
//! [`AuthRefusal`], [`AuthConfigError`]; [`NewStaticToken`] (what
//! `modhost token new` prints) with [`NewTokenError`].

#[cfg(test)]
mod attack_tests;
mod bearer;
mod config_error;
mod jwks;
mod jwt;
mod key_set;
mod metadata;
mod new_token;
mod refusal;
mod static_tokens;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;

use http::{HeaderMap, Uri};
use serde_json::Value;

use modhost::Caller;
use modhost::http_config::HttpConfig;

pub use config_error::AuthConfigError;
pub use new_token::{MIN_OWN_TOKEN_LEN, NewStaticToken, NewTokenError, TOKEN_PREFIX};
pub use refusal::AuthRefusal;

use super::peer_uid::PeerSocket;
use bearer::Presented;
use jwks::JwksSettings;
use jwt::JwtVerifier;
use metadata::ResourceMetadata;
use refusal::RefusalKind;
use static_tokens::StaticTokens;

/// What a refusal of a caller the server cannot name says to do.
const CONFIGURE_TOKENS: &str = "To serve other accounts, configure [[http.tokens]] \
     (`modhost token new --principal NAME` prints one) or [http.oauth] in config.toml";

/// Decides who each HTTP request is from.
#[derive(Debug)]
pub struct Authenticator {
    http: HttpConfig,
    tokens: StaticTokens,
    oauth: Option<JwtVerifier>,
    required_scopes: Vec<String>,
    metadata: Option<ResourceMetadata>,
}

impl Authenticator {
    /// The authenticator `[http]` describes. Nothing is fetched yet: the
    /// JWKS is read when the first OAuth token needs it.
    pub fn new(http: &HttpConfig) -> Result<Authenticator, AuthConfigError> {
        Authenticator::with_settings(http, JwksSettings::default())
    }

    pub(crate) fn with_settings(
        http: &HttpConfig,
        settings: JwksSettings,
    ) -> Result<Authenticator, AuthConfigError> {
        let problems = http.problems();
        if !problems.is_empty() {
            return Err(AuthConfigError::Invalid(problems.join("; ")));
        }
        let oauth = match (&http.oauth, &http.canonical_url) {
            (Some(oauth), Some(canonical)) => Some(JwtVerifier::new(oauth, canonical, settings)?),
            // `problems` refuses OAuth without a canonical URL.
            _ => None,
        };
        Ok(Authenticator {
            http: http.clone(),
            tokens: StaticTokens::new(&http.tokens)?,
            oauth,
            required_scopes: http
                .oauth
                .as_ref()
                .map(|o| o.required_scopes.clone())
                .unwrap_or_default(),
            metadata: metadata::of(http),
        })
    }

    /// Whether callers must authenticate (static tokens or OAuth). The
    /// transport serves beyond the loopback only when they must.
    pub fn is_configured(&self) -> bool {
        !self.tokens.is_empty() || self.oauth.is_some()
    }

    /// The caller of a request with `headers`, or why it is refused.
    ///
    /// This cannot see a token in the query string: prefer
    /// `Self::authenticate_request` wherever the URI is at hand.
    ///
    /// With nothing configured a request is refused here: only its
    /// connection can say whether it is the local user's
    /// (`Self::authenticate_request`).
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, AuthRefusal> {
        if !self.is_configured() {
            return Err(self.refusal(
                RefusalKind::NotTheLocalUser,
                Some(format!(
                    "this server serves only the account it runs as, and cannot tell which \
                     account the request is from. {CONFIGURE_TOKENS}"
                )),
            ));
        }
        match bearer::presented(headers) {
            Presented::Nothing => Err(self.refusal(RefusalKind::Missing, None)),
            Presented::BadRequest(why) => {
                Err(self.refusal(RefusalKind::InvalidRequest, Some(why.to_owned())))
            }
            Presented::Malformed(why) => {
                Err(self.refusal(RefusalKind::InvalidToken, Some(why.to_owned())))
            }
            Presented::Token(token) => self.caller_of(token).await,
        }
    }

    /// The caller of a request for `uri` with `headers` over the
    /// connection `peer`: refused (400) when the query string carries a
    /// token, else as [`Self::authenticate`]; with nothing configured, the
    /// local user when the connection's client socket is the server's own
    /// account's, else refused (403), as it is when that cannot be told.
    pub(crate) async fn authenticate_request(
        &self,
        uri: &Uri,
        headers: &HeaderMap,
        peer: Option<&PeerSocket>,
    ) -> Result<Caller, AuthRefusal> {
        if !self.is_configured() {
            return self.the_local_user_over(peer);
        }
        if let Some(why) = bearer::token_in_query(uri.query()) {
            return Err(self.refusal(RefusalKind::InvalidRequest, Some(why.to_owned())));
        }
        self.authenticate(headers).await
    }

    /// [`Caller::local`] when the client socket of `peer` belongs to the
    /// account this server runs as; refused otherwise (fail closed).
    fn the_local_user_over(&self, peer: Option<&PeerSocket>) -> Result<Caller, AuthRefusal> {
        let ours = rustix::process::geteuid().as_raw();
        let refused = |why: String| {
            Err(self.refusal(
                RefusalKind::NotTheLocalUser,
                Some(format!(
                    "this server has no [http] authentication, so it serves only the account it \
                     runs as (uid {ours}); {why}. {CONFIGURE_TOKENS}"
                )),
            ))
        };
        let Some(peer) = peer else {
            return refused("the request's connection is not known".into());
        };
        match peer.uid() {
            Ok(uid) if uid == ours => Ok(Caller::local()),
            Ok(uid) => {
                tracing::warn!(peer = %peer.peer(), uid, "refused a request from another local account");
                refused(format!("this connection is from uid {uid}"))
            }
            Err(e) => {
                tracing::warn!(peer = %peer.peer(), "refused a request whose local account is unknown: {e}");
                refused(format!(
                    "it cannot tell which account this connection is from: {e}"
                ))
            }
        }
    }

    /// Fetch the authorization server's keys now, when OAuth is configured
    /// and they were never fetched: call it once at the server's start, so
    /// a wrong `jwks_uri` or CA is a warning in the log at once rather than
    /// at the first caller, who then does not wait for the keys. A failure
    /// refuses nothing by itself (tokens are refused until a fetch works).
    pub async fn prefetch_keys(&self) {
        if let Some(oauth) = &self.oauth {
            oauth.prefetch_keys().await;
        }
    }

    /// The RFC 9728 protected resource metadata document, when the server
    /// has a canonical URL and authentication.
    pub fn protected_resource_metadata(&self) -> Option<Value> {
        self.metadata.as_ref().map(|m| m.document.clone())
    }

    /// Where the challenge says the metadata is (absolute URL).
    pub fn resource_metadata_url(&self) -> Option<&str> {
        self.metadata.as_ref().map(|m| m.url.as_str())
    }

    /// The request paths the metadata is served at: the path-inserted
    /// well-known path of the canonical URL (RFC 9728 §3.1), and the root
    /// one. Empty without metadata.
    pub fn protected_resource_metadata_paths(&self) -> &[String] {
        self.metadata.as_ref().map_or(&[], |m| m.paths.as_slice())
    }

    async fn caller_of(&self, token: &str) -> Result<Caller, AuthRefusal> {
        if let Some(entry) = self.tokens.find(token) {
            return Ok(Caller::remote(
                entry.principal.clone(),
                self.http.scope_closure(entry.scopes.iter().cloned()),
            ));
        }
        let Some(oauth) = self.oauth.as_ref().filter(|_| jwt::looks_like_jwt(token)) else {
            return Err(self.refusal(
                RefusalKind::InvalidToken,
                Some("the token is not one this server accepts".into()),
            ));
        };
        let verified = oauth
            .verify(token)
            .await
            .map_err(|why| self.refusal(RefusalKind::InvalidToken, Some(why)))?;
        let scopes = self.http.scope_closure(verified.scopes);
        let missing: Vec<&str> = self
            .required_scopes
            .iter()
            .filter(|s| !scopes.contains(*s))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            tracing::debug!(principal = %verified.principal, ?missing, "a token without the required scopes");
            return Err(self.refusal(
                RefusalKind::InsufficientScope,
                Some(format!("the token lacks the scope {}", missing.join(" "))),
            ));
        }
        Ok(Caller::remote(verified.principal, scopes))
    }

    fn refusal(&self, kind: RefusalKind, description: Option<String>) -> AuthRefusal {
        AuthRefusal {
            kind,
            description,
            resource_metadata: self.resource_metadata_url().map(str::to_owned),
            scope: (!self.required_scopes.is_empty()).then(|| self.required_scopes.join(" ")),
        }
    }

    /// The JWKS fetches started (tests: the refetch bounds).
    #[cfg(test)]
    pub(crate) fn jwks_fetches(&self) -> u64 {
        self.oauth.as_ref().map_or(0, JwtVerifier::jwks_fetches)
    }
}

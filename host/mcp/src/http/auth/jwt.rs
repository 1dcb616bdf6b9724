//! OAuth 2.1 access tokens as JWTs (RFC 9068), checked as a resource
//! server must (OAuth 2.1 §5.2, RFC 8707, the MCP authorization spec).
//!
//! A token lets its caller in when, in this order:
//!
//! 0. its `typ`, if any, says access token (`at+jwt`, `application/at+jwt`
//!    or `JWT`): a logout token, security event or DPoP proof the issuer
//!    signed is no access token (RFC 8725 §3.11, RFC 9068 §4);
//! 1. it is a JWS whose `alg` is an asymmetric algorithm (never `none`,
//!    never HMAC: `jsonwebtoken` has no `none`, and HMAC is refused before
//!    any key is looked at);
//! 2. the authorization server's JWKS has its key (`kid`), and that key
//!    allows that algorithm (`key_set.rs`);
//! 3. the signature verifies with that key;
//! 4. `iss` is `[http.oauth] issuer` exactly; `exp` has not passed and
//!    `nbf` has (each with `leeway_seconds` of clock skew); `sub` is there
//!    and holds no character that prints as nothing or reorders the text
//!    (so no principal reads as another in a log or beside a rule);
//! 5. `aud` (a string or a list) names this server's `canonical_url`
//!    (scheme and host compared without case, as the MCP spec asks): a
//!    token minted for another resource is refused, which is what stops
//!    a token from being replayed here by another server it was given to.
//!
//! The caller is `oauth:<iss>#<sub>`, its scopes those of `scope`
//! (space-separated, RFC 9068) or `scp` (a list or a string, as some
//! authorization servers write it). Claims beyond these are not read, and
//! the token goes nowhere after this check: modules never see it.

use std::collections::BTreeSet;
use std::sync::Arc;

use jsonwebtoken::Validation;
use jsonwebtoken::errors::ErrorKind;
use serde_json::Value;

use modhost::http_config::{OAuthConfig, is_scope_byte};

use super::config_error::AuthConfigError;
use super::jwks::{JwksCache, JwksSettings, KeyError};

/// The most scopes read from one token.
const MAX_SCOPES: usize = 256;

/// The longest `sub` accepted.
const MAX_SUBJECT_LEN: usize = 255;

/// A token that passed: who it is for and what it grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VerifiedToken {
    pub(crate) principal: String,
    pub(crate) scopes: BTreeSet<String>,
}

/// The checks of one issuer's tokens for one resource.
#[derive(Debug)]
pub(crate) struct JwtVerifier {
    issuer: String,
    /// `canonical_url`, scheme and host in lowercase.
    audience: String,
    leeway: u64,
    jwks: Arc<JwksCache>,
}

impl JwtVerifier {
    pub(crate) fn new(
        oauth: &OAuthConfig,
        canonical_url: &str,
        settings: JwksSettings,
    ) -> Result<JwtVerifier, AuthConfigError> {
        let jwks = JwksCache::new(&oauth.jwks_uri, oauth.jwks_ca_file.as_deref(), settings)?;
        Ok(JwtVerifier {
            issuer: oauth.issuer.clone(),
            audience: normalized_resource(canonical_url),
            leeway: oauth.leeway_seconds,
            jwks: Arc::new(jwks),
        })
    }

    /// The JWKS fetches started so far.
    #[cfg(test)]
    pub(crate) fn jwks_fetches(&self) -> u64 {
        self.jwks.fetches()
    }

    /// Fetch the keys now (see `JwksCache::prefetch`).
    pub(crate) async fn prefetch_keys(&self) {
        self.jwks.prefetch().await;
    }

    /// Check `token`; the reason, for the client, when it is refused.
    pub(crate) async fn verify(&self, token: &str) -> Result<VerifiedToken, String> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| {
            "the token is not a signed JWT this server accepts (its header or algorithm is not one)"
                .to_owned()
        })?;
        if !is_access_token_type(header.typ.as_deref()) {
            return Err(
                "the token is typed as another kind of JWT (typ), not an access token (at+jwt)"
                    .into(),
            );
        }
        if header.alg.family() == jsonwebtoken::AlgorithmFamily::Hmac {
            return Err(
                "the token is signed with a shared secret (HMAC); only the authorization server's public keys are accepted"
                    .into(),
            );
        }
        let key = self
            .jwks
            .key_for(header.kid.as_deref(), header.alg)
            .await
            .map_err(|e| {
                match e {
                    KeyError::Unknown => "the token's signing key (kid) is not one the authorization server publishes",
                    KeyError::WrongAlgorithm => "the token's algorithm is not the one its key is for",
                    KeyError::Ambiguous => "the token names no key (kid) and the authorization server publishes several",
                    KeyError::Unavailable => "the authorization server's keys could not be fetched, so the token cannot be checked; try again later",
                }
                .to_owned()
            })?;
        let mut validation = Validation::new(header.alg);
        validation.algorithms = vec![header.alg];
        validation.leeway = self.leeway;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        // The audience is compared below, without case on scheme and host.
        validation.validate_aud = false;
        validation.set_required_spec_claims(&["exp", "iss", "sub", "aud"]);
        validation.set_issuer(&[&self.issuer]);
        let claims = jsonwebtoken::decode::<Value>(token, &key.key, &validation)
            .map_err(|e| rejection(e.kind()))?
            .claims;
        if !self.names_this_resource(claims.get("aud")) {
            return Err(
                "the token is for another resource: its audience (aud) is not this server's canonical URL; \
                 ask the authorization server for a token with resource set to it"
                    .into(),
            );
        }
        let subject = claims
            .get("sub")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty() && s.len() <= MAX_SUBJECT_LEN)
            .ok_or("the token's subject (sub) is not a short string")?;
        if subject.chars().any(is_invisible) {
            return Err(
                "the token's subject (sub) holds an invisible, control or reordering character"
                    .into(),
            );
        }
        Ok(VerifiedToken {
            principal: format!("oauth:{}#{subject}", self.issuer),
            scopes: scopes_of(&claims),
        })
    }

    fn names_this_resource(&self, aud: Option<&Value>) -> bool {
        let matches = |v: &Value| {
            v.as_str()
                .is_some_and(|a| normalized_resource(a) == self.audience)
        };
        match aud {
            Some(Value::Array(list)) => list.iter().any(matches),
            Some(one) => matches(one),
            None => false,
        }
    }
}

/// Whether a JWS header's `typ` says "access token": RFC 9068's
/// `at+jwt` (with or without `application/`), the generic `JWT` many
/// authorization servers still write, or none. Any other type (a logout
/// token, a security event, a DPoP proof, an ID token typed as one) is
/// another kind of JWT the issuer signed for another purpose (RFC 8725
/// §3.11). Media types compare without case (RFC 7515 §4.1.9).
fn is_access_token_type(typ: Option<&str>) -> bool {
    let Some(typ) = typ else {
        return true;
    };
    let typ = typ.to_ascii_lowercase();
    let typ = typ.strip_prefix("application/").unwrap_or(&typ);
    matches!(typ, "at+jwt" | "jwt")
}

/// Whether `c` prints as nothing or reorders what follows: control
/// characters (Cc), format characters (Cf: zero-width, joiners, bidi
/// marks and overrides, the BOM, tags, interlinear annotations), and the
/// fillers and variation selectors that render blank. A principal holding
/// one reads as another (`admin` + U+200B looks like `admin`) in the
/// audit log, the request log and a rule, so such a subject is refused.
pub(crate) fn is_invisible(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{0600}'..='\u{0605}' | '\u{06DD}'
            | '\u{070F}' | '\u{0890}' | '\u{0891}' | '\u{08E2}' | '\u{115F}' | '\u{1160}'
            | '\u{17B4}' | '\u{17B5}' | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}' | '\u{FFF0}'..='\u{FFFB}'
            | '\u{110BD}' | '\u{110CD}' | '\u{13430}'..='\u{1343F}'
            | '\u{1BCA0}'..='\u{1BCA3}' | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}')
}

/// The client's reason for a `jsonwebtoken` refusal.
fn rejection(kind: &ErrorKind) -> String {
    match kind {
        ErrorKind::InvalidSignature => "the token's signature does not verify".into(),
        ErrorKind::ExpiredSignature => "the token has expired".into(),
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".into(),
        ErrorKind::InvalidIssuer => "the token was issued by another issuer (iss)".into(),
        ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => {
            "the token's algorithm is not the one its key is for".into()
        }
        ErrorKind::MissingRequiredClaim(claim) => format!("the token has no {claim} claim"),
        ErrorKind::InvalidClaimFormat(claim) => format!("the token's {claim} claim is malformed"),
        _ => "the token is malformed".into(),
    }
}

/// The scopes of `scope` (space-separated) and `scp` (a list or a string).
fn scopes_of(claims: &Value) -> BTreeSet<String> {
    let mut words: Vec<&str> = Vec::new();
    if let Some(scope) = claims.get("scope").and_then(Value::as_str) {
        words.extend(scope.split(' '));
    }
    match claims.get("scp") {
        Some(Value::String(scp)) => words.extend(scp.split(' ')),
        Some(Value::Array(list)) => words.extend(list.iter().filter_map(Value::as_str)),
        _ => {}
    }
    words
        .into_iter()
        .filter(|w| !w.is_empty() && w.len() <= 128 && w.bytes().all(is_scope_byte))
        .take(MAX_SCOPES)
        .map(str::to_owned)
        .collect()
}

/// `url` with its scheme and host in lowercase (the MCP spec: accept
/// either case there); the rest compared exactly.
pub(crate) fn normalized_resource(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    format!(
        "{}://{}{tail}",
        scheme.to_ascii_lowercase(),
        authority.to_ascii_lowercase()
    )
}

/// Whether `token` has a JWS compact shape (three base64url parts).
pub(crate) fn looks_like_jwt(token: &str) -> bool {
    let parts: Vec<&str> = token.split('.').collect();
    parts.len() == 3
        && parts[..2].iter().all(|p| !p.is_empty())
        && parts.iter().all(|p| {
            p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scopes_come_from_scope_or_scp_and_malformed_ones_are_dropped() {
        let claims = json!({"scope": "mcp:tools  files:read", "scp": ["a", "b\"c", 3]});
        assert_eq!(
            scopes_of(&claims),
            BTreeSet::from(["a", "files:read", "mcp:tools"].map(str::to_owned))
        );
        assert_eq!(
            scopes_of(&json!({"scp": "x y"})),
            BTreeSet::from(["x", "y"].map(str::to_owned))
        );
        assert!(scopes_of(&json!({})).is_empty());
    }

    #[test]
    fn the_resource_compares_without_case_on_scheme_and_host_only() {
        assert_eq!(
            normalized_resource("HTTPS://MCP.Example.com/MCP"),
            "https://mcp.example.com/MCP"
        );
        assert_ne!(
            normalized_resource("https://mcp.example.com/mcp/"),
            normalized_resource("https://mcp.example.com/mcp")
        );
    }

    #[test]
    fn only_access_token_types_are_access_tokens() {
        for typ in [
            None,
            Some("at+jwt"),
            Some("application/AT+JWT"),
            Some("JWT"),
            Some("jwt"),
        ] {
            assert!(is_access_token_type(typ), "{typ:?}");
        }
        for typ in [
            "logout+jwt",
            "dpop+jwt",
            "secevent+jwt",
            "",
            "at+jwt ",
            "application/",
        ] {
            assert!(!is_access_token_type(Some(typ)), "{typ:?}");
        }
    }

    #[test]
    fn invisible_and_reordering_characters_are_named() {
        for c in [
            '\u{200B}',
            '\u{FEFF}',
            '\u{202E}',
            '\u{2066}',
            '\u{E0041}',
            '\u{7}',
            '\u{AD}',
        ] {
            assert!(is_invisible(c), "{c:?}");
        }
        for c in ['a', 'é', '日', ' ', '-', '@', '|'] {
            assert!(!is_invisible(c), "{c:?}");
        }
    }

    #[test]
    fn a_jwt_has_three_base64url_parts() {
        assert!(looks_like_jwt("eyJh.eyJz.c2ln"));
        assert!(looks_like_jwt("eyJh.eyJz."));
        assert!(!looks_like_jwt("mht_abc"));
        assert!(!looks_like_jwt("a.b"));
        assert!(!looks_like_jwt("a.b.c.d"));
        assert!(!looks_like_jwt("a+.b.c"));
    }
}

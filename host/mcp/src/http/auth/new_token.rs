//! A new static bearer token and the `[[http.tokens]]` lines that admit
//! it: what `modhost token new` prints, so no operator hashes by hand.
//!
//! Design decisions:
//!
//! - **256 random bits from the operating system**, base64url, behind the
//!   prefix [`TOKEN_PREFIX`] so secret scanners and people recognise one
//!   in a log or a commit.
//! - **The token is never stored.** Only its digest goes to `config.toml`;
//!   the token is printed once, and lost is revoked (remove its line) and
//!   made anew.
//! - **An operator's own token** (from a secret manager) can be hashed
//!   instead ([`NewStaticToken::for_token`]); it must be at least
//!   [`MIN_OWN_TOKEN_LEN`] characters, about 128 bits if random, since its
//!   digest is all that guards it.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use modhost::http_config::{check_principal, check_scope};

use super::bearer::MAX_TOKEN_BYTES;
use super::static_tokens::digest_hex;

/// What every token `modhost token new` makes starts with.
pub const TOKEN_PREFIX: &str = "mht_";

/// The shortest token of an operator's own that is hashed.
pub const MIN_OWN_TOKEN_LEN: usize = 32;

/// A static token and its `[[http.tokens]]` entry. `Debug` never shows
/// the token.
#[derive(Clone, PartialEq, Eq)]
pub struct NewStaticToken {
    /// The token (for the client's `Authorization: Bearer`).
    pub token: String,
    /// The caller it names.
    pub principal: String,
    /// Its lowercase hex sha256 (what `config.toml` holds).
    pub sha256: String,
    /// The scopes it grants.
    pub scopes: Vec<String>,
}

impl std::fmt::Debug for NewStaticToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewStaticToken")
            .field("principal", &self.principal)
            .field("sha256", &self.sha256)
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

/// Why no token was made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NewTokenError {
    #[error("principal {principal:?}: {why}")]
    Principal { principal: String, why: String },
    #[error("scope {scope:?} {why}")]
    Scope { scope: String, why: String },
    #[error("the token given {0}")]
    Token(String),
    #[error("the operating system gave no random bytes: {0}")]
    Random(String),
}

impl NewStaticToken {
    /// A fresh random token for `principal` with `scopes`.
    pub fn generate(principal: &str, scopes: &[String]) -> Result<NewStaticToken, NewTokenError> {
        check(principal, scopes)?;
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| NewTokenError::Random(e.to_string()))?;
        let token = format!("{TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes));
        Ok(NewStaticToken::entry(token, principal, scopes))
    }

    /// The entry for a token the operator already has.
    pub fn for_token(
        token: &str,
        principal: &str,
        scopes: &[String],
    ) -> Result<NewStaticToken, NewTokenError> {
        check(principal, scopes)?;
        let token = token.trim();
        if token.len() < MIN_OWN_TOKEN_LEN {
            return Err(NewTokenError::Token(format!(
                "is {} characters: at least {MIN_OWN_TOKEN_LEN} are needed (or let `modhost token new` make one)",
                token.len()
            )));
        }
        if token.len() > MAX_TOKEN_BYTES
            || !token.bytes().all(|b| {
                b.is_ascii_alphanumeric()
                    || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/' | b'=')
            })
        {
            return Err(NewTokenError::Token(
                "is not a bearer token: letters, digits and -._~+/= only (RFC 6750)".into(),
            ));
        }
        Ok(NewStaticToken::entry(token.to_owned(), principal, scopes))
    }

    fn entry(token: String, principal: &str, scopes: &[String]) -> NewStaticToken {
        NewStaticToken {
            sha256: digest_hex(&token),
            token,
            principal: principal.to_owned(),
            scopes: scopes.to_vec(),
        }
    }

    /// The `[[http.tokens]]` table to add to `config.toml`. Principal and
    /// scopes were checked: none holds a `"` or `\`, so plain quotes are
    /// exact TOML strings.
    pub fn toml_lines(&self) -> String {
        let scopes: Vec<String> = self.scopes.iter().map(|s| format!("\"{s}\"")).collect();
        format!(
            "[[http.tokens]]\nprincipal = \"{}\"\nsha256 = \"{}\"\nscopes = [{}]\n",
            self.principal,
            self.sha256,
            scopes.join(", ")
        )
    }
}

fn check(principal: &str, scopes: &[String]) -> Result<(), NewTokenError> {
    check_principal(principal).map_err(|why| NewTokenError::Principal {
        principal: principal.to_owned(),
        why,
    })?;
    for scope in scopes {
        check_scope(scope).map_err(|why| NewTokenError::Scope {
            scope: scope.clone(),
            why,
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use modhost::config::Config;

    /// What `modhost token new` prints is a `config.toml` the loader
    /// accepts, and that token, and only it, is then let in.
    #[test]
    fn the_printed_lines_admit_the_printed_token() {
        let made = NewStaticToken::generate("ci-bot", &["mcp:tools".into()]).unwrap();
        assert!(made.token.starts_with(TOKEN_PREFIX));
        assert_eq!(made.token.len(), TOKEN_PREFIX.len() + 43);
        let config =
            Config::parse(&made.toml_lines(), std::path::Path::new("/h/config.toml")).unwrap();
        let tokens = super::super::static_tokens::StaticTokens::new(&config.http.tokens).unwrap();
        assert_eq!(tokens.find(&made.token).unwrap().principal, "ci-bot");
        let other = NewStaticToken::generate("ci-bot", &[]).unwrap();
        assert_ne!(other.token, made.token);
        assert!(tokens.find(&other.token).is_none());
        assert!(!format!("{made:?}").contains(&made.token));
    }

    #[test]
    fn reserved_or_malformed_names_scopes_and_short_tokens_are_refused() {
        assert!(matches!(
            NewStaticToken::generate("oauth:x", &[]),
            Err(NewTokenError::Principal { .. })
        ));
        assert!(matches!(
            NewStaticToken::generate("ci", &["a\"b".into()]),
            Err(NewTokenError::Scope { .. })
        ));
        assert!(matches!(
            NewStaticToken::for_token("short", "ci", &[]),
            Err(NewTokenError::Token(_))
        ));
        assert!(matches!(
            NewStaticToken::for_token(&"a b".repeat(20), "ci", &[]),
            Err(NewTokenError::Token(_))
        ));
        let own = "x".repeat(MIN_OWN_TOKEN_LEN);
        let made = NewStaticToken::for_token(&format!("{own}\n"), "ci", &[]).unwrap();
        assert_eq!(made.token, own);
        assert_eq!(made.sha256, digest_hex(&own));
    }
}

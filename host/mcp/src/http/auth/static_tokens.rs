//! Static bearer tokens (`[[http.tokens]]`): a token lets its caller in
//! when its sha256 is one the operator listed.
//!
//! Design decision: **every digest is compared, in constant time.** The
//! presented token is hashed once and compared against each listed digest
//! with `subtle`, the match chosen without a branch, so how long the check
//! takes says nothing about which digest, or how much of one, matched.

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};
use subtle::{Choice, ConditionallySelectable, ConstantTimeEq};

use modhost::http_config::StaticToken;

use super::config_error::AuthConfigError;

/// One listed token.
#[derive(Debug)]
pub(crate) struct Entry {
    digest: [u8; 32],
    pub(crate) principal: String,
    pub(crate) scopes: BTreeSet<String>,
}

/// The listed tokens.
#[derive(Debug, Default)]
pub(crate) struct StaticTokens {
    entries: Vec<Entry>,
}

impl StaticTokens {
    /// The tokens of `[[http.tokens]]` (already checked by the config's
    /// loader; a digest that is not 64 hex digits is refused again here).
    pub(crate) fn new(tokens: &[StaticToken]) -> Result<StaticTokens, AuthConfigError> {
        let entries = tokens
            .iter()
            .map(|token| {
                let digest = decode_digest(&token.sha256).ok_or_else(|| {
                    AuthConfigError::Token(format!(
                        "[[http.tokens]] principal {:?}: sha256 must be 64 hex digits",
                        token.principal
                    ))
                })?;
                Ok(Entry {
                    digest,
                    principal: token.principal.clone(),
                    scopes: token.scopes.iter().cloned().collect(),
                })
            })
            .collect::<Result<_, AuthConfigError>>()?;
        Ok(StaticTokens { entries })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry whose digest is `token`'s.
    pub(crate) fn find(&self, token: &str) -> Option<&Entry> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = Choice::from(0);
        let mut index = 0u32;
        for (i, entry) in self.entries.iter().enumerate() {
            let equal = digest.ct_eq(&entry.digest);
            index.conditional_assign(&(i as u32), equal);
            found |= equal;
        }
        bool::from(found).then(|| &self.entries[index as usize])
    }
}

/// 64 hex digits (either case) as 32 bytes.
pub(crate) fn decode_digest(hex: &str) -> Option<[u8; 32]> {
    // Checked first: `from_str_radix` would take a `+` sign.
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in hex.as_bytes().chunks(2).enumerate() {
        let text = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

/// The lowercase hex sha256 of `token`, as `[[http.tokens]]` lists it.
pub(crate) fn digest_hex(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(pairs: &[(&str, &str)]) -> StaticTokens {
        let tokens: Vec<StaticToken> = pairs
            .iter()
            .map(|(principal, token)| StaticToken {
                principal: (*principal).into(),
                sha256: digest_hex(token),
                scopes: vec!["mcp:tools".into()],
            })
            .collect();
        StaticTokens::new(&tokens).unwrap()
    }

    #[test]
    fn the_token_whose_digest_is_listed_names_its_principal() {
        let tokens = listed(&[
            ("ci", "token-one"),
            ("cd", "token-two"),
            ("ops", "token-three"),
        ]);
        assert_eq!(tokens.find("token-two").unwrap().principal, "cd");
        assert_eq!(tokens.find("token-one").unwrap().principal, "ci");
        assert_eq!(tokens.find("token-three").unwrap().principal, "ops");
        assert!(tokens.find("token-four").is_none());
        assert!(tokens.find("").is_none());
        // The digest itself is not the token.
        assert!(tokens.find(&digest_hex("token-one")).is_none());
    }

    #[test]
    fn an_uppercase_digest_is_the_same_digest_and_a_short_one_is_refused() {
        let token = StaticToken {
            principal: "ci".into(),
            sha256: digest_hex("abc").to_uppercase(),
            scopes: vec![],
        };
        let tokens = StaticTokens::new(std::slice::from_ref(&token)).unwrap();
        assert_eq!(tokens.find("abc").unwrap().principal, "ci");
        let short = StaticToken {
            sha256: "abcd".into(),
            ..token
        };
        assert!(StaticTokens::new(&[short]).is_err());
    }

    #[test]
    fn no_listed_token_lets_nothing_in() {
        assert!(StaticTokens::default().find("anything").is_none());
    }
}

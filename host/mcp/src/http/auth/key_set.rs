//! The authorization server's signing keys, from its JWKS document, as
//! keys a token may be checked with, each with the algorithms it allows.
//!
//! Design decisions:
//!
//! - **The key decides the algorithm, never the token.** A key allows the
//!   one algorithm its JWK names (`alg`), else those of its type (RSA:
//!   RS*/PS*; EC: the curve's ES256 or ES384; OKP Ed25519: EdDSA). A
//!   token whose `alg` its key does not allow is refused before any
//!   signature check: `none` is no algorithm at all here, and HMAC never
//!   is, so a token "signed" with the public key as an HMAC secret (the
//!   classic confusion) has nothing to be checked against.
//! - **A `kid` names a key together with the token's algorithm.** Keys
//!   of different types may share a `kid` (RFC 7517 §4.5); a token is
//!   checked with the key of its `kid` that allows its `alg`, and refused
//!   when none does.
//! - **Symmetric keys are dropped.** A JWKS is public: an `oct` key in it
//!   would let anyone who read the set sign tokens.
//! - **Weak or foreign keys are dropped, the set kept.** An RSA key under
//!   2048 bits, an encryption key (`use: "enc"`), a key whose `key_ops`
//!   exclude `verify`, an unknown type or curve: skipped with a log line,
//!   so one odd key does not take down the server's OAuth.
//! - **Bounded.** At most [`MAX_KEYS`] keys are kept.

use base64::Engine;
use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyOperations, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;
use std::sync::Arc;

/// The most keys kept from one JWKS.
pub(crate) const MAX_KEYS: usize = 64;

/// The smallest RSA modulus accepted, in bits.
const MIN_RSA_BITS: usize = 2048;

/// A key a token may be verified with.
pub(crate) struct VerificationKey {
    pub(crate) kid: Option<String>,
    pub(crate) algorithms: Vec<Algorithm>,
    pub(crate) key: DecodingKey,
}

impl std::fmt::Debug for VerificationKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerificationKey")
            .field("kid", &self.kid)
            .field("algorithms", &self.algorithms)
            .finish_non_exhaustive()
    }
}

/// The usable keys of one JWKS document.
#[derive(Debug, Default)]
pub(crate) struct KeySet {
    keys: Vec<Arc<VerificationKey>>,
}

/// What a lookup found.
#[derive(Debug)]
pub(crate) enum Lookup<'a> {
    Found(&'a Arc<VerificationKey>),
    /// No key with that `kid` (or none for that algorithm, without a `kid`).
    Unknown,
    /// The key named does not allow the token's algorithm.
    WrongAlgorithm,
    /// No `kid`, and several keys could have signed it.
    Ambiguous,
}

impl KeySet {
    /// Parse a JWKS document (`{"keys": [...]}`); the reason when it is not one.
    pub(crate) fn parse(document: &[u8]) -> Result<KeySet, String> {
        let value: Value =
            serde_json::from_slice(document).map_err(|e| format!("the JWKS is not JSON: {e}"))?;
        let Some(entries) = value.get("keys").and_then(Value::as_array) else {
            return Err("the JWKS has no \"keys\" array".into());
        };
        let mut keys = Vec::new();
        for entry in entries {
            if keys.len() == MAX_KEYS {
                tracing::warn!("the JWKS lists more than {MAX_KEYS} keys; the rest are ignored");
                break;
            }
            match usable(entry) {
                Ok(key) => keys.push(Arc::new(key)),
                Err(why) => {
                    let kid = entry.get("kid").and_then(Value::as_str).unwrap_or("");
                    tracing::info!(kid, "a JWKS key is not used: {why}");
                }
            }
        }
        Ok(KeySet { keys })
    }

    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// The key for a token with `kid` and `alg`.
    pub(crate) fn lookup(&self, kid: Option<&str>, alg: Algorithm) -> Lookup<'_> {
        match kid {
            // RFC 7517 §4.5: keys of different types may share a `kid`
            // (alternatives); the one that allows the token's algorithm is
            // the one it names. Each key still decides its algorithms.
            Some(kid) => {
                let mut named = self
                    .keys
                    .iter()
                    .filter(|k| k.kid.as_deref() == Some(kid))
                    .peekable();
                if named.peek().is_none() {
                    return Lookup::Unknown;
                }
                match named.find(|k| k.algorithms.contains(&alg)) {
                    Some(key) => Lookup::Found(key),
                    None => Lookup::WrongAlgorithm,
                }
            }
            None => {
                let mut fitting = self.keys.iter().filter(|k| k.algorithms.contains(&alg));
                match (fitting.next(), fitting.next()) {
                    (None, _) => Lookup::Unknown,
                    (Some(key), None) => Lookup::Found(key),
                    (Some(_), Some(_)) => Lookup::Ambiguous,
                }
            }
        }
    }
}

/// `entry` as a verification key, or why it is not used.
fn usable(entry: &Value) -> Result<VerificationKey, String> {
    let jwk: Jwk = serde_json::from_value(entry.clone()).map_err(|e| format!("not a JWK: {e}"))?;
    if matches!(jwk.common.public_key_use, Some(ref u) if *u != PublicKeyUse::Signature) {
        return Err("not a signing key (use is not \"sig\")".into());
    }
    if let Some(ops) = &jwk.common.key_operations
        && !ops.contains(&KeyOperations::Verify)
    {
        return Err("its key_ops do not include \"verify\"".into());
    }
    let declared = jwk
        .common
        .key_algorithm
        .map(|alg| Algorithm::try_from(alg).map_err(|_| format!("its alg {alg:?} signs nothing")))
        .transpose()?;
    let family: Vec<Algorithm> = match &jwk.algorithm {
        AlgorithmParameters::RSA(rsa) => {
            let bits = modulus_bits(&rsa.n).ok_or("its RSA modulus is not base64url")?;
            if bits < MIN_RSA_BITS {
                return Err(format!(
                    "an RSA key of {bits} bits (at least {MIN_RSA_BITS} are needed)"
                ));
            }
            vec![
                Algorithm::RS256,
                Algorithm::RS384,
                Algorithm::RS512,
                Algorithm::PS256,
                Algorithm::PS384,
                Algorithm::PS512,
            ]
        }
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => vec![Algorithm::ES256],
            EllipticCurve::P384 => vec![Algorithm::ES384],
            ref other => return Err(format!("the curve {other:?} is not supported")),
        },
        AlgorithmParameters::OctetKeyPair(okp) => match okp.curve {
            EllipticCurve::Ed25519 => vec![Algorithm::EdDSA],
            ref other => return Err(format!("the curve {other:?} is not supported")),
        },
        AlgorithmParameters::OctetKey(_) => {
            return Err(
                "a symmetric (oct) key in a public key set would let anyone who reads it sign"
                    .into(),
            );
        }
        _ => return Err("an unknown key type".into()),
    };
    let algorithms = match declared {
        Some(alg) if family.contains(&alg) => vec![alg],
        Some(alg) => return Err(format!("its alg {alg:?} does not fit its key type")),
        None => family,
    };
    let key =
        DecodingKey::from_jwk(&jwk).map_err(|e| format!("its parameters are malformed: {e}"))?;
    Ok(VerificationKey {
        kid: jwk.common.key_id.clone(),
        algorithms,
        key,
    })
}

/// The bit length of a base64url big-endian modulus.
fn modulus_bits(n: &str) -> Option<usize> {
    let bytes = URL_SAFE_NO_PAD
        .decode(n)
        .or_else(|_| URL_SAFE.decode(n))
        .ok()?;
    let first = bytes.iter().position(|b| *b != 0)?;
    Some((bytes.len() - first) * 8 - bytes[first].leading_zeros() as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::auth::test_support::{TestKey, jwks_of};
    use serde_json::json;

    #[test]
    fn a_key_allows_its_declared_algorithm_or_its_familys() {
        let rsa = TestKey::rsa("r1");
        let ec = TestKey::es256("e1");
        let ed = TestKey::ed25519("d1");
        let mut undeclared = rsa.public_jwk();
        undeclared["kid"] = json!("r2");
        undeclared.as_object_mut().unwrap().remove("alg");
        let mut set = jwks_of(&[&rsa, &ec, &ed]);
        set["keys"].as_array_mut().unwrap().push(undeclared);
        let keys = KeySet::parse(set.to_string().as_bytes()).unwrap();
        assert_eq!(keys.len(), 4);
        assert!(matches!(
            keys.lookup(Some("r1"), Algorithm::RS256),
            Lookup::Found(_)
        ));
        assert!(matches!(
            keys.lookup(Some("r1"), Algorithm::PS256),
            Lookup::WrongAlgorithm
        ));
        assert!(matches!(
            keys.lookup(Some("r2"), Algorithm::PS256),
            Lookup::Found(_)
        ));
        assert!(matches!(
            keys.lookup(Some("r1"), Algorithm::HS256),
            Lookup::WrongAlgorithm
        ));
        assert!(matches!(
            keys.lookup(Some("e1"), Algorithm::ES256),
            Lookup::Found(_)
        ));
        assert!(matches!(
            keys.lookup(Some("e1"), Algorithm::ES384),
            Lookup::WrongAlgorithm
        ));
        assert!(matches!(
            keys.lookup(Some("d1"), Algorithm::EdDSA),
            Lookup::Found(_)
        ));
        assert!(matches!(
            keys.lookup(Some("zz"), Algorithm::RS256),
            Lookup::Unknown
        ));
        // One kid on an RSA and an EC key: each algorithm finds its key.
        let mut shared = jwks_of(&[&TestKey::rsa("s"), &TestKey::es256("s")]);
        shared["keys"].as_array_mut().unwrap().reverse();
        let shared = KeySet::parse(shared.to_string().as_bytes()).unwrap();
        for alg in [Algorithm::RS256, Algorithm::ES256] {
            assert!(
                matches!(shared.lookup(Some("s"), alg), Lookup::Found(k) if k.algorithms.contains(&alg)),
                "{alg:?}"
            );
        }
        assert!(matches!(
            shared.lookup(Some("s"), Algorithm::ES384),
            Lookup::WrongAlgorithm
        ));
        // Without a kid: the one key that fits, else refused.
        assert!(matches!(
            keys.lookup(None, Algorithm::ES256),
            Lookup::Found(_)
        ));
        assert!(matches!(
            keys.lookup(None, Algorithm::RS256),
            Lookup::Ambiguous
        ));
        assert!(matches!(
            keys.lookup(None, Algorithm::HS256),
            Lookup::Unknown
        ));
    }

    /// A symmetric key, a short RSA key, an encryption key, a key that may
    /// not verify, a key whose alg is `none` or HMAC: none is ever used,
    /// and the good key beside them still is.
    #[test]
    fn keys_that_would_weaken_the_check_are_dropped_and_the_rest_kept() {
        let good = TestKey::es256("good");
        let mut set = jwks_of(&[&good]);
        let keys = set["keys"].as_array_mut().unwrap();
        keys.push(
            json!({"kty": "oct", "kid": "hmac", "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0"}),
        );
        keys.push(json!({"kty": "RSA", "kid": "short", "n": URL_SAFE_NO_PAD.encode([0xC5u8; 128]), "e": "AQAB"}));
        let mut enc = good.public_jwk();
        enc["kid"] = json!("enc");
        enc["use"] = json!("enc");
        keys.push(enc);
        let mut sign_only = good.public_jwk();
        sign_only["kid"] = json!("ops");
        sign_only["key_ops"] = json!(["sign"]);
        keys.push(sign_only);
        for alg in ["none", "HS256"] {
            let mut odd = good.public_jwk();
            odd["kid"] = json!(alg);
            odd["alg"] = json!(alg);
            keys.push(odd);
        }
        keys.push(json!({"kty": "EC", "kid": "p521", "crv": "P-521", "x": "AA", "y": "AA"}));
        keys.push(json!("not an object"));
        let parsed = KeySet::parse(set.to_string().as_bytes()).unwrap();
        assert_eq!(parsed.len(), 1, "only the good key is kept");
        assert!(matches!(
            parsed.lookup(Some("good"), Algorithm::ES256),
            Lookup::Found(_)
        ));
        for kid in ["hmac", "short", "enc", "ops", "none", "HS256", "p521"] {
            assert!(matches!(
                parsed.lookup(Some(kid), Algorithm::HS256),
                Lookup::Unknown
            ));
        }
    }

    #[test]
    fn a_document_that_is_no_key_set_is_refused_and_a_huge_one_bounded() {
        assert!(KeySet::parse(b"not json").is_err());
        assert!(KeySet::parse(b"{\"keys\": 3}").is_err());
        let key = TestKey::es256("k").public_jwk();
        let many: Vec<Value> = (0..MAX_KEYS + 10).map(|_| key.clone()).collect();
        let parsed = KeySet::parse(json!({ "keys": many }).to_string().as_bytes()).unwrap();
        assert_eq!(parsed.len(), MAX_KEYS);
    }

    #[test]
    fn modulus_bits_count_from_the_first_set_bit() {
        assert_eq!(
            modulus_bits(&URL_SAFE_NO_PAD.encode([0x00, 0x80, 0x00])),
            Some(16)
        );
        assert_eq!(modulus_bits(&URL_SAFE_NO_PAD.encode([0x01, 0x00])), Some(9));
        assert_eq!(modulus_bits("!!"), None);
    }
}

//! The authenticator attacked as a client would: every test is a request
//! that must not get in (or must, exactly as who it claims), against a
//! real HTTPS JWKS server on the loopback with a test CA.

use std::time::Duration;

use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderValue, StatusCode, Uri};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use modhost::http_config::{HttpConfig, OAuthConfig, StaticToken};

use super::jwks::JwksSettings;
use super::static_tokens::digest_hex;
use super::test_support::{Answer, JwksServer, TestCa, TestKey, jwks_of, now, raw_token};
use super::{AuthRefusal, Authenticator};

const CANONICAL: &str = "https://mcp.example.com/mcp";
const ISSUER: &str = "https://auth.example.com";
const STATIC_TOKEN: &str = "mht_static-token-for-the-ci-bot-0123456789abcdef";

/// Short intervals, so the refetch bounds can be watched in a test.
fn quick() -> JwksSettings {
    JwksSettings {
        refresh_after: Duration::from_secs(60),
        max_age: Duration::from_secs(120),
        min_refetch_interval: Duration::from_millis(300),
        timeout: Duration::from_millis(1500),
        max_body_bytes: 64 * 1024,
    }
}

fn config(jwks_uri: &str, ca_file: Option<&std::path::Path>) -> HttpConfig {
    HttpConfig {
        canonical_url: Some(CANONICAL.into()),
        tokens: vec![StaticToken {
            principal: "ci-bot".into(),
            sha256: digest_hex(STATIC_TOKEN),
            scopes: vec!["mcp:tools".into()],
        }],
        oauth: Some(OAuthConfig {
            issuer: ISSUER.into(),
            jwks_uri: jwks_uri.into(),
            authorization_servers: vec![],
            required_scopes: vec!["mcp:tools".into()],
            scopes_supported: vec!["mcp:tools".into(), "files:write".into()],
            jwks_ca_file: ca_file.map(Into::into),
            leeway_seconds: 30,
        }),
        ..HttpConfig::default()
    }
}

fn authenticator_for(server: &JwksServer, settings: JwksSettings) -> Authenticator {
    Authenticator::with_settings(&config(&server.url, Some(&server.ca_file)), settings).unwrap()
}

/// The claims of a good token for this server.
fn claims() -> Value {
    let now = now();
    json!({
        "iss": ISSUER,
        "sub": "alice",
        "aud": CANONICAL,
        "iat": now,
        "nbf": now - 5,
        "exp": now + 300,
        "scope": "mcp:tools files:read",
    })
}

fn with(mut claims: Value, changes: &Value) -> Value {
    for (key, value) in changes.as_object().unwrap() {
        if value.is_null() {
            claims.as_object_mut().unwrap().remove(key);
        } else {
            claims[key] = value.clone();
        }
    }
    claims
}

fn bearer(token: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
    );
    headers
}

async fn refused(auth: &Authenticator, token: &str) -> AuthRefusal {
    match auth.authenticate(&bearer(token)).await {
        Ok(caller) => panic!("let in as {caller:?}"),
        Err(refusal) => refusal,
    }
}

/// 401 `invalid_token` whose description says `why`.
async fn assert_invalid(auth: &Authenticator, token: &str, why: &str) {
    let refusal = refused(auth, token).await;
    assert_eq!(refusal.status(), StatusCode::UNAUTHORIZED, "{refusal}");
    let challenge = refusal.www_authenticate();
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
    assert!(
        challenge.contains(
            "resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\""
        ),
        "{challenge}"
    );
    assert!(
        refusal.description().contains(why),
        "wanted {why:?}: {refusal}"
    );
}

#[tokio::test]
async fn a_good_token_of_each_key_type_names_its_subject_and_scopes() {
    let keys = [
        TestKey::rsa("r1"),
        TestKey::es256("e1"),
        TestKey::ed25519("d1"),
    ];
    let server = JwksServer::start(&keys.iter().collect::<Vec<_>>()).await;
    let auth = authenticator_for(&server, quick());
    for key in &keys {
        let caller = auth
            .authenticate(&bearer(&key.sign(&claims())))
            .await
            .unwrap_or_else(|e| panic!("{:?}: {e}", key.alg));
        assert_eq!(caller.principal, format!("oauth:{ISSUER}#alice"));
        assert!(!caller.local);
        assert!(caller.scopes.contains("mcp:tools") && caller.scopes.contains("files:read"));
    }
    assert_eq!(auth.jwks_fetches(), 1, "one fetch serves every key");
    assert_eq!(server.requests(), 1);
}

#[tokio::test]
async fn prefetched_keys_serve_the_first_token_without_another_fetch() {
    let key = TestKey::es256("k");
    let server = JwksServer::start(&[&key]).await;
    let auth = authenticator_for(&server, quick());
    auth.prefetch_keys().await;
    auth.prefetch_keys().await;
    assert_eq!(server.requests(), 1, "a prefetch fetches once");
    auth.authenticate(&bearer(&key.sign(&claims())))
        .await
        .unwrap();
    assert_eq!(server.requests(), 1);
    // Without OAuth there is nothing to fetch.
    Authenticator::new(&HttpConfig::default())
        .unwrap()
        .prefetch_keys()
        .await;
}

#[tokio::test]
async fn no_token_gets_the_challenge_that_says_where_to_get_one() {
    let key = TestKey::es256("k");
    let server = JwksServer::start(&[&key]).await;
    let auth = authenticator_for(&server, quick());
    for headers in [HeaderMap::new(), {
        let mut basic = HeaderMap::new();
        basic.insert(
            AUTHORIZATION,
            HeaderValue::from_static("Basic YWxpY2U6cHc="),
        );
        basic
    }] {
        let refusal = auth.authenticate(&headers).await.unwrap_err();
        assert_eq!(refusal.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(
            refusal.www_authenticate(),
            "Bearer resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\", scope=\"mcp:tools\""
        );
    }
    let metadata = auth.protected_resource_metadata().unwrap();
    assert_eq!(metadata["resource"], CANONICAL);
    assert_eq!(metadata["authorization_servers"], json!([ISSUER]));
    assert_eq!(server.requests(), 0, "no token, no fetch");
}

#[tokio::test]
async fn a_forged_or_tampered_signature_is_refused() {
    let honest = TestKey::es256("k1");
    let server = JwksServer::start(&[&honest]).await;
    let auth = authenticator_for(&server, quick());
    // The attacker's own key, claiming the honest key's kid.
    let forger = TestKey::es256("k1");
    assert_invalid(&auth, &forger.sign(&claims()), "signature does not verify").await;
    // An honest token with its claims rewritten (another subject).
    let token = honest.sign(&claims());
    let parts: Vec<&str> = token.split('.').collect();
    let evil = base64::Engine::encode(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        with(claims(), &json!({"sub": "admin"})).to_string(),
    );
    let tampered = format!("{}.{evil}.{}", parts[0], parts[2]);
    assert_invalid(&auth, &tampered, "signature does not verify").await;
    // The same with the attacker's key embedded in the header (`jwk`):
    // a token never brings its own key.
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some("k1".into());
    header.jwk = Some(serde_json::from_value(forger.public_jwk()).unwrap());
    assert_invalid(
        &auth,
        &forger.sign_with(&header, &claims()),
        "signature does not verify",
    )
    .await;
    // The honest token still gets in.
    auth.authenticate(&bearer(&token)).await.unwrap();
}

#[tokio::test]
async fn expired_or_not_yet_valid_tokens_are_refused_within_the_leeway_only() {
    let key = TestKey::rsa("r1");
    let server = JwksServer::start(&[&key]).await;
    let auth = authenticator_for(&server, quick());
    let now = now();
    let expired = key.sign(&with(claims(), &json!({"exp": now - 120})));
    assert_invalid(&auth, &expired, "expired").await;
    let early = key.sign(&with(claims(), &json!({"nbf": now + 120})));
    assert_invalid(&auth, &early, "not valid yet").await;
    let no_expiry = key.sign(&with(claims(), &json!({"exp": null})));
    assert_invalid(&auth, &no_expiry, "no exp claim").await;
    // Within the 30 s of clock skew allowed: let in.
    let skewed = key.sign(&with(claims(), &json!({"exp": now - 10, "nbf": now + 10})));
    auth.authenticate(&bearer(&skewed)).await.unwrap();
}

#[tokio::test]
async fn another_issuers_or_another_resources_token_is_refused() {
    let key = TestKey::es256("k");
    let server = JwksServer::start(&[&key]).await;
    let auth = authenticator_for(&server, quick());
    let other_issuer = key.sign(&with(claims(), &json!({"iss": "https://evil.example.com"})));
    assert_invalid(&auth, &other_issuer, "another issuer").await;
    let no_issuer = key.sign(&with(claims(), &json!({"iss": null})));
    assert_invalid(&auth, &no_issuer, "no iss claim").await;
    // RFC 8707: a token minted for another resource (another MCP server
    // the same authorization server serves) is not good here.
    for aud in [
        json!("https://other.example.com/mcp"),
        json!("https://mcp.example.com/mcp/"),
        json!("https://mcp.example.com/other"),
        json!(["https://other.example.com/mcp", "api"]),
        json!(42),
    ] {
        let foreign = key.sign(&with(claims(), &json!({ "aud": aud })));
        let why = if aud.is_number() {
            "aud claim"
        } else {
            "for another resource"
        };
        assert_invalid(&auth, &foreign, why).await;
    }
    let no_audience = key.sign(&with(claims(), &json!({"aud": null})));
    assert_invalid(&auth, &no_audience, "no aud claim").await;
    let no_subject = key.sign(&with(claims(), &json!({"sub": null})));
    assert_invalid(&auth, &no_subject, "no sub claim").await;
    // This resource among others, or in another case of scheme and host: let in.
    for aud in [
        json!(["https://other.example.com", CANONICAL]),
        json!("HTTPS://MCP.EXAMPLE.COM/mcp"),
    ] {
        let ours = key.sign(&with(claims(), &json!({ "aud": aud })));
        auth.authenticate(&bearer(&ours)).await.unwrap();
    }
}

#[tokio::test]
async fn alg_none_and_hmac_with_the_public_key_are_refused() {
    let rsa = TestKey::rsa("r1");
    let server = JwksServer::start(&[&rsa]).await;
    let auth = authenticator_for(&server, quick());
    for header in [
        json!({"alg": "none", "typ": "JWT"}),
        json!({"alg": "none", "kid": "r1"}),
        json!({"alg": "None", "kid": "r1"}),
    ] {
        assert_invalid(
            &auth,
            &raw_token(&header, &claims(), b""),
            "not a signed JWT",
        )
        .await;
    }
    // The classic confusion: HS256 "signed" with the RSA public key as the
    // shared secret, in each form an attacker might find it.
    let jwk = rsa.public_jwk();
    let n = base64::Engine::decode(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        jwk["n"].as_str().unwrap(),
    )
    .unwrap();
    for secret in [
        jwk.to_string().into_bytes(),
        n,
        jwks_of(&[&rsa]).to_string().into_bytes(),
    ] {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some("r1".into());
        let token = jsonwebtoken::encode(
            &header,
            &claims(),
            &EncodingKey::from_secret(&secret).unwrap(),
        )
        .unwrap();
        assert_invalid(&auth, &token, "shared secret").await;
    }
    // An RSA key's token claiming PS256 when its JWK says RS256.
    let mut header = Header::new(Algorithm::PS256);
    header.kid = Some("r1".into());
    assert_invalid(&auth, &rsa.sign_with(&header, &claims()), "algorithm").await;
}

/// Key rotation works without a restart, and made-up `kid`s cost the
/// authorization server one request per interval, not one each.
#[tokio::test]
async fn an_unknown_kid_refetches_once_per_interval_then_is_refused() {
    let old = TestKey::es256("old");
    // Made before the clock starts: signing is slow in a debug build.
    let made_up: Vec<String> = (0..20)
        .map(|i| TestKey::es256(&format!("x{i}")).sign(&claims()))
        .collect();
    let new = TestKey::es256("new");
    let token = new.sign(&claims());
    let server = JwksServer::start(&[&old]).await;
    let auth = authenticator_for(&server, quick());
    auth.authenticate(&bearer(&old.sign(&claims())))
        .await
        .unwrap();
    assert_eq!(server.requests(), 1);
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_invalid(&auth, &token, "signing key (kid)").await;
    assert_eq!(server.requests(), 2, "the unknown kid refetched once");
    for _ in 0..20 {
        assert_invalid(&auth, &token, "signing key (kid)").await;
    }
    let all = futures_join(made_up.iter().map(|t| refused(&auth, t))).await;
    assert!(all.iter().all(|r| r.status() == StatusCode::UNAUTHORIZED));
    assert_eq!(server.requests(), 2, "within the interval, no other fetch");
    // The authorization server rotates: the new key is picked up.
    server.answer(Answer::Json(jwks_of(&[&old, &new])));
    tokio::time::sleep(Duration::from_millis(350)).await;
    let caller = auth.authenticate(&bearer(&token)).await.unwrap();
    assert_eq!(caller.principal, format!("oauth:{ISSUER}#alice"));
    assert_eq!(server.requests(), 3);
}

/// Concurrent requests with an unknown kid wait for one fetch.
#[tokio::test]
async fn concurrent_unknown_kids_share_one_fetch() {
    let key = TestKey::es256("k");
    let server = JwksServer::start(&[&key]).await;
    let auth = authenticator_for(&server, quick());
    let tokens: Vec<String> = (0..32)
        .map(|i| TestKey::es256(&format!("u{i}")).sign(&claims()))
        .collect();
    let all = futures_join(tokens.iter().map(|t| refused(&auth, t))).await;
    assert_eq!(all.len(), 32);
    assert_eq!(server.requests(), 1);
}

/// Down, erroring, garbage, huge, hanging, or behind a certificate the
/// configured roots do not sign: the token is refused (never let in), the
/// request answered (never stuck beyond the timeout), the server standing.
#[tokio::test]
async fn a_jwks_endpoint_that_fails_refuses_the_token_and_nothing_else_breaks() {
    let key = TestKey::es256("k");
    let token = key.sign(&claims());
    // Nothing listening.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let down = Authenticator::with_settings(
        &config(&format!("https://127.0.0.1:{port}/jwks.json"), None),
        quick(),
    )
    .unwrap();
    assert_invalid(&down, &token, "could not be fetched").await;
    assert_invalid(&down, &token, "could not be fetched").await;
    assert_eq!(down.jwks_fetches(), 1, "a failure is not retried at once");
    // The static token still works while OAuth's keys are unreachable.
    let caller = down.authenticate(&bearer(STATIC_TOKEN)).await.unwrap();
    assert_eq!(caller.principal, "ci-bot");
    let ca = TestCa::new();
    for answer in [
        Answer::Status(500),
        Answer::Status(404),
        Answer::Garbage,
        Answer::Huge(100 * 1024),
        Answer::Hang,
    ] {
        let server = JwksServer::start_with(&ca, answer.clone()).await;
        let auth = authenticator_for(&server, quick());
        let started = std::time::Instant::now();
        assert_invalid(&auth, &token, "could not be fetched").await;
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{answer:?} held the request {:?}",
            started.elapsed()
        );
    }
    // A server whose certificate another CA signed: a man in the middle.
    let impostor = JwksServer::start(&[&key]).await;
    let trusted = JwksServer::start(&[&key]).await;
    let fooled =
        Authenticator::with_settings(&config(&impostor.url, Some(&trusted.ca_file)), quick())
            .unwrap();
    assert_invalid(&fooled, &token, "could not be fetched").await;
    // And with no roots configured, the web's roots do not sign a test CA either.
    let web_roots = Authenticator::with_settings(&config(&trusted.url, None), quick()).unwrap();
    assert_invalid(&web_roots, &token, "could not be fetched").await;
}

/// A set already fetched keeps serving while the endpoint is down, but
/// only for `max_age`: a withdrawn key cannot live on through an outage.
#[tokio::test]
async fn cached_keys_outlive_an_outage_only_up_to_their_age() {
    let key = TestKey::es256("k");
    let server = JwksServer::start(&[&key]).await;
    let settings = JwksSettings {
        refresh_after: Duration::from_millis(200),
        max_age: Duration::from_millis(900),
        ..quick()
    };
    let auth = authenticator_for(&server, settings);
    let token = key.sign(&claims());
    auth.authenticate(&bearer(&token)).await.unwrap();
    server.answer(Answer::Status(503));
    tokio::time::sleep(Duration::from_millis(400)).await;
    // Stale: still served, refreshed (and failing) in the background.
    auth.authenticate(&bearer(&token)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_invalid(&auth, &token, "could not be fetched").await;
    // Back up: let in again.
    server.answer(Answer::Json(jwks_of(&[&key])));
    tokio::time::sleep(Duration::from_millis(350)).await;
    auth.authenticate(&bearer(&token)).await.unwrap();
}

#[tokio::test]
async fn a_token_without_the_required_scope_is_forbidden_naming_it() {
    let key = TestKey::es256("k");
    let server = JwksServer::start(&[&key]).await;
    let mut http = config(&server.url, Some(&server.ca_file));
    let auth = Authenticator::with_settings(&http, quick()).unwrap();
    let token = key.sign(&with(claims(), &json!({"scope": "files:read"})));
    let refusal = refused(&auth, &token).await;
    assert_eq!(refusal.status(), StatusCode::FORBIDDEN);
    let challenge = refusal.www_authenticate();
    assert!(
        challenge.contains("error=\"insufficient_scope\""),
        "{challenge}"
    );
    assert!(challenge.contains("scope=\"mcp:tools\""), "{challenge}");
    assert!(challenge.contains("resource_metadata="), "{challenge}");
    let none = key.sign(&with(claims(), &json!({"scope": null})));
    assert_eq!(refused(&auth, &none).await.status(), StatusCode::FORBIDDEN);
    // `scp` as a list counts; so does a broader scope that implies it.
    let scp = key.sign(&with(
        claims(),
        &json!({"scope": null, "scp": ["mcp:tools"]}),
    ));
    auth.authenticate(&bearer(&scp)).await.unwrap();
    http.implied_scopes
        .insert("mcp:admin".into(), vec!["mcp:tools".into()]);
    let auth = Authenticator::with_settings(&http, quick()).unwrap();
    let admin = key.sign(&with(claims(), &json!({"scope": "mcp:admin"})));
    let caller = auth.authenticate(&bearer(&admin)).await.unwrap();
    assert!(caller.scopes.contains("mcp:tools") && caller.scopes.contains("mcp:admin"));
}

#[tokio::test]
async fn a_static_token_lets_in_its_principal_and_a_wrong_one_nobody() {
    let key = TestKey::es256("k");
    let server = JwksServer::start(&[&key]).await;
    let auth = authenticator_for(&server, quick());
    let caller = auth.authenticate(&bearer(STATIC_TOKEN)).await.unwrap();
    assert_eq!(caller.principal, "ci-bot");
    assert_eq!(caller.scopes.iter().collect::<Vec<_>>(), ["mcp:tools"]);
    for wrong in [
        "mht_static-token-for-the-ci-bot-0123456789abcdeF",
        "mht_static-token-for-the-ci-bot-0123456789abcde",
        &digest_hex(STATIC_TOKEN),
    ] {
        assert_invalid(&auth, wrong, "not one this server accepts").await;
    }
    assert_eq!(server.requests(), 0, "a static token never fetches keys");
    // A static-token-only server: the same, without OAuth.
    let only_static = HttpConfig {
        oauth: None,
        ..config(&server.url, None)
    };
    let auth = Authenticator::new(&only_static).unwrap();
    assert!(auth.is_configured());
    assert_eq!(
        auth.authenticate(&bearer(STATIC_TOKEN))
            .await
            .unwrap()
            .principal,
        "ci-bot"
    );
    let jwt = key.sign(&claims());
    assert_eq!(
        refused(&auth, &jwt).await.status(),
        StatusCode::UNAUTHORIZED
    );
    let challenge = refused(&auth, &jwt).await.www_authenticate();
    assert!(!challenge.contains("scope="), "{challenge}");
}

#[tokio::test]
async fn a_token_in_the_query_or_two_authorization_headers_are_bad_requests() {
    let key = TestKey::es256("k");
    let server = JwksServer::start(&[&key]).await;
    let auth = authenticator_for(&server, quick());
    let uri: Uri = format!("/mcp?access_token={STATIC_TOKEN}").parse().unwrap();
    // Even with a good header: the token has leaked into a URL.
    let refusal = auth
        .authenticate_request(&uri, &bearer(STATIC_TOKEN), None)
        .await
        .unwrap_err();
    assert_eq!(refusal.status(), StatusCode::BAD_REQUEST);
    assert!(
        refusal
            .www_authenticate()
            .contains("error=\"invalid_request\"")
    );
    assert!(refusal.description().contains("query string"), "{refusal}");
    let plain: Uri = "/mcp?x=1".parse().unwrap();
    auth.authenticate_request(&plain, &bearer(STATIC_TOKEN), None)
        .await
        .unwrap();
    let mut two = bearer(STATIC_TOKEN);
    two.append(AUTHORIZATION, HeaderValue::from_static("Bearer other"));
    assert_eq!(
        auth.authenticate(&two).await.unwrap_err().status(),
        StatusCode::BAD_REQUEST
    );
}

/// Nothing configured: the local user, over a connection from a socket
/// of the account the server runs as; without a connection to look at,
/// nobody (whose the request is cannot be told from headers).
#[tokio::test]
async fn nothing_configured_is_the_local_user_over_its_own_connection_only() {
    let auth = Authenticator::new(&HttpConfig::default()).unwrap();
    assert!(!auth.is_configured());
    assert!(auth.protected_resource_metadata().is_none());
    assert!(auth.protected_resource_metadata_paths().is_empty());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let ours = listener.local_addr().unwrap();
    let _client = std::net::TcpStream::connect(ours).unwrap();
    let (_accepted, peer) = listener.accept().unwrap();
    let own = crate::http::peer_uid::PeerSocket::new(peer, Some(ours));
    let uri: http::Uri = "/mcp".parse().unwrap();
    let caller = auth
        .authenticate_request(&uri, &HeaderMap::new(), Some(&own))
        .await
        .unwrap();
    assert_eq!(caller, modhost::Caller::local());
    // A peer no socket of this machine is: whose it is cannot be told.
    let unknown =
        crate::http::peer_uid::PeerSocket::new("127.0.0.1:1".parse().unwrap(), Some(ours));
    for (refused, what) in [
        (
            auth.authenticate_request(&uri, &HeaderMap::new(), Some(&unknown))
                .await,
            "an unknown socket",
        ),
        (
            auth.authenticate_request(&uri, &HeaderMap::new(), None)
                .await,
            "no connection",
        ),
        (auth.authenticate(&HeaderMap::new()).await, "headers only"),
    ] {
        let refusal = refused.unwrap_err();
        assert_eq!(refusal.status(), StatusCode::FORBIDDEN, "{what}");
        assert!(
            refusal.description().contains("[[http.tokens]]"),
            "{what}: {refusal}"
        );
    }
}

#[test]
fn a_configuration_the_loader_would_refuse_or_an_unreadable_ca_file_is_refused() {
    let mut http = config("http://auth.example.com/jwks", None);
    let err = Authenticator::new(&http).unwrap_err().to_string();
    assert!(err.contains("jwks_uri") && err.contains("https"), "{err}");
    http = config(
        "https://auth.example.com/jwks",
        Some(std::path::Path::new("/nonexistent/ca.pem")),
    );
    let err = Authenticator::new(&http).unwrap_err().to_string();
    assert!(
        err.contains("jwks_ca_file") && err.contains("/nonexistent/ca.pem"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("ca.pem");
    std::fs::write(&empty, "no certificate here\n").unwrap();
    http = config("https://auth.example.com/jwks", Some(&empty));
    let err = Authenticator::new(&http).unwrap_err().to_string();
    assert!(err.contains("no PEM certificate"), "{err}");
}

/// Await every future at once (no extra crate for `join_all`).
async fn futures_join<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut set = Vec::new();
    for future in futures {
        set.push(Box::pin(future));
    }
    let mut outputs = Vec::with_capacity(set.len());
    let mut pending: Vec<Option<std::pin::Pin<Box<F>>>> = set.into_iter().map(Some).collect();
    let mut done: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut all = true;
        for (slot, out) in pending.iter_mut().zip(done.iter_mut()) {
            if let Some(future) = slot {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(value) => {
                        *out = Some(value);
                        *slot = None;
                    }
                    std::task::Poll::Pending => all = false,
                }
            }
        }
        if all {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    outputs.extend(done.into_iter().map(Option::unwrap));
    outputs
}

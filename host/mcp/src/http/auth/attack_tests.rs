//! The authenticator and the signing key attacked by a reviewer who did not
//! write them (issue 35): JWT header and claim tricks, JWKS answers an
//! attacker would like the server to believe, and key files swapped under
//! the loader. Each test is an attack; it passes when the attack fails.
//!
//! `tests.rs` beside this file holds the authors' own attacks (`alg: none`,
//! HMAC with the public key, forged and tampered signatures, expiry,
//! foreign issuers and audiences, refetch bounds, failing endpoints); the
//! ones here are those it does not try.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use http::header::{AUTHORIZATION, COOKIE};
use http::{HeaderMap, HeaderValue, StatusCode};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use modhost::http_config::{HttpConfig, OAuthConfig};

use super::Authenticator;
use super::bearer::MAX_TOKEN_BYTES;
use super::jwks::JwksSettings;
use super::test_support::{JwksServer, TestKey, jwks_of, now};

const CANONICAL: &str = "https://mcp.example.com/mcp";
const ISSUER: &str = "https://auth.example.com";

fn quick() -> JwksSettings {
    JwksSettings {
        refresh_after: Duration::from_secs(60),
        max_age: Duration::from_secs(120),
        min_refetch_interval: Duration::from_millis(300),
        timeout: Duration::from_millis(1500),
        max_body_bytes: 64 * 1024,
    }
}

fn oauth_config(jwks_uri: &str, ca_file: &std::path::Path) -> HttpConfig {
    HttpConfig {
        canonical_url: Some(CANONICAL.into()),
        oauth: Some(OAuthConfig {
            issuer: ISSUER.into(),
            jwks_uri: jwks_uri.into(),
            authorization_servers: vec![],
            required_scopes: vec!["mcp:tools".into()],
            scopes_supported: vec!["mcp:tools".into()],
            jwks_ca_file: Some(ca_file.into()),
            leeway_seconds: 30,
        }),
        ..HttpConfig::default()
    }
}

fn authenticator_for(server: &JwksServer) -> Authenticator {
    Authenticator::with_settings(&oauth_config(&server.url, &server.ca_file), quick()).unwrap()
}

fn claims() -> Value {
    let now = now();
    json!({
        "iss": ISSUER, "sub": "alice", "aud": CANONICAL,
        "iat": now, "nbf": now - 5, "exp": now + 300,
        "scope": "mcp:tools",
    })
}

fn with(mut claims: Value, changes: &Value) -> Value {
    for (key, value) in changes.as_object().unwrap() {
        claims[key] = value.clone();
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

/// The principal `token` is let in as, or the refusal's status.
async fn outcome(auth: &Authenticator, headers: &HeaderMap) -> Result<String, StatusCode> {
    auth.authenticate(headers)
        .await
        .map(|caller| caller.principal)
        .map_err(|refusal| refusal.status())
}

/// A P-256 key whose bytes the test signs itself (for headers and claims
/// no JSON encoder writes: duplicate keys), with its public JWK.
struct RawKey {
    encoding: EncodingKey,
    jwk: Value,
}

impl RawKey {
    fn es256(kid: &str) -> RawKey {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let point = pair.public_key_raw();
        RawKey {
            encoding: EncodingKey::from_ec_der(pair.serialized_der()),
            jwk: json!({
                "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": kid,
                "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
                "y": URL_SAFE_NO_PAD.encode(&point[33..]),
            }),
        }
    }

    /// A compact JWS of exactly these header and payload bytes.
    fn sign_text(&self, header: &str, payload: &str) -> String {
        let message = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header),
            URL_SAFE_NO_PAD.encode(payload)
        );
        let signature =
            jsonwebtoken::crypto::sign(message.as_bytes(), &self.encoding, Algorithm::ES256)
                .unwrap();
        format!("{message}.{signature}")
    }
}

// ---------------------------------------------------------------------
// Findings: these fail until the authenticator changes.
// ---------------------------------------------------------------------

/// FINDING (low). A JWT that says it is another kind of token (a logout
/// token, a security event, a DPoP proof, an ID token) is not an access
/// token, whoever signed it: RFC 8725 §3.11 (explicit typing) and RFC 9068
/// §4 ask a resource server to refuse it, so that a JWT the authorization
/// server minted for another purpose, with claims that happen to pass
/// (`aud` naming this URL, as a client id may), never lets its bearer in.
/// The authenticator reads no `typ` at all. Access tokens typed `at+jwt`,
/// `application/at+jwt`, plain `JWT` (what many servers still write) or
/// untyped stay accepted, so a fix cannot simply demand `at+jwt`.
#[tokio::test]
async fn a_jwt_typed_as_another_kind_of_token_is_not_an_access_token() {
    let key = TestKey::es256("k1");
    let server = JwksServer::start(&[&key]).await;
    let auth = authenticator_for(&server);
    let typed = |typ: Option<&str>| {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some("k1".into());
        header.typ = typ.map(str::to_owned);
        key.sign_with(&header, &claims())
    };
    for good in [
        Some("at+jwt"),
        Some("application/at+jwt"),
        Some("JWT"),
        None,
    ] {
        assert_eq!(
            outcome(&auth, &bearer(&typed(good))).await,
            Ok(format!("oauth:{ISSUER}#alice")),
            "typ {good:?}"
        );
    }
    let mut let_in = Vec::new();
    for other in [
        "logout+jwt",
        "secevent+jwt",
        "dpop+jwt",
        "id_token+jwt",
        "token-introspection+jwt",
        "oauth-authz-req+jwt",
    ] {
        if outcome(&auth, &bearer(&typed(Some(other)))).await.is_ok() {
            let_in.push(other);
        }
    }
    assert!(
        let_in.is_empty(),
        "JWTs typed as other kinds of token were let in as access tokens: {let_in:?}"
    );
}

/// FINDING (low, availability). RFC 7517 §4.5 allows keys of different
/// types in one set to share a `kid` ("equivalent alternatives"); an
/// authorization server that publishes an RSA and an EC key under one
/// `kid` signs with either. The lookup takes the first key with the `kid`
/// and refuses a token whose algorithm that one key does not allow, so
/// every honest ES256 token is refused. It should take the key with that
/// `kid` that allows the token's algorithm (and still refuse HMAC, `none`,
/// and a forger's key under that `kid`).
#[tokio::test]
async fn one_kid_shared_by_keys_of_two_types_verifies_with_the_one_that_fits() {
    let rsa = TestKey::rsa("shared");
    let ec = TestKey::es256("shared");
    let server = JwksServer::start(&[&rsa, &ec]).await;
    let auth = authenticator_for(&server);
    let alice = Ok(format!("oauth:{ISSUER}#alice"));
    assert_eq!(outcome(&auth, &bearer(&rsa.sign(&claims()))).await, alice);
    // The forger's EC key under the shared kid: refused either way.
    let forger = TestKey::es256("shared");
    assert_eq!(
        outcome(&auth, &bearer(&forger.sign(&claims()))).await,
        Err(StatusCode::UNAUTHORIZED)
    );
    assert_eq!(
        outcome(&auth, &bearer(&ec.sign(&claims()))).await,
        alice,
        "an honest ES256 token under a kid the RSA key shares is refused"
    );
}

/// FINDING (low). The principal of an OAuth caller is written into the
/// audit log, the request log and every result's `_meta`; a subject may
/// hold any character but control characters, so one with a zero-width or
/// bidirectional-override character reads exactly like another principal
/// (`oauth:…#admin` followed by U+200B). An operator reading the log, or a
/// person comparing a principal with a rule, is misled. Such a subject
/// should be refused (or written escaped, as the approval question writes
/// such characters: `elicitation::visible`).
#[tokio::test]
async fn a_subject_that_reads_as_another_principal_is_not_let_in_as_it() {
    let key = TestKey::es256("k1");
    let server = JwksServer::start(&[&key]).await;
    let auth = authenticator_for(&server);
    let invisible = |c: char| {
        matches!(c, '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{FEFF}'
            | '\u{E0000}'..='\u{E0FFF}')
    };
    let mut misleading = Vec::new();
    for sub in [
        "admin\u{200B}",
        "\u{FEFF}admin",
        "adm\u{202E}nimda",
        "admin\u{E0041}",
    ] {
        let token = key.sign(&with(claims(), &json!({ "sub": sub })));
        if let Ok(principal) = outcome(&auth, &bearer(&token)).await
            && principal.chars().any(invisible)
        {
            misleading.push(format!("{principal:?}"));
        }
    }
    assert!(
        misleading.is_empty(),
        "principals that print as others were let in: {misleading:?}"
    );
}

/// FINDING (low, a mistake made dangerous). `signing_key_file` (or
/// `MODHOST_SIGNING_KEY_FILE`) naming a kernel file: `/proc/self/environ`
/// is a "regular file", mode 0400, owned by the user, so the loader takes
/// the process environment (PATH, HOSTNAME, what a Deployment manifest
/// lists) as the key every session and approval state is sealed with;
/// whoever reads the manifest forges approvals. `ls -l` shows it 0 bytes
/// long, so the "file checked is the file read" promise does not hold
/// either. A key from procfs or sysfs should be refused (fstatfs), as a
/// link or a fifo is.
#[test]
fn a_kernel_file_is_no_signing_key() {
    // A process of the test's own, whose environment is one known line.
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .env_clear()
        .env("HOSTNAME", "replica-0-from-the-deployment-manifest-0123")
        .spawn()
        .expect("start sleep");
    let environ = std::path::PathBuf::from(format!("/proc/{}/environ", child.id()));
    let loaded = crate::signed::SigningKey::load(&environ);
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        loaded.is_err(),
        "a process environment was taken as the signing key: {loaded:?}"
    );
}

// ---------------------------------------------------------------------
// Held: attacks that fail today (kept so they keep failing).
// ---------------------------------------------------------------------

/// Keys a token brings with it or points at (`jwk`, `jku`, `x5u`, `x5c`)
/// are never used or fetched: the attacker's own JWKS server, named in
/// the header, gets no request, and the token is refused.
#[tokio::test]
async fn a_token_cannot_point_the_server_at_its_own_keys() {
    let honest = TestKey::es256("honest");
    let server = JwksServer::start(&[&honest]).await;
    let evil_key = TestKey::es256("evil");
    let evil = JwksServer::start(&[&evil_key]).await;
    let auth = authenticator_for(&server);
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some("evil".into());
    header.jku = Some(evil.url.clone());
    header.x5u = Some(evil.url.clone());
    header.jwk = Some(serde_json::from_value(evil_key.public_jwk()).unwrap());
    header.x5c = Some(vec![STANDARD.encode(b"not a certificate")]);
    let token = evil_key.sign_with(&header, &claims());
    assert_eq!(
        outcome(&auth, &bearer(&token)).await,
        Err(StatusCode::UNAUTHORIZED)
    );
    // Under the honest kid, too.
    header.kid = Some("honest".into());
    let token = evil_key.sign_with(&header, &claims());
    assert_eq!(
        outcome(&auth, &bearer(&token)).await,
        Err(StatusCode::UNAUTHORIZED)
    );
    assert_eq!(
        evil.requests(),
        0,
        "the server fetched the token's own keys"
    );
}

/// Duplicate keys in the header or the claims (`alg` twice, `sub` twice:
/// a parser that keeps the first and one that keeps the last would read
/// two tokens), a `crit` extension the server does not know, and an
/// unknown `alg`: each refused, though the signature is good.
#[tokio::test]
async fn ambiguous_or_critical_headers_and_duplicate_claims_are_refused() {
    let key = RawKey::es256("k1");
    let server = JwksServer::start_with(
        &super::test_support::TestCa::new(),
        super::test_support::Answer::Json(json!({ "keys": [key.jwk.clone()] })),
    )
    .await;
    let auth = authenticator_for(&server);
    let body = claims().to_string();
    let good = key.sign_text(r#"{"alg":"ES256","kid":"k1"}"#, &body);
    assert_eq!(
        outcome(&auth, &bearer(&good)).await,
        Ok(format!("oauth:{ISSUER}#alice"))
    );
    let now = now();
    let twice_sub = format!(
        r#"{{"iss":"{ISSUER}","sub":"alice","aud":"{CANONICAL}","exp":{},"scope":"mcp:tools","sub":"admin"}}"#,
        now + 300
    );
    let twice_aud = format!(
        r#"{{"iss":"{ISSUER}","sub":"alice","aud":"https://other.example/mcp","exp":{},"scope":"mcp:tools","aud":"{CANONICAL}"}}"#,
        now + 300
    );
    for (header, payload, what) in [
        (
            r#"{"alg":"HS256","kid":"k1","alg":"ES256"}"#,
            body.as_str(),
            "alg twice",
        ),
        (
            r#"{"alg":"ES256","kid":"other","kid":"k1"}"#,
            &body,
            "kid twice",
        ),
        (
            r#"{"alg":"ES256","kid":"k1","alg":"ES256"}"#,
            &body,
            "same alg twice",
        ),
        (
            r#"{"alg":"ES256","kid":"k1","crit":["exp"],"exp":1}"#,
            &body,
            "crit",
        ),
        (
            r#"{"alg":"ES256","kid":"k1","crit":[]}"#,
            &body,
            "empty crit",
        ),
        (
            r#"{"alg":"ES256","kid":"k1","b64":false,"crit":["b64"]}"#,
            &body,
            "b64 false",
        ),
        (r#"{"alg":"ES256K","kid":"k1"}"#, &body, "unknown alg"),
        (r#"{"alg":"ES256","kid":"k1"}"#, &twice_sub, "sub twice"),
        (r#"{"alg":"ES256","kid":"k1"}"#, &twice_aud, "aud twice"),
    ] {
        let token = key.sign_text(header, payload);
        assert_eq!(
            outcome(&auth, &bearer(&token)).await,
            Err(StatusCode::UNAUTHORIZED),
            "{what}"
        );
    }
}

/// Audience and issuer compared as the specification asks, and no more
/// loosely: a trailing slash, an explicit default port, another path case,
/// user info, a query or fragment, another scheme, a look-alike issuer.
/// (`aud` as a list that names this server among others is let in: RFC
/// 8707 allows a token for several resources, `tests.rs` holds that.)
#[tokio::test]
async fn near_miss_audiences_and_issuers_are_refused() {
    let key = TestKey::es256("k1");
    let server = JwksServer::start(&[&key]).await;
    let auth = authenticator_for(&server);
    for aud in [
        "https://mcp.example.com/mcp/",
        "https://mcp.example.com:443/mcp",
        "https://mcp.example.com/MCP",
        "https://user@mcp.example.com/mcp",
        "https://mcp.example.com/mcp?x=1",
        "https://mcp.example.com/mcp#x",
        "http://mcp.example.com/mcp",
        "https://mcp.example.com/%6Dcp",
        "https://mcp.example.com./mcp",
        "https://mcp.example.com/mcp ",
        "",
    ] {
        let token = key.sign(&with(claims(), &json!({ "aud": aud })));
        assert_eq!(
            outcome(&auth, &bearer(&token)).await,
            Err(StatusCode::UNAUTHORIZED),
            "aud {aud:?}"
        );
    }
    for aud in [json!([]), json!([CANONICAL, 7]), json!({"aud": CANONICAL})] {
        let token = key.sign(&with(claims(), &json!({ "aud": aud })));
        assert_eq!(
            outcome(&auth, &bearer(&token)).await,
            Err(StatusCode::UNAUTHORIZED),
            "aud {aud}"
        );
    }
    for iss in [
        "https://auth.example.com/",
        "https://auth.example.com.evil.example",
        "https://auth.example.com@evil.example",
        "HTTPS://AUTH.EXAMPLE.COM",
        "https://auth.example.co",
        " https://auth.example.com",
    ] {
        let token = key.sign(&with(claims(), &json!({ "iss": iss })));
        assert_eq!(
            outcome(&auth, &bearer(&token)).await,
            Err(StatusCode::UNAUTHORIZED),
            "iss {iss:?}"
        );
    }
}

/// Where the token may be and how it is written: only the one
/// `Authorization: Bearer` header counts (a cookie is nothing), bytes that
/// are not ASCII are refused, and a token over the bound is refused before
/// anything parses it or fetches keys for it.
#[tokio::test]
async fn tokens_elsewhere_or_oversized_or_not_ascii_let_nobody_in() {
    let key = TestKey::es256("k1");
    let server = JwksServer::start(&[&key]).await;
    let auth = authenticator_for(&server);
    let good = key.sign(&claims());
    let mut cookie = HeaderMap::new();
    cookie.insert(
        COOKIE,
        HeaderValue::from_str(&format!("access_token={good}; token={good}")).unwrap(),
    );
    assert_eq!(outcome(&auth, &cookie).await, Err(StatusCode::UNAUTHORIZED));
    let mut not_ascii = HeaderMap::new();
    let mut bytes = b"Bearer ".to_vec();
    bytes.extend_from_slice(good.as_bytes());
    bytes.extend_from_slice("é".as_bytes());
    not_ascii.insert(AUTHORIZATION, HeaderValue::from_bytes(&bytes).unwrap());
    assert_eq!(
        outcome(&auth, &not_ascii).await,
        Err(StatusCode::UNAUTHORIZED)
    );
    for spaced in [format!("Bearer\t{good}"), format!("Bearer,{good}")] {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, HeaderValue::from_str(&spaced).unwrap());
        assert_eq!(
            outcome(&auth, &headers).await,
            Err(StatusCode::UNAUTHORIZED)
        );
    }
    // Past the bound: a JWT shape with an unknown kid would fetch keys.
    let signature = good.rsplit('.').next().unwrap();
    let padded_claims = with(claims(), &json!({ "pad": "x".repeat(MAX_TOKEN_BYTES) }));
    let huge = format!(
        "{}.{}.{signature}",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"ES256","kid":"zzz"}"#),
        URL_SAFE_NO_PAD.encode(padded_claims.to_string()),
    );
    assert!(huge.len() > MAX_TOKEN_BYTES);
    let before = server.requests();
    assert_eq!(
        outcome(&auth, &bearer(&huge)).await,
        Err(StatusCode::UNAUTHORIZED)
    );
    assert_eq!(server.requests(), before, "an oversized token fetched keys");
}

/// A JWKS endpoint that redirects to plain HTTP (where anyone on the path
/// could answer with their own keys) is not followed: the plain server
/// gets no request, the attacker's token is refused, and the server is
/// left with no keys rather than the attacker's.
#[tokio::test]
async fn a_jwks_redirect_to_plain_http_is_not_followed() {
    let evil_key = TestKey::es256("evil");
    let plain = PlainJwks::start(jwks_of(&[&evil_key])).await;
    let redirect = Redirector::start(&format!("{}/jwks.json", plain.url)).await;
    let auth =
        Authenticator::with_settings(&oauth_config(&redirect.url, &redirect.ca_file), quick())
            .unwrap();
    assert_eq!(
        outcome(&auth, &bearer(&evil_key.sign(&claims()))).await,
        Err(StatusCode::UNAUTHORIZED)
    );
    assert!(redirect.requests() >= 1, "the redirect was never asked");
    assert_eq!(plain.requests(), 0, "the plain-HTTP JWKS was fetched");
}

/// The signing key file swapped between a real key and a link to a key
/// others may read, while the server loads it: every load either refuses
/// the link or reads the real key; none ever reads through the link (the
/// file checked is the file read).
#[test]
fn a_key_file_swapped_for_a_link_during_load_is_never_read_through_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    let readable = dir.path().join("readable");
    let path = dir.path().join("key");
    std::fs::write(&real, "R".repeat(48)).unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(&readable, "L".repeat(48)).unwrap();
    std::fs::set_permissions(&readable, std::fs::Permissions::from_mode(0o600)).unwrap();
    let sealed_by_real = crate::signed::SigningKey::load(&real)
        .unwrap()
        .seal("probe", &json!(1), Duration::from_secs(60))
        .unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&readable, &link).unwrap();
    let hard = dir.path().join("hard");
    std::fs::hard_link(&real, &hard).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (stop, path, link, hard) = (Arc::clone(&stop), path.clone(), link, hard);
        std::thread::spawn(move || {
            let mut flip = false;
            while !stop.load(Ordering::Relaxed) {
                let from = if flip { &link } else { &hard };
                let staged = path.with_extension("staged");
                let _ = std::fs::remove_file(&staged);
                if flip {
                    let _ = std::os::unix::fs::symlink(std::fs::read_link(from).unwrap(), &staged);
                } else {
                    let _ = std::fs::hard_link(from, &staged);
                }
                let _ = std::fs::rename(&staged, &path);
                flip = !flip;
            }
        })
    };
    let (mut loaded, mut refused) = (0, 0);
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(2) {
        match crate::signed::SigningKey::load(&path) {
            Ok(key) => {
                loaded += 1;
                assert!(
                    key.open("probe", &sealed_by_real).is_ok(),
                    "a key was read through the link"
                );
            }
            Err(_) => refused += 1,
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(
        loaded > 0 && refused > 0,
        "loaded {loaded}, refused {refused}"
    );
}

// ---------------------------------------------------------------------
// The two servers of the redirect test.
// ---------------------------------------------------------------------

/// A plain-HTTP server on 127.0.0.1 answering every request with one JWKS.
struct PlainJwks {
    url: String,
    requests: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for PlainJwks {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl PlainJwks {
    async fn start(document: Value) -> PlainJwks {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&requests);
        let body = document.to_string();
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            }
        });
        PlainJwks {
            url,
            requests,
            task,
        }
    }

    fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

/// An HTTPS server on 127.0.0.1, its certificate from a CA of its own,
/// answering every request with `302 Location: <to>`.
struct Redirector {
    url: String,
    ca_file: std::path::PathBuf,
    requests: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Drop for Redirector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Redirector {
    async fn start(to: &str) -> Redirector {
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign];
        let ca =
            rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap())
                .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ca_file = dir.path().join("ca.pem");
        let body = STANDARD.encode(ca.der());
        let lines: Vec<&str> = body
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        std::fs::write(
            &ca_file,
            format!(
                "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
                lines.join("\n")
            ),
        )
        .unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}/jwks.json", listener.local_addr().unwrap());
        let requests = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&requests);
        let to = to.to_owned();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (acceptor, counted, to) = (acceptor.clone(), Arc::clone(&counted), to.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                        match tls.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    counted.fetch_add(1, Ordering::SeqCst);
                    let answer = format!(
                        "HTTP/1.1 302 Found\r\nlocation: {to}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    );
                    let _ = tls.write_all(answer.as_bytes()).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        Redirector {
            url,
            ca_file,
            requests,
            task,
            _dir: dir,
        }
    }

    fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

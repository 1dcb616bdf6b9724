//! `modhost mcp --http` attacked at its door: requests without a token,
//! with a forged, expired or foreign one, with too few scopes or a token in
//! the URL, against the real binary; an OAuth authorization server played
//! by an HTTPS JWKS server on the loopback with a test CA of its own; and
//! the token never reaching a module.
//!
//! The unit tests of `host/mcp/src/http/auth/` attack the authenticator
//! itself in more ways (algorithm confusion, key rotation and refetch
//! bounds, every way the JWKS endpoint can fail); these hold the server to
//! the same answers on the wire.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use crate::support::{Fixture, Home, binaries};

/// The URL clients use (a TLS proxy's, in a real deployment): the audience
/// tokens must name. The server itself listens on the loopback.
const CANONICAL: &str = "https://mcp.example.test/mcp";
const ISSUER: &str = "https://auth.example.test";
const ECHO: &str = "echo__echo_echo";

// ---------------------------------------------------------------------
// The authorization server's side: a signing key and its JWKS over HTTPS.
// ---------------------------------------------------------------------

/// An ES256 signing key and its public JWK.
struct SigningKey {
    kid: String,
    encoding: EncodingKey,
    jwk: Value,
}

impl SigningKey {
    fn new(kid: &str) -> SigningKey {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let point = pair.public_key_raw();
        let jwk = json!({
            "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": kid,
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..]),
        });
        SigningKey {
            kid: kid.to_owned(),
            encoding: EncodingKey::from_ec_der(pair.serialized_der()),
            jwk,
        }
    }

    fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).unwrap()
    }
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A good token's claims, with `changes` applied (`null` removes a claim).
fn claims(changes: &Value) -> Value {
    let now = now();
    let mut claims = json!({
        "iss": ISSUER, "sub": "alice", "aud": CANONICAL,
        "iat": now, "nbf": now - 5, "exp": now + 600,
        "scope": "mcp:tools",
    });
    for (key, value) in changes.as_object().unwrap() {
        if value.is_null() {
            claims.as_object_mut().unwrap().remove(key);
        } else {
            claims[key] = value.clone();
        }
    }
    claims
}

/// An HTTPS server on 127.0.0.1 answering every request with one JWKS,
/// its certificate signed by a CA made for it (written to `ca.pem`).
struct JwksServer {
    url: String,
    requests: Arc<AtomicU64>,
}

impl JwksServer {
    fn start(keys: &[&SigningKey], dir: &std::path::Path) -> (JwksServer, std::path::PathBuf) {
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign];
        let ca =
            rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap())
                .unwrap();
        let ca_file = dir.join("ca.pem");
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
        // ring, as the host's own TLS (rustls deprecates its provider for
        // lacking post-quantum key exchange, irrelevant to a test server).
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = Arc::new(
            rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(
                    vec![cert.der().clone()],
                    rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
                )
                .unwrap(),
        );
        let document =
            json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()}).to_string();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("https://{}/jwks.json", listener.local_addr().unwrap());
        let requests = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&requests);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (config, document, counted) =
                    (Arc::clone(&config), document.clone(), Arc::clone(&counted));
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                    let connection = rustls::ServerConnection::new(config).unwrap();
                    let mut tls = rustls::StreamOwned::new(connection, stream);
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
                        match tls.read(&mut byte) {
                            Ok(1) => head.push(byte[0]),
                            _ => return,
                        }
                    }
                    counted.fetch_add(1, Ordering::SeqCst);
                    let _ = write!(
                        tls,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{document}",
                        document.len()
                    );
                    let _ = tls.flush();
                    tls.conn.send_close_notify();
                    let _ = tls.flush();
                });
            }
        });
        (JwksServer { url, requests }, ca_file)
    }
}

// ---------------------------------------------------------------------
// The server under attack.
// ---------------------------------------------------------------------

/// A running `modhost mcp --http 127.0.0.1:0`; killed and reaped on drop.
struct Served {
    child: Child,
    base: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    /// Start the server of `home` and wait for its "serving" line.
    fn start(home: &Home) -> Served {
        Served::try_start(home)
            .unwrap_or_else(|stderr| panic!("modhost mcp --http did not start:\n{stderr}"))
    }

    /// Start it; its stderr when it exits instead of serving.
    fn try_start(home: &Home) -> Result<Served, String> {
        Served::try_start_at(home, "127.0.0.1:0")
    }

    fn try_start_at(home: &Home, address: &str) -> Result<Served, String> {
        let mut command = Command::new(&binaries().modhost);
        command
            .arg("--home")
            .arg(home.path())
            .arg("--workspace")
            .arg(home.workspace())
            .args(["mcp", "--http", address])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if key.starts_with("MODHOST_") || key == "RUST_LOG" {
                command.env_remove(key.as_ref());
            }
        }
        let mut child = command.spawn().expect("start modhost mcp --http");
        let stderr = child.stderr.take().unwrap();
        let (lines, received) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                if lines.send(line).is_err() {
                    return;
                }
            }
        });
        let mut seen = String::new();
        loop {
            match received.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => {
                    if let Some(rest) = line.split("serving MCP over HTTP at http://").nth(1) {
                        let address = rest.trim().trim_end_matches("/mcp").to_owned();
                        // Keep draining stderr so the server never blocks on it.
                        std::thread::spawn(move || while received.recv().is_ok() {});
                        return Ok(Served {
                            child,
                            base: format!("http://{address}"),
                        });
                    }
                    seen.push_str(&line);
                    seen.push('\n');
                }
                Err(_) => {
                    let _ = child.kill();
                    let status = child.wait().ok();
                    return Err(format!("{seen}(exit: {status:?})"));
                }
            }
        }
    }

    /// POST `body` to `/mcp` (plus `query`) with `headers`.
    fn post(&self, query: &str, headers: &[(&str, &str)], body: &Value) -> Answer {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        let mut request = agent
            .post(format!("{}/mcp{query}", self.base))
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2025-11-25");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let mut response = request.send(body.to_string()).expect("the server answers");
        Answer::of(&mut response)
    }

    fn get(&self, path: &str) -> Answer {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut response = agent
            .get(format!("{}{path}", self.base))
            .call()
            .expect("the server answers");
        Answer::of(&mut response)
    }

    /// `initialize` (2025-11-25) with `token`: the answer.
    fn initialize(&self, token: Option<&str>) -> Answer {
        let authorization = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = authorization
            .iter()
            .map(|a| ("Authorization", a.as_str()))
            .collect();
        self.post("", &headers, &initialize())
    }
}

fn initialize() -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "mcp_http_auth", "version": "1"},
        },
    })
}

/// A response: status, the headers this file reads, the body.
#[derive(Debug)]
struct Answer {
    status: u16,
    challenge: Option<String>,
    session: Option<String>,
    body: String,
}

impl Answer {
    fn of(response: &mut ureq::http::Response<ureq::Body>) -> Answer {
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let (challenge, session) = (header("www-authenticate"), header("mcp-session-id"));
        Answer {
            status: response.status().as_u16(),
            challenge,
            session,
            body: response.body_mut().read_to_string().unwrap_or_default(),
        }
    }

    /// The JSON-RPC message of the body (plain JSON or one SSE event).
    fn message(&self) -> Value {
        let text = self
            .body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .find(|l| l.starts_with('{'))
            .unwrap_or(self.body.trim());
        serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON-RPC ({e}): {self:?}"))
    }

    /// Refused with `status`, the challenge naming `error` (none: no
    /// `error` parameter) and the metadata.
    fn assert_refused(&self, status: u16, error: Option<&str>) {
        assert_eq!(self.status, status, "{self:?}");
        let challenge = self
            .challenge
            .as_deref()
            .unwrap_or_else(|| panic!("no WWW-Authenticate: {self:?}"));
        assert!(challenge.starts_with("Bearer "), "{challenge}");
        match error {
            Some(error) => assert!(
                challenge.contains(&format!("error=\"{error}\"")),
                "{challenge}"
            ),
            None => assert!(!challenge.contains("error="), "{challenge}"),
        }
        if status != 400 {
            assert!(
                challenge.contains(
                    "resource_metadata=\"https://mcp.example.test/.well-known/oauth-protected-resource/mcp\""
                ),
                "{challenge}"
            );
        }
        assert!(
            !self.body.contains("serverInfo"),
            "refused, yet answered: {self:?}"
        );
    }
}

fn oauth_config(jwks: &JwksServer, ca_file: &std::path::Path, extra: &str) -> String {
    format!(
        "[http]\ncanonical_url = \"{CANONICAL}\"\n{extra}\n\
         [http.oauth]\nissuer = \"{ISSUER}\"\njwks_uri = \"{}\"\njwks_ca_file = \"{}\"\n\
         required_scopes = [\"mcp:tools\"]\nscopes_supported = [\"mcp:tools\"]\n",
        jwks.url,
        ca_file.display()
    )
}

// ---------------------------------------------------------------------
// The attacks.
// ---------------------------------------------------------------------

/// Every way in but the right one is refused on the wire with the status
/// and challenge the MCP specification names; the right one gets in.
#[test]
fn oauth_tokens_are_checked_on_every_request_and_only_the_right_one_gets_in() {
    let home = Home::new();
    let honest = SigningKey::new("k1");
    let (jwks, ca_file) = JwksServer::start(&[&honest], &home.outside());
    home.write_config(&oauth_config(&jwks, &ca_file, ""));
    let server = Served::start(&home);

    // No token: the challenge says where to learn how to get one.
    server.initialize(None).assert_refused(401, None);
    // The metadata it points to names this resource and its issuer.
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let metadata = server.get(path);
        assert_eq!(metadata.status, 200, "{path}: {metadata:?}");
        let document: Value = serde_json::from_str(&metadata.body).unwrap();
        assert_eq!(document["resource"], CANONICAL);
        assert_eq!(document["authorization_servers"], json!([ISSUER]));
        assert_eq!(document["bearer_methods_supported"], json!(["header"]));
    }
    // Forged: the attacker's key under the honest kid.
    let forger = SigningKey::new("k1");
    server
        .initialize(Some(&forger.sign(&claims(&json!({})))))
        .assert_refused(401, Some("invalid_token"));
    // Expired, not yet valid, another issuer.
    for changes in [
        json!({"exp": now() - 300}),
        json!({"nbf": now() + 300}),
        json!({"iss": "https://evil.example.test"}),
    ] {
        server
            .initialize(Some(&honest.sign(&claims(&changes))))
            .assert_refused(401, Some("invalid_token"));
    }
    // A token for another resource (the same authorization server's token
    // for another MCP server), or for no resource at all.
    for aud in [json!("https://other.example.test/mcp"), json!(null)] {
        server
            .initialize(Some(&honest.sign(&claims(&json!({ "aud": aud })))))
            .assert_refused(401, Some("invalid_token"));
    }
    // `alg: none`.
    let unsigned = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(json!({"alg": "none", "kid": "k1"}).to_string()),
        URL_SAFE_NO_PAD.encode(claims(&json!({})).to_string())
    );
    server
        .initialize(Some(&unsigned))
        .assert_refused(401, Some("invalid_token"));
    // A good token without the required scope: 403 naming it.
    let narrow = server.initialize(Some(&honest.sign(&claims(&json!({"scope": "files:read"})))));
    narrow.assert_refused(403, Some("insufficient_scope"));
    assert!(narrow.challenge.unwrap().contains("scope=\"mcp:tools\""));
    // The right token gets in.
    let good = honest.sign(&claims(&json!({})));
    let answer = server.initialize(Some(&good));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        answer.message()["result"]["protocolVersion"],
        "2025-11-25",
        "{answer:?}"
    );
    // The right token in the query string: refused, even beside a good header.
    let leaked = server.post(
        &format!("?access_token={good}"),
        &[("Authorization", &format!("Bearer {good}"))],
        &initialize(),
    );
    leaked.assert_refused(400, Some("invalid_request"));
    assert_eq!(
        jwks.requests.load(Ordering::SeqCst),
        1,
        "the keys were fetched once and cached"
    );
}

/// What `modhost token new` prints admits that token, and nothing else; a
/// static token's caller is its configured principal, never a reserved one.
#[test]
fn a_static_token_made_by_modhost_token_new_gets_in_and_a_wrong_one_does_not() {
    let home = Home::new();
    let made = home.run(&[
        "token",
        "new",
        "--principal",
        "ci-bot",
        "--scope",
        "mcp:tools",
        "--json",
    ]);
    made.expect_code(0);
    let made = made.json();
    let token = made["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("mht_"), "{made}");
    assert!(
        !home.path().join("config.toml").exists(),
        "token new writes no file"
    );
    home.write_config(&format!(
        "[http]\ncanonical_url = \"{CANONICAL}\"\n\n{}",
        made["config_lines"].as_str().unwrap()
    ));
    let server = Served::start(&home);
    assert_eq!(server.initialize(Some(&token)).status, 200);
    let mut wrong = token.clone();
    wrong.pop();
    wrong.push(if token.ends_with('A') { 'B' } else { 'A' });
    server
        .initialize(Some(&wrong))
        .assert_refused(401, Some("invalid_token"));
    server
        .initialize(Some(made["sha256"].as_str().unwrap()))
        .assert_refused(401, Some("invalid_token"));
    server.initialize(None).assert_refused(401, None);
    // A token named like the local user or an OAuth subject never loads.
    home.write_config(&format!(
        "[[http.tokens]]\nprincipal = \"local:root\"\nsha256 = \"{}\"\n",
        made["sha256"].as_str().unwrap()
    ));
    let refused = Served::try_start(&home)
        .err()
        .expect("a reserved principal stops the server");
    assert!(refused.contains("reserved"), "{refused}");
    assert!(refused.contains("config.toml"), "{refused}");
}

/// The caller's token goes nowhere past the door: a module sees neither it
/// nor any part of it, in its request or its environment.
#[test]
fn no_token_reaches_a_module() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    let honest = SigningKey::new("k1");
    let (jwks, ca_file) = JwksServer::start(&[&honest], &home.outside());
    let made = home
        .run(&[
            "token",
            "new",
            "--principal",
            "ci-bot",
            "--scope",
            "mcp:tools",
            "--json",
        ])
        .json();
    home.write_config(&oauth_config(
        &jwks,
        &ca_file,
        made["config_lines"].as_str().unwrap(),
    ));
    let server = Served::start(&home);
    let jwt = honest.sign(&claims(&json!({})));
    for token in [made["token"].as_str().unwrap(), jwt.as_str()] {
        let authorization = format!("Bearer {token}");
        let initialized = server.initialize(Some(token));
        assert_eq!(initialized.status, 200, "{initialized:?}");
        let session = initialized.session.clone();
        let mut headers = vec![("Authorization", authorization.as_str())];
        if let Some(session) = &session {
            headers.push(("Mcp-Session-Id", session.as_str()));
        }
        let notified = server.post(
            "",
            &headers,
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        );
        assert!(notified.status < 300, "{notified:?}");
        let call = server.post(
            "",
            &headers,
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": ECHO, "arguments": {}}}),
        );
        assert_eq!(call.status, 200, "{call:?}");
        let message = call.message();
        assert_eq!(message["result"]["isError"], json!(false), "{message}");
        let seen = message["result"].to_string();
        assert!(
            seen.contains("\"env\""),
            "the module reported what it saw: {seen}"
        );
        for piece in token.split('.').filter(|p| p.len() >= 8) {
            assert!(
                !seen.contains(piece),
                "the module saw the caller's token: {seen}"
            );
        }
    }
    // Each call is recorded under the caller the token named (the audit
    // writer appends off the call's path: wait for both records), and no
    // record holds the token.
    let started = std::time::Instant::now();
    let (run, principals) = loop {
        let run = home.run(&["audit", "show", "--json"]);
        run.expect_code(0);
        let principals: Vec<String> = run
            .json()
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter(|r| r["tool"] == ECHO)
            .map(|r| r["principal"].as_str().unwrap_or_default().to_owned())
            .collect();
        if principals.len() >= 2 || started.elapsed() > Duration::from_secs(30) {
            break (run, principals);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    drop(server);
    assert_eq!(
        principals,
        ["ci-bot".to_owned(), format!("oauth:{ISSUER}#alice")],
        "{}",
        run.stdout
    );
    for token in [made["token"].as_str().unwrap(), jwt.as_str()] {
        assert!(!run.stdout.contains(token), "the audit log holds a token");
    }
}

/// An authorization server whose keys cannot be fetched lets no OAuth
/// token in, and takes nothing else down: static tokens and health checks
/// still answer.
#[test]
fn an_unreachable_jwks_refuses_oauth_tokens_and_nothing_else() {
    let home = Home::new();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let made = home
        .run(&["token", "new", "--principal", "ci-bot", "--json"])
        .json();
    home.write_config(&format!(
        "[http]\ncanonical_url = \"{CANONICAL}\"\n\n{}\n[http.oauth]\nissuer = \"{ISSUER}\"\n\
         jwks_uri = \"https://127.0.0.1:{port}/jwks.json\"\n",
        made["config_lines"].as_str().unwrap()
    ));
    let server = Served::start(&home);
    let key = SigningKey::new("k1");
    for _ in 0..3 {
        server
            .initialize(Some(&key.sign(&claims(&json!({})))))
            .assert_refused(401, Some("invalid_token"));
    }
    assert_eq!(
        server
            .initialize(Some(made["token"].as_str().unwrap()))
            .status,
        200
    );
    assert_eq!(server.get("/healthz").status, 200);
}

/// Without authentication the server stays on the loopback: anyone who
/// could reach it would run this host's tools.
#[test]
fn without_authentication_a_non_loopback_bind_is_refused() {
    let home = Home::new();
    let refused = Served::try_start_at(&home, "0.0.0.0:0")
        .err()
        .expect("refused without [http] auth");
    assert!(
        refused.contains("[http.tokens]") || refused.contains("authentication"),
        "{refused}"
    );
}

//! What the authentication tests share: signing keys, tokens, and an
//! HTTPS JWKS server on the loopback with a test CA of its own. Nothing
//! here reaches beyond 127.0.0.1.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A 2048-bit RSA key made for these tests only (PKCS#1 DER, base64):
/// ring, the test CA's backend, cannot generate RSA keys.
const TEST_RSA_PKCS1: [&str; 16] = [
    "MIIEowIBAAKCAQEAt1tNUN8betvLreiqSwCOhfoP9BK6tdarJfX7aw1OstXFY4mYlZXLN/LKxt/w1ZdkV5WPTIpsnI7WwMtA2nzV",
    "RK6zqpqRwhQnEzrBL+X4RGPqNtlpSXroYovXsc7+pSMxftlRGALwNApfYwAyxWiK1RAy7Obex2nhze42jKI+TgjbMINnokNmUkbm",
    "2nxdyC2VNQ46MpZFchf5G0YaBTVURA5lVFVjawwXYv3lrWp4/4DGCnfA+2yyvkz86k3aI9rBzuXbE2PhJjdL01QhOyOgm3imTLte",
    "7j1TkOhlAp6LvmAYcZPGIi2jvmN/VAKsptRTV5bi/hdT/W4VrQhKsAg5qQIDAQABAoIBACD0mtiohRynsTvkh+kbpEI94AyvKhph",
    "R1k3FVWYKnc3t3bsxf1K02AOtjYZDYUiZRFd6wfnkF5ySPSVg6ZRjhZ+bQICrqSKsTxCUPM+Owl1yOTLXmJr4iVGO8I0cW32faCu",
    "SCZP7uL3o03cvQNgxyVE+FY+p7eBVynHgUv1JEwrei5mRIlkNJwuV/PcGDwsiX52EaVqrKaVeNiwyOg82LXv10BYKLJUfuHsExx/",
    "sAVn9+YwwMJlRZy7ZOoVacIF77Sd6h818rK7S9tTLXvIDVc/ejEkYTAyY/cHPsjds1Q60jEr2uR13FKil5T1P/CyeOt+TKGm8hgx",
    "54e0THJ+kMUCgYEA+TpDVyaaU7AEr8Ev+gHW0tP9bls/j3joho9Aa1EmYjQuqzaStPquL7WCt/wlt6YtGdjKrPjuEf3amgjTVDte",
    "evm1mG0YmPOL3HlnMSFc0elZg1eFCmRnBbeIKCTYB0FeSBi9FML44mvdHBETeEXEupiB+w8Xoa5U/LCAGQfaxOUCgYEAvFbPyXdx",
    "ww4T5iY76JXlMGzHRU7WORxlUek/wbVfhxc+62L85eyB+jT6MQ3W/HjNVWCqTYdX2bVxvIv2ZP6kwrMY9Q3cnm/AMZEYJygzgMVC",
    "+Gmj93m5yWX36tfSJsE8KHxknUBDci/KtOEQGZPyDakZabQDb0frspgH5mZMeXUCgYB0oDsa8UmOl/PZewHEcE/i4Kjbl3+q192X",
    "+jke/x6DHgAoxqToY9ZXJQ1Co4/S3MSGL9jIEMT3Tl+ZbT/XTuDrkybTaVn1WSK9zWHor8ALyrLEr5PmRQ2gsz3X60XcP06rVkhF",
    "CugErI0PsT33Lk7dMrjAj1NzqWzDwqRvEinhsQKBgQC7TTpoCbnBWgbAI9YAgNHlTsj+TGEPewXoaCdX5aCTILMaNN99aa/5vSX0",
    "EudzPlA2UGQNpkPf52qtMCRiXDxOxP5U9uwpRMnGgZ2bk4dk0MjBc431V8FEYXwkuW3tzM6fFNaa7IYm0RCuwgTY6yEWJM15KeUg",
    "jk4A1uFEaQg04QKBgHSFsCERmUaja9r5FqB+eBGn+6ioP9WyiDNKTVBCFo3z2F3Mxp+nm8wWp3mJpIjrJPprSTDteMbtnkqIQXSa",
    "lPQsYqZh60K1csI5lVxOvJ6neeH9fS0/stU/C2d+6baGA5JLHK26nhPV54fvJRTsLXjuahU19jCVjnt/P2Npj6nj",
];

/// Seconds since the epoch.
pub(crate) fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A signing key and its public JWK.
pub(crate) struct TestKey {
    pub(crate) kid: String,
    pub(crate) alg: Algorithm,
    encoding: EncodingKey,
    jwk: Value,
}

impl TestKey {
    /// The fixed test RSA key (RS256).
    pub(crate) fn rsa(kid: &str) -> TestKey {
        let der = STANDARD.decode(TEST_RSA_PKCS1.concat()).unwrap();
        let encoding = EncodingKey::from_rsa_der(&der);
        let jwk =
            serde_json::to_value(Jwk::from_encoding_key(&encoding, Algorithm::RS256).unwrap())
                .unwrap();
        TestKey::with(kid, Algorithm::RS256, encoding, jwk)
    }

    /// A fresh P-256 key (ES256).
    pub(crate) fn es256(kid: &str) -> TestKey {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let point = pair.public_key_raw();
        assert_eq!(
            (point.len(), point[0]),
            (65, 4),
            "an uncompressed P-256 point"
        );
        let jwk = json!({
            "kty": "EC",
            "crv": "P-256",
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..]),
        });
        let encoding = EncodingKey::from_ec_der(pair.serialized_der());
        TestKey::with(kid, Algorithm::ES256, encoding, jwk)
    }

    /// A fresh Ed25519 key (EdDSA).
    pub(crate) fn ed25519(kid: &str) -> TestKey {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        let jwk = json!({
            "kty": "OKP",
            "crv": "Ed25519",
            "x": URL_SAFE_NO_PAD.encode(pair.public_key_raw()),
        });
        let encoding = EncodingKey::from_ed_der(pair.serialized_der());
        TestKey::with(kid, Algorithm::EdDSA, encoding, jwk)
    }

    fn with(kid: &str, alg: Algorithm, encoding: EncodingKey, mut jwk: Value) -> TestKey {
        jwk["kid"] = json!(kid);
        jwk["use"] = json!("sig");
        jwk["alg"] = serde_json::to_value(alg).unwrap();
        TestKey {
            kid: kid.to_owned(),
            alg,
            encoding,
            jwk,
        }
    }

    /// The public JWK, as a JWKS lists it.
    pub(crate) fn public_jwk(&self) -> Value {
        self.jwk.clone()
    }

    /// A token with `claims`, its header naming this key.
    pub(crate) fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        self.sign_with(&header, claims)
    }

    /// A token with `claims` under `header`, signed with this key.
    pub(crate) fn sign_with(&self, header: &Header, claims: &Value) -> String {
        jsonwebtoken::encode(header, claims, &self.encoding).unwrap()
    }
}

/// `{"keys": [...]}` of `keys`.
pub(crate) fn jwks_of(keys: &[&TestKey]) -> Value {
    json!({ "keys": keys.iter().map(|k| k.public_jwk()).collect::<Vec<_>>() })
}

/// A compact JWS of `header` and `claims` with `signature` as given (no
/// key involved: for tokens no honest signer makes).
pub(crate) fn raw_token(header: &Value, claims: &Value, signature: &[u8]) -> String {
    format!(
        "{}.{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string()),
        URL_SAFE_NO_PAD.encode(signature)
    )
}

/// What the JWKS server answers.
#[derive(Debug, Clone)]
pub(crate) enum Answer {
    /// 200 with this document.
    Json(Value),
    /// This status, an empty body.
    Status(u16),
    /// 200 with bytes that are no JSON.
    Garbage,
    /// 200 with a body of this many bytes.
    Huge(usize),
    /// Nothing, the connection held open.
    Hang,
}

/// A test CA: its certificate as PEM and an issuer for server certificates.
pub(crate) struct TestCa {
    issuer: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
}

impl TestCa {
    pub(crate) fn new() -> TestCa {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "modhost test CA");
        let issuer =
            rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap())
                .unwrap();
        TestCa { issuer }
    }

    pub(crate) fn pem(&self) -> String {
        let body = STANDARD.encode(self.issuer.der());
        let lines: Vec<&str> = body
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        format!(
            "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
            lines.join("\n")
        )
    }

    /// A TLS server configuration for 127.0.0.1 and localhost.
    fn server_config(&self) -> rustls::ServerConfig {
        let key = rcgen::KeyPair::generate().unwrap();
        let params =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                .unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        // ring, as the host's other TLS (rustls deprecates its provider for
        // lacking post-quantum key exchange, irrelevant to a test server).
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .unwrap()
    }
}

/// An HTTPS server on 127.0.0.1 answering every request with its
/// [`Answer`], counting the requests.
pub(crate) struct JwksServer {
    pub(crate) url: String,
    /// The PEM of the CA that signed its certificate.
    pub(crate) ca_file: PathBuf,
    answer: Arc<Mutex<Answer>>,
    requests: Arc<AtomicU64>,
    _dir: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for JwksServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl JwksServer {
    /// A server whose certificate `ca` signed, answering `answer`.
    pub(crate) async fn start_with(ca: &TestCa, answer: Answer) -> JwksServer {
        let dir = tempfile::tempdir().unwrap();
        let ca_file = dir.path().join("ca.pem");
        std::fs::write(&ca_file, ca.pem()).unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(ca.server_config()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let answer = Arc::new(Mutex::new(answer));
        let requests = Arc::new(AtomicU64::new(0));
        let (shared, counted) = (Arc::clone(&answer), Arc::clone(&requests));
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (acceptor, answer, counted) =
                    (acceptor.clone(), Arc::clone(&shared), Arc::clone(&counted));
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
                    let answer = answer.lock().unwrap().clone();
                    let (status, body) = match answer {
                        Answer::Json(doc) => (200, doc.to_string().into_bytes()),
                        Answer::Status(code) => (code, Vec::new()),
                        Answer::Garbage => (200, b"<html>not a key set</html>".to_vec()),
                        Answer::Huge(n) => (200, vec![b' '; n]),
                        Answer::Hang => {
                            tokio::time::sleep(Duration::from_secs(60)).await;
                            return;
                        }
                    };
                    let response = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = tls.write_all(response.as_bytes()).await;
                    let _ = tls.write_all(&body).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        JwksServer {
            url: format!("https://127.0.0.1:{port}/jwks.json"),
            ca_file,
            answer,
            requests,
            _dir: dir,
            task,
        }
    }

    /// A server with a CA of its own, answering `keys`.
    pub(crate) async fn start(keys: &[&TestKey]) -> JwksServer {
        JwksServer::start_with(&TestCa::new(), Answer::Json(jwks_of(keys))).await
    }

    pub(crate) fn answer(&self, answer: Answer) {
        *self.answer.lock().unwrap() = answer;
    }

    pub(crate) fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

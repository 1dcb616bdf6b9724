//! A real OCI registry on loopback for the distribution tests: Debian's
//! `docker-registry` (CNCF distribution v2), started by the test with TLS
//! from a test CA, its storage in a temporary folder, and a push helper.
//!
//! - **The real server, not a mock.** What modhost pulls goes through the
//!   registry an operator would run (tag resolution, digests, manifest
//!   validation on push). `tests/setup` installs the package; a missing
//!   binary fails the test with the command to install it, never a skip.
//! - **Its disk is the attack surface.** [`Registry::blob_data`] is the file
//!   the registry serves a blob (or a manifest) from, so a test can tamper
//!   with stored bytes the way a compromised registry or mirror would.
//! - **The test CA is the https lab's** ([`TestCa`]); the host trusts it
//!   through `[distribution] ca_certificates`, as an operator would.
//! - **Pushes use oci-client** (the same crate the host pulls with), with the
//!   test CA as its trust; manifests are pushed as the exact bytes the test
//!   wrote ([`Pusher::manifest`]), so a test knows every digest.
//! - The plain-http registry ([`Registry::start_plain_http`]) exists to be
//!   refused.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use oci_client::Reference;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::tls_lab::TestCa;

pub const REGISTRY_BINARY: &str = "/usr/bin/docker-registry";
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
pub const WASM_LAYER: &str = "application/wasm";
pub const ARCHIVE_LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
pub const EMPTY_CONFIG: &str = "application/vnd.oci.empty.v1+json";

/// A running registry; stopped (by its own pid) and its storage removed on
/// drop.
#[derive(Debug)]
pub struct Registry {
    child: Child,
    addr: SocketAddr,
    dir: TempDir,
    ca: TestCa,
    tls: bool,
}

impl Registry {
    /// A registry with TLS from a fresh test CA ([`Registry::ca_pem`]).
    pub fn start() -> Registry {
        Registry::start_with(true)
    }

    /// A registry that speaks plain http (for the refusal test).
    pub fn start_plain_http() -> Registry {
        Registry::start_with(false)
    }

    fn start_with(tls: bool) -> Registry {
        assert!(
            Path::new(REGISTRY_BINARY).is_file(),
            "{REGISTRY_BINARY} is missing: install Debian's registry with\n  \
             apt-get install -y docker-registry\n(tests/setup does this)"
        );
        let dir = tempfile::Builder::new()
            .prefix("modhost-oci-lab-")
            .tempdir()
            .expect("temp dir");
        // The CA and certificate maker of the https lab: one way to make
        // test PKI.
        let ca = TestCa::new(dir.path(), "ca");
        let cert = ca.server_cert(dir.path(), "server", false);
        // The port is chosen free just before the registry binds it; a lost
        // race (another process took it) is retried with a new port.
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            let tls_section = if tls {
                format!(
                    "  tls:\n    certificate: {}\n    key: {}\n",
                    cert.cert_pem.display(),
                    cert.key_pem.display()
                )
            } else {
                String::new()
            };
            // No blob descriptor cache: a tampered file on disk is what the
            // next request gets.
            let config = format!(
                "version: 0.1\n\
                 log:\n  level: warn\n  accesslog:\n    disabled: true\n\
                 storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
                 http:\n  addr: {addr}\n{tls_section}",
                dir.path().join("storage").display()
            );
            let config_path = dir.path().join("config.yml");
            std::fs::write(&config_path, config).unwrap();
            let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
            let mut child = Command::new(REGISTRY_BINARY)
                .arg("serve")
                .arg(&config_path)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("start {REGISTRY_BINARY}: {e}"));
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(15) {
                if let Some(status) = child.try_wait().unwrap() {
                    let log = std::fs::read_to_string(dir.path().join("registry.log"))
                        .unwrap_or_default();
                    if log.contains("address already in use") {
                        break;
                    }
                    panic!("docker-registry exited ({status}):\n{log}");
                }
                if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                    return Registry {
                        child,
                        addr,
                        dir,
                        ca,
                        tls,
                    };
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("docker-registry did not start listening on loopback");
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// `oci://127.0.0.1:PORT/<repository><suffix>` (`suffix` `:tag` or
    /// `@sha256:…`).
    pub fn reference(&self, repository: &str, suffix: &str) -> String {
        format!("oci://{}/{repository}{suffix}", self.host())
    }

    /// The test CA's certificate (PEM): what `[distribution]
    /// ca_certificates` names.
    pub fn ca_pem(&self) -> PathBuf {
        self.ca.pem_path().to_path_buf()
    }

    /// The `[distribution]` section trusting this registry's CA.
    pub fn config_toml(&self) -> String {
        self.ca.distribution_config()
    }

    /// The file the registry serves the blob (or manifest) `digest` from.
    pub fn blob_data(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        self.dir
            .path()
            .join("storage/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// A push client for this registry.
    pub fn pusher(&self) -> Pusher {
        assert!(self.tls, "the pusher speaks https only");
        Pusher::new(self)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `sha256:<hex>` of `bytes`.
pub fn digest_of(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{:x}", sha2::Sha256::digest(bytes))
}

/// A descriptor's JSON.
pub fn descriptor(media_type: &str, bytes: &[u8]) -> Value {
    json!({"mediaType": media_type, "digest": digest_of(bytes), "size": bytes.len()})
}

/// One layer to push: media type, bytes, annotations.
#[derive(Debug, Clone)]
pub struct Layer {
    pub media_type: String,
    pub bytes: Vec<u8>,
    pub annotations: BTreeMap<String, String>,
}

impl Layer {
    pub fn new(media_type: &str, bytes: Vec<u8>) -> Layer {
        Layer {
            media_type: media_type.to_owned(),
            bytes,
            annotations: BTreeMap::new(),
        }
    }
}

/// What a push of a manifest made.
#[derive(Debug, Clone)]
pub struct Pushed {
    /// The manifest's (or index's) digest.
    pub digest: String,
    /// Its exact bytes (re-push them under another tag to move a tag).
    pub bytes: Vec<u8>,
    /// Its layers' digests, in order (an index: each platform's layer).
    pub layers: Vec<String>,
}

/// Pushes blobs, manifests and tags to a lab registry with oci-client.
pub struct Pusher {
    client: oci_client::Client,
    registry: String,
    runtime: tokio::runtime::Runtime,
}

impl std::fmt::Debug for Pusher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pusher")
            .field("registry", &self.registry)
            .finish()
    }
}

impl Pusher {
    fn new(registry: &Registry) -> Pusher {
        // reqwest is built without a TLS provider of its own: ring, as the
        // host (rustls deprecates it for lacking post-quantum key exchange,
        // irrelevant to a test client).
        #[allow(deprecated)]
        let _ = rustls::crypto::ring::default_provider().install_default();
        let config = ClientConfig {
            protocol: ClientProtocol::Https,
            extra_root_certificates: vec![Certificate {
                encoding: CertificateEncoding::Pem,
                data: std::fs::read(registry.ca_pem()).unwrap(),
            }],
            ..ClientConfig::default()
        };
        Pusher {
            client: oci_client::Client::try_from(config).expect("the push client"),
            registry: registry.host(),
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
        }
    }

    fn at(&self, repository: &str, tag: &str) -> Reference {
        Reference::with_tag(self.registry.clone(), repository.to_owned(), tag.to_owned())
    }

    /// Push `bytes` as a blob of `repository`; its digest.
    pub fn blob(&self, repository: &str, bytes: &[u8]) -> String {
        let digest = digest_of(bytes);
        let reference = self.at(repository, "unused");
        self.runtime
            .block_on(self.client.push_blob(&reference, bytes.to_vec(), &digest))
            .unwrap_or_else(|e| panic!("push blob {digest} to {repository}: {e}"));
        digest
    }

    /// Push these exact manifest bytes as `tag_or_digest` (a tag, or the
    /// bytes' own `sha256:` digest); their digest.
    pub fn manifest(
        &self,
        repository: &str,
        tag_or_digest: &str,
        media_type: &str,
        bytes: &[u8],
    ) -> String {
        let reference = if tag_or_digest.starts_with("sha256:") {
            Reference::with_digest(
                self.registry.clone(),
                repository.to_owned(),
                tag_or_digest.to_owned(),
            )
        } else {
            self.at(repository, tag_or_digest)
        };
        self.runtime
            .block_on(self.client.push_manifest_raw(
                &reference,
                bytes.to_vec(),
                media_type.parse().unwrap(),
            ))
            .unwrap_or_else(|e| panic!("push manifest {tag_or_digest} to {repository}: {e}"));
        digest_of(bytes)
    }

    /// Push an image manifest with `config` and `layers` (blobs first) as
    /// `tag_or_digest`; `extra` fields are merged into the manifest
    /// (`subject`, `artifactType`, `annotations`).
    pub fn image(
        &self,
        repository: &str,
        tag_or_digest: Option<&str>,
        config: (&str, &[u8]),
        layers: &[Layer],
        extra: Value,
    ) -> Pushed {
        self.blob(repository, config.1);
        let mut layer_json = Vec::new();
        for layer in layers {
            self.blob(repository, &layer.bytes);
            let mut d = descriptor(&layer.media_type, &layer.bytes);
            if !layer.annotations.is_empty() {
                d["annotations"] = json!(layer.annotations);
            }
            layer_json.push(d);
        }
        let mut manifest = json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": descriptor(config.0, config.1),
            "layers": layer_json,
        });
        if let (Some(object), Value::Object(more)) = (manifest.as_object_mut(), extra) {
            object.extend(more);
        }
        let bytes = serde_json::to_vec(&manifest).unwrap();
        let digest = digest_of(&bytes);
        self.manifest(
            repository,
            tag_or_digest.unwrap_or(&digest),
            OCI_MANIFEST,
            &bytes,
        );
        Pushed {
            digest,
            bytes,
            layers: layers.iter().map(|l| digest_of(&l.bytes)).collect(),
        }
    }

    /// Push a WebAssembly component as `wkg oci push` lays it out (the Wasm
    /// OCI artifact spec): config `application/vnd.wasm.config.v0+json`,
    /// one `application/wasm` layer.
    pub fn component(&self, repository: &str, tag: &str, wasm: &[u8]) -> Pushed {
        let config = json!({
            "created": "2026-01-01T00:00:00Z",
            "architecture": "wasm",
            "os": "wasip2",
            "layerDigests": [digest_of(wasm)],
            "component": {"exports": [], "imports": []},
        });
        let config = serde_json::to_vec(&config).unwrap();
        self.image(
            repository,
            Some(tag),
            (WASM_CONFIG, &config),
            &[Layer::new(WASM_LAYER, wasm.to_vec())],
            json!({}),
        )
    }

    /// Push one archive manifest per `(os, architecture, archive)` and an
    /// image index of them tagged `tag`.
    pub fn archive_index(
        &self,
        repository: &str,
        tag: &str,
        platforms: &[(&str, &str, Vec<u8>)],
    ) -> Pushed {
        let mut entries = Vec::new();
        let mut layers = Vec::new();
        for (os, architecture, archive) in platforms {
            let pushed = self.image(
                repository,
                None,
                (EMPTY_CONFIG, b"{}"),
                &[Layer::new(ARCHIVE_LAYER, archive.clone())],
                json!({}),
            );
            let mut entry = descriptor(OCI_MANIFEST, &pushed.bytes);
            entry["platform"] = json!({"os": os, "architecture": architecture});
            entries.push(entry);
            layers.extend(pushed.layers);
        }
        let index = json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries});
        let bytes = serde_json::to_vec(&index).unwrap();
        let digest = self.manifest(repository, tag, OCI_INDEX, &bytes);
        Pushed {
            digest,
            bytes,
            layers,
        }
    }
}

/// The machine's architecture as an image index names it.
pub fn this_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// How [`HostileRegistry`] sends a layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostileBlob {
    /// The declared length, a few bytes, then nothing.
    Stall,
    /// No length, bytes for as long as the client reads.
    Endless,
}

/// A registry that answers the manifest of `mods/echo:1.0` truthfully (a
/// component whose one layer declares [`HostileRegistry::DECLARED`] bytes)
/// and then misbehaves on the layer: what a hostile or broken registry
/// does that docker-registry will not. TLS from a test CA of its own; one
/// connection per request; stops by itself after a minute, or when dropped.
#[derive(Debug)]
pub struct HostileRegistry {
    addr: SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ca: TestCa,
    _dir: TempDir,
}

impl HostileRegistry {
    /// The layer's declared size.
    pub const DECLARED: u64 = 100_000;

    pub fn start(blob: HostileBlob) -> HostileRegistry {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa::new(dir.path(), "hostile-ca");
        let cert = ca.server_cert(dir.path(), "hostile", false);
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
                    vec![cert.cert_der.clone().into()],
                    rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_der.clone().into()),
                )
                .unwrap(),
        );
        let config_blob = b"{}";
        let manifest = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": descriptor(WASM_CONFIG, config_blob),
            "layers": [{
                "mediaType": WASM_LAYER,
                "digest": digest_of(b"the real layer"),
                "size": Self::DECLARED,
            }],
        }))
        .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        std::thread::spawn(move || {
            let started = Instant::now();
            while !stopped.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(60) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (config, stopped, manifest) =
                            (Arc::clone(&config), Arc::clone(&stopped), manifest.clone());
                        std::thread::spawn(move || {
                            hostile_answer(stream, config, &manifest, blob, &stopped);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        HostileRegistry {
            addr,
            stop,
            ca,
            _dir: dir,
        }
    }

    /// `oci://127.0.0.1:PORT/mods/echo:1.0`.
    pub fn reference(&self) -> String {
        format!("oci://{}/mods/echo:1.0", self.addr)
    }

    /// The `[distribution]` section trusting this registry's CA.
    pub fn config_toml(&self) -> String {
        self.ca.distribution_config()
    }
}

impl Drop for HostileRegistry {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// One request on `stream`: the manifest, a 404, or the misbehaving layer.
fn hostile_answer(
    stream: TcpStream,
    config: std::sync::Arc<rustls::ServerConfig>,
    manifest: &[u8],
    blob: HostileBlob,
    stop: &std::sync::atomic::AtomicBool,
) {
    use std::io::Write;
    let Some((mut tls, head)) = crate::tls_lab::accept_request(stream, config) else {
        return;
    };
    let mut words = head.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let body_too = method != "HEAD";
    let started = Instant::now();
    let going = || {
        !stop.load(std::sync::atomic::Ordering::Relaxed)
            && started.elapsed() < Duration::from_secs(60)
    };
    if path.ends_with("/manifests/1.0")
        || path.ends_with(&format!("/manifests/{}", digest_of(manifest)))
    {
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {OCI_MANIFEST}\r\nDocker-Content-Digest: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            digest_of(manifest),
            manifest.len()
        );
        let _ = tls.write_all(head.as_bytes());
        if body_too {
            let _ = tls.write_all(manifest);
        }
        let _ = tls.flush();
    } else if path.contains("/blobs/") {
        let chunk = vec![b'x'; 16 * 1024];
        match blob {
            HostileBlob::Stall => {
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\nsome bytes",
                    HostileRegistry::DECLARED
                );
                if tls
                    .write_all(head.as_bytes())
                    .and_then(|()| tls.flush())
                    .is_err()
                {
                    return;
                }
                while going() {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            HostileBlob::Endless => {
                let head = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n";
                if tls.write_all(head.as_bytes()).is_err() {
                    return;
                }
                while going() {
                    if tls.write_all(&chunk).is_err() {
                        return;
                    }
                }
            }
        }
    } else {
        let body = r#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}"#;
        let head = format!(
            "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let _ = tls.write_all(head.as_bytes());
        if body_too {
            let _ = tls.write_all(body.as_bytes());
        }
        let _ = tls.flush();
    }
    tls.conn.send_close_notify();
    let _ = tls.flush();
}

//! Attacks on remote module sources (`https://`, `oci://`) that the
//! distribution tests' honest servers and simple hostile ones do not make:
//! a registry that sends the client to plain http (a manifest, a blob, a
//! token realm), a manifest or token answer that never ends, an https
//! server that completes the handshake and never answers, a download
//! killed with `kill -9`, and two installs of one URL at once.
//!
//! The server here is scripted per request ([`Scripted`]): a TLS listener
//! with a test CA the host trusts through `[distribution] ca_certificates`
//! (as an operator would), beside a plain-http listener that records every
//! request it gets, so a test can assert that nothing went over plain http
//! at all, not only that the install failed.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use modhost_distribution::oci::{self, OciError, OciPulled, OciSettings};
use modhost_distribution::{FetchLimits, NoProgress};
use serde_json::json;
use tempfile::TempDir;

use crate::oci_lab::{descriptor, digest_of};
use crate::support::Home;
use crate::tls_lab::TestCa;

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
const WASM_LAYER: &str = "application/wasm";
/// How long a scripted server serves before stopping by itself.
const SERVE_FOR: Duration = Duration::from_secs(60);

/// What a scripted server answers to one request.
enum Answer {
    /// A complete response.
    Full {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// `200`, no length, `first` at once, then one byte every 200 ms (below
    /// any stall limit) until the server stops.
    Drip { first: Vec<u8> },
    /// Nothing at all (not even a status line) until the server stops.
    Silent,
}

impl Answer {
    fn ok(content_type: &str, body: Vec<u8>) -> Answer {
        Answer::Full {
            status: 200,
            headers: vec![("Content-Type".into(), content_type.into())],
            body,
        }
    }

    fn redirect(to: String) -> Answer {
        Answer::Full {
            status: 307,
            headers: vec![("Location".into(), to)],
            body: Vec::new(),
        }
    }

    fn not_found() -> Answer {
        Answer::Full {
            status: 404,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"unknown"}]}"#.to_vec(),
        }
    }
}

/// One request as the handler sees it.
#[derive(Debug, Clone)]
struct Request {
    path: String,
    /// The request head, lowercase (to look for headers).
    head: String,
    /// Whether it came over plain http.
    plain: bool,
}

type Handler = Arc<dyn Fn(&Request, &Ports) -> Answer + Send + Sync>;

/// The two listeners' ports, for handlers that redirect between them.
#[derive(Debug, Clone, Copy)]
struct Ports {
    tls: SocketAddr,
    plain: SocketAddr,
}

/// A TLS server and a plain-http server on loopback, both answering with
/// one handler; stopped when dropped (or after [`SERVE_FOR`]).
struct Scripted {
    ports: Ports,
    stop: Arc<AtomicBool>,
    /// Every request the plain-http listener received.
    plain_requests: Arc<Mutex<Vec<String>>>,
    ca: TestCa,
    _dir: TempDir,
}

impl Scripted {
    fn start(handler: impl Fn(&Request, &Ports) -> Answer + Send + Sync + 'static) -> Scripted {
        let handler: Handler = Arc::new(handler);
        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa::new(dir.path(), "attacks-ca");
        let cert = ca.server_cert(dir.path(), "attacks", false);
        // ring, as the host's own TLS (deprecated only for lacking
        // post-quantum key exchange, irrelevant to a test server).
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
        let tls = TcpListener::bind("127.0.0.1:0").unwrap();
        let plain = TcpListener::bind("127.0.0.1:0").unwrap();
        let ports = Ports {
            tls: tls.local_addr().unwrap(),
            plain: plain.local_addr().unwrap(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let plain_requests = Arc::new(Mutex::new(Vec::new()));
        for (listener, tls_config) in [(tls, Some(config)), (plain, None)] {
            listener.set_nonblocking(true).unwrap();
            let (stop, handler, log) = (
                Arc::clone(&stop),
                Arc::clone(&handler),
                Arc::clone(&plain_requests),
            );
            std::thread::spawn(move || {
                let started = Instant::now();
                while !stop.load(Ordering::Relaxed) && started.elapsed() < SERVE_FOR {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let (stop, handler, log, tls_config) = (
                                Arc::clone(&stop),
                                Arc::clone(&handler),
                                Arc::clone(&log),
                                tls_config.clone(),
                            );
                            std::thread::spawn(move || {
                                serve(stream, tls_config, &handler, ports, &log, &stop);
                            });
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            });
        }
        Scripted {
            ports,
            stop,
            plain_requests,
            ca,
            _dir: dir,
        }
    }

    /// `oci://127.0.0.1:PORT/mods/echo:1.0` on the TLS listener.
    fn reference(&self) -> String {
        format!("oci://{}/mods/echo:1.0", self.ports.tls)
    }

    fn plain_requests(&self) -> Vec<String> {
        self.plain_requests.lock().unwrap().clone()
    }

    /// Pull [`Scripted::reference`] with the library, trusting the CA.
    fn pull(&self, limits: FetchLimits) -> Result<OciPulled, OciError> {
        let roots =
            modhost_distribution::trust::load_ca_certificates(&[self.ca.pem_path().to_owned()])
                .unwrap();
        let settings = OciSettings::new(limits, roots);
        let into = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(oci::pull(
            &self.reference(),
            &settings,
            into.path(),
            &NoProgress,
        ))
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

trait Duplex: Read + Write {}
impl<T: Read + Write> Duplex for T {}

fn serve(
    stream: TcpStream,
    tls: Option<Arc<rustls::ServerConfig>>,
    handler: &Handler,
    ports: Ports,
    plain_log: &Mutex<Vec<String>>,
    stop: &AtomicBool,
) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let plain = tls.is_none();
    let mut io: Box<dyn Duplex> = match tls {
        Some(config) => {
            let Ok(connection) = rustls::ServerConnection::new(config) else {
                return;
            };
            Box::new(rustls::StreamOwned::new(connection, stream))
        }
        None => Box::new(stream),
    };
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
        match io.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let mut words = head.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("").to_owned();
    if plain {
        plain_log.lock().unwrap().push(target.to_owned());
    }
    let request = Request {
        path,
        head: head.clone(),
        plain,
    };
    let with_body = method != "head";
    match handler(&request, &ports) {
        Answer::Full {
            status,
            headers,
            body,
        } => {
            let mut out = format!("HTTP/1.1 {status} X\r\n");
            for (name, value) in headers {
                out.push_str(&format!("{name}: {value}\r\n"));
            }
            out.push_str(&format!(
                "Content-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            ));
            let _ = io.write_all(out.as_bytes());
            if with_body {
                let _ = io.write_all(&body);
            }
            let _ = io.flush();
        }
        Answer::Silent => {
            let started = Instant::now();
            while !stop.load(Ordering::Relaxed) && started.elapsed() < SERVE_FOR {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Answer::Drip { first } => {
            let started = Instant::now();
            let _ = io.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {OCI_MANIFEST}\r\nConnection: close\r\n\r\n"
                )
                .as_bytes(),
            );
            if io.write_all(&first).and_then(|()| io.flush()).is_err() {
                return;
            }
            while !stop.load(Ordering::Relaxed) && started.elapsed() < SERVE_FOR {
                std::thread::sleep(Duration::from_millis(200));
                if io.write_all(b" ").and_then(|()| io.flush()).is_err() {
                    return;
                }
            }
        }
    }
}

/// A component manifest (config `{}`, one layer `layer`) and its bytes.
fn component_manifest(layer: &[u8]) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": descriptor(WASM_CONFIG, b"{}"),
        "layers": [descriptor(WASM_LAYER, layer)],
    }))
    .unwrap()
}

/// A registry holding `mods/echo:1.0` (a component of `layer`), serving
/// anything, over either listener, unless `divert` answers first.
fn registry(
    layer: &'static [u8],
    divert: impl Fn(&Request, &Ports) -> Option<Answer> + Send + Sync + 'static,
) -> Scripted {
    let manifest = component_manifest(layer);
    Scripted::start(move |request, ports| {
        if let Some(answer) = divert(request, ports) {
            return answer;
        }
        let path = request.path.as_str();
        if path == "/v2/" {
            Answer::ok("application/json", b"{}".to_vec())
        } else if path.ends_with("/manifests/1.0")
            || path.ends_with(&format!("/manifests/{}", digest_of(&manifest)))
        {
            Answer::ok(OCI_MANIFEST, manifest.clone())
        } else if path.ends_with(&format!("/blobs/{}", digest_of(layer))) {
            Answer::ok("application/octet-stream", layer.to_vec())
        } else if path.ends_with(&format!("/blobs/{}", digest_of(b"{}"))) {
            Answer::ok("application/octet-stream", b"{}".to_vec())
        } else {
            Answer::not_found()
        }
    })
}

fn limits(total: u64, stall: u64) -> FetchLimits {
    FetchLimits {
        max_bytes: 1024 * 1024,
        total: Duration::from_secs(total),
        stall: Duration::from_secs(stall),
    }
}

#[test]
fn the_lab_registry_is_pulled_from_when_it_behaves() {
    // The baseline the attacks below vary: without a diversion the pull
    // succeeds, so a refusal below is the attack's doing.
    let server = registry(b"the layer", |_, _| None);
    let pulled = server.pull(limits(20, 5)).expect("the honest pull");
    assert_eq!(pulled.fetched.sha256, digest_of(b"the layer")[7..]);
    assert!(server.plain_requests().is_empty());
}

#[test]
fn a_manifest_redirected_to_plain_http_is_refused() {
    // The registry sends the manifest request of a tag to plain http: a
    // hop where anyone on the path can choose the manifest, and therefore
    // the digest that is shown and pinned.
    let server = registry(b"the layer", |request, ports| {
        (!request.plain && request.path.contains("/manifests/"))
            .then(|| Answer::redirect(format!("http://{}{}", ports.plain, request.path)))
    });
    let result = server.pull(limits(20, 5));
    let plain = server.plain_requests();
    assert!(
        result.is_err() && plain.is_empty(),
        "a manifest over plain http was accepted or asked for: {:?}, plain http requests: {plain:?}",
        result.map(|p| p.fetched.origin)
    );
    let said = result.unwrap_err().to_string();
    assert!(
        said.contains(&format!("http://{}", server.ports.plain)) && said.contains("not https"),
        "the refusal names the plain-http hop: {said}"
    );
}

#[test]
fn a_blob_redirected_to_plain_http_is_refused() {
    // Blobs are digest-checked, but the operator's rule is "https only":
    // what is fetched, from where, is not for a network observer to see.
    let server = registry(b"the layer", |request, ports| {
        (!request.plain && request.path.contains("/blobs/"))
            .then(|| Answer::redirect(format!("http://{}{}", ports.plain, request.path)))
    });
    let result = server.pull(limits(20, 5));
    let plain = server.plain_requests();
    assert!(
        result.is_err() && plain.is_empty(),
        "a blob over plain http was accepted or asked for: {:?}, plain http requests: {plain:?}",
        result.map(|p| p.fetched.origin)
    );
    let said = result.unwrap_err().to_string();
    assert!(
        said.contains(&format!("http://{}", server.ports.plain)) && said.contains("not https"),
        "the refusal names the plain-http hop: {said}"
    );
}

#[test]
fn a_token_realm_over_plain_http_is_refused() {
    // The registry's auth challenge names a plain-http token endpoint.
    let server = registry(b"the layer", |request, ports| {
        if request.plain {
            return request
                .path
                .starts_with("/token")
                .then(|| Answer::ok("application/json", br#"{"token":"t0ken"}"#.to_vec()));
        }
        let authorized = request.head.contains("authorization: bearer t0ken");
        (!authorized && request.path.starts_with("/v2/")).then(|| Answer::Full {
            status: 401,
            headers: vec![(
                "WWW-Authenticate".into(),
                format!(
                    "Bearer realm=\"http://{}/token\",service=\"lab\"",
                    ports.plain
                ),
            )],
            body: br#"{"errors":[{"code":"UNAUTHORIZED","message":"x"}]}"#.to_vec(),
        })
    });
    let result = server.pull(limits(20, 5));
    let plain = server.plain_requests();
    assert!(
        result.is_err() && plain.is_empty(),
        "a token was fetched over plain http: {:?}, plain http requests: {plain:?}",
        result.map(|p| p.fetched.origin)
    );
    let said = result.unwrap_err().to_string();
    assert!(
        said.contains(&format!("http://{}", server.ports.plain)) && said.contains("not https"),
        "the refusal names the plain-http realm: {said}"
    );
}

#[test]
fn an_endless_manifest_is_cut_at_the_manifest_limit_not_read_until_the_deadline() {
    // 5 MiB at once (over the 4 MiB manifest limit), then a byte every
    // 200 ms, below the stall limit, forever. Reading it whole keeps every
    // byte in memory until the whole fetch's deadline; it must stop at the
    // limit instead.
    let server = registry(b"the layer", |request, _| {
        request
            .path
            .ends_with("/manifests/1.0")
            .then(|| Answer::Drip {
                first: vec![b' '; 5 * 1024 * 1024],
            })
    });
    let started = Instant::now();
    let result = server.pull(limits(20, 5));
    let elapsed = started.elapsed();
    let error = result.map(|p| p.fetched.origin).unwrap_err();
    assert!(
        matches!(error, OciError::TooLarge { .. }) && elapsed < Duration::from_secs(10),
        "the manifest was read past its limit ({elapsed:?}): {error}"
    );
}

#[test]
fn an_https_server_that_never_answers_is_cut_off_at_the_stall_limit() {
    // TCP and TLS complete, the request is read, and no status line ever
    // comes: the stall limit ("the longest wait for the next bytes") must
    // hold there too, not only once the body flows.
    let server = Scripted::start(|_, _| Answer::Silent);
    let home = Home::new();
    home.write_config(&format!(
        "{}stall_timeout_secs = 2\ndownload_timeout_secs = 45\n",
        server.ca.distribution_config()
    ));
    let url = format!("https://{}/m.wasm", server.ports.tls);
    // Built (once per test process) before the clock starts.
    crate::support::binaries();
    let started = Instant::now();
    let run = home.run(&["install", &url, "--sha256", &"0".repeat(64)]);
    let elapsed = started.elapsed();
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        run.code != 0 && said.contains("no data for 2s") && elapsed < Duration::from_secs(20),
        "a silent server held the download for {elapsed:?}: {run:#?}"
    );
    assert!(said.contains("nothing was installed"), "{run:#?}");
    assert!(
        !home.path().join("staging").exists(),
        "the staging area is left: {run:#?}"
    );
}

/// The `fetch-*` folders under the home's staging area.
fn fetch_folders(home: &Home) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(home.path().join("staging"))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("fetch-"))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_download_killed_midway_leaves_nothing_for_good() {
    // `kill -9` mid-download runs no cleanup: the partial file stays. It
    // must not stay for good (one per killed run, up to the byte limit
    // each): the next fetch removes what no live process holds, and
    // leaves a live fetch's folder alone.
    let server = Scripted::start(|request, _| match request.path.as_str() {
        // More than the download's write buffer, so it reaches the disk.
        "/slow.wasm" => Answer::Drip {
            first: vec![b'x'; 1024 * 1024],
        },
        _ => Answer::not_found(),
    });
    let home = Home::new();
    home.write_config(&server.ca.distribution_config());
    let spawn = |name: &str| {
        std::process::Command::new(&crate::support::binaries().modhost)
            .arg("--home")
            .arg(home.path())
            .arg("--workspace")
            .arg(home.workspace())
            .args([
                "install",
                &format!("https://{}/{name}", server.ports.tls),
                "--sha256",
                &"0".repeat(64),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn modhost")
    };
    let partial_bytes = |home: &Home| -> u64 {
        fetch_folders(home)
            .iter()
            .flat_map(|f| std::fs::read_dir(f).into_iter().flatten().flatten())
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum()
    };
    let wait_for_bytes = |home: &Home| {
        let started = Instant::now();
        while partial_bytes(home) < 64 * 1024 {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the download did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };

    // One killed mid-download, one still downloading.
    let mut killed = spawn("slow.wasm");
    wait_for_bytes(&home);
    killed.kill().unwrap();
    killed.wait().unwrap();
    let left = fetch_folders(&home);
    assert_eq!(left.len(), 1, "what kill -9 leaves: {left:?}");
    let mut live = spawn("slow.wasm");
    let started = Instant::now();
    while fetch_folders(&home).len() < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no second fetch"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Both older than any grace period a sweep may give new folders.
    for folder in fetch_folders(&home) {
        let aged = std::process::Command::new("touch")
            .args(["-d", "1 hour ago"])
            .arg(&folder)
            .status()
            .unwrap();
        assert!(aged.success());
    }

    // The next fetch (refused: 404) sweeps.
    let run = home.run(&[
        "install",
        &format!("https://{}/missing.wasm", server.ports.tls),
        "--sha256",
        &"0".repeat(64),
    ]);
    assert_ne!(run.code, 0, "{run:#?}");
    let now = fetch_folders(&home);
    let live_still_there = now.len() == 1 && !now.contains(&left[0]);
    let _ = live.kill();
    let _ = live.wait();
    assert!(
        !now.contains(&left[0]),
        "the killed run's partial download stays for good: {now:?}"
    );
    assert!(
        live_still_there,
        "the live fetch's folder was removed under it: {now:?}"
    );
}

#[test]
fn an_endless_token_answer_is_cut_at_its_limit() {
    // The registry's challenge names an https realm (its own) whose answer
    // never ends: the token is read within a small bound, not whole.
    let server = registry(b"the layer", |request, ports| {
        if request.path.starts_with("/token") {
            return Some(Answer::Drip {
                first: vec![b' '; 1024 * 1024],
            });
        }
        let authorized = request.head.contains("authorization: bearer");
        (!authorized && request.path.starts_with("/v2/")).then(|| Answer::Full {
            status: 401,
            headers: vec![(
                "WWW-Authenticate".into(),
                format!(
                    "Bearer realm=\"https://{}/token\",service=\"lab\"",
                    ports.tls
                ),
            )],
            body: Vec::new(),
        })
    });
    let started = Instant::now();
    let result = server.pull(limits(20, 5));
    let elapsed = started.elapsed();
    let error = result.map(|p| p.fetched.origin).unwrap_err();
    assert!(
        matches!(error, OciError::TooLarge { .. }) && elapsed < Duration::from_secs(10),
        "the token answer was read past its limit ({elapsed:?}): {error}"
    );
}

#[test]
fn a_registry_asking_for_a_token_gets_one_from_its_https_realm() {
    // The token flow works (the attacks above are refusals of it).
    let server = registry(b"the layer", |request, ports| {
        if request.path.starts_with("/token") {
            let scoped = request
                .head
                .contains("scope=repository%3amods%2fecho%3apull");
            return Some(match scoped {
                true => Answer::ok("application/json", br#"{"token":"t0ken"}"#.to_vec()),
                false => Answer::not_found(),
            });
        }
        let authorized = request.head.contains("authorization: bearer t0ken");
        (!authorized && request.path.starts_with("/v2/")).then(|| Answer::Full {
            status: 401,
            headers: vec![(
                "WWW-Authenticate".into(),
                format!(
                    "Bearer realm=\"https://{}/token\",service=\"lab\"",
                    ports.tls
                ),
            )],
            body: Vec::new(),
        })
    });
    let pulled = server.pull(limits(20, 5)).expect("a pull with a token");
    assert_eq!(pulled.fetched.sha256, digest_of(b"the layer")[7..]);
}

#[test]
fn two_installs_of_one_url_at_once_install_it_once_and_leave_no_staging() {
    let wasm = std::fs::read(crate::support::components().path("echo")).unwrap();
    let sha256 = digest_of(&wasm)[7..].to_owned();
    let server = Scripted::start(move |request, _| match request.path.as_str() {
        "/echo.wasm" => Answer::ok("application/wasm", wasm.clone()),
        _ => Answer::not_found(),
    });
    let home = Home::new();
    home.write_config(&server.ca.distribution_config());
    let url = format!("https://{}/echo.wasm", server.ports.tls);
    let runs: Vec<_> = std::thread::scope(|scope| {
        let install = || home.run(&["install", &url, "--sha256", &sha256]);
        let first = scope.spawn(install);
        let second = scope.spawn(install);
        vec![first.join().unwrap(), second.join().unwrap()]
    });
    let installed = runs.iter().filter(|run| run.code == 0).count();
    assert_eq!(installed, 1, "exactly one installs: {runs:#?}");
    let refused = runs.iter().find(|run| run.code != 0).unwrap();
    assert!(
        format!("{}{}", refused.stdout, refused.stderr).contains("is already installed"),
        "the other is told the id is taken: {refused:#?}"
    );
    assert!(
        !home.path().join("staging").exists(),
        "staging is left: {runs:#?}"
    );
    let invoked = home.invoke("echo", "echo.run", &json!({"n": 1}), &[]);
    assert_eq!(
        invoked.invoke_result()["output"],
        json!({"echo": {"n": 1}}),
        "{invoked:#?}"
    );
}

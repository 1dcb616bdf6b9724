//! A TLS lab on loopback for the distribution tests: a test CA, server
//! certificates for `127.0.0.1` and `localhost`, nginx serving a folder
//! over https, and a small misbehaving server for answers nginx will not
//! give (a lying `Content-Length`, an endless or a stalled body).
//!
//! Design decisions:
//! - **Real servers, loopback only.** nginx from Debian (`tests/setup`
//!   installs it) is the file server, as an operator's would be; a missing
//!   nginx fails the test with the command that installs it, never a skip.
//!   Every listener binds 127.0.0.1 on a free port.
//! - **Trust as an operator gives it.** The host trusts the test CA only
//!   because the home's `config.toml` names its PEM file in
//!   `[distribution] ca_certificates` ([`TestCa::distribution_config`]);
//!   there is no verification switch to turn off.
//! - **Certificates made by rcgen** (ring, no PEM feature): PEM written by
//!   hand, one CA per lab, so a second CA is "some other CA" for the
//!   untrusted-certificate attack.
//! - **nginx answers the simple attacks itself:** `/to-http/NAME`
//!   redirects to the same file over plain http (on a second, plain
//!   listener serving the same folder), `/to-https/NAME` to the same file
//!   over https (a redirect that is followed), `/slow/NAME` at
//!   `limit_rate`.
//! - **The misbehaving server is std threads over rustls**, one connection
//!   at a time, each behaviour bounded in time (it stops by itself after
//!   [`MISBEHAVE_FOR`]), so a test that fails never leaves it spinning.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// How long nginx may take to start listening.
const START_WITHIN: Duration = Duration::from_secs(20);

/// How long the misbehaving server keeps misbehaving on one connection.
pub const MISBEHAVE_FOR: Duration = Duration::from_secs(60);

/// A certificate authority made for one test.
pub struct TestCa {
    issuer: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
    pem_path: PathBuf,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa")
            .field("pem_path", &self.pem_path)
            .finish()
    }
}

/// A server certificate and its key, as PEM files and DER.
#[derive(Debug, Clone)]
pub struct ServerCert {
    pub cert_pem: PathBuf,
    pub key_pem: PathBuf,
    pub cert_der: Vec<u8>,
    pub key_der: Vec<u8>,
}

impl TestCa {
    /// A new CA whose certificate is written to `dir/<name>.pem`.
    pub fn new(dir: &Path, name: &str) -> TestCa {
        std::fs::create_dir_all(dir).expect("CA folder");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("modhost test CA {name}"));
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let issuer =
            rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap())
                .unwrap();
        let pem_path = dir.join(format!("{name}.pem"));
        std::fs::write(&pem_path, pem("CERTIFICATE", issuer.der())).expect("CA PEM");
        TestCa { issuer, pem_path }
    }

    /// The CA's certificate (PEM file).
    pub fn pem_path(&self) -> &Path {
        &self.pem_path
    }

    /// `[distribution]` trusting this CA, for a home's `config.toml`.
    pub fn distribution_config(&self) -> String {
        format!(
            "[distribution]\nca_certificates = [{:?}]\n",
            self.pem_path.display().to_string()
        )
    }

    /// A server certificate for `127.0.0.1` and `localhost`, written to
    /// `dir/<name>.crt` and `dir/<name>.key`; `expired` makes one whose
    /// validity ended yesterday.
    pub fn server_cert(&self, dir: &Path, name: &str, expired: bool) -> ServerCert {
        std::fs::create_dir_all(dir).expect("certificate folder");
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params
            .subject_alt_names
            .push(rcgen::SanType::IpAddress("127.0.0.1".parse().unwrap()));
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "localhost");
        if expired {
            let day = Duration::from_secs(86_400);
            let now = std::time::SystemTime::now();
            params.not_before = (now - 30 * day).into();
            params.not_after = (now - day).into();
        }
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let cert_pem = dir.join(format!("{name}.crt"));
        let key_pem = dir.join(format!("{name}.key"));
        std::fs::write(&cert_pem, pem("CERTIFICATE", cert.der())).expect("certificate PEM");
        std::fs::write(&key_pem, pem("PRIVATE KEY", &key.serialize_der())).expect("key PEM");
        ServerCert {
            cert_pem,
            key_pem,
            cert_der: cert.der().to_vec(),
            key_der: key.serialize_der(),
        }
    }
}

fn pem(label: &str, der: &[u8]) -> String {
    let body = STANDARD.encode(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

/// nginx serving `root` over https (and over plain http on a second port,
/// the target of the redirect attack).
#[derive(Debug)]
pub struct TlsFileServer {
    child: Child,
    pub https: SocketAddr,
    pub http: SocketAddr,
    pub root: PathBuf,
    dir: PathBuf,
}

impl TlsFileServer {
    /// Start nginx in `dir` (its config and logs) serving `root` with
    /// `cert`; `/slow/NAME` answers at 1 KiB per second.
    pub fn start(dir: &Path, root: &Path, cert: &ServerCert) -> TlsFileServer {
        let binary = nginx_binary();
        std::fs::create_dir_all(dir).expect("nginx folder");
        let https: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let http: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let d = dir.display();
        let r = root.display();
        let config = format!(
            "daemon off;\n\
             master_process off;\n\
             worker_processes 1;\n\
             pid {d}/nginx.pid;\n\
             error_log {d}/error.log info;\n\
             events {{ worker_connections 256; }}\n\
             http {{\n\
             \x20   access_log {d}/access.log;\n\
             \x20   client_body_temp_path {d}/client_body;\n\
             \x20   proxy_temp_path {d}/proxy;\n\
             \x20   fastcgi_temp_path {d}/fastcgi;\n\
             \x20   uwsgi_temp_path {d}/uwsgi;\n\
             \x20   scgi_temp_path {d}/scgi;\n\
             \x20   default_type application/octet-stream;\n\
             \x20   sendfile on;\n\
             \x20   server {{\n\
             \x20       listen {https} ssl;\n\
             \x20       ssl_certificate {cert};\n\
             \x20       ssl_certificate_key {key};\n\
             \x20       root {r};\n\
             \x20       location /to-http/ {{ rewrite ^/to-http/(.*)$ http://{http}/$1 redirect; }}\n\
             \x20       location /to-https/ {{ rewrite ^/to-https/(.*)$ https://{https}/$1 redirect; }}\n\
             \x20       location /slow/ {{ alias {r}/; limit_rate 1k; }}\n\
             \x20   }}\n\
             \x20   server {{\n\
             \x20       listen {http};\n\
             \x20       root {r};\n\
             \x20   }}\n\
             }}\n",
            cert = cert.cert_pem.display(),
            key = cert.key_pem.display(),
        );
        let conf = dir.join("nginx.conf");
        std::fs::write(&conf, config).expect("nginx.conf");
        let child = Command::new(&binary)
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(&conf)
            .arg("-e")
            .arg(dir.join("error.log"))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.join("nginx.out")).expect("nginx output"))
            .stderr(std::fs::File::create(dir.join("nginx.err")).expect("nginx errors"))
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
        let mut server = TlsFileServer {
            child,
            https,
            http,
            root: root.to_path_buf(),
            dir: dir.to_path_buf(),
        };
        server.wait_listening();
        server
    }

    fn wait_listening(&mut self) {
        let started = Instant::now();
        for addr in [self.https, self.http] {
            while TcpStream::connect(addr).is_err() {
                if let Some(status) = self.child.try_wait().expect("wait for nginx") {
                    panic!(
                        "nginx exited ({status}) before listening:\n{}\n{}",
                        std::fs::read_to_string(self.dir.join("nginx.err")).unwrap_or_default(),
                        std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default()
                    );
                }
                assert!(
                    started.elapsed() < START_WITHIN,
                    "nginx did not listen on {addr} within {START_WITHIN:?}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// `https://127.0.0.1:PORT/<path>`.
    pub fn url(&self, path: &str) -> String {
        format!("https://{}/{path}", self.https)
    }

    /// `http://127.0.0.1:PORT/<path>`: the same folder, unencrypted.
    pub fn plain_url(&self, path: &str) -> String {
        format!("http://{}/{path}", self.http)
    }

    /// The requests nginx logged (for "was it ever asked").
    pub fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("access.log")).unwrap_or_default()
    }
}

impl Drop for TlsFileServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The nginx executable: on `PATH` or where Debian puts it.
pub fn nginx_binary() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("nginx"))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!(
                "nginx is not installed, and the distribution tests serve files with it. \
                 Install it with `apt-get install -y nginx` (tests/setup does)"
            )
        })
}

/// A loopback port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// What the misbehaving server answers to every request.
#[derive(Debug, Clone, Copy)]
pub enum Misbehaviour {
    /// `200` with `Content-Length: N`, then a trickle of bytes.
    Announce(u64),
    /// `200` with no length, then bytes for as long as the client reads.
    Endless,
    /// `200` with a length, a few bytes, then nothing.
    Stall,
}

/// A TLS server on loopback answering every request with one
/// [`Misbehaviour`]; stopped when dropped.
#[derive(Debug)]
pub struct MisbehavingServer {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl MisbehavingServer {
    pub fn start(cert: &ServerCert, behaviour: Misbehaviour) -> MisbehavingServer {
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
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        std::thread::spawn(move || {
            let started = Instant::now();
            while !stopped.load(Ordering::Relaxed) && started.elapsed() < MISBEHAVE_FOR * 2 {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let config = Arc::clone(&config);
                        let stopped = Arc::clone(&stopped);
                        std::thread::spawn(move || serve(stream, config, behaviour, &stopped));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        MisbehavingServer { addr, stop }
    }

    /// `https://127.0.0.1:PORT/<name>`.
    pub fn url(&self, name: &str) -> String {
        format!("https://{}/{name}", self.addr)
    }
}

impl Drop for MisbehavingServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A TLS connection of a scripted server, its request head read (up to the
/// blank line, at most 16 KiB); `None` when the handshake or the read fails.
pub fn accept_request(
    stream: TcpStream,
    config: Arc<rustls::ServerConfig>,
) -> Option<(
    rustls::StreamOwned<rustls::ServerConnection, TcpStream>,
    String,
)> {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let Ok(connection) = rustls::ServerConnection::new(config) else {
        return None;
    };
    let mut tls = rustls::StreamOwned::new(connection, stream);
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
        match tls.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    Some((tls, String::from_utf8_lossy(&head).into_owned()))
}

fn serve(
    stream: TcpStream,
    config: Arc<rustls::ServerConfig>,
    behaviour: Misbehaviour,
    stop: &AtomicBool,
) {
    let Some((mut tls, _head)) = accept_request(stream, config) else {
        return;
    };
    let started = Instant::now();
    let going = || !stop.load(Ordering::Relaxed) && started.elapsed() < MISBEHAVE_FOR;
    let chunk = vec![b'x'; 64 * 1024];
    match behaviour {
        Misbehaviour::Announce(length) => {
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n\r\n");
            if tls.write_all(head.as_bytes()).is_err() {
                return;
            }
            while going() {
                if tls
                    .write_all(&chunk[..1024])
                    .and_then(|_| tls.flush())
                    .is_err()
                {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Misbehaviour::Endless => {
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
        Misbehaviour::Stall => {
            let head = "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\nsome bytes";
            if tls
                .write_all(head.as_bytes())
                .and_then(|_| tls.flush())
                .is_err()
            {
                return;
            }
            while going() {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

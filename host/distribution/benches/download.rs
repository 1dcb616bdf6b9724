//! Download throughput of [`modhost_distribution::https::fetch`] against
//! `curl` on the same file from the same TLS server (nginx on loopback,
//! a test CA made here), measured in one run; prints MB/s of each and the
//! ratio. `cargo bench -p modhost-distribution --bench download`.
//!
//! The fetch does more than curl here (sha256 of every byte, checked
//! against the expected digest), which is what an install pays; curl
//! only writes the file. Each side runs [`ROUNDS`] times, alternating, and
//! the best round counts (the least disturbed by the machine's other work).
//! A missing nginx or curl skips the benchmark with a message (benches are
//! not tests: `tests/it/distribution_https.rs` fails instead).

#[path = "support/test_ca.rs"]
mod test_ca;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use modhost_distribution::{FetchLimits, NoProgress, https, trust};
use sha2::{Digest, Sha256};

/// The file's size.
const SIZE: usize = 256 * 1024 * 1024;
/// Rounds per side.
const ROUNDS: usize = 5;

fn main() {
    let (Some(nginx), Some(curl)) = (find("nginx"), find("curl")) else {
        println!(
            "download bench skipped: it needs nginx and curl on PATH (apt-get install -y nginx curl)"
        );
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let lab = Lab::start(dir.path(), &nginx);

    let file: Vec<u8> = (0..SIZE)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let sha = hex(&Sha256::digest(&file));
    std::fs::write(lab.root.join("module.tar.gz"), &file).expect("write the file");
    drop(file);
    let url = format!("https://127.0.0.1:{}/module.tar.gz", lab.port);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let roots = trust::load_ca_certificates(std::slice::from_ref(&lab.ca_pem)).expect("the CA");
    let limits = FetchLimits {
        max_bytes: SIZE as u64,
        ..FetchLimits::default()
    };
    let client = trust::https_client(&roots, limits.stall).expect("client");
    let parsed = url::Url::parse(&url).unwrap();
    let out = dir.path().join("out");

    let mut ours = Duration::MAX;
    let mut theirs = Duration::MAX;
    for _ in 0..ROUNDS {
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out).unwrap();
        let started = Instant::now();
        let fetched = runtime
            .block_on(https::fetch(
                &client,
                &parsed,
                &out,
                Some(&sha),
                &limits,
                &NoProgress,
            ))
            .expect("the fetch");
        ours = ours.min(started.elapsed());
        assert_eq!(fetched.bytes, SIZE as u64);

        let target = dir.path().join("curl.out");
        let started = Instant::now();
        let status = Command::new(&curl)
            .args(["-sS", "--fail", "--cacert"])
            .arg(&lab.ca_pem)
            .arg("-o")
            .arg(&target)
            .arg(&url)
            .status()
            .expect("run curl");
        theirs = theirs.min(started.elapsed());
        assert!(status.success(), "curl failed");
        assert_eq!(std::fs::metadata(&target).unwrap().len(), SIZE as u64);
    }
    let mbps = |d: Duration| SIZE as f64 / 1e6 / d.as_secs_f64();
    println!(
        "download of {} MiB over TLS from nginx on loopback, best of {ROUNDS}:",
        SIZE >> 20
    );
    println!(
        "  modhost_distribution::https::fetch (+ sha256 checked): {:8.1} MB/s ({:?})",
        mbps(ours),
        ours
    );
    println!(
        "  curl -o FILE:                                         {:8.1} MB/s ({:?})",
        mbps(theirs),
        theirs
    );
    println!(
        "  ratio fetch/curl throughput: {:.2}",
        mbps(ours) / mbps(theirs)
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn find(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// nginx serving `root` over TLS with a certificate from a CA made here.
struct Lab {
    child: Child,
    port: u16,
    root: PathBuf,
    ca_pem: PathBuf,
}

impl Lab {
    fn start(dir: &Path, nginx: &Path) -> Lab {
        let ca_pem = test_ca::write_ca_and_server_cert(dir);
        let root = dir.join("www");
        std::fs::create_dir_all(&root).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let d = dir.display();
        let config = format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
             error_log {d}/error.log;\nevents {{ worker_connections 64; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {d}/cb;\n  proxy_temp_path {d}/p;\n\
             \x20 fastcgi_temp_path {d}/f;\n  uwsgi_temp_path {d}/u;\n  scgi_temp_path {d}/s;\n\
             \x20 sendfile on;\n  server {{\n    listen 127.0.0.1:{port} ssl;\n\
             \x20   ssl_certificate {d}/server.crt;\n    ssl_certificate_key {d}/server.key;\n\
             \x20   root {r};\n  }}\n}}\n",
            r = root.display()
        );
        std::fs::write(dir.join("nginx.conf"), config).unwrap();
        let mut child = Command::new(nginx)
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .arg("-e")
            .arg(dir.join("error.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "nginx exited ({status}): {}",
                    std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
                );
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "nginx did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Lab {
            child,
            port,
            root,
            ca_pem,
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

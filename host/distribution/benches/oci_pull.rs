//! Throughput of an OCI pull ([`modhost_distribution::oci::pull`]: manifest
//! resolved, the layer streamed to a file with its digest checked, the
//! signature places asked) against `curl` fetching the same blob URL
//! (`/v2/<repository>/blobs/<digest>`) from the same registry, measured in
//! one run; prints MB/s of each and the ratio.
//! `cargo bench -p modhost-distribution --bench oci_pull`.
//!
//! The registry is Debian's `docker-registry` on loopback with TLS from a CA
//! made here, the component pushed with oci-client. Each side runs
//! [`ROUNDS`] times, alternating, and the best round counts. A missing
//! docker-registry or curl skips the benchmark with a message (benches are
//! not tests: `tests/it/distribution_oci.rs` fails instead).

#[path = "support/test_ca.rs"]
mod test_ca;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use modhost_distribution::oci::{self, OciSettings};
use modhost_distribution::{FetchLimits, NoProgress, trust};
use sha2::{Digest, Sha256};

/// The layer's size.
const SIZE: usize = 256 * 1024 * 1024;
/// Rounds per side.
const ROUNDS: usize = 5;
const REGISTRY: &str = "/usr/bin/docker-registry";

fn main() {
    let Some(curl) = find("curl") else {
        println!("oci_pull bench skipped: it needs curl on PATH (apt-get install -y curl)");
        return;
    };
    if !Path::new(REGISTRY).is_file() {
        println!(
            "oci_pull bench skipped: it needs {REGISTRY} (apt-get install -y docker-registry)"
        );
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let lab = Lab::start(dir.path());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");

    let layer: Vec<u8> = (0..SIZE)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let layer_digest = format!("sha256:{}", hex(&Sha256::digest(&layer)));
    runtime.block_on(lab.push_component("bench/big", "1.0", layer));
    let reference = format!("oci://127.0.0.1:{}/bench/big:1.0", lab.port);
    let blob_url = format!(
        "https://127.0.0.1:{}/v2/bench/big/blobs/{layer_digest}",
        lab.port
    );

    let roots = trust::load_ca_certificates(std::slice::from_ref(&lab.ca_pem)).expect("the CA");
    let settings = OciSettings::new(
        FetchLimits {
            max_bytes: SIZE as u64,
            ..FetchLimits::default()
        },
        roots,
    );
    let out = dir.path().join("out");
    let mut ours = Duration::MAX;
    let mut theirs = Duration::MAX;
    for _ in 0..ROUNDS {
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out).unwrap();
        let started = Instant::now();
        let pulled = runtime
            .block_on(oci::pull(&reference, &settings, &out, &NoProgress))
            .expect("the pull");
        ours = ours.min(started.elapsed());
        assert_eq!(pulled.fetched.bytes, SIZE as u64);

        let target = dir.path().join("curl.out");
        let started = Instant::now();
        let status = Command::new(&curl)
            .args(["-sS", "--fail", "--cacert"])
            .arg(&lab.ca_pem)
            .arg("-o")
            .arg(&target)
            .arg(&blob_url)
            .status()
            .expect("run curl");
        theirs = theirs.min(started.elapsed());
        assert!(status.success(), "curl failed");
        assert_eq!(std::fs::metadata(&target).unwrap().len(), SIZE as u64);
    }
    let mbps = |d: Duration| SIZE as f64 / 1e6 / d.as_secs_f64();
    println!(
        "OCI pull of a {} MiB layer over TLS from docker-registry on loopback, best of {ROUNDS}:",
        SIZE >> 20
    );
    println!(
        "  modhost_distribution::oci::pull (manifest, layer + sha256, signature places): {:8.1} MB/s ({:?})",
        mbps(ours),
        ours
    );
    println!(
        "  curl -o FILE on the blob URL:                                                   {:8.1} MB/s ({:?})",
        mbps(theirs),
        theirs
    );
    println!(
        "  ratio pull/curl throughput: {:.2}",
        mbps(ours) / mbps(theirs)
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn find(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// docker-registry on loopback with TLS from a CA made here.
struct Lab {
    child: Child,
    port: u16,
    ca_pem: PathBuf,
    client: oci_client::Client,
}

impl Lab {
    fn start(dir: &Path) -> Lab {
        let ca_pem = test_ca::write_ca_and_server_cert(dir);
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let d = dir.display();
        let config = format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n\
             storage:\n  filesystem:\n    rootdirectory: {d}/storage\n\
             http:\n  addr: 127.0.0.1:{port}\n  tls:\n    certificate: {d}/server.crt\n    key: {d}/server.key\n"
        );
        std::fs::write(dir.join("config.yml"), config).unwrap();
        let mut child = Command::new(REGISTRY)
            .arg("serve")
            .arg(dir.join("config.yml"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start docker-registry");
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("docker-registry exited ({status})");
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "docker-registry did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        oci::registry::ensure_crypto_provider();
        let client = oci_client::Client::try_from(oci_client::client::ClientConfig {
            extra_root_certificates: vec![oci_client::client::Certificate {
                encoding: oci_client::client::CertificateEncoding::Pem,
                data: std::fs::read(&ca_pem).unwrap(),
            }],
            ..Default::default()
        })
        .expect("push client");
        Lab {
            child,
            port,
            ca_pem,
            client,
        }
    }

    /// Push `wasm` as a component (config `application/vnd.wasm.config.v0+json`,
    /// one `application/wasm` layer).
    async fn push_component(&self, repository: &str, tag: &str, wasm: Vec<u8>) {
        let reference = oci_client::Reference::with_tag(
            format!("127.0.0.1:{}", self.port),
            repository.to_owned(),
            tag.to_owned(),
        );
        let layer = oci_client::client::ImageLayer::new(wasm, "application/wasm".into(), None);
        let config = oci_client::client::Config::new(
            br#"{"architecture":"wasm","os":"wasip2"}"#.to_vec(),
            "application/vnd.wasm.config.v0+json".into(),
            None,
        );
        self.client
            .push(
                &reference,
                &[layer],
                config,
                &oci_client::secrets::RegistryAuth::Anonymous,
                None,
            )
            .await
            .expect("push the component");
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

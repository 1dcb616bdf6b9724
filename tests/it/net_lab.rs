//! Test hosts for the egress tests: web servers that stand for "the
//! internet" without any traffic leaving the machine.
//!
//! A [`TestHost`] is a network namespace the test creates (`ip netns`), tied
//! to the host's by a veth pair on a /30 of 198.51.100.0/24 (TEST-NET-2, a
//! documentation range, which the egress proxy counts as public only when
//! `config.toml` says so: every home of these tests carries [`LAB_CONFIG`]),
//! with a Python HTTP server on port 8080 inside. The host's end of each
//! pair is an address of this machine, which no range makes public. A [`LoopbackService`] is a
//! server on the host's own 127.0.0.1: what an operator's database or
//! development server is, and what no module may reach unless granted.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The port every test host serves on (each in its own namespace).
pub const TEST_PORT: u16 = 8080;

/// The `config.toml` lines that make the lab's range public to the egress
/// proxy, as an operator running such a lab would write them.
pub const LAB_CONFIG: &str = "[network]\npublic_ranges = [\"198.51.100.0/24\"]\n";

/// The server inside a test host: `/hello` answers with the host's
/// address, `/redirect?to=URL` with a 302 to `URL`, `/bytes?n=N` with N
/// bytes.
const SERVER: &str = r#"
import http.server, sys, urllib.parse
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        query = urllib.parse.parse_qs(url.query)
        if url.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", query["to"][0])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if url.path == "/bytes":
            n = int(query["n"][0])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = b"x" * 65536
            try:
                while n > 0:
                    self.wfile.write(chunk[:min(n, len(chunk))])
                    n -= len(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass  # a client that stops reading early (a size cap) is expected
            return
        body = ("hello from " + sys.argv[1]).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer((sys.argv[1], 8080), Handler)
print("ready", flush=True)
server.serve_forever()
"#;

/// A web server in a network namespace of its own, at a "public" address.
#[derive(Debug)]
pub struct TestHost {
    pub address: Ipv4Addr,
    /// The host's end of the veth pair: an address of this machine.
    pub host_side: Ipv4Addr,
    namespace: String,
    server: Child,
}

/// Which /30 of 198.51.100.0/24 the next test host takes.
static NEXT_SUBNET: AtomicUsize = AtomicUsize::new(1);

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl TestHost {
    pub fn start() -> TestHost {
        let uid = Command::new("id").arg("-u").output().expect("run id");
        assert_eq!(
            String::from_utf8_lossy(&uid.stdout).trim(),
            "0",
            "the egress tests make network namespaces and must run as root"
        );
        let n = NEXT_SUBNET.fetch_add(1, Ordering::Relaxed);
        assert!(n < 64, "out of test subnets");
        let pid = std::process::id() % 100_000;
        let namespace = format!("mhtest-{pid}-{n}");
        let (outer, inner) = (format!("mho{pid}x{n}"), format!("mhi{pid}x{n}"));
        let base = u8::try_from(n * 4).unwrap();
        let host_side = Ipv4Addr::new(198, 51, 100, base + 1);
        let address = Ipv4Addr::new(198, 51, 100, base + 2);
        let _ = Command::new("ip")
            .args(["netns", "del", &namespace])
            .output();
        ip(&["netns", "add", &namespace]);
        ip(&[
            "link", "add", &outer, "type", "veth", "peer", "name", &inner,
        ]);
        ip(&["link", "set", &inner, "netns", &namespace]);
        ip(&["addr", "add", &format!("{host_side}/30"), "dev", &outer]);
        ip(&["link", "set", &outer, "up"]);
        let inside = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &namespace, "ip"];
            all.extend_from_slice(args);
            ip(&all);
        };
        inside(&["addr", "add", &format!("{address}/30"), "dev", &inner]);
        inside(&["link", "set", &inner, "up"]);
        inside(&["link", "set", "lo", "up"]);
        let mut server = Command::new("ip")
            .args(["netns", "exec", &namespace, "python3", "-c", SERVER])
            .arg(address.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the test host's server");
        let mut ready = String::new();
        BufReader::new(server.stdout.take().unwrap())
            .read_line(&mut ready)
            .unwrap();
        assert_eq!(
            ready.trim(),
            "ready",
            "the test host's server did not start"
        );
        TestHost {
            address,
            host_side,
            namespace,
            server,
        }
    }

    /// `http://ADDRESS:8080{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}:{TEST_PORT}{path}", self.address)
    }

    /// `ADDRESS:8080`, as a host entry.
    pub fn entry(&self) -> String {
        format!("{}:{TEST_PORT}", self.address)
    }
}

impl Drop for TestHost {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
        // The host's end of the veth pair goes with the namespace's.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.namespace])
            .output();
    }
}

/// A web server on the host's loopback that counts its visitors: an
/// operator's local service no module may reach without a grant.
#[derive(Debug)]
pub struct LoopbackService {
    pub port: u16,
    hits: Arc<AtomicUsize>,
}

impl LoopbackService {
    pub fn start() -> LoopbackService {
        LoopbackService::bound_to(Ipv4Addr::LOCALHOST)
    }

    /// A service bound to every address of the machine (`0.0.0.0`), as
    /// databases and development servers often are: reachable through the
    /// machine's other addresses too.
    pub fn on_every_address() -> LoopbackService {
        LoopbackService::bound_to(Ipv4Addr::UNSPECIFIED)
    }

    fn bound_to(address: Ipv4Addr) -> LoopbackService {
        let listener = TcpListener::bind((address, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&hits);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                counted.fetch_add(1, Ordering::SeqCst);
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request);
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 14\r\nConnection: close\r\n\r\nloopback data\n",
                );
            }
        });
        LoopbackService { port, hits }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// How many connections it accepted.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

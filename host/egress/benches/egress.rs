//! Egress proxy benchmarks. Prints figures; asserts nothing about time.
//!
//! 1. Bulk: a 100 MB download from a loopback server through a `CONNECT`
//!    tunnel of the proxy, against the same download over a direct
//!    connection, in rounds that rotate which goes first (target:
//!    proxied/direct throughput >= 0.9). Beside them, the same download
//!    through a bare copying relay (two threads, no HTTP, no checks): what
//!    any relay costs on this machine. Each download's CPU time (all
//!    threads of the process) is printed too: on a shared two-core machine
//!    it varies less than throughput does.
//! 2. Small exchanges: the p50 latency of a small request and response
//!    through the proxy against the same exchange made directly (target:
//!    at most 0.3 ms added at p50), three ways a client uses a proxy:
//!    - an absolute-URI `GET` on a fresh connection per request (what
//!      curl or `urllib` does per run), against a fresh direct connection;
//!    - absolute-URI `GET`s on one kept-alive proxy connection (each still
//!      gets a fresh upstream connection: the proxy pools nothing), against
//!      one kept-alive direct connection;
//!    - requests over one established `CONNECT` tunnel (an HTTPS client's
//!      steady state), against one kept-alive direct connection.
//!
//! 3. Over a link: the same 100 MB download from an origin in a network
//!    namespace the benchmark makes, behind a veth pair that `tc` shapes
//!    to each of [`LINK_RATES`], direct and through the proxy: whether the proxy
//!    keeps a fast link full, where the loopback (1.) measures what its
//!    CPU costs. Needs root and iproute2; says so and skips otherwise.
//!
//! Everything else runs on the loopback in this one process: the origin server
//! (a thread per connection), the proxy (its own runtime, as the host runs
//! it) and the client (the main thread, blocking sockets). The call's grant
//! opens exactly the origin's address, as an operator's `allow_private`
//! line does. Each phase is bounded in count and in time.
//!
//! Run: `cargo bench -p modhost-egress --bench egress`.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use modhost_egress::{CallGrant, HostGrant, Proxy, Resolver, Settings, Ticket};

/// The bulk download's size.
const BULK_BYTES: u64 = 100 * 1000 * 1000;
/// Alternating rounds of the bulk download (each: one direct, one proxied).
const BULK_ROUNDS: usize = 9;
/// Exchanges per small-request series, after the warm-up.
const SMALL_EXCHANGES: usize = 2000;
const SMALL_WARMUP: usize = 200;
/// No series runs longer than this, whatever its count.
const SERIES_BUDGET: Duration = Duration::from_secs(20);
/// The small response's body.
const SMALL_BODY: &[u8] = b"a small answer, as an API's JSON would be: {\"ok\": true}\n";
/// How much the origin writes and the client reads per call.
const IO_CHUNK: usize = 256 * 1024;

/// An HTTP/1.1 origin on the loopback: `GET /bytes?n=N` answers N bytes,
/// anything else [`SMALL_BODY`]; connections are kept alive.
struct Origin {
    address: SocketAddr,
}

impl Origin {
    fn start() -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the origin");
        let address = listener.local_addr().expect("the origin's address");
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                std::thread::spawn(move || {
                    let _ = serve_origin(stream);
                });
            }
        });
        Origin { address }
    }
}

fn serve_origin(stream: TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut conn = Conn::new(stream);
    let payload = vec![b'x'; IO_CHUNK];
    loop {
        let Some(head) = conn.read_head()? else {
            return Ok(());
        };
        let path = head.split(' ').nth(1).unwrap_or("/");
        match path.strip_prefix("/bytes?n=") {
            Some(n) => {
                let mut left: u64 = n.parse().map_err(|_| io::ErrorKind::InvalidData)?;
                conn.stream.write_all(
                    format!("HTTP/1.1 200 OK\r\nContent-Length: {left}\r\n\r\n").as_bytes(),
                )?;
                while left > 0 {
                    let n = left.min(payload.len() as u64) as usize;
                    conn.stream.write_all(&payload[..n])?;
                    left -= n as u64;
                }
            }
            None => {
                let mut answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
                    SMALL_BODY.len()
                )
                .into_bytes();
                answer.extend_from_slice(SMALL_BODY);
                conn.stream.write_all(&answer)?;
            }
        }
    }
}

/// One HTTP/1.1 connection, client or server side: heads are read through
/// a buffer that keeps what arrived after them.
struct Conn {
    stream: TcpStream,
    buffer: Vec<u8>,
    start: usize,
    end: usize,
}

impl Conn {
    fn new(stream: TcpStream) -> Conn {
        Conn {
            stream,
            buffer: vec![0; IO_CHUNK],
            start: 0,
            end: 0,
        }
    }

    fn connect(address: SocketAddr) -> Conn {
        let stream = TcpStream::connect(address).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("read timeout");
        Conn::new(stream)
    }

    /// The next head (up to the blank line), `None` at a clean end.
    fn read_head(&mut self) -> io::Result<Option<String>> {
        loop {
            let held = &self.buffer[self.start..self.end];
            if let Some(at) = held.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&held[..at]).into_owned();
                self.start += at + 4;
                return Ok(Some(head));
            }
            if self.start > 0 {
                self.buffer.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.end == self.buffer.len() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "a head too large",
                ));
            }
            let n = self.stream.read(&mut self.buffer[self.end..])?;
            if n == 0 {
                return if self.end == 0 {
                    Ok(None)
                } else {
                    Err(io::ErrorKind::UnexpectedEof.into())
                };
            }
            self.end += n;
        }
    }

    /// Read and drop exactly `n` body bytes.
    fn skip_body(&mut self, mut n: u64) -> io::Result<()> {
        let held = ((self.end - self.start) as u64).min(n);
        self.start += held as usize;
        n -= held;
        while n > 0 {
            let want = n.min(self.buffer.len() as u64) as usize;
            let got = self.stream.read(&mut self.buffer[..want])?;
            if got == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            n -= got as u64;
        }
        self.start = 0;
        self.end = 0;
        Ok(())
    }

    /// Send `request`, read the answer whole; its status and body length.
    fn exchange(&mut self, request: &[u8]) -> (u16, u64) {
        self.stream.write_all(request).expect("send a request");
        let head = self
            .read_head()
            .expect("read an answer")
            .expect("an answer, not the end");
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status in {head:?}"));
        let length = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse::<u64>().ok())?
            })
            .unwrap_or(0);
        self.skip_body(length).expect("read the body");
        (status, length)
    }
}

/// A call of the proxy granted exactly the origin's address.
struct ProxiedCall {
    ticket: Ticket,
    authorization: String,
}

impl ProxiedCall {
    fn open(proxy: &Proxy, origin: SocketAddr) -> ProxiedCall {
        let grant = CallGrant {
            hosts: HostGrant::Only(Vec::new()),
            private: vec![origin],
        };
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the call's listener");
        let ticket = proxy.open(grant, listener).expect("open a call");
        let url = ticket.proxy_url();
        let userinfo = url
            .strip_prefix("http://")
            .and_then(|rest| rest.split_once('@'))
            .map(|(userinfo, _)| userinfo)
            .expect("credentials in the proxy URL");
        ProxiedCall {
            authorization: format!("Proxy-Authorization: Basic {}\r\n", BASE64.encode(userinfo)),
            ticket,
        }
    }

    fn address(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.ticket.port()))
    }

    /// A connection through an established tunnel to `origin`.
    fn tunnel(&self, origin: SocketAddr) -> Conn {
        let mut conn = Conn::connect(self.address());
        let (status, _) = conn.exchange(
            format!(
                "CONNECT {origin} HTTP/1.1\r\nHost: {origin}\r\n{}\r\n",
                self.authorization
            )
            .as_bytes(),
        );
        assert_eq!(status, 200, "the proxy refused the tunnel");
        conn
    }

    /// An absolute-URI request for `path` on `origin`.
    fn absolute(&self, origin: SocketAddr, path: &str) -> Vec<u8> {
        format!(
            "GET http://{origin}{path} HTTP/1.1\r\nHost: {origin}\r\n{}\r\n",
            self.authorization
        )
        .into_bytes()
    }
}

fn origin_form(origin: SocketAddr, path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: {origin}\r\n\r\n").into_bytes()
}

/// One download of [`BULK_BYTES`] on `conn`: its throughput in MB/s (from
/// `started`) and the CPU time the whole process spent on it (client,
/// origin and proxy together).
fn download(mut conn: Conn, request: &[u8], started: Instant) -> (f64, Duration) {
    let cpu = cpu_snapshot();
    let (status, length) = conn.exchange(request);
    let elapsed = started.elapsed();
    let spent = cpu_since(&cpu);
    assert_eq!((status, length), (200, BULK_BYTES), "the download");
    (BULK_BYTES as f64 / 1e6 / elapsed.as_secs_f64(), spent)
}

/// A bare relay on the loopback: for each connection, two threads that
/// read and write 64 KiB at a time, with no HTTP and no checks. What a
/// relay that copies costs at least, beside the proxy.
fn bare_relay(origin: SocketAddr) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the bare relay");
    let address = listener.local_addr().expect("the bare relay's address");
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { continue };
            let Ok(upstream) = TcpStream::connect(origin) else {
                continue;
            };
            for (from, to) in [(&client, &upstream), (&upstream, &client)] {
                let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
                    continue;
                };
                std::thread::spawn(move || {
                    let mut buffer = vec![0; 64 * 1024];
                    while let Ok(n @ 1..) = from.read(&mut buffer) {
                        if to.write_all(&buffer[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(std::net::Shutdown::Write);
                });
            }
        }
    });
    address
}

fn bulk(origin: SocketAddr, call: &ProxiedCall) {
    let request = origin_form(origin, &format!("/bytes?n={BULK_BYTES}"));
    let relay = bare_relay(origin);
    // Each way's set-up (connect; for the tunnel also CONNECT and the
    // proxy's connect) is counted: it is part of every download.
    let ways: [(&str, &dyn Fn() -> Conn); 3] = [
        ("direct", &|| Conn::connect(origin)),
        ("CONNECT tunnel", &|| call.tunnel(origin)),
        ("bare relay", &|| Conn::connect(relay)),
    ];
    let run = |(_, open): &(&str, &dyn Fn() -> Conn)| {
        let started = Instant::now();
        download(open(), &request, started)
    };
    println!(
        "1. bulk: a {} MB download, {BULK_ROUNDS} rounds, each way once a round in turn",
        BULK_BYTES / 1_000_000
    );
    // One of each first, unmeasured: page cache, runtime threads.
    ways.iter().for_each(|way| {
        run(way);
    });
    let mut rates = [const { Vec::new() }; 3];
    let mut cpu = [Duration::ZERO; 3];
    let mut ratios = Vec::new();
    for round in 0..BULK_ROUNDS {
        // Which goes first rotates, so none always meets another's
        // leftovers (socket buffers, a scheduler's mood).
        let mut figures = [(0.0, Duration::ZERO); 3];
        for i in (0..ways.len()).map(|k| (k + round) % ways.len()) {
            figures[i] = run(&ways[i]);
        }
        let line: Vec<String> = ways
            .iter()
            .zip(figures)
            .map(|((label, _), (rate, spent))| {
                format!("{label} {rate:7.1} MB/s ({:5.1} ms CPU)", ms(spent))
            })
            .collect();
        println!("   round {}: {}", round + 1, line.join("   "));
        for (i, (rate, spent)) in figures.into_iter().enumerate() {
            rates[i].push(rate);
            cpu[i] += spent;
        }
        ratios.push(figures[1].0 / figures[0].0);
    }
    let medians = rates.map(|mut r| median(&mut r));
    println!(
        "   median throughput: direct {:.1} MB/s, through the proxy {:.1} MB/s, bare relay {:.1} MB/s",
        medians[0], medians[1], medians[2]
    );
    println!(
        "   proxied/direct: {:.2} of the medians, {:.2} the median of the rounds' (target >= 0.90); bare relay/direct {:.2}",
        medians[1] / medians[0],
        median(&mut ratios),
        medians[2] / medians[0]
    );
    // CPU time depends less on what else the machine runs: where a
    // download is bound by the CPU (the loopback), throughput tends to the
    // ratio of CPU per download.
    let per = cpu.map(|spent| ms(spent / BULK_ROUNDS as u32));
    println!(
        "   CPU per download (all threads): direct {:.1} ms, proxied {:.1} ms, bare relay {:.1} ms: direct/proxied {:.2}, direct/bare relay {:.2}",
        per[0],
        per[1],
        per[2],
        per[0] / per[1],
        per[0] / per[2]
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Each thread's CPU time so far (`/proc/self/task/*/schedstat`, in ns).
fn cpu_snapshot() -> HashMap<String, u64> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return HashMap::new();
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
            let ns = stat.split_whitespace().next()?.parse().ok()?;
            Some((task.file_name().to_string_lossy().into_owned(), ns))
        })
        .collect()
}

/// The CPU time the process's threads spent since `before` (a thread that
/// ended meanwhile is left out: only the origin's finished connections do).
fn cpu_since(before: &HashMap<String, u64>) -> Duration {
    let ns: u64 = cpu_snapshot()
        .iter()
        .map(|(task, now)| now.saturating_sub(before.get(task).copied().unwrap_or(0)))
        .sum();
    Duration::from_nanos(ns)
}

/// Time `exchange` until [`SMALL_EXCHANGES`] are measured or the budget
/// runs out.
fn series(mut exchange: impl FnMut()) -> Vec<Duration> {
    let deadline = Instant::now() + SERIES_BUDGET;
    let mut samples = Vec::with_capacity(SMALL_EXCHANGES);
    for i in 0..SMALL_WARMUP + SMALL_EXCHANGES {
        let started = Instant::now();
        exchange();
        if i >= SMALL_WARMUP {
            samples.push(started.elapsed());
        }
        if Instant::now() > deadline {
            break;
        }
    }
    samples
}

fn small(origin: SocketAddr, call: &ProxiedCall) {
    let direct_request = origin_form(origin, "/small");
    let proxied_request = call.absolute(origin, "/small");
    let small_answer = |(status, length): (u16, u64)| {
        assert_eq!(
            (status, length),
            (200, SMALL_BODY.len() as u64),
            "a small answer"
        );
    };

    println!(
        "2. small exchanges ({} bytes answered), p50 of up to {SMALL_EXCHANGES}",
        SMALL_BODY.len()
    );
    let comparisons: [(&str, Vec<Duration>, Vec<Duration>); 3] = [
        (
            "absolute-URI GET, a fresh connection each",
            series(|| small_answer(Conn::connect(origin).exchange(&direct_request))),
            series(|| small_answer(Conn::connect(call.address()).exchange(&proxied_request))),
        ),
        {
            let mut direct = Conn::connect(origin);
            let mut proxied = Conn::connect(call.address());
            (
                "absolute-URI GET, one kept-alive connection",
                series(|| small_answer(direct.exchange(&direct_request))),
                series(|| small_answer(proxied.exchange(&proxied_request))),
            )
        },
        {
            let mut direct = Conn::connect(origin);
            let mut tunnel = call.tunnel(origin);
            (
                "over an established CONNECT tunnel",
                series(|| small_answer(direct.exchange(&direct_request))),
                series(|| small_answer(tunnel.exchange(&direct_request))),
            )
        },
    ];
    for (label, mut direct, mut proxied) in comparisons {
        let d = report("direct", &mut direct);
        let p = report("through the proxy", &mut proxied);
        println!(
            "   {label}: +{:.3} ms at p50 (target <= 0.300), ratio {:.2}",
            (p.as_secs_f64() - d.as_secs_f64()) * 1e3,
            p.as_secs_f64() / d.as_secs_f64()
        );
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn report(label: &str, samples: &mut [Duration]) -> Duration {
    samples.sort();
    let p50 = percentile(samples, 0.5);
    println!(
        "      {label:<20} p50 {:>8.1} us   p90 {:>8.1} us   p99 {:>8.1} us   (n={})",
        p50.as_secs_f64() * 1e6,
        percentile(samples, 0.9).as_secs_f64() * 1e6,
        percentile(samples, 0.99).as_secs_f64() * 1e6,
        samples.len()
    );
    p50
}

/// The links of part 3: a fast one, and one near what the proxy's CPU
/// allows on the loopback.
const LINK_RATES: [&str; 2] = ["1gbit", "4gbit"];
const LINK_ROUNDS: usize = 3;

/// The origin of part 3: a Python server at 198.51.100.x in a network
/// namespace of its own, tied to the host's by a veth pair whose both ends
/// `tc` shapes to a rate. Removed on drop.
struct LinkedOrigin {
    address: SocketAddr,
    namespace: String,
    /// Set once it started; the namespace is removed on drop either way.
    server: Option<std::process::Child>,
}

/// The server of part 3: `GET /bytes?n=N` answers N bytes.
const LINK_SERVER: &str = r#"
import http.server, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        n = int(self.path.split("n=")[1])
        self.send_response(200)
        self.send_header("Content-Length", str(n))
        self.end_headers()
        chunk = b"x" * 262144
        while n > 0:
            self.wfile.write(chunk[:min(n, len(chunk))])
            n -= len(chunk)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer((sys.argv[1], 8080), Handler)
print("ready", flush=True)
server.serve_forever()
"#;

fn ip(args: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl LinkedOrigin {
    /// The `n`th link (each on names and a /30 of its own: a namespace
    /// just removed can linger while its sockets close).
    fn start(rate: &str, n: u8) -> Result<LinkedOrigin, String> {
        let pid = std::process::id();
        let namespace = format!("mhbench-{pid}-{n}");
        let (outer, inner) = (format!("mhbo{pid}x{n}"), format!("mhbi{pid}x{n}"));
        let base = 248 - 4 * n;
        let (host_side, origin_side) = (
            format!("198.51.100.{}/30", base + 1),
            format!("198.51.100.{}", base + 2),
        );
        let mut origin = LinkedOrigin {
            address: SocketAddr::from(([198, 51, 100, base + 2], 8080)),
            namespace: namespace.clone(),
            server: None,
        };
        ip(&["netns", "add", &namespace])?;
        let inside = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &namespace];
            all.extend_from_slice(args);
            ip(&all)
        };
        let shape = [
            "root", "tbf", "rate", rate, "burst", "1mbit", "latency", "20ms",
        ];
        ip(&[
            "link", "add", &outer, "type", "veth", "peer", "name", &inner,
        ])?;
        ip(&["link", "set", &inner, "netns", &namespace])?;
        ip(&["addr", "add", &host_side, "dev", &outer])?;
        ip(&["link", "set", &outer, "up"])?;
        inside(&[
            "ip",
            "addr",
            "add",
            &format!("{origin_side}/30"),
            "dev",
            &inner,
        ])?;
        inside(&["ip", "link", "set", &inner, "up"])?;
        inside(&["ip", "link", "set", "lo", "up"])?;
        let mut outer_shape = vec!["qdisc", "add", "dev", &outer];
        outer_shape.extend_from_slice(&shape);
        let tc = |args: &[&str]| {
            let out = std::process::Command::new("tc")
                .args(args)
                .output()
                .map_err(|e| format!("tc: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "tc {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        };
        tc(&outer_shape)?;
        let mut inner_shape = vec!["-n", &namespace, "qdisc", "add", "dev", &inner];
        inner_shape.extend_from_slice(&shape);
        tc(&inner_shape)?;
        let mut server = std::process::Command::new("ip")
            .args([
                "netns",
                "exec",
                &namespace,
                "python3",
                "-c",
                LINK_SERVER,
                &origin_side,
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("start the linked origin: {e}"))?;
        let stdout = server.stdout.take().expect("piped");
        origin.server = Some(server);
        let mut ready = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut ready)
            .map_err(|e| e.to_string())?;
        if ready.trim() != "ready" {
            return Err("the linked origin did not start".into());
        }
        Ok(origin)
    }
}

impl Drop for LinkedOrigin {
    fn drop(&mut self) {
        if let Some(server) = self.server.as_mut() {
            let _ = server.kill();
            let _ = server.wait();
        }
        // The host's end of the veth pair goes with the namespace's.
        let _ = ip(&["netns", "del", &self.namespace]);
    }
}

/// Part 3: the download over a link shaped to `rate`, direct and proxied.
fn over_a_link(proxy: &Proxy, rate: &str, n: u8) {
    println!(
        "3. over a {rate}/s link: a {} MB download, {LINK_ROUNDS} rounds",
        BULK_BYTES / 1_000_000
    );
    let origin = match LinkedOrigin::start(rate, n) {
        Ok(origin) => origin,
        Err(why) => {
            println!("   skipped: {why} (needs root, iproute2 and tc)");
            return;
        }
    };
    let call = ProxiedCall::open(proxy, origin.address);
    let request = format!(
        "GET /bytes?n={BULK_BYTES} HTTP/1.1\r\nHost: {}\r\n\r\n",
        origin.address
    )
    .into_bytes();
    let (mut direct, mut proxied) = (Vec::new(), Vec::new());
    for round in 0..LINK_ROUNDS {
        let mut pair = [0.0; 2];
        for i in [round % 2, (round + 1) % 2] {
            let started = Instant::now();
            let conn = if i == 0 {
                Conn::connect(origin.address)
            } else {
                call.tunnel(origin.address)
            };
            pair[i] = download(conn, &request, started).0;
        }
        println!(
            "   round {}: direct {:7.1} MB/s   CONNECT tunnel {:7.1} MB/s",
            round + 1,
            pair[0],
            pair[1]
        );
        direct.push(pair[0]);
        proxied.push(pair[1]);
    }
    let (direct, proxied) = (median(&mut direct), median(&mut proxied));
    println!(
        "   median: direct {direct:.1} MB/s, through the proxy {proxied:.1} MB/s: proxied/direct {:.2} (target >= 0.90)",
        proxied / direct
    );
}

fn main() {
    let origin = Origin::start();
    let proxy = Proxy::new(Resolver::System, Settings::default()).expect("start the proxy");
    let call = ProxiedCall::open(&proxy, origin.address);
    bulk(origin.address, &call);
    small(origin.address, &call);
    for (n, rate) in (0..).zip(LINK_RATES) {
        over_a_link(&proxy, rate, n);
    }
    let contacts = call.ticket.contacts();
    assert!(
        contacts.refused.is_empty() && contacts.contacted == [origin.address.to_string()],
        "the proxy did not reach exactly the origin: {contacts:?}"
    );
}

//! `mcp_http_load`: the load generator of `bench_mcp_http.py`. N clients,
//! each a thread with one keep-alive HTTP/1.1 connection, call one echo
//! tool over MCP's streamable HTTP transport (revision 2026-07-28,
//! stateless: every POST carries its `_meta` and the transport's headers)
//! back to back for a fixed time, and one JSON line reports what happened.
//!
//! Design decisions:
//!
//! - **Plain std, blocking threads.** A request is one `write` and, for a
//!   small answer, one `read`: about the least a client can do per call, so
//!   on a two-core machine the generator takes as little as possible of the
//!   CPU the server needs, and it takes the same from every server it
//!   drives. No async runtime, no HTTP library between the clock and the
//!   socket.
//! - **Every answer is checked.** A call counts only when its response is a
//!   JSON-RPC result for the id sent, not `isError`, that carries the
//!   message sent (a server answering fast with the wrong thing fails, it
//!   does not win). Both answer forms of the transport are read: a JSON body
//!   and an SSE stream (its `data:` lines, until the response).
//! - **A warm-up, then a timed window.** Every client runs `--warmup`
//!   seconds unrecorded (connections open, caches filled, the server's
//!   threads awake), then `--seconds` recorded; a call is recorded when it
//!   finishes inside the window. Throughput is recorded calls over the
//!   window, latencies are per call (p50 and p99 over all clients' calls).
//!
//! Usage: `mcp_http_load --url http://127.0.0.1:PORT/mcp --tool NAME
//! --clients N [--seconds S] [--warmup S] [--list]` (`--list`: `tools/list`
//! instead of calls, the transport and protocol without a tool); prints
//! `{"clients":N,"calls":..,"failed":..,"seconds":..,"rps":..,"p50_ms":..,"p99_ms":..,"first_failure":..,"requests":..}`
//! (`calls`: answered in the window; `requests`: all sent, warm-up included).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

struct Options {
    host: String,
    path: String,
    tool: String,
    list: bool,
    clients: usize,
    seconds: f64,
    warmup: f64,
}

fn parse_options() -> Result<Options, String> {
    let mut url = None;
    let mut tool = None;
    let mut list = false;
    let mut clients = 1;
    let mut seconds = 3.0;
    let mut warmup = 0.5;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--list" {
            list = true;
            continue;
        }
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = |v: &str| v.parse::<f64>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--url" => url = Some(value),
            "--tool" => tool = Some(value),
            "--clients" => clients = number(&value)? as usize,
            "--seconds" => seconds = number(&value)?,
            "--warmup" => warmup = number(&value)?,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    let url = url.ok_or("--url is required")?;
    let rest = url
        .strip_prefix("http://")
        .ok_or("--url must be http://HOST:PORT/PATH")?;
    let (host, path) = match rest.find('/') {
        Some(i) => (rest[..i].to_owned(), rest[i..].to_owned()),
        None => (rest.to_owned(), "/".to_owned()),
    };
    Ok(Options {
        host,
        path,
        tool: tool.ok_or("--tool is required")?,
        list,
        clients: clients.max(1),
        seconds,
        warmup,
    })
}

/// One client's connection.
struct Connection {
    host: String,
    reader: Option<BufReader<TcpStream>>,
}

impl Connection {
    fn stream(&mut self) -> std::io::Result<&mut BufReader<TcpStream>> {
        if self.reader.is_none() {
            let stream = TcpStream::connect(&self.host)?;
            stream.set_nodelay(true)?;
            stream.set_read_timeout(Some(Duration::from_secs(30)))?;
            self.reader = Some(BufReader::with_capacity(64 * 1024, stream));
        }
        Ok(self.reader.as_mut().expect("connected"))
    }

    /// POST `body` with `headers`; the status, whether the server keeps the
    /// connection, the content type and the body.
    fn post(
        &mut self,
        path: &str,
        headers: &str,
        body: &[u8],
    ) -> std::io::Result<(u16, String, Vec<u8>)> {
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\n{headers}Content-Length: {}\r\n\r\n",
            self.host,
            body.len()
        );
        let mut bytes = request.into_bytes();
        bytes.extend_from_slice(body);
        let result = (|| {
            let reader = self.stream()?;
            reader.get_mut().write_all(&bytes)?;
            read_response(reader)
        })();
        match result {
            Ok((status, keep, content_type, body)) => {
                if !keep {
                    self.reader = None;
                }
                Ok((status, content_type, body))
            }
            Err(e) => {
                self.reader = None;
                Err(e)
            }
        }
    }
}

fn invalid(what: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.into())
}

/// Status, keep-alive, content type and body of one HTTP/1.1 response.
fn read_response(
    reader: &mut BufReader<TcpStream>,
) -> std::io::Result<(u16, bool, String, Vec<u8>)> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(invalid("connection closed before a response"));
    }
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| invalid(format!("bad status line {line:?}")))?;
    let mut length = None;
    let mut chunked = false;
    let mut keep = true;
    let mut content_type = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Err(invalid("connection closed in the headers"));
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let Some((name, value)) = header.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.parse::<usize>().ok(),
            "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
            "connection" => keep = !value.eq_ignore_ascii_case("close"),
            "content-type" => content_type = value.to_owned(),
            _ => {}
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| invalid(format!("bad chunk size {line:?}")))?;
            if size == 0 {
                // Trailers, then the empty line.
                loop {
                    line.clear();
                    if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
                        break;
                    }
                }
                break;
            }
            let start = body.len();
            body.resize(start + size, 0);
            reader.read_exact(&mut body[start..])?;
            line.clear();
            reader.read_line(&mut line)?;
        }
    } else if let Some(length) = length {
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    } else {
        reader.read_to_end(&mut body)?;
        keep = false;
    }
    Ok((status, keep, content_type, body))
}

/// The JSON-RPC response in a body: the body itself, or the SSE event
/// carrying a message with an `id`.
fn response_message(content_type: &str, body: &[u8]) -> Result<Value, String> {
    let text = std::str::from_utf8(body).map_err(|_| "body is not UTF-8".to_owned())?;
    if content_type.starts_with("text/event-stream") {
        for event in text.split("\n\n") {
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            if data.is_empty() {
                continue;
            }
            if let Ok(message) = serde_json::from_str::<Value>(&data.join("\n"))
                && message.get("id").is_some()
            {
                return Ok(message);
            }
        }
        Err(format!("no response in the event stream: {text}"))
    } else {
        serde_json::from_str(text).map_err(|e| format!("not JSON ({e}): {text}"))
    }
}

/// One request; its failure in words. `tools/call` of the echo tool with
/// `message` (which must come back), or, with `--list`, `tools/list` (which
/// must list the tool): a request that runs no tool, so what it costs is
/// the transport and the protocol alone.
fn call(
    connection: &mut Connection,
    options: &Options,
    id: u64,
    message: &str,
) -> Result<(), String> {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "mcp_http_load", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let (body, headers) = if options.list {
        (
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {"_meta": meta}}),
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\n"
                .to_owned(),
        )
    } else {
        (
            json!({
                "jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": options.tool, "arguments": {"message": message}, "_meta": meta}
            }),
            format!(
                "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
                 MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: {}\r\n",
                options.tool
            ),
        )
    };
    let body = serde_json::to_vec(&body).expect("JSON");
    let (status, content_type, answer) = connection
        .post(&options.path, &headers, &body)
        .map_err(|e| format!("transport: {e}"))?;
    if status != 200 {
        return Err(format!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&answer)
        ));
    }
    let response = response_message(&content_type, &answer)?;
    if response["id"] != json!(id) {
        return Err(format!("answer for another id: {response}"));
    }
    let result = response
        .get("result")
        .ok_or_else(|| format!("not a result: {response}"))?;
    if options.list {
        let listed = result["tools"]
            .as_array()
            .is_some_and(|tools| tools.iter().any(|t| t["name"] == json!(options.tool)));
        return if listed {
            Ok(())
        } else {
            Err(format!("the tool is not listed: {result}"))
        };
    }
    if result["isError"] == json!(true) {
        return Err(format!("tool error: {result}"));
    }
    if !result.to_string().contains(message) {
        return Err(format!("the message did not come back: {result}"));
    }
    Ok(())
}

struct ClientReport {
    /// Every request answered, warm-up and window alike.
    requests: usize,
    latencies: Vec<Duration>,
    failed: usize,
    first_failure: Option<String>,
}

/// When the warm-up ends and the recorded window ends.
#[derive(Clone, Copy)]
struct Window {
    recording: Instant,
    end: Instant,
}

fn client(index: usize, options: &Options, window: Window) -> ClientReport {
    let mut connection = Connection {
        host: options.host.clone(),
        reader: None,
    };
    let mut report = ClientReport {
        requests: 0,
        latencies: Vec::new(),
        failed: 0,
        first_failure: None,
    };
    let mut id = (index as u64) << 32;
    loop {
        let started = Instant::now();
        if started >= window.end {
            return report;
        }
        id += 1;
        let message = format!("hello {index}-{id}");
        let outcome = call(&mut connection, options, id, &message);
        let finished = Instant::now();
        report.requests += 1;
        if finished < window.recording || finished > window.end {
            continue;
        }
        match outcome {
            Ok(()) => report.latencies.push(finished - started),
            Err(e) => {
                report.failed += 1;
                report.first_failure.get_or_insert(e);
            }
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((sorted.len() as f64) * p).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1].as_secs_f64() * 1000.0
}

fn main() {
    let options = match parse_options() {
        Ok(options) => Arc::new(options),
        Err(e) => {
            eprintln!(
                "mcp_http_load: {e}\nusage: mcp_http_load --url http://HOST:PORT/mcp --tool NAME --clients N [--seconds S] [--warmup S] [--list]"
            );
            std::process::exit(2);
        }
    };
    // Every thread exists before the clock starts, so thread start-up is in
    // nobody's window.
    let start = Arc::new(Barrier::new(options.clients + 1));
    let window: Arc<OnceLock<Window>> = Arc::default();
    let threads: Vec<_> = (0..options.clients)
        .map(|index| {
            let options = Arc::clone(&options);
            let start = Arc::clone(&start);
            let window = Arc::clone(&window);
            std::thread::spawn(move || {
                start.wait();
                let window = *window.get().expect("the window is set before the start");
                client(index, &options, window)
            })
        })
        .collect();
    let recording = Instant::now() + Duration::from_secs_f64(options.warmup);
    let end = recording + Duration::from_secs_f64(options.seconds);
    let _ = window.set(Window { recording, end });
    start.wait();
    let mut latencies = Vec::new();
    let mut failed = 0;
    let mut requests = 0;
    let mut first_failure = None;
    for thread in threads {
        let report = thread.join().expect("client thread");
        latencies.extend(report.latencies);
        failed += report.failed;
        requests += report.requests;
        if first_failure.is_none() {
            first_failure = report.first_failure;
        }
    }
    latencies.sort_unstable();
    let calls = latencies.len();
    println!(
        "{}",
        json!({
            "clients": options.clients,
            "calls": calls,
            "requests": requests,
            "failed": failed,
            "seconds": options.seconds,
            "rps": calls as f64 / options.seconds,
            "p50_ms": percentile(&latencies, 0.50),
            "p99_ms": percentile(&latencies, 0.99),
            "first_failure": first_failure,
        })
    );
}

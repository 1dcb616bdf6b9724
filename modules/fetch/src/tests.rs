//! The client against a web server and a stand-in for the host's egress
//! proxy, both on this machine's loopback, run without the host: what the
//! tunnel, the redirects, the cap and the errors do, shown on the wire. The
//! real proxy and the real confinement are tested end to end in
//! `tests/it/fetch_module.rs`.
//!
//! The stand-in proxy does what the egress proxy does to a CONNECT: checks
//! the credentials, tunnels to a granted target, and refuses any other with
//! a 403 whose `X-Modhost-Refused` says why. It records every target asked
//! for, so a test can see that each redirect went through it again.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};
use ureq::Proxy;
use url::Url;

use crate::client::{Client, MAX_REDIRECTS};
use crate::error::{CONFIG_SECTION, FetchError};
use crate::get::{self, DEFAULT_MAX_BYTES, GetOutput, MAX_HTML_BYTES, MAX_MAX_BYTES};
use crate::tunnel::TunnelError;

const PAGE: &str = "<!doctype html><html><head><title>Docs</title><script>var secret = 1;</script></head>\
<body><h1>Getting started</h1><p>Install it, then <a href=\"/next\">read on</a>.</p></body></html>";

/// A web server on the loopback: `/page` (HTML), `/text`, `/json`,
/// `/bytes?n=N`, `/long-html?n=N` (HTML of at least N bytes), `/png`, `/missing` (404), `/redirect?to=URL`, `/loop`,
/// `/slow`.
struct Origin {
    port: u16,
}

impl Origin {
    fn start() -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || serve_page(stream, port));
            }
        });
        Origin { port }
    }

    fn url(&self, path: &str) -> Url {
        Url::parse(&format!("http://127.0.0.1:{}{path}", self.port)).unwrap()
    }

    fn target(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

fn serve_page(mut stream: TcpStream, port: u16) {
    let Some(head) = read_head(&mut stream) else {
        return;
    };
    let path = head.split(' ').nth(1).unwrap_or("/").to_owned();
    let (route, query) = path.split_once('?').unwrap_or((&path, ""));
    let param = |name: &str| {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .unwrap_or_default()
            .to_owned()
    };
    let respond = |stream: &mut TcpStream, status: &str, headers: &str, body: &[u8]| {
        let _ = write!(
            stream,
            "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let _ = stream.write_all(body);
    };
    match route {
        "/page" => respond(
            &mut stream,
            "200 OK",
            "Content-Type: text/html; charset=utf-8\r\n",
            PAGE.as_bytes(),
        ),
        "/text" => respond(
            &mut stream,
            "200 OK",
            "Content-Type: text/plain\r\n",
            b"just text\n",
        ),
        "/json" => respond(
            &mut stream,
            "200 OK",
            "Content-Type: application/json\r\n",
            br#"{"ok": true}"#,
        ),
        "/png" => respond(
            &mut stream,
            "200 OK",
            "Content-Type: image/png\r\n",
            b"\x89PNG\r\n\x1a\n\x00\x00",
        ),
        "/missing" => respond(
            &mut stream,
            "404 Not Found",
            "Content-Type: text/plain\r\n",
            b"no such page",
        ),
        "/bytes" => {
            let n: usize = param("n").parse().unwrap_or(0);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {n}\r\nConnection: close\r\n\r\n"
            );
            let chunk = [b'y'; 65536];
            let mut left = n;
            while left > 0 {
                let now = left.min(chunk.len());
                if stream.write_all(&chunk[..now]).is_err() {
                    return;
                }
                left -= now;
            }
        }
        "/long-html" => {
            let n: usize = param("n").parse().unwrap_or(0);
            let paragraph = "<p>A paragraph of the long page.</p>\n";
            let body = format!(
                "<!doctype html><title>Long</title>{}",
                paragraph.repeat(n / paragraph.len() + 1)
            );
            respond(
                &mut stream,
                "200 OK",
                "Content-Type: text/html\r\n",
                body.as_bytes(),
            );
        }
        "/redirect" => respond(
            &mut stream,
            "302 Found",
            &format!("Location: {}\r\n", param("to")),
            b"",
        ),
        "/loop" => respond(
            &mut stream,
            "302 Found",
            &format!("Location: http://127.0.0.1:{port}/loop\r\n"),
            b"",
        ),
        "/slow" => {
            std::thread::sleep(Duration::from_secs(5));
            respond(&mut stream, "200 OK", "", b"late");
        }
        _ => respond(&mut stream, "404 Not Found", "", b""),
    }
}

/// A request's head, read a byte at a time so nothing after it is taken.
fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    String::from_utf8(head).ok()
}

/// The stand-in egress proxy (see the module documentation).
struct StandInProxy {
    port: u16,
    asked: Arc<Mutex<Vec<String>>>,
}

const TOKEN: &str = "s3cret";

impl StandInProxy {
    /// A proxy that tunnels to `granted` targets and refuses the rest;
    /// `unreachable` targets get the 502 the egress proxy sends for a
    /// host it cannot reach.
    fn start(granted: &[String], unreachable: &[String]) -> StandInProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let (granted, unreachable) = (granted.to_vec(), unreachable.to_vec());
        let log = Arc::clone(&asked);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (granted, unreachable, log) =
                    (granted.clone(), unreachable.clone(), Arc::clone(&log));
                std::thread::spawn(move || tunnel(stream, &granted, &unreachable, &log));
            }
        });
        StandInProxy { port, asked }
    }

    fn client(&self) -> Client {
        Client::new(Some(
            Proxy::new(&format!("http://modhost:{TOKEN}@127.0.0.1:{}", self.port)).unwrap(),
        ))
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

fn tunnel(
    mut client: TcpStream,
    granted: &[String],
    unreachable: &[String],
    log: &Mutex<Vec<String>>,
) {
    let Some(head) = read_head(&mut client) else {
        return;
    };
    let mut lines = head.lines();
    let target = lines
        .next()
        .and_then(|l| l.strip_prefix("CONNECT "))
        .and_then(|l| l.strip_suffix(" HTTP/1.1"))
        .unwrap_or_default()
        .to_owned();
    let expected = format!(
        "Proxy-Authorization: Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("modhost:{TOKEN}"))
    );
    if !lines.any(|l| l == expected) {
        let _ = client
            .write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n");
        return;
    }
    log.lock().unwrap().push(target.clone());
    if unreachable.contains(&target) {
        let body = format!("modhost egress proxy: could not resolve {target}: no such name\n");
        let _ = write!(
            client,
            "HTTP/1.1 502 Bad Gateway\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        return;
    }
    if !granted.contains(&target) {
        let reason = format!(
            "{target} is not granted to this call (it may reach {})",
            granted.join(", ")
        );
        let body = format!("modhost egress proxy: refused: {reason}\n");
        let _ = write!(
            client,
            "HTTP/1.1 403 Forbidden\r\nX-Modhost-Refused: {reason}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        return;
    }
    let Ok(upstream) = TcpStream::connect(&target) else {
        return;
    };
    let _ = client.write_all(b"HTTP/1.1 200 OK\r\n\r\n");
    let (mut up_read, mut client_write) =
        (upstream.try_clone().unwrap(), client.try_clone().unwrap());
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut up_read, &mut client_write);
        let _ = client_write.shutdown(std::net::Shutdown::Both);
    });
    let mut upstream = upstream;
    let _ = std::io::copy(&mut client, &mut upstream);
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(20)
}

/// GET and read as the capability does.
fn fetch(client: &Client, url: Url, limit: usize) -> Result<GetOutput, FetchError> {
    get::read(client.get(url, soon())?, limit)
}

#[test]
fn a_granted_page_comes_back_as_text_through_the_tunnel() {
    let origin = Origin::start();
    let proxy = StandInProxy::start(&[origin.target()], &[]);
    let out = fetch(&proxy.client(), origin.url("/page"), DEFAULT_MAX_BYTES).unwrap();
    assert_eq!(
        (
            out.url.as_str(),
            out.status,
            out.content_type.as_deref(),
            out.truncated
        ),
        (
            origin.url("/page").as_str(),
            200,
            Some("text/html; charset=utf-8"),
            false
        )
    );
    assert!(
        out.text.contains("Getting started") && out.text.contains("read on"),
        "{}",
        out.text
    );
    assert!(
        !out.text.contains("secret") && !out.text.contains("<p>"),
        "{}",
        out.text
    );
    // The link's target is listed, resolved or not, so it can be followed.
    assert!(out.text.contains("/next"), "{}", out.text);
    assert_eq!(proxy.asked(), [origin.target()]);

    let text = fetch(&proxy.client(), origin.url("/text"), DEFAULT_MAX_BYTES).unwrap();
    assert_eq!(text.text, "just text");
    let json = fetch(&proxy.client(), origin.url("/json"), DEFAULT_MAX_BYTES).unwrap();
    assert_eq!(json.text, r#"{"ok": true}"#);
    let missing = fetch(&proxy.client(), origin.url("/missing"), DEFAULT_MAX_BYTES).unwrap();
    assert_eq!(
        (missing.status, missing.text.as_str()),
        (404, "no such page")
    );
}

#[test]
fn a_host_the_proxy_refuses_is_an_error_naming_its_reason_and_the_operator_s_line() {
    let origin = Origin::start();
    let proxy = StandInProxy::start(&["198.51.100.2:8080".to_owned()], &[]);
    let err = fetch(&proxy.client(), origin.url("/page"), DEFAULT_MAX_BYTES).unwrap_err();
    let FetchError::Refused {
        target,
        reason,
        redirected_from,
        ..
    } = &err
    else {
        panic!("not a refusal: {err:?}");
    };
    assert_eq!(target, &origin.target());
    assert_eq!(redirected_from, &None);
    assert!(
        reason.contains("is not granted to this call (it may reach 198.51.100.2:8080)"),
        "{reason}"
    );
    let err = modsdk::ModError::from(err);
    assert_eq!(err.kind().to_string(), "denied", "{err}");
    assert!(
        err.message()
            .contains(&format!("{} is not granted", origin.target())),
        "{err}"
    );
    let remedy = err.remedy().unwrap_or_default();
    assert!(
        remedy.contains(CONFIG_SECTION) && remedy.contains(&format!("{:?}", origin.target())),
        "{remedy}"
    );
}

#[test]
fn every_redirect_goes_through_the_proxy_again_and_a_refused_one_says_which() {
    let (origin, other) = (Origin::start(), Origin::start());
    let proxy = StandInProxy::start(&[origin.target(), other.target()], &[]);
    let start = origin.url(&format!("/redirect?to=http://{}/text", other.target()));
    let out = fetch(&proxy.client(), start, DEFAULT_MAX_BYTES).unwrap();
    assert_eq!(
        (out.url, out.text),
        (other.url("/text").to_string(), "just text".to_owned())
    );
    assert_eq!(proxy.asked(), [origin.target(), other.target()]);

    // Only the first host granted: the redirect to the second is refused.
    let proxy = StandInProxy::start(&[origin.target()], &[]);
    let start = origin.url(&format!("/redirect?to=http://{}/text", other.target()));
    let err = fetch(&proxy.client(), start.clone(), DEFAULT_MAX_BYTES).unwrap_err();
    let FetchError::Refused {
        url,
        redirected_from,
        target,
        ..
    } = &err
    else {
        panic!("not a refusal: {err:?}");
    };
    assert_eq!(
        (url, redirected_from.as_ref(), target),
        (
            &other.url("/text").to_string(),
            Some(&start.to_string()),
            &other.target()
        )
    );
    assert!(err.to_string().contains("(the redirect from "), "{err}");
}

#[test]
fn redirects_stop_at_the_limit_and_never_leave_http() {
    let origin = Origin::start();
    let proxy = StandInProxy::start(&[origin.target()], &[]);
    let err = fetch(&proxy.client(), origin.url("/loop"), DEFAULT_MAX_BYTES).unwrap_err();
    assert!(
        matches!(
            err,
            FetchError::TooManyRedirects {
                max: MAX_REDIRECTS,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("redirected more than 10 times"),
        "{err}"
    );

    let err = fetch(
        &proxy.client(),
        origin.url("/redirect?to=file:///etc/passwd"),
        DEFAULT_MAX_BYTES,
    )
    .unwrap_err();
    assert!(matches!(err, FetchError::Redirect { .. }), "{err:?}");
    assert!(err.to_string().contains("file: URL"), "{err}");
}

#[test]
fn the_size_cap_holds_on_a_large_page_and_the_rest_is_not_downloaded() {
    let origin = Origin::start();
    let proxy = StandInProxy::start(&[origin.target()], &[]);
    let client = proxy.client();
    let mut response = client.get(origin.url("/bytes?n=10000000"), soon()).unwrap();
    response.fill(1).unwrap();
    let out = get::read(response, 2048).unwrap();
    assert_eq!(out.text, "y".repeat(2048));
    assert!(out.truncated);
    let note = out.note.unwrap_or_default();
    assert!(
        note.contains("cut at 2048 bytes")
            && note.contains("10000000-byte page")
            && note.contains("larger max_bytes"),
        "{note}"
    );

    let mut response = client.get(origin.url("/bytes?n=10000000"), soon()).unwrap();
    response.read_up_to(4096 + 16).unwrap();
    assert_eq!(
        (response.bytes.len(), response.complete),
        (4096 + 16, false)
    );

    // At the largest cap the note says where, but asks for no more.
    let out = fetch(
        &client,
        origin.url(&format!("/bytes?n={}", MAX_MAX_BYTES + 1)),
        MAX_MAX_BYTES,
    )
    .unwrap();
    assert_eq!(out.text.len(), MAX_MAX_BYTES);
    assert!(!out.note.unwrap_or_default().contains("larger"));

    // A page of exactly the cap is whole.
    let out = fetch(&client, origin.url("/bytes?n=2048"), 2048).unwrap();
    assert_eq!(
        (out.text.len(), out.truncated, out.note),
        (2048, false, None)
    );
}

#[test]
fn html_is_read_no_further_than_its_cap() {
    let origin = Origin::start();
    let proxy = StandInProxy::start(&[origin.target()], &[]);
    let size = MAX_HTML_BYTES + 100_000;
    let mut response = proxy
        .client()
        .get(origin.url(&format!("/long-html?n={size}")), soon())
        .unwrap();
    response.fill(1).unwrap();
    let out = get::read(response, MAX_MAX_BYTES).unwrap();
    assert!(
        out.truncated && out.text.len() <= MAX_MAX_BYTES,
        "{}",
        out.text.len()
    );
    assert!(
        out.text.starts_with("A paragraph of the long page."),
        "{:?}",
        &out.text[..80]
    );
    let note = out.note.unwrap_or_default();
    assert!(
        note.contains(&format!("from the first {MAX_HTML_BYTES} bytes downloaded")),
        "{note}"
    );
}

#[test]
fn binary_content_a_slow_site_and_an_unreachable_host_are_clear_errors() {
    let origin = Origin::start();
    let proxy = StandInProxy::start(&[origin.target()], &["nowhere.invalid:80".to_owned()]);
    let client = proxy.client();

    let err = fetch(&client, origin.url("/png"), DEFAULT_MAX_BYTES).unwrap_err();
    assert!(err.to_string().contains("image/png, not text"), "{err}");

    let started = Instant::now();
    let err = client
        .get(
            origin.url("/slow"),
            Instant::now() + Duration::from_millis(500),
        )
        .unwrap_err();
    assert!(matches!(err, FetchError::Timeout { .. }), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(
        modsdk::ModError::from(err)
            .remedy()
            .unwrap_or_default()
            .contains("deadline")
    );

    let err = fetch(
        &client,
        Url::parse("http://nowhere.invalid/").unwrap(),
        DEFAULT_MAX_BYTES,
    )
    .unwrap_err();
    let FetchError::Proxy {
        tunnel:
            TunnelError::Failed {
                status,
                explanation,
                ..
            },
        ..
    } = &err
    else {
        panic!("not the proxy's failure: {err:?}");
    };
    assert_eq!(*status, 502);
    assert!(
        explanation.contains("could not resolve nowhere.invalid:80"),
        "{explanation}"
    );
}

#[test]
fn wrong_credentials_and_no_proxy_at_all() {
    let origin = Origin::start();
    let proxy = StandInProxy::start(&[origin.target()], &[]);
    let wrong = Client::new(Some(
        Proxy::new(&format!("http://modhost:nope@127.0.0.1:{}", proxy.port)).unwrap(),
    ));
    let err = fetch(&wrong, origin.url("/text"), DEFAULT_MAX_BYTES).unwrap_err();
    assert!(err.to_string().contains("answered 407"), "{err}");
    assert!(proxy.asked().is_empty());

    // Outside modhost, with no proxy in the environment, it connects directly.
    let out = fetch(&Client::new(None), origin.url("/text"), DEFAULT_MAX_BYTES).unwrap();
    assert_eq!(out.text, "just text");
}

/// One request line through the module, as the host sends it.
fn call(request: &Value) -> Value {
    #[derive(Clone, Default)]
    struct Shared(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().write(buf)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let out = Shared::default();
    let status =
        crate::module().serve_io(std::io::Cursor::new(format!("{request}\n")), out.clone());
    assert_eq!(status, 0);
    let bytes = out.0.borrow().clone();
    let line = BufReader::new(bytes.as_slice())
        .lines()
        .last()
        .unwrap()
        .unwrap();
    serde_json::from_str(&line).unwrap()
}

#[test]
fn the_descriptor_asks_for_any_public_host_and_tells_who_grants_hosts() {
    let described = call(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "describe", "params": {"protocol": "1.0"}}),
    );
    let capability = &described["result"]["capabilities"][0];
    assert_eq!(capability["id"], "fetch.get", "{described:#}");
    assert_eq!(capability["effects"]["network"], true, "{described:#}");
    let description = capability["description"].as_str().unwrap_or_default();
    for expected in [
        "operator grants",
        "config.toml",
        "65536",
        "262144",
        "10 redirects",
    ] {
        assert!(
            description.contains(expected),
            "{expected:?} missing: {description}"
        );
    }
    assert_eq!(
        described["result"]["operations"][0]["semantics"]["external"],
        true
    );
}

#[test]
fn a_bad_url_is_refused_before_any_connection() {
    for (url, expected) in [
        ("not a url", "no scheme"),
        ("ftp://example.org/", "ftp: URL"),
        ("http://u:p@example.org/", "user name"),
    ] {
        let answer = call(
            &json!({"jsonrpc": "2.0", "id": 2, "method": "invoke", "params": {
                "protocol": "1.0", "contract_version": "2.0", "request_id": "r1",
                "capability": "fetch.get", "input": {"url": url}, "roots": {},
                "deadline_ms": 30000, "max_output_bytes": 1048576
            }}),
        );
        let error = &answer["error"];
        assert_eq!(error["data"]["kind"], "invalid_input", "{answer:#}");
        assert!(
            error["message"]
                .as_str()
                .unwrap_or_default()
                .contains(expected),
            "{url}: {answer:#}"
        );
    }
}

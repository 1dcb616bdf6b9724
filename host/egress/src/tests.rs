//! The proxy end to end on the loopback: a client speaking raw HTTP to a
//! call's listener, and upstream servers on the host's loopback that only
//! an operator's `allow_private` line may open.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

use base64::Engine;

use super::*;
use crate::proxy;

/// An upstream server on the loopback: answers every request with a 200
/// whose body is the request head it received, and reports each head.
struct Upstream {
    address: SocketAddr,
    heads: mpsc::Receiver<String>,
}

impl Upstream {
    fn start() -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let (sent, heads) = mpsc::channel();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let sent = sent.clone();
                std::thread::spawn(move || answer_one(stream, &sent));
            }
        });
        Upstream { address, heads }
    }
}

fn answer_one(mut stream: TcpStream, sent: &mpsc::Sender<String>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let _ = sent.send(head.clone());
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{head}",
        head.len()
    );
}

fn proxy() -> Proxy {
    let mut names = std::collections::HashMap::new();
    names.insert(
        "rebound.example".to_owned(),
        vec!["127.0.0.1".parse::<IpAddr>().unwrap()],
    );
    Proxy::new(Resolver::Fixed(names), Settings::default()).unwrap()
}

fn grant(entries: &[String], private: &[SocketAddr]) -> CallGrant {
    CallGrant {
        hosts: HostGrant::Only(
            entries
                .iter()
                .map(|e| modproto::HostPattern::parse(e).unwrap())
                .collect(),
        ),
        private: private.to_vec(),
    }
}

fn open(proxy: &Proxy, grant: CallGrant) -> Ticket {
    proxy
        .open(grant, TcpListener::bind("127.0.0.1:0").unwrap())
        .unwrap()
}

fn credentials(ticket: &Ticket) -> String {
    let url = ticket.proxy_url();
    let userinfo = url
        .strip_prefix("http://")
        .and_then(|rest| rest.split_once('@'))
        .map(|(userinfo, _)| userinfo)
        .unwrap();
    format!(
        "Proxy-Authorization: Basic {}\r\n",
        base64::engine::general_purpose::STANDARD.encode(userinfo)
    )
}

/// `CONNECT target` with the call's credentials.
fn connect_request(ticket: &Ticket, target: &dyn std::fmt::Display) -> String {
    format!(
        "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{}\r\n",
        credentials(ticket)
    )
}

/// Send `request` to the call's listener; the answer's head and the stream
/// (for a tunnel).
fn ask(ticket: &Ticket, request: &str) -> (String, BufReader<TcpStream>) {
    let mut stream = TcpStream::connect(("127.0.0.1", ticket.port())).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" || line.is_empty() {
            break;
        }
        head.push_str(&line);
    }
    (head, reader)
}

fn status(head: &str) -> u16 {
    head.split(' ').nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_granted_private_address_is_tunnelled_and_recorded() {
    let upstream = Upstream::start();
    let proxy = proxy();
    let entry = upstream.address.to_string();
    let ticket = open(
        &proxy,
        grant(std::slice::from_ref(&entry), &[upstream.address]),
    );
    let (head, mut tunnel) = ask(&ticket, &connect_request(&ticket, &entry));
    assert_eq!(status(&head), 200, "{head}");
    tunnel
        .get_mut()
        .write_all(b"GET /through HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    tunnel.read_to_string(&mut answer).unwrap();
    assert!(answer.contains("GET /through"), "{answer}");
    let contacts = ticket.contacts();
    assert_eq!(contacts.contacted, [entry]);
    assert!(contacts.refused.is_empty());
}

#[test]
fn without_the_calls_credentials_nothing_is_proxied() {
    let upstream = Upstream::start();
    let proxy = proxy();
    let entry = upstream.address.to_string();
    let ticket = open(
        &proxy,
        grant(std::slice::from_ref(&entry), &[upstream.address]),
    );
    for authorization in [
        String::new(),
        "Proxy-Authorization: Basic bW9kaG9zdDp3cm9uZw==\r\n".to_owned(),
        "Proxy-Authorization: Bearer x\r\n".to_owned(),
    ] {
        let (head, _) = ask(
            &ticket,
            &format!("CONNECT {entry} HTTP/1.1\r\nHost: {entry}\r\n{authorization}\r\n"),
        );
        assert_eq!(status(&head), 407, "{authorization:?}: {head}");
    }
    assert!(
        upstream.heads.try_recv().is_err(),
        "the upstream was reached"
    );
    assert!(ticket.contacts().is_empty());
}

/// Another host, another port, the loopback itself, and a granted name
/// that resolves to the loopback: each a 403 that says why, recorded.
#[test]
fn what_the_grant_does_not_reach_is_refused_with_the_reason() {
    let upstream = Upstream::start();
    let proxy = proxy();
    let port = upstream.address.port();
    let ticket = open(
        &proxy,
        grant(
            &[format!("rebound.example:{port}"), "198.51.100.9:80".into()],
            &[],
        ),
    );
    for (target, why) in [
        (format!("127.0.0.1:{port}"), "not granted"),
        ("198.51.100.9:81".to_owned(), "not granted"),
        (format!("[::1]:{port}"), "not granted"),
        (
            format!("rebound.example:{port}"),
            "resolves to 127.0.0.1, a loopback address",
        ),
    ] {
        let (head, mut body) = ask(&ticket, &connect_request(&ticket, &target));
        assert_eq!(status(&head), 403, "{target}: {head}");
        let header = head
            .lines()
            .find_map(|l| l.strip_prefix("x-modhost-refused: "))
            .unwrap_or_default();
        assert!(header.contains(why), "{target}: {head}");
        let mut text = String::new();
        let _ = body.read_line(&mut text);
        assert!(text.contains(why), "{target}: {text}");
    }
    assert!(
        upstream.heads.try_recv().is_err(),
        "the upstream was reached"
    );
    let contacts = ticket.contacts();
    assert!(contacts.contacted.is_empty());
    assert_eq!(contacts.refused.len(), 4, "{contacts:?}");
}

/// A plain-HTTP request is forwarded in origin form, with the proxy's
/// credentials removed: the token never reaches a server.
#[test]
fn an_absolute_uri_request_is_forwarded_without_the_token() {
    let upstream = Upstream::start();
    let proxy = proxy();
    let entry = upstream.address.to_string();
    let ticket = open(
        &proxy,
        grant(std::slice::from_ref(&entry), &[upstream.address]),
    );
    let (head, mut body) = ask(
        &ticket,
        &format!(
            "GET http://{entry}/page?q=1 HTTP/1.1\r\nHost: {entry}\r\nProxy-Connection: keep-alive\r\n{}\r\n",
            credentials(&ticket)
        ),
    );
    assert_eq!(status(&head), 200, "{head}");
    let seen = upstream.heads.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(seen.starts_with("GET /page?q=1 HTTP/1.1\r\n"), "{seen}");
    let lower = seen.to_ascii_lowercase();
    assert!(!lower.contains("proxy-authorization"), "{seen}");
    assert!(!lower.contains("proxy-connection"), "{seen}");
    let mut text = String::new();
    let _ = body.read_line(&mut text);
    assert!(text.starts_with("GET /page"), "{text}");
}

/// When the call ends, its tunnels end: the upstream sees the connection
/// close, and the call's port takes no new connection.
#[test]
fn dropping_the_ticket_closes_the_calls_tunnels_and_listener() {
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = held.local_addr().unwrap();
    let proxy = proxy();
    let entry = address.to_string();
    let ticket = open(&proxy, grant(std::slice::from_ref(&entry), &[address]));
    let port = ticket.port();
    let (head, _client) = ask(&ticket, &connect_request(&ticket, &entry));
    assert_eq!(status(&head), 200, "{head}");
    let (mut upstream_side, _) = held.accept().unwrap();
    upstream_side
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    drop(ticket);
    let mut rest = Vec::new();
    let read = upstream_side.read_to_end(&mut rest);
    assert!(
        matches!(read, Ok(0)),
        "the tunnel outlived its call: {read:?}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(("127.0.0.1", port)).is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "the call's port still accepts"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A service bound to every address is reached through the host's own
/// non-loopback address too: that address is the host's, whatever its
/// range, and no public range the operator declares makes it reachable.
#[test]
fn an_address_of_this_machine_is_never_public() {
    let own = proxy::this_machine();
    let outside = own
        .iter()
        .copied()
        .find(|ip| ip.is_ipv4() && !ip.is_loopback())
        .expect("the test machine has a non-loopback IPv4 address");
    let service = TcpListener::bind("0.0.0.0:0").unwrap();
    service.set_nonblocking(true).unwrap();
    let port = service.local_addr().unwrap().port();
    let everything: Vec<ipnet::IpNet> = vec!["0.0.0.0/0".parse().unwrap()];
    let settings = Settings {
        public_ranges: everything.clone(),
        ..Settings::default()
    };
    let proxy = Proxy::new(Resolver::Fixed(Default::default()), settings).unwrap();
    let ticket = open(
        &proxy,
        CallGrant {
            hosts: HostGrant::AnyPublic,
            private: Vec::new(),
        },
    );
    let target = SocketAddr::new(outside, port);
    let (head, _) = ask(&ticket, &connect_request(&ticket, &target));
    assert_eq!(status(&head), 403, "{head}");
    assert!(head.contains("an address of this machine"), "{head}");
    assert!(
        service.accept().is_err(),
        "the host's own service was reached"
    );
    assert_eq!(
        proxy::class_of(outside, &own, &everything),
        AddressClass::ThisHost
    );
}

/// Which ranges are public: documentation ranges only when the operator
/// says so, the loopback never.
#[test]
fn the_operators_public_ranges_open_documentation_and_private_ranges_only() {
    let lab: Vec<ipnet::IpNet> = vec![
        "198.51.100.0/24".parse().unwrap(),
        "10.9.0.0/16".parse().unwrap(),
        "127.0.0.0/8".parse().unwrap(),
    ];
    let class =
        |ip: &str, public: &[ipnet::IpNet]| proxy::class_of(ip.parse().unwrap(), &[], public);
    assert_eq!(class("198.51.100.7", &[]), AddressClass::Documentation);
    assert_eq!(class("198.51.100.7", &lab), AddressClass::Public);
    assert_eq!(class("::ffff:198.51.100.7", &lab), AddressClass::Public);
    assert_eq!(class("10.9.1.1", &lab), AddressClass::Public);
    assert_eq!(class("10.8.1.1", &lab), AddressClass::Private);
    assert_eq!(class("127.0.0.1", &lab), AddressClass::Loopback);
    assert_eq!(
        class("0.0.0.0", &["0.0.0.0/0".parse().unwrap()]),
        AddressClass::Unspecified
    );
}

/// A call holds at most `max_connections` at once, tunnels included: the
/// next connection is closed, and a place frees when a tunnel ends.
#[test]
fn a_call_cannot_hold_more_connections_than_its_bound() {
    // Each upstream connection is closed once its client has left.
    let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = upstream.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in upstream.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut stream, &mut std::io::sink());
            });
        }
    });
    let settings = Settings {
        max_connections: 2,
        ..Settings::default()
    };
    let proxy = Proxy::new(Resolver::Fixed(Default::default()), settings).unwrap();
    let entry = address.to_string();
    let ticket = open(&proxy, grant(std::slice::from_ref(&entry), &[address]));
    let connect = connect_request(&ticket, &entry);
    let (first, first_tunnel) = ask(&ticket, &connect);
    let (second, _second_tunnel) = ask(&ticket, &connect);
    assert_eq!((status(&first), status(&second)), (200, 200));
    // The third is closed unanswered.
    let mut third = TcpStream::connect(("127.0.0.1", ticket.port())).unwrap();
    third
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let _ = third.write_all(connect.as_bytes());
    let mut answer = Vec::new();
    let _ = third.read_to_end(&mut answer);
    assert!(
        answer.is_empty(),
        "a third connection was served: {answer:?}"
    );
    // A tunnel that ends gives its place back.
    drop(first_tunnel);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut stream = TcpStream::connect(("127.0.0.1", ticket.port())).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let _ = stream.write_all(connect.as_bytes());
        let mut line = String::new();
        let _ = BufReader::new(stream).read_line(&mut line);
        if line.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the ended tunnel's place was never freed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Requests whose target could be read two ways are refused, not read one
/// of them: ports that are no port, credentials in the authority, a
/// CONNECT that names a URL.
#[test]
fn ambiguous_targets_are_refused() {
    let upstream = Upstream::start();
    let proxy = proxy();
    let entry = upstream.address.to_string();
    let port = upstream.address.port();
    let ticket = open(
        &proxy,
        grant(std::slice::from_ref(&entry), &[upstream.address]),
    );
    let auth = credentials(&ticket);
    for request in [
        format!(
            "CONNECT 127.0.0.1:{} HTTP/1.1\r\nHost: x\r\n{auth}\r\n",
            u32::from(port) + 65536
        ),
        format!("CONNECT 127.0.0.1:0 HTTP/1.1\r\nHost: x\r\n{auth}\r\n"),
        format!("CONNECT http://{entry}/ HTTP/1.1\r\nHost: x\r\n{auth}\r\n"),
        format!("GET http://granted.example@{entry}/ HTTP/1.1\r\nHost: x\r\n{auth}\r\n"),
        format!(
            "GET http://127.0.0.1:{}/ HTTP/1.1\r\nHost: x\r\n{auth}\r\n",
            u32::from(port) + 65536
        ),
    ] {
        let (head, _) = ask(&ticket, &request);
        assert_eq!(status(&head), 400, "{request:?}: {head}");
    }
    assert!(
        upstream.heads.try_recv().is_err(),
        "the upstream was reached"
    );
    // A plain request gets the target's own Host header.
    let (head, _) = ask(
        &ticket,
        &format!("GET http://{entry}/ HTTP/1.1\r\nHost: elsewhere.example\r\n{auth}\r\n"),
    );
    assert_eq!(status(&head), 200, "{head}");
    let seen = upstream.heads.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(
        seen.to_ascii_lowercase()
            .contains(&format!("host: {entry}\r\n")),
        "{seen}"
    );
}

//! The CONNECT step of every proxied connection, keeping what the proxy
//! says when it says no.
//!
//! Under modhost the only place a call with network can connect to is the
//! host's egress proxy, named in the environment (`HTTPS_PROXY` and the
//! rest), and the proxy checks every target against the call's grant. A
//! refusal is a `403` whose `X-Modhost-Refused` header says why. ureq's own
//! CONNECT step turns any answer but `200` into
//! `ConnectProxyFailed("proxy server responded 403/403")`, dropping the
//! headers and the reason with them; an agent told only "403" cannot tell
//! "the operator did not grant this host" from "the site said no". So this
//! connector replaces ureq's in the chain (TCP, then this, then rustls): the
//! same handshake, with the answer kept as a [`TunnelError`].
//!
//! Design decisions:
//!
//! - **Only the handshake is ours.** ureq still opens the socket (its
//!   `TcpConnector`), does TLS through the tunnel (rustls), and speaks
//!   HTTP; this file writes one CONNECT request and reads one answer head
//!   with `httparse`.
//! - **Every connection is tunnelled, `http://` ones too**, as ureq's own
//!   connector does: the proxy checks a CONNECT like any request, and a
//!   `403` inside a tunnel can then only be the site's, never mistaken for
//!   the proxy's.
//! - **`NO_PROXY` is honoured** as ureq honours it (modhost never sets it);
//!   without a proxy, ureq connects directly.

use std::fmt;
use std::io::Write;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ureq::ProxyProtocol;
use ureq::http::Uri;
use ureq::unversioned::transport::{
    ConnectionDetails, Connector, Either, TcpConnector, Transport, TransportAdapter,
};

/// The header a refusal's reason travels in.
pub const REFUSAL_HEADER: &str = "x-modhost-refused";

/// The most of a failed CONNECT's body kept as its explanation.
const EXPLANATION_BYTES: usize = 2048;

/// Why a tunnel was not opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TunnelError {
    /// The proxy refused the target (a `403`): the call's grant does not
    /// reach it. `reason` is the proxy's `X-Modhost-Refused`.
    #[error("the egress proxy refused {target}: {reason}")]
    Refused { target: String, reason: String },
    /// The proxy answered something else (it could not resolve or reach
    /// the target, or did not take the credentials).
    #[error("the egress proxy answered {status} to CONNECT {target}: {explanation}")]
    Failed {
        target: String,
        status: u16,
        explanation: String,
    },
    /// The proxy's answer was not HTTP, or never came.
    #[error("the proxy at {proxy} {problem}")]
    NoAnswer { proxy: String, problem: String },
    /// The environment names a proxy this connector does not speak.
    #[error("the proxy {proxy} is a {protocol} proxy; fetch tunnels through http:// proxies only")]
    Unsupported { proxy: String, protocol: String },
}

/// The connector: CONNECT through the configured proxy, or nothing (ureq
/// then connects directly).
#[derive(Default)]
pub struct Tunnel {
    tcp: TcpConnector,
}

impl fmt::Debug for Tunnel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tunnel").finish_non_exhaustive()
    }
}

impl<In: Transport> Connector<In> for Tunnel {
    type Out = Either<In, Box<dyn Transport>>;

    fn connect(
        &self,
        details: &ConnectionDetails<'_>,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        if let Some(transport) = chained {
            return Ok(Some(Either::A(transport)));
        }
        let Some(proxy) = details.config.proxy() else {
            return Ok(None);
        };
        if proxy.is_no_proxy(details.uri) {
            return Ok(None);
        }
        let proxy_shown = format!("{}:{}", proxy.host(), proxy.port());
        if proxy.protocol() != ProxyProtocol::Http {
            return Err(other(TunnelError::Unsupported {
                proxy: proxy_shown,
                protocol: format!("{:?}", proxy.protocol()).to_ascii_lowercase(),
            }));
        }
        let target = authority(details.uri)?;

        // The socket to the proxy itself: ureq's TCP connector, given the
        // proxy's address (the target is the proxy's to resolve).
        let proxy_details = ConnectionDetails {
            uri: proxy.uri(),
            addrs: details
                .resolver
                .resolve(proxy.uri(), details.config, details.timeout)?,
            config: details.config,
            request_level: details.request_level,
            resolver: details.resolver,
            now: details.now,
            timeout: details.timeout,
            current_time: details.current_time.clone(),
            run_connector: details.run_connector.clone(),
            register_shutdown: details.register_shutdown.clone(),
        };
        let Some(socket) = Connector::<()>::connect(&self.tcp, &proxy_details, None)? else {
            return Err(other(TunnelError::NoAnswer {
                proxy: proxy_shown,
                problem: "could not be connected to".into(),
            }));
        };

        let mut writer = TransportAdapter::new(
            Box::new(socket) as Box<dyn Transport>,
            details.current_time.clone(),
        );
        writer.set_timeout(details.timeout);
        let credentials = match (proxy.username(), proxy.password()) {
            (None, None) => None,
            (user, password) => Some(BASE64.encode(format!(
                "{}:{}",
                user.unwrap_or_default(),
                password.unwrap_or_default()
            ))),
        };
        writer.write_all(connect_request(&target, credentials.as_deref()).as_bytes())?;
        let mut transport = writer.into_inner();

        let answer = read_answer(&mut transport, details, &proxy_shown)?;
        match answer.status {
            200 => Ok(Some(Either::B(transport))),
            403 => Err(other(TunnelError::Refused {
                target,
                reason: answer
                    .reason
                    .unwrap_or_else(|| "no reason given (no X-Modhost-Refused header)".into()),
            })),
            status => Err(other(TunnelError::Failed {
                target,
                status,
                explanation: explanation(&mut transport, details, answer.content_length),
            })),
        }
    }
}

/// `host:port` of a request's URI, the port defaulted by its scheme.
fn authority(uri: &Uri) -> Result<String, ureq::Error> {
    let host = uri
        .host()
        .ok_or_else(|| ureq::Error::BadUri(format!("{uri} names no host")))?;
    let port = uri.port_u16().unwrap_or(match uri.scheme_str() {
        Some("https") => 443,
        _ => 80,
    });
    Ok(format!("{host}:{port}"))
}

/// The CONNECT request for `target` (`host:port`, an IPv6 host in brackets).
fn connect_request(target: &str, credentials: Option<&str>) -> String {
    let mut request = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
    if let Some(credentials) = credentials {
        request.push_str(&format!("Proxy-Authorization: Basic {credentials}\r\n"));
    }
    request.push_str("\r\n");
    request
}

/// What the proxy answered a CONNECT with.
#[derive(Debug, PartialEq, Eq)]
struct Answer {
    status: u16,
    /// `X-Modhost-Refused`.
    reason: Option<String>,
    content_length: Option<usize>,
}

/// Read the answer's head, and only its head: what follows a `200` is the
/// tunnel's, and stays in the transport's buffer for ureq.
fn read_answer(
    transport: &mut Box<dyn Transport>,
    details: &ConnectionDetails<'_>,
    proxy: &str,
) -> Result<Answer, ureq::Error> {
    loop {
        let progressed = transport.maybe_await_input(details.timeout)?;
        let input = transport.buffers().input();
        match parse_answer(input) {
            Ok(Some((used, answer))) => {
                transport.buffers().input_consume(used);
                return Ok(answer);
            }
            Ok(None) if progressed => {
                // A partial head: say so, so that the next wait reads more.
                transport.buffers().input_consume(0);
            }
            Ok(None) => {
                return Err(other(TunnelError::NoAnswer {
                    proxy: proxy.to_owned(),
                    problem: "closed the connection without answering CONNECT".into(),
                }));
            }
            Err(problem) => {
                return Err(other(TunnelError::NoAnswer {
                    proxy: proxy.to_owned(),
                    problem: format!(
                        "answered CONNECT with something that is not HTTP ({problem})"
                    ),
                }));
            }
        }
    }
}

/// A whole answer head in `input`: the bytes it takes and what it says;
/// `None` while it is incomplete.
fn parse_answer(input: &[u8]) -> Result<Option<(usize, Answer)>, httparse::Error> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut headers);
    let httparse::Status::Complete(used) = response.parse(input)? else {
        return Ok(None);
    };
    let header = |name: &str| {
        response
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_owned())
    };
    let answer = Answer {
        status: response.code.unwrap_or(0),
        reason: header(REFUSAL_HEADER).filter(|r| !r.is_empty()),
        content_length: header("content-length").and_then(|n| n.parse().ok()),
    };
    Ok(Some((used, answer)))
}

/// The body of a failed CONNECT (the egress proxy says there what went
/// wrong), best effort and bounded: the connection is dropped after it.
fn explanation(
    transport: &mut Box<dyn Transport>,
    details: &ConnectionDetails<'_>,
    content_length: Option<usize>,
) -> String {
    let wanted = content_length.unwrap_or(0).min(EXPLANATION_BYTES);
    while transport.buffers().input().len() < wanted {
        transport.buffers().input_consume(0);
        match transport.maybe_await_input(details.timeout) {
            Ok(true) => {}
            Ok(false) | Err(_) => break,
        }
    }
    let input = transport.buffers().input();
    let body = String::from_utf8_lossy(&input[..input.len().min(wanted)]);
    let text = body.trim();
    let text = text
        .strip_prefix("modhost egress proxy:")
        .unwrap_or(text)
        .trim();
    if text.is_empty() {
        "no explanation given".to_owned()
    } else {
        text.to_owned()
    }
}

fn other(error: TunnelError) -> ureq::Error {
    ureq::Error::Other(Box::new(error))
}

/// The tunnel's error inside a ureq error, if that is what it is.
pub fn tunnel_error(error: &ureq::Error) -> Option<&TunnelError> {
    match error {
        ureq::Error::Other(inner) => inner.downcast_ref::<TunnelError>(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_keeps_the_proxy_s_reason() {
        let head = b"HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\nX-Modhost-Refused: 198.51.100.6:8080 is not granted to this call\r\ncontent-length: 12\r\n\r\nrefused: ...";
        let (used, answer) = parse_answer(head).unwrap().unwrap();
        assert_eq!(&head[used..], b"refused: ...");
        assert_eq!(
            answer,
            Answer {
                status: 403,
                reason: Some("198.51.100.6:8080 is not granted to this call".into()),
                content_length: Some(12),
            }
        );
    }

    #[test]
    fn a_partial_head_is_not_an_answer_yet() {
        assert_eq!(
            parse_answer(b"HTTP/1.1 200 OK\r\ndate: x\r\n").unwrap(),
            None
        );
        assert!(parse_answer(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
        // What follows a 200 is the tunnel's: not consumed.
        let (used, answer) = parse_answer(b"HTTP/1.1 200 OK\r\n\r\n\x16\x03")
            .unwrap()
            .unwrap();
        assert_eq!((used, answer.status), (19, 200));
    }

    #[test]
    fn the_request_names_the_target_and_carries_the_credentials() {
        assert_eq!(
            connect_request("[::1]:443", Some("bW9kaG9zdDp0")),
            "CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\nProxy-Authorization: Basic bW9kaG9zdDp0\r\n\r\n"
        );
        let uri: Uri = "http://example.org/a".parse().unwrap();
        assert_eq!(authority(&uri).unwrap(), "example.org:80");
        let uri: Uri = "https://example.org:8443/".parse().unwrap();
        assert_eq!(authority(&uri).unwrap(), "example.org:8443");
    }
}

//! `wasi:http` outgoing requests of a component, sent through the call's
//! egress proxy.
//!
//! A component has no sockets (`wasi:sockets` is denied in its context);
//! its one way out is `wasi:http/outgoing-handler`, and every request it
//! makes goes through the same egress proxy a native call's process uses:
//! a `CONNECT host:port` to the call's listener, with the call's token, so
//! the proxy applies the call's grant (the name, then every address it
//! resolves to) and records what was contacted and refused. Over the
//! tunnel the host speaks HTTP/1.1, in TLS for `https` (rustls, the
//! webpki roots).
//!
//! Design decisions:
//!
//! - **The proxy, not a second copy of its checks.** The checks that hold
//!   for native modules hold for components because they are the same
//!   code, reached the same way, and a call's contacts come from one place.
//! - **A refusal is the proxy's answer.** When the proxy refuses the
//!   tunnel, the guest gets that response (a 403 whose `X-Modhost-Refused`
//!   header says why), as a native client would, not an opaque error.
//! - **No network, no request.** A call without network gets
//!   `HTTP-request-denied` before anything is opened.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::task::Poll;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use crate::CallNetwork;

/// How long the tunnel may take to open when the guest sets no timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The hooks of one call: its proxy, or none.
#[derive(Debug, Default)]
pub(super) struct EgressHooks {
    pub(super) network: Option<CallNetwork>,
}

type Sent = Result<
    (
        Response<WasiBody>,
        Box<dyn Future<Output = Result<(), Error>> + Send>,
    ),
    Error,
>;

impl WasiHttpHooks for EgressHooks {
    fn send_request(
        &mut self,
        request: Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Box<dyn Future<Output = Sent> + Send> {
        drop(fut);
        let network = self.network.clone();
        Box::new(async move {
            let Some(network) = network else {
                return Err(Error::HttpRequestDenied);
            };
            send(&network, request, options).await
        })
    }
}

async fn send(
    network: &CallNetwork,
    mut request: Request<WasiBody>,
    options: Option<RequestOptions>,
) -> Sent {
    let connect_timeout = options
        .and_then(|o| o.connect_timeout)
        .unwrap_or(CONNECT_TIMEOUT);
    let uri = request.uri().clone();
    let tls = uri.scheme() == Some(&hyper::http::uri::Scheme::HTTPS);
    let authority = uri.authority().ok_or(Error::HttpRequestUriInvalid)?;
    let host = authority.host().to_owned();
    let port = port_of(authority.as_str(), if tls { 443 } else { 80 })
        .ok_or(Error::HttpRequestUriInvalid)?;
    let target = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let tunnel = match tokio::time::timeout(connect_timeout, open_tunnel(network, &target)).await {
        Ok(Ok(Tunnel::Open(stream))) => stream,
        Ok(Ok(Tunnel::Refused(answer))) => {
            return Ok((answer, Box::new(async { Ok(()) })));
        }
        Ok(Err(e)) => return Err(e),
        Err(_) => return Err(Error::ConnectionTimeout),
    };
    *request.uri_mut() = origin_form(&uri)?;
    if tls {
        let stream = tls_over(tunnel, &host).await?;
        exchange(stream, request).await
    } else {
        exchange(tunnel, request).await
    }
}

/// What the proxy said to the tunnel.
enum Tunnel {
    Open(TokioIo<hyper::upgrade::Upgraded>),
    /// Its answer to a tunnel it did not open (a 403 with the reason).
    Refused(Response<WasiBody>),
}

/// `CONNECT target` on the call's proxy listener, with its credentials.
async fn open_tunnel(network: &CallNetwork, target: &str) -> Result<Tunnel, Error> {
    let stream = TcpStream::connect(("127.0.0.1", network.proxy_port))
        .await
        .map_err(Error::Connect)?;
    let _ = stream.set_nodelay(true);
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(Error::from)?;
    tokio::spawn(async move {
        let _ = connection.with_upgrades().await;
    });
    let mut connect = Request::new(Empty::<Bytes>::new());
    *connect.method_mut() = Method::CONNECT;
    *connect.uri_mut() = target.parse().map_err(|_| Error::HttpRequestUriInvalid)?;
    let headers = connect.headers_mut();
    headers.insert(
        header::HOST,
        HeaderValue::from_str(target).map_err(|_| Error::HttpRequestUriInvalid)?,
    );
    if let Some(credentials) = proxy_credentials(&network.proxy_url) {
        headers.insert(header::PROXY_AUTHORIZATION, credentials);
    }
    let answer = sender.send_request(connect).await.map_err(Error::from)?;
    if answer.status() != StatusCode::OK {
        return Ok(Tunnel::Refused(
            answer.map(|body| body.map_err(Error::from).boxed_unsync()),
        ));
    }
    let upgraded = hyper::upgrade::on(answer).await.map_err(Error::from)?;
    Ok(Tunnel::Open(TokioIo::new(upgraded)))
}

/// The port an authority names, or `default`; `None` for one that could
/// be read two ways: credentials in it, or a port that is no port (0, past
/// 65535, empty). The egress proxy refuses the same for native clients.
fn port_of(authority: &str, default: u16) -> Option<u16> {
    if authority.contains('@') {
        return None;
    }
    // Past an IPv6 literal's closing bracket, or the whole text.
    let tail = authority
        .rsplit_once(']')
        .map_or(authority, |(_, tail)| tail);
    match tail.rsplit_once(':') {
        None => Some(default),
        Some((_, port)) => port.parse::<u16>().ok().filter(|p| *p != 0),
    }
}

/// `Basic base64(user:token)` from `http://user:token@127.0.0.1:port`.
fn proxy_credentials(proxy_url: &str) -> Option<HeaderValue> {
    let userinfo = proxy_url
        .strip_prefix("http://")?
        .split_once('@')
        .map(|(userinfo, _)| userinfo)?;
    HeaderValue::from_str(&format!("Basic {}", BASE64.encode(userinfo))).ok()
}

/// The request's target as a server expects it: path and query only.
fn origin_form(uri: &Uri) -> Result<Uri, Error> {
    uri.path_and_query()
        .map_or("/", |p| p.as_str())
        .parse()
        .map_err(|_| Error::HttpRequestUriInvalid)
}

/// TLS to `host` over the tunnel, verified against the webpki roots.
async fn tls_over(
    tunnel: TokioIo<hyper::upgrade::Upgraded>,
    host: &str,
) -> Result<tokio_rustls::client::TlsStream<TokioIo<hyper::upgrade::Upgraded>>, Error> {
    let name = rustls::pki_types::ServerName::try_from(host.trim_matches(['[', ']']).to_owned())
        .map_err(|_| Error::HttpRequestUriInvalid)?;
    tls_connector()
        .connect(name, tunnel)
        .await
        .map_err(Error::Tls)
}

/// One client configuration for every call (building the root store is
/// the expensive part).
fn tls_connector() -> tokio_rustls::TlsConnector {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    let config = CONFIG.get_or_init(|| {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        };
        // ring, not aws-lc-rs: no cmake-built C library in the host's build.
        // rustls deprecates ring's provider for lacking post-quantum key
        // exchange; classical TLS 1.2 and 1.3 are what it offers.
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Arc::new(
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .expect("ring supports the default protocol versions")
                .with_root_certificates(roots)
                .with_no_client_auth(),
        )
    });
    tokio_rustls::TlsConnector::from(Arc::clone(config))
}

/// Send `request` on `stream` and hand back the answer and the future that
/// drives the connection until its body is read. The connection is driven
/// while the answer is awaited too: hyper moves no byte otherwise.
async fn exchange<S>(stream: S, request: Request<WasiBody>) -> Sent
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(Error::from)?;
    let mut connection = Some(Box::pin(connection));
    let mut send = std::pin::pin!(sender.send_request(request));
    let answer = std::future::poll_fn(|cx| {
        if let Poll::Ready(answer) = send.as_mut().poll(cx) {
            return Poll::Ready(answer.map_err(Error::from));
        }
        let Some(driving) = connection.as_mut() else {
            return Poll::Pending;
        };
        let Poll::Ready(ended) = driving.as_mut().poll(cx) else {
            return Poll::Pending;
        };
        connection = None;
        match ended {
            Ok(()) => send.as_mut().poll(cx).map_err(Error::from),
            Err(e) => Poll::Ready(Err(Error::from(e))),
        }
    })
    .await?;
    let driven: Box<dyn Future<Output = Result<(), Error>> + Send> = Box::new(async move {
        match connection {
            Some(driving) => driving.await.map_err(Error::from),
            None => Ok(()),
        }
    });
    Ok((
        answer.map(|body| body.map_err(Error::from).boxed_unsync()),
        driven,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_credentials_come_from_the_proxy_url() {
        let value = proxy_credentials("http://modhost:abc@127.0.0.1:9").unwrap();
        assert_eq!(value, "Basic bW9kaG9zdDphYmM=");
        assert!(proxy_credentials("http://127.0.0.1:9").is_none());
    }

    #[test]
    fn an_authority_that_could_be_read_two_ways_is_refused() {
        assert_eq!(port_of("example.org", 443), Some(443));
        assert_eq!(port_of("example.org:8080", 443), Some(8080));
        assert_eq!(port_of("[::1]:8080", 80), Some(8080));
        assert_eq!(port_of("[::1]", 80), Some(80));
        for bad in [
            "example.org:73616",
            "example.org:0",
            "example.org:",
            "user:pw@example.org:8080",
            "granted.example@127.0.0.1",
        ] {
            assert_eq!(port_of(bad, 80), None, "{bad}");
        }
    }

    #[test]
    fn the_request_goes_out_in_origin_form() {
        let uri: Uri = "http://example.org:8080/a/b?c=d".parse().unwrap();
        assert_eq!(origin_form(&uri).unwrap(), "/a/b?c=d");
        let bare: Uri = "http://example.org".parse().unwrap();
        assert_eq!(origin_form(&bare).unwrap(), "/");
    }
}

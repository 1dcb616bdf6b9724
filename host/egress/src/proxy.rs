//! The proxy: one runtime of its own for the host's calls with network, and
//! one listener per call.
//!
//! A connection to a call's listener is that call's: the listener is its
//! identity (a confined module can connect to its own listener's port and
//! nowhere else), and the token in its proxy URL is checked as well, for
//! the calls that run unconfined on the host's loopback. Each request
//! names its target (`CONNECT host:port`, or an absolute `http://` URL);
//! the target must be admitted by the call's grant, then the proxy
//! resolves it itself and connects only to addresses the grant reaches
//! ([`CallGrant::reaches`]), so what is checked is what is connected to.
//! A refusal is a `403` whose `X-Modhost-Refused` header and body say why,
//! recorded in the call's [`Contacts`].
//!
//! Design decisions:
//!
//! - **A runtime of its own.** The host's callers run on runtimes of their
//!   own choosing (a one-shot command's, an MCP server's); the proxy's
//!   tasks must outlive none of them and block none of them. Its runtime
//!   is shut down in the background when the proxy drops, which is allowed
//!   from inside another runtime.
//! - **Everything of a call ends with its ticket.** Each task of a call
//!   (the accept loop, each connection, each tunnel and forwarded
//!   exchange) races the ticket's drop, so no tunnel of a call that ended
//!   is left open.
//! - **No redirects followed, no pooling.** A redirect goes back to the
//!   module, whose next request is checked like any other; each forwarded
//!   request gets a connection of its own to the address just checked.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::{TokioIo, TokioTimer};
use ipnet::IpNet;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use crate::address_class::{AddressClass, classify, embedded_v4};
use crate::contacts::{Contacts, Refusal};
use crate::error::EgressError;
use crate::grant::{CallGrant, Target};

/// The header a refusal's reason travels in.
pub const REFUSAL_HEADER: &str = "x-modhost-refused";

/// The user name of the proxy URL's credentials.
const USER: &str = "modhost";

/// Tunnel buffers: large enough that a bulk download is not held to
/// 8 KiB reads.
const TUNNEL_BUFFER: usize = 64 * 1024;

/// How names are looked up.
#[derive(Debug, Clone)]
pub enum Resolver {
    /// The host's resolver (`getaddrinfo`).
    System,
    /// A fixed table, for tests: a name missing from it does not resolve.
    Fixed(HashMap<String, Vec<IpAddr>>),
}

impl Resolver {
    async fn resolve(&self, target: &Target) -> io::Result<Vec<SocketAddr>> {
        if let Some(ip) = target.literal() {
            return Ok(vec![SocketAddr::new(ip, target.port)]);
        }
        match self {
            Resolver::System => Ok(tokio::net::lookup_host((target.host.as_str(), target.port))
                .await?
                .collect()),
            Resolver::Fixed(table) => table
                .get(&target.host)
                .map(|ips| {
                    ips.iter()
                        .map(|ip| SocketAddr::new(*ip, target.port))
                        .collect()
                })
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such name")),
        }
    }
}

/// The proxy's bounds, and the ranges the operator declares public.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How long one connect to an upstream address may take.
    pub connect_timeout: Duration,
    /// How long a client may take to send a request's head.
    pub head_timeout: Duration,
    /// Connections one call may hold open at once, tunnels included; more
    /// are closed as they arrive (the host's descriptors are not the
    /// module's to spend).
    pub max_connections: usize,
    /// Connections all calls together may hold open at once: one call
    /// cannot starve the others, or the host, of descriptors.
    pub max_total_connections: usize,
    /// Non-public ranges reachable as if public (a lab numbered from
    /// documentation or private ranges). Never the loopback, an
    /// unspecified address or an address of this machine.
    pub public_ranges: Vec<IpNet>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            connect_timeout: Duration::from_secs(10),
            head_timeout: Duration::from_secs(30),
            max_connections: 128,
            max_total_connections: 1024,
            public_ranges: Vec::new(),
        }
    }
}

/// The egress proxy of one host.
#[derive(Debug)]
pub struct Proxy {
    runtime: Option<tokio::runtime::Runtime>,
    resolver: Arc<Resolver>,
    settings: Settings,
    /// [`Settings::max_total_connections`], shared by every call.
    total: Arc<Semaphore>,
}

impl Proxy {
    /// A proxy with its own runtime (two worker threads), serving nothing
    /// until a call is opened.
    ///
    /// It raises the process's soft descriptor limit to the hard one, and
    /// bounds its connections (each call's and all together) by what that
    /// limit leaves room for (`descriptor_budget`).
    pub fn new(resolver: Resolver, mut settings: Settings) -> Result<Proxy, EgressError> {
        if let Some(limit) = crate::descriptor_budget::raise_limit() {
            let room = crate::descriptor_budget::connections_within(limit);
            settings.max_total_connections = settings.max_total_connections.min(room);
            settings.max_connections = settings.max_connections.min(room);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("modhost-egress")
            .enable_all()
            .build()
            .map_err(EgressError::Runtime)?;
        Ok(Proxy {
            runtime: Some(runtime),
            resolver: Arc::new(resolver),
            total: Arc::new(Semaphore::new(settings.max_total_connections)),
            settings,
        })
    }

    /// Serve one call granted `grant` on `listener` (a bound, listening
    /// socket) until the ticket drops.
    pub fn open(
        &self,
        grant: CallGrant,
        listener: std::net::TcpListener,
    ) -> Result<Ticket, EgressError> {
        let port = listener.local_addr().map_err(EgressError::Listener)?.port();
        listener
            .set_nonblocking(true)
            .map_err(EgressError::Listener)?;
        let token = new_token()?;
        let (open, closed) = watch::channel(());
        let call = Arc::new(CallState {
            grant,
            credentials: format!("{USER}:{token}").into_bytes(),
            contacts: Mutex::default(),
            resolver: Arc::clone(&self.resolver),
            settings: self.settings.clone(),
            closed,
        });
        let runtime = self
            .runtime
            .as_ref()
            .expect("the runtime is taken only by drop");
        let listener = {
            let _entered = runtime.enter();
            TcpListener::from_std(listener).map_err(EgressError::Listener)?
        };
        runtime.spawn(call.until_closed(accept(
            listener,
            Arc::clone(&call),
            Arc::clone(&self.total),
        )));
        Ok(Ticket {
            port,
            token,
            call,
            _open: open,
        })
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// One call's use of the proxy. Dropping it closes the call's listener
/// and every connection, tunnel and exchange of the call.
#[derive(Debug)]
pub struct Ticket {
    port: u16,
    token: String,
    call: Arc<CallState>,
    _open: watch::Sender<()>,
}

impl Ticket {
    /// The call's listener's port (on 127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://modhost:TOKEN@127.0.0.1:PORT`: what the module's proxy
    /// variables say.
    pub fn proxy_url(&self) -> String {
        format!("http://{USER}:{}@127.0.0.1:{}", self.token, self.port)
    }

    /// Close the call and say what it reached.
    pub fn contacts(self) -> Contacts {
        self.call
            .contacts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// What every task of one call shares.
#[derive(Debug)]
struct CallState {
    grant: CallGrant,
    /// `modhost:TOKEN`, as a Basic `Proxy-Authorization` carries it.
    credentials: Vec<u8>,
    contacts: Mutex<Contacts>,
    resolver: Arc<Resolver>,
    settings: Settings,
    /// Changes (closes) when the ticket drops.
    closed: watch::Receiver<()>,
}

/// Why a request got no connection.
enum Denied {
    /// The grant refuses it: a 403, recorded.
    Refused(String),
    /// It could not be made (no such name, nothing answered): a 502.
    Failed(String),
}

impl CallState {
    /// `work`, ended early when the call's ticket drops.
    fn until_closed(
        &self,
        work: impl Future<Output = ()> + Send + 'static,
    ) -> impl Future<Output = ()> + Send + 'static {
        let mut closed = self.closed.clone();
        async move {
            tokio::select! {
                () = work => {}
                _ = closed.changed() => {}
            }
        }
    }

    fn authorized(&self, headers: &HeaderMap) -> bool {
        headers
            .get_all(header::PROXY_AUTHORIZATION)
            .iter()
            .any(|value| {
                let Some((scheme, credentials)) =
                    value.to_str().ok().and_then(|v| v.trim().split_once(' '))
                else {
                    return false;
                };
                scheme.eq_ignore_ascii_case("basic")
                    && BASE64
                        .decode(credentials.trim())
                        .is_ok_and(|decoded| decoded == self.credentials)
            })
    }

    fn record<T>(&self, note: impl FnOnce(&mut Contacts) -> T) -> T {
        note(&mut self.contacts.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// A connection to `target`, if the grant allows it and it answers.
    async fn connect(&self, target: &Target) -> Result<TcpStream, Denied> {
        self.grant.admits(target).map_err(Denied::Refused)?;
        let addresses = self
            .resolver
            .resolve(target)
            .await
            .map_err(|e| Denied::Failed(format!("could not resolve {}: {e}", target.host)))?;
        let own = this_machine();
        let (reachable, unreachable): (Vec<_>, Vec<_>) = addresses
            .into_iter()
            .map(|address| {
                let class = class_of(address.ip(), &own, &self.settings.public_ranges);
                (address, self.grant.reaches(address, class))
            })
            .partition(|(_, verdict)| verdict.is_ok());
        if reachable.is_empty() {
            let Some((address, Err(class))) = unreachable.into_iter().next() else {
                return Err(Denied::Failed(format!("{} has no address", target.host)));
            };
            let what = if target.literal().is_some() {
                format!("{target} is {class}")
            } else {
                format!("{target} resolves to {}, {class}", address.ip())
            };
            return Err(Denied::Refused(format!(
                "{what}: a call reaches public addresses only, unless config.toml's allow_private grants the address and port"
            )));
        }
        let mut failure = String::new();
        for (address, _) in reachable {
            match tokio::time::timeout(self.settings.connect_timeout, TcpStream::connect(address))
                .await
            {
                Ok(Ok(stream)) => {
                    // An address routed to this machine without being one of
                    // its interfaces' (a local route) shows here: the kernel
                    // answers from the address it was asked for.
                    if is_to_itself(&stream)
                        && self.grant.reaches(address, AddressClass::ThisHost).is_err()
                    {
                        return Err(Denied::Refused(format!(
                            "{target} reaches this machine ({}): a call reaches public addresses only, unless config.toml's allow_private grants the address and port",
                            address.ip()
                        )));
                    }
                    let _ = stream.set_nodelay(true);
                    self.record(|c| c.contact(target.to_string()));
                    return Ok(stream);
                }
                Ok(Err(e)) => failure = format!("{address}: {e}"),
                Err(_) => {
                    failure = format!(
                        "{address}: no answer in {:?}",
                        self.settings.connect_timeout
                    );
                }
            }
        }
        Err(Denied::Failed(format!(
            "could not connect to {target} ({failure})"
        )))
    }
}

/// A client connection's places under the call's and the host's bounds,
/// held until the connection and everything it opened (its tunnel, its
/// forwarded exchanges) are gone.
#[derive(Debug)]
struct Slot {
    _call: OwnedSemaphorePermit,
    _host: OwnedSemaphorePermit,
}

/// Accept the call's connections until its ticket drops.
async fn accept(listener: TcpListener, call: Arc<CallState>, total: Arc<Semaphore>) {
    let slots = Arc::new(Semaphore::new(call.settings.max_connections));
    let mut failing = false;
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => {
                failing = false;
                stream
            }
            Err(e) => {
                // Out of descriptors, most likely: give the calls a moment
                // to close some instead of spinning, and say so once.
                if !failing {
                    tracing::warn!("the egress proxy could not accept a connection: {e}");
                    failing = true;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let slot = match (
            Arc::clone(&slots).try_acquire_owned(),
            Arc::clone(&total).try_acquire_owned(),
        ) {
            (Ok(call), Ok(host)) => Arc::new(Slot {
                _call: call,
                _host: host,
            }),
            _ => {
                tracing::debug!("too many proxy connections; one more was closed");
                continue;
            }
        };
        let served = Arc::clone(&call);
        tokio::spawn(call.until_closed(serve(stream, served, slot)));
    }
}

async fn serve(stream: TcpStream, call: Arc<CallState>, slot: Arc<Slot>) {
    let _ = stream.set_nodelay(true);
    let head_timeout = call.settings.head_timeout;
    let service = service_fn(move |request| {
        let call = Arc::clone(&call);
        let slot = Arc::clone(&slot);
        async move { Ok::<_, Infallible>(handle(request, call, slot).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(head_timeout)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades()
        .await;
}

type ProxyBody = BoxBody<Bytes, hyper::Error>;

async fn handle(
    request: Request<Incoming>,
    call: Arc<CallState>,
    slot: Arc<Slot>,
) -> Response<ProxyBody> {
    if !call.authorized(request.headers()) {
        let mut answer = plain(
            StatusCode::PROXY_AUTHENTICATION_REQUIRED,
            "modhost egress proxy: this call's proxy URL carries the credentials; use it as given\n".into(),
        );
        answer.headers_mut().insert(
            header::PROXY_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"modhost\""),
        );
        return answer;
    }
    let target = match target_of(&request) {
        Ok(target) => target,
        Err(problem) => {
            return plain(
                StatusCode::BAD_REQUEST,
                format!("modhost egress proxy: {problem}\n"),
            );
        }
    };
    let upstream = match call.connect(&target).await {
        Ok(stream) => stream,
        Err(Denied::Refused(reason)) => {
            tracing::debug!(%target, %reason, "egress refused");
            call.record(|c| {
                c.refuse(Refusal {
                    host: target.to_string(),
                    reason: reason.clone(),
                });
            });
            return refused(&reason);
        }
        Err(Denied::Failed(problem)) => {
            return plain(
                StatusCode::BAD_GATEWAY,
                format!("modhost egress proxy: {problem}\n"),
            );
        }
    };
    if request.method() == Method::CONNECT {
        tokio::spawn(call.until_closed(async move {
            tunnel(request, upstream).await;
            drop(slot);
        }));
        return Response::new(empty());
    }
    forward(request, upstream, &target, &call, slot).await
}

/// Where a request asks to go.
fn target_of(request: &Request<Incoming>) -> Result<Target, String> {
    let uri = request.uri();
    if request.method() == Method::CONNECT {
        // Authority form only: `CONNECT http://...` names no tunnel.
        let authority = uri
            .authority()
            .filter(|_| uri.scheme().is_none() && uri.path_and_query().is_none())
            .ok_or("CONNECT names a host and a port (CONNECT example.org:443)")?;
        return Ok(Target::new(authority.host(), port_of(authority, 443)?));
    }
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => {
            return Err("an https:// URL goes through a tunnel (CONNECT host:443)".into());
        }
        Some(other) => {
            return Err(format!(
                "{other}:// is not proxied; http:// and CONNECT are"
            ));
        }
        None => {
            return Err(
                "this is an egress proxy: a request names an absolute http:// URL, or tunnels with CONNECT host:port"
                    .into(),
            );
        }
    }
    let authority = uri.authority().ok_or("the URL names no host")?;
    Ok(Target::new(authority.host(), port_of(authority, 80)?))
}

/// The port `authority` names, or `default`; a port that is no port (0,
/// past 65535, not a number) and credentials in the authority are refused
/// rather than read some other way.
fn port_of(authority: &hyper::http::uri::Authority, default: u16) -> Result<u16, String> {
    let text = authority.as_str();
    if text.contains('@') {
        return Err(format!(
            "{text:?} carries credentials; name the host alone (a server's credentials go in its headers)"
        ));
    }
    // Past an IPv6 literal's closing bracket, or the whole text.
    let tail = text.rsplit_once(']').map_or(text, |(_, tail)| tail);
    match tail.rsplit_once(':') {
        None => Ok(default),
        Some((_, port)) => port
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("{port:?} in {text:?} is not a port (1 to 65535)")),
    }
}

/// The `Host` header of a request forwarded to `target`: its host, and its
/// port unless it is HTTP's own.
fn host_header(target: &Target) -> Option<HeaderValue> {
    let text = if target.port == 80 {
        match target.literal() {
            Some(IpAddr::V6(ip)) => format!("[{ip}]"),
            _ => target.host.clone(),
        }
    } else {
        target.to_string()
    };
    HeaderValue::from_str(&text).ok()
}

/// Copy bytes both ways until either side closes.
async fn tunnel(request: Request<Incoming>, mut upstream: TcpStream) {
    let Ok(upgraded) = hyper::upgrade::on(request).await else {
        return;
    };
    // hyper hands back the client's own socket (the listener's connections
    // are plain TCP): the kernel then moves the bytes between the two
    // sockets itself. Without pipes (out of descriptors) the tunnel is
    // copied instead of refused.
    #[cfg(target_os = "linux")]
    let upgraded = match crate::splice::Pipes::new() {
        Ok(pipes) => match upgraded.downcast::<TokioIo<TcpStream>>() {
            Ok(parts) => {
                let client = parts.io.into_inner();
                let _ = crate::splice::relay(&client, &parts.read_buf, &mut upstream, pipes).await;
                return;
            }
            Err(upgraded) => upgraded,
        },
        Err(_) => upgraded,
    };
    let mut client = TokioIo::new(upgraded);
    let _ = tokio::io::copy_bidirectional_with_sizes(
        &mut client,
        &mut upstream,
        TUNNEL_BUFFER,
        TUNNEL_BUFFER,
    )
    .await;
}

/// Send an absolute-URI request to `upstream` in origin form, and its
/// answer back.
async fn forward(
    mut request: Request<Incoming>,
    upstream: TcpStream,
    target: &Target,
    call: &CallState,
    slot: Arc<Slot>,
) -> Response<ProxyBody> {
    let failed = |e: &dyn std::fmt::Display| {
        plain(
            StatusCode::BAD_GATEWAY,
            format!("modhost egress proxy: {target} did not answer: {e}\n"),
        )
    };
    let origin = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    *request.uri_mut() = match origin.parse::<Uri>() {
        Ok(uri) => uri,
        Err(e) => return failed(&e),
    };
    strip_hop_by_hop(request.headers_mut());
    if let Some(host) = host_header(target) {
        request.headers_mut().insert(header::HOST, host);
    }
    let (mut sender, connection) =
        match hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await {
            Ok(pair) => pair,
            Err(e) => return failed(&e),
        };
    tokio::spawn(call.until_closed(async move {
        let _ = connection.await;
        drop(slot);
    }));
    match sender.send_request(request).await {
        Ok(mut response) => {
            strip_hop_by_hop(response.headers_mut());
            response.map(BodyExt::boxed)
        }
        Err(e) => failed(&e),
    }
}

/// Remove the headers that are about one connection, not the message
/// (RFC 9110 7.6.1), the proxy's credentials above all: the token never
/// reaches a server.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        header::CONNECTION,
        header::PROXY_AUTHORIZATION,
        header::PROXY_AUTHENTICATE,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
    ] {
        headers.remove(name);
    }
    for name in ["proxy-connection", "keep-alive"] {
        headers.remove(name);
    }
}

fn empty() -> ProxyBody {
    Full::new(Bytes::new())
        .map_err(|never| match never {})
        .boxed()
}

fn plain(status: StatusCode, text: String) -> Response<ProxyBody> {
    let mut answer = Response::new(
        Full::new(Bytes::from(text))
            .map_err(|never| match never {})
            .boxed(),
    );
    *answer.status_mut() = status;
    answer.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    answer
}

/// A 403 whose header and body say why.
fn refused(reason: &str) -> Response<ProxyBody> {
    let mut answer = plain(
        StatusCode::FORBIDDEN,
        format!("modhost egress proxy: refused: {reason}\n"),
    );
    let printable: String = reason
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect();
    if let Ok(value) = HeaderValue::from_str(&printable) {
        answer
            .headers_mut()
            .insert(HeaderName::from_static(REFUSAL_HEADER), value);
    }
    answer
}

/// How long a list of this machine's addresses is used before it is asked
/// for again.
const OWN_ADDRESSES_LIFE: Duration = Duration::from_secs(1);

/// The addresses this machine holds, on every interface, at most
/// [`OWN_ADDRESSES_LIFE`] old (asking the kernel costs tens of
/// microseconds, on every connection otherwise). An address added since is
/// still caught after connecting ([`is_to_itself`]); on failure the list is
/// empty, and that check holds alone.
pub(crate) fn this_machine() -> Arc<[IpAddr]> {
    static KNOWN: Mutex<Option<(Instant, Arc<[IpAddr]>)>> = Mutex::new(None);
    let mut known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((asked, addresses)) = known.as_ref()
        && asked.elapsed() < OWN_ADDRESSES_LIFE
    {
        return Arc::clone(addresses);
    }
    let addresses: Arc<[IpAddr]> = if_addrs::get_if_addrs()
        .map(|interfaces| interfaces.into_iter().map(|i| i.ip()).collect())
        .unwrap_or_default();
    *known = Some((Instant::now(), Arc::clone(&addresses)));
    addresses
}

/// How the proxy sees `ip`: its range's class, but an address of this
/// machine (in `own`) whatever its range, and a range the operator
/// declared public (in `public`) as public.
pub(crate) fn class_of(ip: IpAddr, own: &[IpAddr], public: &[IpNet]) -> AddressClass {
    let ip = effective(ip);
    match classify(ip) {
        class @ (AddressClass::Loopback | AddressClass::Unspecified) => class,
        _ if own.iter().any(|o| effective(*o) == ip) => AddressClass::ThisHost,
        _ if public.iter().any(|r| r.contains(&ip)) => AddressClass::Public,
        class => class,
    }
}

/// Whether a connection is to this machine: the kernel answers a
/// connection to one of its own addresses from that same address.
fn is_to_itself(stream: &TcpStream) -> bool {
    match (stream.local_addr(), stream.peer_addr()) {
        (Ok(local), Ok(peer)) => effective(local.ip()) == effective(peer.ip()),
        _ => true,
    }
}

/// An IPv6 form carrying an IPv4 address as that address.
fn effective(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => embedded_v4(v6).map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// 128 random bits, in hex.
fn new_token() -> Result<String, EgressError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| EgressError::Token(e.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

//! Requests: one GET and its redirects, through the proxy the environment
//! names, and the body read no further than asked.
//!
//! Design decisions:
//!
//! - **ureq, with the CONNECT step of [`crate::tunnel`]**: ureq's TCP,
//!   rustls (ring, the bundled Mozilla roots: no certificate store to read
//!   inside the host's confinement) and HTTP/1.1, gzip decoded. The proxy
//!   is the one `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY` name (the host sets
//!   them all); without one, ureq connects directly.
//! - **Redirects are followed here, not by ureq**: each is checked like
//!   the caller's URL ([`crate::target::redirect`]) and sent as a request
//!   of its own, so the proxy checks its host again, and a refusal can say
//!   which redirect it was. At most [`MAX_REDIRECTS`].
//! - **One deadline for everything**: each request gets what is left of
//!   it as ureq's global timeout, which bounds the body's reading too.
//! - **Statuses are answers, not errors**: a 404 page is returned with its
//!   status; only the proxy's refusal (which never reaches this far as a
//!   response: it answers the CONNECT) is an error.

use std::io::Read;
use std::time::{Duration, Instant};

use ureq::unversioned::resolver::DefaultResolver;
use ureq::unversioned::transport::{Connector, RustlsConnector, TcpConnector};
use ureq::{Agent, Proxy};
use url::Url;

use crate::error::FetchError;
use crate::target;
use crate::tunnel::{Tunnel, TunnelError, tunnel_error};

/// The most redirects one fetch follows.
pub const MAX_REDIRECTS: usize = 10;

const USER_AGENT: &str = concat!("modhost-fetch/", env!("CARGO_PKG_VERSION"));

/// What a page is asked for as: readable things first.
const ACCEPT: &str = "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,text/*;q=0.8,*/*;q=0.5";

/// The HTTP client of one call.
#[derive(Debug)]
pub struct Client {
    agent: Agent,
}

/// The final response: its head, and its body still to read.
pub struct Response {
    pub url: Url,
    pub status: u16,
    pub content_type: Option<String>,
    /// The body's length, when the server said (and did not encode it).
    pub content_length: Option<u64>,
    body: ureq::BodyReader<'static>,
    budget: Duration,
    /// What has been read of the body.
    pub bytes: Vec<u8>,
    /// Whether the body has been read to its end.
    pub complete: bool,
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response")
            .field("url", &self.url)
            .field("status", &self.status)
            .field("content_type", &self.content_type)
            .field("read", &self.bytes.len())
            .field("complete", &self.complete)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client that tunnels through `proxy` (none: direct connections).
    pub fn new(proxy: Option<Proxy>) -> Client {
        let config = Agent::config_builder()
            .proxy(proxy)
            .max_redirects(0)
            .http_status_as_error(false)
            .user_agent(USER_AGENT)
            .accept(ACCEPT)
            .build();
        let connector =
            ().chain(Tunnel::default())
                .chain(TcpConnector::default())
                .chain(RustlsConnector::default());
        Client {
            agent: Agent::with_parts(config, connector, DefaultResolver::default()),
        }
    }

    /// The client of a call under modhost: the proxy from the environment.
    pub fn from_env() -> Client {
        Client::new(Proxy::try_from_env())
    }

    /// GET `url`, following redirects, finished by `deadline`.
    pub fn get(&self, url: Url, deadline: Instant) -> Result<Response, FetchError> {
        let started = Instant::now();
        let first = url.clone();
        let mut url = url;
        let mut redirected_from: Option<Url> = None;
        let mut redirects = 0;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let timed_out = |url: &Url| FetchError::Timeout {
                url: url.to_string(),
                budget: deadline.saturating_duration_since(started),
            };
            if left.is_zero() {
                return Err(timed_out(&url));
            }
            let response = self
                .agent
                .get(url.as_str())
                .config()
                .timeout_global(Some(left))
                .build()
                .call()
                .map_err(|e| request_error(e, &url, redirected_from.as_ref(), &timed_out))?;
            let status = response.status().as_u16();
            let header = |name: &str| {
                response
                    .headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(|v| v.trim().to_owned())
            };
            let location = header("location").filter(|_| is_redirect(status));
            if let Some(location) = location {
                if redirects == MAX_REDIRECTS {
                    return Err(FetchError::TooManyRedirects {
                        first: first.into(),
                        last: url.into(),
                        max: MAX_REDIRECTS,
                    });
                }
                let next =
                    target::redirect(&url, &location).map_err(|problem| FetchError::Redirect {
                        from: url.to_string(),
                        location: location.clone(),
                        problem,
                    })?;
                redirects += 1;
                redirected_from = Some(std::mem::replace(&mut url, next));
                continue;
            }
            let content_type = header("content-type").filter(|v| !v.is_empty());
            // Of an encoded (gzip) body the length is the encoded one,
            // which says nothing about the page's size.
            let content_length = header("content-length")
                .filter(|_| header("content-encoding").is_none())
                .and_then(|v| v.parse().ok());
            return Ok(Response {
                status,
                content_type,
                content_length,
                body: response.into_body().into_reader(),
                budget: deadline.saturating_duration_since(started),
                bytes: Vec::new(),
                complete: false,
                url,
            });
        }
    }
}

impl Response {
    /// Read the body until `bytes` holds `total` bytes or it ends.
    pub fn fill(&mut self, total: usize) -> Result<(), FetchError> {
        while !self.complete && self.bytes.len() < total {
            let want = (total - self.bytes.len()) as u64;
            let read = (&mut self.body)
                .take(want)
                .read_to_end(&mut self.bytes)
                .map_err(|e| self.read_error(&e))?;
            if read == 0 {
                self.complete = true;
            }
        }
        Ok(())
    }

    /// Read up to `limit` bytes; `complete` then says whether that was all.
    pub fn read_up_to(&mut self, limit: usize) -> Result<(), FetchError> {
        self.fill(limit)?;
        if !self.complete {
            // One byte more tells a body of exactly `limit` bytes from a
            // longer one; it is not kept.
            let mut probe = [0u8; 1];
            let read = self
                .body
                .read(&mut probe)
                .map_err(|e| self.read_error(&e))?;
            self.complete = read == 0;
        }
        Ok(())
    }

    fn read_error(&self, error: &std::io::Error) -> FetchError {
        if error.kind() == std::io::ErrorKind::TimedOut {
            return FetchError::Timeout {
                url: self.url.to_string(),
                budget: self.budget,
            };
        }
        FetchError::Connection {
            url: self.url.to_string(),
            detail: format!("reading the page: {error}"),
        }
    }
}

fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// A failed request as a [`FetchError`].
fn request_error(
    error: ureq::Error,
    url: &Url,
    redirected_from: Option<&Url>,
    timed_out: &dyn Fn(&Url) -> FetchError,
) -> FetchError {
    if let Some(tunnel) = tunnel_error(&error) {
        return match tunnel.clone() {
            TunnelError::Refused { target, reason } => FetchError::Refused {
                url: url.to_string(),
                redirected_from: redirected_from.map(Url::to_string),
                target,
                reason,
            },
            tunnel => FetchError::Proxy {
                url: url.to_string(),
                tunnel,
            },
        };
    }
    let timeout = timed_out(url);
    let url = url.to_string();
    match error {
        ureq::Error::Timeout(_) => timeout,
        ureq::Error::Io(e) if e.kind() == std::io::ErrorKind::TimedOut => timeout,
        ureq::Error::Tls(detail) => FetchError::Tls {
            url,
            detail: detail.to_owned(),
        },
        ureq::Error::Rustls(e) => FetchError::Tls {
            url,
            detail: e.to_string(),
        },
        ureq::Error::HostNotFound => FetchError::Connection {
            url,
            detail: "no such host".to_owned(),
        },
        ureq::Error::Io(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            FetchError::Connection {
                url,
                detail: format!(
                    "connecting: {e}: this call has no network of its own (the host's egress proxy is the only way out, and none was given)"
                ),
            }
        }
        ureq::Error::Io(e) => FetchError::Connection {
            url,
            detail: format!("connecting: {e}"),
        },
        other => FetchError::Connection {
            url,
            detail: other.to_string(),
        },
    }
}

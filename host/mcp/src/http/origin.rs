//! Which browser origins may call the server: the `Origin` check every
//! revision of the streamable HTTP transport requires ("Servers MUST
//! validate the Origin header on all incoming connections to prevent DNS
//! rebinding attacks"; invalid: 403).
//!
//! Design decisions:
//!
//! - **No `Origin`, no browser.** Browsers send `Origin` on every POST (and
//!   on cross-origin requests of any method); MCP clients that are programs
//!   send none. A request without one is not a page's request and passes
//!   to authentication like any other.
//! - **Allowed: the operator's list, and the loopback on a loopback bind.**
//!   `[http] allowed_origins` entries match exactly (scheme, host and port;
//!   default ports and letter case normalized). On a server bound to the
//!   loopback, pages served from the loopback itself (`localhost`,
//!   `127.0.0.0/8`, `[::1]`, any port) may call it: that is the local
//!   developer's own tooling, and a DNS-rebinding page never has such an
//!   origin (its origin is the attacker's name, whatever it resolves to).
//! - **Everything else is refused,** `null` (sandboxed frames, `file:`
//!   pages) included, with a JSON-RPC error saying which key allows it.
//! - **On a loopback bind, `Host` is checked too, on every route**
//!   ([`HostPolicy`]). A page whose name was rebound to 127.0.0.1 is
//!   same-origin with the server, and a same-origin `GET` carries no
//!   `Origin`; its `Host` is the attacker's name. Allowed: `localhost`, a
//!   loopback address (`127.0.0.1`, `[::1]`, ...), with any port or none,
//!   and the hosts `[http] canonical_url` and `allowed_origins` name (a
//!   proxy in front may keep the public name). Anything else, or none, is
//!   421. Beyond the loopback every caller authenticates, and a proxy's
//!   host names are its own business, so `Host` is not checked there.

use std::net::IpAddr;

use http::HeaderMap;

/// The `Origin` policy of one server.
#[derive(Debug, Clone)]
pub(crate) struct OriginPolicy {
    allowed: Vec<String>,
    loopback_bind: bool,
}

impl OriginPolicy {
    /// `allowed` (as `[http] allowed_origins` writes them), and whether the
    /// server listens on the loopback only.
    pub(crate) fn new(allowed: &[String], loopback_bind: bool) -> OriginPolicy {
        OriginPolicy {
            allowed: allowed.iter().filter_map(|o| normalized(o)).collect(),
            loopback_bind,
        }
    }

    /// `Ok` when the request may proceed; the refusal's message when its
    /// `Origin` is not allowed.
    pub(crate) fn check(&self, headers: &HeaderMap) -> Result<(), String> {
        let mut values = headers.get_all(http::header::ORIGIN).iter();
        let Some(value) = values.next() else {
            return Ok(());
        };
        if values.next().is_some() {
            return Err("Forbidden: more than one Origin header".into());
        }
        let shown = String::from_utf8_lossy(value.as_bytes()).into_owned();
        let Some(origin) = value.to_str().ok().and_then(normalized) else {
            return Err(format!(
                "Forbidden: Origin {shown:?} may not call this server (a page must be served \
                 from an origin listed in [http] allowed_origins of config.toml)"
            ));
        };
        if self.allowed.contains(&origin) || (self.loopback_bind && is_loopback_origin(&origin)) {
            return Ok(());
        }
        Err(format!(
            "Forbidden: Origin {shown:?} may not call this server; to let pages from it call \
             this server, add it to [http] allowed_origins in config.toml"
        ))
    }
}

/// Which `Host` names reach a server bound to the loopback.
#[derive(Debug, Clone)]
pub(crate) struct HostPolicy {
    /// `None`: not checked (not a loopback bind).
    allowed: Option<Vec<String>>,
}

impl HostPolicy {
    /// The policy of a server bound to the loopback or not, whose `[http]`
    /// names `canonical_url` and `allowed_origins`.
    pub(crate) fn new(
        loopback_bind: bool,
        canonical_url: Option<&str>,
        allowed_origins: &[String],
    ) -> HostPolicy {
        if !loopback_bind {
            return HostPolicy { allowed: None };
        }
        let named = canonical_url
            .into_iter()
            .map(|url| {
                let authority = url.split_once("://").map_or(url, |(_, rest)| rest);
                authority.split(['/', '?', '#']).next().unwrap_or_default()
            })
            .chain(allowed_origins.iter().map(|origin| {
                origin
                    .trim()
                    .split_once("://")
                    .map_or(origin.as_str(), |(_, rest)| rest)
            }))
            .filter_map(host_name)
            .collect();
        HostPolicy {
            allowed: Some(named),
        }
    }

    /// `Ok` when a request with `host` (its `Host` header) may be served;
    /// why not, otherwise.
    pub(crate) fn check(&self, host: Option<&str>) -> Result<(), String> {
        let Some(allowed) = &self.allowed else {
            return Ok(());
        };
        let Some(sent) = host else {
            return Err("Misdirected Request: a request to this server names its Host".into());
        };
        let name = host_name(sent);
        let passes = name.as_deref().is_some_and(|name| {
            name == "localhost"
                || name
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<IpAddr>()
                    .is_ok_and(|address| address.is_loopback())
                || allowed.iter().any(|a| a == name)
        });
        if passes {
            return Ok(());
        }
        Err(format!(
            "Misdirected Request: Host {sent:?} is not a name of this server (it listens on the \
             loopback: use localhost or 127.0.0.1, or name the host in [http] canonical_url or \
             allowed_origins of config.toml)"
        ))
    }
}

/// The host of `authority` (`host[:port]`, `[v6][:port]`), lowercased,
/// without its port; `None` when malformed.
fn host_name(authority: &str) -> Option<String> {
    let authority = authority.trim().to_ascii_lowercase();
    if authority.is_empty() || authority.contains(['/', '@', ' ', '?', '#']) {
        return None;
    }
    let (host, port) = if authority.starts_with('[') {
        let (v6, after) = authority.split_once(']')?;
        (format!("{v6}]"), after.strip_prefix(':'))
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host.to_owned(), Some(port)),
            None => (authority.clone(), None),
        }
    };
    if let Some(port) = port
        && (port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    (!host.is_empty() && host != "[]").then_some(host)
}

/// `scheme://host[:port]` lowercased, the scheme's default port left out;
/// `None` when `origin` is not an `http`/`https` origin.
fn normalized(origin: &str) -> Option<String> {
    let origin = origin.trim();
    let (scheme, rest) = origin.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => "80",
        "https" => "443",
        _ => return None,
    };
    if rest.is_empty() || rest.contains(['/', '?', '#', '@', ' ']) {
        return None;
    }
    let rest = rest.to_ascii_lowercase();
    // `[v6]:port`, `[v6]`, `host:port` or `host`.
    let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
        let (address, after) = v6.split_once(']')?;
        match after {
            "" => (format!("[{address}]"), None),
            _ => (format!("[{address}]"), Some(after.strip_prefix(':')?)),
        }
    } else {
        match rest.rsplit_once(':') {
            Some((host, port)) => (host.to_owned(), Some(port)),
            None => (rest.clone(), None),
        }
    };
    if host.is_empty() {
        return None;
    }
    match port {
        Some(port) if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) => None,
        Some(port) if port != default_port => Some(format!("{scheme}://{host}:{port}")),
        _ => Some(format!("{scheme}://{host}")),
    }
}

/// Whether a normalized origin names the loopback.
fn is_loopback_origin(origin: &str) -> bool {
    let Some((_, rest)) = origin.split_once("://") else {
        return false;
    };
    let host = match rest.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => rest.split(':').next().unwrap_or_default(),
    };
    host == "localhost"
        || host
            .parse::<IpAddr>()
            .is_ok_and(|address| address.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn with_origin(origin: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::ORIGIN, HeaderValue::from_str(origin).unwrap());
        headers
    }

    #[test]
    fn no_origin_passes_and_listed_origins_match_exactly() {
        let policy = OriginPolicy::new(&["https://App.Example.com:443".into()], false);
        assert_eq!(policy.check(&HeaderMap::new()), Ok(()));
        assert_eq!(
            policy.check(&with_origin("https://app.example.com")),
            Ok(())
        );
        for refused in [
            "https://app.example.com:8443",
            "http://app.example.com",
            "https://evil.example.com",
            "https://app.example.com.evil.net",
            "null",
            "http://localhost:3000",
            "file://",
        ] {
            let refusal = policy.check(&with_origin(refused)).unwrap_err();
            assert!(refusal.contains("allowed_origins"), "{refused}: {refusal}");
        }
    }

    #[test]
    fn loopback_pages_pass_only_on_a_loopback_bind() {
        let local = OriginPolicy::new(&[], true);
        for allowed in [
            "http://localhost:3000",
            "http://127.0.0.1:8750",
            "http://127.1.2.3",
            "https://[::1]:9000",
        ] {
            assert_eq!(local.check(&with_origin(allowed)), Ok(()), "{allowed}");
        }
        for refused in [
            "http://localhost.evil.net",
            "http://evil.net",
            "http://0.0.0.0",
            "http://[::ffff:10.0.0.1]",
        ] {
            assert!(local.check(&with_origin(refused)).is_err(), "{refused}");
        }
        let open = OriginPolicy::new(&[], false);
        assert!(open.check(&with_origin("http://localhost:3000")).is_err());
    }

    #[test]
    fn two_origins_are_refused() {
        let mut headers = with_origin("http://localhost");
        headers.append(
            http::header::ORIGIN,
            HeaderValue::from_static("http://evil.net"),
        );
        assert!(OriginPolicy::new(&[], true).check(&headers).is_err());
    }

    #[test]
    fn a_loopback_bind_serves_its_own_names_and_the_configured_ones() {
        let policy = HostPolicy::new(
            true,
            Some("https://mcp.example.com/mcp"),
            &["https://App.example.com:8443".into()],
        );
        for allowed in [
            "localhost",
            "localhost:8750",
            "127.0.0.1",
            "127.0.0.1:8750",
            "[::1]",
            "[::1]:8750",
            "mcp.example.com",
            "MCP.example.com:443",
            "app.example.com:8443",
        ] {
            assert_eq!(policy.check(Some(allowed)), Ok(()), "{allowed}");
        }
        for refused in [
            "rebind.attacker.example:8750",
            "localhost.attacker.example",
            "127.0.0.1.nip.io",
            "0.0.0.0",
            "",
            "localhost:port",
            "user@localhost",
        ] {
            assert!(policy.check(Some(refused)).is_err(), "{refused}");
        }
        assert!(policy.check(None).is_err());
        let open = HostPolicy::new(false, None, &[]);
        assert_eq!(open.check(Some("anything.example")), Ok(()));
        assert_eq!(open.check(None), Ok(()));
    }
}

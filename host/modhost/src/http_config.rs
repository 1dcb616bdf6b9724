//! `[http]` in `config.toml`: how `modhost mcp --http` is reached and who
//! may call it.
//!
//! ```toml
//! [http]
//! canonical_url = "https://mcp.example.com/mcp"  # the resource; an OAuth token's audience must be it
//! allowed_origins = ["https://app.example.com"]  # browsers' Origin allowlist (loopback origins pass on a loopback bind)
//! signing_key_file = "/run/secrets/modhost-signing-key"  # shared by replicas; MODHOST_SIGNING_KEY_FILE overrides
//! max_concurrent_calls = 64
//! max_open_streams = 1024
//! max_body_bytes = 4194304
//! header_timeout_secs = 10         # slowloris: headers not complete by then close the connection
//! write_timeout_secs = 30          # a client not reading for this long is dropped, and its call
//! keepalive_secs = 15              # an SSE comment on a quiet stream this often
//! drain_timeout_secs = 30          # SIGTERM: how long running calls may take to finish
//!
//! [[http.tokens]]                  # a static bearer token, stored hashed (`modhost token new` prints these lines)
//! principal = "ci-bot"
//! sha256 = "<64 hex digits: sha256 of the token>"
//! scopes = ["mcp:tools"]
//!
//! [http.oauth]                     # an OAuth 2.1 resource server: JWT access tokens
//! issuer = "https://auth.example.com"
//! jwks_uri = "https://auth.example.com/.well-known/jwks.json"
//! authorization_servers = ["https://auth.example.com"]  # default: [issuer]
//! required_scopes = ["mcp:tools"]  # a token without them: 403 insufficient_scope
//! scopes_supported = ["mcp:tools", "files:write"]
//! jwks_ca_file = "/etc/ssl/internal-ca.pem"  # optional: trust these roots (only) for jwks_uri
//! leeway_seconds = 30              # clock skew allowed on exp and nbf (at most 300)
//!
//! [http.implied_scopes]            # a broader scope grants narrower ones
//! "mcp:admin" = ["mcp:tools", "files:write"]
//! ```
//!
//! Design decisions:
//!
//! - **Static tokens are stored as digests.** `config.toml` is read by
//!   whoever reviews or deploys it (a ConfigMap, a repository): it holds
//!   the sha256 of each token, never the token. A token is 256 random bits
//!   (`modhost token new`), so its digest is as good as a password hash
//!   and needs no salt or slow hash. The server compares digests in
//!   constant time.
//! - **A principal names one caller.** Principals are unique, made of
//!   letters, digits and `-_.@`, and never start with `local:` or
//!   `oauth:`: those name the local user and OAuth subjects
//!   (`oauth:<issuer>#<subject>`), and a token named like them could pass
//!   for either in an approval rule or the audit log. Two tokens with one
//!   digest would be one token with two names: refused too.
//! - **OAuth is a resource server only.** modhost issues no token and runs
//!   no login: it checks JWT access tokens against the authorization
//!   server's published keys (`jwks_uri`, HTTPS only: the keys decide who
//!   is anyone) for issuer, audience (`canonical_url`, RFC 8707) and time,
//!   and tells clients where to get one (RFC 9728 metadata).
//! - **`canonical_url` is HTTPS, or plain HTTP on the loopback.** It is the
//!   audience tokens are minted for and the base of the metadata URL; a
//!   bearer token sent over plain HTTP to another machine is a token given
//!   away. On the loopback (tests, a local reverse proxy) HTTP is allowed.
//! - **Scope hierarchies are the operator's to state.** The MCP
//!   specification asks a server to honour "a broader scope implies
//!   narrower ones"; which scope is broader is the authorization server's
//!   convention, so `[http.implied_scopes]` says it, and a caller holds the
//!   closure of what its token names.
//! - **Checked at load, each problem naming its key and the fix,** like
//!   every other section: a typo in `[http]` stops the host rather than
//!   leave a server open or shut for no visible reason.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv6Addr};
use std::path::PathBuf;

use serde::Deserialize;

/// The environment variable that overrides `signing_key_file`.
pub const SIGNING_KEY_FILE_ENV: &str = "MODHOST_SIGNING_KEY_FILE";

/// Principal prefixes only the host gives out: the local user
/// (`local:<user>`) and OAuth subjects (`oauth:<issuer>#<subject>`).
pub const RESERVED_PRINCIPAL_PREFIXES: [&str; 2] = ["local:", "oauth:"];

/// The longest principal name a static token may have.
pub const MAX_PRINCIPAL_LEN: usize = 64;

/// The longest scope accepted.
pub const MAX_SCOPE_LEN: usize = 128;

/// The most clock skew `leeway_seconds` may allow.
pub const MAX_LEEWAY_SECONDS: u64 = 300;

/// `[http]` in `config.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// The server's canonical URL (RFC 8707 resource identifier): the
    /// audience an OAuth token must name, and the base of the protected
    /// resource metadata's URL. Required with `[http.oauth]`.
    pub canonical_url: Option<String>,
    /// Origins (`scheme://host[:port]`) a browser request may come from.
    pub allowed_origins: Vec<String>,
    /// The key replicas share to seal approval states and sessions
    /// ([`SIGNING_KEY_FILE_ENV`] overrides it; see [`Self::signing_key_path`]).
    pub signing_key_file: Option<PathBuf>,
    /// The most `tools/call` requests served at once.
    pub max_concurrent_calls: usize,
    /// The most response streams open at once.
    pub max_open_streams: usize,
    /// The largest request body read.
    pub max_body_bytes: u64,
    /// Seconds a client may take to send a request's headers (slowloris).
    pub header_timeout_secs: u64,
    /// Seconds a write to a client may make no progress before its
    /// connection (and its call) is dropped.
    pub write_timeout_secs: u64,
    /// Seconds between keep-alive comments on a quiet SSE stream.
    pub keepalive_secs: u64,
    /// Seconds a drain (SIGTERM) waits for running calls to finish.
    pub drain_timeout_secs: u64,
    /// Static bearer tokens (`[[http.tokens]]`).
    pub tokens: Vec<StaticToken>,
    /// The OAuth 2.1 resource server (`[http.oauth]`).
    pub oauth: Option<OAuthConfig>,
    /// Broader scope → the narrower scopes it grants.
    pub implied_scopes: BTreeMap<String, Vec<String>>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            canonical_url: None,
            allowed_origins: Vec::new(),
            signing_key_file: None,
            max_concurrent_calls: 64,
            max_open_streams: 1024,
            max_body_bytes: 4 * 1024 * 1024,
            header_timeout_secs: 10,
            write_timeout_secs: 30,
            keepalive_secs: 15,
            drain_timeout_secs: 30,
            tokens: Vec::new(),
            oauth: None,
            implied_scopes: BTreeMap::new(),
        }
    }
}

/// `[[http.tokens]]`: one static bearer token.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticToken {
    /// Who a request with this token is from.
    pub principal: String,
    /// The token's sha256, 64 hex digits.
    pub sha256: String,
    /// The scopes it grants.
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// `[http.oauth]`: JWT access tokens from an OAuth 2.1 authorization server.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    /// The `iss` a token must carry, exactly.
    pub issuer: String,
    /// Where the authorization server publishes its signing keys (HTTPS).
    pub jwks_uri: String,
    /// The authorization servers named in the protected resource metadata
    /// (empty: the issuer; see [`Self::advertised_authorization_servers`]).
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// Scopes every token must hold (else 403 `insufficient_scope`).
    #[serde(default)]
    pub required_scopes: Vec<String>,
    /// `scopes_supported` of the protected resource metadata.
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    /// A PEM file of the roots trusted for `jwks_uri` instead of the web's
    /// (an internal authorization server's CA).
    #[serde(default)]
    pub jwks_ca_file: Option<PathBuf>,
    /// Clock skew allowed on `exp` and `nbf`, in seconds.
    #[serde(default = "default_leeway_seconds")]
    pub leeway_seconds: u64,
}

fn default_leeway_seconds() -> u64 {
    30
}

impl OAuthConfig {
    /// The metadata's `authorization_servers`: as configured, else the issuer.
    pub fn advertised_authorization_servers(&self) -> Vec<String> {
        if self.authorization_servers.is_empty() {
            vec![self.issuer.clone()]
        } else {
            self.authorization_servers.clone()
        }
    }
}

impl HttpConfig {
    /// Whether any caller authentication is configured.
    pub fn has_auth(&self) -> bool {
        !self.tokens.is_empty() || self.oauth.is_some()
    }

    /// The signing key's file: `MODHOST_SIGNING_KEY_FILE` when set and not
    /// empty, else `signing_key_file`.
    pub fn signing_key_path(&self) -> Option<PathBuf> {
        match std::env::var_os(SIGNING_KEY_FILE_ENV) {
            Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
            _ => self.signing_key_file.clone(),
        }
    }

    /// `scopes` with every scope they imply (`[http.implied_scopes]`),
    /// followed transitively.
    pub fn scope_closure<I: IntoIterator<Item = String>>(&self, scopes: I) -> BTreeSet<String> {
        let mut held: BTreeSet<String> = scopes.into_iter().collect();
        let mut pending: Vec<String> = held.iter().cloned().collect();
        while let Some(scope) = pending.pop() {
            for narrower in self.implied_scopes.get(&scope).into_iter().flatten() {
                if held.insert(narrower.clone()) {
                    pending.push(narrower.clone());
                }
            }
        }
        held
    }

    /// What is wrong with `[http]`, each naming its key and the fix.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(url) = &self.canonical_url
            && let Err(why) = check_canonical_url(url)
        {
            problems.push(format!("[http] canonical_url = {url:?}: {why}"));
        }
        for origin in &self.allowed_origins {
            if let Err(why) = check_origin(origin) {
                problems.push(format!("[http] allowed_origins entry {origin:?}: {why}"));
            }
        }
        if let Some(path) = &self.signing_key_file
            && !path.is_absolute()
        {
            problems.push(format!(
                "[http] signing_key_file = {:?}: the path must be absolute",
                path.display().to_string()
            ));
        }
        for (name, value) in [
            ("max_concurrent_calls", self.max_concurrent_calls as u64),
            ("max_open_streams", self.max_open_streams as u64),
            ("max_body_bytes", self.max_body_bytes),
        ] {
            if value == 0 {
                problems.push(format!(
                    "[http] {name} = 0 would refuse every request; leave it out for the default"
                ));
            }
        }
        self.token_problems(&mut problems);
        if let Some(oauth) = &self.oauth {
            oauth_problems(oauth, self.canonical_url.is_some(), &mut problems);
        }
        for (broad, narrower) in &self.implied_scopes {
            for scope in std::iter::once(broad).chain(narrower) {
                if let Err(why) = check_scope(scope) {
                    problems.push(format!("[http.implied_scopes] {broad:?}: {scope:?} {why}"));
                }
            }
        }
        problems
    }

    fn token_problems(&self, problems: &mut Vec<String>) {
        let mut principals = BTreeSet::new();
        let mut digests = BTreeSet::new();
        for (index, token) in self.tokens.iter().enumerate() {
            let place = format!(
                "[[http.tokens]] #{} (principal {:?})",
                index + 1,
                token.principal
            );
            if let Err(why) = check_principal(&token.principal) {
                problems.push(format!("{place}: {why}"));
            } else if !principals.insert(token.principal.as_str()) {
                problems.push(format!(
                    "{place}: a second token with this principal; each token names its own caller \
                     (rotate by replacing the line, or give the new token another name)"
                ));
            }
            if !is_sha256_hex(&token.sha256) {
                problems.push(format!(
                    "{place}: sha256 must be 64 hex digits, the sha256 of the token; \
                     `modhost token new --principal {}` prints the line",
                    token.principal
                ));
            } else if !digests.insert(token.sha256.to_ascii_lowercase()) {
                problems.push(format!(
                    "{place}: the same sha256 as an earlier token: one token cannot name two callers"
                ));
            }
            for scope in &token.scopes {
                if let Err(why) = check_scope(scope) {
                    problems.push(format!("{place}: scope {scope:?} {why}"));
                }
            }
        }
    }
}

fn oauth_problems(oauth: &OAuthConfig, has_canonical_url: bool, problems: &mut Vec<String>) {
    if !has_canonical_url {
        problems.push(
            "[http.oauth] needs [http] canonical_url: a token's audience must name this server \
             (RFC 8707); set it to the URL clients use, such as \"https://mcp.example.com/mcp\""
                .into(),
        );
    }
    if let Err(why) = check_https_url(&oauth.issuer) {
        problems.push(format!("[http.oauth] issuer = {:?}: {why}", oauth.issuer));
    }
    if let Err(why) = check_https_url(&oauth.jwks_uri) {
        problems.push(format!(
            "[http.oauth] jwks_uri = {:?}: {why}",
            oauth.jwks_uri
        ));
    }
    for server in &oauth.authorization_servers {
        if let Err(why) = check_https_url(server) {
            problems.push(format!(
                "[http.oauth] authorization_servers entry {server:?}: {why}"
            ));
        }
    }
    for (key, scopes) in [
        ("required_scopes", &oauth.required_scopes),
        ("scopes_supported", &oauth.scopes_supported),
    ] {
        for scope in scopes {
            if let Err(why) = check_scope(scope) {
                problems.push(format!("[http.oauth] {key} entry {scope:?} {why}"));
            }
        }
    }
    if oauth.scopes_supported.iter().any(|s| s == "offline_access") {
        problems.push(
            "[http.oauth] scopes_supported lists \"offline_access\": a refresh token is not \
             something this server needs (the MCP specification asks servers not to list it); remove it"
                .into(),
        );
    }
    if let Some(path) = &oauth.jwks_ca_file
        && !path.is_absolute()
    {
        problems.push(format!(
            "[http.oauth] jwks_ca_file = {:?}: the path must be absolute",
            path.display().to_string()
        ));
    }
    if oauth.leeway_seconds > MAX_LEEWAY_SECONDS {
        problems.push(format!(
            "[http.oauth] leeway_seconds = {}: at most {MAX_LEEWAY_SECONDS}; a larger skew keeps \
             expired tokens working; fix the clocks instead (NTP)",
            oauth.leeway_seconds
        ));
    }
}

/// Whether `name` may name a static token's caller; the reason if not.
pub fn check_principal(name: &str) -> Result<(), String> {
    if let Some(prefix) = RESERVED_PRINCIPAL_PREFIXES
        .iter()
        .find(|prefix| name.starts_with(*prefix))
    {
        return Err(format!(
            "principals starting with {prefix:?} are reserved (the local user, OAuth subjects); choose another name"
        ));
    }
    if name.is_empty() || name.len() > MAX_PRINCIPAL_LEN {
        return Err(format!(
            "a principal is 1 to {MAX_PRINCIPAL_LEN} characters"
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
    {
        return Err("a principal is letters, digits, '-', '_', '.' and '@'".into());
    }
    Ok(())
}

/// Whether `scope` is an OAuth scope token (RFC 6749 §3.3: printable
/// ASCII but space, `"` and `\`); the reason if not.
pub fn check_scope(scope: &str) -> Result<(), String> {
    if scope.is_empty() || scope.len() > MAX_SCOPE_LEN {
        return Err(format!("is not a scope: 1 to {MAX_SCOPE_LEN} characters"));
    }
    if !scope.bytes().all(is_scope_byte) {
        return Err(
            "is not a scope: printable ASCII without spaces, '\"' or '\\' (RFC 6749)".into(),
        );
    }
    Ok(())
}

/// A byte of an RFC 6749 scope token.
pub fn is_scope_byte(b: u8) -> bool {
    matches!(b, 0x21 | 0x23..=0x5B | 0x5D..=0x7E)
}

fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The parts of an absolute `http`/`https` URL these checks look at.
#[derive(Debug, PartialEq, Eq)]
struct UrlParts<'a> {
    https: bool,
    host: &'a str,
    path: &'a str,
    query: bool,
    fragment: bool,
}

/// Split an absolute `http(s)://host[:port][/path][?query][#fragment]`.
fn split_url(url: &str) -> Result<UrlParts<'_>, String> {
    if url.bytes().any(|b| b <= b' ' || b == 0x7F) || !url.is_ascii() {
        return Err("a URL has no spaces, control or non-ASCII characters".into());
    }
    let (scheme, rest) = url
        .split_once("://")
        .ok_or("an absolute URL is needed, starting with https://")?;
    let https = if scheme.eq_ignore_ascii_case("https") {
        true
    } else if scheme.eq_ignore_ascii_case("http") {
        false
    } else {
        return Err(format!("the scheme {scheme:?} is not http or https"));
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if authority.contains('@') {
        return Err("a URL here carries no user name or password".into());
    }
    let (host, port) = if let Some(inner) = authority.strip_prefix('[') {
        let (address, after) = inner.split_once(']').ok_or("an unclosed '[' in the host")?;
        address
            .parse::<Ipv6Addr>()
            .map_err(|_| format!("{address:?} is not an IPv6 address"))?;
        let port = match after {
            "" => None,
            after => Some(
                after
                    .strip_prefix(':')
                    .ok_or("after ']' only a :port may follow")?,
            ),
        };
        (&authority[..address.len() + 2], port)
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty()
        || !(host.starts_with('[')
            || host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.'))
    {
        return Err(format!("{host:?} is not a host name"));
    }
    if let Some(port) = port
        && !(port.bytes().all(|b| b.is_ascii_digit()) && port.parse::<u16>().is_ok_and(|p| p != 0))
    {
        return Err(format!("{port:?} is not a port"));
    }
    let (before_fragment, fragment) = match tail.split_once('#') {
        Some((before, _)) => (before, true),
        None => (tail, false),
    };
    let (path, query) = match before_fragment.split_once('?') {
        Some((path, _)) => (path, true),
        None => (before_fragment, false),
    };
    Ok(UrlParts {
        https,
        host,
        path,
        query,
        fragment,
    })
}

/// Whether `host` (as in a URL) is this machine's loopback.
pub fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn check_https_url(url: &str) -> Result<(), String> {
    let parts = split_url(url)?;
    if !parts.https {
        return Err(
            "must be https://: an authorization server's answers decide who is let in, \
             and over plain HTTP anyone on the path writes them"
                .into(),
        );
    }
    if parts.fragment {
        return Err("a URL here has no #fragment".into());
    }
    Ok(())
}

fn check_canonical_url(url: &str) -> Result<(), String> {
    let parts = split_url(url)?;
    if !parts.https && !is_loopback_host(parts.host) {
        return Err(
            "must be https:// (plain http:// only on the loopback): bearer tokens sent in the clear \
             to another machine are tokens given away; put a TLS proxy in front and name its URL"
                .into(),
        );
    }
    if parts.fragment || parts.query {
        return Err(
            "the canonical URL has no ?query or #fragment (RFC 8707): name the MCP endpoint, \
             such as \"https://mcp.example.com/mcp\""
                .into(),
        );
    }
    if parts.path.ends_with('/') && parts.path != "/" {
        return Err(format!(
            "drop the trailing '/': {:?} (clients name the resource without it)",
            url.trim_end_matches('/')
        ));
    }
    Ok(())
}

fn check_origin(origin: &str) -> Result<(), String> {
    let parts = split_url(origin)?;
    if !parts.path.is_empty() || parts.query || parts.fragment {
        return Err(
            "an origin is scheme://host[:port], with no path: such as \"https://app.example.com\""
                .into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests;

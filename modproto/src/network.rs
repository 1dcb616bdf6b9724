//! Where a capability may connect: `effects.network`.
//!
//! ```json
//! "network": false                                   // none (also: absent)
//! "network": true                                    // any public host
//! "network": ["api.github.com:443", "*.example.org"] // exactly these
//! ```
//!
//! An entry is `NAME[:PORT]`, `*.NAME[:PORT]`, `IPV4[:PORT]` or
//! `[IPV6][:PORT]`. Without a port an entry means port 443 ([`DEFAULT_PORT`]):
//! the declaration is of HTTPS services, and plain HTTP on port 80 has to be
//! asked for by name (`example.org:80`). A name is matched without regard to
//! case and to one trailing dot; `*.example.org` matches every name that ends
//! in `.example.org` (`a.example.org`, `a.b.example.org`), never
//! `example.org` itself, which needs an entry of its own.
//!
//! Design decisions:
//!
//! - **The raw entries are kept.** [`Network::Hosts`] holds the strings as the
//!   module wrote them, so a descriptor with a malformed entry still parses
//!   and the conformance kit can name the entry and suggest a fix
//!   ([`HostPattern::parse`] says what is wrong). The host refuses such a
//!   module; it never guesses what an entry meant.
//! - **A name, not an address, is what a module declares.** Whether the
//!   address a name resolves to may be reached is the host's decision (public
//!   addresses only, unless the operator grants one), so a declaration cannot
//!   open the operator's loopback or private network, whatever it names.
//! - **`true` stays.** It is readable and honest ("any public host"); a
//!   host list is always narrower, which is what the no-weakening rules
//!   compare ([`Network::covers`]).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};

/// The port an entry without one means.
pub const DEFAULT_PORT: u16 = 443;

/// `effects.network`: where a capability may connect.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Network {
    /// No network at all (`false`, or the key absent).
    #[default]
    None,
    /// Any public host, any port (`true`).
    AnyPublic,
    /// Exactly these hosts (the entries as written; see [`HostPattern`]).
    Hosts(Vec<String>),
}

impl Network {
    /// Whether the capability may connect anywhere (an empty host list is
    /// no network).
    pub fn is_used(&self) -> bool {
        match self {
            Network::None => false,
            Network::AnyPublic => true,
            Network::Hosts(hosts) => !hosts.is_empty(),
        }
    }

    /// The entries that do not parse, with what is wrong with each.
    pub fn malformed(&self) -> Vec<(&str, HostPatternError)> {
        match self {
            Network::Hosts(hosts) => hosts
                .iter()
                .filter_map(|h| HostPattern::parse(h).err().map(|e| (h.as_str(), e)))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The parsed entries (`None` for [`Network::AnyPublic`]: every public
    /// host); malformed entries are left out (see [`Network::malformed`]).
    pub fn patterns(&self) -> Option<Vec<HostPattern>> {
        match self {
            Network::None => Some(Vec::new()),
            Network::AnyPublic => None,
            Network::Hosts(hosts) => Some(
                hosts
                    .iter()
                    .filter_map(|h| HostPattern::parse(h).ok())
                    .collect(),
            ),
        }
    }

    /// Whether everything `other` may reach, this may reach too: `other`
    /// is no wider. Malformed entries of `other` count as wider (they are
    /// refused anyway).
    pub fn covers(&self, other: &Network) -> bool {
        let Some(mine) = self.patterns() else {
            return true;
        };
        match other {
            Network::None => true,
            Network::AnyPublic => false,
            Network::Hosts(hosts) => hosts.iter().all(|h| match HostPattern::parse(h) {
                Ok(theirs) => mine.iter().any(|m| m.covers(&theirs)),
                Err(_) => false,
            }),
        }
    }

    /// How a person reads it: `none`, `any public host`, or the entries.
    pub fn summary(&self) -> String {
        match self {
            Network::None => "none".to_owned(),
            Network::AnyPublic => "any public host".to_owned(),
            Network::Hosts(hosts) if hosts.is_empty() => "none".to_owned(),
            Network::Hosts(hosts) => hosts.join(", "),
        }
    }
}

impl From<bool> for Network {
    fn from(any: bool) -> Network {
        if any {
            Network::AnyPublic
        } else {
            Network::None
        }
    }
}

impl Serialize for Network {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Network::None => serializer.serialize_bool(false),
            Network::AnyPublic => serializer.serialize_bool(true),
            Network::Hosts(hosts) => {
                let mut seq = serializer.serialize_seq(Some(hosts.len()))?;
                for host in hosts {
                    seq.serialize_element(host)?;
                }
                seq.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Network {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Network, D::Error> {
        struct NetworkVisitor;
        impl<'de> Visitor<'de> for NetworkVisitor {
            type Value = Network;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"true, false, or a list of hosts such as ["api.github.com:443"]"#)
            }
            fn visit_bool<E: de::Error>(self, any: bool) -> Result<Network, E> {
                Ok(Network::from(any))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Network, A::Error> {
                let mut hosts = Vec::new();
                while let Some(host) = seq.next_element::<String>()? {
                    hosts.push(host);
                }
                Ok(Network::Hosts(hosts))
            }
        }
        deserializer.deserialize_any(NetworkVisitor)
    }
}

/// The host part of an entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HostName {
    /// A DNS name, lower case, without a trailing dot.
    Exact(String),
    /// `*.suffix`: every name ending in `.suffix` (suffix lower case).
    Subdomains(String),
    /// An IP address literal.
    Address(IpAddr),
}

/// One parsed entry of a host list: a host and a port.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPattern {
    pub host: HostName,
    pub port: u16,
}

/// What is wrong with an entry, and what it probably meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPatternError {
    /// What is wrong, in a sentence.
    pub problem: String,
    /// A corrected entry, when one is evident.
    pub suggestion: Option<String>,
}

impl fmt::Display for HostPatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.problem)?;
        if let Some(s) = &self.suggestion {
            write!(f, " (did you mean {s:?}?)")?;
        }
        Ok(())
    }
}

impl std::error::Error for HostPatternError {}

impl HostPattern {
    /// Parse one entry (see the module documentation for the forms).
    pub fn parse(entry: &str) -> Result<HostPattern, HostPatternError> {
        let bad = |problem: String, suggestion: Option<String>| HostPatternError {
            problem,
            suggestion,
        };
        let trimmed = entry.trim();
        if trimmed.is_empty() {
            return Err(bad("an empty host entry".into(), None));
        }
        if let Some(rest) = ["https://", "http://"]
            .iter()
            .find_map(|scheme| trimmed.strip_prefix(scheme))
        {
            let default = if trimmed.starts_with("http://") {
                80
            } else {
                DEFAULT_PORT
            };
            let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
            let suggestion = HostPattern::parse(authority).ok().map(|p| {
                if authority.contains(':') && !authority.ends_with(']') {
                    p.to_string()
                } else {
                    HostPattern { port: default, ..p }.to_string()
                }
            });
            return Err(bad(
                format!("{entry:?} is a URL; an entry is a host and a port"),
                suggestion,
            ));
        }
        if trimmed != entry {
            return Err(bad(
                format!("{entry:?} has spaces around it"),
                Some(trimmed.to_owned()),
            ));
        }
        let (host, port) = split_port(entry).map_err(|problem| bad(problem, None))?;
        let port = match port {
            None => DEFAULT_PORT,
            Some(p) => parse_port(p).map_err(|problem| {
                bad(
                    format!("{entry:?}: {problem}"),
                    Some(format!("{host}:{DEFAULT_PORT}")),
                )
            })?,
        };
        if let Some(inner) = host.strip_prefix('[') {
            let inner = inner.strip_suffix(']').unwrap_or(inner);
            let ip: Ipv6Addr = inner
                .parse()
                .map_err(|_| bad(format!("{entry:?}: {inner:?} is not an IPv6 address"), None))?;
            return Ok(HostPattern {
                host: HostName::Address(IpAddr::V6(ip)),
                port,
            });
        }
        if let Ok(ip) = host.parse::<Ipv4Addr>() {
            return Ok(HostPattern {
                host: HostName::Address(IpAddr::V4(ip)),
                port,
            });
        }
        if host.parse::<Ipv6Addr>().is_ok() {
            return Err(bad(
                format!("{entry:?}: an IPv6 address goes in brackets"),
                Some(format!("[{host}]:{port}")),
            ));
        }
        let lower = host.to_ascii_lowercase();
        let lower = lower.strip_suffix('.').unwrap_or(&lower);
        if let Some(suffix) = lower.strip_prefix("*.") {
            check_name(suffix).map_err(|problem| bad(format!("{entry:?}: {problem}"), None))?;
            if !suffix.contains('.') {
                return Err(bad(
                    format!("{entry:?}: a wildcard over a whole top-level domain is too wide"),
                    None,
                ));
            }
            return Ok(HostPattern {
                host: HostName::Subdomains(suffix.to_owned()),
                port,
            });
        }
        if lower.contains('*') {
            let suggestion = lower
                .rsplit_once('*')
                .map(|(_, rest)| rest.trim_start_matches('.'))
                .filter(|rest| check_name(rest).is_ok() && rest.contains('.'))
                .map(|rest| format!("*.{rest}:{port}"));
            return Err(bad(
                format!(
                    "{entry:?}: a wildcard is allowed only as the whole first label (\"*.example.org\")"
                ),
                suggestion,
            ));
        }
        check_name(lower).map_err(|problem| bad(format!("{entry:?}: {problem}"), None))?;
        Ok(HostPattern {
            host: HostName::Exact(lower.to_owned()),
            port,
        })
    }

    /// Whether a connection to `name` (as a client asked for it: a DNS name
    /// or an address literal) on `port` is one this entry grants.
    pub fn matches(&self, name: &str, port: u16) -> bool {
        if port != self.port {
            return false;
        }
        let name = name.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = name.parse::<IpAddr>() {
            return self.host == HostName::Address(canonical_ip(ip));
        }
        let lower = name.to_ascii_lowercase();
        let lower = lower.strip_suffix('.').unwrap_or(&lower);
        match &self.host {
            HostName::Exact(exact) => exact == lower,
            HostName::Subdomains(suffix) => lower
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            HostName::Address(_) => false,
        }
    }

    /// Whether every connection `other` grants, this grants too.
    pub fn covers(&self, other: &HostPattern) -> bool {
        if self.port != other.port {
            return false;
        }
        match (&self.host, &other.host) {
            (a, b) if a == b => true,
            (HostName::Subdomains(_), HostName::Exact(name)) => self.matches(name, other.port),
            (HostName::Subdomains(mine), HostName::Subdomains(theirs)) => theirs
                .strip_suffix(mine.as_str())
                .is_some_and(|head| head.ends_with('.')),
            _ => false,
        }
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it maps.
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostName::Exact(name) => write!(f, "{name}:{}", self.port),
            HostName::Subdomains(suffix) => write!(f, "*.{suffix}:{}", self.port),
            HostName::Address(IpAddr::V4(ip)) => write!(f, "{ip}:{}", self.port),
            HostName::Address(IpAddr::V6(ip)) => write!(f, "[{ip}]:{}", self.port),
        }
    }
}

/// `host[:port]` split at the port's colon (an IPv6 literal keeps its own).
fn split_port(entry: &str) -> Result<(&str, Option<&str>), String> {
    if entry.starts_with('[') {
        let Some(close) = entry.find(']') else {
            return Err(format!(
                "{entry:?}: an opening bracket without its closing one"
            ));
        };
        let (host, rest) = entry.split_at(close + 1);
        return match rest {
            "" => Ok((host, None)),
            _ => match rest.strip_prefix(':') {
                Some(port) => Ok((host, Some(port))),
                None => Err(format!("{entry:?}: unexpected text after the address")),
            },
        };
    }
    match entry.matches(':').count() {
        0 => Ok((entry, None)),
        1 => {
            let (host, port) = entry.split_once(':').unwrap_or((entry, ""));
            Ok((host, Some(port)))
        }
        _ => Ok((entry, None)),
    }
}

fn parse_port(text: &str) -> Result<u16, String> {
    match text.parse::<u16>() {
        Ok(0) => Err("port 0 is no port".into()),
        Ok(port) => Ok(port),
        Err(_) if text == "*" => Err("a port wildcard is not allowed; name the port".into()),
        Err(_) => Err(format!("{text:?} is not a port (1 to 65535)")),
    }
}

/// A DNS name's syntax: labels of letters, digits and inner hyphens, each 1
/// to 63 bytes, 253 in all.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("no host name".into());
    }
    if name.len() > 253 {
        return Err("a host name is at most 253 bytes".into());
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err("an empty label (two dots in a row?)".into());
        }
        if label.len() > 63 {
            return Err(format!("the label {label:?} is longer than 63 bytes"));
        }
        let valid = label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !valid {
            return Err(format!(
                "the label {label:?} holds a character a host name cannot (letters, digits, '-')"
            ));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(format!("the label {label:?} starts or ends with '-'"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(entry: &str) -> HostPattern {
        HostPattern::parse(entry).unwrap_or_else(|e| panic!("{entry}: {e}"))
    }

    #[test]
    fn the_forms_parse_and_print_canonically() {
        for (entry, shown) in [
            ("api.github.com:443", "api.github.com:443"),
            ("API.GitHub.com.", "api.github.com:443"),
            ("*.example.org:8443", "*.example.org:8443"),
            ("198.51.100.7:8080", "198.51.100.7:8080"),
            ("[2001:db8::1]", "[2001:db8::1]:443"),
            ("example.org:80", "example.org:80"),
        ] {
            assert_eq!(parse(entry).to_string(), shown, "{entry}");
        }
    }

    #[test]
    fn malformed_entries_say_what_is_wrong_and_suggest_a_fix() {
        let cases = [
            ("https://api.github.com/repos", Some("api.github.com:443")),
            ("http://example.org", Some("example.org:80")),
            ("api.*.example.org", Some("*.example.org:443")),
            ("2001:db8::1", Some("[2001:db8::1]:443")),
            ("example.org:https", Some("example.org:443")),
            (" example.org", Some("example.org")),
            ("*.org", None),
            ("exa mple.org", None),
            ("", None),
            ("example.org:0", Some("example.org:443")),
            ("[::1", None),
        ];
        for (entry, suggestion) in cases {
            let err = HostPattern::parse(entry).expect_err(entry);
            assert_eq!(err.suggestion.as_deref(), suggestion, "{entry}: {err}");
            assert!(!err.problem.is_empty());
        }
    }

    #[test]
    fn wildcards_match_subdomains_only_on_their_port() {
        let p = parse("*.example.org:443");
        assert!(p.matches("a.example.org", 443));
        assert!(p.matches("A.B.Example.org.", 443));
        assert!(!p.matches("example.org", 443));
        assert!(!p.matches("badexample.org", 443));
        assert!(!p.matches("a.example.org", 80));
        assert!(!p.matches("a.example.org.evil.com", 443));
    }

    #[test]
    fn address_entries_match_literals_only_including_mapped_forms() {
        let p = parse("198.51.100.7:80");
        assert!(p.matches("198.51.100.7", 80));
        assert!(p.matches("[::ffff:198.51.100.7]", 80));
        assert!(!p.matches("198.51.100.8", 80));
        assert!(!parse("example.org:80").matches("198.51.100.7", 80));
    }

    #[test]
    fn a_wider_list_does_not_cover_a_narrower_one_s_widening() {
        let declared = Network::Hosts(vec!["*.example.org:443".into(), "api.github.com".into()]);
        assert!(declared.covers(&Network::Hosts(vec!["a.example.org:443".into()])));
        assert!(declared.covers(&Network::Hosts(vec!["*.x.example.org:443".into()])));
        assert!(declared.covers(&Network::None));
        assert!(!declared.covers(&Network::AnyPublic));
        assert!(!declared.covers(&Network::Hosts(vec!["example.org:443".into()])));
        assert!(!declared.covers(&Network::Hosts(vec!["api.github.com:80".into()])));
        assert!(Network::AnyPublic.covers(&declared));
        assert!(!Network::None.covers(&declared));
    }

    #[test]
    fn booleans_and_lists_round_trip() {
        for text in ["false", "true", r#"["a.example.org:443"]"#] {
            let n: Network = serde_json::from_str(text).unwrap();
            assert_eq!(serde_json::to_string(&n).unwrap(), text);
        }
        assert!(serde_json::from_str::<Network>("\"yes\"").is_err());
        assert!(serde_json::from_str::<Network>("[1]").is_err());
        assert!(!Network::Hosts(vec![]).is_used());
    }
}

//! What one call may reach, and the two checks every connection passes:
//! the name (or address literal) the module asked for, then each address
//! that name resolved to.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use modproto::{HostPattern, network::canonical_ip};

use crate::address_class::AddressClass;

/// The hosts a call may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostGrant {
    /// Any host, at public addresses (the capability declared `true`).
    AnyPublic,
    /// Exactly these entries.
    Only(Vec<HostPattern>),
}

/// What one call may reach: its hosts, and the non-public addresses the
/// operator granted it outright.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallGrant {
    pub hosts: HostGrant,
    /// Exact `address:port` pairs reachable although not public (a database
    /// on `127.0.0.1:5432`), by their literal or by a granted name that
    /// resolves to them.
    pub private: Vec<SocketAddr>,
}

/// Where a module asked to connect: a name or an address literal, and a
/// port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Lower case, without a trailing dot or IPv6 brackets.
    pub host: String,
    pub port: u16,
}

impl Target {
    /// `host` as a client wrote it (brackets, trailing dot and case are
    /// forgiven).
    pub fn new(host: &str, port: u16) -> Target {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
        let host = match host.parse::<IpAddr>() {
            Ok(ip) => canonical_ip(ip).to_string(),
            Err(_) => host,
        };
        Target { host, port }
    }

    /// The address, when the target is a literal.
    pub fn literal(&self) -> Option<IpAddr> {
        self.host.parse().ok()
    }
}

impl fmt::Display for Target {
    /// `name:port`, `a.b.c.d:port` or `[v6]:port`, as host entries are
    /// written.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.literal() {
            Some(IpAddr::V6(_)) => write!(f, "[{}]:{}", self.host, self.port),
            _ => write!(f, "{}:{}", self.host, self.port),
        }
    }
}

impl CallGrant {
    /// Whether the call may ask for `target` at all; `Err` is the reason
    /// the proxy gives the module.
    pub fn admits(&self, target: &Target) -> Result<(), String> {
        if let Some(ip) = target.literal()
            && self.private_granted(SocketAddr::new(ip, target.port))
        {
            return Ok(());
        }
        match &self.hosts {
            HostGrant::AnyPublic => Ok(()),
            HostGrant::Only(patterns) => {
                if patterns
                    .iter()
                    .any(|p| p.matches(&target.host, target.port))
                {
                    Ok(())
                } else {
                    Err(format!(
                        "{target} is not granted to this call (it may reach {})",
                        self.summary()
                    ))
                }
            }
        }
    }

    /// Whether the call may connect to `address` (one that a target it was
    /// admitted resolved to), whose class is `class` (as the proxy sees it:
    /// [`crate::classify`], this machine's addresses, the operator's public
    /// ranges); `Err` is that class.
    pub fn reaches(&self, address: SocketAddr, class: AddressClass) -> Result<(), AddressClass> {
        match class {
            AddressClass::Public => Ok(()),
            _ if self.private_granted(address) => Ok(()),
            class => Err(class),
        }
    }

    fn private_granted(&self, address: SocketAddr) -> bool {
        let ip = canonical_ip(address.ip());
        self.private
            .iter()
            .any(|p| canonical_ip(p.ip()) == ip && p.port() == address.port())
    }

    /// One line for people: the hosts, then the granted private addresses.
    pub fn summary(&self) -> String {
        let mut parts: Vec<String> = match &self.hosts {
            HostGrant::AnyPublic => vec!["any public host".to_owned()],
            HostGrant::Only(patterns) => patterns.iter().map(ToString::to_string).collect(),
        };
        parts.extend(
            self.private
                .iter()
                .map(|a| format!("{a} (private, granted)")),
        );
        if parts.is_empty() {
            "nothing".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::address_class::classify;

    fn only(entries: &[&str]) -> CallGrant {
        CallGrant {
            hosts: HostGrant::Only(
                entries
                    .iter()
                    .map(|e| HostPattern::parse(e).unwrap())
                    .collect(),
            ),
            private: Vec::new(),
        }
    }

    #[test]
    fn a_target_is_admitted_only_by_an_entry_that_names_it_and_its_port() {
        let grant = only(&[
            "api.github.com:443",
            "*.example.org:443",
            "198.51.100.2:8080",
        ]);
        for (host, port) in [
            ("api.github.com", 443),
            ("API.GitHub.com.", 443),
            ("a.example.org", 443),
            ("a.b.example.org", 443),
            ("198.51.100.2", 8080),
            ("::ffff:198.51.100.2", 8080),
        ] {
            assert_eq!(
                grant.admits(&Target::new(host, port)),
                Ok(()),
                "{host}:{port}"
            );
        }
        for (host, port) in [
            ("api.github.com", 80),
            ("github.com", 443),
            ("example.org", 443),
            ("evil-example.org", 443),
            ("a.example.org.evil.com", 443),
            ("198.51.100.2", 8081),
            ("198.51.100.3", 8080),
            ("localhost", 443),
        ] {
            let refused = grant.admits(&Target::new(host, port)).unwrap_err();
            assert!(refused.contains("not granted"), "{host}:{port}: {refused}");
        }
    }

    #[test]
    fn only_public_addresses_are_reached_unless_one_is_granted_exactly() {
        let mut grant = only(&["db.internal:5432"]);
        let reaches = |grant: &CallGrant, address: &str| {
            let address: SocketAddr = address.parse().unwrap();
            grant.reaches(address, classify(address.ip()))
        };
        assert_eq!(
            reaches(&grant, "127.0.0.1:5432"),
            Err(AddressClass::Loopback)
        );
        assert_eq!(reaches(&grant, "8.8.8.8:5432"), Ok(()));
        let own: SocketAddr = "8.8.8.8:5432".parse().unwrap();
        assert_eq!(
            grant.reaches(own, AddressClass::ThisHost),
            Err(AddressClass::ThisHost)
        );
        grant.private.push("127.0.0.1:5432".parse().unwrap());
        assert_eq!(reaches(&grant, "127.0.0.1:5432"), Ok(()));
        assert_eq!(reaches(&grant, "[::ffff:127.0.0.1]:5432"), Ok(()));
        assert_eq!(
            reaches(&grant, "127.0.0.1:5433"),
            Err(AddressClass::Loopback)
        );
        assert_eq!(
            reaches(&grant, "127.0.0.2:5432"),
            Err(AddressClass::Loopback)
        );
        // The literal of a granted address is admitted without a host entry.
        assert_eq!(grant.admits(&Target::new("127.0.0.1", 5432)), Ok(()));
        assert!(grant.admits(&Target::new("127.0.0.1", 5433)).is_err());
    }

    #[test]
    fn targets_print_as_host_entries() {
        assert_eq!(Target::new("[::1]", 80).to_string(), "[::1]:80");
        assert_eq!(
            Target::new("[::ffff:127.0.0.1]", 80).to_string(),
            "127.0.0.1:80"
        );
        assert_eq!(
            Target::new("Example.ORG.", 443).to_string(),
            "example.org:443"
        );
    }
}

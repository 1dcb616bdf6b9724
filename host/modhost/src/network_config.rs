//! `[network]` in `config.toml`: what the host's egress proxy counts as
//! public.
//!
//! ```toml
//! [network]
//! public_ranges = ["198.51.100.0/24"]   # a lab's ranges, reachable like public ones
//! ```
//!
//! Design decisions:
//!
//! - **Ranges, host-wide.** A capability's `allow_private` opens one exact
//!   `address:port` to one capability; `public_ranges` says that a whole
//!   range is, on this machine, what the public internet is elsewhere (a
//!   lab numbered from documentation or private ranges): every call whose
//!   grant names a host there reaches it, and only by a granted name or
//!   literal, as any public address.
//! - **Never the loopback or this machine.** A range that covers the
//!   loopback or the unspecified address is refused at startup (the
//!   proxy would never treat those as public, and such a range says the
//!   operator meant something else), and the proxy never counts an
//!   address of this machine as public, whatever the ranges say.

use ipnet::IpNet;
use serde::Deserialize;

/// `[network]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkConfig {
    /// CIDR ranges reachable as if public.
    #[serde(default)]
    pub public_ranges: Vec<String>,
}

impl NetworkConfig {
    /// The ranges, well-formed entries only ([`NetworkConfig::problems`]
    /// refuses the rest at startup).
    pub(crate) fn ranges(&self) -> Vec<IpNet> {
        self.public_ranges
            .iter()
            .filter_map(|r| parse(r).ok())
            .collect()
    }

    /// One sentence per entry that is not a range the proxy may use.
    pub(crate) fn problems(&self) -> Vec<String> {
        self.public_ranges
            .iter()
            .filter_map(|entry| {
                parse(entry)
                    .err()
                    .map(|why| format!("[network] public_ranges entry {entry:?}: {why}"))
            })
            .collect()
    }
}

fn parse(entry: &str) -> Result<IpNet, String> {
    let range: IpNet = entry.parse().map_err(|_| {
        "not a CIDR range; write an address and a prefix length, such as \"198.51.100.0/24\" or \"2001:db8::/32\"".to_owned()
    })?;
    let never = ["127.0.0.1", "0.0.0.0", "::1", "::"];
    if never
        .iter()
        .any(|ip| range.contains(&ip.parse::<std::net::IpAddr>().unwrap_or(range.addr())))
    {
        return Err(
            "it covers the loopback or the unspecified address, which are never public; name the lab's ranges alone"
                .to_owned(),
        );
    }
    Ok(range)
}

/// The egress proxy's settings under `config`.
pub(crate) fn proxy_settings(config: &NetworkConfig) -> modhost_egress::Settings {
    modhost_egress::Settings {
        public_ranges: config.ranges(),
        ..modhost_egress::Settings::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(entries: &[&str]) -> NetworkConfig {
        NetworkConfig {
            public_ranges: entries.iter().map(|e| (*e).to_owned()).collect(),
        }
    }

    #[test]
    fn a_lab_range_is_taken_and_a_range_over_the_loopback_is_refused_naming_it() {
        let lab = config(&["198.51.100.0/24", "2001:db8::/32"]);
        assert!(lab.problems().is_empty());
        assert_eq!(lab.ranges().len(), 2);
        for (entry, why) in [
            ("0.0.0.0/0", "loopback"),
            ("127.0.0.0/8", "loopback"),
            ("::/0", "loopback"),
            ("198.51.100.0", "not a CIDR range"),
            ("lab.example", "not a CIDR range"),
        ] {
            let problems = config(&[entry]).problems();
            assert_eq!(problems.len(), 1, "{entry}");
            assert!(
                problems[0].contains(&format!("{entry:?}")) && problems[0].contains(why),
                "{entry}: {problems:?}"
            );
        }
    }
}

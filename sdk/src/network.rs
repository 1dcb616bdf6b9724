//! Declaring where a capability connects (`effects.network`), typed.
//!
//! ```
//! use modsdk::{Capability, Cost, Ctx, ModError, NoInput, reads};
//!
//! fn issues(_ctx: &mut Ctx, _input: NoInput) -> Result<Vec<String>, ModError> {
//!     Ok(Vec::new())
//! }
//!
//! let capability = Capability::new("gh.issues", issues)
//!     .effects(reads(&[], Cost::Remote))
//!     .network_hosts(["api.github.com:443", "*.githubusercontent.com"]);
//! ```
//!
//! Design decisions:
//!
//! - **Checked when the capability is built.** Each entry goes through
//!   [`HostPattern::parse`], the host's own parser: an entry the host would
//!   refuse (a URL, a wildcard in the middle, an IPv6 address without
//!   brackets) panics on the author's first run, with what is wrong and the
//!   entry that was probably meant, never in an operator's `modhost list`.
//!   [`host_list`] is the same check as a value, for hosts known only at
//!   run time.
//! - **Written canonically.** The descriptor holds each entry as the host
//!   prints it (`api.github.com:443`, port included), so what an operator
//!   reviews is exactly what is granted; duplicates are dropped.
//! - **Order does not matter.** [`Capability::effects`] after
//!   [`Capability::network_hosts`] keeps the hosts when its own `network`
//!   is left at the default, and refuses to pick one of two different
//!   declarations.

use std::fmt;

use modproto::{HostPattern, HostPatternError, Network};

use crate::module::Capability;

/// The forms an entry may take, for messages.
const ENTRY_FORMS: &str = "an entry is NAME[:PORT], *.NAME[:PORT], IPV4[:PORT] or [IPV6][:PORT], 443 without a port (\"api.github.com:443\")";

/// A host entry the host would refuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostEntryError {
    /// The entry as written.
    pub entry: String,
    /// What is wrong with it, and the entry probably meant.
    pub error: HostPatternError,
}

impl fmt::Display for HostEntryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entry = &self.entry;
        let problem = &self.error.problem;
        // Most problems start with the entry itself: it is named once.
        let quoted = format!("{entry:?}");
        match problem.strip_prefix(&quoted) {
            Some(rest) if rest.starts_with(": ") || rest.starts_with(' ') => {
                write!(f, "network host {quoted}{rest}")?;
            }
            _ => write!(f, "network host {quoted}: {problem}")?,
        }
        match &self.error.suggestion {
            Some(suggestion) => write!(f, ": write {suggestion:?} instead"),
            None => write!(f, "; {ENTRY_FORMS}"),
        }
    }
}

impl std::error::Error for HostEntryError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// `effects.network` (or an operation's `external`) for exactly `entries`,
/// each checked and written canonically; the first entry the host would
/// refuse is the error. No entries is no network.
pub fn host_list<I, S>(entries: I) -> Result<Network, HostEntryError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut hosts: Vec<String> = Vec::new();
    for entry in entries {
        let entry = entry.as_ref();
        let pattern = HostPattern::parse(entry).map_err(|error| HostEntryError {
            entry: entry.to_owned(),
            error,
        })?;
        let canonical = pattern.to_string();
        if !hosts.contains(&canonical) {
            hosts.push(canonical);
        }
    }
    Ok(Network::Hosts(hosts))
}

impl Capability {
    /// It connects to exactly these hosts (see [`host_list`]): a call
    /// reaches them through the host's egress proxy, and nothing else.
    ///
    /// # Panics
    ///
    /// When an entry is one the host would refuse (the message says what
    /// is wrong and what was probably meant), or when [`Capability::effects`]
    /// already declared a different network.
    pub fn network_hosts<I, S>(self, entries: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let network = match host_list(entries) {
            Ok(network) => network,
            Err(e) => panic!("capability {}: {e}", self.id()),
        };
        self.declare_network(network)
    }

    /// It may connect to any public host: the widest network grant an
    /// operator can be asked for, which they usually narrow to named hosts.
    /// Prefer [`Capability::network_hosts`] when the hosts can be named.
    ///
    /// # Panics
    ///
    /// When [`Capability::effects`] already declared a different network.
    pub fn any_public_host(self) -> Self {
        self.declare_network(Network::AnyPublic)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::{Cost, Ctx, Effects, ModError, NoInput, reads};

    fn handler(_ctx: &mut Ctx, _input: NoInput) -> Result<Value, ModError> {
        Ok(Value::Null)
    }

    fn effects_of(capability: Capability) -> Value {
        let module = crate::Module::new("m", "1.0.0").capability(capability);
        serde_json::to_value(&module.descriptor().capabilities[0].effects).unwrap()
    }

    /// The panic message of `build`.
    fn panic_of(build: impl FnOnce() -> Capability + std::panic::UnwindSafe) -> String {
        let payload = std::panic::catch_unwind(build).expect_err("it was built");
        payload
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default()
    }

    #[test]
    fn hosts_are_written_as_the_host_prints_them_once_each() {
        let effects = effects_of(Capability::new("m.get", handler).network_hosts([
            "API.GitHub.com",
            "*.Example.org:8443",
            "198.51.100.7:80",
            "[2001:db8::1]",
            "api.github.com:443",
        ]));
        assert_eq!(
            effects["network"],
            json!([
                "api.github.com:443",
                "*.example.org:8443",
                "198.51.100.7:80",
                "[2001:db8::1]:443"
            ])
        );
        // The host parses back exactly what was declared.
        let network: Network = serde_json::from_value(effects["network"].clone()).unwrap();
        assert!(network.malformed().is_empty());
        assert!(network.is_used());
    }

    #[test]
    fn any_public_host_is_true_and_no_hosts_is_no_network() {
        let effects = effects_of(Capability::new("m.get", handler).any_public_host());
        assert_eq!(effects["network"], true);
        let none: [&str; 0] = [];
        let effects = effects_of(Capability::new("m.get", handler).network_hosts(none));
        assert_eq!(effects["network"], json!([]));
        assert!(!host_list(none).unwrap().is_used());
    }

    #[test]
    fn effects_and_hosts_combine_in_either_order() {
        let before = effects_of(
            Capability::new("m.get", handler)
                .network_hosts(["docs.rs"])
                .effects(reads(&["workspace"], Cost::Remote)),
        );
        let after = effects_of(
            Capability::new("m.get", handler)
                .effects(reads(&["workspace"], Cost::Remote))
                .network_hosts(["docs.rs"]),
        );
        assert_eq!(before, after);
        assert_eq!(before["network"], json!(["docs.rs:443"]));
        assert_eq!(before["reads"], json!(["workspace"]));
        assert_eq!(before["cost"], "remote");
        // The same declaration twice is no contradiction.
        let same = effects_of(Capability::new("m.get", handler).any_public_host().effects(
            Effects {
                network: Network::AnyPublic,
                ..Effects::default()
            },
        ));
        assert_eq!(same["network"], true);
    }

    #[test]
    fn two_different_network_declarations_are_refused() {
        let message = panic_of(|| {
            Capability::new("m.get", handler)
                .network_hosts(["docs.rs"])
                .effects(Effects {
                    network: Network::AnyPublic,
                    ..Effects::default()
                })
        });
        assert!(message.contains("capability m.get"), "{message}");
        assert!(message.contains("docs.rs:443"), "{message}");
        assert!(message.contains("any public host"), "{message}");
        let message = panic_of(|| {
            Capability::new("m.get", handler)
                .any_public_host()
                .network_hosts(["docs.rs"])
        });
        assert!(message.contains("capability m.get"), "{message}");
    }

    #[test]
    fn an_entry_the_host_would_refuse_panics_naming_it_and_the_fix() {
        for (entry, says) in [
            (
                "https://api.github.com/repos",
                "write \"api.github.com:443\" instead",
            ),
            ("api.*.example.org", "write \"*.example.org:443\" instead"),
            ("2001:db8::1", "write \"[2001:db8::1]:443\" instead"),
            ("*.org", "too wide"),
            ("exa mple.org", "NAME[:PORT]"),
        ] {
            let message = panic_of(|| Capability::new("m.get", handler).network_hosts([entry]));
            assert!(
                message.starts_with("capability m.get: network host "),
                "{message}"
            );
            assert!(message.contains(&format!("{entry:?}")), "{message}");
            assert!(message.contains(says), "{entry}: {message}");
        }
    }

    #[test]
    fn host_list_says_which_entry_is_wrong_as_a_value() {
        let error = host_list(["docs.rs", "http://example.org", "also.bad/"]).unwrap_err();
        assert_eq!(error.entry, "http://example.org");
        assert_eq!(error.error.suggestion.as_deref(), Some("example.org:80"));
        assert_eq!(
            error.to_string(),
            "network host \"http://example.org\" is a URL; an entry is a host and a port: write \"example.org:80\" instead"
        );
        assert!(std::error::Error::source(&error).is_some());
    }
}

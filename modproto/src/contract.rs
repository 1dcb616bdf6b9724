//! The contract pin: which contract governs a module, decided once, from its
//! descriptor, before the host relies on any declaration in it.
//!
//! A descriptor without `contract_version` is contract 1. The host speaks a
//! range per major: from `X.0` up to the newest minor it knows. An older
//! minor is accepted; a newer minor is refused (the module may rely on fields
//! this host would silently ignore); an unknown major or a malformed version
//! is refused, never guessed.
//!
//! The ordering "pin before reliance" is a type: [`V2Accepted`] can only be
//! produced by [`evaluate`], and it is what every check of contract-2
//! declarations takes. No code path can read `operations` as binding without
//! the pin having run.

use semver::Version;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

use crate::descriptor::{Descriptor, Operation};

/// The newest contract-1 minor this host knows.
pub const NEWEST_V1: Version = Version::new(1, 1, 0);
/// The newest contract-2 minor this host knows.
pub const NEWEST_V2: Version = Version::new(2, 0, 0);

/// The supported range, for messages: `"1.0–1.1, 2.0–2.0"`.
pub fn supported_ranges() -> String {
    format!(
        "1.0 to {}.{}, 2.0 to {}.{}",
        NEWEST_V1.major, NEWEST_V1.minor, NEWEST_V2.major, NEWEST_V2.minor
    )
}

/// Which contract governs a module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Contract {
    V1,
    V2,
}

/// The outcome of the pin, for one descriptor.
#[derive(Debug, Clone)]
pub enum ContractDecision {
    V1(Pin),
    V2(V2Accepted),
    Refused(Pin),
}

impl ContractDecision {
    /// The facts behind the decision, whichever it was.
    pub fn pin(&self) -> &Pin {
        match self {
            ContractDecision::V1(p) | ContractDecision::Refused(p) => p,
            ContractDecision::V2(a) => &a.pin,
        }
    }

    /// `"v1"`, `"v2"` or `"refused"`, as `list --json` spells it.
    pub fn label(&self) -> &'static str {
        match self {
            ContractDecision::V1(_) => "v1",
            ContractDecision::V2(_) => "v2",
            ContractDecision::Refused(_) => "refused",
        }
    }

    pub fn contract(&self) -> Option<Contract> {
        match self {
            ContractDecision::V1(_) => Some(Contract::V1),
            ContractDecision::V2(_) => Some(Contract::V2),
            ContractDecision::Refused(_) => None,
        }
    }
}

/// The facts of a pin decision: what was asked for, what the host speaks,
/// and, for a refusal, why and what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    /// The version the descriptor declared, verbatim; `None` when absent.
    pub requested: Option<String>,
    /// The version the host will speak to the module (`"1.0"`, `"2.0"`);
    /// `None` when refused.
    pub effective: Option<String>,
    /// What the host supports, for a person.
    pub supported: String,
    pub reason: String,
    pub remedy: String,
}

/// A descriptor whose contract-2 declarations the host may act on.
///
/// Only [`evaluate`] makes one. Cheap to clone.
#[derive(Debug, Clone)]
pub struct V2Accepted {
    descriptor: Arc<Descriptor>,
    version: Version,
    pin: Pin,
}

impl V2Accepted {
    pub fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    pub fn version(&self) -> &Version {
        &self.version
    }

    pub fn pin(&self) -> &Pin {
        &self.pin
    }

    /// The operations, now binding.
    pub fn operations(&self) -> &[Operation] {
        &self.descriptor.operations
    }
}

/// Decide which contract governs `descriptor`.
pub fn evaluate(descriptor: Arc<Descriptor>) -> ContractDecision {
    let supported = supported_ranges();
    let Some(raw) = descriptor.contract_version.clone() else {
        return ContractDecision::V1(Pin {
            requested: None,
            effective: Some("1.0".into()),
            supported,
            reason: "no contract_version declared: contract 1".into(),
            remedy: String::new(),
        });
    };
    let refuse = |reason: String, remedy: String| {
        ContractDecision::Refused(Pin {
            requested: Some(raw.clone()),
            effective: None,
            supported: supported.clone(),
            reason,
            remedy,
        })
    };
    let version = match parse_contract_version(&raw) {
        Ok(v) => v,
        Err(e) => {
            return refuse(
                format!("contract_version {raw:?} is not a version: {e}"),
                "declare contract_version as MAJOR, MAJOR.MINOR or MAJOR.MINOR.PATCH, for example \"2.0\", or leave it out for contract 1".into(),
            );
        }
    };
    let newest = match version.major {
        1 => NEWEST_V1,
        2 => NEWEST_V2,
        _ => {
            return refuse(
                format!("the module needs contract {}.{}, a major this host does not speak ({supported})", version.major, version.minor),
                "upgrade modhost, or install a build of the module made for a contract this host supports".into(),
            );
        }
    };
    if version.minor > newest.minor {
        return refuse(
            format!(
                "the module needs contract {}.{}, this host speaks up to {}.{}",
                version.major, version.minor, newest.major, newest.minor
            ),
            format!(
                "upgrade modhost, or install a build of the module made for {}.{} or older",
                newest.major, newest.minor
            ),
        );
    }
    let effective = format!("{}.{}", version.major, version.minor);
    let pin = Pin {
        requested: Some(raw.clone()),
        effective: Some(effective.clone()),
        supported,
        reason: format!("declared contract {raw}, spoken as {effective}"),
        remedy: String::new(),
    };
    if version.major == 1 {
        ContractDecision::V1(pin)
    } else {
        ContractDecision::V2(V2Accepted {
            descriptor,
            version,
            pin,
        })
    }
}

/// Parse a contract version: `MAJOR`, `MAJOR.MINOR` or `MAJOR.MINOR.PATCH`,
/// decimal numbers only, missing parts read as 0 (`"2"` and `"2.0"` are
/// `2.0.0`). People write all three forms, and none of them is ambiguous.
/// Anything else (pre-release or build tags, spaces, garbage) is an error,
/// never guessed at. PROTOCOL.md section 6 states this rule.
pub fn parse_contract_version(raw: &str) -> Result<Version, ContractVersionError> {
    let parts: Vec<&str> = raw.split('.').collect();
    let numeric = |p: &&str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    if parts.is_empty() || parts.len() > 3 || !parts.iter().all(numeric) {
        return Err(ContractVersionError(raw.to_owned()));
    }
    let mut padded = parts.join(".");
    for _ in parts.len()..3 {
        padded.push_str(".0");
    }
    // semver refuses leading zeros ("02"), as it should.
    Version::parse(&padded).map_err(|_| ContractVersionError(raw.to_owned()))
}

/// A contract version that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContractVersionError(pub String);

impl fmt::Display for ContractVersionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "expected MAJOR, MAJOR.MINOR or MAJOR.MINOR.PATCH (decimal numbers, no pre-release or build tags), got {:?}",
            self.0
        )
    }
}

impl std::error::Error for ContractVersionError {}

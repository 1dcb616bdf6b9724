//! What a module says about itself: the answer to `describe`.

use crate::network::Network;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A module's self-description.
///
/// Unknown fields are ignored *by the parse* so a module built for a newer
/// minor contract still parses; the contract pin ([`crate::contract`])
/// decides whether the host may act on it. They are not ignored by the
/// conformance kit: an unknown key under a contract this host knows is a
/// typo (`"netwrk": true` would otherwise read as `network: false`), and
/// `modconform::check_unknown_keys` reports it with the key it resembles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Descriptor {
    /// Stable module id: lowercase ASCII letters, digits, `-` and `_`, starting with a letter.
    pub id: String,
    /// The module's own version (semver).
    pub version: String,
    /// The contract this module was built for (semver). Absent means contract 1.
    ///
    /// Kept as the raw string: a malformed version must be refused by the pin,
    /// not fail the whole parse or be guessed at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_version: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The named filesystem roots the module may be granted. Names only: the
    /// host decides the paths, per invocation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roots: Vec<RootDecl>,
    /// External programs the module may ask the host to provide.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub binaries: Vec<BinaryDecl>,
    #[serde(default)]
    pub capabilities: Vec<Capability>,
    /// Contract 2: the product-semantic layer capabilities are checked against.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operations: Vec<Operation>,
    #[serde(default, skip_serializing_if = "Knowledge::is_empty")]
    pub knowledge: Knowledge,
    /// What the module says about its own health (self-diagnostics). The host
    /// keeps its own findings apart from these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Descriptor {
    pub fn capability(&self, id: &str) -> Option<&Capability> {
        self.capabilities.iter().find(|c| c.id == id)
    }

    pub fn root(&self, name: &str) -> Option<&RootDecl> {
        self.roots.iter().find(|r| r.name == name)
    }
}

/// What a root is for; decides where the host points it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RootKind {
    /// The module's private, persistent state (`state/<id>/` in the host home).
    State,
    /// Where the module writes files it reports as artifacts (`artifacts/<id>/`).
    Artifacts,
    /// The workspace the caller is working in.
    Workspace,
    /// A named directory or file the operator configures (always read-only).
    Source,
}

impl RootKind {
    /// The access a root of this kind gets when the declaration names none.
    pub fn default_access(self) -> Access {
        match self {
            RootKind::State | RootKind::Artifacts => Access::ReadWrite,
            RootKind::Workspace | RootKind::Source => Access::Read,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RootKind::State => "state",
            RootKind::Artifacts => "artifacts",
            RootKind::Workspace => "workspace",
            RootKind::Source => "source",
        }
    }
}

/// How a root may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Access {
    #[serde(rename = "read")]
    Read,
    #[serde(rename = "read-write")]
    ReadWrite,
}

impl Access {
    pub fn is_write(self) -> bool {
        self == Access::ReadWrite
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::ReadWrite => "read-write",
        }
    }
}

/// A named root the module may be granted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootDecl {
    pub name: String,
    pub kind: RootKind,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Requested access; absent means the kind's default. A `source` root is
    /// read-only whatever is requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<Access>,
}

impl RootDecl {
    /// The access this declaration asks for, after defaults and the
    /// source-roots-are-read-only rule.
    pub fn effective_access(&self) -> Access {
        match self.kind {
            RootKind::Source => Access::Read,
            kind => self.access.unwrap_or(kind.default_access()),
        }
    }
}

/// An external program the module may run, provided by the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BinaryDecl {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// One thing the module can do; becomes one agent tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capability {
    /// Unique within the module, conventionally `<module>.<verb>` (`files.search`).
    pub id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the input; the root must be an object schema.
    pub input_schema: Value,
    /// JSON Schema of `output`; when present the host validates every output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(default)]
    pub effects: Effects,
    /// Ids of knowledge skills relevant to this capability.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<String>,
    /// Inputs that must succeed; the conformance kit runs them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<Example>,
}

/// What a capability may do beyond computing: the basis of approval and of
/// the effect summary an agent reads.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Effects {
    /// Root names it reads.
    #[serde(default)]
    pub reads: Vec<String>,
    /// Root names it writes.
    #[serde(default)]
    pub writes: Vec<String>,
    /// Where it connects: none, any public host, or the hosts listed
    /// (see [`crate::network`]).
    #[serde(default)]
    pub network: Network,
    /// Binary names it runs.
    #[serde(default)]
    pub spawns: Vec<String>,
    #[serde(default)]
    pub cost: Cost,
    /// Whether the module itself asks that every call be approved.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approval: bool,
    /// Whether what it returns is untrusted content (a web page, a mail, a
    /// third party's text) that may try to steer whoever reads it. Absent
    /// means: untrusted exactly when it uses the network
    /// ([`Effects::output_is_untrusted`]). A host that serves an agent
    /// locks the agent's connection down once such a result reached it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub untrusted_output: Option<bool>,
    /// The secrets its calls need, by name (`GITHUB_TOKEN`): a call gets
    /// each as an environment variable when the operator granted it to
    /// this capability, and is refused otherwise (see [`crate::secret`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
}

impl Effects {
    /// Reads at most, no network, nothing spawned.
    pub fn is_read_only(&self) -> bool {
        self.writes.is_empty() && !self.network.is_used() && self.spawns.is_empty()
    }

    /// Whether its output is untrusted content: as declared, else whenever
    /// it uses the network (what it brings back, someone else wrote).
    pub fn output_is_untrusted(&self) -> bool {
        self.untrusted_output.unwrap_or(self.network.is_used())
    }
}

/// A rough price of one call, so an agent can prefer the cheap one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cost {
    /// Milliseconds of local work.
    Trivial,
    /// Local work that may take a while (a scan, a build).
    #[default]
    Local,
    /// Calls a remote service.
    Remote,
    /// Spends real money or significant resources per call.
    Expensive,
}

impl Cost {
    pub fn as_str(self) -> &'static str {
        match self {
            Cost::Trivial => "trivial",
            Cost::Local => "local",
            Cost::Remote => "remote",
            Cost::Expensive => "expensive",
        }
    }
}

/// A declared example call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Example {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    pub input: Value,
}

/// Contract 2: a product operation and the semantics a capability must honour.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operation {
    pub id: String,
    /// The capability that carries out this operation.
    pub capability: String,
    #[serde(default)]
    pub semantics: Semantics,
}

/// The product-semantic facts of an operation.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Semantics {
    /// Roots it reads.
    #[serde(default)]
    pub reads: Vec<String>,
    /// Roots it changes.
    #[serde(default)]
    pub mutates: Vec<String>,
    /// Where it reaches outside the machine: nowhere (`false`), anywhere
    /// public (`true`), or the hosts listed; the capability's
    /// `effects.network` must cover it.
    #[serde(default)]
    pub external: Network,
    /// Binaries it runs.
    #[serde(default)]
    pub runs: Vec<String>,
    /// Whether every call must be approved.
    #[serde(default)]
    pub needs_approval: bool,
    /// Whether what it returns is untrusted content; absent means: exactly
    /// when it reaches outside the machine ([`Semantics::output_is_untrusted`]).
    /// A capability that carries it must not declare its output trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub untrusted_output: Option<bool>,
    /// The secrets it uses (credentials it acts with); the capability's
    /// `effects.secrets` must name each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
}

impl Semantics {
    /// Whether the operation's output is untrusted content: as declared,
    /// else whenever it reaches outside the machine.
    pub fn output_is_untrusted(&self) -> bool {
        self.untrusted_output.unwrap_or(self.external.is_used())
    }
}

/// Markdown documents a module ships for agents and people.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Knowledge {
    /// Always-relevant instructions for the module.
    #[serde(default)]
    pub overlays: Vec<KnowledgeDoc>,
    /// Loaded on demand, referenced by capabilities' `skills`.
    #[serde(default)]
    pub skills: Vec<KnowledgeDoc>,
}

impl Knowledge {
    pub fn is_empty(&self) -> bool {
        self.overlays.is_empty() && self.skills.is_empty()
    }
}

/// One knowledge document: a path relative to the module's folder and the
/// sha256 of its bytes. The host loads it only when the digest matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnowledgeDoc {
    pub id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
    pub path: String,
    pub sha256: String,
}

//! One audit record: what a line of `audit.jsonl` says, and the hash that
//! chains the next line to it.
//!
//! A line is one JSON object, written by the host in one piece:
//!
//! ```json
//! {"seq":7,"prev":"<sha256 of line 6>","time":"2025-06-18T12:00:00.123Z","event":"call",
//!  "principal":"local:alice","tool":"files__files_search","module":"files","digest":"…",
//!  "contract_version":"2.0","capability":"files.search","request_id":"…",
//!  "grants":{"roots":{"workspace":{"path":"/src/app","access":"read"}},"binaries":{}},
//!  "approval":{"rule":"default: local, writes only its own state and artifacts"},
//!  "outcome":"ok","duration_ms":3.2,"output_bytes":812,"input_sha256":"…"}
//! ```
//!
//! Design decisions:
//!
//! - **`prev` is the SHA-256 of the previous line's bytes** (without its
//!   newline), so anyone can check a link with `sha256sum`; the first
//!   record of a log chains from [`GENESIS`]. `seq` counts records from 1
//!   across rotated files.
//! - **Never what a call carried:** the input only as its digest, the
//!   output only as its size, no module message, no stderr; an error is its
//!   kind. What the host wrote itself (a rule's label, the egress proxy's
//!   reason for a refused host) is kept, since it says why.
//! - Every field but `seq`, `prev`, `time` and `event` is optional, so a
//!   reader of an older or newer line still reads what it knows.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What the first record of a log chains from.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// One line of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// 1 for the first record of the log, then one more per line, across
    /// rotated files.
    pub seq: u64,
    /// SHA-256 (hex) of the previous line's bytes; [`GENESIS`] for the first.
    pub prev: String,
    #[serde(flatten)]
    pub entry: Entry,
}

/// Why a line was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// One call (or an attempt the host refused).
    Call,
    /// A writer found the log's end not as the head said (a torn last line
    /// after a crash, a head behind or ahead of the log) and repaired it.
    Repair,
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The capability ran and answered a result.
    Ok,
    /// The capability ran and failed (an error answer, a crash, a timeout).
    Failed,
    /// The host did not run it: an approval rule, a quota, the module's
    /// standing, input that does not fit, the machine's confinement.
    Refused,
    /// Its caller went away while it ran.
    Cancelled,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Failed => "failed",
            Outcome::Refused => "refused",
            Outcome::Cancelled => "cancelled",
        }
    }
}

/// Everything of a record but its place in the chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// UTC, RFC 3339 with milliseconds.
    pub time: String,
    pub event: Event,
    /// Who called: `local:<user>` for `modhost invoke`, the library and
    /// `modhost mcp` on stdio; an authenticated transport names its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// The agent tool name (`files__files_search`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// The digest of the module's approved bytes (its pin), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability: Option<String>,
    /// The request id the module was sent, for a call that got that far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// What the call was granted, for a call that got that far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grants: Option<CallGrants>,
    /// The approval rule that decided, and who approved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalFacts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// The error kind of a call that did not succeed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<modproto::ErrorKind>,
    /// The module's stderr shows a permission error: the sandbox most
    /// likely stopped it (`modhost_sandbox::denial`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub sandbox_denied: bool,
    /// Seconds after which a call a quota refused may be retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_s: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
    /// The size of the result (its `output` as JSON, and its `text`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_bytes: Option<u64>,
    /// The hosts the call's module contacted through the egress proxy,
    /// and those refused with the proxy's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<modhost_egress::Contacts>,
    /// SHA-256 (hex) of the caller's arguments as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_sha256: Option<String>,
    /// The call's trace, when telemetry is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// What a [`Event::Repair`] record repaired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<Repair>,
}

fn is_false(value: &bool) -> bool {
    !*value
}

impl Entry {
    /// An entry of `event`, stamped now, with nothing else.
    pub(crate) fn now(event: Event) -> Entry {
        Entry {
            time: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            event,
            principal: None,
            tool: None,
            module: None,
            digest: None,
            contract_version: None,
            capability: None,
            request_id: None,
            grants: None,
            approval: None,
            outcome: None,
            kind: None,
            sandbox_denied: false,
            retry_after_s: None,
            duration_ms: None,
            output_bytes: None,
            network: None,
            input_sha256: None,
            trace_id: None,
            repair: None,
        }
    }
}

/// The roots, binaries, hosts and secrets one call was granted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallGrants {
    /// By root name: the host path and the access.
    #[serde(default)]
    pub roots: BTreeMap<String, GrantedPath>,
    /// By binary name: the host path.
    #[serde(default)]
    pub binaries: BTreeMap<String, String>,
    /// The network the call was granted; absent for none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<GrantedNetwork>,
    /// The names of the secrets the call received; never a value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
}

/// One granted root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantedPath {
    pub path: String,
    pub access: modproto::Access,
}

/// The hosts a call was granted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantedNetwork {
    /// Any host at a public address (the capability declared `true`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub any_public: bool,
    /// Host entries, as `effects.network` and `config.toml` write them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// `address:port` pairs granted although not public.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub private: Vec<String>,
}

/// Which rule decided a call, and who approved it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalFacts {
    /// The rule's label (`rule "name"`, `rule #2 (...)`, `default: ...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Who said yes to a call that asked: `user` (asked through the MCP
    /// client), `client` (delegated), `flag` (`--approve`), `prompt` (a
    /// terminal), `rule` (an allow rule). Absent when nobody had to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// What a repair record repaired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repair {
    /// What was wrong, in the host's words.
    pub reason: String,
    /// Bytes of a torn last line that were cut off.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub torn_bytes: u64,
    /// The record the head named, when it named another than the log's
    /// last (a head behind, or records missing at the end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_seq: Option<u64>,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// SHA-256 (hex) of `bytes`: how a line is chained, and how an input is
/// digested.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(DIGITS[usize::from(byte >> 4)] as char);
        text.push(DIGITS[usize::from(byte & 0x0f)] as char);
    }
    text
}

/// The line of a record with `entry_json` (the [`Entry`] as a JSON
/// object) at `seq`, chained from `prev`: `seq` and `prev` first, so a
/// person reading the file sees the chain at the start of each line.
pub(crate) fn line(seq: u64, prev: &str, entry_json: &str) -> String {
    let rest = entry_json.strip_prefix('{').unwrap_or(entry_json);
    let separator = if rest.starts_with('}') { "" } else { "," };
    format!("{{\"seq\":{seq},\"prev\":\"{prev}\"{separator}{rest}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_reads_back_as_the_record_it_was_written_from() {
        let mut entry = Entry::now(Event::Call);
        entry.tool = Some("files__files_search".into());
        entry.outcome = Some(Outcome::Refused);
        entry.kind = Some(modproto::HostErrorKind::RateLimited.into());
        entry.retry_after_s = Some(12);
        let json = serde_json::to_string(&entry).unwrap();
        let text = line(3, GENESIS, &json);
        assert!(text.starts_with(&format!("{{\"seq\":3,\"prev\":\"{GENESIS}\",\"time\":")));
        let record: AuditRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(record.seq, 3);
        assert_eq!(record.prev, GENESIS);
        assert_eq!(record.entry, entry);
        assert!(!text.contains("sandbox_denied"), "false is left out");
    }

    #[test]
    fn the_hash_is_sha256_in_lower_case_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(GENESIS.len(), 64);
    }
}

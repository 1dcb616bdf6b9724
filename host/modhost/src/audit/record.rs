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
    /// after a crash, a head behind or ahead of the log) and repaired it;
    /// [`Repair::found`] says whether a crash explains it.
    Repair,
    /// Records the host could not write (a full disk, a file made
    /// immutable) before this one: how many ([`Gap`]).
    Gap,
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
    /// The agent tool name (`files__files_search`). A name the caller
    /// made up (an unknown tool) is kept only as its first
    /// [`MAX_CALLER_NAME`] printable characters, with `tool_sha256`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// SHA-256 (hex) of the whole tool name, when `tool` is not all of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_sha256: Option<String>,
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
    /// The error kind of a call that did not succeed. A module's own kind
    /// is kept only when it is a plain word (`[a-z][a-z0-9_]{0,63}`), else
    /// recorded as `own` with `kind_sha256`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<modproto::ErrorKind>,
    /// SHA-256 (hex) of a module's own kind that was not kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind_sha256: Option<String>,
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
    /// What a [`Event::Gap`] record says is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap: Option<Gap>,
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
            tool_sha256: None,
            module: None,
            digest: None,
            contract_version: None,
            capability: None,
            request_id: None,
            grants: None,
            approval: None,
            outcome: None,
            kind: None,
            kind_sha256: None,
            sandbox_denied: false,
            retry_after_s: None,
            duration_ms: None,
            output_bytes: None,
            network: None,
            input_sha256: None,
            trace_id: None,
            repair: None,
            gap: None,
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
    /// What the writer found, as a word; absent means it did not say,
    /// which `verify` takes as not explained by a crash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found: Option<RepairFound>,
    /// Bytes of a torn last line that were cut off.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub torn_bytes: u64,
    /// The record the head named, when it named another than the log's
    /// last (a head behind, or records missing at the end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_seq: Option<u64>,
    /// The hash the head held for that record, kept when no crash explains
    /// what was found: what the lost or changed record was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_hash: Option<String>,
    /// The last record the log held when the writer looked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_seq: Option<u64>,
}

impl Repair {
    /// Whether a crash explains what was repaired (`verify` then notes it;
    /// anything else leaves the log not intact for good).
    pub fn after_crash(&self) -> bool {
        self.found.is_some_and(RepairFound::after_crash)
    }
}

/// What a writer found where the head said the log ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RepairFound {
    /// A torn last line after the record the head names: a writer stopped
    /// in the middle of a line. A crash explains it.
    TornTail,
    /// One record after the one the head names, chained from it: a writer
    /// stopped between the line and the head. A crash explains it.
    HeadBehind,
    /// The head's record at the end of the newest rotated file and the new
    /// `audit.jsonl` empty or one record long: a writer stopped during a
    /// rotation. A crash explains it.
    Rotation,
    /// The head names records the log no longer has (removed files or
    /// lines). No crash explains it.
    Lost,
    /// The log's last record is not the one the head names, or the files
    /// are not the size the head says. No crash explains it.
    Changed,
    /// The log has records but no head (removed, or replaced by something
    /// unreadable). No crash explains it.
    HeadMissing,
}

impl RepairFound {
    pub fn after_crash(self) -> bool {
        matches!(
            self,
            RepairFound::TornTail | RepairFound::HeadBehind | RepairFound::Rotation
        )
    }
}

/// Records that could not be written, said by the first record that could.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gap {
    /// How many records are missing just before this one.
    pub records: u64,
    /// When the first of them failed (UTC, RFC 3339).
    pub since: String,
    /// Why the last of them failed, in the host's words.
    pub error: String,
}

/// The most characters of a name a caller made up (a tool name) that a
/// record keeps.
pub const MAX_CALLER_NAME: usize = 128;

/// A name a caller chose, as a record keeps it: at most
/// [`MAX_CALLER_NAME`] characters, control characters left out; with the
/// SHA-256 of the whole when that is not all of it.
pub(crate) fn caller_name(name: &str) -> (String, Option<String>) {
    let kept: String = name
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_CALLER_NAME)
        .collect();
    if kept == name {
        (kept, None)
    } else {
        (kept, Some(sha256_hex(name.as_bytes())))
    }
}

/// A module's own error kind as a record keeps it: the kind when it is a
/// plain word (`[a-z][a-z0-9_]{0,63}`), else `own` with the SHA-256 of
/// what the module sent.
pub(crate) fn recorded_kind(kind: modproto::ErrorKind) -> (modproto::ErrorKind, Option<String>) {
    let modproto::ErrorKind::Module(modproto::ModuleErrorKind::Own(own)) = &kind else {
        return (kind, None);
    };
    let text = own.as_str();
    let plain = text.len() <= 64
        && text.starts_with(|c: char| c.is_ascii_lowercase())
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        return (kind, None);
    }
    let digest = sha256_hex(text.as_bytes());
    let own =
        modproto::ModuleErrorKind::from_wire("own").unwrap_or(modproto::ModuleErrorKind::Failed);
    (own.into(), Some(digest))
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

    /// An MCP client's made-up tool name (4 MB, newlines, escape
    /// sequences) is kept short and printable, with the whole one's digest.
    #[test]
    fn a_callers_name_is_kept_short_and_printable_with_its_digest() {
        assert_eq!(
            caller_name("files__files_search"),
            ("files__files_search".to_owned(), None)
        );
        let forged = "x\n2026-12-06T05:00:00.000Z  #1  local:alice  files__files_read  ok\u{1b}[8m";
        let (kept, digest) = caller_name(forged);
        assert!(!kept.chars().any(char::is_control), "{kept:?}");
        assert_eq!(digest, Some(sha256_hex(forged.as_bytes())));
        let huge = "C".repeat(4_000_000);
        let (kept, digest) = caller_name(&huge);
        assert_eq!(kept.chars().count(), MAX_CALLER_NAME);
        assert_eq!(digest, Some(sha256_hex(huge.as_bytes())));
    }

    /// A module's own error kind is kept only as a plain word.
    #[test]
    fn a_modules_own_kind_is_kept_only_as_a_plain_word() {
        let own = |text: &str| -> modproto::ErrorKind {
            modproto::ModuleErrorKind::from_wire(text).unwrap().into()
        };
        for plain in ["quota_exceeded", "e", &format!("a{}", "b".repeat(63))] {
            assert_eq!(recorded_kind(own(plain)), (own(plain), None), "{plain}");
        }
        let named: modproto::ErrorKind = modproto::ModuleErrorKind::Denied.into();
        assert_eq!(recorded_kind(named.clone()), (named, None));
        for hostile in [
            "x".repeat(100_000),
            format!("a{}", "b".repeat(64)),
            "Upper".into(),
            "bad\u{1b}[31mred".into(),
            "9lives".into(),
            "with-dash".into(),
        ] {
            let (kind, digest) = recorded_kind(own(&hostile));
            assert_eq!(kind, own("own"), "{hostile:.40}");
            assert_eq!(digest, Some(sha256_hex(hostile.as_bytes())));
        }
    }
}

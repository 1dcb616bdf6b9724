//! Self-contained, signed tokens: what the server hands a client so that
//! any replica holding the same key can take the conversation up again
//! (the stateless era's `requestState`, `elicitation.rs`; the handshake
//! era's `Mcp-Session-Id` over HTTP), with no shared store.
//!
//! Design decisions:
//!
//! - **HMAC-SHA256 over the whole envelope.** A token is
//!   `base64url(envelope) "." base64url(tag)`, no padding; the envelope is
//!   JSON `{"purpose", "exp", "data"}` and the tag is HMAC-SHA256 (the
//!   `hmac` crate) of a fixed format label followed by the envelope's
//!   base64 text. So the purpose and the expiry are under the tag with the
//!   payload, the format is bound too (a later format with another label
//!   cannot be confused with this one, and nothing in the token names an
//!   algorithm to pick), and the tag is checked, in constant time
//!   (`Mac::verify_slice`), before one byte of the envelope is decoded.
//! - **Refused before any work.** A token longer than [`MAX_TOKEN_BYTES`]
//!   is refused before it is decoded (the bound also keeps a sealed
//!   `Mcp-Session-Id` within proxies' default header buffers); base64 is
//!   decoded strictly (no padding, no stray bits), so a token has one
//!   spelling.
//! - **Signed, not encrypted.** Whoever holds a token can read its
//!   payload. Seal only what the client may read: its own tool call's
//!   digest, its principal, its revision and capabilities.
//! - **Purpose-bound and expiring.** `open(purpose, ..)` refuses a token
//!   sealed for another purpose (a session token is never a
//!   `requestState`) and one whose expiry has passed. Expiry is wall-clock
//!   time (milliseconds since the epoch), since another process checks it:
//!   replicas' clocks must agree to well within a token's lifetime (NTP).
//! - **Not single-use by itself.** A token opens as often as it is
//!   presented until it expires; whoever needs once-only (an approval)
//!   keeps its own record of what it accepted (`elicitation.rs`).
//! - **The key file** (`[http] signing_key_file`, [`SigningKey::load`]):
//!   one or more keys, one per line (blank lines and `#` comments
//!   ignored), each at least [`MIN_KEY_BYTES`] bytes of text, e.g. from
//!   `openssl rand -base64 48`. The first key seals; every key opens.
//!   Rotation without a failed request: add the new key as a second line
//!   on every replica, then move it to the first line everywhere, then
//!   remove the old one once the longest token lifetime has passed. The
//!   file must be a regular file named directly (not through a symbolic
//!   link: the path the operator checks with `ls -l` is the file read),
//!   on no kernel filesystem (procfs, sysfs and the like, by `fstatfs`: a
//!   process's `environ` there is a "regular", 0400, user-owned file whose
//!   bytes are no secret), owned by the user modhost runs as or by root, with no permission for
//!   group or others (0600 or 0400), as `secrets.toml` is; otherwise the
//!   refusal names the path and the command that fixes it.
//! - **An ephemeral key** ([`SigningKey::ephemeral`]) is 32 bytes from the
//!   kernel's random source, for a process whose tokens never need to be
//!   opened elsewhere (stdio); an HTTP server without a configured key
//!   says that its replicas cannot continue each other's conversations.

use std::fmt;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The shortest key accepted from a key file, in bytes.
pub(crate) const MIN_KEY_BYTES: usize = 32;

/// The most keys a key file may hold (one seals, the others are being
/// rotated out): each one is tried on every token that the first refuses.
pub(crate) const MAX_KEYS: usize = 8;

/// The longest token [`SigningKey::open`] reads, and [`SigningKey::seal`]
/// makes. 4 KiB keeps an `Mcp-Session-Id` header within the 8 KiB header
/// buffers proxies such as nginx use by default.
pub(crate) const MAX_TOKEN_BYTES: usize = 4096;

/// The largest key file read (a few keys of text, comments).
const MAX_KEY_FILE_BYTES: u64 = 64 * 1024;

/// The length of the bytes of an ephemeral key.
const EPHEMERAL_KEY_BYTES: usize = 32;

/// What every tag covers first: the token format. A future format uses
/// another label, so neither can be taken for the other.
const FORMAT_LABEL: &[u8] = b"modhost-signed-token-v1.";

/// The key (or keys) this server seals and opens tokens with.
///
/// Its `Debug` shows how many keys and where they came from, never a byte
/// of them.
pub struct SigningKey {
    /// The first seals; all open.
    keys: Vec<Box<[u8]>>,
    /// The key file, or `None` for an ephemeral key.
    source: Option<PathBuf>,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("keys", &self.keys.len())
            .field("source", &self.source)
            .finish()
    }
}

/// Why a key file was refused: what is wrong, with the path and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the signing key file {} is refused: {problem}. To fix it: {fix}", .path.display())]
pub struct KeyError {
    pub path: PathBuf,
    pub problem: KeyProblem,
    /// The command or step that fixes it.
    pub fix: String,
}

/// What is wrong with a key file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyProblem {
    #[error("it is a symbolic link, and the key must be read from the file the path names")]
    Link,
    #[error("it is not a regular file")]
    NotAFile,
    #[error("it is a file of the kernel's {filesystem} filesystem, whose bytes are no secret")]
    KernelFile { filesystem: &'static str },
    #[error(
        "it is owned by uid {owner}, neither the user modhost runs as (uid {user}) nor root, \
         so another user can change the key"
    )]
    Owner { owner: u32, user: u32 },
    #[error("its mode is {mode:04o}, which lets its group or others read or change the key")]
    Mode { mode: u32 },
    #[error("it cannot be read ({0})")]
    Unreadable(String),
    #[error("it does not exist")]
    Missing,
    #[error("it is {bytes} bytes, more than a key file's {MAX_KEY_FILE_BYTES}")]
    TooLarge { bytes: u64 },
    #[error("it is not UTF-8 text")]
    NotText,
    #[error("it holds no key (only blank lines and comments)")]
    NoKey,
    #[error("the key on line {line} is {bytes} bytes, fewer than {MIN_KEY_BYTES}")]
    TooShort { line: usize, bytes: usize },
    #[error("it holds {count} keys, more than {MAX_KEYS}")]
    TooManyKeys { count: usize },
}

/// Why a token was refused (or could not be made).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("the token is {bytes} bytes, more than the {MAX_TOKEN_BYTES} a token may have")]
    TooLarge { bytes: usize },
    #[error("the token is malformed (not two base64url parts joined by a dot)")]
    Malformed,
    #[error("the token was not sealed with this server's key, or it was changed")]
    Forged,
    #[error("the token was sealed for {found:?}, not for {expected:?}")]
    WrongPurpose { expected: String, found: String },
    #[error("the token expired {ago_ms} ms ago")]
    Expired { ago_ms: u64 },
}

impl SigningKey {
    /// The keys in the file at `path` (format and checks in the module
    /// docs). The file is opened once, through no link, and what is
    /// checked (`fstat` of the open file) is what is read.
    pub fn load(path: &Path) -> Result<SigningKey, KeyError> {
        use rustix::fs::{Mode, OFlags};
        let refuse = |problem: KeyProblem| {
            let fix = fix_for(path, &problem);
            KeyError {
                path: path.to_path_buf(),
                problem,
                fix,
            }
        };
        // NONBLOCK: a fifo at the path is opened at once (and then refused
        // as not a regular file) rather than waiting for a writer.
        let fd = match rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::LOOP) => return Err(refuse(KeyProblem::Link)),
            Err(rustix::io::Errno::NOENT) => return Err(refuse(KeyProblem::Missing)),
            Err(e) => return Err(refuse(KeyProblem::Unreadable(e.to_string()))),
        };
        let file = std::fs::File::from(fd);
        let meta = file
            .metadata()
            .map_err(|e| refuse(KeyProblem::Unreadable(e.to_string())))?;
        if !meta.file_type().is_file() {
            return Err(refuse(KeyProblem::NotAFile));
        }
        // A kernel file (`/proc/<pid>/environ`, a sysfs attribute) passes
        // every check above: regular, the user's, 0400. Its bytes are the
        // kernel's, not a secret (an environment a manifest lists), and its
        // size is not what is read. Asked of the open file, so the
        // filesystem checked is the one read.
        let filesystem = rustix::fs::fstatfs(&file)
            .map_err(|e| refuse(KeyProblem::Unreadable(e.to_string())))?;
        // `f_type` is narrower on 32-bit targets.
        #[allow(clippy::unnecessary_cast)]
        let magic = filesystem.f_type as i64;
        if let Some(name) = modhost_sandbox::mount_table::kernel_filesystem_named(magic) {
            return Err(refuse(KeyProblem::KernelFile { filesystem: name }));
        }
        let user = rustix::process::geteuid().as_raw();
        if meta.uid() != user && meta.uid() != 0 {
            return Err(refuse(KeyProblem::Owner {
                owner: meta.uid(),
                user,
            }));
        }
        // Root included: a root-owned 0644 key is readable by every user.
        let mode = meta.mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(refuse(KeyProblem::Mode { mode }));
        }
        if meta.len() > MAX_KEY_FILE_BYTES {
            return Err(refuse(KeyProblem::TooLarge { bytes: meta.len() }));
        }
        let mut bytes = Vec::new();
        file.take(MAX_KEY_FILE_BYTES)
            .read_to_end(&mut bytes)
            .map_err(|e| refuse(KeyProblem::Unreadable(e.to_string())))?;
        let text = String::from_utf8(bytes).map_err(|_| refuse(KeyProblem::NotText))?;
        let mut keys = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let key = line.trim();
            if key.is_empty() || key.starts_with('#') {
                continue;
            }
            if key.len() < MIN_KEY_BYTES {
                return Err(refuse(KeyProblem::TooShort {
                    line: index + 1,
                    bytes: key.len(),
                }));
            }
            keys.push(Box::from(key.as_bytes()));
        }
        if keys.is_empty() {
            return Err(refuse(KeyProblem::NoKey));
        }
        if keys.len() > MAX_KEYS {
            return Err(refuse(KeyProblem::TooManyKeys { count: keys.len() }));
        }
        Ok(SigningKey {
            keys,
            source: Some(path.to_path_buf()),
        })
    }

    /// A key of this process alone: 32 bytes from the kernel's random
    /// source. Fails only when the kernel gives no random bytes.
    pub fn ephemeral() -> std::io::Result<SigningKey> {
        let mut key = [0u8; EPHEMERAL_KEY_BYTES];
        random_bytes(&mut key)?;
        Ok(SigningKey {
            keys: vec![Box::from(key.as_slice())],
            source: None,
        })
    }

    /// Whether this key was made by [`SigningKey::ephemeral`]: tokens it
    /// seals open in this process only.
    pub fn is_ephemeral(&self) -> bool {
        self.source.is_none()
    }

    /// A token carrying `payload` for `purpose`, valid for `ttl` from now.
    /// Refused ([`SealError::TooLarge`]) when it would be longer than
    /// [`SigningKey::open`] reads: keep payloads small.
    pub fn seal(&self, purpose: &str, payload: &Value, ttl: Duration) -> Result<String, SealError> {
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let envelope = json!({
            "purpose": purpose,
            "exp": now_ms().saturating_add(ttl_ms),
            "data": payload,
        });
        let body = URL_SAFE_NO_PAD.encode(envelope.to_string());
        let tag = URL_SAFE_NO_PAD.encode(tag_of(&self.keys[0], body.as_bytes()));
        let token = format!("{body}.{tag}");
        if token.len() > MAX_TOKEN_BYTES {
            return Err(SealError::TooLarge { bytes: token.len() });
        }
        Ok(token)
    }

    /// The payload of `token`, when one of this server's keys sealed it
    /// for `purpose`, unchanged, and it has not expired.
    pub fn open(&self, purpose: &str, token: &str) -> Result<Value, SealError> {
        self.open_with_expiry(purpose, token).map(|(data, _)| data)
    }

    /// [`SigningKey::open`], and when the token expires (milliseconds
    /// since the Unix epoch, as [`now_ms`] counts): what a record of
    /// tokens already used must keep them until.
    pub(crate) fn open_with_expiry(
        &self,
        purpose: &str,
        token: &str,
    ) -> Result<(Value, u64), SealError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(SealError::TooLarge { bytes: token.len() });
        }
        let (body, tag) = token.split_once('.').ok_or(SealError::Malformed)?;
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| SealError::Malformed)?;
        let authentic = self.keys.iter().any(|key| {
            let mut mac = mac_with(key);
            mac.update(FORMAT_LABEL);
            mac.update(body.as_bytes());
            mac.verify_slice(&tag).is_ok()
        });
        if !authentic {
            return Err(SealError::Forged);
        }
        // Authentic from here on: these bytes are ours, so a failure below
        // is a token of another format (another version of modhost).
        let envelope: Value = URL_SAFE_NO_PAD
            .decode(body)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .ok_or(SealError::Malformed)?;
        let (Some(found), Some(exp)) = (
            envelope.get("purpose").and_then(Value::as_str),
            envelope.get("exp").and_then(Value::as_u64),
        ) else {
            return Err(SealError::Malformed);
        };
        if found != purpose {
            return Err(SealError::WrongPurpose {
                expected: purpose.to_owned(),
                found: found.to_owned(),
            });
        }
        let now = now_ms();
        if now >= exp {
            return Err(SealError::Expired { ago_ms: now - exp });
        }
        let data = envelope.get("data").cloned().unwrap_or(Value::Null);
        Ok((data, exp))
    }
}

/// The HMAC of `key` ready for input.
fn mac_with(key: &[u8]) -> HmacSha256 {
    // HMAC takes a key of any length; this cannot fail.
    <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC accepts any key length")
}

/// The tag of a token whose envelope is `body` (base64 text).
fn tag_of(key: &[u8], body: &[u8]) -> [u8; 32] {
    let mut mac = mac_with(key);
    mac.update(FORMAT_LABEL);
    mac.update(body);
    mac.finalize().into_bytes().into()
}

/// Milliseconds since the Unix epoch (0 for a clock before it): the clock
/// tokens expire by.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `buf` filled from the kernel's random source.
pub(crate) fn random_bytes(buf: &mut [u8]) -> std::io::Result<()> {
    getrandom::fill(buf).map_err(|e| std::io::Error::other(format!("no random bytes: {e}")))
}

/// The command or step that fixes `problem` with the key file at `path`.
fn fix_for(path: &Path, problem: &KeyProblem) -> String {
    let p = path.display();
    let generate = format!("(umask 077; openssl rand -base64 48 > {p})");
    match problem {
        KeyProblem::Link => format!(
            "name the file itself rather than the link {p} (in Kubernetes, mount the Secret's \
             key with `subPath`, which mounts the file, not a link); the file must be mode 0600"
        ),
        KeyProblem::NotAFile | KeyProblem::KernelFile { .. } => {
            format!("write the key into a regular file: {generate}")
        }
        KeyProblem::Owner { user, .. } => format!(
            "run `chown {user} {p}` (as root), or write the file again as the user modhost runs as"
        ),
        KeyProblem::Mode { .. } => format!("run `chmod 600 {p}`"),
        KeyProblem::Missing => format!(
            "create it with {generate}, the same file on every replica, or point \
             signing_key_file (or MODHOST_SIGNING_KEY_FILE) at the key"
        ),
        KeyProblem::Unreadable(_) => {
            format!("make {p} readable by the user modhost runs as (mode 0600)")
        }
        KeyProblem::TooLarge { .. } | KeyProblem::NotText | KeyProblem::NoKey => {
            format!("write each key as one line of text, the signing key first, e.g. {generate}")
        }
        KeyProblem::TooShort { line, .. } => format!(
            "replace line {line} with a key of at least {MIN_KEY_BYTES} bytes, e.g. the output \
             of `openssl rand -base64 48`"
        ),
        KeyProblem::TooManyKeys { .. } => format!(
            "keep at most {MAX_KEYS} keys in {p}: the signing key first, then only the keys \
             tokens still alive may have been sealed with"
        ),
    }
}

#[cfg(test)]
mod tests;

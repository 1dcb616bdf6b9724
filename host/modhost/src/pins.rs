//! Integrity pins: the operator's approval of exact bytes and an exact descriptor.
//!
//! `pins.json` in the host home records, per module, the tree digest of its
//! files (`crate::module_tree`: every file of its folder, names, modes and
//! contents), the digest of the descriptor (and of each
//! capability, so a refusal can say *what* changed), the contract version and
//! when it was pinned. Under `pins = "enforce"` (the default) an unpinned
//! module can be listed and described but not invoked, and a module whose
//! bytes or descriptor changed since its pin is refused until the operator
//! pins it again. This closes the "same name, new behaviour" hole: an update
//! that silently changes what a tool does is not silently trusted.
//!
//! Under `warn` a pinned, unchanged module still runs from its snapshot, and
//! a changed or unpinned one runs from its folder with a host warning; under
//! `off` pins are not consulted and modules run from their folders (the
//! details are in [`crate::discovery`]'s header).
//!
//! Pinning also stores the approved tree in the snapshot store
//! (`crate::snapshot`) before the pin is written: what a pinned module runs
//! is that snapshot, so the approval covers what executes, not only what was
//! checked.
//!
//! The file is written atomically (temp file in the same directory, fsync,
//! rename), and every change reads, modifies and writes it under the home's
//! lock ([`crate::home_lock`]): concurrent `pin`/`unpin`/`install`/`remove`
//! each take effect. A corrupt or unreadable `pins.json`, or one in a format
//! this modhost does not know, is an error naming the file; it is never
//! silently reset or rewritten, because that would unpin everything.
//!
//! Format 2 pins trees. A format-1 record (written by a modhost that pinned
//! only the entry file) is kept but counts as changed until the operator
//! pins the module again: it never approved the files beside the entry.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use modproto::{Capability, Descriptor};
use serde::{Deserialize, Serialize};

use crate::home_lock::{HomeLock, HomeLockError};
use modhost_runner::atomic_file::write_bytes_atomically;
use modhost_runner::file_identity::{FileIdentity, Glance};

/// The file name inside the host home.
pub(crate) const PINS_FILE: &str = "pins.json";

/// The format this modhost writes.
pub const FORMAT: u32 = 2;

/// What a record's `digest` covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PinCovers {
    /// Only the entry file's bytes (format 1): no longer enough to run.
    #[default]
    EntryFile,
    /// The module's whole tree.
    Tree,
}

/// How the host treats pins (`pins = "..."` in `config.toml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PinsMode {
    /// Unpinned or changed modules are not invoked.
    #[default]
    Enforce,
    /// They are invoked, with a host warning.
    Warn,
    /// Pins are not consulted.
    Off,
}

/// What the operator approved for one module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinRecord {
    pub module: String,
    pub version: String,
    /// The tree digest of the module's files, hex (format 1: blake3 of the
    /// entry file only; see `covers`).
    pub digest: String,
    /// What `digest` covers; absent in format 1.
    #[serde(default)]
    pub covers: PinCovers,
    /// blake3 of the descriptor as JSON, hex.
    pub descriptor_digest: String,
    /// blake3 of each capability as JSON, by capability id.
    #[serde(default)]
    pub capabilities: BTreeMap<String, String>,
    /// The contract version the module declared (`"1"` when it declared none).
    pub contract_version: String,
    /// RFC 3339, seconds.
    pub pinned_at: String,
    /// Where the module was installed from, when `modhost install` pinned it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// For bytes fetched from a remote source (`install https://…`,
    /// `oci://…`, `sync`): where exactly, their sha256, and what signature
    /// vouched for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<PinProvenance>,
}

/// Where remote bytes came from and who vouched for them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinProvenance {
    #[serde(flatten)]
    pub origin: modhost_distribution::Origin,
    /// sha256 of the fetched file (for OCI, of the layer), hex.
    pub sha256: String,
    /// The verified signature, when one was checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<modhost_distribution::signature::Verified>,
    /// Where the signature or Sigstore bundle was read from (`--signature`,
    /// a lockfile's `signature`: an https URL or a path), when the operator
    /// named one: what `modhost lock` writes back so another host checks
    /// the same signature. Set by the caller of `Host::fetch_source`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature_source: Option<String>,
}

impl PinRecord {
    /// A record of `descriptor` served by bytes with digest `digest`, now.
    pub(crate) fn new(descriptor: &Descriptor, digest: &str, source: Option<String>) -> Self {
        PinRecord {
            module: descriptor.id.clone(),
            version: descriptor.version.clone(),
            digest: digest.to_owned(),
            covers: PinCovers::Tree,
            descriptor_digest: descriptor_digest(descriptor),
            capabilities: capability_digests(descriptor),
            contract_version: descriptor
                .contract_version
                .clone()
                .unwrap_or_else(|| "1".into()),
            pinned_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            source,
            provenance: None,
        }
    }
}

/// The on-disk shape of `pins.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PinFile {
    /// Format version of this file.
    pub format: u32,
    #[serde(default)]
    pub modules: BTreeMap<String, PinRecord>,
}

/// `pins.json` as a long-running host re-reads it on every call (so a
/// revoked approval takes effect at once): parsed again only when the file's
/// identity changed. Every write replaces the file (a new inode), so one
/// `stat` tells; an identity that changed within [`RACY`] of the read is
/// not trusted and the file is read again next time.
///
/// [`RACY`]: modhost_runner::file_identity::RACY
///
/// A long-running host also asks, on every call, how the called module
/// stands against these pins: [`PinsWatch::standing`] compares once per
/// pins generation and module, and remembers the answer with the very
/// `Pins` and descriptor it was computed from (held, so neither address can
/// be reused): a re-read `pins.json` is a new `Pins`, a rediscovered module
/// a new descriptor, and either compares again.
#[derive(Debug, Default)]
pub(crate) struct PinsWatch {
    cached: std::sync::Mutex<Option<(FileIdentity, std::sync::Arc<Pins>)>>,
    standings: std::sync::Mutex<std::collections::HashMap<String, Compared>>,
}

/// One module's standing, with what it was computed from.
#[derive(Debug)]
struct Compared {
    pins: std::sync::Arc<Pins>,
    descriptor: std::sync::Arc<Descriptor>,
    digest: String,
    standing: PinStanding,
}

/// The most standings a watch remembers; past it they are compared afresh.
const MAX_STANDINGS: usize = 1024;

impl PinsWatch {
    /// The pins of `home` as they are now; the identity of `pins.json` is
    /// read from `glance` when the call already took it.
    pub(crate) fn current(
        &self,
        home: &Path,
        glance: &Glance,
    ) -> Result<std::sync::Arc<Pins>, PinsError> {
        let identity = glance.identity(&home.join(PINS_FILE)).ok();
        let mut cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        if let (Some(now), Some((known, pins))) = (identity, cached.as_ref())
            && now == *known
        {
            return Ok(std::sync::Arc::clone(pins));
        }
        let read_at = SystemTime::now();
        let pins = std::sync::Arc::new(Pins::load(home)?);
        *cached = identity
            .filter(|id| id.settled_at(read_at))
            .map(|id| (id, std::sync::Arc::clone(&pins)));
        Ok(pins)
    }

    /// How `descriptor`, served by bytes with digest `digest`, stands
    /// against the pins of `home` as they are now: [`Pins::standing`] of
    /// [`PinsWatch::current`], compared only when the pins, the descriptor
    /// or the digest differ from the last time this module was asked about.
    pub(crate) fn standing(
        &self,
        home: &Path,
        descriptor: &std::sync::Arc<Descriptor>,
        digest: &str,
        glance: &Glance,
    ) -> Result<PinStanding, PinsError> {
        let pins = self.current(home, glance)?;
        let remembered = |standings: &std::collections::HashMap<String, Compared>| {
            standings
                .get(&descriptor.id)
                .filter(|c| {
                    std::sync::Arc::ptr_eq(&c.pins, &pins)
                        && std::sync::Arc::ptr_eq(&c.descriptor, descriptor)
                        && c.digest == digest
                })
                .map(|c| c.standing.clone())
        };
        if let Some(standing) = remembered(&self.lock_standings()) {
            return Ok(standing);
        }
        let standing = pins.standing(descriptor, digest);
        let mut standings = self.lock_standings();
        if standings.len() >= MAX_STANDINGS {
            standings.clear();
        }
        standings.insert(
            descriptor.id.clone(),
            Compared {
                pins,
                descriptor: std::sync::Arc::clone(descriptor),
                digest: digest.to_owned(),
                standing: standing.clone(),
            },
        );
        Ok(standing)
    }

    fn lock_standings(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Compared>> {
        self.standings.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The pins of one host home.
#[derive(Debug, Clone)]
pub(crate) struct Pins {
    path: PathBuf,
    file: PinFile,
}

/// Why `pins.json` could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PinsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} is corrupt ({message}); fix or remove it by hand (removing it unpins every module), nothing was changed"
    )]
    Corrupt { path: PathBuf, message: String },
    #[error(
        "{path} has format {format}, which this modhost does not know (it reads formats 1 and {FORMAT}): it was written by another modhost version; use that version, or move the file aside and pin every module again; nothing was changed"
    )]
    UnknownFormat { path: PathBuf, format: u32 },
    #[error(transparent)]
    Lock(#[from] HomeLockError),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Pins {
    /// Load the pins of the home at `home`, to read them. A missing file is
    /// an empty set. To change them, use [`Pins::load_locked`].
    pub(crate) fn load(home: &Path) -> Result<Pins, PinsError> {
        let path = home.join(PINS_FILE);
        let file = match std::fs::read(&path) {
            Ok(bytes) => {
                let file =
                    serde_json::from_slice::<PinFile>(&bytes).map_err(|e| PinsError::Corrupt {
                        path: path.clone(),
                        message: e.to_string(),
                    })?;
                if !(1..=FORMAT).contains(&file.format) {
                    return Err(PinsError::UnknownFormat {
                        path,
                        format: file.format,
                    });
                }
                file
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => PinFile {
                format: FORMAT,
                ..PinFile::default()
            },
            Err(source) => return Err(PinsError::Read { path, source }),
        };
        Ok(Pins { path, file })
    }

    /// Load the pins to change them. Only pins loaded under the home's lock
    /// (held by the caller until the change is saved) can be changed: no
    /// other writer can read the same state and overwrite this change.
    pub(crate) fn load_locked<'a>(
        home: &Path,
        lock: &'a HomeLock,
    ) -> Result<LockedPins<'a>, PinsError> {
        Ok(LockedPins {
            pins: Pins::load(home)?,
            _lock: lock,
        })
    }

    pub(crate) fn get(&self, module: &str) -> Option<&PinRecord> {
        self.file.modules.get(module)
    }

    pub(crate) fn records(&self) -> impl Iterator<Item = &PinRecord> {
        self.file.modules.values()
    }

    /// Write the file atomically: a reader sees the old pins or the new ones,
    /// never half of either, even if the host dies mid-write.
    fn save(&self) -> Result<(), PinsError> {
        let write_err = |source| PinsError::Write {
            path: self.path.clone(),
            source,
        };
        let file = PinFile {
            format: FORMAT,
            modules: self.file.modules.clone(),
        };
        let mut bytes = serde_json::to_vec_pretty(&file).unwrap_or_default();
        bytes.push(b'\n');
        write_bytes_atomically(&self.path, &bytes).map_err(write_err)
    }

    /// How `descriptor`, served by bytes with digest `digest`, stands against its pin.
    pub(crate) fn standing(&self, descriptor: &Descriptor, digest: &str) -> PinStanding {
        match self.get(&descriptor.id) {
            None => PinStanding::Unpinned,
            Some(record) => {
                let change = compare(record, descriptor, digest);
                if change.is_empty() {
                    PinStanding::Pinned
                } else {
                    PinStanding::Changed(change)
                }
            }
        }
    }
}

/// Pins loaded under the home's lock: the only ones that can be changed.
#[derive(Debug)]
pub(crate) struct LockedPins<'a> {
    pins: Pins,
    _lock: &'a HomeLock,
}

impl LockedPins<'_> {
    /// Record `record`, replacing any earlier pin of the same module, and save.
    pub(crate) fn pin(&mut self, record: PinRecord) -> Result<(), PinsError> {
        self.pins.file.modules.insert(record.module.clone(), record);
        self.pins.save()
    }

    /// Record every one of `records` and remove the pins of `unpinned`,
    /// saving once: a reader sees all of these changes or none (`sync`).
    pub(crate) fn change_all(
        &mut self,
        records: Vec<PinRecord>,
        unpinned: &[String],
    ) -> Result<(), PinsError> {
        for module in unpinned {
            self.pins.file.modules.remove(module);
        }
        for record in records {
            self.pins.file.modules.insert(record.module.clone(), record);
        }
        self.pins.save()
    }

    /// Remove the pin of `module` and save. Returns whether there was one.
    pub(crate) fn unpin(&mut self, module: &str) -> Result<bool, PinsError> {
        let had = self.pins.file.modules.remove(module).is_some();
        if had {
            self.pins.save()?;
        }
        Ok(had)
    }
}

impl std::ops::Deref for LockedPins<'_> {
    type Target = Pins;

    fn deref(&self) -> &Pins {
        &self.pins
    }
}

/// A module's standing against `pins.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinStanding {
    Pinned,
    Unpinned,
    Changed(PinChange),
}

impl PinStanding {
    /// `pinned`, `unpinned` or `changed`.
    pub fn label(&self) -> &'static str {
        match self {
            PinStanding::Pinned => "pinned",
            PinStanding::Unpinned => "unpinned",
            PinStanding::Changed(_) => "changed",
        }
    }

    /// Why a call would be refused under `enforce`, with the command that
    /// accepts the module; `None` when pinned.
    pub fn refusal(&self, module: &str) -> Option<String> {
        match self {
            PinStanding::Pinned => None,
            PinStanding::Unpinned => Some(format!(
                "module {module} is not pinned: the operator has not approved its bytes; run `modhost pin {module}` after reviewing `modhost describe {module}`"
            )),
            PinStanding::Changed(change) => Some(format!(
                "module {module} changed since it was pinned ({change}); review `modhost describe {module}`, then run `modhost pin {module}` to accept it"
            )),
        }
    }
}

/// What differs between a pin and what is installed now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PinChange {
    pub bytes: bool,
    /// The pin covers only the entry file (format 1): the files beside it
    /// were never approved.
    pub entry_file_only: bool,
    pub version: Option<(String, String)>,
    pub contract_version: Option<(String, String)>,
    pub capabilities_added: Vec<String>,
    pub capabilities_removed: Vec<String>,
    pub capabilities_altered: Vec<String>,
    /// The descriptor differs in something other than the above (roots,
    /// knowledge, operations, descriptions of the module itself).
    pub descriptor_other: bool,
}

impl PinChange {
    pub fn is_empty(&self) -> bool {
        *self == PinChange::default()
    }
}

impl fmt::Display for PinChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.entry_file_only {
            parts.push(
                "pinned by an older modhost that approved only the entry file, not the files beside it"
                    .to_owned(),
            );
        } else if self.bytes {
            parts.push("bytes changed".to_owned());
        }
        if let Some((old, new)) = &self.version {
            parts.push(format!("version {old} -> {new}"));
        }
        if let Some((old, new)) = &self.contract_version {
            parts.push(format!("contract {old} -> {new}"));
        }
        for (label, ids) in [
            ("capabilities added", &self.capabilities_added),
            ("capabilities removed", &self.capabilities_removed),
            ("capabilities altered", &self.capabilities_altered),
        ] {
            if !ids.is_empty() {
                parts.push(format!("{label}: {}", ids.join(", ")));
            }
        }
        if self.descriptor_other {
            parts.push("descriptor changed".to_owned());
        }
        f.write_str(&parts.join("; "))
    }
}

fn compare(record: &PinRecord, descriptor: &Descriptor, digest: &str) -> PinChange {
    let now = capability_digests(descriptor);
    let mut change = PinChange {
        bytes: record.digest != digest,
        entry_file_only: record.covers != PinCovers::Tree,
        ..PinChange::default()
    };
    if record.version != descriptor.version {
        change.version = Some((record.version.clone(), descriptor.version.clone()));
    }
    let contract = descriptor
        .contract_version
        .clone()
        .unwrap_or_else(|| "1".into());
    if record.contract_version != contract {
        change.contract_version = Some((record.contract_version.clone(), contract));
    }
    for (id, d) in &now {
        match record.capabilities.get(id) {
            None => change.capabilities_added.push(id.clone()),
            Some(old) if old != d => change.capabilities_altered.push(id.clone()),
            Some(_) => {}
        }
    }
    change.capabilities_removed = record
        .capabilities
        .keys()
        .filter(|id| !now.contains_key(*id))
        .cloned()
        .collect();
    let explained = change.version.is_some()
        || change.contract_version.is_some()
        || !change.capabilities_added.is_empty()
        || !change.capabilities_removed.is_empty()
        || !change.capabilities_altered.is_empty();
    change.descriptor_other =
        !explained && record.descriptor_digest != descriptor_digest(descriptor);
    change
}

/// blake3 of the descriptor's JSON.
pub fn descriptor_digest(descriptor: &Descriptor) -> String {
    json_digest(descriptor)
}

fn capability_digests(descriptor: &Descriptor) -> BTreeMap<String, String> {
    descriptor
        .capabilities
        .iter()
        .map(|c: &Capability| (c.id.clone(), json_digest(c)))
        .collect()
}

fn json_digest<T: Serialize>(value: &T) -> String {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    blake3::hash(&bytes).to_hex().to_string()
}

/// What [`Host::pin`](crate::Host::pin) recorded.
#[derive(Debug, Clone, Serialize)]
pub struct PinOutcome {
    pub record: PinRecord,
    /// How the module stood before: `unpinned`, `changed` or `pinned`.
    pub before: &'static str,
    /// For a module that had changed: what it was.
    pub change: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn descriptor(caps: &[(&str, &str)]) -> Descriptor {
        let caps: Vec<_> = caps
            .iter()
            .map(|(id, desc)| json!({"id": id, "description": desc, "input_schema": {"type": "object"}}))
            .collect();
        serde_json::from_value(json!({"id": "m", "version": "1.0.0", "capabilities": caps}))
            .unwrap()
    }

    #[test]
    fn pin_then_change_bytes_and_capabilities() {
        let home = tempfile::tempdir().unwrap();
        let lock = HomeLock::acquire(home.path()).unwrap();
        let mut pins = Pins::load_locked(home.path(), &lock).unwrap();
        let d = descriptor(&[("m.a", "A"), ("m.b", "B")]);
        assert_eq!(pins.standing(&d, "d1"), PinStanding::Unpinned);
        pins.pin(PinRecord::new(&d, "d1", None)).unwrap();

        let pins = Pins::load(home.path()).unwrap();
        assert_eq!(pins.standing(&d, "d1"), PinStanding::Pinned);

        let PinStanding::Changed(change) = pins.standing(&d, "d2") else {
            panic!()
        };
        assert!(change.bytes && change.capabilities_altered.is_empty());
        assert_eq!(change.to_string(), "bytes changed");

        let d2 = descriptor(&[("m.a", "A, but different"), ("m.c", "C")]);
        let standing = pins.standing(&d2, "d2");
        let PinStanding::Changed(change) = &standing else {
            panic!()
        };
        assert_eq!(change.capabilities_added, ["m.c"]);
        assert_eq!(change.capabilities_removed, ["m.b"]);
        assert_eq!(change.capabilities_altered, ["m.a"]);
        let refusal = standing.refusal("m").unwrap();
        assert!(
            refusal.contains("modhost pin m") && refusal.contains("capabilities added: m.c"),
            "{refusal}"
        );
    }

    /// The watch a long-running host asks on every call sees an unpin at
    /// once, and an unchanged, settled file is not parsed again.
    #[test]
    fn the_watch_sees_every_change_and_rereads_nothing_else() {
        let home = tempfile::tempdir().unwrap();
        let lock = HomeLock::acquire(home.path()).unwrap();
        let d = descriptor(&[("m.a", "A")]);
        Pins::load_locked(home.path(), &lock)
            .unwrap()
            .pin(PinRecord::new(&d, "d1", None))
            .unwrap();
        let watch = PinsWatch::default();
        let first = watch.current(home.path(), &Glance::default()).unwrap();
        assert_eq!(first.standing(&d, "d1"), PinStanding::Pinned);

        assert!(
            Pins::load_locked(home.path(), &lock)
                .unwrap()
                .unpin("m")
                .unwrap()
        );
        let after = watch.current(home.path(), &Glance::default()).unwrap();
        assert_eq!(after.standing(&d, "d1"), PinStanding::Unpinned);

        // Settled (changed over a second before the read): kept, not parsed.
        let path = home.path().join(PINS_FILE);
        let settled = FileIdentity::of_path(&path).unwrap();
        let later = SystemTime::now() + modhost_runner::file_identity::RACY * 2;
        assert!(settled.settled_at(later));
        *watch.cached.lock().unwrap() = Some((settled, std::sync::Arc::clone(&after)));
        assert!(std::sync::Arc::ptr_eq(
            &watch.current(home.path(), &Glance::default()).unwrap(),
            &after
        ));
    }

    /// The attack on the remembered standing: a pins.json rewritten
    /// between two calls (unpinned, pinned to other bytes) and a module
    /// rediscovered with another descriptor are each compared afresh.
    #[test]
    fn a_remembered_standing_never_outlives_its_pins_or_descriptor() {
        let home = tempfile::tempdir().unwrap();
        let lock = HomeLock::acquire(home.path()).unwrap();
        let d = std::sync::Arc::new(descriptor(&[("m.a", "A")]));
        let pin = |digest: &str| {
            Pins::load_locked(home.path(), &lock)
                .unwrap()
                .pin(PinRecord::new(&d, digest, None))
                .unwrap();
        };
        pin("d1");
        let watch = PinsWatch::default();
        let glance = Glance::default();
        let standing = |d: &std::sync::Arc<Descriptor>, digest: &str| {
            watch.standing(home.path(), d, digest, &glance).unwrap()
        };
        // As a settled file is kept: the same `Pins` on every call, so the
        // second look is the remembered standing.
        let settled = FileIdentity::of_path(&home.path().join(PINS_FILE)).unwrap();
        let kept = std::sync::Arc::new(Pins::load(home.path()).unwrap());
        *watch.cached.lock().unwrap() = Some((settled, std::sync::Arc::clone(&kept)));
        for _ in 0..2 {
            assert_eq!(standing(&d, "d1"), PinStanding::Pinned);
        }
        assert!(std::sync::Arc::ptr_eq(
            &watch.lock_standings()["m"].pins,
            &kept
        ));
        assert!(matches!(standing(&d, "d2"), PinStanding::Changed(_)));

        Pins::load_locked(home.path(), &lock)
            .unwrap()
            .unpin("m")
            .unwrap();
        assert_eq!(standing(&d, "d1"), PinStanding::Unpinned);
        pin("d2");
        assert!(matches!(standing(&d, "d1"), PinStanding::Changed(_)));
        assert_eq!(standing(&d, "d2"), PinStanding::Pinned);

        let altered = std::sync::Arc::new(descriptor(&[("m.a", "A, but different")]));
        let PinStanding::Changed(change) = standing(&altered, "d2") else {
            panic!("another descriptor is compared again")
        };
        assert_eq!(change.capabilities_altered, ["m.a"]);
    }

    #[test]
    fn unpin_removes_the_record() {
        let home = tempfile::tempdir().unwrap();
        let lock = HomeLock::acquire(home.path()).unwrap();
        let mut pins = Pins::load_locked(home.path(), &lock).unwrap();
        let d = descriptor(&[("m.a", "A")]);
        pins.pin(PinRecord::new(&d, "d1", None)).unwrap();
        assert!(pins.unpin("m").unwrap());
        assert!(!pins.unpin("m").unwrap());
        assert_eq!(
            Pins::load(home.path()).unwrap().standing(&d, "d1"),
            PinStanding::Unpinned
        );
    }

    #[test]
    fn an_unknown_format_is_refused_with_a_remedy_and_left_alone() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join(PINS_FILE);
        let text = b"{\"format\": 99, \"modules\": {}}";
        std::fs::write(&path, text).unwrap();
        let err = Pins::load(home.path()).unwrap_err();
        assert!(matches!(err, PinsError::UnknownFormat { format: 99, .. }));
        assert!(err.to_string().contains("move the file aside"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), text);
    }

    #[test]
    fn a_format_1_pin_covers_only_the_entry_file_and_counts_as_changed() {
        let home = tempfile::tempdir().unwrap();
        let d = descriptor(&[("m.a", "A")]);
        let mut record = serde_json::to_value(PinRecord::new(&d, "d1", None)).unwrap();
        record.as_object_mut().unwrap().remove("covers");
        let file = json!({"format": 1, "modules": {"m": record}});
        std::fs::write(home.path().join(PINS_FILE), file.to_string()).unwrap();
        let pins = Pins::load(home.path()).unwrap();
        let PinStanding::Changed(change) = pins.standing(&d, "d1") else {
            panic!("a format-1 pin must not approve a tree")
        };
        assert!(
            change.to_string().contains("only the entry file"),
            "{change}"
        );
    }

    #[test]
    fn corrupt_file_is_an_error_naming_it_and_is_left_alone() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join(PINS_FILE);
        std::fs::write(&path, b"{ not json").unwrap();
        let err = Pins::load(home.path()).unwrap_err();
        assert!(matches!(err, PinsError::Corrupt { .. }));
        assert!(
            err.to_string().contains(&path.display().to_string()),
            "{err}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"{ not json");
    }
}

//! The compiled-component cache: `<home>/cache/components/`.
//!
//! Compiling a component takes hundreds of milliseconds; loading its
//! serialized form about a millisecond (a 0.3 MB component, `cargo bench --bench
//! wasm`). Entries are keyed by the
//! blake3 digest of the component's bytes and the engine's compatibility hash
//! (`Engine::precompile_compatibility_hash`), so a new wasmtime or a changed
//! engine configuration simply misses.
//!
//! Trust: `Component::deserialize` runs the bytes it is given as machine code,
//! so an entry is only deserialized when
//!
//! - the cache directory is owned by this user and writable by nobody else
//!   (created 0700; an existing directory is tightened to 0700, and a
//!   directory owned by someone else disables the cache), and
//! - the entry, opened without following symlinks, is a regular file owned by
//!   this user and writable by nobody else, and
//! - its header names the same component digest and compatibility hash, and
//!   the blake3 digest of its payload matches (this catches truncation and
//!   corruption; the ownership checks are what keep out anyone else's bytes),
//!   taken over the payload where no one can change it any more: a sealed
//!   memfd that wasmtime then maps without a copy (`sealed.rs`), or, where
//!   the kernel offers none, this process's own memory.
//!
//! Anything else (stale, foreign, corrupt, unreadable) is a miss: the component
//! is recompiled and the entry rewritten, never trusted and never a crash.
//! Writes are atomic: a temporary file in the same directory, fsync, rename.
//!
//! A miss costs seconds for a large component, so a compile is announced
//! ([`CompileAnnouncement`]), naming the module rather than the snapshot or
//! staging path it is compiled from: to the call's notification sink as
//! `progress` (which an MCP client that asked for progress receives), and to
//! the process's [`CompileWatcher`] (the CLI's status line on a terminal),
//! or else as one log line.

use std::fs::OpenOptions;
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use modproto::{Notification, ProgressParams};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::sealed::{CHUNK, Sealed, SealedWriter};
use crate::NotificationSink;
use crate::atomic_file::write_atomically;

/// Who shows a person that a component is being compiled: one per process
/// (the terminal is the process's), set once by the CLI.
pub trait CompileWatcher: Send + Sync + 'static {
    /// `module` started compiling (`bytes` of component).
    fn started(&self, module: &str, bytes: usize);
    /// `module` finished compiling after `elapsed`; `compiled` is false
    /// when the compile failed (the error is reported by the caller).
    fn finished(&self, module: &str, elapsed: Duration, compiled: bool);
}

static WATCHER: OnceLock<Box<dyn CompileWatcher>> = OnceLock::new();

/// Show every compile of this process through `watcher` instead of a log
/// line. Only the first call takes effect.
pub fn watch_compiles(watcher: impl CompileWatcher) {
    let _ = WATCHER.set(Box::new(watcher));
}

/// One compile, announced at its start and its end.
#[derive(Debug)]
pub(super) struct CompileAnnouncement {
    module: String,
    started: Instant,
    notifications: Option<NotificationSink>,
}

impl CompileAnnouncement {
    /// Announce that the component at `path` (`bytes` long) is compiled now.
    pub(super) fn start(
        path: &Path,
        bytes: usize,
        notifications: Option<&NotificationSink>,
    ) -> CompileAnnouncement {
        let module = module_name(path);
        match WATCHER.get() {
            Some(watcher) => watcher.started(&module, bytes),
            None => tracing::info!(
                "compiling module {module} ({:.1} MB) for this host; later runs load it from the cache",
                bytes as f64 / 1e6
            ),
        }
        let announcement = CompileAnnouncement {
            module,
            started: Instant::now(),
            notifications: notifications.cloned(),
        };
        if let Some(sink) = &announcement.notifications {
            announcement.tell(sink);
        }
        announcement
    }

    /// Say that the compile started on `sink` too: a call that waits for
    /// this compile (another call's, or the host's load ahead) hears why.
    pub(super) fn tell(&self, sink: &NotificationSink) {
        send_progress(
            sink,
            format!(
                "compiling module {} for this host (first run; later runs load it from the cache)",
                self.module
            ),
        );
    }

    /// The compile ended, `compiled` or failed.
    pub(super) fn finish(self, compiled: bool) {
        let elapsed = self.started.elapsed();
        if let Some(watcher) = WATCHER.get() {
            watcher.finished(&self.module, elapsed, compiled);
        }
    }
}

/// One `progress` at 0 with no total: the module's own reports follow and
/// must still count as increasing (MCP drops any that do not), so the
/// compile says only that it started.
fn send_progress(sink: &NotificationSink, message: String) {
    let params = ProgressParams {
        request_id: String::new(),
        progress: 0.0,
        total: None,
        message: Some(message),
    };
    if let Ok(params) = serde_json::to_value(params) {
        let _ = sink.send(Notification::new(modproto::METHOD_PROGRESS, Some(params)));
    }
}

/// The module a component file belongs to, as the operator names it: its
/// folder under `modules/` when it is installed there, else the file's stem
/// (a snapshot or install staging copy keeps the entry's file name).
pub(super) fn module_name(path: &Path) -> String {
    let folder = path.parent();
    let in_modules = folder
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .is_some_and(|n| n == "modules");
    let folder_name = folder
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| in_modules && !n.starts_with('.'));
    folder_name.unwrap_or_else(|| {
        path.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string())
    })
}

/// The first bytes of every entry; bump the version when the layout changes.
const MAGIC: &[u8; 16] = b"modhost-cwasm-v1";
/// magic, component digest, compatibility digest, payload digest, payload length.
const HEADER_LEN: usize = MAGIC.len() + 32 + 32 + 32 + 8;

/// A directory of serialized components, or no cache at all.
#[derive(Debug)]
pub(super) struct ComponentCache {
    dir: Option<PathBuf>,
    compatibility: [u8; 32],
}

impl ComponentCache {
    /// Open (creating, mode 0700) the cache at `dir`. A directory that cannot
    /// be made private to this user disables the cache, with the reason.
    pub(super) fn open(dir: &Path, engine: &Engine) -> (ComponentCache, Option<String>) {
        let compatibility = compatibility_digest(engine);
        match prepare_private_dir(dir) {
            Ok(()) => (
                ComponentCache {
                    dir: Some(dir.to_owned()),
                    compatibility,
                },
                None,
            ),
            Err(reason) => (
                ComponentCache {
                    dir: None,
                    compatibility,
                },
                Some(format!(
                    "compiled-component cache disabled ({}): {reason}; components are compiled on every start",
                    dir.display()
                )),
            ),
        }
    }

    fn entry_path(&self, digest: &blake3::Hash) -> Option<PathBuf> {
        let compat = blake3::Hash::from(self.compatibility).to_hex();
        let dir = self.dir.as_ref()?;
        Some(dir.join(format!("{}.{}.cwasm", digest.to_hex(), &compat[..16])))
    }

    /// The cached component for these bytes, if a trustworthy entry exists.
    pub(super) fn get(&self, engine: &Engine, digest: &blake3::Hash) -> Option<Component> {
        let path = self.entry_path(digest)?;
        let entry = match read_entry(&path, digest, &self.compatibility, Keep::SealedIfPossible) {
            Ok(Some(entry)) => entry,
            Ok(None) => return None,
            Err(reason) => {
                tracing::debug!("ignoring compiled cache entry {}: {reason}", path.display());
                return None;
            }
        };
        match deserialize_own_entry(engine, &entry) {
            Ok(component) => Some(component),
            Err(e) => {
                tracing::debug!("ignoring compiled cache entry {}: {e}", path.display());
                None
            }
        }
    }

    /// Store the serialized `component`. Failure to cache is never fatal.
    pub(super) fn put(&self, digest: &blake3::Hash, component: &Component) {
        let Some(path) = self.entry_path(digest) else {
            return;
        };
        let result = component
            .serialize()
            .map_err(|e| std::io::Error::other(e.to_string()))
            .and_then(|payload| write_entry(&path, digest, &self.compatibility, &payload));
        if let Err(e) = result {
            tracing::warn!(
                "could not write compiled cache entry {}: {e}",
                path.display()
            );
        }
    }
}

/// A stable digest of the engine's compatibility hash.
fn compatibility_digest(engine: &Engine) -> [u8; 32] {
    struct Blake3Hasher(blake3::Hasher);
    impl Hasher for Blake3Hasher {
        fn finish(&self) -> u64 {
            let digest = self.0.finalize();
            let mut first = [0u8; 8];
            first.copy_from_slice(&digest.as_bytes()[..8]);
            u64::from_le_bytes(first)
        }
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
    }
    let mut hasher = Blake3Hasher(blake3::Hasher::new());
    engine.precompile_compatibility_hash().hash(&mut hasher);
    *hasher.0.finalize().as_bytes()
}

fn prepare_private_dir(dir: &Path) -> Result<(), String> {
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("creating {}: {e}", parent.display()))?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("creating it: {e}")),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| format!("inspecting it: {e}"))?;
    if !meta.is_dir() {
        return Err("it is not a directory".into());
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(format!(
            "it is owned by uid {}, not this user (uid {me})",
            meta.uid()
        ));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("making it private (0700): {e}"))?;
    }
    Ok(())
}

/// An entry's payload, verified, where no one can change it any more.
enum VerifiedPayload {
    /// In a sealed memfd, which wasmtime maps without a copy (`sealed.rs`).
    Sealed(Sealed),
    /// In this process's memory, where memfds are unavailable.
    InMemory(Vec<u8>),
}

impl VerifiedPayload {
    #[cfg(test)]
    fn contents(&self) -> Vec<u8> {
        match self {
            VerifiedPayload::Sealed(sealed) => sealed.contents().unwrap(),
            VerifiedPayload::InMemory(bytes) => bytes.clone(),
        }
    }
}

/// Where a payload is kept once read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// In a sealed memfd where the kernel offers one, else in memory.
    SealedIfPossible,
    /// In memory even where a memfd is offered (the tests of that path).
    #[cfg(test)]
    InMemory,
}

/// Read and verify an entry; `Ok(None)` when there is none.
fn read_entry(
    path: &Path,
    digest: &blake3::Hash,
    compatibility: &[u8; 32],
    keep: Keep,
) -> Result<Option<VerifiedPayload>, String> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path);
    let mut file = match file {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("opening: {e}")),
    };
    // Checked on the open descriptor, so nothing can be swapped in between.
    let meta = file.metadata().map_err(|e| format!("inspecting: {e}"))?;
    let me = rustix::process::geteuid().as_raw();
    if !meta.is_file() || meta.uid() != me || meta.mode() & 0o022 != 0 {
        return Err("not a private regular file of this user".into());
    }
    let mut header = [0u8; HEADER_LEN];
    file.read_exact(&mut header)
        .map_err(|_| "not a modhost compiled-component entry".to_owned())?;
    let (payload_digest, payload_len) = parse_header(&header, digest, compatibility)?;
    let payload_len = usize::try_from(payload_len).map_err(|_| "truncated".to_owned())?;
    let writer = match keep {
        Keep::SealedIfPossible => SealedWriter::new("modhost-compiled-component")
            .inspect_err(|e| tracing::debug!("reading compiled components into memory: {e}"))
            .ok(),
        #[cfg(test)]
        Keep::InMemory => None,
    };
    // The digest is taken over what is kept, once nothing can change it:
    // the sealed memfd's contents, or this process's own copy.
    let (payload, kept_digest) = match writer {
        Some(mut writer) => {
            copy_payload(&mut file, payload_len, |chunk| {
                writer
                    .write_all(chunk)
                    .map_err(|e| format!("copying into a memfd: {e}"))
            })?;
            let sealed = writer
                .seal()
                .map_err(|e| format!("sealing its memfd: {e}"))?;
            let kept_digest = sealed
                .digest()
                .map_err(|e| format!("reading its memfd: {e}"))?;
            (VerifiedPayload::Sealed(sealed), kept_digest)
        }
        None => {
            let mut bytes = Vec::with_capacity(payload_len);
            copy_payload(&mut file, payload_len, |chunk| {
                bytes.extend_from_slice(chunk);
                Ok(())
            })?;
            let kept_digest = blake3::hash(&bytes);
            (VerifiedPayload::InMemory(bytes), kept_digest)
        }
    };
    if kept_digest.as_bytes() != &payload_digest {
        return Err("corrupt (payload digest mismatch)".into());
    }
    Ok(Some(payload))
}

/// Hand the `len` bytes after the header to `put`, a chunk at a time; an
/// entry shorter or longer than its header says is refused.
fn copy_payload(
    file: &mut std::fs::File,
    len: usize,
    mut put: impl FnMut(&[u8]) -> Result<(), String>,
) -> Result<(), String> {
    let mut chunk = vec![0u8; CHUNK];
    let mut left = len;
    while left > 0 {
        let n = match file.read(&mut chunk[..left.min(CHUNK)]) {
            Ok(0) => return Err("truncated".into()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("reading: {e}")),
        };
        put(&chunk[..n])?;
        left -= n;
    }
    let beyond = file
        .read(&mut chunk[..1])
        .map_err(|e| format!("reading: {e}"))?;
    if beyond != 0 {
        return Err("longer than its header says".into());
    }
    Ok(())
}

/// Check an entry's header against the component and engine it must be
/// for; its payload's digest and length.
fn parse_header(
    header: &[u8; HEADER_LEN],
    digest: &blake3::Hash,
    compatibility: &[u8; 32],
) -> Result<([u8; 32], u64), String> {
    if &header[..MAGIC.len()] != MAGIC {
        return Err("not a modhost compiled-component entry".into());
    }
    let field = |n: usize| &header[MAGIC.len() + 32 * n..MAGIC.len() + 32 * (n + 1)];
    if field(0) != digest.as_bytes() {
        return Err("it is for other component bytes".into());
    }
    if field(1) != compatibility {
        return Err("it was compiled by an incompatible engine".into());
    }
    let mut payload_digest = [0u8; 32];
    payload_digest.copy_from_slice(field(2));
    let mut length = [0u8; 8];
    length.copy_from_slice(&header[MAGIC.len() + 96..]);
    Ok((payload_digest, u64::from_le_bytes(length)))
}

/// Deserialize a payload that [`read_entry`] verified.
#[allow(unsafe_code)]
fn deserialize_own_entry(
    engine: &Engine,
    payload: &VerifiedPayload,
) -> wasmtime::Result<Component> {
    // SAFETY: `Component::deserialize` (and `deserialize_file`) require bytes
    // produced by `Component::serialize` of a compatible engine, because
    // they map them as executable code, and the file must not change while
    // mapped. These bytes were: `read_entry` only returns the payload of a
    // regular file (not a symlink) owned by this user, writable by no one
    // else, inside a directory this host created 0700 and owns; the header
    // names this component's digest and this engine's compatibility hash, and
    // the payload's blake3 digest matches the one written beside it by
    // `write_entry`, which only ever writes `Component::serialize` output.
    // That digest was taken over what is deserialized here, once nothing
    // could change it: this process's own copy, or a memfd sealed against
    // writing, growing and shrinking before it was hashed, mapped through a
    // path checked to open that very memfd in procfs (else read through its
    // descriptor). The only party able to forge an entry is this user, who
    // can already run anything as the host. wasmtime also re-checks the
    // engine configuration.
    match payload {
        VerifiedPayload::Sealed(sealed) => {
            let mapped = sealed
                .verified_path()
                .map_err(wasmtime::Error::from)
                .and_then(|path| unsafe { Component::deserialize_file(engine, path) });
            match mapped {
                Ok(component) => Ok(component),
                // No usable /proc, or a kernel that will not map it: the
                // same sealed bytes, copied through the descriptor.
                Err(e) => {
                    tracing::debug!("mapping a sealed compiled component failed ({e}); copying it");
                    let bytes = sealed.contents()?;
                    unsafe { Component::deserialize(engine, bytes) }
                }
            }
        }
        VerifiedPayload::InMemory(bytes) => unsafe { Component::deserialize(engine, bytes) },
    }
}

fn write_entry(
    path: &Path,
    digest: &blake3::Hash,
    compatibility: &[u8; 32],
    payload: &[u8],
) -> std::io::Result<()> {
    write_atomically(path, |file| {
        file.write_all(MAGIC)?;
        file.write_all(digest.as_bytes())?;
        file.write_all(compatibility)?;
        file.write_all(blake3::hash(payload).as_bytes())?;
        file.write_all(&(payload.len() as u64).to_le_bytes())?;
        file.write_all(payload)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read `path` as the entry for `digest`, its payload's contents.
    fn verified(
        path: &Path,
        digest: &blake3::Hash,
        compat: &[u8; 32],
        keep: Keep,
    ) -> Result<Option<Vec<u8>>, String> {
        read_entry(path, digest, compat, keep).map(|p| p.map(|p| p.contents()))
    }

    #[test]
    fn entries_are_verified_field_by_field_whether_sealed_or_in_memory() {
        let digest = blake3::hash(b"component bytes");
        let compat = [7u8; 32];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("entry");
        let payload: Vec<u8> = (0..3 * CHUNK + 17).map(|i| (i % 251) as u8).collect();
        write_entry(&path, &digest, &compat, &payload).unwrap();
        // The temporary file is gone after the rename.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let bytes = std::fs::read(&path).unwrap();
        let tampered = |name: &str, change: &dyn Fn(&mut Vec<u8>)| {
            let mut changed = bytes.clone();
            change(&mut changed);
            let path = dir.path().join(name);
            std::fs::write(&path, changed).unwrap();
            path
        };
        let cut = tampered("cut", &|b| b.truncate(b.len() - 1));
        let longer = tampered("longer", &|b| b.push(0));
        let flipped = tampered("flipped", &|b| *b.last_mut().unwrap() ^= 1);
        let short = tampered("short", &|b| b.truncate(5));
        for keep in [Keep::SealedIfPossible, Keep::InMemory] {
            assert_eq!(
                verified(&path, &digest, &compat, keep).unwrap().unwrap(),
                payload
            );
            let refused = |path: &Path, digest: &blake3::Hash, compat: &[u8; 32]| {
                verified(path, digest, compat, keep).unwrap_err()
            };
            assert!(refused(&path, &blake3::hash(b"other"), &compat).contains("other component"));
            assert!(refused(&path, &digest, &[8u8; 32]).contains("incompatible"));
            assert_eq!(refused(&cut, &digest, &compat), "truncated");
            assert!(refused(&longer, &digest, &compat).contains("longer"));
            assert!(refused(&flipped, &digest, &compat).contains("corrupt"));
            assert!(refused(&short, &digest, &compat).contains("not a modhost"));
        }
        // On this machine (Linux with /proc) the payload is sealed, not copied.
        assert!(matches!(
            read_entry(&path, &digest, &compat, Keep::SealedIfPossible),
            Ok(Some(VerifiedPayload::Sealed(_)))
        ));
    }

    #[test]
    fn symlinked_and_shared_entries_are_refused() {
        let digest = blake3::hash(b"component bytes");
        let compat = [7u8; 32];
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        write_entry(&real, &digest, &compat, b"payload").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let read = |path: &Path| verified(path, &digest, &compat, Keep::SealedIfPossible);
        assert!(read(&link).is_err());
        assert_eq!(read(&real).unwrap().expect("an entry"), b"payload");
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(read(&real).is_err());
        assert!(matches!(read(&dir.path().join("missing")), Ok(None)));
    }

    #[test]
    fn the_cache_dir_is_made_private() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("cache/components");
        prepare_private_dir(&dir).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        prepare_private_dir(&dir).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        let file = home.path().join("file");
        std::fs::write(&file, b"").unwrap();
        assert!(prepare_private_dir(&file).is_err());
    }
}

#[cfg(test)]
mod announcement_tests {
    use super::module_name;
    use std::path::Path;

    #[test]
    fn a_compile_names_the_module_never_a_snapshot_or_staging_path() {
        assert_eq!(
            module_name(Path::new("/h/modules/files/files.wasm")),
            "files"
        );
        assert_eq!(
            module_name(Path::new("/h/modules/notes/main.wasm")),
            "notes"
        );
        assert_eq!(
            module_name(Path::new("/h/cache/snapshots/ab12cd/files.wasm")),
            "files"
        );
        assert_eq!(
            module_name(Path::new("/h/modules/.install-x1y2/files.wasm")),
            "files"
        );
    }
}

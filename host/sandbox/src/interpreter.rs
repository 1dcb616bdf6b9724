//! The interpreter chain of a program: what the kernel executes to run it.
//!
//! A confined module may execute its entry file and nothing else it did not
//! declare, but running a script executes more: `#!/usr/bin/env node` runs
//! `env`, which runs the `node` that PATH names, which the kernel starts
//! through the ELF loader (`/lib64/ld-linux-x86-64.so.2`) its `PT_INTERP`
//! names. [`resolve`] follows that chain from the entry file, in the
//! environment the module will get (the host's `PATH`, which the environment
//! allowlist passes), so a stock interpreter runs confined with no
//! configuration, wherever it is installed.
//!
//! Design decisions:
//!
//! - **Execute on files, read on prefixes.** Every file of the chain (and the
//!   ELF loader of each) gets read and execute; the installation prefix of an
//!   interpreter outside the system folders (a pyenv or nvm version, `/opt`,
//!   a conda env: the parent of its `bin/`) gets read only, for its standard
//!   library and shared objects; so does that of each granted binary (an
//!   MCP server module's `python3` or `node`, started by its program).
//!   Shared objects are mapped, not executed, and landlock does not control
//!   `mmap`.
//! - **A venv is two prefixes.** Python finds its venv through the path it
//!   was started as (`<venv>/bin/python`, a symlink) and its standard library
//!   through `pyvenv.cfg`'s `home =`; both are granted read.
//! - **A prefix that would hold secrets is not granted.** A prefix must have
//!   a `lib/` folder, and `/`, a home folder (`/root`, `/home/<user>`) or a
//!   folder with `.ssh` or `.gnupg` in it never is: an interpreter in
//!   `~/bin` gets only its own file.
//! - **Cached by the entry's identity.** Resolution reads a few headers and
//!   looks through PATH; it is cached per (entry path, its mtime and size),
//!   with the PATH it looked commands up in, if it did, so a call pays it
//!   once per module version. PATH is asked for only when a `#!` line runs
//!   `env`: a compiled module never makes the host ask a version manager
//!   (`runner::native::environment`).
//! - **The chain is what may run, not how it starts.** For a call whose
//!   capability declares no spawns the host starts an `env` line's command
//!   itself (`crate::launch`, which reads the line strictly, as `env`
//!   does); what it starts must be a file of this chain.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// How many hops (script to interpreter to loader) are followed.
const MAX_DEPTH: usize = 5;

/// The bytes of a file read to find a shebang or an ELF `PT_INTERP`.
const HEADER_BYTES: u64 = 16 * 1024;

/// What running a program needs beyond the program itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chain {
    /// Files executed on the way (canonical): the entry itself, interpreters,
    /// `env`, ELF loaders.
    pub executables: Vec<PathBuf>,
    /// Installation prefixes the interpreters read (canonical).
    pub read: Vec<PathBuf>,
}

impl Chain {
    fn add_read(&mut self, dir: PathBuf) {
        if !self.read.contains(&dir) {
            self.read.push(dir);
        }
    }
}

/// The chain of `program` (and of each of `more`, granted binaries that may
/// be scripts too), with commands looked up in the PATH `path_env` gives,
/// asked only when a command is looked up.
pub fn resolve(program: &Path, more: &[PathBuf], path_env: &dyn Fn() -> Option<OsString>) -> Chain {
    let mut chain = Chain::default();
    for file in std::iter::once(program).chain(more.iter().map(PathBuf::as_path)) {
        follow(file, path_env, &mut chain, 0);
    }
    // A granted binary is what the module runs its work with (the `node` or
    // `python3` an MCP server module starts): its installation prefix is
    // read as a shebang's interpreter's is, so one installed by a version
    // manager finds its standard library.
    for binary in more {
        grant_prefixes(binary, &mut chain);
    }
    chain
}

/// [`resolve`] with the PATH a module that looks commands up gets
/// ([`crate::environment::module_path`]), cached by the
/// files' identities.
pub(crate) fn resolve_cached(program: &Path, more: &[PathBuf]) -> Arc<Chain> {
    type Key = Vec<(PathBuf, Option<(std::time::SystemTime, u64)>)>;
    /// A chain, and the PATH its resolution looked commands up in (`None`:
    /// it looked nothing up, and holds whatever PATH is).
    type Entry = (Arc<Chain>, Option<Option<OsString>>);
    static CACHE: Mutex<Option<HashMap<Key, Entry>>> = Mutex::new(None);
    let identity = |p: &Path| {
        let meta = std::fs::metadata(p).ok();
        let stamp = meta.and_then(|m| Some((m.modified().ok()?, m.len())));
        (p.to_path_buf(), stamp)
    };
    let module_path = crate::environment::module_path;
    let key: Key = std::iter::once(program)
        .chain(more.iter().map(PathBuf::as_path))
        .map(identity)
        .collect();
    // The lock is held only to copy an entry out or put one in: asking for
    // PATH may run a version manager (`module_path`), and resolving reads
    // files, neither of which other calls should queue behind.
    let cached = CACHE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|map| map.get(&key).cloned());
    if let Some((chain, looked_up_in)) = cached
        && looked_up_in
            .as_ref()
            .is_none_or(|path| *path == module_path())
    {
        return chain;
    }
    // Asked once per resolution, so every lookup of it sees the same PATH.
    let looked_up_in = std::cell::OnceCell::new();
    let chain = Arc::new(resolve(program, more, &|| {
        looked_up_in.get_or_init(module_path).clone()
    }));
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let map = cache.get_or_insert_with(HashMap::new);
    // Bounded: a host runs a few dozen modules; a changed file makes a new key.
    if map.len() > 512 {
        map.clear();
    }
    map.insert(key, (Arc::clone(&chain), looked_up_in.into_inner()));
    chain
}

fn follow(file: &Path, path_env: &dyn Fn() -> Option<OsString>, chain: &mut Chain, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    let Ok(canonical) = std::fs::canonicalize(file) else {
        return;
    };
    // Only a file is executed; a rule on a folder would grant everything
    // beneath it.
    if !std::fs::metadata(&canonical).is_ok_and(|m| m.is_file()) {
        return;
    }
    if chain.executables.contains(&canonical) {
        return;
    }
    chain.executables.push(canonical.clone());
    let Some(header) = read_header(&canonical) else {
        return;
    };
    if let Some((interpreter, args)) = shebang(&header) {
        follow(&interpreter, path_env, chain, depth + 1);
        let is_env = std::fs::canonicalize(&interpreter)
            .ok()
            .and_then(|p| p.file_name().map(|n| n == "env"))
            .unwrap_or(false);
        let target = if is_env {
            env_command(&args).and_then(|cmd| lookup(&cmd, path_env().as_deref()))
        } else {
            Some(interpreter)
        };
        if let Some(target) = target {
            if is_env {
                follow(&target, path_env, chain, depth + 1);
            }
            grant_prefixes(&target, chain);
        }
    } else if let Some(loader) = elf_interpreter(&header) {
        follow(&loader, path_env, chain, depth + 1);
    }
}

/// Whether a module started from `program` gets `PATH` with version-manager
/// shims resolved (`runner::native::environment`): unless it is a compiled
/// program (an ELF file) granted no executables, which can execute nothing
/// but its own files when confined. A file that cannot be read counts as a
/// script: resolving is never wrong, only slower.
pub fn path_needs_resolving(program: &Path, grants_executables: bool) -> bool {
    grants_executables || !is_compiled(program)
}

/// Whether `program` is a regular file that starts with the ELF magic number.
fn is_compiled(program: &Path) -> bool {
    read_start(program, 4).is_some_and(|start| start == b"\x7fELF")
}

/// The first [`HEADER_BYTES`] of the regular file at `path`.
fn read_header(path: &Path) -> Option<Vec<u8>> {
    read_start(path, HEADER_BYTES)
}

/// The first `limit` bytes of the regular file at `path`. Opened without
/// blocking and checked on the descriptor: a path swapped for a FIFO after
/// the `is_file` check above (by a module with a write grant over a folder
/// on its PATH), or put where a module's program was, must not hold this
/// thread, and with it every preparation (or the runtime's thread).
pub(crate) fn read_start(path: &Path, limit: u64) -> Option<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut header = Vec::new();
    file.take(limit).read_to_end(&mut header).ok()?;
    Some(header)
}

/// `#!interpreter [arg]`: the interpreter and its argument words.
fn shebang(header: &[u8]) -> Option<(PathBuf, Vec<String>)> {
    let rest = header.strip_prefix(b"#!")?;
    let line = rest.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?.trim();
    let mut words = line.split_whitespace();
    let interpreter = PathBuf::from(words.next()?);
    Some((interpreter, words.map(str::to_owned).collect()))
}

/// The command `env` runs: the first word that is neither an option (nor
/// an option's argument) nor a `NAME=value` assignment (`-S` splits its
/// argument into words, which follow).
///
/// Parsed as GNU `env`'s getopt does, clusters included: with `-vC / node`
/// the `/` is `-C`'s folder, not the command. Reading it as the command
/// would grant the module read and execute on whatever the word names (the
/// red team's `#!/usr/bin/env -S -vC / python3` got read on the whole
/// file system); [`follow`] also never treats a folder as an executable.
fn env_command(args: &[String]) -> Option<String> {
    let mut words: std::collections::VecDeque<&str> =
        args.iter().flat_map(|a| a.split_whitespace()).collect();
    while let Some(word) = words.pop_front() {
        if word == "--" {
            return words.pop_front().map(str::to_owned);
        }
        if let Some(long) = word.strip_prefix("--") {
            // `--unset NAME`, `--chdir DIR`; `--split-string S` is followed
            // by its words, read on like any others.
            if matches!(long, "unset" | "chdir") {
                words.pop_front();
            }
            continue;
        }
        if let Some(cluster) = word.strip_prefix('-') {
            for (at, letter) in cluster.char_indices() {
                let rest = &cluster[at + letter.len_utf8()..];
                match letter {
                    // The argument is the rest of the word, else the next word.
                    'u' | 'C' => {
                        if rest.is_empty() {
                            words.pop_front();
                        }
                        break;
                    }
                    // The split string's first word may be attached.
                    'S' => {
                        if !rest.is_empty() {
                            words.push_front(rest);
                        }
                        break;
                    }
                    _ => {}
                }
            }
            continue;
        }
        if word.contains('=') {
            continue;
        }
        return Some(word.to_owned());
    }
    None
}

/// `command` as `execvp` finds it in `path_env`.
fn lookup(command: &str, path_env: Option<&OsStr>) -> Option<PathBuf> {
    lookup_os(OsStr::new(command), path_env)
}

/// [`lookup`] of a command that may not be UTF-8 (`crate::launch`).
pub(crate) fn lookup_os(command: &OsStr, path_env: Option<&OsStr>) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    if command.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(command));
    }
    std::env::split_paths(path_env?)
        .map(|dir| dir.join(command))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Read on the installation prefix of the interpreter started as `started`
/// (and on its venv and the venv's base interpreter's prefix).
fn grant_prefixes(started: &Path, chain: &mut Chain) {
    // A venv: `<venv>/bin/python` next to `<venv>/pyvenv.cfg`.
    if let Some(venv) = started.parent().and_then(Path::parent)
        && let Ok(cfg) = std::fs::read_to_string(venv.join("pyvenv.cfg"))
    {
        if let Ok(venv) = std::fs::canonicalize(venv)
            && is_safe_prefix(&venv)
        {
            chain.add_read(venv);
        }
        let home = cfg.lines().find_map(|line| {
            let (key, value) = line.split_once('=')?;
            (key.trim() == "home").then(|| PathBuf::from(value.trim()))
        });
        // `home` is whatever the venv's author wrote: a venv shipped inside a
        // module names any folder it likes (`home = /proc/self/cwd/bin` is
        // the host's working directory, usually the workspace). Only a
        // folder that holds a Python standard library is a Python prefix.
        if let Some(prefix) = home
            .and_then(|bin| prefix_of_bin(&bin))
            .filter(|prefix| holds_python_stdlib(prefix))
        {
            chain.add_read(prefix);
        }
    }
    if let Ok(canonical) = std::fs::canonicalize(started)
        && let Some(prefix) = canonical.parent().and_then(prefix_of_bin)
    {
        chain.add_read(prefix);
    }
}

/// Whether `prefix/lib/python3.*/os.py` exists: a Python installation.
fn holds_python_stdlib(prefix: &Path) -> bool {
    std::fs::read_dir(prefix.join("lib")).is_ok_and(|entries| {
        entries.flatten().any(|entry| {
            entry.file_name().to_string_lossy().starts_with("python3")
                && entry.path().join("os.py").is_file()
        })
    })
}

/// The prefix whose `bin/` is `bin`, when it is one worth granting.
fn prefix_of_bin(bin: &Path) -> Option<PathBuf> {
    let bin = std::fs::canonicalize(bin).ok()?;
    if bin.file_name()? != "bin" {
        return None;
    }
    let prefix = bin.parent()?.to_path_buf();
    is_safe_prefix(&prefix).then_some(prefix)
}

/// Not `/`, not a home folder, not a folder that holds keys; has `lib/`.
fn is_safe_prefix(prefix: &Path) -> bool {
    let depth = prefix.components().count();
    let is_home = prefix == Path::new("/root")
        || prefix.parent() == Some(Path::new("/home"))
        || std::env::var_os("HOME").is_some_and(|h| Path::new(&h) == prefix);
    depth > 1
        && !is_home
        && prefix.join("lib").is_dir()
        && !prefix.join(".ssh").exists()
        && !prefix.join(".gnupg").exists()
}

/// The `PT_INTERP` of an ELF executable: the loader the kernel runs it with.
fn elf_interpreter(header: &[u8]) -> Option<PathBuf> {
    const PT_INTERP: u32 = 3;
    if header.get(..4)? != b"\x7fELF" {
        return None;
    }
    let wide = match header.get(4)? {
        1 => false,
        2 => true,
        _ => return None,
    };
    let little = *header.get(5)? == 1;
    let int = |at: usize, len: usize| -> Option<u64> {
        let bytes = header.get(at..at + len)?;
        let mut value = 0u64;
        for i in 0..len {
            let byte = if little { bytes[len - 1 - i] } else { bytes[i] };
            value = (value << 8) | u64::from(byte);
        }
        Some(value)
    };
    let (phoff, phentsize, phnum) = if wide {
        (int(0x20, 8)?, int(0x36, 2)?, int(0x38, 2)?)
    } else {
        (int(0x1C, 4)?, int(0x2A, 2)?, int(0x2C, 2)?)
    };
    for i in 0..phnum {
        let at = usize::try_from(phoff + i * phentsize).ok()?;
        if int(at, 4)? != u64::from(PT_INTERP) {
            continue;
        }
        let (offset, size) = if wide {
            (int(at + 8, 8)?, int(at + 0x20, 8)?)
        } else {
            (int(at + 4, 4)?, int(at + 0x10, 4)?)
        };
        let start = usize::try_from(offset).ok()?;
        let bytes = header.get(start..start + usize::try_from(size).ok()?)?;
        let name = bytes.split(|b| *b == 0).next()?;
        let loader = PathBuf::from(std::str::from_utf8(name).ok()?);
        return loader.is_absolute().then_some(loader);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// The attack: a FIFO where a program was (swapped in by a module with
    /// a write grant over a folder on its PATH). Reading its header must
    /// not wait for a writer that never comes.
    #[test]
    fn a_fifo_in_place_of_a_program_is_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("tool");
        modhost_test_support::modules::make_fifo(&fifo, 0o755);
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || done.send(read_header(&fifo)).unwrap());
        let header = finished
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("reading a FIFO's header blocked");
        assert_eq!(header, None);
    }

    /// Only a regular ELF file granted nothing goes without the resolved
    /// PATH; the look never blocks, not even on a fifo no writer opens.
    #[test]
    fn only_a_compiled_program_granted_nothing_keeps_the_hosts_path() {
        let dir = tempfile::tempdir().unwrap();
        let elf = dir.path().join("elf");
        std::fs::write(&elf, b"\x7fELF\x02\x01\x01").unwrap();
        let sh = script(dir.path(), "script", "#!/bin/sh\n");
        let fifo = dir.path().join("fifo");
        modhost_test_support::modules::make_fifo(&fifo, 0o644);
        assert!(!path_needs_resolving(&elf, false));
        assert!(path_needs_resolving(&elf, true), "granted executables");
        assert!(path_needs_resolving(&sh, false));
        assert!(path_needs_resolving(&dir.path().join("missing"), false));
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = sender.send(path_needs_resolving(&fifo, false));
        });
        let needs = receiver
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("a fifo held the look at the program");
        assert!(needs, "a fifo is no compiled program");
    }

    #[test]
    fn an_elf_binary_brings_its_loader() {
        let sh = std::fs::canonicalize("/bin/sh").unwrap();
        let chain = resolve(&sh, &[], &|| None);
        assert_eq!(chain.executables[0], sh);
        assert!(
            chain.executables[1..]
                .iter()
                .any(|p| p.to_string_lossy().contains("ld-")),
            "{chain:?}"
        );
    }

    #[test]
    fn env_follows_path_and_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("opt/tool-1.0");
        std::fs::create_dir_all(prefix.join("bin")).unwrap();
        std::fs::create_dir_all(prefix.join("lib")).unwrap();
        let real = script(&prefix.join("bin"), "tool", "#!/bin/sh\n");
        let shims = dir.path().join("shims");
        std::fs::create_dir_all(&shims).unwrap();
        std::os::unix::fs::symlink(&real, shims.join("tool")).unwrap();
        let module = script(dir.path(), "m", "#!/usr/bin/env -S tool --flag\n");
        let path = std::env::join_paths([dir.path().join("empty"), shims]).unwrap();
        let chain = resolve(&module, &[], &|| Some(path.clone()));
        let real = std::fs::canonicalize(real).unwrap();
        let prefix = std::fs::canonicalize(prefix).unwrap();
        assert!(chain.executables.contains(&real), "{chain:?}");
        assert!(
            chain
                .executables
                .contains(&std::fs::canonicalize("/usr/bin/env").unwrap())
        );
        assert!(chain.read.contains(&prefix), "{chain:?}");
    }

    /// A compiled interpreter granted to the call (pyenv's `python3.11`,
    /// nvm's `node`) reads its own installation: its prefix is granted
    /// read, as a shebang's interpreter's is.
    #[test]
    fn a_granted_binary_brings_its_installation_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("versions/3.11.7");
        std::fs::create_dir_all(prefix.join("lib/python3.11")).unwrap();
        std::fs::create_dir_all(prefix.join("bin")).unwrap();
        let interpreter = prefix.join("bin/python3.11");
        std::fs::copy("/bin/sh", &interpreter).unwrap();
        let sh = std::fs::canonicalize("/bin/sh").unwrap();
        let chain = resolve(&sh, std::slice::from_ref(&interpreter), &|| None);
        let prefix = std::fs::canonicalize(prefix).unwrap();
        assert!(chain.read.contains(&prefix), "{chain:?}");
        assert!(
            chain
                .executables
                .contains(&std::fs::canonicalize(&interpreter).unwrap()),
            "{chain:?}"
        );
        // Its prefix only: the module's own program, an ELF in a system
        // folder, brings none.
        assert_eq!(chain.read, [prefix]);
    }

    #[test]
    fn a_prefix_that_holds_keys_is_not_granted() {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["bin", "lib", ".ssh"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        let tool = script(&dir.path().join("bin"), "tool", "#!/bin/sh\n");
        let module = script(dir.path(), "m", &format!("#!{}\n", tool.display()));
        let chain = resolve(&module, &[], &|| None);
        let dir = std::fs::canonicalize(dir.path()).unwrap();
        assert!(!chain.read.iter().any(|p| dir.starts_with(p)), "{chain:?}");
        assert!(
            chain
                .executables
                .contains(&std::fs::canonicalize(tool).unwrap())
        );
    }

    /// Red team: a venv shipped inside a module names in its `pyvenv.cfg`
    /// a `home` that is no Python at all (the workspace, here with the
    /// `bin/` and `lib/` many projects have, or `/proc/self/cwd/bin`, the
    /// host's working directory): the module must not get read on it.
    #[test]
    fn a_venv_home_that_holds_no_python_is_not_granted() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("workspace");
        for sub in ["bin", "lib"] {
            std::fs::create_dir_all(workspace.join(sub)).unwrap();
        }
        std::fs::write(workspace.join("lib/secret.rb"), "token").unwrap();
        let venv = dir.path().join("modules/evil/venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        let python = script(&venv.join("bin"), "python3", "#!/usr/bin/python3\n");
        std::fs::write(
            venv.join("pyvenv.cfg"),
            format!("home = {}\n", workspace.join("bin").display()),
        )
        .unwrap();
        let module = script(dir.path(), "m", &format!("#!{}\n", python.display()));
        let chain = resolve(&module, &[], &|| None);
        let workspace = std::fs::canonicalize(&workspace).unwrap();
        assert!(!chain.read.contains(&workspace), "{chain:?}");

        // A real Python prefix named as home is still granted.
        let python_prefix = dir.path().join("opt/python-3.12");
        std::fs::create_dir_all(python_prefix.join("bin")).unwrap();
        std::fs::create_dir_all(python_prefix.join("lib/python3.12")).unwrap();
        std::fs::write(python_prefix.join("lib/python3.12/os.py"), "").unwrap();
        std::fs::write(
            venv.join("pyvenv.cfg"),
            format!("home = {}\n", python_prefix.join("bin").display()),
        )
        .unwrap();
        let chain = resolve(&module, &[], &|| None);
        let python_prefix = std::fs::canonicalize(python_prefix).unwrap();
        assert!(chain.read.contains(&python_prefix), "{chain:?}");
    }

    #[test]
    fn env_options_and_assignments_are_skipped() {
        let words = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(
            env_command(&words("-S A=1 node --x")).as_deref(),
            Some("node")
        );
        assert_eq!(
            env_command(&words("-u HOME python3")).as_deref(),
            Some("python3")
        );
        assert_eq!(env_command(&[]), None);
    }

    /// Red team: option clusters and attached arguments, where a word the
    /// host took for the command would be granted read and execute.
    #[test]
    fn env_option_arguments_are_never_the_command() {
        let words = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        for line in [
            "-S -vC / python3",
            "-S -vu /etc/shadow python3",
            "-S -iC / python3",
            "-S -C/ python3",
            "-S --chdir / python3",
            "-S --unset /etc/shadow python3",
            "-Spython3",
            "-S -- python3",
            "-S -v -S python3",
        ] {
            assert_eq!(
                env_command(&words(line)).as_deref(),
                Some("python3"),
                "{line}"
            );
        }
    }

    #[test]
    fn a_folder_is_never_an_executable() {
        let dir = tempfile::tempdir().unwrap();
        let module = script(dir.path(), "m", "#!/usr/bin/env -S -v /\n");
        let chain = resolve(&module, &[], &|| None);
        assert!(chain.executables.iter().all(|p| p.is_file()), "{chain:?}");
        assert!(
            !chain.executables.contains(&PathBuf::from("/")),
            "{chain:?}"
        );
    }
}

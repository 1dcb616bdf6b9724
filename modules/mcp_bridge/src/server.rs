//! Starting the MCP server for one call, and ending it.
//!
//! Design decisions:
//!
//! - **The server is the bridge's child,** started after the bridge read its
//!   request, so it runs inside everything the host set up for the call:
//!   the landlock domain and seccomp filter of the call's grants, its
//!   process group (killed when the call ends, cancelled or times out), its
//!   memory cgroup and its environment. Nothing here widens that; the
//!   bridge cannot leave it either.
//! - **Its stdin and stdout are the bridge's pipes,** never the bridge's own
//!   stdin and stdout: the server cannot read the host's request or write a
//!   line of the modhost protocol. Its stderr is the bridge's, so the host
//!   keeps its tail with the call's errors.
//! - **What the command line says, and no shell.** The program is the
//!   granted binary's path; `{module}` and `{roots}` are replaced
//!   ([`crate::manifest`]); the working folder is the call's first root
//!   (`/` when it has none, where nothing but the system is readable).
//! - **Defaults that keep a server inside its snapshot.** `PYTHONSAFEPATH`
//!   keeps Python from putting the working folder (a root the caller
//!   fills) first on its import path, and `PYTHONDONTWRITEBYTECODE` from
//!   trying to write beside read-only code; with a read-write `state` root,
//!   `HOME`, `XDG_*_HOME` and `TMPDIR` point into it, so caches land there.
//!   The manifest's `env` overrides each.
//! - **Ended before the answer.** Once the result is read, the bridge closes
//!   the server's stdin, kills it and reaps it, and only then answers; the
//!   host then kills the whole process group, so a child the server left
//!   behind does not outlive the call either.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use modproto::{Access, GrantedRoot, RootKind};

use crate::error::{BridgeError, BridgeKind};
use crate::manifest::{MODULE_PLACEHOLDER, Manifest, ROOTS_PLACEHOLDER};
use crate::session::{OfferedRoot, Session, read_lines};

/// A root granted to this call, in the order the server sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallRoot {
    pub(crate) name: String,
    pub(crate) root: GrantedRoot,
}

/// Everything needed to start the server once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerSpec {
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<String>,
    /// Set on top of the bridge's own environment.
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) cwd: PathBuf,
    pub(crate) roots: Vec<CallRoot>,
}

impl ServerSpec {
    /// The server of `manifest` in `folder`, its command found among the
    /// call's granted `binaries`, for a call granted `roots`.
    pub(crate) fn new(
        manifest: &Manifest,
        folder: &Path,
        binaries: &BTreeMap<String, String>,
        roots: Vec<CallRoot>,
    ) -> Result<ServerSpec, BridgeError> {
        let command = &manifest.server.command;
        let program = binaries.get(command).ok_or_else(|| {
            BridgeError::protocol(
                modproto::ModuleErrorKind::RootMissing,
                format!("the server's command `{command}` was not granted to this call"),
            )
            .with_remedy(format!(
                "set `{command} = \"/absolute/path/of/{command}\"` under [binaries] in the host's config.toml (the program itself, not a version manager's shim)"
            ))
        })?;
        let module = folder.to_string_lossy().into_owned();
        let expand = |text: &str| text.replace(MODULE_PLACEHOLDER, &module);
        let mut args = Vec::new();
        for arg in &manifest.server.args {
            if arg == ROOTS_PLACEHOLDER {
                args.extend(roots.iter().map(|r| r.root.path.clone()));
            } else {
                args.push(expand(arg));
            }
        }
        let mut env = BTreeMap::new();
        env.insert("PYTHONSAFEPATH".to_owned(), "1".to_owned());
        env.insert("PYTHONDONTWRITEBYTECODE".to_owned(), "1".to_owned());
        if let Some(state) = roots
            .iter()
            .find(|r| r.root.kind == RootKind::State && r.root.access == Access::ReadWrite)
        {
            let state = &state.root.path;
            env.insert("HOME".to_owned(), state.clone());
            env.insert("XDG_CACHE_HOME".to_owned(), format!("{state}/.cache"));
            env.insert("XDG_CONFIG_HOME".to_owned(), format!("{state}/.config"));
            env.insert("XDG_DATA_HOME".to_owned(), format!("{state}/.local/share"));
            env.insert("TMPDIR".to_owned(), format!("{state}/tmp"));
        }
        for (name, value) in &manifest.server.env {
            env.insert(name.clone(), expand(value));
        }
        let cwd = roots
            .first()
            .map(|r| PathBuf::from(&r.root.path))
            .unwrap_or_else(|| PathBuf::from("/"));
        Ok(ServerSpec {
            program: PathBuf::from(program),
            args,
            env,
            cwd,
            roots,
        })
    }

    /// The roots as `roots/list` offers them.
    fn offered(&self) -> Vec<OfferedRoot> {
        self.roots
            .iter()
            .map(|r| OfferedRoot {
                name: r.name.clone(),
                path: r.root.path.clone(),
            })
            .collect()
    }
}

/// A running server.
#[derive(Debug)]
pub(crate) struct Server {
    child: Child,
}

impl Server {
    /// Start the server; its session reads lines of at most `line_limit`
    /// bytes.
    pub(crate) fn start(
        spec: &ServerSpec,
        line_limit: u64,
    ) -> Result<(Server, Session<ChildStdin>), BridgeError> {
        if let Some(tmp) = spec.env.get("TMPDIR") {
            // Made when the state root is granted writable; a failure shows
            // up in the server as a missing folder, which says it.
            let _ = std::fs::create_dir_all(tmp);
        }
        let mut child = Command::new(&spec.program)
            .args(&spec.args)
            .envs(&spec.env)
            .current_dir(&spec.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                BridgeError::new(
                    BridgeKind::ServerStartFailed,
                    format!(
                        "could not start the MCP server `{}` in {}: {e}",
                        spec.program.display(),
                        spec.cwd.display()
                    ),
                )
                .with_remedy("check server.command and args in mcp-server.toml and the binary's path under [binaries] in config.toml; `modhost doctor` shows what this machine confines")
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(BridgeError::new(
                BridgeKind::ServerStartFailed,
                "the MCP server was started without its pipes",
            )
            .with_remedy("this is a bug in modhost's MCP bridge; report it"));
        };
        let session = Session::new(stdin, read_lines(stdout, line_limit), spec.offered());
        Ok((Server { child }, session))
    }

    /// How the server ended, if it ends within `within` (for an error that
    /// says it exited).
    pub(crate) fn exit_within(&mut self, within: Duration) -> Option<String> {
        let until = Instant::now() + within;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Some(status.to_string()),
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(5)),
                _ => return None,
            }
        }
    }

    /// End the server: its stdin closed (the session dropped), then killed
    /// and reaped. Whatever it started is left to the host, which kills
    /// the call's whole process group.
    pub(crate) fn end(mut self, session: Session<ChildStdin>) {
        drop(session);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An error that says the server exited, with how, when it has exited.
pub(crate) fn with_exit(mut error: BridgeError, server: &mut Server) -> BridgeError {
    if matches!(
        error.kind,
        crate::error::Kind::Bridge(BridgeKind::ServerExited)
    ) && let Some(status) = server.exit_within(Duration::from_millis(200))
    {
        error.message = format!("{} ({status})", error.message);
    }
    error
}

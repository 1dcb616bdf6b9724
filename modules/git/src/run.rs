//! How this module runs git: the granted binary, no shell, a clean
//! environment, configuration that cannot run anything, bounded output.
//!
//! The workspace, and so its `.git/config` and `.gitattributes`, is input
//! the caller does not control either: a repository unpacked from anywhere
//! can name programs for git to run (`core.fsmonitor`, `diff.external`,
//! `diff.<driver>.textconv`, `filter.<driver>.clean`, `core.pager`,
//! `gpg.program` under `log.showSignature`). Every one of them is turned off
//! here, on top of the host's confinement (which lets a spawned git execute
//! nothing but itself and write nothing in the workspace):
//!
//! - **Environment**: cleared, then only what git needs: no `GIT_*` from
//!   outside, no system or user configuration (`GIT_CONFIG_NOSYSTEM`,
//!   `GIT_CONFIG_GLOBAL=/dev/null`), `HOME` and `XDG_CONFIG_HOME` at a
//!   folder that does not exist, no prompts, no lazy fetch of a partial
//!   clone, no replace refs, `LC_ALL=C` so messages are parseable.
//! - **Configuration on the command line**, which wins over the
//!   repository's: passed as `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/
//!   `GIT_CONFIG_VALUE_n` (key and value apart, so no name can smuggle an
//!   `=`): `core.fsmonitor=false`, `core.hooksPath=/dev/null`,
//!   `core.pager=cat`, `protocol.allow=never`, `log.showSignature=false`,
//!   colours off, and an empty `clean`/`smudge`/`process` command for every
//!   `filter.<driver>` the repository configures (found by a first
//!   `git config` run, which itself runs nothing).
//! - **Options**: `--no-pager`, `--no-optional-locks` (a status never
//!   rewrites the index), `--literal-pathspecs` (a path is a path, never
//!   `:(magic)`), `--git-dir`/`--work-tree` at the workspace (a
//!   `core.worktree` in the repository cannot point git elsewhere), and the
//!   capabilities add `--no-ext-diff`, `--no-textconv`.
//! - **Arguments from validated input only** ([`crate::input`]): a revision
//!   never starts with `-` and comes after `--end-of-options` (but in
//!   blame, which older gits misparse there: see `blame.rs`); paths come
//!   after `--`.
//! - **`safe.directory` is the workspace.** The host runs as whoever runs
//!   it (often root) and the workspace may belong to someone else; git would
//!   then refuse it as "dubious ownership", a guard against exactly the
//!   configuration attacks above, which this module neutralizes itself.
//! - **Bounded**: stdout is read up to the capability's limit, then git is
//!   killed and the answer marked cut; stderr is kept to its first 8 KiB.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use modsdk::ModError;

/// The stderr kept for an error message.
const STDERR_BYTES: u64 = 8 * 1024;

/// Configuration every run carries, before the repository's filters.
const HARDENING: &[(&str, &str)] = &[
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.untrackedCache", "false"),
    ("core.quotePath", "false"),
    ("core.attributesFile", "/dev/null"),
    ("protocol.allow", "never"),
    ("log.showSignature", "false"),
    ("color.ui", "never"),
    ("i18n.logOutputEncoding", "UTF-8"),
    ("blame.ignoreRevsFile", ""),
    ("diff.noprefix", "false"),
    ("diff.mnemonicPrefix", "false"),
    ("diff.relative", "false"),
    ("status.submoduleSummary", "false"),
    ("submodule.recurse", "false"),
];

/// Git, ready to run over one workspace.
#[derive(Debug)]
pub struct Git {
    binary: PathBuf,
    workspace: PathBuf,
    /// `key=value` pairs passed through `GIT_CONFIG_*`.
    config: Vec<(String, String)>,
}

/// What one run printed, up to its limit.
#[derive(Debug)]
pub struct Captured {
    pub stdout: Vec<u8>,
    /// Whether git had more to say than the limit (it was then stopped).
    pub cut: bool,
}

impl Git {
    /// Git `binary` over `workspace`, with the repository's filter drivers
    /// found and neutralized.
    pub fn open(binary: &Path, workspace: &Path) -> Result<Git, ModError> {
        refuse_linked_git_dir(workspace)?;
        let mut git = Git {
            binary: binary.to_owned(),
            workspace: workspace.to_owned(),
            config: HARDENING
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .chain([(
                    "safe.directory".to_owned(),
                    workspace.to_string_lossy().into_owned(),
                )])
                .collect(),
        };
        // Exit 1 means "no such key": no filter configured.
        let found = git.run_allowing(
            &[
                "config",
                "--null",
                "--name-only",
                "--get-regexp",
                r"^filter\..*\.(clean|smudge|process)$",
            ],
            64 * 1024,
            &[1],
        )?;
        for key in found.stdout.split(|&b| b == 0).filter(|k| !k.is_empty()) {
            git.config
                .push((String::from_utf8_lossy(key).into_owned(), String::new()));
        }
        Ok(git)
    }

    /// Run `git <args>`; stdout up to `limit` bytes. A non-zero exit is an
    /// error built from git's stderr.
    pub fn run(&self, args: &[&str], limit: usize) -> Result<Captured, ModError> {
        self.run_allowing(args, limit, &[])
    }

    fn run_allowing(
        &self,
        args: &[&str],
        limit: usize,
        ok_codes: &[i32],
    ) -> Result<Captured, ModError> {
        let mut child = self
            .command()
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                ModError::failed(format!("starting {}: {e}", self.binary.display())).with_remedy(
                    "the operator's [binaries] git in config.toml must name an executable git",
                )
            })?;
        let stderr = child.stderr.take().map(|stderr| {
            std::thread::spawn(move || {
                let mut kept = Vec::new();
                let mut stderr = stderr;
                let _ = stderr.by_ref().take(STDERR_BYTES).read_to_end(&mut kept);
                let _ = std::io::copy(&mut stderr, &mut std::io::sink());
                kept
            })
        });
        let mut stdout = Vec::new();
        if let Some(out) = child.stdout.take() {
            out.take(limit as u64 + 1)
                .read_to_end(&mut stdout)
                .map_err(|e| ModError::failed(format!("reading git's output: {e}")))?;
        }
        let cut = stdout.len() > limit;
        if cut {
            stdout.truncate(limit);
            let _ = child.kill();
        }
        let status = child
            .wait()
            .map_err(|e| ModError::failed(format!("waiting for git: {e}")))?;
        let stderr = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
        if cut || status.success() || status.code().is_some_and(|c| ok_codes.contains(&c)) {
            return Ok(Captured { stdout, cut });
        }
        Err(failure(args, status, &String::from_utf8_lossy(&stderr)))
    }

    /// The command every run starts from (see the module documentation).
    fn command(&self) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .env_clear()
            .current_dir(&self.workspace)
            .envs([
                ("PATH", "/usr/bin:/bin"),
                ("HOME", "/nonexistent"),
                ("XDG_CONFIG_HOME", "/nonexistent"),
                ("LC_ALL", "C"),
                ("GIT_CONFIG_NOSYSTEM", "1"),
                ("GIT_CONFIG_GLOBAL", "/dev/null"),
                ("GIT_CONFIG_SYSTEM", "/dev/null"),
                ("GIT_ATTR_NOSYSTEM", "1"),
                ("GIT_TERMINAL_PROMPT", "0"),
                ("GIT_NO_LAZY_FETCH", "1"),
                ("GIT_NO_REPLACE_OBJECTS", "1"),
                ("GIT_OPTIONAL_LOCKS", "0"),
            ])
            .env("GIT_CONFIG_COUNT", self.config.len().to_string());
        for (n, (key, value)) in self.config.iter().enumerate() {
            command
                .env(format!("GIT_CONFIG_KEY_{n}"), key)
                .env(format!("GIT_CONFIG_VALUE_{n}"), value);
        }
        command
            .arg("--no-pager")
            .arg("--no-optional-locks")
            .arg("--literal-pathspecs")
            .arg(format!(
                "--git-dir={}",
                self.workspace.join(".git").display()
            ))
            .arg(format!("--work-tree={}", self.workspace.display()));
        command
    }
}

/// A `.git` *file* (a linked worktree or a submodule) names a git folder
/// elsewhere, outside the one root this module is granted: git could not
/// read it, and would say only "not a git repository". Say why instead.
fn refuse_linked_git_dir(workspace: &Path) -> Result<(), ModError> {
    let dot_git = workspace.join(".git");
    if !dot_git.is_file() {
        return Ok(());
    }
    let pointer = std::fs::read_to_string(&dot_git).unwrap_or_default();
    let target = pointer
        .trim()
        .strip_prefix("gitdir:")
        .unwrap_or("elsewhere")
        .trim();
    Err(ModError::failed(format!(
        "workspace:.git is a link to the git folder {target} (a linked worktree or a submodule), outside the workspace this module may read"
    ))
    .with_remedy("run the host with --workspace set to the main checkout, the folder whose .git is a folder"))
}

/// A failed run as an error a caller can act on.
fn failure(args: &[&str], status: ExitStatus, stderr: &str) -> ModError {
    let said = stderr.trim();
    let message = format!(
        "git {} failed ({status}): {said}",
        args.first().copied().unwrap_or_default()
    );
    let lower = said.to_ascii_lowercase();
    if lower.contains("not a git repository") {
        ModError::not_found(message).with_remedy(
            "the workspace must be the top folder of a git repository (the one holding .git); run the host with --workspace set to it",
        )
    } else if [
        "unknown revision",
        "bad revision",
        "ambiguous argument",
        "invalid object name",
        "bad object",
        "no such ref",
    ]
    .iter()
    .any(|s| lower.contains(s))
    {
        ModError::not_found(message)
            .with_remedy("check the revision: git.log lists commits; branches and tags work too")
    } else if lower.contains("no such path") || lower.contains("does not exist") {
        ModError::not_found(message).with_remedy(
            "check the path, relative to the workspace; git.status lists changed files",
        )
    } else {
        ModError::failed(message)
    }
}

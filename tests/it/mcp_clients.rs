//! `modhost mcp` driven by three real MCP clients that no one here wrote:
//! the Python `mcp` package 1.x and 2.x and the official TypeScript SDK,
//! each through its own script (`tests/mcp/client_checks.py`,
//! `tests/mcp/ts/client_checks.mjs`), against a home this test prepares:
//!
//! - `files` (the real module), `hang` (never answers: cancellation),
//! - `slow` (a shell module that reports two progress steps),
//! - `net` (a shell module declaring `network: true`, so its verdict is
//!   `ask`: the client must be asked, through elicitation),
//! - a workspace given as `--workspace`, and a separate folder the client
//!   offers as its root, holding a file the workspace lacks.
//!
//! Each script checks the handshake (and `server/discover` where the client
//! speaks 2026-07-28), tools/list, a call, an error call, progress,
//! cancellation, roots, an elicited approval (approve runs, decline does
//! not) and `notifications/tools/list_changed` after `modhost disable` in
//! another process.
//!
//! The clients are installed inside the clone by `tests/setup` (through `tests/mcp/setup-clients`)
//! (`.ci/run` runs it). A missing client is a failure, never a skip, with
//! the command that installs it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Fixture, Home, binaries, write_file};

/// The whole script may take this long before the test calls it hung.
const SCRIPT_WATCHDOG: Duration = Duration::from_secs(300);

/// Found only in the client's root: a search that finds it searched there.
const ROOT_MARKER: &str = "rootonly-7f3a";

/// A module in POSIX sh that reports two progress steps, then answers a
/// little later (a builtin loop: it may run no other program), so the
/// answer is not read in the same chunk as the reports: the TypeScript SDK
/// drops a report it handles after the response.
const SLOW_SCRIPT: &str = r#"#!/bin/sh
IFS= read -r line
id=${line#*\"id\":}
id=${id%%,*}
case $line in
*'"method":"describe"'*)
  printf '%s\n' '{"jsonrpc":"2.0","id":'"$id"',"result":{"id":"slow","version":"1.0.0","title":"slow","description":"Counts to two, reporting progress.","capabilities":[{"id":"slow.count","title":"Count","description":"Count to two.","input_schema":{"type":"object"},"effects":{"reads":[],"writes":[],"network":false,"spawns":[],"cost":"trivial"}}]}}'
  ;;
*)
  rid=${line#*\"request_id\":\"}
  rid=${rid%%\"*}
  printf '%s\n' '{"jsonrpc":"2.0","method":"progress","params":{"request_id":"'"$rid"'","progress":1,"total":2,"message":"one"}}'
  printf '%s\n' '{"jsonrpc":"2.0","method":"progress","params":{"request_id":"'"$rid"'","progress":2,"total":2,"message":"two"}}'
  i=0
  while [ "$i" -lt 50000 ]; do i=$((i + 1)); done
  printf '%s\n' '{"jsonrpc":"2.0","id":'"$id"',"result":{"output":{"counted":2}}}'
  ;;
esac
"#;

/// A module in POSIX sh whose one capability declares `network: true` (so
/// the default verdict is `ask`) and says it ran.
const NET_SCRIPT: &str = r#"#!/bin/sh
IFS= read -r line
id=${line#*\"id\":}
id=${id%%,*}
case $line in
*'"method":"describe"'*)
  printf '%s\n' '{"jsonrpc":"2.0","id":'"$id"',"result":{"id":"net","version":"1.0.0","title":"net","description":"Stands for a module that reaches the network.","capabilities":[{"id":"net.fetch","title":"Fetch","description":"Say it ran.","input_schema":{"type":"object"},"effects":{"reads":[],"writes":[],"network":true,"spawns":[],"cost":"trivial"}}]}}'
  ;;
*)
  printf '%s\n' '{"jsonrpc":"2.0","id":'"$id"',"result":{"output":{"ran":true}}}'
  ;;
esac
"#;

pub(crate) fn mcp_dir() -> PathBuf {
    crate::support::tests_dir().join("mcp")
}

/// The home every client is driven against (each client gets its own).
pub(crate) struct ClientHome {
    pub(crate) home: Home,
    pub(crate) root: PathBuf,
}

pub(crate) fn client_home() -> ClientHome {
    let home = Home::new();
    home.install_files();
    home.install(Fixture::Hang, "hang");
    for (id, script) in [("slow", SLOW_SCRIPT), ("net", NET_SCRIPT)] {
        let folder = home.modules().join(id);
        write_file(&folder, id, script);
        let path = folder.join(id);
        let mut permissions = std::fs::metadata(&path).expect("script").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
        std::fs::set_permissions(&path, permissions).expect("chmod script");
        home.run(&["pin", id]).expect_code(0);
    }
    // The clients check approval per call of the `net` tool; the lockdown
    // its first (untrusted) result would start is `lockdown.rs`'s subject.
    home.write_config("[lockdown]\nenabled = false\n");
    write_file(&home.workspace(), "notes.txt", "hello\n");
    let root = home.outside().join("client-root");
    write_file(&root, "only-in-root.txt", format!("{ROOT_MARKER}\n"));
    ClientHome { home, root }
}

/// Run one client's script against a fresh home; it must print its checks
/// and end with "all MCP client checks passed".
fn drive(client: &str, program: &Path, script: &Path) {
    require_client(client, program);
    let setup = client_home();
    run_client_script(client, program, script, &setup, &[], &[]);
    setup.home.assert_no_module_processes();
}

/// Fail (never skip) when `client`'s `program` is not installed, with the
/// command that installs it.
pub(crate) fn require_client(client: &str, program: &Path) {
    if !program.exists() {
        let remedy =
            "install the clients with `tests/setup` (Python 3 with venv, and Node 20 with npm)";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!(
                "CI: the {client} MCP client is missing ({} does not exist): .ci/run should have installed it; {remedy}",
                program.display()
            );
        }
        panic!(
            "the {client} MCP client is not installed here ({} does not exist); {remedy}",
            program.display()
        );
    }
}

/// Run `program script args...` against `setup` (the script's environment
/// names its home, workspace, root and `hang` module, plus `env`); it must
/// print its checks and end with "all MCP client checks passed". What it
/// printed.
pub(crate) fn run_client_script(
    client: &str,
    program: &Path,
    script: &Path,
    setup: &ClientHome,
    args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
) -> String {
    let out_dir = tempfile::tempdir().expect("temp dir for output");
    let log = out_dir.path().join("log");
    let open_log = || {
        std::fs::File::options()
            .create(true)
            .append(true)
            .open(&log)
            .expect("log file")
    };
    let mut child = Command::new(program)
        .arg(script)
        .args(args)
        .envs(env.iter().copied())
        .env("MODHOST_BIN", &binaries().modhost)
        .env("MODHOST_HOME", setup.home.path())
        .env("MODHOST_TEST_WORKSPACE", setup.home.workspace())
        .env("MODHOST_TEST_ROOT", &setup.root)
        .env(
            "HANG_INSTALLED",
            setup.home.modules().join("hang").join("hang"),
        )
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(open_log())
        .stderr(open_log())
        .spawn()
        .unwrap_or_else(|e| panic!("run {}: {e}", program.display()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the client") {
            break Some(status);
        }
        if started.elapsed() > SCRIPT_WATCHDOG {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    match status {
        Some(status) if status.success() => {}
        Some(status) => panic!("the {client} client failed ({status}):\n{output}"),
        None => panic!("the {client} client did not finish within {SCRIPT_WATCHDOG:?}:\n{output}"),
    }
    assert!(output.contains("all MCP client checks passed"), "{output}");
    output
}

#[test]
fn the_python_mcp_1_client_drives_modhost_mcp() {
    drive(
        "Python mcp 1.x",
        &mcp_dir().join(".venv-mcp1/bin/python"),
        &mcp_dir().join("client_checks.py"),
    );
}

#[test]
fn the_python_mcp_2_client_drives_modhost_mcp() {
    drive(
        "Python mcp 2.x",
        &mcp_dir().join(".venv-mcp2/bin/python"),
        &mcp_dir().join("client_checks.py"),
    );
}

#[test]
fn the_typescript_sdk_drives_modhost_mcp() {
    let node_modules = mcp_dir().join("ts/node_modules/@modelcontextprotocol/sdk");
    let node = if node_modules.is_dir() {
        PathBuf::from("node")
    } else {
        // Not installed: report it as the missing client.
        node_modules
    };
    drive(
        "TypeScript SDK",
        &which(&node),
        &mcp_dir().join("ts/client_checks.mjs"),
    );
}

/// `program` found on PATH when it is a bare name.
pub(crate) fn which(program: &Path) -> PathBuf {
    if program.components().count() > 1 {
        return program.to_path_buf();
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| program.to_path_buf())
}

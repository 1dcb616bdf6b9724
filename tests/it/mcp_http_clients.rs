//! `modhost mcp --http` driven over streamable HTTP by software no one here
//! wrote: the official MCP conformance suite (npm
//! `@modelcontextprotocol/conformance`, server mode) and the three real
//! clients of `mcp_clients.rs` (Python `mcp` 1.x and 2.x, the TypeScript
//! SDK), each against a server this test starts on a port of its own.
//!
//! - **The conformance suite** runs through `tests/mcp/conformance/run.mjs`
//!   for 2026-07-28 and 2025-11-25 against a home with the bundled modules.
//!   Which scenarios apply is decided there, in three tables: the scenarios
//!   that run, the ones that do not with the reason (most call the suite's
//!   own fixture tools by name, `test_simple_text` and the like, and modhost
//!   names every tool `<module>__<capability>`; the rest need prompts,
//!   resources, completions or logging, which modhost does not offer), and
//!   the single checks of a running scenario that name a fixture tool. Every
//!   other check must pass, and every scenario the suite lists for a
//!   revision must be in one of the tables, so a new suite version cannot
//!   add a scenario nobody looked at.
//! - **The clients** run their `mcp_clients.rs` scripts with `--http URL`:
//!   the handshake (and `server/discover` for mcp 2.x), tools/list, a call,
//!   an error call, progress, cancellation (the call's module process must
//!   be gone), an `ask` tool approved through elicitation (it starts exactly
//!   once, counted by the module itself) and declined (it never starts), and
//!   list changes after `modhost disable` in another process. The roots
//!   check is stdio's only: over HTTP a client's roots name the client's
//!   folders, never the server's workspace.
//!
//! Nothing here skips. Under CI (`CI=true`, as `.ci/run` sets) a missing
//! suite or client is a failure naming `tests/setup`, which installs them
//! (the suite with `npm ci` in `tests/mcp/conformance`, with the Node 22 it
//! needs as an npm package of that folder).

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::mcp_clients::{
    ClientHome, client_home, mcp_dir, require_client, run_client_script, which,
};
use crate::mcp_http::HttpMcp;
use crate::support::Home;
use crate::warm_approval::install_counting_module;

mod deploy;

/// How long an idle server may take to exit after SIGTERM.
const STOP_WITHIN: Duration = Duration::from_secs(30);

/// The whole conformance run may take this long before the test calls it hung.
const CONFORMANCE_WATCHDOG: Duration = Duration::from_secs(600);

/// Stop `server` as a cluster does, with SIGTERM, and wait for it to drain
/// and exit; its exit status and all it said on stderr.
fn stop(mut server: HttpMcp) -> (std::process::ExitStatus, String) {
    server.terminate();
    let status = server.exit_within(STOP_WITHIN).unwrap_or_else(|| {
        panic!(
            "`modhost mcp --http` did not exit within {STOP_WITHIN:?} of SIGTERM:\n{}",
            server.stderr()
        )
    });
    (status, server.stderr())
}

/// Fail, never skip, when something `tests/setup` installs is missing.
fn require_installed(what: &str, path: &Path) {
    if path.exists() {
        return;
    }
    let remedy = "install it with `tests/setup` (it runs `npm ci` in tests/mcp/conformance; Node 20 with npm is all it needs)";
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "CI: {what} is missing ({} does not exist): .ci/run should have installed it; {remedy}",
            path.display()
        );
    }
    panic!(
        "{what} is not installed here ({} does not exist); {remedy}",
        path.display()
    );
}

#[test]
fn the_official_conformance_suite_passes_every_scenario_that_applies_to_modhost_mcp_http() {
    let dir = crate::support::tests_dir().join("mcp/conformance");
    // The Node 22 the suite needs, installed by `npm ci` as the `node` package.
    let node = dir.join("node_modules/.bin/node");
    require_installed("the MCP conformance suite's Node", &node);
    require_installed(
        "the MCP conformance suite (@modelcontextprotocol/conformance)",
        &dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js"),
    );

    let home = Home::new();
    for module in deploy::bundled_modules() {
        home.install_module(&module);
    }
    std::fs::write(home.workspace().join("README.md"), "a workspace\n").expect("workspace file");
    let server = HttpMcp::start(&home, |_| {});
    let url = server.url("/mcp");

    let results = tempfile::tempdir().expect("temp dir for the suite's results");
    let log = results.path().join("log");
    let mut child = Command::new(&node)
        .arg(dir.join("run.mjs"))
        .args(["--url", &url])
        .args(["--revision", "2026-07-28", "--revision", "2025-11-25"])
        .arg("--out")
        .arg(results.path().join("out"))
        .current_dir(results.path())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).expect("log file"))
        .stderr(Stdio::from(
            std::fs::File::options()
                .append(true)
                .open(&log)
                .expect("log file"),
        ))
        .spawn()
        .unwrap_or_else(|e| panic!("run {}: {e}", node.display()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the suite") {
            break Some(status);
        }
        if started.elapsed() > CONFORMANCE_WATCHDOG {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    let context = || {
        format!(
            "{output}\n--- modhost mcp --http said ---\n{}",
            server.stderr()
        )
    };
    match status {
        Some(status) if status.success() => {}
        Some(status) => panic!("the conformance suite failed ({status}):\n{}", context()),
        None => panic!(
            "the conformance suite did not finish within {CONFORMANCE_WATCHDOG:?}:\n{}",
            context()
        ),
    }
    // Shown with --nocapture: what ran, what was skipped and why.
    println!("{output}");
    assert!(
        output.contains("conformance: every applicable scenario passed"),
        "{}",
        context()
    );
    for revision in ["2026-07-28", "2025-11-25"] {
        assert!(
            output.contains(&format!("ok    {revision} tools-list")),
            "the suite did not run tools-list for {revision}:\n{output}"
        );
    }
    let (status, said) = stop(server);
    assert!(
        status.success(),
        "after SIGTERM the server exited with {status}:\n{said}"
    );
    home.assert_no_module_processes();
}

/// The ask module the clients approve and decline over HTTP: it counts its
/// own starts (`warm_approval::install_counting_module`), so "ran once" and
/// "never ran" are the module's word, not the server's.
const ASKER: &str = "asker";

/// `mcp_clients.rs`'s home plus the counting ask module, served over HTTP;
/// the script's extra environment.
fn http_client_home() -> (ClientHome, Vec<(&'static str, std::ffi::OsString)>) {
    let setup = client_home();
    install_counting_module(
        &setup.home,
        ASKER,
        &json!({"writes": ["state"], "network": true}),
    );
    // Where install_counting_module's script appends a line per start.
    let executions = setup
        .home
        .path()
        .join("state")
        .join(ASKER)
        .join("executions");
    let env = vec![
        ("ASK_TOOL", format!("{ASKER}__{ASKER}_run").into()),
        ("ASK_EXECUTIONS", executions.into_os_string()),
    ];
    (setup, env)
}

/// Run `script` with `program` and `--http URL` against a fresh server.
fn drive_over_http(client: &str, program: &Path, script: &Path) {
    require_client(client, program);
    let (setup, env) = http_client_home();
    let server = HttpMcp::start(&setup.home, |_| {});
    let url = server.url("/mcp");
    let env: Vec<(&str, &OsStr)> = env.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let output = run_client_script(client, program, script, &setup, &["--http", &url], &env);
        // Shown with --nocapture: which checks ran over HTTP.
        println!("{output}");
    }));
    if let Err(panic) = outcome {
        eprintln!("--- modhost mcp --http said ---\n{}", server.stderr());
        std::panic::resume_unwind(panic);
    }
    // The script saw the cancelled call's process go while the server went
    // on serving; what remains (processes readied ahead of calls) goes
    // with the server.
    let (status, said) = stop(server);
    assert!(
        status.success(),
        "after SIGTERM the server exited with {status}:\n{said}"
    );
    setup.home.assert_no_module_processes();
}

#[test]
fn the_python_mcp_1_client_drives_modhost_mcp_over_http() {
    drive_over_http(
        "Python mcp 1.x",
        &mcp_dir().join(".venv-mcp1/bin/python"),
        &mcp_dir().join("client_checks.py"),
    );
}

#[test]
fn the_python_mcp_2_client_drives_modhost_mcp_over_http() {
    drive_over_http(
        "Python mcp 2.x",
        &mcp_dir().join(".venv-mcp2/bin/python"),
        &mcp_dir().join("client_checks.py"),
    );
}

#[test]
fn the_typescript_sdk_drives_modhost_mcp_over_http() {
    let sdk = mcp_dir().join("ts/node_modules/@modelcontextprotocol/sdk");
    // Not installed: report the SDK as the missing client.
    let node = if sdk.is_dir() {
        which(Path::new("node"))
    } else {
        sdk
    };
    drive_over_http(
        "TypeScript SDK",
        &node,
        &mcp_dir().join("ts/client_checks.mjs"),
    );
}

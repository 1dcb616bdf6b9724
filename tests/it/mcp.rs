//! `modhost mcp` driven by a real MCP client that no one here wrote: the
//! Python `mcp` package (1.x, the venv `tests/setup` makes),
//! through `tests/mcp/test_mcp_client.py` (initialize, list, call, a schema
//! error, a cancel, stdin EOF with a call running). The other clients and
//! checks are in `mcp_clients.rs`.
//!
//! This test never skips: a machine without the venv fails it with the
//! command that installs it (`.ci/run` runs it). The script leaves no process behind; it is given generous
//! timeouts because the suite runs on small, loaded machines.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Fixture, binaries};

/// What installs the MCP clients the suite drives.
pub(crate) const INSTALL: &str = "tests/setup";

/// The interpreter of the Python `mcp` 1.x venv.
pub(crate) fn python() -> std::path::PathBuf {
    crate::support::tests_dir().join("mcp/.venv-mcp1/bin/python")
}

/// The whole script may take this long before the test calls it hung.
const SCRIPT_WATCHDOG: Duration = Duration::from_secs(240);

#[test]
fn the_python_mcp_client_drives_modhost_mcp() {
    let probe = Command::new(python())
        .args(["-c", "import mcp, anyio"])
        .stdin(Stdio::null())
        .output();
    match probe {
        Err(e) => panic!(
            "the Python mcp 1.x venv is needed for the MCP client test and could not be run ({e}); install it with: {INSTALL}"
        ),
        Ok(out) if !out.status.success() => panic!(
            "the Python `mcp` package is needed for the MCP client test; install it with: {INSTALL}\n{}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Ok(_) => {}
    }
    let script = crate::support::tests_dir().join("mcp/test_mcp_client.py");
    let bins = binaries();
    let out_dir = tempfile::tempdir().expect("temp dir for output");
    let log = out_dir.path().join("log");
    let mut child = Command::new(python())
        .arg(&script)
        .env("MODHOST_BIN", &bins.modhost)
        .env("FILES_BIN", &bins.files)
        .env("HANG_BIN", Fixture::Hang.path())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).expect("log file"))
        .stderr(Stdio::from(
            std::fs::File::options()
                .append(true)
                .open(&log)
                .expect("log file"),
        ))
        .spawn()
        .expect("run python3");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for python3") {
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
        Some(status) => panic!("{} failed ({status}):\n{output}", script.display()),
        None => panic!(
            "{} did not finish within {SCRIPT_WATCHDOG:?}:\n{output}",
            script.display()
        ),
    }
    assert!(output.contains("all MCP client checks passed"), "{output}");
}

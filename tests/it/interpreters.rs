//! Stock interpreters run confined with no configuration, and `spawns` means
//! something.
//!
//! The host follows a module's interpreter chain (shebang, `env`, a PATH
//! lookup in the module's environment, symlinks) and grants read on the
//! interpreter's installation prefix and execute on the chain's files only.
//! Each module here is a real script for a real interpreter of this machine;
//! a machine without `node` or `python3` fails these tests rather than
//! skipping them. Each module also proves the sandbox was on: it tries to
//! read a file outside its grants, which the unconfined host can read.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::support::Home;

/// The descriptor of a one-capability module `id` whose capability reads the
/// file named in its input; `spawns` as given.
fn descriptor(id: &str, spawns: &[&str]) -> Value {
    json!({
        "id": id, "version": "1.0.0",
        "capabilities": [{"id": format!("{id}.peek"), "description": "Reads one file.",
                          "input_schema": {"type": "object"},
                          "effects": {"spawns": spawns}}]
    })
}

/// Install `script` as the folder module `id` and pin it.
fn install_script(home: &Home, id: &str, script: &str, path_env: &str) -> PathBuf {
    let folder = home.modules().join(id);
    std::fs::create_dir_all(&folder).expect("module folder");
    let path = folder.join(id);
    std::fs::write(&path, script).expect("module script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    home.run_with_env(&["pin", id], &[("PATH", path_env)])
        .expect_code(0);
    path
}

/// A secret outside every grant (the host can read it).
fn secret(home: &Home) -> PathBuf {
    let path = home.outside().join("secret.txt");
    std::fs::write(&path, "the-secret").expect("secret");
    path
}

/// A Python module `id` started by `#!<interpreter>`: it answers describe
/// with [`descriptor`], and an invoke by running `invoke` (Python indented
/// under `else:`, which reads `req` and sets `out`) and answering
/// `{"output": out}`. Only what the module tries differs between tests.
fn python_module(interpreter: &str, id: &str, invoke: &str) -> String {
    format!(
        r#"#!{interpreter}
import json, sys
req = json.loads(sys.stdin.readline())
def say(result): print(json.dumps({{"jsonrpc": "2.0", "id": req["id"], "result": result}}), flush=True)
if req["method"] == "describe":
    say({descriptor})
else:{invoke}    say({{"output": out}})
"#,
        descriptor = descriptor(id, &[])
    )
}

/// Invoke `id.peek` on `path` and return the output.
fn peek(home: &Home, id: &str, path: &Path, path_env: &str) -> Value {
    let input = json!({"path": path}).to_string();
    let run = home.run_with_env(
        &[
            "invoke",
            id,
            &format!("{id}.peek"),
            "--json",
            "--input",
            &input,
        ],
        &[("PATH", path_env)],
    );
    run.invoke_result()["output"].clone()
}

fn system_path() -> String {
    std::env::var("PATH").expect("PATH")
}

#[test]
fn a_stock_node_module_answers_confined() {
    let node = Command::new("node")
        .arg("--version")
        .output()
        .expect("node must be installed on the test machine");
    assert!(node.status.success());
    let home = Home::new();
    let script = format!(
        r#"#!/usr/bin/env node
const fs = require("fs");
const req = JSON.parse(fs.readFileSync(0, "utf8").split("\n")[0]);
const say = (result) => process.stdout.write(JSON.stringify({{jsonrpc: "2.0", id: req.id, result}}) + "\n");
if (req.method === "describe") say({descriptor});
else {{
  let output;
  try {{ output = {{read: fs.readFileSync(req.params.input.path, "utf8")}}; }}
  catch (e) {{ output = {{error: e.code}}; }}
  say({{output}});
}}
"#,
        descriptor = descriptor("nodey", &[])
    );
    install_script(&home, "nodey", &script, &system_path());
    let entry = home.entry("nodey");
    assert_eq!(entry["status"], "enabled", "{entry:#}");

    // What runs is the approved snapshot, which the module may read.
    let mine = PathBuf::from(entry["program"].as_str().expect("program"));
    let output = peek(&home, "nodey", &mine, &system_path());
    assert!(
        output["read"]
            .as_str()
            .unwrap_or_default()
            .contains("nodey"),
        "{output:#}"
    );
    let output = peek(&home, "nodey", &secret(&home), &system_path());
    assert_eq!(output, json!({"error": "EACCES"}), "the sandbox was off");
}

#[test]
fn a_python_module_runs_confined_from_a_venv_outside_the_system_folders() {
    let home = Home::new();
    let venv = home.outside().join("venv");
    let made = Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .output()
        .expect("python3 must be installed on the test machine");
    assert!(made.status.success(), "{made:?}");
    let cfg = std::fs::read_to_string(venv.join("pyvenv.cfg")).expect("pyvenv.cfg");
    // The point of the test: an interpreter outside /usr.
    assert!(
        !cfg.contains("home = /usr/bin"),
        "python3 here is the system one; the test needs one outside /usr: {cfg}"
    );
    // The venv first on PATH, as when the host is started from an activated
    // venv: `#!/usr/bin/env python3` finds it there.
    let path_env = format!("{}:{}", venv.join("bin").display(), system_path());
    let output = run_python_module(&home, "pyvenv", &path_env);
    assert_eq!(
        output["prefix"],
        json!(std::fs::canonicalize(&venv).unwrap()),
        "ran in the venv"
    );
}

/// The case this guards: the host started from a shell whose PATH names a pyenv
/// (or /opt, asdf, conda) interpreter's `bin/` first, as `pyenv exec` does.
#[test]
fn a_python_module_runs_confined_from_an_interpreter_outside_the_system_folders() {
    let home = Home::new();
    let base = Command::new("python3")
        .args(["-c", "import sys; print(sys.base_prefix)"])
        .output()
        .expect("python3 must be installed on the test machine");
    let base = String::from_utf8(base.stdout).unwrap().trim().to_owned();
    assert!(
        !base.starts_with("/usr"),
        "python3 here is the system one; the test needs one outside /usr: {base}"
    );
    let path_env = format!("{base}/bin:{}", system_path());
    let output = run_python_module(&home, "pybase", &path_env);
    assert_eq!(output["prefix"], json!(base));
}

/// Install a `#!/usr/bin/env python3` module `id`, run with `path_env`: it
/// answers describe and invoke confined (its own snapshot readable, a secret
/// outside its grants not). Returns the output of reading its own file.
fn run_python_module(home: &Home, id: &str, path_env: &str) -> Value {
    let script = python_module(
        "/usr/bin/env python3",
        id,
        r#"
    try:
        out = {"read": open(req["params"]["input"]["path"]).read(), "prefix": sys.prefix}
    except OSError as e:
        out = {"error": e.__class__.__name__, "errno": e.errno}
"#,
    );
    install_script(home, id, &script, path_env);
    let entry = home.entry(id);
    assert_eq!(entry["status"], "enabled", "{entry:#}");

    // What runs is the approved snapshot, which the module may read.
    let mine = PathBuf::from(entry["program"].as_str().expect("program"));
    let output = peek(home, id, &mine, path_env);
    assert!(
        output["read"].as_str().unwrap_or_default().contains(id),
        "{output:#}"
    );
    let denied = peek(home, id, &secret(home), path_env);
    assert_eq!(
        denied,
        json!({"error": "PermissionError", "errno": 13}),
        "the sandbox was off"
    );
    output
}

/// A capability that declares `spawns: []` cannot run `/bin/sh` (or any
/// program): execute is granted on its own file and interpreter chain only.
#[test]
fn a_capability_without_spawns_cannot_run_a_shell() {
    let home = Home::new();
    // A Python module (interpreter: the machine's python3) that tries to
    // exec /bin/sh and reports the errno.
    let python = std::fs::canonicalize(
        String::from_utf8(
            Command::new("python3")
                .args(["-c", "import sys; print(sys.executable)"])
                .output()
                .expect("python3")
                .stdout,
        )
        .unwrap()
        .trim(),
    )
    .unwrap();
    let script = python_module(
        &python.display().to_string(),
        "shelly",
        r#"
    import subprocess
    try:
        subprocess.run(["/bin/sh", "-c", "echo ran > " + req["params"]["input"]["path"]], check=False)
        out = {"ran": True}
    except OSError as e:
        out = {"errno": e.errno}
"#,
    );
    install_script(&home, "shelly", &script, &system_path());
    let witness = home.path().join("state/shelly/witness");
    let output = peek(&home, "shelly", &witness, &system_path());
    assert_eq!(output, json!({"errno": 13}), "/bin/sh must be EACCES");
    assert!(!witness.exists());
}

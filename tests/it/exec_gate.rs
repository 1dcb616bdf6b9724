//! `spawns: []` is enforced: a module whose capability declares no spawns
//! executes nothing after its own start, by any exec, and one that declares
//! a spawn runs that binary and no other.
//!
//! The attacks live in `tests/fixtures/exec_gate.py` (a hostile module
//! under the system Python): each tries to run `id` (plain `execve`, the
//! ELF loader, which landlock must let execute as Python's own `PT_INTERP`,
//! a memfd, `execveat` on a directory and on a descriptor, a shell, its own
//! interpreter, guessed keys) and reports the errno. Every attempt must fail
//! and no `uid=` may get out. The stock-interpreter tests show the gate
//! costs honest modules nothing: `#!/usr/bin/env python3` (pyenv's, through
//! its shims), Debian's python3, node, sh and bash modules declaring no
//! spawns start and answer, each also failing the loader attack.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::python_attacker::{Attacker, EACCES, ENOSYS, assert_refused};
use crate::support::Home;

const EXEC_GATE: Attacker = Attacker {
    id: "execgate",
    script: "exec_gate.py",
};

/// The ELF loader of this machine's programs.
fn loader() -> &'static str {
    let loader = if cfg!(target_arch = "aarch64") {
        "/lib/ld-linux-aarch64.so.1"
    } else {
        "/lib64/ld-linux-x86-64.so.2"
    };
    assert!(Path::new(loader).exists(), "no ELF loader at {loader}");
    loader
}

/// The machine enforces the part under test (`doctor --json`): else these
/// tests fail, never pass vacuously.
#[track_caller]
fn require_exec_part(home: &Home) {
    let doctor = home.run(&["doctor", "--json"]).json();
    let part = doctor["confinement"]["parts"]
        .as_array()
        .and_then(|parts| parts.iter().find(|p| p["part"] == "exec_beyond_spawns"))
        .cloned()
        .unwrap_or_else(|| panic!("doctor lists no exec_beyond_spawns part: {doctor:#}"));
    assert_eq!(part["enforced"], true, "{part:#}");
}

#[track_caller]
fn assert_no_uid(report: &Value) {
    assert!(
        !report.to_string().contains("uid="),
        "a program ran and printed its uid: {report:#}"
    );
}

/// The attack: a module declaring `spawns: []` tries every exec it can
/// think of. Before the gate, the loader attacks printed `uid=0(root)`.
#[test]
fn a_module_that_declares_no_spawns_runs_nothing_by_any_exec() {
    let home = EXEC_GATE.install();
    require_exec_part(&home);
    let report = EXEC_GATE.attack(&home, "nospawn", &json!({}));
    for probe in [
        "path",
        "loader",
        "shell",
        "loader_shell",
        "subprocess",
        "own_python",
        "execveat_dirfd",
        "execveat_dirfd_loader",
        "fexecve_loader",
        "execveat_empty_path_loader",
    ] {
        assert_refused(&report[probe], &[EACCES], probe);
    }
    for kind in ["memfd_default", "memfd_exec"] {
        assert_refused(
            &report[kind]["memfd_create"],
            &[ENOSYS],
            &format!("{kind}: memfd_create"),
        );
    }
    let sealed = &report["memfd_noexec_seal"];
    assert_eq!(sealed["memfd_create"]["ok"], true, "{report:#}");
    assert_refused(
        &sealed["fexecve"],
        &[EACCES],
        "fexecve of a memfd copy of id",
    );
    assert_refused(
        &sealed["execveat"],
        &[EACCES],
        "execveat of a memfd copy of id",
    );
    for set in ["guessed_keys", "guessed_keys_execveat"] {
        let guesses = report[set].as_array().expect(set);
        assert_eq!(guesses.len(), 6, "{report:#}");
        for guess in guesses {
            assert_refused(guess, &[EACCES], set);
        }
    }
    assert_no_uid(&report);
}

/// A capability that declares `spawns: ["id"]` (granted by the operator)
/// runs exactly `id`; `whoami` and a shell, not granted, are refused.
#[test]
fn a_module_granted_a_binary_runs_it_and_no_other() {
    let home = EXEC_GATE.install();
    home.write_config(
        "[binaries]\nid = \"/usr/bin/id\"\n\n[[approval.rules]]\nmodule = \"execgate\"\ndecision = \"allow\"\n",
    );
    let report = EXEC_GATE.attack(&home, "granted", &json!({}));
    assert_eq!(report["id"]["ok"], true, "{report:#}");
    assert!(
        report["id"]["got"]
            .as_str()
            .is_some_and(|out| out.starts_with("uid=")),
        "{report:#}"
    );
    assert_refused(&report["whoami"], &[EACCES], "an ungranted whoami");
    assert_refused(&report["shell"], &[EACCES], "an ungranted shell");
}

/// A module written as a script for `interpreter`, declaring no spawns,
/// whose invoke answers `{"output": ...}` with what `body` computes.
struct Script {
    id: &'static str,
    text: String,
}

fn descriptor(id: &str) -> Value {
    json!({
        "id": id, "version": "1.0.0",
        "capabilities": [{"id": format!("{id}.run"), "description": "Runs.",
                          "input_schema": {"type": "object"},
                          "effects": {"spawns": []}}]
    })
}

/// A Python module on the `#!` line `shebang`: it reports how it was
/// started and what running the loader on `id` gave.
fn python(id: &'static str, shebang: &str) -> Script {
    let text = format!(
        r#"{shebang}
import json, os, sys
req = json.loads(sys.stdin.readline())
def say(result): print(json.dumps({{"jsonrpc": "2.0", "id": req["id"], "result": result}}), flush=True)
if req["method"] == "describe":
    say({descriptor})
else:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(w, 1)
        try:
            os.execv("{loader}", ["{loader}", "/usr/bin/id"])
        except OSError as e:
            os.write(1, ("errno %d" % e.errno).encode())
        os._exit(127)
    os.close(w)
    attack = os.read(r, 4096).decode()
    os.waitpid(pid, 0)
    say({{"output": {{"orig_argv": sys.orig_argv, "prefix": sys.prefix, "attack": attack}}}})
"#,
        descriptor = descriptor(id),
        loader = loader(),
    );
    Script { id, text }
}

/// A shell module (`sh` or `bash`): it answers, and reports what running
/// the loader on `id` printed.
fn shell(id: &'static str, shebang: &str) -> Script {
    let describe = json!({"jsonrpc": "2.0", "id": 1, "result": descriptor(id)});
    let text = format!(
        "{shebang}\nIFS= read -r line\ncase \"$line\" in\n  *'\"method\":\"describe\"'*) printf '%s\\n' '{describe}'; exit 0 ;;\nesac\nattack=$({loader} /usr/bin/id 2>&1)\nprintf '{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"output\":{{\"attack\":\"%s\",\"shell\":\"%s\"}}}}}}\\n' \"$attack\" \"$0\"\n",
        loader = loader(),
    );
    Script { id, text }
}

/// A node module: it answers, and reports what spawning the loader on `id`
/// gave.
fn node(id: &'static str) -> Script {
    let text = format!(
        r#"#!/usr/bin/env node
const fs = require("fs");
const req = JSON.parse(fs.readFileSync(0, "utf8").split("\n")[0]);
const say = (result) => process.stdout.write(JSON.stringify({{jsonrpc: "2.0", id: req.id, result}}) + "\n");
if (req.method === "describe") say({descriptor});
else {{
  const run = require("child_process").spawnSync("{loader}", ["/usr/bin/id"]);
  say({{output: {{attack: run.error ? run.error.code : String(run.stdout), version: process.version}}}});
}}
"#,
        descriptor = descriptor(id),
        loader = loader(),
    );
    Script { id, text }
}

/// Install `script` as a pinned folder module; its invoke's output.
#[track_caller]
fn install_and_run(home: &Home, script: &Script) -> Value {
    let folder = home.modules().join(script.id);
    std::fs::create_dir_all(&folder).unwrap();
    let path = folder.join(script.id);
    std::fs::write(&path, &script.text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    home.run(&["pin", script.id]).expect_code(0);
    let run = home.invoke(script.id, &format!("{}.run", script.id), &json!({}), &[]);
    let output = run.invoke_result()["output"].clone();
    home.assert_no_module_processes();
    output
}

/// The prefix of the python3 this process's PATH runs (through a version
/// manager's shims, when PATH has them, as the host resolves them).
fn path_python_prefix() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.prefix)"])
        .output()
        .expect("python3 must be installed on the test machine");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Stock interpreters start under the gate, each with no spawns declared,
/// and each one's attempt to run `id` through the loader fails. The env
/// lines are started by the host itself (`env` would exec a second time):
/// `#!/usr/bin/env python3` finds the python the host's PATH names (pyenv's
/// on this machine, through its shims, resolved by the host), with the
/// arguments env would give it.
#[test]
fn stock_interpreters_start_under_the_gate_and_cannot_exec() {
    let home = Home::new();
    home.require_landlock();
    require_exec_part(&home);
    let node_version = Command::new("node")
        .arg("--version")
        .output()
        .expect("node must be installed on the test machine");
    assert!(node_version.status.success());
    assert!(
        Path::new("/usr/bin/python3").exists() && Path::new("/bin/bash").exists(),
        "the test needs the system /usr/bin/python3 and /bin/bash"
    );
    let scripts = [
        python("pyenv", "#!/usr/bin/env python3"),
        python("pyenvu", "#!/usr/bin/env -S python3 -u"),
        python("pysystem", "#!/usr/bin/python3"),
        shell("shmod", "#!/bin/sh"),
        shell("bashmod", "#!/bin/bash"),
        node("nodemod"),
    ];
    for script in &scripts {
        let output = install_and_run(&home, script);
        let attack = output["attack"].as_str().unwrap_or_default();
        assert!(
            attack.contains("errno 13")
                || attack.contains("Permission denied")
                || attack == "EACCES",
            "{}: the loader ran or the module did not answer: {output:#}",
            script.id
        );
        assert_no_uid(&output);
        let entry = home.entry(script.id)["program"].clone();
        match script.id {
            // Started as env starts it: [python3, (-u,) entry], the python
            // the host's PATH names.
            "pyenv" => {
                assert_eq!(output["orig_argv"], json!(["python3", entry]), "{output:#}");
                assert_eq!(output["prefix"], json!(path_python_prefix()), "{output:#}");
            }
            "pyenvu" => assert_eq!(
                output["orig_argv"],
                json!(["python3", "-u", entry]),
                "{output:#}"
            ),
            "pysystem" => assert_eq!(output["prefix"], "/usr", "{output:#}"),
            "nodemod" => assert!(
                output["version"]
                    .as_str()
                    .is_some_and(|v| v.starts_with('v')),
                "{output:#}"
            ),
            _ => assert!(output["shell"].as_str().is_some_and(|s| !s.is_empty())),
        }
    }
}

/// A `#!/usr/bin/env` line asking env for what the host does not reproduce
/// (here `-i`, a cleared environment) is a clear start error naming the
/// line and the fix, not a module that silently runs differently.
#[test]
fn an_env_line_the_host_cannot_honour_is_a_start_error_naming_the_fix() {
    let home = Home::new();
    home.require_landlock();
    let script = python("envi", "#!/usr/bin/env -S -i python3");
    let folder = home.modules().join(script.id);
    std::fs::create_dir_all(&folder).unwrap();
    let path = folder.join(script.id);
    std::fs::write(&path, &script.text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The module cannot even be described, so it is not pinned, and says why.
    let pin = home.run(&["pin", script.id]);
    assert_eq!(pin.code, 2, "{pin:#?}");
    assert!(
        pin.stderr.contains("#!/usr/bin/env -S -i python3") && pin.stderr.contains("`-i`"),
        "{pin:#?}"
    );
    let described = home.run(&["describe", script.id]);
    let said = format!("{}{}", described.stdout, described.stderr);
    assert!(
        said.contains("`-i`") && said.contains("`#!/usr/bin/env -S CMD ARG...`"),
        "the line and the fix: {described:#?}"
    );
}

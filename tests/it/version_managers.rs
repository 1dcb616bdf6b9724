//! A host started from a shell whose PATH begins with a version manager's
//! shims (pyenv, rbenv, nodenv: `<root>/shims` beside
//! `<root>/libexec/<manager>`) still runs `#!/usr/bin/env python3` modules
//! confined: the shim is a script that runs the manager, which a confined
//! module may not run, so the host gives modules the installation the
//! manager selects instead.
//!
//! The manager here is a stand-in with pyenv's layout and commands
//! (`prefix`, `exec`), selecting a venv made by the test, so the test needs
//! no pyenv and still exercises the real resolution.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::Home;

fn executable(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("folder");
    std::fs::write(path, body).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

#[test]
fn a_python_module_runs_confined_when_path_starts_with_a_managers_shims() {
    let home = Home::new();
    let outside = home.outside();
    let venv = outside.join("versions/3-test");
    let made = Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .output()
        .expect("python3 must be installed on the test machine");
    assert!(made.status.success(), "{made:?}");
    let root = outside.join(".fakeenv");
    // The manager: `prefix` names the selected installation, `exec` runs a
    // command from it (what a shim calls).
    executable(
        &root.join("libexec/fakeenv"),
        &format!(
            "#!/bin/sh\ncase \"$1\" in\n  prefix) echo {venv} ;;\n  exec) shift; cmd=$1; shift; exec {venv}/bin/$cmd \"$@\" ;;\nesac\n",
            venv = venv.display()
        ),
    );
    executable(
        &root.join("shims/python3"),
        &format!(
            "#!/bin/sh\nexec {} exec python3 \"$@\"\n",
            root.join("libexec/fakeenv").display()
        ),
    );
    let path_env = format!(
        "{}:{}",
        root.join("shims").display(),
        std::env::var("PATH").expect("PATH")
    );

    let descriptor = json!({
        "id": "shimmed", "version": "1.0.0",
        "capabilities": [{"id": "shimmed.where", "description": "Says which Python runs it.",
                          "input_schema": {"type": "object"}, "effects": {}}]
    });
    let script = format!(
        r#"#!/usr/bin/env python3
import json, sys
req = json.loads(sys.stdin.readline())
def say(result): print(json.dumps({{"jsonrpc": "2.0", "id": req["id"], "result": result}}), flush=True)
if req["method"] == "describe":
    say({descriptor})
else:
    try:
        open("{secret}").read()
        leaked = True
    except OSError:
        leaked = False
    say({{"output": {{"prefix": sys.prefix, "leaked": leaked}}}})
"#,
        secret = outside.join("secret.txt").display()
    );
    std::fs::write(outside.join("secret.txt"), "the-secret").expect("secret");
    executable(&home.modules().join("shimmed/shimmed"), &script);
    home.run_with_env(&["pin", "shimmed"], &[("PATH", &path_env)])
        .expect_code(0);
    let entry = home.entry("shimmed");
    assert_eq!(entry["status"], "enabled", "{entry:#}");

    let run = home.run_with_env(
        &["invoke", "shimmed", "shimmed.where", "--json"],
        &[("PATH", &path_env)],
    );
    let output: Value = run.invoke_result()["output"].clone();
    assert_eq!(
        output["prefix"],
        json!(std::fs::canonicalize(&venv).expect("venv")),
        "the module ran the installation the manager selects: {output:#}"
    );
    assert_eq!(output["leaked"], false, "the module ran unconfined");
}

/// A compiled module granted nothing can execute nothing but itself when
/// confined, whatever its PATH says: the host never asks a version manager
/// for it (on a machine with pyenv that answer was most of a one-off call's
/// time, about 40 ms), and it gets the host's PATH as it is. A script
/// started from the same shell still gets the installation the manager
/// selects.
#[test]
fn only_a_module_that_looks_commands_up_makes_the_host_ask_a_manager() {
    use crate::support::Fixture;
    let home = Home::new();
    let outside = home.outside();
    let selected = outside.join("versions/1.0");
    std::fs::create_dir_all(selected.join("bin")).expect("bin");
    let root = outside.join(".fakeenv");
    let asked = outside.join("asked");
    executable(
        &root.join("libexec/fakeenv"),
        &format!(
            "#!/bin/sh\necho \"$1\" >> {asked}\n[ \"$1\" = prefix ] && echo {selected}\n",
            asked = asked.display(),
            selected = selected.display()
        ),
    );
    std::fs::create_dir_all(root.join("shims")).expect("shims");
    let shims = root.join("shims").display().to_string();
    let path_env = format!("{shims}:{}", std::env::var("PATH").expect("PATH"));
    let env = [("PATH", path_env.as_str())];
    let path_seen = |run: crate::support::Run| -> String {
        let output = run.invoke_result()["output"].clone();
        output["env"]["PATH"]
            .as_str()
            .unwrap_or_else(|| panic!("the module says its PATH: {output:#}"))
            .to_owned()
    };

    home.install(Fixture::Echo, "compiled");
    home.run_with_env(&["pin", "compiled"], &env).expect_code(0);
    let seen =
        path_seen(home.run_with_env(&["invoke", "compiled", "compiled.echo", "--json"], &env));
    assert!(
        !asked.exists(),
        "the manager was asked for a compiled module: {:?}",
        std::fs::read_to_string(&asked)
    );
    assert_eq!(seen, path_env, "a compiled module gets the host's PATH");

    // A script (its `#!` line makes it one) that says its PATH.
    let descriptor = json!({
        "id": "scripted", "version": "1.0.0",
        "capabilities": [{"id": "scripted.echo", "description": "Says its PATH.",
                          "input_schema": {"type": "object"}, "effects": {}}]
    });
    executable(
        &home.modules().join("scripted/scripted"),
        &format!(
            "#!/bin/sh\nread line\ncase \"$line\" in\n  *'\"method\":\"describe\"'*) printf '%s\\n' '{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{descriptor}}}' ;;\n  *) printf '{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"output\":{{\"env\":{{\"PATH\":\"%s\"}}}}}}}}\\n' \"$PATH\" ;;\nesac\n"
        ),
    );
    home.run_with_env(&["pin", "scripted"], &env).expect_code(0);
    let seen =
        path_seen(home.run_with_env(&["invoke", "scripted", "scripted.echo", "--json"], &env));
    assert!(
        std::fs::read_to_string(&asked).is_ok_and(|a| a.contains("prefix")),
        "the manager was not asked for a script"
    );
    assert!(
        !seen.split(':').any(|dir| dir == shims)
            && seen
                .split(':')
                .any(|dir| Path::new(dir) == selected.join("bin")),
        "a script gets the installation the manager selects, not its shims: {seen}"
    );
}

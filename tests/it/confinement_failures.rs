//! A confinement failure says so: a module the sandbox stops is not blamed
//! on its author, the error names the sandbox and what to declare, and
//! `modhost conformance` reports "fails only when confined" with the path.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::support::Home;

/// A shell module `id` that reads `secret` (outside its grants) before
/// answering `describe` when `at_describe`, else before answering `invoke`.
fn install_reader(home: &Home, id: &str, secret: &Path, at_describe: bool) -> PathBuf {
    let descriptor = json!({
        "id": id, "version": "1.0.0",
        "capabilities": [{"id": format!("{id}.run"), "description": "Reads a file it did not declare.",
                          "input_schema": {"type": "object"}}]
    });
    let read_secret = format!("read secret < '{}' || exit 3", secret.display());
    let script = format!(
        "#!/bin/sh\n{before}\nIFS= read -r line\ncase \"$line\" in\n  *'\"describe\"'*) printf '%s\\n' '{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{descriptor}}}' ;;\n  *) {read_secret}\n     printf '%s\\n' '{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"output\":{{}}}}}}' ;;\nesac\n",
        before = if at_describe {
            read_secret.as_str()
        } else {
            ""
        },
    );
    let folder = home.modules().join(id);
    std::fs::create_dir_all(&folder).expect("module folder");
    let path = folder.join(id);
    std::fs::write(&path, script).expect("module script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

fn secret(home: &Home) -> PathBuf {
    let path = home.outside().join("secret.txt");
    std::fs::write(&path, "the-secret\n").expect("secret");
    path
}

#[test]
fn a_call_the_sandbox_stopped_names_the_sandbox_and_the_path() {
    let home = Home::new();
    let secret = secret(&home);
    install_reader(&home, "reader", &secret, false);
    home.run(&["pin", "reader"]).expect_code(0);
    let error = home
        .invoke("reader", "reader.run", &json!({}), &[])
        .invoke_error();
    assert_eq!(error["kind"], "crashed", "{error:#}");
    let remedy = error["remedy"].as_str().unwrap_or_default();
    assert!(remedy.contains("sandbox"), "{remedy}");
    assert!(remedy.contains(&secret.display().to_string()), "{remedy}");
    assert!(!remedy.contains("report it to its author"), "{remedy}");
}

#[test]
fn conformance_reports_a_module_that_fails_only_when_confined() {
    let home = Home::new();
    let secret = secret(&home);
    let program = install_reader(&home, "sneaky", &secret, true);
    let run = home.run(&["conformance", program.to_str().unwrap(), "--json"]);
    run.expect_code(1);
    let report = run.json();
    let findings = report["findings"].as_array().expect("findings");
    let finding = findings
        .iter()
        .find(|f| f["id"] == "battery.fails_only_when_confined")
        .unwrap_or_else(|| panic!("no fails_only_when_confined finding: {report:#}"));
    let reason = finding["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&format!("denied: {}", secret.display())),
        "{finding:#}"
    );
    assert!(
        finding["remedy"]
            .as_str()
            .unwrap_or_default()
            .contains("sandbox")
    );
}

#[test]
fn a_module_the_sandbox_stops_at_describe_is_broken_with_a_sandbox_remedy() {
    let home = Home::new();
    let secret = secret(&home);
    install_reader(&home, "early", &secret, true);
    let error = home.invoke("early", "early.run", &json!({}), &[]).json()["error"].clone();
    assert_eq!(error["kind"], "module_broken", "{error:#}");
    let remedy = error["remedy"].as_str().unwrap_or_default();
    assert!(
        remedy.contains("sandbox") && remedy.contains(&secret.display().to_string()),
        "{remedy}"
    );
}

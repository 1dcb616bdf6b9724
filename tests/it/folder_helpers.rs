//! A folder module may run the approved files of its own folder, and only
//! those: what it executes is its host-owned, read-only snapshot.
//!
//! The module's entry runs `./helper`, an executable beside it. Run from its
//! approved snapshot (`cache/snapshots/<digest>/`) the helper answers; run
//! from `modules/<id>/` itself (`pins = "off"`), a folder anyone with access
//! to `modules/` can change, execution of the folder's files is not granted
//! and the helper is refused by the confinement. Running a helper at all is
//! a spawn: the capability declares one (`true`, granted by the operator),
//! since a capability that declares none executes nothing after its start.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};

use crate::support::Home;

const DESCRIPTOR: &str = r#"{"id":"helped","version":"1.0.0","binaries":[{"name":"true","description":"Nothing."}],"capabilities":[{"id":"helped.run","description":"Runs its helper.","input_schema":{"type":"object"},"effects":{"reads":[],"writes":[],"network":false,"spawns":["true"],"cost":"trivial"}}]}"#;

/// The binary the capability spawns, and the rule that lets it run unasked.
const SPAWNS: &str = "[binaries]\ntrue = \"/bin/true\"\n\n[[approval.rules]]\nmodule = \"helped\"\ndecision = \"allow\"\n";

fn write(path: &Path, text: &str, mode: u32) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The `helped` module: its answer is what `./helper` printed, or `refused`.
fn install_helped(home: &Home) {
    let folder = home.modules().join("helped");
    write(
        &folder.join("helped"),
        &format!(
            "#!/bin/sh\nIFS= read -r line || exit 0\ncase \"$line\" in\n  *'\"method\":\"describe\"'*) printf '%s\\n' '{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{DESCRIPTOR}}}'; exit 0 ;;\nesac\nif said=$(./helper 2>/dev/null); then :; else said=refused; fi\nprintf '{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"output\":{{\"helper\":\"%s\"}}}}}}\\n' \"$said\"\n"
        ),
        0o755,
    );
    write(
        &folder.join("helper"),
        "#!/bin/sh\necho approved-helper\n",
        0o755,
    );
}

fn answer(home: &Home) -> Value {
    home.invoke("helped", "helped.run", &json!({}), &[])
        .invoke_result()["output"]
        .clone()
}

#[test]
fn a_folder_module_runs_its_own_helper_from_its_approved_snapshot() {
    let home = Home::new();
    home.require_landlock();
    home.write_config(SPAWNS);
    install_helped(&home);
    home.run(&["pin", "helped"]).expect_code(0);
    assert_eq!(answer(&home), json!({"helper": "approved-helper"}));
}

#[test]
fn a_module_that_declares_no_spawns_runs_not_even_its_approved_helper() {
    let home = Home::new();
    home.require_landlock();
    install_helped(&home);
    let entry = home.modules().join("helped/helped");
    let script = std::fs::read_to_string(&entry).unwrap();
    write(
        &entry,
        &script.replace(r#""spawns":["true"]"#, r#""spawns":[]"#),
        0o755,
    );
    home.run(&["pin", "helped"]).expect_code(0);
    assert_eq!(answer(&home), json!({"helper": "refused"}));
}

#[test]
fn a_module_run_from_its_folder_may_not_execute_the_folders_files() {
    let home = Home::new();
    home.require_landlock();
    home.write_config(&format!("pins = \"off\"\n{SPAWNS}"));
    install_helped(&home);
    assert_eq!(
        answer(&home),
        json!({"helper": "refused"}),
        "a file of modules/<id>/ was executed"
    );
}

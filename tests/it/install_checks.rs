//! `modhost install` refuses what the host would refuse:
//! each module here is written from the document as a shell script, broken
//! in one way an author gets wrong. The install is refused (exit 2) with
//! every finding and its remedy, and the home is exactly as it was: no
//! module, no pin, no snapshot, no `staging/` folder. `--force` installs
//! it unpinned; `--upgrade` replaces an installed module, keeping its state.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::Home;

/// A conforming descriptor of module `id`: one capability, a state root it
/// writes.
fn descriptor(id: &str, version: &str) -> Value {
    json!({
        "id": id, "version": version,
        "roots": [{"name": "state", "kind": "state"}],
        "capabilities": [{
            "id": format!("{id}.run"), "description": "say hello",
            "input_schema": {"type": "object", "properties": {"name": {"type": "string"}}},
            "output_schema": {"type": "object"},
            "effects": {"writes": ["state"]}
        }]
    })
}

/// Write `dir/<id>`: a shell module describing itself as `descriptor` and
/// answering every call with `{"output": {"version": V}}`.
pub fn script_module(dir: &Path, id: &str, descriptor: &Value) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(id);
    let text = descriptor.to_string();
    let version = descriptor["version"].as_str().unwrap_or("?");
    let script = format!(
        "#!/bin/sh\nIFS= read -r line || exit 0\ncase \"$line\" in\n  *'\"method\":\"describe\"'*) printf '%s\\n' '{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{text}}}'; exit 0 ;;\nesac\nprintf '%s\\n' '{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"output\":{{\"version\":\"{version}\"}}}}}}'\n"
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Every path under the home with its contents (folders as `<dir>`).
fn home_state(home: &Home) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let relative = path.strip_prefix(root).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                out.insert(relative, b"<dir>".to_vec());
                walk(root, &path, out);
            } else {
                out.insert(relative, std::fs::read(&path).unwrap_or_default());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&home.path(), &home.path(), &mut out);
    out
}

fn pin_of(home: &Home, id: &str) -> Value {
    std::fs::read_to_string(home.path().join("pins.json"))
        .map(|text| serde_json::from_str::<Value>(&text).unwrap()["modules"][id].clone())
        .unwrap_or(Value::Null)
}

type Breakage = fn(&mut Value);

/// The ways an author breaks a descriptor, and the finding each must give.
fn breakages() -> Vec<(&'static str, Breakage, &'static str)> {
    vec![
        (
            "a string input schema",
            |d| d["capabilities"][0]["input_schema"] = json!({"type": "string"}),
            "schema.input_not_object",
        ),
        (
            "two capabilities with one id",
            |d| {
                let again = d["capabilities"][0].clone();
                d["capabilities"].as_array_mut().unwrap().push(again);
            },
            "capability.duplicate_id",
        ),
        (
            "effects naming an undeclared root",
            |d| d["capabilities"][0]["effects"]["reads"] = json!(["transcripts"]),
            "effects.unknown_root",
        ),
        (
            "a version that is not semver",
            |d| d["version"] = json!("banana"),
            "descriptor.version_not_semver",
        ),
        (
            "a contract the host refuses",
            |d| d["contract_version"] = json!("9.0.0"),
            "contract.refused",
        ),
        (
            "a weakening contract-2 module",
            |d| {
                d["contract_version"] = json!("2.0.0");
                let capability = d["capabilities"][0]["id"].clone();
                d["operations"] = json!([{
                    "id": "run", "capability": capability,
                    "semantics": {"reads": ["state"], "external": true}
                }]);
            },
            "weakening.external_without_network",
        ),
    ]
}

#[test]
fn every_refusal_lists_its_findings_with_remedies_and_leaves_the_home_as_it_was() {
    let home = Home::new();
    home.run(&["list"]).expect_code(0);
    let before = home_state(&home);
    for (case, breakage, finding) in breakages() {
        let mut broken = descriptor("hello", "1.0.0");
        breakage(&mut broken);
        // A second, independent defect: every finding is listed, not the first.
        broken["capabilities"][0]["description"] = json!("");
        let module = script_module(&home.outside().join(finding), "hello", &broken);
        let run = home.run(&["install", module.to_str().unwrap()]);
        run.expect_code(2);
        assert!(
            run.stderr.contains(finding)
                && run.stderr.contains("portability.empty_description")
                && run.stderr.contains("remedy:")
                && run.stderr.contains("--force"),
            "{case}: the refusal must list every finding with its remedy: {run:#?}"
        );
        assert_eq!(
            home_state(&home),
            before,
            "{case}: a refused install changed the home"
        );
    }
}

#[test]
fn a_bare_executable_whose_descriptor_names_a_skill_is_refused_with_the_remedy() {
    let home = Home::new();
    home.run(&["list"]).expect_code(0);
    let mut with_skill = descriptor("guide", "1.0.0");
    with_skill["knowledge"] = json!({"skills": [{
        "id": "howto", "path": "knowledge/howto.md", "sha256": "0".repeat(64)
    }]});
    with_skill["capabilities"][0]["skills"] = json!(["howto"]);
    let folder = home.outside().join("guide");
    let module = script_module(&folder, "guide", &with_skill);
    let before = home_state(&home);
    let run = home.run(&["install", module.to_str().unwrap()]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("knowledge.missing")
            && run.stderr.contains("install the module's folder"),
        "{run:#?}"
    );
    assert_eq!(
        home_state(&home),
        before,
        "a refused install changed the home"
    );

    // The folder, with the skill and its right digest, installs and is pinned.
    std::fs::create_dir_all(folder.join("knowledge")).unwrap();
    std::fs::write(folder.join("knowledge/howto.md"), "# How to\n").unwrap();
    let sha = sha256_hex(b"# How to\n");
    with_skill["knowledge"]["skills"][0]["sha256"] = json!(sha);
    script_module(&folder, "guide", &with_skill);
    home.run(&["install", folder.to_str().unwrap()])
        .expect_code(0);
    assert!(home.modules().join("guide/knowledge/howto.md").is_file());
    assert_eq!(home.entry("guide")["status"], "enabled");
    assert!(pin_of(&home, "guide").is_object());
}

fn sha256_hex(bytes: &[u8]) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run sha256sum");
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let output = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn force_installs_a_nonconforming_module_unpinned_and_shows_its_findings() {
    let home = Home::new();
    let mut broken = descriptor("loose", "1.0.0");
    broken["capabilities"][0]["input_schema"] = json!({"type": "string"});
    let module = script_module(&home.outside(), "loose", &broken);
    let run = home.run(&["install", module.to_str().unwrap(), "--force"]);
    run.expect_code(0);
    assert!(
        run.stderr.contains("schema.input_not_object") && run.stderr.contains("UNPINNED"),
        "{run:#?}"
    );
    assert!(
        pin_of(&home, "loose").is_null(),
        "a forced install was pinned"
    );
    assert_eq!(home.entry("loose")["status"], "unpinned");
    // Not invocable: the refusal names its standing, exit 2.
    let run = home.run(&["invoke", "loose", "run", "--json"]);
    run.expect_code(2);
    assert_eq!(run.json()["error"]["kind"], "unpinned");

    // A module that does not even describe itself: refused with the
    // finding and the home unchanged, or forced in, broken and unpinned.
    let silent = home.outside().join("silent");
    std::fs::write(
        &silent,
        "#!/bin/sh
echo 'no descriptor today' >&2
exit 1
",
    )
    .unwrap();
    std::fs::set_permissions(&silent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let before = home_state(&home);
    let run = home.run(&["install", silent.to_str().unwrap()]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("describe.failed") && run.stderr.contains("remedy:"),
        "{run:#?}"
    );
    assert_eq!(
        home_state(&home),
        before,
        "a refused install changed the home"
    );
    home.run(&["install", silent.to_str().unwrap(), "--force"])
        .expect_code(0);
    assert_eq!(home.entry("silent")["status"], "broken");
    assert!(pin_of(&home, "silent").is_null());
}

#[test]
fn an_installed_id_is_replaced_only_with_upgrade_keeping_state_and_pinning_the_new_bytes() {
    let home = Home::new();
    let v1 = script_module(
        &home.outside().join("v1"),
        "hello",
        &descriptor("hello", "1.0.0"),
    );
    home.run(&["install", v1.to_str().unwrap()]).expect_code(0);
    let old_pin = pin_of(&home, "hello");
    let state = home.path().join("state/hello");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("memory"), "kept").unwrap();

    let v2 = script_module(
        &home.outside().join("v2"),
        "hello",
        &descriptor("hello", "2.0.0"),
    );
    let before = home_state(&home);
    let run = home.run(&["install", v2.to_str().unwrap()]);
    run.expect_code(2);
    assert!(run.stderr.contains("--upgrade"), "{run:#?}");
    assert_eq!(
        home_state(&home),
        before,
        "a refused install changed the home"
    );

    // An upgrade to a broken module is refused like any install: the old
    // one stays, pinned.
    let mut bad = descriptor("hello", "3.0.0");
    bad["version"] = json!("banana");
    let v3 = script_module(&home.outside().join("v3"), "hello", &bad);
    let run = home.run(&["install", v3.to_str().unwrap(), "--upgrade"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("descriptor.version_not_semver"),
        "{run:#?}"
    );
    assert_eq!(
        home_state(&home),
        before,
        "a refused upgrade changed the home"
    );

    // Disabled by the operator: still disabled once upgraded.
    home.run(&["disable", "hello"]).expect_code(0);
    let run = home.run(&["install", v2.to_str().unwrap(), "--upgrade"]);
    run.expect_code(0);
    assert!(run.stdout.contains("1.0.0 -> 2.0.0"), "{run:#?}");
    assert_eq!(home.entry("hello")["status"], "disabled");
    home.run(&["enable", "hello"]).expect_code(0);
    assert_eq!(
        std::fs::read_to_string(state.join("memory")).unwrap(),
        "kept"
    );
    let new_pin = pin_of(&home, "hello");
    assert_eq!(new_pin["version"], "2.0.0", "{new_pin:#}");
    assert_ne!(new_pin["digest"], old_pin["digest"]);
    let result = home.invoke("hello", "run", &json!({}), &[]).invoke_result();
    assert_eq!(result["output"]["version"], "2.0.0");
    // The old bytes are gone: no hidden copy, no snapshot no pin names.
    let hidden: Vec<_> = std::fs::read_dir(home.modules())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(
        hidden.is_empty(),
        "the replaced module was left: {hidden:?}"
    );
    let snapshots = std::fs::read_dir(home.path().join("cache/snapshots"))
        .unwrap()
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .count();
    assert_eq!(snapshots, 1, "the old snapshot must go with the old bytes");
}

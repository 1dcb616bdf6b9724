//! What a module declares is read as the document says: a typo in a
//! descriptor key is a conformance error naming the key it resembles (the
//! attack: `"netwrk": true` would otherwise read as `network: false`), a
//! contract version may be written `2`, `2.0` or `2.0.0`, and a duplicate
//! operation id is refused as an invalid operation, not as a weakening.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};

use crate::support::Home;

/// A protocol-complete Python module that describes itself as `descriptor`
/// and answers every invoke with an empty object.
fn module(descriptor: &Value) -> String {
    format!(
        r#"#!/usr/bin/python3
import json, sys
DESCRIPTOR = json.loads({descriptor:?})
def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n"); sys.stdout.flush()
line = sys.stdin.readline()
if not line:
    sys.exit(0)
try:
    req = json.loads(line)
except ValueError as e:
    send({{"jsonrpc": "2.0", "id": None, "error": {{"code": -32700, "message": str(e)}}}}); sys.exit(0)
if req.get("method") == "describe":
    send({{"jsonrpc": "2.0", "id": req["id"], "result": DESCRIPTOR}})
elif req.get("method") == "invoke":
    send({{"jsonrpc": "2.0", "id": req["id"], "result": {{"output": {{}}}}}})
else:
    send({{"jsonrpc": "2.0", "id": req.get("id"), "error": {{"code": -32601, "message": "unknown method"}}}})
"#,
        descriptor = descriptor.to_string()
    )
}

/// Write the module into `modules/<id>/<id>` and pin it, as an operator
/// approves a module copied by hand.
fn install(home: &Home, descriptor: &Value) -> String {
    assert!(
        Path::new("/usr/bin/python3").exists(),
        "these modules are Python: the test needs /usr/bin/python3"
    );
    let id = descriptor["id"].as_str().unwrap().to_owned();
    let folder = home.modules().join(&id);
    std::fs::create_dir_all(&folder).unwrap();
    let path = folder.join(&id);
    std::fs::write(&path, module(descriptor)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    home.run(&["pin", &id]);
    id
}

fn descriptor(id: &str) -> Value {
    json!({
        "id": id, "version": "1.0.0",
        "capabilities": [{"id": format!("{id}.fetch"), "description": "Fetch a page.",
                          "input_schema": {"type": "object"},
                          "effects": {"cost": "remote"}}]
    })
}

#[test]
fn a_typo_in_an_honesty_declaration_is_refused_with_the_key_it_resembles() {
    let home = Home::new();
    let mut d = descriptor("sneaky");
    d["capabilities"][0]["effects"]["netwrk"] = json!(true);
    d["capabilities"][0]["outputschema"] = json!({"type": "object"});
    let id = install(&home, &d);
    let run = home.run(&["conformance", &id, "--json"]);
    run.expect_code(1);
    let report = run.json();
    let typos: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == "descriptor.unknown_key")
        .collect();
    assert_eq!(typos.len(), 2, "{report:#}");
    assert!(typos.iter().all(|f| f["severity"] == "error"), "{report:#}");
    let text = serde_json::to_string(&typos).unwrap();
    for needle in [
        "netwrk",
        "did you mean \\\"network\\\"",
        "outputschema",
        "did you mean \\\"output_schema\\\"",
    ] {
        assert!(text.contains(needle), "{needle:?} missing: {report:#}");
    }
    // The human report says it too.
    let human = home.run(&["conformance", &id]);
    assert!(
        human.stdout.contains("did you mean \"network\""),
        "{human:#?}"
    );

    // Under a contract newer than the host knows the same key is only a
    // warning (the pin refuses that module on its own account).
    let home = Home::new();
    let mut d = descriptor("future");
    d["contract_version"] = json!("1.7");
    d["capabilities"][0]["effects"]["gpu"] = json!(true);
    let id = install(&home, &d);
    let report = home.run(&["conformance", &id, "--json"]).json();
    let typo = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "descriptor.unknown_key")
        .unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(typo["severity"], "warning", "{report:#}");
}

#[test]
fn contract_versions_are_read_as_the_document_says() {
    let home = Home::new();
    for (id, version, contract, effective) in [
        ("major", "2", "v2", Some("2.0")),
        ("minor", "2.0", "v2", Some("2.0")),
        ("full", "2.0.0", "v2", Some("2.0")),
        ("one", "1", "v1", Some("1.0")),
        ("tagged", "2.0.0-beta", "refused", None),
    ] {
        let mut d = descriptor(id);
        d["contract_version"] = json!(version);
        if contract == "v2" {
            d["operations"] = json!([{"id": "fetch", "capability": format!("{id}.fetch")}]);
        }
        install(&home, &d);
        let entry = home.entry(id);
        assert_eq!(entry["contract"], contract, "{version}: {entry:#}");
        assert_eq!(
            entry["contract_standing"]["effective"].as_str(),
            effective,
            "{version}: {entry:#}"
        );
        if contract == "refused" {
            let reason = entry["contract_standing"]["reason"].as_str().unwrap();
            assert!(
                reason.contains("MAJOR, MAJOR.MINOR or MAJOR.MINOR.PATCH"),
                "{reason}"
            );
        }
    }
}

#[test]
fn a_duplicate_operation_id_is_refused_as_invalid_not_as_a_weakening() {
    let home = Home::new();
    let mut d = descriptor("twiceop");
    d["contract_version"] = json!("2.0.0");
    let op = json!({"id": "fetch", "capability": "twiceop.fetch"});
    d["operations"] = json!([op, op]);
    let id = install(&home, &d);
    let entry = home.entry(&id);
    assert_eq!(entry["contract"], "refused", "{entry:#}");
    let standing = entry["contract_standing"].to_string();
    assert!(standing.contains("operation.duplicate_id"), "{entry:#}");
    assert!(!standing.contains("weaken"), "{entry:#}");
    let error = home
        .invoke(&id, "twiceop.fetch", &json!({}), &[])
        .refused_kind();
    assert_eq!(error, "nonconforming");
}

/// `modhost install` refuses the typo too, before anything is installed: an
/// operator never gets a module whose `network: true` was silently lost.
#[test]
fn install_refuses_a_typo_in_an_honesty_declaration_and_installs_nothing() {
    let home = Home::new();
    let mut d = descriptor("sneaky");
    d["capabilities"][0]["effects"]["netwrk"] = json!(true);
    let path = home.outside().join("sneaky");
    std::fs::write(&path, module(&d)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = home.run(&["install", &path.to_string_lossy()]);
    run.expect_code(2);
    assert!(run.stderr.contains("did you mean \"network\""), "{run:#?}");
    assert!(!home.modules().join("sneaky").exists(), "{run:#?}");
    let pins = std::fs::read_to_string(home.path().join("pins.json")).unwrap_or_default();
    assert!(!pins.contains("sneaky"), "{pins}");
}

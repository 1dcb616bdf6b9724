//! `modhost conformance` grants each invoke exactly what `modhost invoke`
//! grants its capability: a module whose capability reads a root it does not
//! name in its effects cannot pass conformance and then fail every real call.
//!
//! The attack (or the slip): a shell module declares the workspace at module
//! level and its capability reads a file there, with `effects.reads: []`.
//! Invoke never grants it the workspace; conformance used to grant every
//! capability the whole module's roots, so its example passed there.

use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use crate::support::Home;

/// A module `id` whose capability `<id>.peek` reads `note.txt` from the
/// workspace root it is granted (or answers `root_missing` when it is told
/// of none), naming `reads` in its effects.
fn install_peeker(home: &Home, id: &str, reads: &str) {
    let descriptor = format!(
        r#"{{"id":"{id}","version":"1.0.0","roots":[{{"name":"workspace","kind":"workspace","description":"The files of the caller."}}],"capabilities":[{{"id":"{id}.peek","description":"Reads note.txt from the workspace.","input_schema":{{"type":"object"}},"effects":{{"reads":{reads}}},"examples":[{{"description":"the note","input":{{}}}}]}}]}}"#
    );
    // Shell builtins only: a confined capability runs no program it does
    // not name in `effects.spawns`.
    let script = format!(
        r#"#!/bin/sh
IFS= read -r line || exit 0
rest=${{line#*\"id\":}}
id=${{rest%%[,\}}]*}}
case "$line" in
  *'"method":"describe"'*) printf '{{"jsonrpc":"2.0","id":%s,"result":%s}}\n' "$id" '{descriptor}'; exit 0 ;;
  *'"method":"invoke"'*) ;;
  *) printf '{{"jsonrpc":"2.0","id":null,"error":{{"code":-32601,"message":"unknown method"}}}}\n'; exit 0 ;;
esac
rest=${{line#*\"workspace\":\{{}}
root=
[ "$rest" = "$line" ] || {{ rest=${{rest#*\"path\":\"}}; root=${{rest%%\"*}}; }}
if [ -n "$root" ] && IFS= read -r note < "$root/note.txt"; then
  printf '{{"jsonrpc":"2.0","id":%s,"result":{{"output":{{"note":"%s"}}}}}}\n' "$id" "$note"
else
  printf '{{"jsonrpc":"2.0","id":%s,"error":{{"code":-32001,"message":"the workspace was not granted","data":{{"kind":"root_missing"}}}}}}\n' "$id"
fi
"#
    );
    let folder = home.modules().join(id);
    std::fs::create_dir_all(&folder).unwrap();
    let entry = folder.join(id);
    std::fs::write(&entry, script).unwrap();
    std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o755)).unwrap();
    home.run(&["pin", id]).expect_code(0);
}

#[test]
fn a_capability_reading_a_root_it_does_not_name_fails_conformance_as_it_fails_invoke() {
    let home = Home::new();
    std::fs::write(home.workspace().join("note.txt"), "hello\n").unwrap();
    install_peeker(&home, "peeker", "[]");

    // What invoke does: the capability names no root, so it gets none.
    let run = home.invoke("peeker", "peeker.peek", &json!({}), &[]);
    assert!(
        !run.stdout.contains("hello"),
        "invoke granted a root the capability does not name: {run:#?}"
    );
    assert_ne!(run.code, 0, "{run:#?}");

    // Conformance now sees the same failure, and says what to name.
    let run = home.run(&["conformance", "peeker", "--json"]);
    run.expect_code(1);
    let report = run.json();
    let findings = report["findings"].as_array().expect("findings");
    let unnamed = findings
        .iter()
        .find(|f| f["id"] == "battery.reads_unnamed_root")
        .unwrap_or_else(|| panic!("no reads_unnamed_root finding: {report:#}"));
    assert_eq!(unnamed["severity"], "error", "{unnamed:#}");
    assert_eq!(unnamed["capability"], "peeker.peek", "{unnamed:#}");
    let remedy = unnamed["remedy"].as_str().unwrap();
    assert!(
        remedy.contains("`workspace`") && remedy.contains("effects.reads"),
        "{remedy}"
    );
    home.assert_no_module_processes();
}

#[test]
fn a_capability_that_names_its_root_answers_and_is_not_reported() {
    let home = Home::new();
    std::fs::write(home.workspace().join("note.txt"), "hello\n").unwrap();
    install_peeker(&home, "named", r#"["workspace"]"#);

    let run = home.invoke("named", "named.peek", &json!({}), &[]);
    assert_eq!(run.invoke_result()["output"]["note"], "hello", "{run:#?}");

    // Its example passes as planned, so no root is reported unnamed.
    let report = home.run(&["conformance", "named", "--json"]).json();
    for finding in report["findings"].as_array().expect("findings") {
        assert!(
            finding["id"] != "battery.example_failed"
                && finding["id"] != "battery.reads_unnamed_root",
            "{report:#}"
        );
    }
}

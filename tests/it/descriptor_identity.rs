//! A descriptor belongs to its module: the same bytes installed under two
//! names are described separately, and `list` names each module by its
//! folder. The attack it prevents: a multi-call program (busybox-style, its
//! id read from its own name) installed twice used to get the first copy's
//! cached descriptor for both, and `list` reported an id clash naming every
//! copy.

use std::os::unix::fs::PermissionsExt;

use crate::support::Home;

/// One script whose id is the name it was run by.
const MULTI_CALL: &str = "#!/bin/sh\nname=${0##*/}\nIFS= read -r line\ncase \"$line\" in\n  *'\"method\":\"describe\"'*) printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"id\":\"'\"$name\"'\",\"version\":\"1.0.0\",\"capabilities\":[{\"id\":\"'\"$name\"'.run\",\"description\":\"Answers with its name.\",\"input_schema\":{\"type\":\"object\"}}]}}' ;;\n  *) printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"output\":{\"name\":\"'\"$name\"'\"}}}' ;;\nesac\n";

#[test]
fn the_same_bytes_under_two_names_are_two_modules_with_their_own_descriptors() {
    let home = Home::new();
    let source_dir = tempfile::tempdir().expect("source dir");
    let source = source_dir.path().join("multi");
    std::fs::write(&source, MULTI_CALL).expect("script");
    std::fs::set_permissions(&source, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    for id in ["alpha", "beta"] {
        home.run(&["install", source.to_str().unwrap(), "--id", id])
            .expect_code(0);
    }
    // And a third copy dropped in by hand, bare, then pinned.
    std::fs::copy(&source, home.modules().join("gamma")).expect("copy");
    home.run(&["pin", "gamma"]).expect_code(0);

    let entries = home.list();
    let ids: Vec<&str> = entries.iter().filter_map(|e| e["id"].as_str()).collect();
    assert_eq!(ids, ["alpha", "beta", "gamma"], "{entries:#?}");
    for entry in &entries {
        let id = entry["id"].as_str().unwrap();
        assert_eq!(entry["status"], "enabled", "{entry:#}");
        assert_eq!(
            entry["capabilities"],
            serde_json::json!([format!("{id}.run")]),
            "{entry:#}"
        );
        let output = home
            .invoke(id, &format!("{id}.run"), &serde_json::json!({}), &[])
            .invoke_result();
        assert_eq!(output["output"]["name"], id, "{output:#}");
    }
}

//! No lost updates: operators changing one home at the same time each get
//! their change. Without the home's lock, parallel `pin`/`unpin` commands all
//! exit 0 while most of their updates vanish (each reads the old
//! `pins.json` and the last rename wins), so a revoked approval stays in
//! force.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::support::Home;

/// A script module that describes itself as `id`.
fn write_module(path: &Path, id: &str) {
    let script = format!(
        "#!/bin/sh\nIFS= read -r line\ncase \"$line\" in\n  *'\"method\":\"describe\"'*) printf '%s\\n' '{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"id\":\"{id}\",\"version\":\"1.0.0\",\"capabilities\":[{{\"id\":\"{id}.run\",\"description\":\"Does nothing.\",\"input_schema\":{{\"type\":\"object\"}}}}]}}}}' ;;\n  *) printf '%s\\n' '{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"output\":{{}}}}}}' ;;\nesac\n"
    );
    std::fs::create_dir_all(path.parent().unwrap()).expect("folder");
    std::fs::write(path, script).expect("write module");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

fn pinned(home: &Home) -> BTreeSet<String> {
    let text = std::fs::read_to_string(home.path().join("pins.json")).expect("pins.json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("pins.json is JSON");
    json["modules"]
        .as_object()
        .expect("modules")
        .keys()
        .cloned()
        .collect()
}

#[test]
fn twenty_parallel_pin_unpin_install_and_remove_commands_each_take_effect() {
    let home = Home::new();
    let ids =
        |range: std::ops::Range<usize>| -> Vec<String> { range.map(|i| format!("m{i}")).collect() };
    for id in ids(0..18) {
        write_module(&home.modules().join(&id).join(&id), &id);
    }
    let sources = tempfile::tempdir().expect("sources");
    for id in ["n0", "n1"] {
        write_module(&sources.path().join(id), id);
    }
    // Described once up front, so the parallel commands race on the state
    // rather than on describing.
    home.run(&["list"]).expect_code(0);
    for id in ids(10..18) {
        home.run(&["pin", &id]).expect_code(0);
    }

    let mut commands: Vec<Vec<String>> = Vec::new();
    for id in ids(0..10) {
        commands.push(vec!["pin".into(), id]);
    }
    for id in ids(10..16) {
        commands.push(vec!["unpin".into(), id]);
    }
    for id in ids(16..18) {
        commands.push(vec!["remove".into(), id]);
    }
    for id in ["n0", "n1"] {
        let source = sources.path().join(id);
        commands.push(vec!["install".into(), source.display().to_string()]);
    }
    assert_eq!(commands.len(), 20);
    let runs: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = commands
            .iter()
            .map(|args| scope.spawn(|| home.run(args)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for run in &runs {
        run.expect_code(0);
    }

    let mut expected: BTreeSet<String> = ids(0..10).into_iter().collect();
    expected.extend(["n0".to_owned(), "n1".to_owned()]);
    assert_eq!(pinned(&home), expected, "every change took effect");
    for id in ["m16", "m17"] {
        assert!(!home.modules().join(id).exists(), "{id} removed");
    }
    for id in ["n0", "n1"] {
        assert_eq!(home.entry(id)["status"], "enabled");
    }
    for id in ids(10..16) {
        assert_eq!(home.entry(&id)["status"], "unpinned", "{id}");
    }
}

#[test]
fn a_pins_file_of_an_unknown_format_is_refused_and_left_alone() {
    let home = Home::new();
    write_module(&home.modules().join("m").join("m"), "m");
    let text = "{\"format\": 7, \"modules\": {}}\n";
    std::fs::write(home.path().join("pins.json"), text).expect("pins.json");
    let run = home.run(&["pin", "m"]);
    assert_ne!(run.code, 0, "{run:#?}");
    assert!(
        run.stderr.contains("format 7") && run.stderr.contains("move the file aside"),
        "{run:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join("pins.json")).unwrap(),
        text,
        "not rewritten"
    );
}

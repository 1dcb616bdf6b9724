//! End to end with the real `notes` module: the notebook persists between
//! calls in the module's state root, survives a write cut short by a crash,
//! answers the same natively and as a component, and serves over MCP.

use serde_json::{Value, json};

use crate::mcp_stdio::McpStdio;
use crate::support::{Home, module_binary, module_component, strings};

/// The notebook's log in `home`'s state for `notes`.
fn log_path(home: &Home) -> std::path::PathBuf {
    home.path().join("state").join("notes").join("notes.jsonl")
}

/// A home with `notes` installed natively or as a component.
fn notes_home(as_component: bool) -> Home {
    let home = Home::new();
    if as_component {
        home.install_module_component("notes");
    } else {
        home.install_module("notes");
    }
    home
}

fn call(home: &Home, capability: &str, input: &Value) -> Value {
    home.invoke("notes", capability, input, &[]).invoke_result()
}

/// `(id, text)` of each note of a list or search output, in order.
fn notes_of(output: &Value) -> Vec<(u64, String)> {
    output["notes"]
        .as_array()
        .unwrap_or_else(|| panic!("no notes array: {output:#}"))
        .iter()
        .map(|n| {
            (
                n["id"].as_u64().unwrap_or(0),
                n["text"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn pairs(items: &[(u64, &str)]) -> Vec<(u64, String)> {
    items
        .iter()
        .map(|(id, text)| (*id, (*text).to_owned()))
        .collect()
}

#[test]
fn add_list_search_and_remove_persist_between_calls() {
    let home = notes_home(false);
    let first = call(
        &home,
        "notes.add",
        &json!({"text": "Buy milk", "tags": ["Home"]}),
    );
    assert_eq!(first["output"]["note"]["id"], 1, "{first:#}");
    assert_eq!(
        first["output"]["note"]["tags"],
        json!(["home"]),
        "{first:#}"
    );
    call(
        &home,
        "notes.add",
        &json!({"text": "Deploy on Friday", "tags": ["work", "todo"]}),
    );
    call(
        &home,
        "notes.add",
        &json!({"text": "Call the plumber", "tags": ["home", "todo"]}),
    );

    let todo = call(&home, "notes.list", &json!({"tag": "todo"}));
    assert_eq!(
        notes_of(&todo["output"]),
        pairs(&[(3, "Call the plumber"), (2, "Deploy on Friday")]),
        "newest first: {todo:#}"
    );
    let limited = call(&home, "notes.list", &json!({"limit": 1}));
    assert_eq!(limited["output"]["total"], 3);
    assert_eq!(limited["output"]["truncated"], true, "{limited:#}");

    let found = call(&home, "notes.search", &json!({"query": "MILK"}));
    assert_eq!(
        notes_of(&found["output"]),
        pairs(&[(1, "Buy milk")]),
        "{found:#}"
    );
    let found = call(
        &home,
        "notes.search",
        &json!({"query": "the", "tag": "home"}),
    );
    assert_eq!(
        notes_of(&found["output"]),
        pairs(&[(3, "Call the plumber")]),
        "{found:#}"
    );

    let removed = call(&home, "notes.remove", &json!({"id": 2}));
    assert_eq!(removed["output"]["count"], 2, "{removed:#}");
    let error = home
        .invoke("notes", "notes.remove", &json!({"id": 2}), &[])
        .invoke_error();
    assert_eq!(error["kind"], "not_found", "{error:#}");
    let all = call(&home, "notes.list", &json!({}));
    assert_eq!(
        notes_of(&all["output"]),
        pairs(&[(3, "Call the plumber"), (1, "Buy milk")])
    );

    // A note added after a removal gets a new id, never a reused one.
    let next = call(&home, "notes.add", &json!({"text": "Water the plants"}));
    assert_eq!(next["output"]["note"]["id"], 4, "{next:#}");
    assert!(
        log_path(&home).is_file(),
        "the notebook is in the module's state root"
    );
}

#[test]
fn bad_input_is_refused_and_writes_nothing() {
    let home = notes_home(false);
    for input in [
        json!({"text": ""}),
        json!({"text": "x", "tags": ["two words"]}),
        json!({"text": "x".repeat(16 * 1024 + 1)}),
        json!({"text": 5}),
    ] {
        let kind = home
            .invoke("notes", "notes.add", &input, &[])
            .unsuccessful_kind();
        assert_eq!(kind, "invalid_input", "{input}");
    }
    assert!(
        std::fs::read(log_path(&home))
            .unwrap_or_default()
            .is_empty(),
        "a refused add wrote to the notebook"
    );
}

/// What a process killed in the middle of its append leaves: the start of a
/// record and no newline. Every note before it is still listed, the caller
/// is told a line was skipped, and the next add lands whole after it.
#[test]
fn a_write_cut_short_by_a_crash_loses_no_earlier_note() {
    let home = notes_home(false);
    call(
        &home,
        "notes.add",
        &json!({"text": "first", "tags": ["keep"]}),
    );
    call(
        &home,
        "notes.add",
        &json!({"text": "second", "tags": ["keep"]}),
    );
    let log = log_path(&home);
    let before = std::fs::read(&log).expect("the log");
    let mut torn = before.clone();
    torn.extend_from_slice(br#"{"add":{"nonce":"r-9-1","text":"half a no"#);
    std::fs::write(&log, &torn).expect("tear the log");

    let listed = call(&home, "notes.list", &json!({}));
    assert_eq!(
        notes_of(&listed["output"]),
        pairs(&[(2, "second"), (1, "first")]),
        "{listed:#}"
    );
    let warnings = strings(&listed["warnings"]);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("1 unreadable line") && w.contains("intact")),
        "the skipped fragment is reported: {listed:#}"
    );

    let third = call(
        &home,
        "notes.add",
        &json!({"text": "third", "tags": ["keep"]}),
    );
    assert_eq!(third["output"]["note"]["id"], 3, "{third:#}");
    let listed = call(&home, "notes.list", &json!({"tag": "keep"}));
    assert_eq!(
        notes_of(&listed["output"]),
        pairs(&[(3, "third"), (2, "second"), (1, "first")]),
        "{listed:#}"
    );
    let after = std::fs::read(&log).expect("the log");
    assert!(
        after.starts_with(&torn),
        "nothing written before was rewritten"
    );
}

/// Adds racing each other (an MCP client's parallel tool calls) all land,
/// each with its own id: the log is appended to, never read-modified-replaced.
#[test]
fn concurrent_adds_lose_no_note() {
    let home = notes_home(false);
    let ids: Vec<u64> = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..8)
            .map(|n| {
                let home = &home;
                scope.spawn(move || {
                    let added = call(home, "notes.add", &json!({"text": format!("note {n}")}));
                    added["output"]["note"]["id"].as_u64().unwrap_or(0)
                })
            })
            .collect();
        calls
            .into_iter()
            .map(|c| c.join().expect("a call"))
            .collect()
    });
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (1..=8).collect::<Vec<u64>>(), "ids {ids:?}");
    let listed = call(&home, "notes.list", &json!({}));
    assert_eq!(listed["output"]["total"], 8, "{listed:#}");
}

/// What an invoke printed, minus what differs between calls (timings, the
/// request id, the creation time) and the host's notes on confinement.
fn outcome(home: &Home, capability: &str, input: &Value) -> Value {
    let mut json = home.invoke("notes", capability, input, &[]).json();
    if let Some(object) = json.as_object_mut() {
        for key in ["elapsed_ms", "duration_ms", "request_id", "host_warnings"] {
            object.remove(key);
        }
    }
    scrub_created(&mut json);
    json
}

fn scrub_created(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if map.contains_key("created") {
                map.insert("created".into(), json!("<time>"));
            }
            map.values_mut().for_each(scrub_created);
        }
        Value::Array(items) => items.iter_mut().for_each(scrub_created),
        _ => {}
    }
}

#[test]
fn notes_gives_identical_outputs_native_and_as_a_component() {
    let native = notes_home(false);
    let wasm = notes_home(true);
    assert_eq!(wasm.entry("notes")["transport"], "component");
    let requests = [
        ("notes.list", json!({})),
        (
            "notes.add",
            json!({"text": "Buy milk", "tags": ["home", "Todo"]}),
        ),
        (
            "notes.add",
            json!({"text": "Deploy\non Friday", "tags": ["work"]}),
        ),
        ("notes.add", json!({"text": "x", "tags": ["bad tag"]})),
        ("notes.list", json!({"tag": "todo"})),
        ("notes.search", json!({"query": "friday"})),
        ("notes.remove", json!({"id": 1})),
        ("notes.remove", json!({"id": 1})),
        ("notes.list", json!({"limit": 1})),
    ];
    let mut successes = 0;
    for (capability, input) in &requests {
        let expected = outcome(&native, capability, input);
        let got = outcome(&wasm, capability, input);
        assert_eq!(
            got, expected,
            "{capability} {input}: component and native differ"
        );
        successes += usize::from(expected.get("output").is_some());
    }
    assert!(successes >= 6, "too few requests succeeded natively");
    // The same torn tail reads the same on both.
    for home in [&native, &wasm] {
        let mut bytes = std::fs::read(log_path(home)).expect("the log");
        bytes.extend_from_slice(b"{\"remove\":{\"i");
        std::fs::write(log_path(home), bytes).expect("tear the log");
    }
    for (capability, input) in [
        ("notes.list", json!({})),
        ("notes.add", json!({"text": "after the crash"})),
        ("notes.list", json!({})),
    ] {
        assert_eq!(
            outcome(&wasm, capability, &input),
            outcome(&native, capability, &input),
            "{capability} {input} after a torn write"
        );
    }
    let lines = |home: &Home| {
        std::fs::read_to_string(log_path(home))
            .expect("the log")
            .lines()
            .count()
    };
    assert_eq!(lines(&wasm), lines(&native), "the same records on disk");
}

#[test]
fn notes_conforms_native_and_as_a_component() {
    let home = Home::new();
    for program in [module_binary("notes"), module_component("notes")] {
        let run = home.run(&["conformance", &program.to_string_lossy(), "--json"]);
        let report = run.json();
        assert_eq!(report["errors"], 0, "{}: {report:#}", program.display());
        assert_eq!(report["module"], "notes", "{report:#}");
        run.expect_code(0);
    }
}

#[test]
fn the_built_binary_installs_and_serves_over_mcp() {
    let home = Home::new();
    home.run(&["install", &module_binary("notes").to_string_lossy()])
        .expect_code(0);
    assert_eq!(home.entry("notes")["status"], "enabled");
    call(
        &home,
        "notes.add",
        &json!({"text": "from the CLI", "tags": ["cli"]}),
    );

    let mut server = McpStdio::start(&home, Some(&home.workspace()), |_| {});
    let names = server.tool_names();
    let tool = |verb: &str| {
        names
            .iter()
            .find(|n| n.starts_with("notes") && n.ends_with(verb))
            .unwrap_or_else(|| panic!("no notes tool for {verb} in {names:?}"))
            .clone()
    };
    let added = server.result(
        "tools/call",
        &json!({"name": tool("add"), "arguments": {"text": "from MCP", "tags": ["mcp"]}}),
    );
    assert_ne!(added["isError"], json!(true), "{added:#}");
    let listed = server.result(
        "tools/call",
        &json!({"name": tool("list"), "arguments": {}}),
    );
    assert_ne!(listed["isError"], json!(true), "{listed:#}");
    let text = listed.to_string();
    assert!(
        text.contains("from MCP") && text.contains("from the CLI"),
        "{listed:#}"
    );
    server.finish();
    home.assert_no_module_processes();
}

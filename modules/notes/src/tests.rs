//! The module answering whole requests, as the host sends them.

use std::io::Cursor;

use serde_json::{Value, json};

/// Run one request line through the module; the parsed response.
fn call(request: &Value) -> Value {
    #[derive(Clone, Default)]
    struct Shared(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);
    impl std::io::Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().write(buf)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let out = Shared::default();
    let status = crate::module().serve_io(Cursor::new(format!("{request}\n")), out.clone());
    assert_eq!(status, 0);
    let bytes = out.0.borrow().clone();
    serde_json::from_slice(&bytes).unwrap()
}

fn invoke(dir: &std::path::Path, access: &str, capability: &str, input: &Value) -> Value {
    call(
        &json!({"jsonrpc": "2.0", "id": 7, "method": "invoke", "params": {
            "protocol": "1.0", "contract_version": "2.0", "request_id": "r1",
            "capability": capability, "input": input,
            "roots": {"state": {"path": dir.to_str().unwrap(), "kind": "state", "access": access}},
            "deadline_ms": 30000, "max_output_bytes": 1048576
        }}),
    )
}

#[test]
fn add_list_search_remove_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let added = invoke(
        dir.path(),
        "read-write",
        "notes.add",
        &json!({"text": "Buy milk", "tags": ["Home", "home"]}),
    );
    assert_eq!(added["result"]["output"]["note"]["id"], 1, "{added}");
    assert_eq!(
        added["result"]["output"]["note"]["tags"],
        json!(["home"]),
        "{added}"
    );
    invoke(
        dir.path(),
        "read-write",
        "notes.add",
        &json!({"text": "Deploy on Friday", "tags": ["work"]}),
    );

    let listed = invoke(dir.path(), "read", "notes.list", &json!({"tag": "work"}));
    let notes = &listed["result"]["output"]["notes"];
    assert_eq!(notes.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(notes[0]["id"], 2);

    let found = invoke(
        dir.path(),
        "read",
        "notes.search",
        &json!({"query": "MILK"}),
    );
    assert_eq!(found["result"]["output"]["notes"][0]["id"], 1, "{found}");

    let removed = invoke(dir.path(), "read-write", "notes.remove", &json!({"id": 1}));
    assert_eq!(removed["result"]["output"]["count"], 1, "{removed}");
    let again = invoke(dir.path(), "read-write", "notes.remove", &json!({"id": 1}));
    assert_eq!(again["error"]["data"]["kind"], "not_found", "{again}");
}

#[test]
fn a_read_only_grant_cannot_add() {
    let dir = tempfile::tempdir().unwrap();
    let refused = invoke(dir.path(), "read", "notes.add", &json!({"text": "x"}));
    assert_eq!(refused["error"]["data"]["kind"], "denied", "{refused}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing written"
    );
}

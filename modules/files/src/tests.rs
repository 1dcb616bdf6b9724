//! The module answering whole requests.

use std::io::Cursor;

use modsdk::Access;
use serde_json::{Value, json};

use crate::test_support::workspace;

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

fn invoke(dir: &std::path::Path, capability: &str, input: &Value) -> Value {
    call(
        &json!({"jsonrpc": "2.0", "id": 7, "method": "invoke", "params": {
            "protocol": "1.0", "contract_version": "2.0", "request_id": "r1",
            "capability": capability, "input": input,
            "roots": {"workspace": {"path": dir.to_str().unwrap(), "kind": "workspace", "access": "read"}},
            "deadline_ms": 30000, "max_output_bytes": 1048576
        }}),
    )
}

#[test]
fn describes_three_read_only_capabilities_with_matching_operations() {
    let response = call(&json!({"jsonrpc": "2.0", "id": 1, "method": "describe"}));
    let descriptor: modsdk::modproto::Descriptor =
        serde_json::from_value(response["result"].clone()).unwrap();
    assert_eq!(
        (descriptor.id.as_str(), descriptor.version.as_str()),
        ("files", "0.1.0")
    );
    assert_eq!(descriptor.contract_version.as_deref(), Some("2.0.0"));
    assert_eq!(descriptor.roots[0].effective_access(), Access::Read);
    let ids: Vec<_> = descriptor
        .capabilities
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(ids, ["files.search", "files.read", "files.list"]);
    for capability in &descriptor.capabilities {
        assert!(capability.effects.is_read_only(), "{}", capability.id);
        assert_eq!(capability.effects.reads, ["workspace"]);
        assert_eq!(capability.input_schema["type"], "object");
        let operation = descriptor
            .operations
            .iter()
            .find(|o| o.capability == capability.id)
            .unwrap();
        assert_eq!(operation.semantics.reads, capability.effects.reads);
        assert!(operation.semantics.mutates.is_empty() && !operation.semantics.external.is_used());
    }
}

#[test]
fn declared_examples_succeed_on_an_empty_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let response = call(&json!({"jsonrpc": "2.0", "id": 1, "method": "describe"}));
    let descriptor: modsdk::modproto::Descriptor =
        serde_json::from_value(response["result"].clone()).unwrap();
    for capability in &descriptor.capabilities {
        for example in &capability.examples {
            let response = invoke(dir.path(), &capability.id, &example.input);
            assert!(
                response.get("result").is_some(),
                "{}: {response}",
                capability.id
            );
        }
    }
}

#[test]
fn invokes_end_to_end() {
    let (dir, _root) = workspace(&[("src/lib.rs", "// TODO one\n")]);
    let response = invoke(dir.path(), "files.search", &json!({"pattern": "TODO"}));
    assert_eq!(response["id"], 7);
    assert_eq!(
        response["result"]["output"]["matches"][0],
        json!({"path": "src/lib.rs", "line": 1, "text": "// TODO one"})
    );

    let response = invoke(dir.path(), "files.read", &json!({"path": "../etc/passwd"}));
    assert_eq!(response["error"]["code"], -32002);
    assert_eq!(response["error"]["data"]["kind"], "path_escape");

    let response = invoke(
        dir.path(),
        "files.read",
        &json!({"path": 5, "start_line": 0, "bogus": true}),
    );
    // The module checks by type (the host has validated the schema and
    // listed every problem before a call gets here): refused, named.
    assert_eq!(response["error"]["code"], -32602);
    assert_eq!(response["error"]["data"]["kind"], "invalid_input");
    assert!(
        !response["error"]["data"]["problems"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{response}"
    );
}

//! Round trips over every message type, and the strictness of the decoder.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::contract::{self, ContractDecision};
use crate::jsonrpc::DecodeError;
use crate::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(value: &T) {
    let text = serde_json::to_string(value).unwrap();
    let back: T = serde_json::from_str(&text).unwrap();
    assert_eq!(&back, value, "{text}");
}

fn full_descriptor() -> Descriptor {
    serde_json::from_value(json!({
        "id": "sessions", "version": "0.3.1", "contract_version": "2.0.0",
        "title": "Agent sessions", "description": "Reads session logs.",
        "roots": [
            {"name": "transcripts", "kind": "source", "description": "where session logs live"},
            {"name": "state", "kind": "state"},
            {"name": "artifacts", "kind": "artifacts"},
            {"name": "workspace", "kind": "workspace", "access": "read"}
        ],
        "binaries": [{"name": "git", "description": "history"}],
        "capabilities": [{
            "id": "sessions.assay", "title": "Assay", "description": "Scores sessions.",
            "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}},
            "output_schema": {"type": "object"},
            "effects": {"reads": ["transcripts"], "writes": ["artifacts"], "network": false, "spawns": ["git"], "cost": "local", "untrusted_output": true},
            "skills": ["assay-guide"],
            "examples": [{"description": "last one", "input": {"n": 1}}]
        }],
        "operations": [{"id": "assay", "capability": "sessions.assay",
            "semantics": {"reads": ["transcripts"], "mutates": ["artifacts"], "external": false, "runs": ["git"], "needs_approval": false, "untrusted_output": true}}],
        "knowledge": {"overlays": [{"id": "intro", "path": "knowledge/intro.md", "sha256": "ab"}],
                      "skills": [{"id": "assay-guide", "title": "Guide", "path": "knowledge/assay.md", "sha256": "cd"}]},
        "warnings": ["index is stale"]
    }))
    .unwrap()
}

#[test]
fn descriptor_round_trips_with_every_field() {
    let d = full_descriptor();
    round_trip(&d);
    assert_eq!(d.roots[0].effective_access(), Access::Read);
    assert_eq!(d.roots[1].effective_access(), Access::ReadWrite);
    assert_eq!(d.capabilities[0].effects.cost, Cost::Local);
    assert!(!d.capabilities[0].effects.is_read_only());
}

#[test]
fn minimal_descriptor_takes_defaults() {
    let d: Descriptor = serde_json::from_value(json!({
        "id": "m", "version": "1.0.0",
        "capabilities": [{"id": "m.x", "input_schema": {"type": "object"}}]
    }))
    .unwrap();
    assert_eq!(d.contract_version, None);
    assert!(d.operations.is_empty() && d.knowledge.is_empty());
    assert!(d.capabilities[0].effects.is_read_only());
    round_trip(&d);
}

/// The attack this default closes: a module that reads the network and
/// says nothing about its output. Its output is untrusted all the same;
/// only an explicit `false` says otherwise, and the field is written back
/// exactly as declared.
#[test]
fn output_is_untrusted_when_the_network_is_used_unless_declared() {
    let effects = |value: Value| -> Effects { serde_json::from_value(value).unwrap() };
    for (declared, untrusted) in [
        (json!({}), false),
        (json!({"network": false}), false),
        (json!({"network": []}), false),
        (json!({"network": true}), true),
        (json!({"network": ["api.github.com:443"]}), true),
        (json!({"network": true, "untrusted_output": false}), false),
        (json!({"untrusted_output": true}), true),
        (json!({"reads": ["inbox"], "untrusted_output": true}), true),
    ] {
        let e = effects(declared.clone());
        assert_eq!(e.output_is_untrusted(), untrusted, "{declared}");
        round_trip(&e);
        let written = serde_json::to_value(&e).unwrap();
        assert_eq!(
            written.get("untrusted_output"),
            declared.get("untrusted_output"),
            "written back as declared: {written}"
        );
    }
    let semantics = |value: Value| -> Semantics { serde_json::from_value(value).unwrap() };
    assert!(semantics(json!({"external": true})).output_is_untrusted());
    assert!(semantics(json!({"external": ["a.example.org"]})).output_is_untrusted());
    assert!(!semantics(json!({"external": true, "untrusted_output": false})).output_is_untrusted());
    assert!(!semantics(json!({})).output_is_untrusted());
    assert!(semantics(json!({"untrusted_output": true})).output_is_untrusted());
    assert!(serde_json::from_value::<Effects>(json!({"untrusted_output": "yes"})).is_err());
}

#[test]
fn source_roots_are_read_only_whatever_is_asked() {
    let r: RootDecl =
        serde_json::from_value(json!({"name": "c", "kind": "source", "access": "read-write"}))
            .unwrap();
    assert_eq!(r.effective_access(), Access::Read);
}

#[test]
fn invoke_params_round_trip_and_keep_pass_through_keys() {
    let mut roots = BTreeMap::new();
    roots.insert(
        "workspace".to_owned(),
        GrantedRoot {
            path: "/w".into(),
            kind: RootKind::Workspace,
            access: Access::Read,
        },
    );
    let mut extra = serde_json::Map::new();
    extra.insert("trace".into(), json!("abc"));
    let params = InvokeParams {
        protocol: PROTOCOL_VERSION.into(),
        contract_version: "2.0".into(),
        request_id: "r-1".into(),
        capability: "files.read".into(),
        input: json!({"path": "README.md"}),
        roots,
        binaries: BTreeMap::from([("git".to_owned(), "/usr/bin/git".to_owned())]),
        deadline_ms: 30_000,
        max_output_bytes: 1 << 20,
        approval: Some(Approval {
            by: "flag".into(),
            rule: None,
            at: "2026-01-01T00:00:00Z".into(),
        }),
        extra,
    };
    round_trip(&params);
    let v = serde_json::to_value(&params).unwrap();
    assert_eq!(
        v["trace"], "abc",
        "pass-through keys sit at the request root"
    );
}

#[test]
fn invoke_result_round_trips() {
    let r = InvokeResult {
        output: json!({"n": 1}),
        text: Some("one".into()),
        artifacts: vec![ArtifactRef {
            root: "artifacts".into(),
            path: "out/report.md".into(),
            media_type: Some("text/markdown".into()),
            title: Some("Report".into()),
        }],
        warnings: vec!["w".into()],
    };
    round_trip(&r);
    round_trip(&InvokeResult::new(Value::Null));
}

#[test]
fn notifications_round_trip() {
    round_trip(&ProgressParams {
        request_id: "r".into(),
        progress: 1.0,
        total: Some(3.0),
        message: None,
    });
    round_trip(&LogParams {
        level: "info".into(),
        message: "hi".into(),
    });
    let n = Notification::new(
        METHOD_PROGRESS,
        Some(json!({"request_id": "r", "progress": 1})),
    );
    let line = Message::Notification(n.clone()).to_line();
    assert_eq!(Message::parse(&line).unwrap(), Message::Notification(n));
}

#[test]
fn requests_and_responses_round_trip_through_lines() {
    let req = Request::new(7, METHOD_DESCRIBE, None);
    let line = Message::Request(req.clone()).to_line();
    assert_eq!(Message::parse(&line).unwrap(), Message::Request(req));

    let ok = Response::ok(Id::Str("a".into()), json!({"x": null}));
    let line = Message::Response(ok.clone()).to_line();
    assert_eq!(Message::parse(&line).unwrap(), Message::Response(ok));

    // A null result is a result, not a missing one.
    let null_ok = Response::ok(Id::Num(1), Value::Null);
    let line = Message::Response(null_ok.clone()).to_line();
    assert!(line.contains("\"result\":null"), "{line}");
    assert_eq!(Message::parse(&line).unwrap(), Message::Response(null_ok));

    let err = Response::err(
        Id::Num(1),
        RpcError::new(ErrorCode::InvalidParams, "bad input").with_data(
            ErrorData::new(ModuleErrorKind::InvalidInput, "fix it")
                .with_problems(vec!["a".into(), "b".into()]),
        ),
    );
    let line = Message::Response(err.clone()).to_line();
    assert_eq!(
        Message::parse(&line).unwrap(),
        Message::Response(err.clone())
    );
    let back: Response = serde_json::from_str(&line).unwrap();
    assert_eq!(back, err);
}

#[test]
fn error_codes_map_both_ways() {
    for code in [
        -32700, -32600, -32601, -32602, -32603, -32000, -32001, -32002, -32003, -32050, 7,
    ] {
        assert_eq!(ErrorCode::from_code(code).code(), code);
    }
}

#[test]
fn decoder_rejects_malformed_envelopes() {
    let cases: &[(&str, bool)] = &[
        ("not json", true),
        ("", true),
        ("[]", false),
        (r#"{"id":1,"result":1}"#, false),
        (r#"{"jsonrpc":"1.0","id":1,"result":1}"#, false),
        (r#"{"jsonrpc":"2.0","id":1}"#, false),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"x"}}"#,
            false,
        ),
        (r#"{"jsonrpc":"2.0","id":{"a":1},"result":1}"#, false),
        (r#"{"jsonrpc":"2.0","id":1.5,"result":1}"#, false),
        (r#"{"jsonrpc":"2.0","id":null,"result":1}"#, false),
        (r#"{"jsonrpc":"2.0","id":1,"error":"boom"}"#, false),
        (r#"{"jsonrpc":"2.0","method":5}"#, false),
        (r#"{"jsonrpc":"2.0","method":"x","params":3}"#, false),
        (r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#, false),
        (r#"{"jsonrpc":"2.0","result":1}"#, false),
    ];
    for (line, is_parse) in cases {
        match Message::parse(line) {
            Err(DecodeError::Parse(_)) => {
                assert!(is_parse, "{line} should be invalid, not unparsable")
            }
            Err(DecodeError::Invalid(_)) => assert!(!is_parse, "{line} should be a parse error"),
            Ok(m) => panic!("{line} was accepted as {m:?}"),
        }
    }
    // An error response to an unreadable request may carry a null id.
    let line = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#;
    assert!(matches!(Message::parse(line), Ok(Message::Response(_))));
}

fn decide(version: Option<&str>) -> ContractDecision {
    let mut d = full_descriptor();
    d.contract_version = version.map(str::to_owned);
    contract::evaluate(Arc::new(d))
}

#[test]
fn contract_pin_decisions() {
    // (declared, expected label, effective version)
    let table: &[(Option<&str>, &str, Option<&str>)] = &[
        (None, "v1", Some("1.0")),
        (Some("1.0.0"), "v1", Some("1.0")),
        (Some("1.1.0"), "v1", Some("1.1")),
        (Some("1.0"), "v1", Some("1.0")),
        (Some("2.0.0"), "v2", Some("2.0")),
        (Some("2.0.7"), "v2", Some("2.0")),
        (Some("2.1.0"), "refused", None),
        (Some("1.2.0"), "refused", None),
        (Some("3.0.0"), "refused", None),
        (Some("0.9.0"), "refused", None),
        (Some("2"), "v2", Some("2.0")),
        (Some("1"), "v1", Some("1.0")),
        (Some("2.0"), "v2", Some("2.0")),
        (Some("2.0.0.0"), "refused", None),
        (Some("02.0"), "refused", None),
        (Some("2."), "refused", None),
        (Some("2.0.0+build"), "refused", None),
        (Some("two"), "refused", None),
        (Some(""), "refused", None),
        (Some(" 2.0.0"), "refused", None),
        (Some("2.0.0-beta"), "refused", None),
    ];
    for (declared, label, effective) in table {
        let decision = decide(*declared);
        assert_eq!(decision.label(), *label, "{declared:?}");
        let pin = decision.pin();
        assert_eq!(pin.effective.as_deref(), *effective, "{declared:?}");
        assert_eq!(pin.requested.as_deref(), *declared);
        if *label == "refused" {
            assert!(
                !pin.reason.is_empty() && !pin.remedy.is_empty(),
                "{declared:?}: {pin:?}"
            );
        }
    }
}

#[test]
fn newer_minor_refusal_names_both_versions_and_a_remedy() {
    let pin = decide(Some("2.4.0")).pin().clone();
    assert!(
        pin.reason.contains("2.4") && pin.reason.contains("2.0"),
        "{}",
        pin.reason
    );
    assert!(pin.remedy.contains("upgrade modhost"), "{}", pin.remedy);
}

#[test]
fn only_the_pin_yields_v2_operations() {
    let ContractDecision::V2(accepted) = decide(Some("2.0.0")) else {
        panic!("expected v2")
    };
    assert_eq!(accepted.operations().len(), 1);
    assert_eq!(accepted.descriptor().id, "sessions");
}

#[test]
fn clean_relative_paths() {
    use crate::invoke::is_clean_relative_path as clean;
    assert!(clean("a/b.txt") && clean("x"));
    for bad in ["", "/etc/passwd", "../x", "a/../../x", "a\\b", "a\0b"] {
        assert!(!clean(bad), "{bad:?}");
    }
}

/// The JSON lines of the worked examples in PROTOCOL.md, so the document
/// cannot drift from the types.
fn protocol_examples() -> Vec<Value> {
    let doc = include_str!("../PROTOCOL.md");
    doc.lines()
        .filter(|l| l.starts_with("{\"jsonrpc\""))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("PROTOCOL.md line {l}: {e}")))
        .collect()
}

#[test]
fn protocol_document_examples_are_valid_messages() {
    let examples = protocol_examples();
    assert!(examples.len() >= 8, "found {} examples", examples.len());
    let schema: Value = serde_json::from_str(include_str!("../descriptor.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut descriptors = 0;
    let mut invokes = 0;
    for example in examples {
        let line = example.to_string();
        let message = Message::parse(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
        match message {
            Message::Request(r) if r.method == METHOD_INVOKE => {
                let params: InvokeParams = serde_json::from_value(r.params.unwrap()).unwrap();
                assert_eq!(params.protocol, PROTOCOL_VERSION);
                invokes += 1;
            }
            Message::Response(Response {
                outcome: Ok(result),
                ..
            }) if result.get("capabilities").is_some() => {
                let errors: Vec<String> = validator
                    .iter_errors(&result)
                    .map(|e| e.to_string())
                    .collect();
                assert!(errors.is_empty(), "{errors:?}");
                let d: Descriptor = serde_json::from_value(result).unwrap();
                assert!(matches!(
                    contract::evaluate(Arc::new(d)),
                    ContractDecision::V2(_)
                ));
                descriptors += 1;
            }
            Message::Response(Response {
                outcome: Ok(result),
                ..
            }) if result.get("output").is_some() => {
                let _: InvokeResult = serde_json::from_value(result).unwrap();
            }
            _ => {}
        }
    }
    assert_eq!((descriptors, invokes), (1, 1));
}

#[test]
fn a_repeated_key_in_a_message_is_an_invalid_message() {
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"result":{"output":1},"result":{"output":2}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"output":{"a":1,"a":2}}}"#,
        r#"{"jsonrpc":"2.0","jsonrpc":"2.0","method":"log","params":{"level":"info","message":"x"}}"#,
    ] {
        match Message::parse(line) {
            Err(e @ crate::jsonrpc::DecodeError::Invalid(_)) => {
                assert!(e.to_string().contains("duplicate key"), "{e}")
            }
            other => panic!("{line}: {other:?}"),
        }
    }
}

#[test]
fn access_is_read_or_read_write_and_nothing_else() {
    for (raw, ok) in [
        ("read", true),
        ("read-write", true),
        ("write", false),
        ("readwrite", false),
    ] {
        let parsed = serde_json::from_value::<crate::Access>(json!(raw));
        assert_eq!(parsed.is_ok(), ok, "{raw}");
    }
}

#[test]
fn descriptor_schema_accepts_the_types_output_and_rejects_garbage() {
    let schema: Value = serde_json::from_str(include_str!("../descriptor.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut d = full_descriptor();
    for doc in d
        .knowledge
        .overlays
        .iter_mut()
        .chain(d.knowledge.skills.iter_mut())
    {
        doc.sha256 = "0".repeat(64);
    }
    let mut value = serde_json::to_value(&d).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    // A host list where `true` or `false` may stand: effects and semantics.
    value["capabilities"][0]["effects"]["network"] = json!(["api.github.com:443"]);
    value["operations"][0]["semantics"]["external"] = json!(["api.github.com:443"]);
    // Secrets by name, in effects and semantics.
    value["capabilities"][0]["effects"]["secrets"] = json!(["GITHUB_TOKEN"]);
    value["operations"][0]["semantics"]["secrets"] = json!(["GITHUB_TOKEN"]);
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    for bad in [
        json!({"id": "Bad Id", "version": "1", "capabilities": []}),
        json!({"id": "m", "version": "1"}),
        json!({"id": "m", "version": "1", "capabilities": [{"id": "x", "input_schema": {}, "effects": {"cost": "cheap"}}]}),
        json!({"id": "m", "version": "1", "capabilities": [], "roots": [{"name": "r", "kind": "home"}]}),
        // The values the document does not name, and typos, are refused too.
        json!({"id": "m", "version": "banana", "capabilities": []}),
        json!({"id": "m", "version": "1.0.0", "capabilities": [], "roots": [{"name": "r", "kind": "state", "access": "write"}]}),
        json!({"id": "m", "version": "1.0.0", "capabilities": [{"id": "x", "input_schema": {}, "output_schema": true}]}),
        json!({"id": "m", "version": "1.0.0", "capabilities": [{"id": "x", "input_schema": {}, "effects": {"netwrk": true}}]}),
        json!({"id": "m", "version": "1.0.0", "capabilities": [{"id": "x", "input_schema": {}, "effects": {"untrusted_output": "yes"}}]}),
        json!({"id": "m", "version": "1.0.0", "capabilities": [{"id": "x", "input_schema": {}, "effects": {"untrusted": true}}]}),
        json!({"id": "m", "version": "1.0.0", "capabilities": [{"id": "x", "input_schema": {}, "effects": {"network": "api.github.com"}}]}),
        json!({"id": "m", "version": "1.0.0", "capabilities": [{"id": "x", "input_schema": {}, "outputschema": {}}]}),
        json!({"id": "m", "version": "1.0.0", "capabilities": [{"id": "x", "input_schema": {}, "effects": {"secrets": ["github-token"]}}]}),
        json!({"id": "m", "version": "1.0.0", "capabilities": [{"id": "x", "input_schema": {}, "effects": {"secrets": ["A", "A"]}}]}),
        json!({"id": "m", "version": "1.0.0", "capabilities": [{"id": "x", "input_schema": {}, "effects": {"secrets": "GITHUB_TOKEN"}}]}),
        json!({"id": "m", "version": "1.0.0", "capabilities": [], "contract_version": "2.0.0-beta"}),
    ] {
        assert!(!validator.is_valid(&bad), "{bad}");
    }
}

/// The closed value sets of the descriptor: the JSON Schema's `enum`, the
/// Rust types and PROTOCOL.md name the same values, no more, no fewer.
#[test]
fn schema_types_and_document_name_the_same_values() {
    let schema: Value = serde_json::from_str(include_str!("../descriptor.schema.json")).unwrap();
    let doc = include_str!("../PROTOCOL.md");
    let defs = &schema["$defs"];
    type ValueSet<'a> = (&'a str, &'a Value, fn(&Value) -> bool);
    let sets: [ValueSet<'_>; 3] = [
        (
            "access",
            &defs["root"]["properties"]["access"]["enum"],
            |v| serde_json::from_value::<crate::Access>(v.clone()).is_ok(),
        ),
        ("kind", &defs["root"]["properties"]["kind"]["enum"], |v| {
            serde_json::from_value::<crate::RootKind>(v.clone()).is_ok()
        }),
        (
            "cost",
            &defs["effects"]["properties"]["cost"]["enum"],
            |v| serde_json::from_value::<crate::Cost>(v.clone()).is_ok(),
        ),
    ];
    for (name, values, parses) in sets {
        let values = values
            .as_array()
            .unwrap_or_else(|| panic!("{name}: no enum"));
        for value in values {
            assert!(
                parses(value),
                "{name}: the schema allows {value}, the types do not"
            );
            let text = value.as_str().unwrap();
            assert!(
                doc.contains(&format!("`{text}`")),
                "{name}: PROTOCOL.md never names `{text}`"
            );
        }
        // Nothing outside the schema parses: a near miss of each value fails.
        for value in values {
            let near = json!(format!("{}x", value.as_str().unwrap()));
            assert!(
                !parses(&near),
                "{name}: {near} parses but the schema refuses it"
            );
        }
    }
    assert_eq!(
        defs["root"]["properties"]["access"]["enum"],
        json!(["read", "read-write"])
    );
    assert_eq!(
        defs["capability"]["properties"]["output_schema"],
        json!({"type": "object"})
    );
}

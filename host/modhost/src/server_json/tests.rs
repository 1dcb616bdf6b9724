//! server.json read strictly, packages chosen or refused with their reason,
//! and written entries valid against the registry's own schema.

use serde_json::json;

use super::choose::{ChosenPackage, choose};
use super::entry::ServerEntry;
use super::error::ServerJsonError;
use super::write::{Facts, render, repository_of};
use crate::pins::PinProvenance;

/// The MCP registry's server.json schema (2025-12-11), vendored from
/// https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json
/// (see `tests/fixtures/mcp-registry/SOURCE.md`).
const SCHEMA: &str = include_str!("../../../../tests/fixtures/mcp-registry/server.schema.json");

const SHA: &str = "fe333e598595000ae021bd27117db32ec69af6987f507ba7a63c90638ff633ce";

fn entry(packages: &serde_json::Value) -> ServerEntry {
    ServerEntry::parse(
        &json!({
            "$schema": super::SCHEMA_URL,
            "name": "io.github.example/weather",
            "description": "Weather",
            "version": "1.0.2",
            "packages": packages,
        })
        .to_string(),
    )
    .expect("parses")
}

#[track_caller]
fn reasons(entry: &ServerEntry) -> String {
    match choose(entry) {
        Ok(chosen) => panic!("chose {chosen:?}"),
        Err(reasons) => reasons.join("\n"),
    }
}

#[test]
fn an_mcpb_package_with_its_sha256_is_chosen() {
    let chosen = choose(&entry(&json!([{
        "registryType": "mcpb",
        "identifier": "https://github.com/example/weather/releases/download/v1.0.2/weather.mcpb",
        "fileSha256": SHA,
        "transport": {"type": "stdio"},
        "environmentVariables": [
            {"name": "UNITS", "value": "metric"},
            {"name": "REGION", "default": "eu"},
            {"name": "TOKEN", "isSecret": true},
        ],
    }])))
    .unwrap();
    let ChosenPackage::Mcpb { url, sha256, env } = chosen else {
        panic!("{chosen:?}")
    };
    assert!(url.ends_with("weather.mcpb"));
    assert_eq!(sha256, SHA);
    assert_eq!(env.len(), 2, "{env:?}");
    assert_eq!(env["UNITS"], "metric");
    assert_eq!(env["REGION"], "eu");
}

#[test]
fn npm_and_pypi_are_refused_with_the_commands_that_pin_them() {
    let text = reasons(&entry(&json!([
        {"registryType": "npm", "identifier": "@modelcontextprotocol/server-filesystem",
         "version": "1.0.2", "runtimeHint": "npx", "transport": {"type": "stdio"}},
        {"registryType": "pypi", "identifier": "mcp-server-time", "version": "0.6.2",
         "transport": {"type": "stdio"}},
    ])));
    assert!(
        text.contains("npm install --prefix FOLDER @modelcontextprotocol/server-filesystem@1.0.2"),
        "{text}"
    );
    assert!(
        text.contains("modhost install --mcp FOLDER -- node"),
        "{text}"
    );
    assert!(
        text.contains("pip install --target FOLDER mcp-server-time==0.6.2"),
        "{text}"
    );
}

#[test]
fn the_first_installable_package_wins_after_refused_ones() {
    let chosen = choose(&entry(&json!([
        {"registryType": "npm", "identifier": "x", "version": "1.0.0", "transport": {"type": "stdio"}},
        {"registryType": "oci", "identifier": "ghcr.io/example/weather@sha256:abc",
         "transport": {"type": "stdio"}},
    ])))
    .unwrap();
    assert_eq!(
        chosen,
        ChosenPackage::Oci {
            reference: "oci://ghcr.io/example/weather@sha256:abc".into(),
            sha256: None
        }
    );
}

#[test]
fn what_cannot_be_honoured_is_refused_with_its_reason() {
    let cases = [
        (
            json!({"registryType": "mcpb", "identifier": "https://x.example/a.mcpb",
                   "transport": {"type": "stdio"}}),
            "no fileSha256",
        ),
        (
            json!({"registryType": "mcpb", "identifier": "http://x.example/a.mcpb",
                   "fileSha256": SHA, "transport": {"type": "stdio"}}),
            "not an https URL",
        ),
        (
            json!({"registryType": "mcpb", "identifier": "https://x.example/a.mcpb",
                   "fileSha256": SHA,
                   "transport": {"type": "streamable-http", "url": "http://localhost:8080/mcp"}}),
            "listening for HTTP",
        ),
        (
            json!({"registryType": "mcpb", "identifier": "https://x.example/a.mcpb",
                   "fileSha256": SHA, "transport": {"type": "stdio"},
                   "environmentVariables": [{"name": "API_KEY", "isRequired": true, "isSecret": true}]}),
            "--env API_KEY=VALUE",
        ),
        (
            json!({"registryType": "mcpb", "identifier": "https://x.example/a.mcpb",
                   "fileSha256": SHA, "transport": {"type": "stdio"},
                   "packageArguments": [{"type": "positional", "valueHint": "path"}]}),
            "packageArguments",
        ),
        (
            json!({"registryType": "oci", "identifier": "example/weather:1.0",
                   "transport": {"type": "stdio"}}),
            "names no registry host",
        ),
        (
            json!({"registryType": "nuget", "identifier": "X", "version": "1.0.0",
                   "transport": {"type": "stdio"}}),
            "not one modhost installs",
        ),
    ];
    for (package, says) in cases {
        let text = reasons(&entry(&json!([package])));
        assert!(text.contains(says), "{package}: {text}");
    }
    let remote_only = ServerEntry::parse(
        &json!({"name": "io.github.x/y", "description": "d", "version": "1.0.0",
                "remotes": [{"type": "streamable-http", "url": "https://mcp.example.com/mcp"}]})
        .to_string(),
    )
    .unwrap();
    assert!(reasons(&remote_only).contains("only remote servers"));
}

#[test]
fn an_entry_is_read_strictly() {
    let refuse = |text: &str, says: &str| match ServerEntry::parse(text) {
        Ok(entry) => panic!("read {entry:?}"),
        Err(error) => {
            let message = error.to_string();
            assert!(message.contains(says), "{message}");
            assert!(matches!(error, ServerJsonError::Invalid { .. }));
        }
    };
    // The pre-2025-09-16 snake_case fields.
    refuse(
        r#"{"name": "io.github.x/y", "description": "d", "version": "1",
            "packages": [{"registry_type": "npm", "identifier": "x", "transport": {"type": "stdio"}}]}"#,
        "registry_type",
    );
    // A field nobody defined.
    refuse(
        r#"{"name": "io.github.x/y", "description": "d", "version": "1", "packagez": []}"#,
        "packagez",
    );
    // A repeated key: two readers would see two entries.
    refuse(
        r#"{"name": "io.github.x/y", "name": "io.github.x/z", "description": "d", "version": "1"}"#,
        "name",
    );
    refuse(
        r#"{"name": "no-slash", "description": "d", "version": "1"}"#,
        "namespace/server",
    );
    refuse(
        r#"{"name": "io.github.x/y", "description": "d", "version": "1",
            "packages": [{"registryType": "mcpb", "identifier": "https://x/a.mcpb",
                          "fileSha256": "FE33", "transport": {"type": "stdio"}}]}"#,
        "64 lowercase",
    );
    // A registry API answer is read as its server.
    let answer = json!({"server": {"name": "io.github.x/y", "description": "d", "version": "1"},
                        "_meta": {"io.modelcontextprotocol.registry/official": {"status": "active"}}});
    assert_eq!(
        ServerEntry::parse(&answer.to_string()).unwrap().name,
        "io.github.x/y"
    );
}

fn provenance(source: &str, oci_digest: Option<&str>) -> PinProvenance {
    PinProvenance {
        origin: modhost_distribution::Origin {
            source: source.to_owned(),
            oci_digest: oci_digest.map(str::to_owned),
            resolved_tag: None,
        },
        sha256: SHA.to_owned(),
        signature: None,
        signature_source: None,
    }
}

#[track_caller]
fn assert_valid(entry: &serde_json::Value) {
    let schema: serde_json::Value = serde_json::from_str(SCHEMA).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(entry)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{entry:#}\n{errors:#?}");
}

#[test]
fn the_schema_check_can_fail() {
    let schema: serde_json::Value = serde_json::from_str(SCHEMA).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    for bad in [
        json!({"name": "no-slash", "description": "d", "version": "1"}),
        json!({"name": "a.b/c", "version": "1"}),
        json!({"name": "a.b/c", "description": "d", "version": "1",
               "packages": [{"registryType": "mcpb", "identifier": "https://x/a.mcpb",
                             "fileSha256": "FE", "transport": {"type": "stdio"}}]}),
    ] {
        assert!(!validator.is_valid(&bad), "{bad}");
    }
}

#[test]
fn written_entries_are_valid_against_the_registry_schema_and_read_back() {
    let digest = format!("sha256:{SHA}");
    let long = "a very long description ".repeat(10);
    let cases = [
        (
            provenance("oci://ghcr.io/example/weather:1.0", Some(&digest)),
            false,
            Some("io.github.example/weather"),
            "oci",
        ),
        (
            provenance(
                "https://github.com/example/weather/releases/download/v1/weather.mcpb",
                None,
            ),
            true,
            None,
            "mcpb",
        ),
    ];
    for (provenance, bundle, name, kind) in cases {
        let entry = render(&Facts {
            id: "weather",
            name,
            provenance: &provenance,
            bundle,
            version: "1.0.0",
            description: Some(&long),
            title: Some("Weather"),
        })
        .unwrap();
        assert_valid(&entry);
        assert_eq!(entry["name"], "io.github.example/weather", "{entry:#}");
        let read = ServerEntry::parse(&entry.to_string()).unwrap();
        let chosen = choose(&read).unwrap();
        assert_eq!(chosen.registry_type(), kind);
        match chosen {
            ChosenPackage::Oci { reference, .. } => {
                assert_eq!(reference, format!("oci://ghcr.io/example/weather@{digest}"));
            }
            ChosenPackage::Mcpb { url, sha256, .. } => {
                assert_eq!(url, provenance.origin.source);
                assert_eq!(sha256, SHA);
            }
        }
    }
}

#[test]
fn a_module_from_an_https_archive_that_is_no_bundle_gets_no_entry() {
    let error = render(&Facts {
        id: "tool",
        name: None,
        provenance: &provenance("https://example.com/tool.tar.gz", None),
        bundle: false,
        version: "1.0.0",
        description: None,
        title: None,
    })
    .unwrap_err();
    assert!(
        matches!(error, ServerJsonError::NotPublishable { .. }),
        "{error}"
    );
    let bad_name = render(&Facts {
        id: "tool",
        name: Some("not a name"),
        provenance: &provenance("oci://r.example/tool@sha256:ab", Some("sha256:ab")),
        bundle: false,
        version: "1.0.0",
        description: None,
        title: None,
    });
    assert!(bad_name.is_err());
}

#[test]
fn an_oci_reference_loses_its_tag_and_digest_but_not_its_port() {
    assert_eq!(repository_of("ghcr.io/a/b:1.0"), "ghcr.io/a/b");
    assert_eq!(repository_of("ghcr.io/a/b@sha256:00"), "ghcr.io/a/b");
    assert_eq!(repository_of("localhost:5000/a/b"), "localhost:5000/a/b");
    assert_eq!(
        repository_of("localhost:5000/a/b:tag@sha256:00"),
        "localhost:5000/a/b"
    );
}

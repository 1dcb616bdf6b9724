//! Contract standing end to end: every module carries `contract` (`v1`,
//! `v2`, `refused`, `unevaluated`); a contract-2 module whose capabilities
//! weaken an operation is refused at discovery (status `broken`, error kind
//! `nonconforming`) with every finding, beside modules that are fine.

use serde_json::{Value, json};

use crate::support::{Fixture, Home, strings};

/// Each weakening fixture id, and the finding it must produce.
const WEAKENINGS: &[(&str, &str, Option<&str>)] = &[
    (
        "weak_mutates",
        "weakening.mutate_not_written",
        Some("weak_mutates.run"),
    ),
    (
        "weak_reads",
        "weakening.read_undeclared",
        Some("weak_reads.run"),
    ),
    (
        "weak_external",
        "weakening.external_without_network",
        Some("weak_external.fetch"),
    ),
    (
        "weak_runs",
        "weakening.run_not_spawned",
        Some("weak_runs.fetch"),
    ),
    (
        "weak_approval",
        "weakening.approval_not_required",
        Some("weak_approval.fetch"),
    ),
    ("weak_missing", "operation.unknown_capability", None),
];

/// The error findings of a `contract_standing`, as (id, capability).
fn error_findings(standing: &Value) -> Vec<(String, Option<String>)> {
    standing["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("no findings array in {standing:#}"))
        .iter()
        .filter(|f| f["severity"] == "error")
        .map(|f| {
            for key in ["reason", "remedy"] {
                assert!(
                    !f[key].as_str().unwrap_or_default().is_empty(),
                    "finding without {key}: {f:#}"
                );
            }
            (
                f["id"].as_str().unwrap_or_default().to_owned(),
                f["capability"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[test]
fn each_weakening_is_refused_with_its_finding_beside_a_good_v2_module() {
    let home = Home::new();
    home.install(Fixture::Contract, "good");
    for (id, _, _) in WEAKENINGS {
        home.install(Fixture::Contract, id);
    }
    home.install(Fixture::Echo, "echo");

    let good = home.entry("good");
    assert_eq!(good["status"], "enabled", "{good:#}");
    assert_eq!(good["contract"], "v2");
    assert_eq!(good["contract_standing"]["effective"], "2.0");
    assert!(
        error_findings(&good["contract_standing"]).is_empty(),
        "{good:#}"
    );
    assert_eq!(home.entry("echo")["contract"], "v1");

    for (id, finding, capability) in WEAKENINGS {
        let entry = home.entry(id);
        assert_eq!(entry["status"], "broken", "{entry:#}");
        assert_eq!(entry["error_kind"], "nonconforming", "{entry:#}");
        assert_eq!(entry["contract"], "refused", "{entry:#}");
        assert_eq!(entry["contract_standing"]["refusal"], "nonconforming");
        let expected = (finding.to_string(), capability.map(str::to_owned));
        assert_eq!(
            error_findings(&entry["contract_standing"]),
            vec![expected.clone()],
            "{id}: {entry:#}"
        );
        let described = home.run(&["describe", id, "--json"]).expect_code(0).json();
        assert_eq!(described["contract"], "refused");
        assert_eq!(
            error_findings(&described["contract_standing"]),
            vec![expected],
            "{described:#}"
        );
        let error = home
            .invoke(id, &format!("{id}.run"), &json!({}), &[])
            .refusal_error();
        assert_eq!(error["kind"], "nonconforming", "{error:#}");
    }

    // None of a refused module's capabilities became a tool; the good ones did.
    let tools = home
        .run(&["tools", "--format", "json"])
        .expect_code(0)
        .stdout
        .clone();
    for (id, _, _) in WEAKENINGS {
        assert!(!tools.contains(id), "{id} registered a tool:\n{tools}");
    }
    assert!(
        tools.contains("good"),
        "the good module has no tool:\n{tools}"
    );
    let result = home
        .invoke("good", "good.run", &json!({}), &[])
        .invoke_result();
    assert_eq!(result["output"], json!({"ok": true}));

    // The human listing says why.
    let listing = home.run(&["list"]).expect_code(0).stdout.clone();
    for needle in [
        "nonconforming",
        "weakening.mutate_not_written",
        "modhost describe weak_mutates",
    ] {
        assert!(
            listing.contains(needle),
            "{needle:?} missing from:\n{listing}"
        );
    }
    let described = home
        .run(&["describe", "weak_runs"])
        .expect_code(0)
        .stdout
        .clone();
    assert!(
        described.contains("contract: refused")
            && described.contains("weakening.run_not_spawned")
            && described.contains("remedy: add \"git\" to the effects.spawns"),
        "{described}"
    );
}

#[test]
fn a_newer_contract_is_refused_and_an_undescribed_module_is_unevaluated() {
    let home = Home::new();
    home.install(Fixture::Contract, "newer");
    home.install(Fixture::Crash, "broken_crash");

    let entry = home.entry("newer");
    assert_eq!(entry["status"], "broken", "{entry:#}");
    assert_eq!(entry["error_kind"], "contract_refused");
    assert_eq!(entry["contract"], "refused");
    let standing = &entry["contract_standing"];
    assert_eq!(standing["requested"], "2.9.0");
    assert_eq!(standing["effective"], Value::Null);
    assert!(
        standing["reason"].as_str().unwrap().contains("2.9"),
        "{standing:#}"
    );
    assert!(
        standing["remedy"]
            .as_str()
            .unwrap()
            .contains("upgrade modhost"),
        "{standing:#}"
    );
    assert!(strings(&standing["findings"]).is_empty());
    let error = home
        .invoke("newer", "newer.run", &json!({}), &[])
        .refusal_error();
    assert_eq!(error["kind"], "contract_refused", "{error:#}");

    let crash = home.entry("broken_crash");
    assert_eq!(crash["contract"], "unevaluated", "{crash:#}");
    let human = home
        .run(&["describe", "broken_crash"])
        .expect_code(0)
        .stdout
        .clone();
    assert!(human.contains("contract: unevaluated"), "{human}");
}

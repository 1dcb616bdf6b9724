//! `modhost conformance`: a deliberately broken module yields every expected
//! finding in one run; the shipped `files` module passes with no errors.

use std::collections::BTreeSet;

use crate::support::{Fixture, Home, binaries, components};

#[test]
fn a_nonconformant_module_yields_every_expected_finding_in_one_run() {
    let home = Home::new();
    home.install(Fixture::Contract, "nonconformant");

    let run = home.run(&["conformance", "nonconformant", "--json"]);
    run.expect_code(1);
    let report = run.json();
    assert_eq!(report["module"], "nonconformant");
    assert_eq!(report["conforms"], false);
    let found: BTreeSet<String> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .inspect(|f| {
            for key in ["id", "severity", "reason", "remedy"] {
                assert!(f[key].is_string(), "finding without {key}: {f:#}");
            }
        })
        .filter(|f| f["severity"] == "error")
        .map(|f| f["id"].as_str().unwrap().to_owned())
        .collect();
    let expected = [
        // static
        "schema.input_not_object",
        "effects.unknown_root",
        "effects.unknown_binary",
        // behavioural
        "battery.describe_nondeterministic",
        "battery.unknown_method",
        "battery.malformed_line",
        "battery.empty_stdin",
        "battery.example_failed",
    ];
    let missing: Vec<&str> = expected
        .iter()
        .copied()
        .filter(|id| !found.contains(*id))
        .collect();
    assert!(missing.is_empty(), "missing {missing:?}; got {report:#}");
    // It accepts invalid input, which the host never sends it: no finding.
    assert!(!found.contains("battery.invalid_input"), "{report:#}");
    home.assert_no_module_processes();
}

#[test]
fn a_path_is_checked_too_and_human_output_lists_remedies() {
    let home = Home::new();
    let exe = home.install(Fixture::Contract, "nonconformant");
    let run = home.run(&["conformance", &exe.to_string_lossy()]);
    run.expect_code(1);
    for needle in [
        "does not conform",
        "error[battery.unknown_method]",
        "error[schema.input_not_object] nonconformant.list",
        "remedy:",
    ] {
        assert!(run.stdout.contains(needle), "{needle:?} missing: {run:#?}");
    }

    let missing = home.run(&["conformance", "no_such_module"]);
    missing.expect_code(2);
}

#[test]
fn the_shipped_files_module_conforms() {
    let home = Home::new();
    home.install_files();
    let run = home.run(&["conformance", "files", "--json"]);
    let report = run.json();
    assert_eq!(report["errors"], 0, "{report:#}");
    run.expect_code(0);

    // And straight from the build, before installation.
    let run = home.run(&["conformance", &binaries().files.to_string_lossy(), "--json"]);
    assert_eq!(run.json()["errors"], 0, "{run:#?}");
    run.expect_code(0);
}

#[test]
fn a_good_v2_fixture_conforms() {
    let home = Home::new();
    home.install(Fixture::Contract, "good");
    let run = home.run(&["conformance", "good", "--json"]);
    assert_eq!(run.json()["errors"], 0, "{run:#?}");
    run.expect_code(0);
}

#[test]
fn components_get_the_battery_too() {
    let home = Home::new();
    // Straight from the build: the `files` component conforms.
    let files = components().path("files");
    let run = home.run(&["conformance", &files.to_string_lossy(), "--json"]);
    let report = run.json();
    assert_eq!(report["errors"], 0, "{report:#}");
    assert_eq!(report["module"], "files", "{report:#}");
    run.expect_code(0);

    // Installed, by id: a guest that exits without answering does not.
    home.install_component("silent_exit");
    let run = home.run(&["conformance", "silent_exit", "--json"]);
    run.expect_code(1);
    let report = run.json();
    let errors: BTreeSet<&str> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["severity"] == "error")
        .filter_map(|f| f["id"].as_str())
        .collect();
    for id in ["battery.unknown_method", "battery.malformed_line"] {
        assert!(errors.contains(id), "{id} missing; got {report:#}");
    }
}

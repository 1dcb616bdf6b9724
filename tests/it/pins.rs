//! Integrity pins end to end: an installed module is invocable only as the
//! operator pinned it (`pins = "enforce"`, the default); `warn` and `off`
//! relax that; a corrupt `pins.json` stops the host and names the file.

use std::io::Write;

use serde_json::json;

use crate::support::{Fixture, Home, Layout};

/// The echo fixture copied in by hand, not pinned.
fn unpinned_echo(home: &Home) -> std::path::PathBuf {
    home.install_binary_unpinned(Fixture::Echo.path().as_ref(), "echo", Layout::Folder)
}

fn append_bytes(path: &std::path::Path) {
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open installed module");
    writeln!(file, "one more byte").expect("append");
}

#[test]
fn pin_change_the_bytes_refused_repin_and_invoke_works() {
    let home = Home::new();
    let exe = unpinned_echo(&home);

    // Unpinned: listed and describable, not invocable.
    let entry = home.entry("echo");
    assert_eq!(entry["status"], "unpinned", "{entry:#}");
    assert_eq!(entry["pin"], "unpinned", "{entry:#}");
    let described = home
        .run(&["describe", "echo", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(described["pin"], "unpinned");
    let error = home
        .invoke(
            "echo",
            "echo.write_state",
            &json!({"name": "a", "content": "x"}),
            &[],
        )
        .refusal_error();
    assert_eq!(error["kind"], "unpinned", "{error:#}");
    assert!(
        error["remedy"]
            .as_str()
            .unwrap()
            .contains("modhost pin echo"),
        "{error:#}"
    );
    assert_eq!(home.invocations("echo", "echo.write_state"), 0);

    // Pinned: invocable.
    let pinned = home.run(&["pin", "echo", "--json"]).expect_code(0).json();
    assert_eq!(pinned["record"]["module"], "echo");
    assert_eq!(pinned["record"]["contract_version"], "1");
    assert_eq!(
        pinned["record"]["digest"],
        home.entry("echo")["digest"],
        "the pin records the digest of the installed bytes"
    );
    let entry = home.entry("echo");
    assert_eq!(entry["status"], "enabled", "{entry:#}");
    assert_eq!(entry["pin"], "pinned");
    home.invoke(
        "echo",
        "echo.write_state",
        &json!({"name": "a", "content": "x"}),
        &[],
    )
    .invoke_result();
    assert_eq!(home.invocations("echo", "echo.write_state"), 1);

    // New bytes under the same name: refused, saying what changed and how to accept it.
    append_bytes(&exe);
    let entry = home.entry("echo");
    assert_eq!(entry["status"], "changed", "{entry:#}");
    assert_eq!(entry["pin"], "changed");
    let change = entry["pin_change"].as_str().unwrap_or_default();
    assert!(
        change.contains("bytes changed") && change.contains("modhost pin echo"),
        "{entry:#}"
    );
    let error = home
        .invoke(
            "echo",
            "echo.write_state",
            &json!({"name": "b", "content": "y"}),
            &[],
        )
        .refusal_error();
    assert_eq!(error["kind"], "changed", "{error:#}");
    assert!(
        error["message"].as_str().unwrap().contains("bytes changed"),
        "{error:#}"
    );
    assert_eq!(
        home.invocations("echo", "echo.write_state"),
        1,
        "a changed module ran"
    );

    // Re-pinned: accepted, and the pin says what it accepted.
    let run = home.run(&["pin", "echo"]);
    run.expect_code(0);
    assert!(run.stdout.contains("bytes changed"), "{run:#?}");
    home.invoke(
        "echo",
        "echo.write_state",
        &json!({"name": "b", "content": "y"}),
        &[],
    )
    .invoke_result();
    assert_eq!(home.invocations("echo", "echo.write_state"), 2);
}

#[test]
fn unpin_makes_a_module_uninvocable_again() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    home.invoke("echo", "echo.echo", &json!({}), &[])
        .invoke_result();

    home.run(&["unpin", "echo"]).expect_code(0);
    assert_eq!(home.entry("echo")["status"], "unpinned");
    let error = home
        .invoke("echo", "echo.echo", &json!({}), &[])
        .refusal_error();
    assert_eq!(error["kind"], "unpinned");

    let again = home.run(&["unpin", "echo"]);
    again.expect_code(2);
    assert!(again.stderr.contains("not pinned"), "{again:#?}");
}

#[test]
fn warn_invokes_with_a_host_warning_and_off_ignores_pins() {
    let home = Home::new();
    unpinned_echo(&home);

    home.write_config("pins = \"warn\"\n");
    let entry = home.entry("echo");
    assert_eq!(entry["status"], "enabled", "{entry:#}");
    assert_eq!(entry["pin"], "unpinned");
    let run = home.invoke("echo", "echo.echo", &json!({}), &[]);
    let result = run.invoke_result();
    let warnings = result["host_warnings"].to_string();
    assert!(warnings.contains("not pinned"), "{result:#}");

    home.write_config("pins = \"off\"\n");
    let entry = home.entry("echo");
    assert_eq!(entry["status"], "enabled", "{entry:#}");
    assert_eq!(entry["pin"], "off");
    let result = home
        .invoke("echo", "echo.echo", &json!({}), &[])
        .invoke_result();
    assert!(
        !result["host_warnings"].to_string().contains("pinned"),
        "{result:#}"
    );
}

#[test]
fn a_corrupt_pins_file_is_an_error_naming_it_and_is_left_alone() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    let pins = home.path().join("pins.json");
    std::fs::write(&pins, b"{ not json").expect("corrupt pins.json");

    for args in [
        vec!["list", "--json"],
        vec!["pin", "echo"],
        vec!["invoke", "echo", "echo.echo", "--json"],
    ] {
        let run = home.run(&args);
        run.expect_code(2);
        assert!(
            run.stderr.contains(&pins.display().to_string()),
            "the error does not name {}: {run:#?}",
            pins.display()
        );
    }
    assert_eq!(
        std::fs::read(&pins).unwrap(),
        b"{ not json",
        "pins.json was rewritten"
    );
}

#[test]
fn pin_refuses_a_broken_or_refused_module_and_says_why() {
    let home = Home::new();
    home.install_binary_unpinned(
        Fixture::Crash.path().as_ref(),
        "broken_crash",
        Layout::Folder,
    );
    home.install_binary_unpinned(
        Fixture::Contract.path().as_ref(),
        "weak_mutates",
        Layout::Folder,
    );

    let run = home.run(&["pin", "broken_crash"]);
    run.expect_code(2);
    assert!(run.stderr.contains("broken"), "{run:#?}");

    let run = home.run(&["pin", "weak_mutates"]);
    run.expect_code(2);
    assert!(run.stderr.contains("nonconforming"), "{run:#?}");
    assert!(
        !home.path().join("pins.json").exists()
            || !std::fs::read_to_string(home.path().join("pins.json"))
                .unwrap()
                .contains("weak_mutates"),
        "a refused module was pinned"
    );
}

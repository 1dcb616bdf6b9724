//! Operator commands: install, remove, doctor, and the usage-error exit code.

use serde_json::json;

use crate::support::{Fixture, Home, binaries, strings};

fn sha256_hex(path: &std::path::Path) -> String {
    // `sha256sum` is everywhere the suite runs (coreutils); shelling out keeps
    // a hashing crate out of the test's dependencies.
    let output = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("run sha256sum");
    assert!(output.status.success(), "sha256sum {}", path.display());
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn install_puts_a_module_in_its_folder_and_remove_takes_it_away() {
    let home = Home::new();
    let files = &binaries().files;
    home.run(&["install", &files.to_string_lossy()])
        .expect_code(0);
    assert!(
        home.modules().join("files/files").is_file(),
        "install did not create modules/files/files"
    );
    let entry = home.entry("files");
    assert_eq!(entry["status"], "enabled", "{entry:#}");
    assert!(
        strings(&entry["capabilities"]).contains(&"files.read".to_owned()),
        "{entry:#}"
    );

    home.run(&["remove", "files"]).expect_code(0);
    assert!(
        !home.modules().join("files").exists(),
        "remove left modules/files"
    );
    assert!(home.list().iter().all(|e| e["id"] != "files"));
    home.run(&["remove", "files"]).expect_code(2);
}

#[test]
fn install_checks_the_sha256_when_given() {
    let home = Home::new();
    let files = binaries().files.to_string_lossy().into_owned();
    let wrong = "0".repeat(64);
    let run = home.run(&["install", &files, "--sha256", &wrong]);
    run.expect_code(2);
    assert!(
        !home.modules().join("files").exists(),
        "a module with the wrong digest was installed"
    );

    let right = sha256_hex(&binaries().files);
    home.run(&["install", &files, "--sha256", &right])
        .expect_code(0);
    assert_eq!(home.entry("files")["status"], "enabled");
}

#[test]
fn install_with_an_id_names_the_folder() {
    let home = Home::new();
    let echo = Fixture::Echo.path();
    home.run(&["install", echo, "--id", "echo"]).expect_code(0);
    assert!(
        home.modules().join("echo").is_dir(),
        "no modules/echo folder"
    );
    // The fixture names itself after its file name; the id gives that name.
    let result = home
        .invoke("echo", "echo.echo", &json!({}), &[])
        .invoke_result();
    assert_eq!(result["output"]["request"]["capability"], "echo.echo");
}

#[test]
fn remove_with_purge_also_deletes_state() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    home.invoke(
        "echo",
        "echo.write_state",
        &json!({"name": "n", "content": "c"}),
        &[],
    )
    .invoke_result();
    assert!(home.path().join("state/echo/n").is_file());

    home.run(&["remove", "echo"]).expect_code(0);
    assert!(
        home.path().join("state/echo/n").is_file(),
        "remove without --purge deleted state"
    );

    home.install(Fixture::Echo, "echo");
    home.run(&["remove", "echo", "--purge"]).expect_code(0);
    assert!(
        !home.path().join("state/echo").exists(),
        "remove --purge kept state"
    );
}

#[test]
fn doctor_reports_the_home_and_the_modules_found() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    let run = home.run(&["doctor"]);
    run.expect_code(0);
    let text = format!("{}{}", run.stdout, run.stderr);
    assert!(
        text.contains(&*home.path().to_string_lossy()),
        "doctor does not name the home:\n{text}"
    );
    assert!(
        text.contains("1 found (1 enabled"),
        "doctor does not count the module found:\n{text}"
    );
}

#[test]
fn usage_errors_exit_2() {
    let home = Home::new();
    home.run(&["no-such-command"]).expect_code(2);
    home.run(&["invoke"]).expect_code(2);
    home.install(Fixture::Echo, "echo");
    home.run(&["invoke", "echo", "echo.echo", "--input", "{not json"])
        .expect_code(2);
    home.run(&["invoke", "nope", "nope.run", "--input", "{}"])
        .expect_code(2);
}

#[test]
fn input_can_come_from_a_file() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    let input = home.outside().join("input.json");
    std::fs::write(&input, r#"{"from": "file"}"#).expect("write input");
    let arg = format!("@{}", input.display());
    let run = home.run(&["invoke", "echo", "echo.echo", "--json", "--input", &arg]);
    assert_eq!(
        run.invoke_result()["output"]["request"]["input"],
        json!({"from": "file"})
    );
}

/// The `config.toml` shown in the README is accepted as it stands, overrides
/// included, so an operator who copies it gets a working home.
#[test]
fn the_readme_config_example_is_valid() {
    let readme = include_str!("../../README.md");
    let example: String = readme
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("README.md has a ```toml block")
        .to_owned();
    let home = Home::new();
    home.install_files();
    home.write_config(&example);
    let tools = home
        .run(&["tools", "--format", "json"])
        .expect_code(0)
        .json();
    let search = tools
        .as_array()
        .expect("a list of tools")
        .iter()
        .find(|t| t["name"] == "files__files_search")
        .unwrap_or_else(|| panic!("files__files_search in {tools:#}"));
    assert!(
        search["description"]
            .as_str()
            .is_some_and(|d| d.starts_with("Search this repository.")),
        "the README's override rewrites the description: {search:#}"
    );
    home.run(&["list", "--json"]).expect_code(0);
}

#[test]
fn a_reader_that_went_away_ends_the_command_quietly() {
    // `modhost list | head -1`, with head gone before modhost writes.
    let home = Home::new();
    home.install_files();
    for args in [
        vec!["list"],
        vec!["invoke", "files.search", "--input", r#"{"pattern": "x"}"#],
    ] {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let output = std::process::Command::new(&binaries().modhost)
            .arg("--home")
            .arg(home.path())
            .arg("--workspace")
            .arg(home.workspace())
            .args(&args)
            .stdin(std::process::Stdio::null())
            .stdout(writer)
            .output()
            .expect("run modhost");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(141),
            "{args:?}: the status of a SIGPIPE'd tool\n{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

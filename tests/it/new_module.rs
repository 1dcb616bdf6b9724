//! `modhost new NAME --lang rust|python|node|sh`: each
//! skeleton, unchanged, installs, passes `modhost conformance` (exit 0, no
//! error) and answers `modhost invoke` with the example input, keeping its
//! count in its state root across calls. An existing folder is refused and
//! left as it was.
//!
//! Python 3, Node and sh are expected on the machine: a missing one fails
//! the test instead of skipping its language. The Rust skeleton is
//! built with cargo against this repository's `sdk/` (`--sdk`), offline, with
//! the repository's lock file and the test's own target folder, so only the
//! skeleton's crate compiles once the dependencies are built (the first
//! build of a cold target folder compiles modsdk's dependencies with the
//! skeleton's features: about 80 s of CPU).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::support::Home;

/// Fail the test, with the remedy, unless `program` runs (`probe` are
/// arguments that make it exit 0: `sh` has no `--version`). Python 3, Node
/// and a POSIX shell are on every machine this suite supports; a skeleton
/// left unchecked would pass silently.
fn require(program: &str, probe: &[&str]) {
    let runs = Command::new(program)
        .args(probe)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        runs,
        "{program} does not run: install it (Python 3, Node 20 and a POSIX sh are needed to check every skeleton language)"
    );
}

/// Write the skeleton `name` in `lang` under `parent`; its folder.
fn new_module(home: &Home, parent: &Path, name: &str, lang: &str, extra: &[&str]) -> PathBuf {
    let mut args = vec![
        "new",
        name,
        "--lang",
        lang,
        "--dir",
        parent.to_str().unwrap(),
    ];
    args.extend(extra);
    home.run(&args).expect_code(0);
    parent.join(name)
}

/// Install what `install` names, check it, invoke it twice with its example.
fn installs_conforms_and_answers(home: &Home, name: &str, install: &Path, folder: &Path) {
    home.run(&["install", install.to_str().unwrap()])
        .expect_code(0);
    assert_eq!(home.entry(name)["status"], "enabled", "{name}");
    let run = home.run(&["conformance", name, "--json"]);
    run.expect_code(0);
    let verdict = run.json();
    assert_eq!(verdict["conforms"], true, "{name}: {verdict:#}");
    assert_eq!(verdict["errors"], 0, "{name}: {verdict:#}");

    let example = format!("@{}", folder.join("example-input.json").display());
    for count in [1, 2] {
        let result = home
            .run(&["invoke", name, "greet", "--input", &example, "--json"])
            .invoke_result();
        assert_eq!(
            result["output"],
            json!({"greeting": "Hello, world!", "count": count}),
            "{name}: {result:#}"
        );
    }
    // Input the schema refuses never reaches it: exit 2, the host said no.
    let run = home.run(&[
        "invoke",
        name,
        "greet",
        "--input",
        "{\"name\": 5}",
        "--json",
    ]);
    assert_eq!(run.refused_kind(), "invalid_input", "{name}");
}

#[test]
fn every_script_skeleton_installs_conforms_and_answers_unchanged() {
    let home = Home::new();
    let parent = home.outside();
    for (lang, program, probe) in [
        ("python", "python3", "--version"),
        ("node", "node", "--version"),
        ("sh", "sh", "-c true"),
    ] {
        require(program, &probe.split(' ').collect::<Vec<_>>());
        let name = format!("new-{lang}");
        let folder = new_module(&home, &parent, &name, lang, &[]);
        let entry = folder.join(&name);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&entry).unwrap().permissions(),
        );
        assert_eq!(mode & 0o111, 0o111, "{lang}: the entry is not executable");
        installs_conforms_and_answers(&home, &name, &folder, &folder);
    }
}

#[test]
fn an_existing_folder_is_refused_and_left_as_it_was() {
    let home = Home::new();
    let parent = home.outside();
    let taken = parent.join("mine");
    std::fs::create_dir_all(&taken).unwrap();
    std::fs::write(taken.join("notes"), "keep me").unwrap();
    let run = home.run(&[
        "new",
        "mine",
        "--lang",
        "python",
        "--dir",
        parent.to_str().unwrap(),
    ]);
    run.expect_code(2);
    assert!(run.stderr.contains("already exists"), "{run:#?}");
    let entries: Vec<_> = std::fs::read_dir(&taken).unwrap().flatten().collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(
        std::fs::read_to_string(taken.join("notes")).unwrap(),
        "keep me"
    );
    let siblings: Vec<_> = std::fs::read_dir(&parent).unwrap().flatten().collect();
    assert_eq!(
        siblings.len(),
        1,
        "nothing may be left beside it: {siblings:?}"
    );
}

#[test]
fn the_rust_skeleton_builds_installs_conforms_and_answers_unchanged() {
    let home = Home::new();
    let parent = home.outside();
    let tests = crate::support::tests_dir();
    let repo = tests.parent().unwrap();
    let sdk = repo.join("sdk");
    let name = "new-rust";
    let folder = new_module(
        &home,
        &parent,
        name,
        "rust",
        &["--sdk", sdk.to_str().unwrap()],
    );
    let manifest: String = std::fs::read_to_string(folder.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("modsdk = { path ="), "{manifest}");

    // The repository's versions, so the build is offline and reuses what
    // the test's target folder already holds.
    std::fs::copy(repo.join("Cargo.lock"), folder.join("Cargo.lock")).unwrap();
    let exe = std::env::current_exe().unwrap();
    let target: PathBuf = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            exe.parent()
                .unwrap()
                .parent()
                .unwrap()
                .parent()
                .unwrap()
                .into()
        });
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(&cargo)
        .current_dir(&folder)
        .args(["build", "--offline", "--quiet"])
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .stdin(Stdio::null())
        .output()
        .expect("run cargo");
    assert!(
        output.status.success(),
        "the Rust skeleton does not build: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let binary = target.join("debug").join(name);
    installs_conforms_and_answers(&home, name, &binary, &folder);
    let described: Value = home
        .run(&["describe", name, "--json"])
        .expect_code(0)
        .json();
    assert!(
        described.to_string().contains("new-rust.greet"),
        "{described:#}"
    );
}

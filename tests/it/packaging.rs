//! Packaging without ceremony: the bundled modules in one command with their
//! knowledge (`install --bundled`), `conformance` on every target `install`
//! takes, the git module's grant said in one line, and the README's first
//! command.
//!
//! The bundled modules are found beside `modhost` in cargo's target profile
//! folder, where the test support builds them (as `cargo build` does).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::support::{Home, binaries, module_binary, tests_dir, write_file};

/// Every bundled module, built beside `modhost`.
const BUNDLED: &[&str] = &["files", "sessions", "notes", "git", "fetch"];

fn build_bundled() {
    for name in BUNDLED {
        let built = module_binary(name);
        assert_eq!(
            built.parent(),
            binaries().modhost.parent(),
            "{name} is built beside modhost"
        );
    }
}

/// Every file beneath `dir`, relative, with its bytes.
fn files_beneath(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                found.push((path.strip_prefix(dir).unwrap().to_path_buf(), bytes));
            }
        }
    }
    found.sort();
    found
}

/// What `modules/<id>/` holds but the executable and the host's markers.
fn module_tree_without_program(home: &Home, id: &str) -> Vec<(PathBuf, Vec<u8>)> {
    files_beneath(&home.modules().join(id))
        .into_iter()
        .filter(|(path, _)| path != Path::new(id))
        .collect()
}

#[test]
fn one_command_installs_every_bundled_module_with_its_knowledge_and_twice_is_harmless() {
    build_bundled();
    let home = Home::new();
    let first = home.run(&["install", "--bundled"]);
    first.expect_code(0);
    for name in BUNDLED {
        assert!(
            first.stdout.contains(&format!("installed {name} ")),
            "{name} installed: {first:#?}"
        );
        let entry = home.entry(name);
        assert_eq!(entry["status"], "enabled", "{entry:#}");
        assert_eq!(entry["pin"], "pinned", "{entry:#}");
        // The module folder holds exactly the module's knowledge besides
        // its executable: every file of `modules/<name>/knowledge/`.
        let source = tests_dir().join("../modules").join(name);
        let expected: Vec<(PathBuf, Vec<u8>)> = files_beneath(&source.join("knowledge"))
            .into_iter()
            .map(|(path, bytes)| (Path::new("knowledge").join(path), bytes))
            .collect();
        assert_eq!(
            module_tree_without_program(&home, name),
            expected,
            "{name}'s folder holds its knowledge and nothing else"
        );
    }
    // sessions' guide is served, verified, by the host.
    let knowledge = home.run(&["knowledge", "sessions"]);
    knowledge.expect_code(0);
    let guide = std::fs::read_to_string(
        tests_dir().join("../modules/sessions/knowledge/using-sessions.md"),
    )
    .unwrap();
    let heading = guide.lines().find(|l| !l.trim().is_empty()).unwrap();
    assert!(
        knowledge
            .stdout
            .contains(heading.trim_start_matches('#').trim()),
        "the sessions guide is served: {knowledge:#?}"
    );
    // The pin says where the bytes came from.
    let pins: Value =
        serde_json::from_str(&std::fs::read_to_string(home.path().join("pins.json")).unwrap())
            .unwrap();
    assert!(
        pins.to_string().contains("bundled sessions: "),
        "the pin names the bundled origin: {pins:#}"
    );
    // The git module's grant is said in one line, with the path to grant.
    assert!(
        first
            .stdout
            .lines()
            .any(|l| l.contains("git = \"/usr/bin/git\"") && l.contains("[binaries]")),
        "install says how to grant git: {first:#?}"
    );

    // Again: nothing changes, each module is said to be installed already,
    // with the flag that replaces it.
    let pins_before = std::fs::read(home.path().join("pins.json")).unwrap();
    let second = home.run(&["install", "--bundled"]);
    second.expect_code(0);
    for name in BUNDLED {
        assert!(
            second
                .stdout
                .contains(&format!("{name}: already installed")),
            "{second:#?}"
        );
    }
    assert!(second.stdout.contains("--upgrade"), "{second:#?}");
    assert_eq!(
        std::fs::read(home.path().join("pins.json")).unwrap(),
        pins_before,
        "a second run changes no pin"
    );

    // With --upgrade the named module is replaced (its state kept), the
    // others untouched.
    write_file(&home.path().join("state/notes"), "kept.txt", "mine\n");
    let upgraded = home.run(&["install", "--bundled", "notes", "--upgrade"]);
    upgraded.expect_code(0);
    assert!(upgraded.stdout.contains("upgraded notes "), "{upgraded:#?}");
    assert!(!upgraded.stdout.contains("files"), "{upgraded:#?}");
    assert_eq!(
        std::fs::read_to_string(home.path().join("state/notes/kept.txt")).unwrap(),
        "mine\n"
    );
    assert_eq!(home.entry("notes")["pin"], "pinned");
}

#[test]
fn an_unknown_or_missing_bundled_module_installs_nothing() {
    build_bundled();
    let home = Home::new();
    let unknown = home.run(&["install", "--bundled", "files", "nope"]);
    unknown.expect_code(2);
    assert!(
        unknown.stderr.contains("not a bundled module"),
        "{unknown:#?}"
    );
    // A folder that holds only some of them: the missing one is named with
    // the command that builds it, and not even the found ones are installed.
    let partial = home.outside().join("partial");
    std::fs::create_dir_all(&partial).unwrap();
    std::fs::copy(module_binary("files"), partial.join("files")).unwrap();
    let missing = home.run(&["install", "--bundled", "--from", &partial.to_string_lossy()]);
    missing.expect_code(2);
    assert!(
        missing.stderr.contains("cargo build") && missing.stderr.contains("-p sessions"),
        "{missing:#?}"
    );
    assert!(
        missing.stderr.contains("nothing was installed"),
        "{missing:#?}"
    );
    assert!(
        std::fs::read_dir(home.modules()).unwrap().next().is_none(),
        "nothing installed"
    );
}

/// A packaged layout (`--from DIR` holding module folders) is installed as
/// it is, its own knowledge included.
#[test]
fn a_packaged_module_folder_is_installed_as_it_is() {
    let home = Home::new();
    let packaged = home.outside().join("lib/modhost/modules/notes");
    std::fs::create_dir_all(packaged.join("knowledge")).unwrap();
    std::fs::copy(module_binary("notes"), packaged.join("notes")).unwrap();
    std::fs::write(packaged.join("knowledge/extra.md"), "# packaged\n").unwrap();
    let run = home.run(&[
        "install",
        "--bundled",
        "notes",
        "--from",
        &packaged.parent().unwrap().to_string_lossy(),
    ]);
    run.expect_code(0);
    assert!(home.modules().join("notes/knowledge/extra.md").is_file());
    assert_eq!(home.entry("notes")["pin"], "pinned");
}

/// `modhost new` writes a folder; `conformance` checks it as `install`
/// would take it (staged, nothing installed, nothing left behind).
#[test]
fn conformance_takes_a_new_folder_an_archive_and_an_installed_id() {
    let home = Home::new();
    let parent = home.outside();
    home.run(&[
        "new",
        "greeter",
        "--lang",
        "sh",
        "--dir",
        &parent.to_string_lossy(),
    ])
    .expect_code(0);
    let folder = parent.join("greeter");
    let tmp = own_tmp(&home);

    let checked = run_in_tmp(
        &home,
        &tmp,
        &["conformance", &folder.to_string_lossy(), "--json"],
    );
    checked.expect_code(0);
    let report = checked.json();
    assert_eq!(report["conforms"], true, "{report:#}");
    assert_eq!(report["module"], "greeter", "{report:#}");
    assert_eq!(report["path"], json!(folder.canonicalize().unwrap()));

    // The same folder as a .tar.gz and a .zip.
    let tarball = parent.join("greeter.tar.gz");
    run_ok(
        Command::new("tar")
            .arg("czf")
            .arg(&tarball)
            .arg("-C")
            .arg(&parent)
            .arg("greeter"),
    );
    let zip = parent.join("greeter.zip");
    run_ok(
        Command::new("zip")
            .arg("-qr")
            .arg(&zip)
            .arg("greeter")
            .current_dir(&parent),
    );
    for archive in [&tarball, &zip] {
        let run = run_in_tmp(
            &home,
            &tmp,
            &["conformance", &archive.to_string_lossy(), "--json"],
        );
        run.expect_code(0);
        assert_eq!(run.json()["conforms"], true, "{run:#?}");
    }
    // A sha256 that does not match is refused before anything runs.
    let wrong = run_in_tmp(
        &home,
        &tmp,
        &[
            "conformance",
            &tarball.to_string_lossy(),
            "--sha256",
            &"0".repeat(64),
        ],
    );
    wrong.expect_code(2);
    assert!(wrong.stderr.contains("sha256 mismatch"), "{wrong:#?}");

    assert!(
        std::fs::read_dir(home.modules()).unwrap().next().is_none(),
        "conformance installs nothing"
    );
    assert!(
        !home.path().join("staging").exists(),
        "no staging in the home"
    );
    assert_empty(&tmp);

    // Installed, then checked by id.
    home.run(&["install", &folder.to_string_lossy()])
        .expect_code(0);
    let by_id = home.run(&["conformance", "greeter", "--json"]);
    by_id.expect_code(0);
    assert_eq!(by_id.json()["conforms"], true, "{by_id:#?}");
}

/// A broken module folder: every finding listed, exit 1, nothing installed
/// or left behind.
#[test]
fn conformance_on_a_broken_folder_lists_the_findings_and_installs_nothing() {
    let home = Home::new();
    let parent = home.outside();
    home.run(&[
        "new",
        "broken",
        "--lang",
        "sh",
        "--dir",
        &parent.to_string_lossy(),
    ])
    .expect_code(0);
    let folder = parent.join("broken");
    // Its descriptor names a knowledge file that is not there, and a
    // capability's effects name a root the module does not declare.
    let descriptor_path = find_file(&folder, "descriptor.json");
    let mut descriptor: Value =
        serde_json::from_str(&std::fs::read_to_string(&descriptor_path).unwrap()).unwrap();
    descriptor["knowledge"] = json!({"overlays": [{
        "id": "guide",
        "path": "knowledge/missing.md",
        "sha256": "0".repeat(64),
    }]});
    descriptor["capabilities"][0]["effects"]["reads"] = json!(["nowhere"]);
    std::fs::write(&descriptor_path, descriptor.to_string()).unwrap();
    let tmp = own_tmp(&home);

    let run = run_in_tmp(
        &home,
        &tmp,
        &["conformance", &folder.to_string_lossy(), "--json"],
    );
    run.expect_code(1);
    let report = run.json();
    assert_eq!(report["conforms"], false, "{report:#}");
    let ids: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "error")
        .filter_map(|f| f["id"].as_str())
        .collect();
    assert!(ids.len() >= 2, "every finding, not the first: {report:#}");
    assert!(
        ids.iter().any(|id| id.starts_with("knowledge")),
        "the missing knowledge file: {report:#}"
    );
    assert!(
        std::fs::read_dir(home.modules()).unwrap().next().is_none(),
        "nothing installed"
    );
    assert_empty(&tmp);
}

/// The git module, installed and not granted git: the call's refusal says
/// in one line how to grant it; granted as that line says, it runs.
#[test]
fn the_git_module_says_in_one_line_how_to_grant_git_and_then_runs() {
    let home = Home::new();
    let git = PathBuf::from("/usr/bin/git");
    assert!(git.is_file(), "this test needs /usr/bin/git");
    run_ok(
        Command::new(&git)
            .args(["init", "-q", "-b", "main"])
            .current_dir(home.workspace()),
    );
    home.run(&["install", "--bundled", "git"]).expect_code(0);
    let refused = home.invoke("git", "git.status", &json!({}), &["--approve"]);
    let error = refused.invoke_error();
    let remedy = error["remedy"].as_str().unwrap();
    assert!(!remedy.contains('\n'), "one line: {remedy}");
    let line = format!("git = \"{}\"", git.display());
    assert!(
        remedy.contains(&line) && remedy.contains("[binaries]"),
        "the remedy names the line to add: {error:#}"
    );
    home.write_config(&format!("[binaries]\n{line}\n"));
    let status = home.invoke("git", "git.status", &json!({}), &["--approve"]);
    let result = status.invoke_result();
    assert_eq!(result["output"]["branch"]["head"], "main", "{result:#}");
}

/// The README's first command is one line that builds with `cargo build`
/// (which builds every bundled module: they are default members of the
/// workspace), installs them in one command and invokes `files`; run here
/// against the binaries cargo built, `./target/debug/` being this build's
/// profile folder.
#[test]
fn the_readmes_first_command_works_as_written() {
    build_bundled();
    let readme = std::fs::read_to_string(tests_dir().join("../README.md")).unwrap();
    let section = &readme[readme.find("## Try it").expect("a Try it section")..];
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a sh block");
    let lines: Vec<&str> = block.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line: {block}");
    let line = lines[0];
    let (build, rest) = line.split_once(" && ").expect("the build, then the rest");
    assert_eq!(build, "cargo build", "{line}");
    assert!(rest.contains("install --bundled"), "{line}");
    default_members_hold_the_bundled_modules();

    let profile = binaries().modhost.parent().unwrap().to_path_buf();
    let rest = rest.replace("./target/debug/", &format!("{}/", profile.display()));
    let workspace = tests_dir().join("..");
    // `mktemp -d` makes the home in a folder this test removes.
    let scratch = tempfile::tempdir().unwrap();
    let output = Command::new("bash")
        .arg("-c")
        .arg(&rest)
        .current_dir(&workspace)
        .env_remove("MODHOST_HOME")
        .env_remove("MODHOST_WORKSPACE")
        .env("TMPDIR", scratch.path())
        .output()
        .expect("run bash");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{rest}\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("fn main"),
        "files.search found fn main: {stdout}"
    );
}

/// `cargo build` in the workspace builds modhost and every bundled module.
fn default_members_hold_the_bundled_modules() {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(tests_dir().join(".."))
        .output()
        .expect("run cargo metadata");
    assert!(output.status.success(), "{output:?}");
    let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
    let default_ids: Vec<&str> = metadata["workspace_default_members"]
        .as_array()
        .expect("workspace_default_members")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let packages = metadata["packages"].as_array().unwrap();
    for name in BUNDLED.iter().chain(&["modhost-cli"]) {
        let id = packages
            .iter()
            .find(|p| p["name"] == *name)
            .and_then(|p| p["id"].as_str())
            .unwrap_or_else(|| panic!("package {name}"));
        assert!(
            default_ids.contains(&id),
            "`cargo build` builds {name}: {default_ids:?}"
        );
    }
}

/// A `TMPDIR` of this test's own, so what staging leaves there is seen.
fn own_tmp(home: &Home) -> PathBuf {
    let tmp = home.outside().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    tmp
}

/// `modhost ARGS` with `TMPDIR` at `tmp`.
fn run_in_tmp(home: &Home, tmp: &Path, args: &[&str]) -> crate::support::Run {
    home.run_with_env(args, &[("TMPDIR", &tmp.to_string_lossy())])
}

#[track_caller]
fn assert_empty(tmp: &Path) {
    let left: Vec<_> = std::fs::read_dir(tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(left.is_empty(), "staging left {left:?}");
}

fn find_file(dir: &Path, name: &str) -> PathBuf {
    files_beneath(dir)
        .into_iter()
        .map(|(path, _)| dir.join(path))
        .find(|p| p.file_name().is_some_and(|n| n == name))
        .unwrap_or_else(|| panic!("no {name} beneath {}", dir.display()))
}

#[track_caller]
fn run_ok(command: &mut Command) {
    let output = command.output().expect("run a tool");
    assert!(output.status.success(), "{command:?}: {output:?}");
}

/// An https:// URL: fetched as install fetches it (the test CA trusted,
/// its sha256 required and checked), staged, checked; nothing installed
/// and nothing left in the home's staging area.
#[test]
fn conformance_takes_an_https_url_with_its_sha256() {
    use crate::tls_lab::{TestCa, TlsFileServer};
    use sha2::{Digest, Sha256};

    let home = Home::new();
    let parent = home.outside();
    home.run(&[
        "new",
        "greeter",
        "--lang",
        "sh",
        "--dir",
        &parent.to_string_lossy(),
    ])
    .expect_code(0);
    let lab = parent.join("lab");
    let ca = TestCa::new(&lab, "ca");
    let cert = ca.server_cert(&lab, "server", false);
    let root = lab.join("www");
    std::fs::create_dir_all(&root).unwrap();
    let server = TlsFileServer::start(&lab.join("nginx"), &root, &cert);
    home.write_config(&ca.distribution_config());
    let tarball = root.join("greeter.tar.gz");
    run_ok(
        Command::new("tar")
            .arg("czf")
            .arg(&tarball)
            .arg("-C")
            .arg(&parent)
            .arg("greeter"),
    );
    let sha256: String = Sha256::digest(std::fs::read(&tarball).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let url = server.url("greeter.tar.gz");
    let tmp = own_tmp(&home);

    let unchecked = run_in_tmp(&home, &tmp, &["conformance", &url]);
    unchecked.expect_code(2);
    assert!(unchecked.stderr.contains("--sha256"), "{unchecked:#?}");

    let run = run_in_tmp(
        &home,
        &tmp,
        &["conformance", &url, "--sha256", &sha256, "--json"],
    );
    run.expect_code(0);
    let report = run.json();
    assert_eq!(report["conforms"], true, "{report:#}");
    assert_eq!(report["module"], "greeter", "{report:#}");
    assert_eq!(report["path"], url, "{report:#}");

    let wrong = run_in_tmp(
        &home,
        &tmp,
        &["conformance", &url, "--sha256", &"0".repeat(64)],
    );
    wrong.expect_code(2);
    assert!(
        std::fs::read_dir(home.modules()).unwrap().next().is_none(),
        "conformance installs nothing"
    );
    assert!(
        !home.path().join("staging").exists(),
        "the download is gone from the home"
    );
    assert_empty(&tmp);
}

/// An oci:// reference (a native module's archive in an image index for
/// this machine, on a real registry): resolved, staged, checked; nothing
/// installed.
#[test]
fn conformance_takes_an_oci_reference() {
    use crate::oci_lab::{Registry, this_architecture};

    let home = Home::new();
    let parent = home.outside();
    home.run(&[
        "new",
        "greeter",
        "--lang",
        "sh",
        "--dir",
        &parent.to_string_lossy(),
    ])
    .expect_code(0);
    let tarball = parent.join("greeter.tar.gz");
    run_ok(
        Command::new("tar")
            .arg("czf")
            .arg(&tarball)
            .arg("-C")
            .arg(&parent)
            .arg("greeter"),
    );
    let registry = Registry::start();
    registry.pusher().archive_index(
        "tools/greeter",
        "1.0",
        &[(
            "linux",
            this_architecture(),
            std::fs::read(&tarball).unwrap(),
        )],
    );
    home.write_config(&registry.config_toml());
    let reference = registry.reference("tools/greeter", ":1.0");
    let tmp = own_tmp(&home);
    let run = run_in_tmp(&home, &tmp, &["conformance", &reference, "--json"]);
    run.expect_code(0);
    let report = run.json();
    assert_eq!(report["conforms"], true, "{report:#}");
    assert_eq!(report["module"], "greeter", "{report:#}");
    assert!(
        std::fs::read_dir(home.modules()).unwrap().next().is_none(),
        "conformance installs nothing"
    );
    assert!(!home.path().join("staging").exists(), "no staging left");
    assert_empty(&tmp);
}

//! Attacks on `modhost sync` / `modhost lock` (issue 36's fleet lockfile):
//! each test is the attack, and asserts it failed and nothing got out.
//!
//! - `lock --output` aimed at the home's own files (config.toml, pins.json,
//!   config.sync.toml), directly, through `..` or through a link to the
//!   home: a lockfile written there would replace the operator's
//!   configuration or approvals.
//! - A fleet file whose roots and `allow` rules the operator cannot see
//!   before they hold: the dry run must show every root's path and every
//!   rule's decision.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{Fixture, Home};

/// The echo fixture copied to `dir/<name>` with a trailer (its own bytes).
fn module_file(dir: &Path, name: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    std::fs::copy(Fixture::Echo.path(), &path).unwrap();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    write!(file, "\nattacks-fleet-{name}\n").unwrap();
    path
}

fn sha256_of(path: &Path) -> String {
    let output = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// Every file under `root` with its bytes (folders as `<dir>`).
fn tree_state(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                out.insert(path.clone(), b"<dir>".to_vec());
                stack.push(path);
            } else {
                out.insert(path.clone(), std::fs::read(&path).unwrap_or_default());
            }
        }
    }
    out
}

#[test]
fn lock_never_writes_over_the_homes_own_files() {
    let home = Home::new();
    home.write_config("# the operator's own configuration\n");
    let source = module_file(&home.outside().join("src"), "alpha");
    home.run(&["install", source.to_str().unwrap()])
        .expect_code(0);
    let before = tree_state(&home.path());
    assert!(home.path().join("pins.json").is_file());

    // A link to the home, and a path climbing back into it.
    let link = home.outside().join("home-link");
    std::os::unix::fs::symlink(home.path(), &link).unwrap();
    let climbing = home.outside().join("..").join("home").join("config.toml");
    let targets = [
        home.path().join("config.toml"),
        home.path().join("pins.json"),
        home.path().join("config.sync.toml"),
        home.modules().join("alpha").join("modhost.toml"),
        link.join("config.toml"),
        climbing,
        // Folders that do not exist yet, made on the way into the home.
        home.path().join("new").join("modhost.toml"),
        home.outside()
            .join("new")
            .join("..")
            .join("..")
            .join("home")
            .join("config.toml"),
    ];
    for target in &targets {
        let run = home.run(&[
            "lock",
            "--allow-local",
            "--output",
            target.to_str().unwrap(),
        ]);
        assert_ne!(run.code, 0, "lock wrote {}: {run:#?}", target.display());
        assert!(
            run.stderr.contains("lies in the modhost home")
                || run.stderr.contains("create it first"),
            "{}: {}",
            target.display(),
            run.stderr
        );
        assert_eq!(before, tree_state(&home.path()), "{}", target.display());
    }

    // Outside the home it writes, and the file is a lockfile of the module.
    let output = home.outside().join("modhost.toml");
    home.run(&[
        "lock",
        "--allow-local",
        "--output",
        output.to_str().unwrap(),
    ])
    .expect_code(0);
    let text = std::fs::read_to_string(&output).unwrap();
    assert!(text.contains("id = \"alpha\""), "{text}");
    assert_eq!(before, tree_state(&home.path()));
}

#[test]
fn a_dry_run_shows_every_root_path_and_rule_decision_a_fleet_file_brings() {
    let home = Home::new();
    let dir = home.outside();
    let source = module_file(&dir.join("src"), "alpha");
    let lockfile = dir.join("modhost.toml");
    std::fs::write(
        &lockfile,
        format!(
            r#"version = 1

[[module]]
id = "alpha"
source = "src/alpha"
sha256 = "{}"
source_roots = {{ stash = "/srv/fleet-stash" }}

[[module.approval]]
effect = "network"
decision = "allow"

[[module.approval]]
decision = "allow"
"#,
            sha256_of(&source)
        ),
    )
    .unwrap();
    let before = tree_state(&home.path());

    let run = home.run(&["sync", lockfile.to_str().unwrap(), "--dry-run"]);
    run.expect_code(0);
    for shown in [
        "stash = /srv/fleet-stash (alpha)",
        "alpha: allow, effect = network",
        "alpha: allow, every capability",
    ] {
        assert!(
            run.stdout.contains(shown),
            "{shown:?} not in:\n{}",
            run.stdout
        );
    }

    let run = home.run(&["sync", lockfile.to_str().unwrap(), "--dry-run", "--json"]);
    run.expect_code(0);
    let config = &run.json()["plan"]["config"];
    assert_eq!(config["roots"][0], "stash = /srv/fleet-stash (alpha)");
    assert_eq!(config["rules"][1], "alpha: allow, every capability");
    assert_eq!(
        before,
        tree_state(&home.path()),
        "a dry run changed the home"
    );
}

/// The attack: a fleet file's entry for `alpha` names a source root
/// (`corpus`, pointing at a private folder) that another module, `beta`,
/// installed by the operator, happens to declare. The root is the entry's:
/// `alpha` reads it, `beta` must not (the call fails closed with
/// `root_missing`), and the operator's own `[source_roots]` still reach
/// every module, as before.
#[test]
fn a_source_root_a_lockfile_entry_brings_reaches_that_module_only() {
    let home = Home::new();
    home.install(Fixture::Echo, "beta");
    let private = home.outside().join("private");
    std::fs::create_dir_all(&private).unwrap();
    std::fs::write(private.join("key"), "FLEET-SECRET").unwrap();
    let dir = home.outside();
    let source = module_file(&dir.join("src"), "alpha");
    let lockfile = dir.join("modhost.toml");
    std::fs::write(
        &lockfile,
        format!(
            "version = 1\n\n[[module]]\nid = \"alpha\"\nsource = \"src/alpha\"\nsha256 = \"{}\"\nsource_roots = {{ corpus = {:?} }}\n",
            sha256_of(&source),
            private.display().to_string()
        ),
    )
    .unwrap();
    home.run(&["sync", lockfile.to_str().unwrap()])
        .expect_code(0);

    let input = serde_json::json!({"name": "key"});
    let own = home
        .invoke("alpha", "alpha.read_corpus", &input, &[])
        .invoke_result();
    assert_eq!(own["output"]["content"], "FLEET-SECRET", "{own:#}");

    let other = home.invoke("beta", "beta.read_corpus", &input, &[]);
    assert!(
        !other.stdout.contains("FLEET-SECRET"),
        "another module read the root alpha's entry brings: {other:#?}"
    );
    assert_eq!(other.invoke_error()["kind"], "root_missing", "{other:#?}");

    // The operator's own root is everyone's, as it always was (the entry
    // first given the same path, so the two files agree).
    let shared = home.outside().join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::write(shared.join("key"), "OPERATOR-CORPUS").unwrap();
    let lockfile_text = std::fs::read_to_string(&lockfile).unwrap().replace(
        &format!("{:?}", private.display().to_string()),
        &format!("{:?}", shared.display().to_string()),
    );
    std::fs::write(&lockfile, lockfile_text).unwrap();
    home.run(&["sync", lockfile.to_str().unwrap()])
        .expect_code(0);
    home.write_config(&format!(
        "[source_roots]\ncorpus = {:?}\n",
        shared.display().to_string()
    ));
    let other = home
        .invoke("beta", "beta.read_corpus", &input, &[])
        .invoke_result();
    assert_eq!(other["output"]["content"], "OPERATOR-CORPUS", "{other:#}");
}

/// The attack: a fleet file whose local source is a device that never ends
/// or a pipe no one writes. The plan (even a dry run) must refuse it at
/// once rather than read forever, and change nothing.
#[test]
fn a_local_source_that_is_a_device_or_a_pipe_is_refused_without_hanging() {
    let home = Home::new();
    let dir = home.outside();
    let fifo = dir.join("pipe");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success(), "mkfifo failed");
    let before = tree_state(&home.path());
    for source in ["/dev/zero", fifo.to_str().unwrap()] {
        let lockfile = dir.join("modhost.toml");
        std::fs::write(
            &lockfile,
            format!("version = 1\n\n[[module]]\nid = \"alpha\"\nsource = {source:?}\n"),
        )
        .unwrap();
        for extra in [&["--dry-run"][..], &[]] {
            let mut args = vec!["sync", lockfile.to_str().unwrap()];
            args.extend_from_slice(extra);
            let run = home.run(&args);
            assert_ne!(run.code, 0, "{source}: {run:#?}");
            assert!(
                run.stderr.contains("neither a regular file nor a folder"),
                "{source}: {}",
                run.stderr
            );
        }
    }
    assert_eq!(before, tree_state(&home.path()));
}

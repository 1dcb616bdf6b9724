//! `modhost sync` and `modhost lock`: a fleet converges to one lockfile.
//!
//! Sources here are local paths (a bare executable, an archive, a module
//! folder) beside the lockfile; the modules are the echo and slow-describe
//! fixtures under other names (a fixture names itself after its file), and
//! other bytes of the same module are the same binary with a trailer (an ELF
//! runs fine with trailing bytes). Each guarantee is tested as the failure
//! it prevents: a bad entry anywhere, a killed sync, a root that clashes
//! with the operator's config must leave the home exactly as it was.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Fixture, Home, binaries};

/// Copy `fixture` to `dir/<name>`, with `trailer` appended (other bytes,
/// same module).
fn module_file(dir: &Path, name: &str, fixture: Fixture, trailer: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    std::fs::copy(fixture.path(), &path).unwrap();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    write!(file, "\n{trailer}\n").unwrap();
    path
}

/// `tar czf ARCHIVE -C DIR ENTRY`.
fn tar(dir: &Path, archive: &Path, entry: &str) {
    let status = Command::new("tar")
        .arg("czf")
        .arg(archive)
        .arg("-C")
        .arg(dir)
        .arg(entry)
        .status()
        .expect("run tar");
    assert!(status.success(), "tar failed");
}

fn sha256_of(path: &Path) -> String {
    let output = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// A fleet's sources in `<dir>/src/`: `alpha` (a bare executable),
/// `beta.tar.gz` (an archive of the folder `beta/`), `gamma/` (a module
/// folder with a knowledge file).
struct Sources {
    dir: PathBuf,
}

impl Sources {
    fn new(dir: &Path, trailer: &str) -> Sources {
        let src = dir.join("src");
        module_file(&src, "alpha", Fixture::Echo, trailer);
        let packed = dir.join("pack");
        module_file(&packed.join("beta"), "beta", Fixture::Echo, trailer);
        tar(&packed, &src.join("beta.tar.gz"), "beta");
        module_file(&src.join("gamma"), "gamma", Fixture::Echo, trailer);
        Sources {
            dir: dir.to_path_buf(),
        }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join("src").join(name)
    }

    /// The lockfile of the three, written beside `src/`.
    fn lockfile(&self, extra: &str) -> PathBuf {
        let text = format!(
            r#"version = 1

[[module]]
id = "alpha"
source = "src/alpha"
sha256 = "{}"

[[module]]
id = "beta"
source = "src/beta.tar.gz"
sha256 = "{}"

[[module]]
id = "gamma"
source = "src/gamma"
enabled = false
source_roots = {{ fleetdata = "/srv/fleet-data" }}

[[module.approval]]
name = "gamma never writes"
effect = "writes"
decision = "deny"
{extra}"#,
            sha256_of(&self.file("alpha")),
            sha256_of(&self.file("beta.tar.gz")),
        );
        let path = self.dir.join("modhost.toml");
        std::fs::write(&path, text).unwrap();
        path
    }
}

/// Every path under the home with its contents (folders as `<dir>`).
fn home_state(home: &Home) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let relative = path.strip_prefix(root).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                out.insert(relative, b"<dir>".to_vec());
                walk(root, &path, out);
            } else {
                out.insert(relative, std::fs::read(&path).unwrap_or_default());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&home.path(), &home.path(), &mut out);
    out
}

#[track_caller]
fn assert_same_state(before: &BTreeMap<String, Vec<u8>>, after: &BTreeMap<String, Vec<u8>>) {
    let changed: Vec<&String> = before
        .keys()
        .chain(after.keys())
        .filter(|key| before.get(*key) != after.get(*key))
        .collect();
    assert!(changed.is_empty(), "the home changed: {changed:?}");
}

fn pins(home: &Home) -> Value {
    std::fs::read_to_string(home.path().join("pins.json"))
        .map(|text| serde_json::from_str(&text).unwrap())
        .unwrap_or(Value::Null)
}

/// What two homes must agree on: each module's tree digest and its
/// capabilities' digests (not when or from which path it was pinned, nor
/// the whole descriptor's digest: the echo fixture puts a per-describe
/// nonce in its descriptor).
fn pinned_bytes(home: &Home) -> BTreeMap<String, (String, Value)> {
    pins(home)["modules"]
        .as_object()
        .map(|modules| {
            modules
                .iter()
                .map(|(id, pin)| {
                    (
                        id.clone(),
                        (
                            pin["digest"].as_str().unwrap_or_default().to_owned(),
                            pin["capabilities"].clone(),
                        ),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn sync(home: &Home, lockfile: &Path, extra: &[&str]) -> crate::support::Run {
    let mut args = vec!["sync".to_owned(), lockfile.display().to_string()];
    args.extend(extra.iter().map(|a| a.to_string()));
    home.run(&args)
}

fn actions(report: &Value) -> Vec<(String, String)> {
    report["plan"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap().to_owned(),
                s["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_sync_installs_and_pins_every_module_and_a_second_sync_changes_nothing() {
    let home = Home::new();
    let sources = Sources::new(&home.outside(), "v1");
    let lockfile = sources.lockfile("");

    // The dry run plans three installs and the config, and changes nothing.
    let before = home_state(&home);
    let run = sync(&home, &lockfile, &["--dry-run", "--json"]);
    run.expect_code(0);
    let report = run.json();
    assert_eq!(report["applied"], false, "{report:#}");
    assert_eq!(
        actions(&report),
        [
            ("alpha", "install"),
            ("beta", "install"),
            ("gamma", "install")
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    assert_eq!(report["plan"]["config"]["source_roots"][0], "fleetdata");
    assert_same_state(&before, &home_state(&home));

    let run = sync(&home, &lockfile, &[]);
    run.expect_code(0);
    assert!(
        run.stdout.contains("synced: 4 change(s) applied"),
        "{run:#?}"
    );
    assert!(run.stderr.contains("sync: beta: staged"), "{run:#?}");
    let list = home.list();
    let status = |id: &str| {
        list.iter()
            .find(|m| m["id"] == id)
            .map(|m| m["status"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_default()
    };
    assert_eq!(status("alpha"), "enabled", "{list:#?}");
    assert_eq!(status("beta"), "enabled", "{list:#?}");
    assert_eq!(status("gamma"), "disabled", "{list:#?}");
    assert_eq!(pinned_bytes(&home).len(), 3, "{:#}", pins(&home));
    // The module's rules and roots are the managed file's; config.toml
    // (the operator's) is not written.
    assert!(!home.path().join("config.toml").exists());
    let managed = std::fs::read_to_string(home.path().join("config.sync.toml")).unwrap();
    assert!(
        managed.contains("fleetdata") && managed.contains("gamma never writes"),
        "{managed}"
    );

    // Idempotent: the same file again is a plan of nothing, and nothing is
    // written.
    let before = home_state(&home);
    let run = sync(&home, &lockfile, &["--json"]);
    run.expect_code(0);
    let report = run.json();
    assert_eq!(report["applied"], false, "{report:#}");
    assert!(report["plan"]["config"].is_null(), "{report:#}");
    assert!(
        actions(&report)
            .iter()
            .all(|(_, action)| action == "unchanged"),
        "{report:#}"
    );
    assert_same_state(&before, &home_state(&home));
    let run = sync(&home, &lockfile, &[]);
    assert!(run.stdout.contains("already in sync"), "{run:#?}");
}

#[test]
fn two_homes_synced_from_one_file_pin_the_same_bytes() {
    let first = Home::new();
    let second = Home::new();
    let sources = Sources::new(&first.outside(), "v1");
    let lockfile = sources.lockfile("");
    sync(&first, &lockfile, &[]).expect_code(0);
    sync(&second, &lockfile, &[]).expect_code(0);
    let pinned = pinned_bytes(&first);
    assert_eq!(pinned.len(), 3);
    assert_eq!(pinned, pinned_bytes(&second));
    // And the installed files are byte-identical.
    let modules = |home: &Home| {
        home_state(home)
            .into_iter()
            .filter(|(path, _)| path.starts_with("modules/"))
            .collect::<BTreeMap<_, _>>()
    };
    assert_eq!(modules(&first), modules(&second));
}

#[test]
fn a_bad_entry_anywhere_in_the_file_leaves_the_home_byte_identical() {
    let home = Home::new();
    let v1 = Sources::new(&home.outside().join("v1"), "v1");
    sync(&home, &v1.lockfile(""), &[]).expect_code(0);
    // Warm what `list` caches, so only the sync could change the home.
    home.list();

    // v2 upgrades alpha and beta (first and second in the file) and adds a
    // module after the bad one: each would change the home if the sync
    // were not all or nothing.
    let v2 = Sources::new(&home.outside().join("v2"), "v2");
    let broken = module_file(&v2.dir.join("src"), "broken", Fixture::Garbage, "v2");
    module_file(&v2.dir.join("src"), "delta", Fixture::Echo, "v2");
    let bad_entries = [
        (
            "a digest mismatch",
            format!("source = \"src/broken\"\nsha256 = \"{}\"", "0".repeat(64)),
            "sha256 mismatch",
        ),
        (
            "a module that does not conform",
            format!(
                "source = \"src/broken\"\nsha256 = \"{}\"",
                sha256_of(&broken)
            ),
            "describe.failed",
        ),
        (
            "a missing file",
            "source = \"src/missing\"".to_owned(),
            "src/missing",
        ),
        (
            "bytes other than the pinned tree",
            format!(
                "source = \"src/broken-tree\"\ntree = \"{}\"",
                "e".repeat(64)
            ),
            "lockfile says tree",
        ),
        (
            "a signer no verified signature shows",
            "source = \"src/broken-tree\"\nsigner = \"release@example.com\"".to_owned(),
            "no signature was verified",
        ),
    ];
    module_file(
        &v2.dir.join("src/broken-tree"),
        "broken",
        Fixture::Echo,
        "v2",
    );
    for (what, entry, expected) in bad_entries {
        let extra = format!(
            "\n[[module]]\nid = \"broken\"\n{entry}\n\n[[module]]\nid = \"delta\"\nsource = \"src/delta\"\n"
        );
        let lockfile = v2.lockfile(&extra);
        let planned = sync(&home, &lockfile, &["--dry-run", "--json"]);
        if planned.code == 0 {
            let steps = actions(&planned.json());
            assert!(
                steps.contains(&("alpha".into(), "upgrade".into())),
                "{what}: {steps:?}"
            );
        }
        let before = home_state(&home);
        let run = sync(&home, &lockfile, &[]);
        assert_ne!(run.code, 0, "{what}: the sync went through: {run:#?}");
        assert!(
            run.stderr.contains(expected) && run.stderr.contains("\"broken\""),
            "{what}: the error names neither the module nor why: {}",
            run.stderr
        );
        assert!(
            run.stderr.contains("nothing was changed"),
            "{what}: {}",
            run.stderr
        );
        assert_same_state(&before, &home_state(&home));
    }
}

#[test]
fn a_sync_killed_midway_leaves_the_home_unchanged_and_the_next_one_converges() {
    let home = Home::new();
    let v1 = Sources::new(&home.outside().join("v1"), "v1");
    sync(&home, &v1.lockfile(""), &[]).expect_code(0);
    home.list();
    let v2 = Sources::new(&home.outside().join("v2"), "v2");
    // `slow` takes two seconds to describe: the sync is killed while it is
    // being checked, after alpha and beta were staged.
    let slow = module_file(&v2.dir.join("src"), "slow", Fixture::SlowDescribe, "v2");
    let lockfile = v2.lockfile(&format!(
        "\n[[module]]\nid = \"slow\"\nsource = \"src/slow\"\nsha256 = \"{}\"\n",
        sha256_of(&slow)
    ));
    let before = home_state(&home);
    let stderr = home.outside().join("killed-sync.stderr");
    let mut child = Command::new(&binaries().modhost)
        .arg("--home")
        .arg(home.path())
        .arg("--workspace")
        .arg(home.workspace())
        .arg("sync")
        .arg(&lockfile)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        let said = std::fs::read_to_string(&stderr).unwrap_or_default();
        if said.contains("sync: slow: checking") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the sync never reached the slow module: {said}"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the sync ended before it was killed: {said}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    // What the host runs and approves is as it was; a killed process can
    // only leave its staging folders behind.
    let after = home_state(&home);
    let without_staging = |state: &BTreeMap<String, Vec<u8>>| {
        state
            .iter()
            .filter(|(path, _)| !path.starts_with("staging"))
            .map(|(path, bytes)| (path.clone(), bytes.clone()))
            .collect::<BTreeMap<_, _>>()
    };
    assert_same_state(&without_staging(&before), &without_staging(&after));
    // The next sync converges.
    sync(&home, &lockfile, &[]).expect_code(0);
    let run = sync(&home, &lockfile, &["--json"]);
    assert_eq!(run.json()["applied"], false);
    assert_eq!(pinned_bytes(&home).len(), 4);
}

#[test]
fn modules_the_file_does_not_name_are_kept_unless_pruned() {
    let home = Home::new();
    home.install(Fixture::Echo, "extra");
    std::fs::create_dir_all(home.path().join("state/extra")).unwrap();
    let sources = Sources::new(&home.outside(), "v1");
    let lockfile = sources.lockfile("");
    let run = sync(&home, &lockfile, &["--json"]);
    run.expect_code(0);
    assert_eq!(run.json()["plan"]["kept"][0], "extra");
    assert!(home.modules().join("extra").exists());
    let run = sync(&home, &lockfile, &["--prune", "--json"]);
    run.expect_code(0);
    assert_eq!(
        actions(&run.json()).last().unwrap(),
        &("extra".to_owned(), "remove".to_owned())
    );
    assert!(!home.modules().join("extra").exists());
    assert!(pins(&home)["modules"].get("extra").is_none());
    assert!(
        home.path().join("state/extra").exists(),
        "pruning keeps state"
    );
}

#[test]
fn a_root_the_operators_config_names_otherwise_stops_the_sync_before_any_change() {
    let home = Home::new();
    home.write_config("[source_roots]\nfleetdata = \"/srv/elsewhere\"\n");
    let sources = Sources::new(&home.outside(), "v1");
    let before = home_state(&home);
    let run = sync(&home, &sources.lockfile(""), &[]);
    assert_ne!(run.code, 0, "{run:#?}");
    assert!(
        run.stderr.contains("fleetdata") && run.stderr.contains("nothing was changed"),
        "{}",
        run.stderr
    );
    assert_same_state(&before, &home_state(&home));
}

#[test]
fn lock_then_sync_into_a_fresh_home_round_trips() {
    let first = Home::new();
    let sources = Sources::new(&first.outside(), "v1");
    sync(&first, &sources.lockfile(""), &[]).expect_code(0);

    // Local paths are refused unless asked for: another host cannot fetch them.
    let run = first.run(&["lock"]);
    assert_ne!(run.code, 0);
    assert!(
        run.stderr
            .contains("alpha was installed from the local path")
            && run.stderr.contains("--allow-local"),
        "{}",
        run.stderr
    );
    let locked = sources.dir.join("locked.toml");
    let locked_arg = locked.display().to_string();
    first
        .run(&["lock", "--allow-local", "--output", &locked_arg])
        .expect_code(0);
    let text = std::fs::read_to_string(&locked).unwrap();
    assert!(
        text.contains("source = \"src/alpha\"") && text.contains("tree = "),
        "{text}"
    );

    let second = Home::new();
    sync(&second, &locked, &[]).expect_code(0);
    assert_eq!(pinned_bytes(&first), pinned_bytes(&second));
    let again = sources.dir.join("again.toml");
    let again_arg = again.display().to_string();
    second
        .run(&["lock", "--allow-local", "--output", &again_arg])
        .expect_code(0);
    assert_eq!(text, std::fs::read_to_string(&again).unwrap());
    // The first home is already what its own lockfile says.
    let run = sync(&first, &locked, &["--json"]);
    assert_eq!(run.json()["applied"], false, "{}", run.stdout);
}

/// A home trusting a test CA, and nginx serving `www/` with its certificate.
struct HttpsLab {
    ca: crate::tls_lab::TestCa,
    server: crate::tls_lab::TlsFileServer,
}

impl HttpsLab {
    fn new(dir: &Path) -> HttpsLab {
        let ca = crate::tls_lab::TestCa::new(dir, "ca");
        let cert = ca.server_cert(dir, "server", false);
        let root = dir.join("www");
        std::fs::create_dir_all(&root).unwrap();
        let server = crate::tls_lab::TlsFileServer::start(&dir.join("nginx"), &root, &cert);
        HttpsLab { ca, server }
    }

    /// Serve `file` at `/<name>`: its URL and sha256.
    fn publish(&self, file: &Path, name: &str) -> (String, String) {
        let served = self.server.root.join(name);
        std::fs::copy(file, &served).unwrap();
        (self.server.url(&format!("/{name}")), sha256_of(&served))
    }
}

#[test]
fn https_sources_sync_pinned_with_their_origin_and_lock_without_local_paths() {
    let home = Home::new();
    let lab = HttpsLab::new(&home.outside().join("lab"));
    home.write_config(&lab.ca.distribution_config());
    let sources = Sources::new(&home.outside(), "v1");
    let (alpha, alpha_sha) = lab.publish(&sources.file("alpha"), "alpha");
    let (beta, beta_sha) = lab.publish(&sources.file("beta.tar.gz"), "beta.tar.gz");
    let lockfile = home.outside().join("https.toml");
    std::fs::write(
        &lockfile,
        format!(
            "version = 1\n\n[[module]]\nid = \"alpha\"\nsource = \"{alpha}\"\nsha256 = \"{alpha_sha}\"\n\n[[module]]\nid = \"beta\"\nsource = \"{beta}\"\nsha256 = \"{beta_sha}\"\n"
        ),
    )
    .unwrap();
    let run = sync(&home, &lockfile, &[]);
    run.expect_code(0);
    assert!(
        run.stderr.contains("sync: alpha: fetching"),
        "{}",
        run.stderr
    );
    let pinned = pins(&home);
    assert_eq!(pinned["modules"]["alpha"]["provenance"]["source"], alpha);
    assert_eq!(pinned["modules"]["beta"]["provenance"]["sha256"], beta_sha);
    assert_eq!(
        sync(&home, &lockfile, &["--json"]).json()["applied"],
        false,
        "a second sync fetches nothing"
    );

    // Remote sources need no --allow-local, and a fresh home trusting the
    // same CA syncs to the same pins from what `lock` wrote.
    let locked = home.outside().join("locked.toml");
    let locked_arg = locked.display().to_string();
    home.run(&["lock", "--output", &locked_arg]).expect_code(0);
    let text = std::fs::read_to_string(&locked).unwrap();
    assert!(text.contains(&alpha) && text.contains(&beta_sha), "{text}");
    let fresh = Home::new();
    fresh.write_config(&lab.ca.distribution_config());
    sync(&fresh, &locked, &[]).expect_code(0);
    assert_eq!(pinned_bytes(&home), pinned_bytes(&fresh));
}

#[test]
fn a_wrong_digest_or_a_download_killed_midway_over_https_leaves_the_home_as_it_was() {
    let home = Home::new();
    let lab = HttpsLab::new(&home.outside().join("lab"));
    home.write_config(&lab.ca.distribution_config());
    let v1 = Sources::new(&home.outside().join("v1"), "v1");
    sync(&home, &v1.lockfile(""), &[]).expect_code(0);
    home.list();
    let v2 = Sources::new(&home.outside().join("v2"), "v2");
    let delta = module_file(&v2.dir.join("src"), "delta", Fixture::Echo, "v2");
    let (url, sha) = lab.publish(&delta, "delta");

    // A digest the served bytes do not have, after two upgrades.
    let lockfile = v2.lockfile(&format!(
        "\n[[module]]\nid = \"delta\"\nsource = \"{url}\"\nsha256 = \"{}\"\n",
        "0".repeat(64)
    ));
    let before = home_state(&home);
    let run = sync(&home, &lockfile, &[]);
    assert_ne!(run.code, 0, "{run:#?}");
    assert!(
        run.stderr.contains("\"delta\"") && run.stderr.contains("nothing was changed"),
        "{}",
        run.stderr
    );
    assert_same_state(&before, &home_state(&home));

    // The right digest at 1 KiB/s: killed while downloading.
    let slow = lab.server.url("/slow/delta");
    let lockfile = v2.lockfile(&format!(
        "\n[[module]]\nid = \"delta\"\nsource = \"{slow}\"\nsha256 = \"{sha}\"\n"
    ));
    let stderr = home.outside().join("killed-sync.stderr");
    let mut child = Command::new(&binaries().modhost)
        .arg("--home")
        .arg(home.path())
        .arg("--workspace")
        .arg(home.workspace())
        .arg("sync")
        .arg(&lockfile)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        let said = std::fs::read_to_string(&stderr).unwrap_or_default();
        if said.contains("sync: delta: fetching") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60) && child.try_wait().unwrap().is_none(),
            "the sync never reached the download: {said}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();
    let without_staging = |state: BTreeMap<String, Vec<u8>>| {
        state
            .into_iter()
            .filter(|(path, _)| !path.starts_with("staging"))
            .collect::<BTreeMap<_, _>>()
    };
    assert_same_state(
        &without_staging(before),
        &without_staging(home_state(&home)),
    );
}

/// `wasm` with a custom section appended: other bytes, the same component.
fn with_custom_section(wasm: &[u8], payload: &[u8]) -> Vec<u8> {
    let name = b"modhost-test";
    let content_len = 1 + name.len() + payload.len();
    assert!(content_len < 128, "one-byte LEB128 lengths");
    let mut out = wasm.to_vec();
    out.extend_from_slice(&[0, content_len as u8, name.len() as u8]);
    out.extend_from_slice(name);
    out.extend_from_slice(payload);
    out
}

#[test]
fn an_oci_source_syncs_by_digest_and_a_tag_moved_afterwards_changes_nothing() {
    let registry = crate::oci_lab::Registry::start();
    let pusher = registry.pusher();
    let wasm = std::fs::read(crate::support::components().path("echo")).unwrap();
    let pushed = pusher.component("fleet/echo", "1.0", &wasm);
    let hex = pushed.digest.strip_prefix("sha256:").unwrap().to_owned();
    let home = Home::new();
    home.write_config(&registry.config_toml());
    let lockfile = home.outside().join("oci.toml");

    // A tag alone names whatever the registry holds today: refused.
    let tagged = registry.reference("fleet/echo", ":1.0");
    std::fs::write(
        &lockfile,
        format!("version = 1\n[[module]]\nid = \"echo\"\nsource = \"{tagged}\"\n"),
    )
    .unwrap();
    let before = home_state(&home);
    let run = sync(&home, &lockfile, &[]);
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("names a tag"), "{}", run.stderr);
    assert_same_state(&before, &home_state(&home));

    // The tag with its digest: the digest is what is fetched and pinned.
    std::fs::write(
        &lockfile,
        format!(
            "version = 1\n[[module]]\nid = \"echo\"\nsource = \"{tagged}\"\nsha256 = \"{hex}\"\n"
        ),
    )
    .unwrap();
    sync(&home, &lockfile, &[]).expect_code(0);
    assert_eq!(
        pins(&home)["modules"]["echo"]["provenance"]["oci_digest"],
        pushed.digest
    );
    // The tag moves to other bytes: the lockfile still names the old ones,
    // so a sync changes nothing and a fresh home gets the pinned bytes.
    pusher.component("fleet/echo", "1.0", &with_custom_section(&wasm, b"moved"));
    let run = sync(&home, &lockfile, &["--json"]);
    assert_eq!(run.json()["applied"], false, "{}", run.stdout);
    let fresh = Home::new();
    fresh.write_config(&registry.config_toml());
    sync(&fresh, &lockfile, &[]).expect_code(0);
    assert_eq!(pinned_bytes(&home), pinned_bytes(&fresh));
    assert_eq!(
        std::fs::read(fresh.modules().join("echo/echo.wasm")).unwrap(),
        wasm
    );

    // `lock` writes the digest reference, which syncs a third home alike.
    let locked = home.outside().join("locked.toml");
    let locked_arg = locked.display().to_string();
    home.run(&["lock", "--output", &locked_arg]).expect_code(0);
    let text = std::fs::read_to_string(&locked).unwrap();
    let by_digest = registry.reference("fleet/echo", &format!("@{}", pushed.digest));
    assert!(text.contains(&by_digest), "{text}");
    let third = Home::new();
    third.write_config(&registry.config_toml());
    sync(&third, &locked, &[]).expect_code(0);
    assert_eq!(pinned_bytes(&home), pinned_bytes(&third));
}

/// The attack: a fleet whose policy requires signatures, and an https entry
/// whose signature is left out (or another host that would take unsigned
/// bytes). Without its signature the sync is refused and the home is as it
/// was; with it (a path beside the lockfile) the module syncs, its pin names
/// the signer and where the signature came from, `lock` writes both back,
/// and a fresh home syncs from what `lock` wrote under the same policy.
#[test]
fn an_https_entry_syncs_under_required_signatures_only_with_its_signature() {
    use crate::distribution_signatures::{Trust, sigstore_lab};
    let home = Home::new();
    let lab = HttpsLab::new(&home.outside().join("lab"));
    let trust = Trust::new(&home);
    let config = format!("{}{}", lab.ca.distribution_config(), trust.policy(true));
    home.write_config(&config);
    let sources = Sources::new(&home.outside(), "signed");
    let (url, sha) = lab.publish(&sources.file("alpha"), "alpha");
    let bytes = std::fs::read(sources.file("alpha")).unwrap();
    std::fs::write(
        sources.dir.join("alpha.sig"),
        sigstore_lab::blob_signature(&trust.key, &bytes),
    )
    .unwrap();
    let entry = format!(
        "version = 1\n\n[[module]]\nid = \"alpha\"\nsource = \"{url}\"\nsha256 = \"{sha}\"\n"
    );

    // Unsigned under `require = true`: refused, nothing changed.
    let unsigned = sources.dir.join("unsigned.toml");
    std::fs::write(&unsigned, &entry).unwrap();
    let before = home_state(&home);
    let run = sync(&home, &unsigned, &[]);
    assert_ne!(run.code, 0, "{run:#?}");
    assert!(
        run.stderr.contains("carries no signature")
            && run.stderr.contains("\"alpha\"")
            && run.stderr.contains("nothing was changed"),
        "{}",
        run.stderr
    );
    assert_same_state(&before, &home_state(&home));

    // With its signature, a path relative to the lockfile's folder.
    let signed = sources.dir.join("signed.toml");
    std::fs::write(&signed, format!("{entry}signature = \"alpha.sig\"\n")).unwrap();
    sync(&home, &signed, &[]).expect_code(0);
    let provenance = &pins(&home)["modules"]["alpha"]["provenance"];
    let fingerprint = trust.key.fingerprint();
    assert_eq!(
        provenance["signature"]["signer"],
        fingerprint.as_str(),
        "{provenance:#}"
    );
    assert_eq!(
        provenance["signature_source"],
        sources.dir.join("alpha.sig").display().to_string(),
        "{provenance:#}"
    );
    assert_eq!(sync(&home, &signed, &["--json"]).json()["applied"], false);

    // `lock` writes the signature (relative to its folder) and the signer.
    let locked = sources.dir.join("locked.toml");
    let locked_arg = locked.display().to_string();
    home.run(&["lock", "--output", &locked_arg]).expect_code(0);
    let text = std::fs::read_to_string(&locked).unwrap();
    assert!(
        text.contains("signature = \"alpha.sig\"")
            && text.contains(&format!("signer = \"{fingerprint}\"")),
        "{text}"
    );
    let fresh = Home::new();
    fresh.write_config(&config);
    sync(&fresh, &locked, &[]).expect_code(0);
    assert_eq!(pinned_bytes(&home), pinned_bytes(&fresh));
    assert_eq!(
        pins(&fresh)["modules"]["alpha"]["provenance"]["signature"]["signer"],
        fingerprint.as_str()
    );
}

/// The crash: a commit killed (`kill -9`) between its renames. Fabricated
/// exactly as the commit leaves it: alpha moved aside before its
/// replacement was placed (its id empty, its pin approving the bytes
/// aside), beta's old bytes aside with the new ones in place, a pruned
/// module moved aside before `pins.json` was written (its pin stale), a
/// link of the pattern pointing outside the home, and a name that only
/// looks like one. The dry run lists them and changes nothing; the next
/// sync puts alpha back, deletes the rest without following the link,
/// prunes the module the crash had half-pruned (its pin goes), and
/// converges; `remove` sweeps too.
#[test]
fn what_a_commit_killed_between_its_renames_left_is_settled_by_the_next_sync() {
    let home = Home::new();
    let sources = Sources::new(&home.outside(), "v1");
    let lockfile = sources.lockfile("");
    sync(&home, &lockfile, &[]).expect_code(0);
    home.install(Fixture::Echo, "extra");
    let modules = home.modules();
    let aside = |name: &str| modules.join(name);

    let alpha_aside = aside(".alpha.replaced-18f0a1b2c3d4e5f6-4d2-0");
    std::fs::rename(modules.join("alpha"), &alpha_aside).unwrap();
    let beta_aside = aside(".beta.replaced-18f0a1b2c3d4e5f6-4d2-1");
    std::fs::create_dir_all(&beta_aside).unwrap();
    std::fs::copy(modules.join("beta/beta"), beta_aside.join("beta")).unwrap();
    let extra_aside = aside(".extra.removed-18f0a1b2c3d4e5f6-4d2-2");
    std::fs::rename(modules.join("extra"), &extra_aside).unwrap();
    let outside = home.outside().join("precious");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("keep"), b"keep").unwrap();
    let link = aside(".gamma.removed-18f0a1b2c3d4e5f6-4d2-3");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let lookalike = aside(".gamma.removed-not-a-request-id");
    std::fs::create_dir_all(&lookalike).unwrap();
    assert!(pins(&home)["modules"].get("extra").is_some());

    let before = home_state(&home);
    let run = sync(&home, &lockfile, &["--dry-run", "--json"]);
    run.expect_code(0);
    let leftovers = run.json()["plan"]["leftovers"].clone();
    assert_eq!(leftovers.as_array().map(Vec::len), Some(4), "{leftovers:#}");
    assert_same_state(&before, &home_state(&home));

    let run = sync(&home, &lockfile, &["--prune", "--json"]);
    run.expect_code(0);
    let report = run.json();
    assert_eq!(
        report["swept"].as_array().map(Vec::len),
        Some(4),
        "{report:#}"
    );
    for gone in [&alpha_aside, &beta_aside, &extra_aside, &link] {
        assert!(
            std::fs::symlink_metadata(gone).is_err(),
            "{} is still there",
            gone.display()
        );
    }
    assert_eq!(
        std::fs::read(outside.join("keep")).unwrap(),
        b"keep",
        "the link was followed"
    );
    assert!(lookalike.is_dir(), "a name not of the pattern was swept");
    assert!(
        modules.join("alpha/alpha").is_file(),
        "alpha was not put back"
    );
    assert!(
        pins(&home)["modules"].get("extra").is_none(),
        "a stale pin stayed"
    );
    assert!(!modules.join("extra").exists());
    // Converged: alpha is the pinned bytes (unchanged, not reinstalled),
    // and the next sync has nothing to do.
    assert!(
        actions(&report).contains(&("alpha".to_owned(), "unchanged".to_owned())),
        "{report:#}"
    );
    let status = |id: &str| {
        home.list()
            .iter()
            .find(|m| m["id"] == id)
            .map(|m| m["status"].as_str().unwrap_or_default().to_owned())
    };
    assert_eq!(status("alpha").as_deref(), Some("enabled"));
    assert_eq!(sync(&home, &lockfile, &["--json"]).json()["applied"], false);

    // `remove` settles what it finds, too.
    std::fs::create_dir_all(aside(".alpha.replaced-18f0a1b2c3d4e5f6-4d2-9")).unwrap();
    home.run(&["remove", "beta"]).expect_code(0);
    assert!(!aside(".alpha.replaced-18f0a1b2c3d4e5f6-4d2-9").exists());
}

/// The round trip `lock` → `sync` of MCP server modules: `sync` installs
/// modules, and an MCP server module's bytes are the bridge and the grants
/// its install wrote around the server's code. Its pin is made here as
/// `install --mcp` and an https `.mcpb` install write it. `lock` must
/// refuse naming the module and what to do, never write an entry that
/// `sync` would install as something else; and a hand-written `.mcpb`
/// entry is refused naming it.
#[test]
fn lock_refuses_mcp_server_modules_naming_each_and_sync_refuses_an_mcp_bundle() {
    let home = Home::new();
    home.install(Fixture::Echo, "server");
    home.install(Fixture::Echo, "bundled");
    let path = home.path().join("pins.json");
    let mut pinned = pins(&home);
    pinned["modules"]["server"]["source"] =
        "/srv/servers/tiny, an MCP server run as `python3 {module}/server.py`".into();
    let url = "https://releases.example.com/tiny.mcpb";
    pinned["modules"]["bundled"]["source"] =
        format!("{url} (MCP bundle tiny 1.0), an MCP server run as `node ...`").into();
    pinned["modules"]["bundled"]["provenance"] =
        serde_json::json!({"source": url, "sha256": "ab".repeat(32)});
    std::fs::write(&path, serde_json::to_string_pretty(&pinned).unwrap()).unwrap();

    let locked = home.outside().join("locked.toml");
    let locked_arg = locked.display().to_string();
    let run = home.run(&["lock", "--allow-local", "--output", &locked_arg]);
    assert_ne!(run.code, 0, "{run:#?}");
    assert!(
        run.stderr.contains("server is an MCP server module")
            && run.stderr.contains("install --mcp")
            && run.stderr.contains(&format!(
                "bundled is an MCP server module installed from the MCP bundle {url}"
            ))
            && run
                .stderr
                .contains(&format!("modhost install {url} --sha256"))
            && run.stderr.contains("nothing was written"),
        "{}",
        run.stderr
    );
    assert!(!locked.exists());

    std::fs::write(
        &locked,
        format!(
            "version = 1\n[[module]]\nid = \"bundled\"\nsource = \"{url}\"\nsha256 = \"{}\"\n",
            "ab".repeat(32)
        ),
    )
    .unwrap();
    let before = home_state(&home);
    let run = sync(&home, &locked, &[]);
    assert_ne!(run.code, 0, "{run:#?}");
    assert!(
        run.stderr.contains("\"bundled\"") && run.stderr.contains("is an MCP bundle"),
        "{}",
        run.stderr
    );
    assert_same_state(&before, &home_state(&home));
}

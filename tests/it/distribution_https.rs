//! `modhost install https://…` against real servers on loopback (nginx with
//! a test CA, see `tls_lab.rs`): what installs is pinned with where it came
//! from, and every attack (plain http, a redirect to http, a missing or
//! wrong sha256, an untrusted or expired certificate, an oversized, endless
//! or stalled download, an archive that passes its digest but not
//! conformance) leaves the home exactly as it was, with the reason said.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::{Fixture, Home, components};
use crate::tls_lab::{MisbehavingServer, Misbehaviour, TestCa, TlsFileServer};

/// A home trusting `ca`, with `extra` config lines, and a folder nginx
/// serves with a certificate from `ca`.
struct Lab {
    home: Home,
    ca: TestCa,
    server: TlsFileServer,
}

impl Lab {
    fn new(extra_config: &str) -> Lab {
        let home = Home::new();
        let lab = home.outside().join("lab");
        let ca = TestCa::new(&lab, "ca");
        let cert = ca.server_cert(&lab, "server", false);
        let root = lab.join("www");
        std::fs::create_dir_all(&root).unwrap();
        let server = TlsFileServer::start(&lab.join("nginx"), &root, &cert);
        home.write_config(&format!("{}{extra_config}", ca.distribution_config()));
        Lab { home, ca, server }
    }

    /// Put `bytes` at `/<name>`: its sha256.
    fn publish(&self, name: &str, bytes: &[u8]) -> String {
        std::fs::write(self.server.root.join(name), bytes).unwrap();
        sha256(bytes)
    }

    fn install(&self, args: &[&str]) -> crate::support::Run {
        let mut all = vec!["install"];
        all.extend_from_slice(args);
        self.home.run(&all)
    }
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every file and folder under the home with its content's digest: what
/// "the home is unchanged" compares.
fn listing(home: &Path) -> BTreeMap<PathBuf, String> {
    let mut all = BTreeMap::new();
    let mut stack = vec![home.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let rel = path.strip_prefix(home).unwrap().to_path_buf();
            if path.is_dir() {
                all.insert(rel, "folder".into());
                stack.push(path);
            } else {
                all.insert(rel, sha256(&std::fs::read(&path).unwrap_or_default()));
            }
        }
    }
    all
}

/// `run` failed with exit 2, its error names each of `reasons`, says
/// nothing was installed, and the home is as `before`.
#[track_caller]
fn refused(lab: &Lab, before: &BTreeMap<PathBuf, String>, args: &[&str], reasons: &[&str]) {
    let run = lab.install(args);
    run.expect_code(2);
    eprintln!("refused as expected: {}", run.stderr.trim());
    for reason in reasons {
        assert!(
            run.stderr.contains(reason),
            "the error should say {reason:?}: {}",
            run.stderr
        );
    }
    assert!(
        run.stderr.contains("nothing was installed") || run.stderr.contains("nothing was fetched"),
        "{}",
        run.stderr
    );
    assert_eq!(
        &listing(&lab.home.path()),
        before,
        "the home changed after `modhost install {}`",
        args.join(" ")
    );
}

/// `tar czf` of `echo-1.0/<name>` (a fixture, which names itself after
/// its file) and a knowledge file.
fn module_archive(dir: &Path, program: &Path, name: &str) -> Vec<u8> {
    let src = dir.join(format!("src-{name}"));
    std::fs::create_dir_all(src.join("echo-1.0/knowledge")).unwrap();
    std::fs::copy(program, src.join("echo-1.0").join(name)).unwrap();
    std::fs::write(src.join("echo-1.0/knowledge/intro.md"), "# arch\n").unwrap();
    let archive = dir.join(format!("{name}.tar.gz"));
    let status = Command::new("tar")
        .arg("czf")
        .arg(&archive)
        .arg("-C")
        .arg(&src)
        .arg("echo-1.0")
        .status()
        .expect("run tar");
    assert!(status.success(), "tar failed");
    std::fs::read(archive).unwrap()
}

fn pins(home: &Home) -> Value {
    serde_json::from_str(&std::fs::read_to_string(home.path().join("pins.json")).unwrap()).unwrap()
}

#[test]
fn a_binary_an_archive_with_knowledge_and_a_component_install_over_https_pinned_with_their_origin()
{
    let lab = Lab::new("");
    let home = &lab.home;

    // A bare native module; the id is the URL's file stem.
    let binary = std::fs::read(Fixture::Echo.path()).unwrap();
    let binary_sha = lab.publish("echomod", &binary);
    let url = lab.server.url("echomod");
    let run = lab.install(&[&url, "--sha256", &binary_sha]);
    run.expect_code(0);
    assert!(
        run.stdout
            .contains(&format!("fetched {url} (sha256 {binary_sha})")),
        "{}",
        run.stdout
    );
    home.invoke("echomod", "echomod.list_state", &json!({}), &[])
        .invoke_result();
    let pin = &pins(home)["modules"]["echomod"];
    assert_eq!(pin["provenance"]["source"], url.as_str(), "{pin:#}");
    assert_eq!(pin["provenance"]["sha256"], binary_sha.as_str(), "{pin:#}");
    // The pin names the URL, never the staging folder the bytes passed.
    assert_eq!(
        pin["source"],
        format!("{url} (sha256 {binary_sha})").as_str(),
        "{pin:#}"
    );
    // A re-pin (the operator approving again) keeps where they came from.
    home.run(&["pin", "echomod"]).expect_code(0);
    let repinned = &pins(home)["modules"]["echomod"];
    assert_eq!(repinned["provenance"], pin["provenance"], "{repinned:#}");

    // An archive with knowledge, reached through an https redirect (which
    // is followed), its sha256 written the way a publisher may print it.
    let archive = module_archive(&home.outside(), Fixture::Echo.path().as_ref(), "arch");
    let archive_sha = lab.publish("arch-1.0.tar.gz", &archive);
    let redirected = lab.server.url("to-https/arch-1.0.tar.gz");
    lab.install(&[
        &redirected,
        "--sha256",
        &format!("sha256:{}", archive_sha.to_uppercase()),
    ])
    .expect_code(0);
    assert!(home.modules().join("arch/knowledge/intro.md").is_file());
    home.invoke("arch", "arch.list_state", &json!({}), &[])
        .invoke_result();
    let pin = &pins(home)["modules"]["arch"];
    assert_eq!(pin["provenance"]["source"], redirected.as_str(), "{pin:#}");
    assert_eq!(pin["provenance"]["sha256"], archive_sha.as_str(), "{pin:#}");

    // A component.
    let component = std::fs::read(components().path("echo")).unwrap();
    let component_sha = lab.publish("echo.wasm", &component);
    lab.install(&[&lab.server.url("echo.wasm"), "--sha256", &component_sha])
        .expect_code(0);
    let pin = &pins(home)["modules"]["echo"];
    assert_eq!(
        pin["provenance"]["sha256"],
        component_sha.as_str(),
        "{pin:#}"
    );

    // `list --json` shows all three; staging is gone.
    let listed: Vec<String> = home
        .list()
        .iter()
        .filter_map(|m| m["id"].as_str().map(str::to_owned))
        .collect();
    for id in ["echomod", "arch", "echo"] {
        assert!(listed.iter().any(|l| l == id), "{listed:?}");
    }
    assert!(!home.path().join("staging").exists(), "staging left behind");
}

#[test]
fn plain_http_and_a_redirect_to_http_are_refused_before_any_byte_is_installed() {
    let lab = Lab::new("");
    let sha = lab.publish("echomod", &std::fs::read(Fixture::Echo.path()).unwrap());
    let before = listing(&lab.home.path());

    // The same file over plain http: refused before any connection.
    let plain = lab.server.plain_url("echomod");
    refused(
        &lab,
        &before,
        &[&plain, "--sha256", &sha],
        &["plain http is refused"],
    );
    // An https URL that redirects to it: the hop is refused.
    let hop = lab.server.url("to-http/echomod");
    refused(
        &lab,
        &before,
        &[&hop, "--sha256", &sha],
        &["redirect refused", "not https"],
    );
    // Other schemes are refused with what to write instead.
    refused(
        &lab,
        &before,
        &["ftp://127.0.0.1/echomod", "--sha256", &sha],
        &["ftp://", "https:// URL"],
    );
    assert!(
        !lab.server.access_log().contains("GET /echomod HTTP"),
        "the file was served:\n{}",
        lab.server.access_log()
    );
}

#[test]
fn an_https_source_without_its_sha256_or_with_another_installs_nothing() {
    let lab = Lab::new("");
    let sha = lab.publish("echomod", &std::fs::read(Fixture::Echo.path()).unwrap());
    let url = lab.server.url("echomod");
    let before = listing(&lab.home.path());

    refused(&lab, &before, &[&url], &["needs the sha256", "--sha256"]);
    let wrong = "0".repeat(64);
    refused(
        &lab,
        &before,
        &[&url, "--sha256", &wrong],
        &["sha256 mismatch", &wrong, &sha],
    );
    refused(
        &lab,
        &before,
        &[&url, "--sha256", "abc"],
        &["is not a sha256"],
    );
    // The missing sha256 was refused before anything was asked of the server.
    assert_eq!(
        lab.server.access_log().matches("GET /echomod").count(),
        1,
        "{}",
        lab.server.access_log()
    );
}

#[test]
fn a_server_whose_certificate_is_not_from_the_configured_ca_or_expired_is_refused() {
    let lab = Lab::new("");
    let bytes = std::fs::read(Fixture::Echo.path()).unwrap();
    let sha = lab.publish("echomod", &bytes);
    let before = listing(&lab.home.path());
    let dir = lab.home.outside().join("other");

    // Another CA, the one the home does not name.
    let other_ca = TestCa::new(&dir, "other-ca");
    let stranger = TlsFileServer::start(
        &dir.join("nginx-other"),
        &lab.server.root,
        &other_ca.server_cert(&dir, "stranger", false),
    );
    refused(
        &lab,
        &before,
        &[&stranger.url("echomod"), "--sha256", &sha],
        &["certificate is not trusted", "ca_certificates"],
    );
    // The home's own CA, but a certificate that expired yesterday.
    let expired = TlsFileServer::start(
        &dir.join("nginx-expired"),
        &lab.server.root,
        &lab.ca.server_cert(&dir, "expired", true),
    );
    refused(
        &lab,
        &before,
        &[&expired.url("echomod"), "--sha256", &sha],
        &["out of its validity period", "expired", "renew"],
    );
    // The same bytes from the trusted server install.
    lab.install(&[&lab.server.url("echomod"), "--sha256", &sha])
        .expect_code(0);
}

#[test]
fn oversized_endless_and_stalled_downloads_are_cut_with_the_limit_named() {
    // 1 MiB at most, stalls of 1 s, 4 s in all.
    let lab = Lab::new(
        "max_download_bytes = 1048576\ndownload_timeout_secs = 4\nstall_timeout_secs = 1\n",
    );
    let big = vec![7u8; 2 * 1024 * 1024];
    let big_sha = lab.publish("big", &big);
    let before = listing(&lab.home.path());
    let any_sha = "1".repeat(64);
    let dir = lab.home.outside().join("misbehaving");
    let cert = lab.ca.server_cert(&dir, "misbehaving", false);

    // nginx's true Content-Length above the cap: refused before the body.
    refused(
        &lab,
        &before,
        &[&lab.server.url("big"), "--sha256", &big_sha],
        &["announces 2097152 bytes", "max_download_bytes"],
    );
    // A lying Content-Length far above it.
    let liar = MisbehavingServer::start(&cert, Misbehaviour::Announce(1 << 40));
    refused(
        &lab,
        &before,
        &[&liar.url("liar"), "--sha256", &any_sha],
        &["announces 1099511627776 bytes"],
    );
    // No length, bytes without end: cut at the cap.
    let endless = MisbehavingServer::start(&cert, Misbehaviour::Endless);
    refused(
        &lab,
        &before,
        &[&endless.url("endless"), "--sha256", &any_sha],
        &["passed 1048576 bytes", "max_download_bytes"],
    );
    // Headers and a few bytes, then silence.
    let stalled = MisbehavingServer::start(&cert, Misbehaviour::Stall);
    refused(
        &lab,
        &before,
        &[&stalled.url("stalled"), "--sha256", &any_sha],
        &["no data for 1s", "stall_timeout_secs"],
    );
}

#[test]
fn an_endless_download_below_the_byte_cap_ends_at_the_total_time() {
    // 1 KiB/s from nginx's /slow/, stalls never longer than a second: the
    // whole-download limit (3 s) is what ends it.
    let lab = Lab::new("download_timeout_secs = 3\nstall_timeout_secs = 2\n");
    let sha = lab.publish("slowfile", &vec![1u8; 64 * 1024]);
    let before = listing(&lab.home.path());
    let started = std::time::Instant::now();
    refused(
        &lab,
        &before,
        &[&lab.server.url("slow/slowfile"), "--sha256", &sha],
        &["took longer than 3s", "download_timeout_secs"],
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

#[test]
fn an_archive_that_passes_its_digest_but_not_conformance_installs_nothing() {
    let lab = Lab::new("");
    // The contract fixture named `nonconformant…` gets everything the
    // conformance kit checks wrong.
    let archive = module_archive(
        &lab.home.outside(),
        Fixture::Contract.path().as_ref(),
        "nonconformant",
    );
    let sha = lab.publish("broken-1.0.tar.gz", &archive);
    let before = listing(&lab.home.path());
    let run = lab.install(&[&lab.server.url("broken-1.0.tar.gz"), "--sha256", &sha]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("nothing was installed") && run.stderr.contains("error"),
        "{}",
        run.stderr
    );
    assert!(!lab.home.modules().join("nonconformant").exists());
    assert_eq!(listing(&lab.home.path()), before, "the home changed");
}

#[test]
fn a_signature_url_is_fetched_over_https_with_the_same_trust_and_bounds() {
    let lab = Lab::new("");
    let sha = lab.publish("echomod", &std::fs::read(Fixture::Echo.path()).unwrap());
    let url = lab.server.url("echomod");
    lab.publish("echomod.sig", b"not a real signature");
    lab.publish("huge.sig", &vec![b'a'; 2 * 1024 * 1024]);
    let before = listing(&lab.home.path());

    // Over plain http: refused before it is asked for.
    let plain = lab.server.plain_url("echomod.sig");
    refused(
        &lab,
        &before,
        &[&url, "--sha256", &sha, "--signature", &plain],
        &["plain http is refused"],
    );
    // Missing on the server: the status is said.
    let missing = lab.server.url("missing.sig");
    refused(
        &lab,
        &before,
        &[&url, "--sha256", &sha, "--signature", &missing],
        &["answered 404"],
    );
    // Larger than any signature (1 MiB): refused by its length.
    let huge = lab.server.url("huge.sig");
    refused(
        &lab,
        &before,
        &[&url, "--sha256", &sha, "--signature", &huge],
        &["huge.sig is larger than 1048576 bytes", "not a signature"],
    );
    // Fetched and handed to the verifier, which (no signer configured)
    // refuses to pretend it checked it.
    let named = lab.server.url("echomod.sig");
    let run = lab.install(&[&url, "--sha256", &sha, "--signature", &named]);
    run.expect_code(2);
    assert!(run.stderr.contains("echomod.sig"), "{}", run.stderr);
    assert!(lab.server.access_log().contains("GET /echomod.sig "));
    assert_eq!(listing(&lab.home.path()), before, "the home changed");

    // A local file with --signature: refused, not silently unchecked.
    let local = lab.server.root.join("echomod");
    let local = local.to_string_lossy();
    refused(
        &lab,
        &before,
        &[&local, "--signature", "echomod.sig"],
        &["--signature is checked for an https:// or oci:// source"],
    );
}

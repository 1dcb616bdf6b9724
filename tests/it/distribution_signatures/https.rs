//! Signed modules over https (nginx with a test CA, `tls_lab.rs`).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::json;

use super::sigstore_lab::{self, KeyPair, Leaf, Sigstore};
use super::{Trust, home_files, provenance, refused};
use crate::support::{Fixture, Home};
use crate::tls_lab::{TestCa, TlsFileServer};

/// A home trusting the server's CA, with `[signatures]` from `policy`, and
/// the echo fixture published at `/echomod`.
struct Lab {
    home: Home,
    trust: Trust,
    server: TlsFileServer,
    module: Vec<u8>,
    sha: String,
}

impl Lab {
    fn new(policy: impl Fn(&Trust) -> String) -> Lab {
        let home = Home::new();
        let dir = home.outside().join("lab");
        let ca = TestCa::new(&dir, "ca");
        let www = dir.join("www");
        std::fs::create_dir_all(&www).unwrap();
        let server = TlsFileServer::start(
            &dir.join("nginx"),
            &www,
            &ca.server_cert(&dir, "server", false),
        );
        let trust = Trust::new(&home);
        home.write_config(&format!("{}{}", ca.distribution_config(), policy(&trust)));
        let module = std::fs::read(Fixture::Echo.path()).unwrap();
        std::fs::write(www.join("echomod"), &module).unwrap();
        let sha = sigstore_lab::sha256_digest(&module);
        Lab {
            home,
            trust,
            server,
            module,
            sha,
        }
    }

    fn url(&self) -> String {
        self.server.url("echomod")
    }

    fn hex(&self) -> &str {
        self.sha.trim_start_matches("sha256:")
    }

    /// Write `content` as a signature file beside the home; its path.
    fn signature_file(&self, name: &str, content: impl AsRef<[u8]>) -> String {
        let path = self.home.outside().join(name);
        std::fs::write(&path, content).unwrap();
        path.display().to_string()
    }

    fn install(&self, extra: &[&str]) -> crate::support::Run {
        let url = self.url();
        let mut args = vec!["install", url.as_str(), "--sha256", self.hex()];
        args.extend_from_slice(extra);
        self.home.run(&args)
    }
}

#[test]
fn a_cosign_key_signature_from_a_file_or_a_url_installs_and_the_pin_names_the_key() {
    let lab = Lab::new(|trust| trust.policy(true));
    let signature = sigstore_lab::blob_signature(&lab.trust.key, &lab.module);

    // From a local file.
    let file = lab.signature_file("echomod.sig", &signature);
    let run = lab.install(&["--signature", &file]);
    run.expect_code(0);
    let fingerprint = lab.trust.key.fingerprint();
    assert!(
        run.stdout.contains(&format!(
            "signed by {fingerprint} (key, covers {})",
            lab.sha
        )),
        "{}",
        run.stdout
    );
    assert_eq!(
        provenance(&lab.home, "echomod")["signature"],
        json!({"kind": "key", "signer": fingerprint, "digest": lab.sha}),
    );
    lab.home
        .invoke("echomod", "echomod.list_state", &json!({}), &[])
        .invoke_result();

    // From an https URL on the same server (the id given anew, --upgrade).
    std::fs::write(lab.server.root.join("echomod.sig"), &signature).unwrap();
    let url = lab.server.url("echomod.sig");
    lab.install(&["--signature", &url, "--upgrade"])
        .expect_code(0);
    assert_eq!(
        provenance(&lab.home, "echomod")["signature"]["signer"],
        fingerprint.as_str()
    );
}

#[test]
fn a_keyless_bundle_installs_and_the_pin_names_identity_issuer_and_digest() {
    let lab = Lab::new(|trust| trust.policy(true));
    let bundle = lab
        .trust
        .sigstore
        .blob_bundle(&lab.module, &Leaf::default());
    let file = lab.signature_file("echomod.sigstore.json", bundle.to_string());
    let run = lab.install(&["--signature", &file]);
    run.expect_code(0);
    assert!(
        run.stdout.contains(&format!(
            "signed by {} via {}",
            sigstore_lab::SUBJECT,
            sigstore_lab::ISSUER
        )),
        "{}",
        run.stdout
    );
    assert_eq!(
        provenance(&lab.home, "echomod")["signature"],
        json!({
            "kind": "keyless",
            "signer": sigstore_lab::SUBJECT,
            "issuer": sigstore_lab::ISSUER,
            "digest": lab.sha,
        }),
    );
}

#[test]
fn every_attack_on_the_signature_is_refused_with_its_reason_and_the_home_unchanged() {
    let lab = Lab::new(|trust| trust.policy(true));
    let before = home_files(&lab.home);
    let url = lab.url();
    let hex = lab.hex().to_string();
    let sigstore = &lab.trust.sigstore;
    let attack = |name: &str, content: String, reasons: &[&str]| {
        let file = lab.signature_file(name, content);
        refused(
            &lab.home,
            &before,
            &[&url, "--sha256", &hex, "--signature", &file],
            reasons,
        );
    };

    // Unsigned, while the policy requires a signature.
    refused(
        &lab.home,
        &before,
        &[&url, "--sha256", &hex],
        &["carries no signature", "--allow-unsigned"],
    );
    // Signed with a key the operator does not trust.
    attack(
        "wrong-key.sig",
        sigstore_lab::blob_signature(&KeyPair::generate(), &lab.module),
        &[
            "not made by a trusted signer",
            "does not verify with this key",
        ],
    );
    // Keyless, but another identity.
    let mallory = Leaf {
        subject: "https://github.com/mallory/modules/.github/workflows/release.yml@refs/tags/v1"
            .into(),
        ..Leaf::default()
    };
    attack(
        "wrong-identity.json",
        sigstore.blob_bundle(&lab.module, &mallory).to_string(),
        &["mallory", "does not match the pattern"],
    );
    // Keyless, another issuer.
    let issuer = Leaf {
        issuer: "https://accounts.evil.example".into(),
        ..Leaf::default()
    };
    attack(
        "wrong-issuer.json",
        sigstore.blob_bundle(&lab.module, &issuer).to_string(),
        &["issuer is \"https://accounts.evil.example\""],
    );
    // Keyless, from a Sigstore (CA and log) the trust root does not name.
    attack(
        "untrusted-ca.json",
        Sigstore::new()
            .blob_bundle(&lab.module, &Leaf::default())
            .to_string(),
        &["does not name"],
    );
    // Keyless, logged after the certificate expired.
    let late = Leaf {
        signed_at: sigstore_lab::AFTER_EXPIRY,
        ..Leaf::default()
    };
    attack(
        "expired.json",
        sigstore.blob_bundle(&lab.module, &late).to_string(),
        &[
            "not valid at the log's integration time",
            "2025-03-05T00:00:00Z",
        ],
    );
    // A genuine bundle for other bytes.
    attack(
        "other-digest.json",
        sigstore
            .blob_bundle(b"another module", &Leaf::default())
            .to_string(),
        &[
            &sigstore_lab::sha256_digest(b"another module"),
            &lab.sha,
            "made for other bytes",
        ],
    );
    // A genuine bundle with its signature altered.
    let mut tampered = sigstore.blob_bundle(&lab.module, &Leaf::default());
    let field = &mut tampered["messageSignature"]["signature"];
    let mut signature = BASE64.decode(field.as_str().unwrap()).unwrap();
    *signature.last_mut().unwrap() ^= 1;
    *field = BASE64.encode(&signature).into();
    attack(
        "tampered.json",
        tampered.to_string(),
        &["not made by a trusted signer"],
    );
    // Garbage.
    attack(
        "garbage.sig",
        "not a signature at all!".into(),
        &["cannot be read"],
    );
}

#[test]
fn allow_unsigned_lets_an_unsigned_module_in_and_the_pin_records_no_signer() {
    let lab = Lab::new(|trust| trust.policy(true));
    let run = lab.install(&["--allow-unsigned"]);
    run.expect_code(0);
    assert!(
        run.stdout
            .contains("no signature verified (--allow-unsigned)"),
        "{}",
        run.stdout
    );
    let provenance = provenance(&lab.home, "echomod");
    assert_eq!(provenance["sha256"], lab.hex(), "{provenance:#}");
    assert!(provenance.get("signature").is_none(), "{provenance:#}");
}

#[test]
fn a_bad_signature_is_refused_even_when_none_is_required_and_none_passes() {
    let lab = Lab::new(|trust| trust.policy(false));
    let before = home_files(&lab.home);
    let file = lab.signature_file(
        "wrong.sig",
        sigstore_lab::blob_signature(&KeyPair::generate(), &lab.module),
    );
    // `--allow-unsigned` does not turn a bad signature into none.
    refused(
        &lab.home,
        &before,
        &[
            &lab.url(),
            "--sha256",
            lab.hex(),
            "--signature",
            &file,
            "--allow-unsigned",
        ],
        &["not made by a trusted signer"],
    );
    // Unsigned under `require = false`: installed, recorded as unsigned.
    lab.install(&[]).expect_code(0);
    assert!(provenance(&lab.home, "echomod").get("signature").is_none());
}

#[test]
fn a_signature_with_no_trusted_signer_configured_is_refused() {
    let lab = Lab::new(|_| String::new());
    let before = home_files(&lab.home);
    let file = lab.signature_file(
        "echomod.sig",
        sigstore_lab::blob_signature(&lab.trust.key, &lab.module),
    );
    refused(
        &lab.home,
        &before,
        &[&lab.url(), "--sha256", lab.hex(), "--signature", &file],
        &["trusts no signer", "[[signatures.trusted]]"],
    );
}

#[test]
fn a_policy_that_cannot_be_used_stops_the_host_naming_the_entry() {
    let home = Home::new();
    for (config, reason) in [
        (
            "[signatures]\nrequire = true\n",
            "no [[signatures.trusted]] entry",
        ),
        (
            "[[signatures.trusted]]\npublic_key = \"/nonexistent/cosign.pub\"\n",
            "/nonexistent/cosign.pub",
        ),
        (
            "[[signatures.trusted]]\nissuer = \"https://i.example\"\nsubject = \"[\"\ntrust_root = \"/r.json\"\n",
            "not a valid regular expression",
        ),
        (
            "[[signatures.trusted]]\nissuer = \"https://i.example\"\n",
            "needs issuer, subject and trust_root",
        ),
    ] {
        home.write_config(config);
        let run = home.run(&["list"]);
        assert_ne!(run.code, 0, "{config}");
        assert!(run.stderr.contains(reason), "{config}: {}", run.stderr);
    }
}

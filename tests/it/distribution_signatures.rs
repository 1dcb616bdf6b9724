//! Signatures of remote modules checked against `[signatures]` in
//! `config.toml`, through `modhost install` against real servers on
//! loopback (nginx with a test CA, Debian's docker-registry), with a test
//! Sigstore of the test's own (`sigstore_lab.rs`: a Fulcio CA, a Rekor log
//! key, the `trusted_root.json`, cosign key pairs):
//!
//! - `https.rs`: `install https://… --signature FILE|URL` with a cosign
//!   key signature and a keyless bundle, each pinned with its signer and
//!   digest; the attacks (unsigned under `require`, the wrong key, the
//!   wrong identity, an untrusted CA, an expired certificate, a signature
//!   of other bytes, a tampered bundle) each refused with its reason and
//!   the home unchanged; `--allow-unsigned`; a policy checked at load.
//! - `oci.rs`: `install oci://…` with cosign's `sha256-<hex>.sig` manifest
//!   beside the image (key and keyless), and a signature manifest for
//!   another image refused.
//!
//! A real cosign-made bundle against the public-good trust root is verified
//! by the distribution crate's unit tests (`signature/tests.rs`).

mod https;
mod oci;
pub mod sigstore_lab;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::support::Home;
use sigstore_lab::{KeyPair, Sigstore};

/// The operator's trust material, written beside a home: a cosign public
/// key and a `trusted_root.json`.
pub struct Trust {
    pub key: KeyPair,
    pub sigstore: Sigstore,
    pub key_path: String,
    pub root_path: String,
}

impl Trust {
    pub fn new(home: &Home) -> Trust {
        let dir = home.outside().join("trust");
        std::fs::create_dir_all(&dir).unwrap();
        let (key, sigstore) = (KeyPair::generate(), Sigstore::new());
        let key_path = dir.join("cosign.pub");
        let root_path = dir.join("trusted_root.json");
        std::fs::write(&key_path, key.public_pem()).unwrap();
        std::fs::write(&root_path, sigstore.trusted_root()).unwrap();
        Trust {
            key,
            sigstore,
            key_path: key_path.display().to_string(),
            root_path: root_path.display().to_string(),
        }
    }

    /// `[signatures]` trusting the key and the lab's release identity.
    pub fn policy(&self, require: bool) -> String {
        format!(
            "[signatures]\nrequire = {require}\n\n\
             [[signatures.trusted]]\npublic_key = {:?}\n\n\
             [[signatures.trusted]]\nissuer = {:?}\nsubject = '{}'\ntrust_root = {:?}\n",
            self.key_path,
            sigstore_lab::ISSUER,
            r"https://github\.com/acme/modules/\.github/workflows/release\.yml@refs/tags/v.*",
            self.root_path
        )
    }
}

/// Every file under the home with its sha256: "the home is unchanged".
pub fn home_files(home: &Home) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            if path.is_dir() {
                out.insert(rel, "folder".into());
                walk(root, &path, out);
            } else {
                let bytes = std::fs::read(&path).unwrap_or_default();
                out.insert(rel, sigstore_lab::sha256_digest(&bytes));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&home.path(), &home.path(), &mut out);
    out
}

/// `modhost install ARGS` failed with exit 2 naming each of `reasons` and
/// "nothing was installed", and the home is as `before`.
#[track_caller]
pub fn refused(home: &Home, before: &BTreeMap<String, String>, args: &[&str], reasons: &[&str]) {
    let mut all = vec!["install"];
    all.extend_from_slice(args);
    let run = home.run(&all);
    run.expect_code(2);
    for reason in reasons {
        assert!(
            run.stderr.contains(reason),
            "`modhost install {}` should say {reason:?}: {}",
            args.join(" "),
            run.stderr
        );
    }
    assert!(
        run.stderr.contains("nothing was installed"),
        "{}",
        run.stderr
    );
    assert_eq!(
        &home_files(home),
        before,
        "the home changed after `modhost install {}`",
        args.join(" ")
    );
}

/// The pin's provenance of `id`.
pub fn provenance(home: &Home, id: &str) -> Value {
    let pins: Value =
        serde_json::from_str(&std::fs::read_to_string(home.path().join("pins.json")).unwrap())
            .unwrap();
    pins["modules"][id]["provenance"].clone()
}

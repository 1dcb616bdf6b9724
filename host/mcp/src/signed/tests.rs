//! Signed tokens under attack (edited, truncated, padded, oversized, for
//! another purpose, expired, from another key) and key files an operator
//! must not be allowed to use (readable by others, a link, not a file,
//! another user's, too short).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use super::*;

const HOUR: Duration = Duration::from_secs(3600);
const A_KEY: &str = "an-operator-key-of-forty-eight-bytes-0123456789ab";
const OTHER_KEY: &str = "another-operator-key-of-forty-eight-bytes-012345";

fn key_file(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

fn key(text: &str) -> SigningKey {
    let dir = tempfile::tempdir().unwrap();
    SigningKey::load(&key_file(dir.path(), "key", text, 0o600)).unwrap()
}

#[test]
fn a_sealed_payload_opens_for_its_purpose_only() {
    let k = key(A_KEY);
    let payload = json!({"tool": "t", "n": [1, 2]});
    let token = k.seal("requestState", &payload, HOUR).unwrap();
    assert!(
        token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)),
        "URL-safe: {token}"
    );
    assert_eq!(k.open("requestState", &token), Ok(payload.clone()));
    // The same key, another purpose: a session token is not a requestState.
    let session = k.seal("session", &payload, HOUR).unwrap();
    assert_eq!(
        k.open("requestState", &session),
        Err(SealError::WrongPurpose {
            expected: "requestState".into(),
            found: "session".into()
        })
    );
}

#[test]
fn a_token_of_another_key_is_forged() {
    let token = key(A_KEY).seal("p", &json!(1), HOUR).unwrap();
    assert_eq!(key(OTHER_KEY).open("p", &token), Err(SealError::Forged));
    let ephemeral = SigningKey::ephemeral().unwrap();
    assert!(ephemeral.is_ephemeral());
    assert_eq!(ephemeral.open("p", &token), Err(SealError::Forged));
    let other = SigningKey::ephemeral().unwrap();
    let token = ephemeral.seal("p", &json!(1), HOUR).unwrap();
    assert_eq!(other.open("p", &token), Err(SealError::Forged));
}

#[test]
fn every_one_byte_edit_truncation_or_padding_is_refused() {
    let k = key(A_KEY);
    let token = k.seal("p", &json!({"principal": "alice"}), HOUR).unwrap();
    for at in 0..token.len() {
        for replacement in [b'A', b'_', b'.', b'='] {
            let mut edited = token.clone().into_bytes();
            if edited[at] == replacement {
                continue;
            }
            edited[at] = replacement;
            let edited = String::from_utf8(edited).unwrap();
            assert!(k.open("p", &edited).is_err(), "edit at {at}: {edited}");
        }
    }
    for cut in 0..token.len() {
        assert!(k.open("p", &token[..cut]).is_err(), "cut at {cut}");
        assert!(k.open("p", &token[cut + 1..]).is_err(), "from {cut}");
    }
    for padded in [
        format!("{token}="),
        format!("{token}=="),
        format!("{token}A"),
        format!("{token}."),
        format!("{token} "),
        format!(" {token}"),
        token.replacen('.', "=.", 1),
        token.replacen('.', "..", 1),
    ] {
        assert!(k.open("p", &padded).is_err(), "{padded}");
    }
    assert_eq!(k.open("p", &token).unwrap()["principal"], "alice");
}

#[test]
fn the_payload_cannot_be_swapped_under_a_valid_tag() {
    let k = key(A_KEY);
    let mine = k.seal("p", &json!({"principal": "alice"}), HOUR).unwrap();
    let theirs = k.seal("p", &json!({"principal": "bob"}), HOUR).unwrap();
    let (body, _) = theirs.split_once('.').unwrap();
    let (_, tag) = mine.split_once('.').unwrap();
    assert_eq!(
        k.open("p", &format!("{body}.{tag}")),
        Err(SealError::Forged)
    );
    // A hand-made envelope with a longer expiry, tagged with garbage.
    let envelope = json!({"purpose": "p", "exp": u64::MAX, "data": {"principal": "alice"}});
    let body = URL_SAFE_NO_PAD.encode(envelope.to_string());
    let forged = format!("{body}.{}", URL_SAFE_NO_PAD.encode([0u8; 32]));
    assert_eq!(k.open("p", &forged), Err(SealError::Forged));
}

#[test]
fn an_oversized_token_is_refused_before_it_is_decoded() {
    let k = key(A_KEY);
    let huge = format!("{}.{}", "A".repeat(MAX_TOKEN_BYTES), "A".repeat(43));
    assert_eq!(
        k.open("p", &huge),
        Err(SealError::TooLarge { bytes: huge.len() })
    );
    // Sealing what no one could open is refused too.
    let big = json!("x".repeat(MAX_TOKEN_BYTES));
    assert!(matches!(
        k.seal("p", &big, HOUR),
        Err(SealError::TooLarge { .. })
    ));
}

#[test]
fn an_expired_token_is_refused() {
    let k = key(A_KEY);
    let token = k.seal("p", &json!(1), Duration::ZERO).unwrap();
    assert!(matches!(
        k.open("p", &token),
        Err(SealError::Expired { .. })
    ));
    let token = k.seal("p", &json!(1), Duration::from_millis(50)).unwrap();
    assert_eq!(k.open("p", &token), Ok(json!(1)));
    std::thread::sleep(Duration::from_millis(60));
    assert!(matches!(
        k.open("p", &token),
        Err(SealError::Expired { .. })
    ));
}

#[test]
fn the_first_key_seals_and_every_key_opens() {
    let old = key(OTHER_KEY);
    let rotated = key(&format!("# signing key first\n{A_KEY}\n\n{OTHER_KEY}\n"));
    let new_only = key(A_KEY);
    let sealed_by_old = old.seal("p", &json!("old"), HOUR).unwrap();
    assert_eq!(rotated.open("p", &sealed_by_old), Ok(json!("old")));
    let sealed_by_rotated = rotated.seal("p", &json!("new"), HOUR).unwrap();
    assert_eq!(new_only.open("p", &sealed_by_rotated), Ok(json!("new")));
    assert_eq!(old.open("p", &sealed_by_rotated), Err(SealError::Forged));
}

#[test]
fn debug_shows_no_key_material() {
    let k = key(A_KEY);
    let shown = format!("{k:?}");
    assert!(!shown.contains(&A_KEY[..8]), "{shown}");
    assert!(shown.contains("keys: 1"), "{shown}");
}

/// The problem `load` found in `path`; the message names the path and the fix.
fn refusal(path: &Path) -> KeyProblem {
    let e = SigningKey::load(path).unwrap_err();
    let text = e.to_string();
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains(&e.fix), "{text}");
    e.problem
}

#[test]
fn a_key_file_others_may_read_is_refused_with_the_chmod_even_for_root() {
    let dir = tempfile::tempdir().unwrap();
    for mode in [0o644, 0o640, 0o604, 0o660, 0o606, 0o620, 0o602, 0o610] {
        let path = key_file(dir.path(), "key", A_KEY, mode);
        assert_eq!(refusal(&path), KeyProblem::Mode { mode });
        let e = SigningKey::load(&path).unwrap_err();
        assert_eq!(e.fix, format!("run `chmod 600 {}`", path.display()));
    }
    for mode in [0o600, 0o400] {
        let path = key_file(dir.path(), "key", A_KEY, mode);
        assert!(SigningKey::load(&path).is_ok(), "{mode:o}");
    }
}

#[test]
fn a_link_a_folder_a_fifo_or_a_missing_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let target = key_file(dir.path(), "real", A_KEY, 0o600);
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    assert_eq!(refusal(&link), KeyProblem::Link);
    let folder = dir.path().join("folder");
    std::fs::create_dir(&folder).unwrap();
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(refusal(&folder), KeyProblem::NotAFile);
    // A fifo is refused at once, not waited on for a writer.
    let fifo = dir.path().join("fifo");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    assert_eq!(refusal(&fifo), KeyProblem::NotAFile);
    assert_eq!(refusal(&dir.path().join("absent")), KeyProblem::Missing);
}

#[test]
fn a_key_file_of_another_user_is_refused() {
    assert_eq!(
        rustix::process::geteuid().as_raw(),
        0,
        "this test gives the file to another user, which needs root (as CI runs)"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = key_file(dir.path(), "key", A_KEY, 0o600);
    std::os::unix::fs::chown(&path, Some(4321), None).unwrap();
    assert_eq!(
        refusal(&path),
        KeyProblem::Owner {
            owner: 4321,
            user: 0
        }
    );
}

#[test]
fn short_empty_binary_or_crowded_key_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let short = key_file(
        dir.path(),
        "short",
        &format!("{A_KEY}\n{}\n", &A_KEY[..31]),
        0o600,
    );
    assert_eq!(refusal(&short), KeyProblem::TooShort { line: 2, bytes: 31 });
    let empty = key_file(dir.path(), "empty", "# nothing yet\n\n", 0o600);
    assert_eq!(refusal(&empty), KeyProblem::NoKey);
    let binary = dir.path().join("binary");
    std::fs::write(&binary, [0xff_u8; 48]).unwrap();
    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(refusal(&binary), KeyProblem::NotText);
    let crowded = key_file(
        dir.path(),
        "crowded",
        &format!("{A_KEY}\n").repeat(MAX_KEYS + 1),
        0o600,
    );
    assert_eq!(
        refusal(&crowded),
        KeyProblem::TooManyKeys {
            count: MAX_KEYS + 1
        }
    );
}

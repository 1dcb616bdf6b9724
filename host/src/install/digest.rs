//! sha256 of what the operator is installing, checked against `--sha256`.
//!
//! The file is streamed, never read whole: an archive may be large. The
//! expected value is checked for shape first, so a typo (a blake3 digest, a
//! truncated paste) is reported as such rather than as a mismatch.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Why a digest could not be confirmed.
#[derive(Debug, thiserror::Error)]
pub enum DigestError {
    #[error("could not read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--sha256 {given:?} is not a sha256 digest (64 hexadecimal characters)")]
    Malformed { given: String },
    #[error(
        "{path}: sha256 mismatch: expected {expected}, the file has {actual}; nothing was installed"
    )]
    Mismatch {
        path: PathBuf,
        expected: String,
        actual: String,
    },
}

/// The sha256 of the file at `path`, lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String, DigestError> {
    let read_error = |source| DigestError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(read_error)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buffer).map_err(read_error)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Check that the file at `path` has sha256 `expected_hex` (any case,
/// surrounding whitespace ignored); returns the digest.
pub fn verify_sha256(path: &Path, expected_hex: &str) -> Result<String, DigestError> {
    let expected = expected_hex.trim().to_ascii_lowercase();
    if expected.len() != 64 || !expected.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(DigestError::Malformed {
            given: expected_hex.to_owned(),
        });
    }
    let actual = sha256_file(path)?;
    if actual != expected {
        return Err(DigestError::Mismatch {
            path: path.to_path_buf(),
            expected,
            actual,
        });
    }
    Ok(actual)
}

#[cfg(test)]
mod tests {
    use super::*;

    // sha256("abc"), from FIPS 180-2.
    const ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    #[test]
    fn matching_digest_passes_in_any_case() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "abc").unwrap();
        assert_eq!(sha256_file(&file).unwrap(), ABC);
        assert_eq!(
            verify_sha256(&file, &format!(" {} ", ABC.to_uppercase())).unwrap(),
            ABC
        );
    }

    #[test]
    fn mismatch_names_both_digests_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "abd").unwrap();
        let err = verify_sha256(&file, ABC).unwrap_err().to_string();
        assert!(
            err.contains(ABC) && err.contains("mismatch") && err.contains("/f"),
            "{err}"
        );
    }

    #[test]
    fn malformed_expected_is_not_a_mismatch() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "abc").unwrap();
        let err = verify_sha256(&file, "abc123").unwrap_err();
        assert!(matches!(err, DigestError::Malformed { .. }), "{err}");
    }
}

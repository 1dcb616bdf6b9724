//! sha256 of what the operator is installing, checked against `--sha256`.
//!
//! The file is streamed, never read whole: an archive may be large, and it
//! is hashed as it is copied into the host's staging folder, in one read,
//! so the bytes checked are the bytes installed. The
//! expected value is checked for shape first, so a typo (a blake3 digest, a
//! truncated paste) is reported as such rather than as a mismatch.

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Why a digest could not be confirmed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DigestError {
    #[error("could not read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("could not write {path}: {source}")]
    Write {
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

/// Copy the file at `source` into `into` (created; it must not exist),
/// reading it once, and return the sha256 of exactly the bytes copied;
/// with `expected` (any case, surrounding whitespace ignored), refused
/// unless they have it. Everything after this reads the copy, never
/// `source` again: a file swapped at that path once its bytes were
/// checked (by a module writing the folder it lies in) is never what gets
/// installed.
pub(crate) fn receive(
    source: &Path,
    into: &Path,
    expected: Option<&str>,
) -> Result<String, DigestError> {
    let expected = expected.map(expected_sha256).transpose()?;
    let read_error = |source_error| DigestError::Read {
        path: source.to_path_buf(),
        source: source_error,
    };
    let write_error = |source_error| DigestError::Write {
        path: into.to_path_buf(),
        source: source_error,
    };
    // Without blocking: a FIFO swapped in for the file after the caller
    // looked would hold the open until someone writes it. Only a regular
    // file is read (`O_NONBLOCK` does not change its reads).
    let mut file = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(source)
        .map_err(read_error)?;
    if !file.metadata().map_err(read_error)?.is_file() {
        return Err(read_error(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file (it changed since it was looked at)",
        )));
    }
    let mut copy = std::fs::File::options()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(into)
        .map_err(write_error)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buffer).map_err(read_error)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        copy.write_all(&buffer[..n]).map_err(write_error)?;
    }
    let actual: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    match expected {
        Some(expected) if expected != actual => Err(DigestError::Mismatch {
            path: source.to_path_buf(),
            expected,
            actual,
        }),
        _ => Ok(actual),
    }
}

/// `given` as a lowercase sha256, or why it is none.
fn expected_sha256(given: &str) -> Result<String, DigestError> {
    let expected = given.trim().to_ascii_lowercase();
    if expected.len() != 64 || !expected.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(DigestError::Malformed {
            given: given.to_owned(),
        });
    }
    Ok(expected)
}

#[cfg(test)]
mod tests {
    use super::*;

    // sha256("abc"), from FIPS 180-2.
    const ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    /// `f` holding `text`, received into `copy` (its own folder each time).
    fn received(text: &str, expected: Option<&str>) -> (Result<String, DigestError>, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, text).unwrap();
        let copy = dir.path().join("copy");
        let result = receive(&file, &copy, expected);
        (result, std::fs::read(&copy).unwrap_or_default())
    }

    #[test]
    fn matching_digest_passes_in_any_case_and_the_copy_holds_the_bytes() {
        assert_eq!(received("abc", None).0.unwrap(), ABC);
        let (digest, copy) = received("abc", Some(&format!(" {} ", ABC.to_uppercase())));
        assert_eq!(digest.unwrap(), ABC);
        assert_eq!(copy, b"abc");
    }

    /// A FIFO swapped in for the file (nobody writes it) is refused at
    /// once, not waited on.
    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("f");
        modhost_test_support::modules::make_fifo(&fifo, 0o600);
        let copy = dir.path().join("copy");
        let (done, result) = std::sync::mpsc::channel();
        std::thread::spawn(move || done.send(receive(&fifo, &copy, None).map(|_| ())));
        let result = result
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("receive waited on the FIFO");
        let err = result.unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
    }

    #[test]
    fn mismatch_names_both_digests_and_the_file() {
        let err = received("abd", Some(ABC)).0.unwrap_err().to_string();
        assert!(
            err.contains(ABC) && err.contains("mismatch") && err.contains("/f"),
            "{err}"
        );
    }

    #[test]
    fn malformed_expected_is_not_a_mismatch_and_nothing_is_read() {
        let (err, copy) = received("abc", Some("abc123"));
        assert!(matches!(err, Err(DigestError::Malformed { .. })), "{err:?}");
        assert!(copy.is_empty());
    }
}

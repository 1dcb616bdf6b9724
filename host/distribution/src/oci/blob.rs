//! One blob streamed from the registry, its digest checked on the way.
//!
//! Design decisions:
//! - **The manifest's descriptor is the contract.** A blob larger than the
//!   byte limit is refused before a byte is read (its declared size), and
//!   while reading: more bytes than declared, or fewer, is an error. Its
//!   sha256 is computed over exactly the bytes written, and a blob whose
//!   digest differs from the descriptor's is refused and removed.
//! - **Time is bounded twice:** each wait for the next bytes by the stall
//!   limit, the whole fetch by its deadline (shared by every step).
//! - **Written to `.<name>.partial` and renamed** when complete and checked,
//!   so the final name only ever holds verified bytes; on any error the
//!   partial file is removed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use super::error::{OciError, error_chain};
use super::layout::Descriptor;
use super::reference::{OciReference, is_sha256_digest};
use crate::limits::{FetchLimits, Progress};

/// The time budget of a fetch.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    pub end: Instant,
    pub total: Duration,
    pub stall: Duration,
}

impl Deadline {
    pub fn starting_now(limits: &FetchLimits) -> Deadline {
        Deadline {
            end: Instant::now() + limits.total,
            total: limits.total,
            stall: limits.stall,
        }
    }

    /// Run `step` within what is left of the whole fetch.
    pub async fn bound<T>(
        &self,
        what: &str,
        step: impl Future<Output = Result<T, OciError>>,
    ) -> Result<T, OciError> {
        match tokio::time::timeout_at(self.end, step).await {
            Ok(result) => result,
            Err(_) => Err(OciError::TimedOut {
                what: what.to_string(),
                limit: self.total,
            }),
        }
    }
}

/// Where a blob goes.
#[derive(Debug)]
pub enum Sink<'a> {
    /// A file at this path (written as `.<name>.partial` first).
    File(&'a Path),
    /// Memory (signature material: small).
    Memory(&'a mut Vec<u8>),
}

/// Removes the partial file unless the download completed.
struct PartialFile {
    path: PathBuf,
    keep: bool,
}

impl Drop for PartialFile {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Calls `Progress::finish` however the download ends.
struct Finish<'a>(&'a dyn Progress);

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        self.0.finish();
    }
}

/// Stream the blob `descriptor` names into `sink`, at most `max_bytes`;
/// returns its sha256 (hex) and size.
pub async fn fetch(
    client: &super::registry::RegistryClient,
    reference: &OciReference,
    descriptor: &Descriptor,
    max_bytes: u64,
    deadline: &Deadline,
    sink: Sink<'_>,
    progress: &dyn Progress,
) -> Result<(String, u64), OciError> {
    let what = format!("{} blob {}", reference.repository, descriptor.digest);
    if !is_sha256_digest(&descriptor.digest) {
        return Err(OciError::UnsupportedManifest {
            reference: reference.to_string(),
            reason: format!(
                "its blob digest `{}` is not a sha256 digest",
                descriptor.digest
            ),
        });
    }
    let declared = u64::try_from(descriptor.size).map_err(|_| OciError::UnsupportedManifest {
        reference: reference.to_string(),
        reason: format!("the blob {} declares a negative size", descriptor.digest),
    })?;
    if declared > max_bytes {
        return Err(OciError::TooLarge {
            what: format!("{what} ({declared} bytes declared)"),
            limit: max_bytes,
        });
    }

    let mut response = deadline
        .bound(
            &what,
            super::registry::blob(client, reference, &descriptor.digest),
        )
        .await?;
    if let Some(length) = response.content_length()
        && length > max_bytes
    {
        return Err(OciError::TooLarge {
            what: format!("{what} ({length} bytes announced)"),
            limit: max_bytes,
        });
    }

    progress.start(&what, Some(declared));
    let _finish = Finish(progress);
    let (mut file, partial, mut memory) = match sink {
        Sink::File(path) => {
            let name = path
                .file_name()
                .map_or_else(|| "blob".to_string(), |n| n.to_string_lossy().into_owned());
            let partial_path = path.with_file_name(format!(".{name}.partial"));
            let file = tokio::fs::File::create_new(&partial_path)
                .await
                .map_err(|source| OciError::Io {
                    path: partial_path.clone(),
                    source,
                })?;
            let guard = PartialFile {
                path: partial_path,
                keep: false,
            };
            (Some(file), Some((guard, path)), None)
        }
        Sink::Memory(buffer) => (None, None, Some(buffer)),
    };

    let mut hasher = Sha256::new();
    let mut received: u64 = 0;
    loop {
        let wait = deadline
            .stall
            .min(deadline.end.saturating_duration_since(Instant::now()));
        let next = match tokio::time::timeout(wait, response.chunk()).await {
            Ok(next) => next,
            Err(_) if Instant::now() >= deadline.end => {
                return Err(OciError::TimedOut {
                    what,
                    limit: deadline.total,
                });
            }
            Err(_) => {
                return Err(OciError::Stalled {
                    what,
                    limit: deadline.stall,
                });
            }
        };
        let chunk = match next {
            Ok(None) => break,
            Ok(Some(chunk)) => chunk,
            Err(e) if e.is_timeout() => {
                return Err(OciError::Stalled {
                    what,
                    limit: deadline.stall,
                });
            }
            Err(e) => {
                return Err(OciError::Transfer {
                    what,
                    reason: error_chain(&e),
                });
            }
        };
        received += chunk.len() as u64;
        if received > declared {
            return Err(OciError::Oversent { what, declared });
        }
        hasher.update(&chunk);
        if let Some(file) = file.as_mut() {
            file.write_all(&chunk)
                .await
                .map_err(|source| OciError::Io {
                    path: partial
                        .as_ref()
                        .map(|(g, _)| g.path.clone())
                        .unwrap_or_default(),
                    source,
                })?;
        }
        if let Some(memory) = memory.as_mut() {
            memory.extend_from_slice(&chunk);
        }
        progress.advance(chunk.len() as u64);
    }
    let actual = format!("{:x}", hasher.finalize());
    if format!("sha256:{actual}") != descriptor.digest {
        return Err(OciError::BlobDigestMismatch {
            reference: reference.to_string(),
            expected: descriptor.digest.clone(),
            actual: format!("sha256:{actual}"),
        });
    }
    if received != declared {
        return Err(OciError::Transfer {
            what,
            reason: format!(
                "it ended after {received} of the {declared} bytes its manifest declares"
            ),
        });
    }
    if let (Some(mut file), Some((mut guard, path))) = (file, partial) {
        let io = |source| OciError::Io {
            path: guard.path.clone(),
            source,
        };
        file.flush().await.map_err(io)?;
        file.sync_all().await.map_err(io)?;
        drop(file);
        tokio::fs::rename(&guard.path, path)
            .await
            .map_err(|source| OciError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        guard.keep = true;
    }
    Ok((actual, received))
}

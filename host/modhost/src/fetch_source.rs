//! Fetching a remote source into the home's staging area, checked:
//! `Host::fetch_source`: `https://` through [`modhost_distribution::https`],
//! `oci://` through `oci`, then the signature policy through `verify`.
//!
//! The install and sync paths call this first and then install the local
//! file it returns exactly as a local install (archive safety, conformance,
//! pinning), with [`FetchedSource::provenance`] recorded in the pin.
//!
//! Design decisions:
//! - **One folder per fetch** (`staging/fetch-<id>/`), removed on every
//!   error and when the [`FetchedSource`] is dropped, so parallel fetches
//!   never see each other's files and a failed one leaves nothing.
//! - **An https source needs its sha256.** TLS says who served the bytes,
//!   not that they are the ones the operator approved; the digest does,
//!   and it is refused before anything is fetched when missing. For OCI
//!   the manifest digest is the check.
//! - **One client and one set of bounds** (`[distribution]`) for the
//!   artifact and a `--signature` URL alike; a signature is at most
//!   `MAX_SIGNATURE_BYTES`.

mod live;
mod oci;
mod request;
mod verify;

use std::path::{Path, PathBuf};

use modhost_distribution::signature::Material;
use modhost_distribution::{DistributionError, FetchLimits, Source, https, trust};
/// What a fetch reports its progress to (the CLI's bar), and "nothing".
pub use modhost_distribution::{NoProgress, Progress};
pub use request::FetchRequest;

use crate::host::{Host, HostError};
use crate::pins::PinProvenance;

/// A fetched, checked file in a staging folder of its own, removed when
/// this is dropped.
#[derive(Debug)]
pub struct FetchedSource {
    /// The file (its name keeps the source's extension).
    pub file: PathBuf,
    /// Where it came from, its sha256, the verified signature.
    pub provenance: PinProvenance,
    /// The staging folder holding `file`.
    folder: PathBuf,
    /// Held while the folder is in use ([`live`]).
    _live: Option<live::LiveMark>,
}

impl FetchedSource {
    /// The staging folder holding the file.
    pub fn folder(&self) -> &Path {
        &self.folder
    }
}

impl Drop for FetchedSource {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.folder);
        // `staging/` itself goes too once nothing else uses it (removing a
        // folder that is not empty fails, and then it stays).
        if let Some(root) = self.folder.parent() {
            let _ = std::fs::remove_dir(root);
        }
    }
}

impl Host {
    /// Fetch `request.source` into a staging folder of its own under the
    /// home's staging area, check its digest and the signature policy, and
    /// return the file. On any error the folder is gone and the home is as
    /// it was.
    pub async fn fetch_source(
        &self,
        request: &FetchRequest,
        progress: &dyn Progress,
    ) -> Result<FetchedSource, HostError> {
        let source = Source::parse(&request.source).map_err(DistributionError::from)?;
        if let Source::Local(path) = &source {
            return Err(HostError::Refused(format!(
                "{} is a local path: install it directly (fetching is for https:// and oci:// sources)",
                path.display()
            )));
        }
        if let (Source::Https(url), None) = (&source, &request.sha256) {
            return Err(HostError::Refused(format!(
                "{url}: an https source needs the sha256 its publisher gives: add --sha256 HEX (for a lockfile, sha256 = \"HEX\"); nothing was fetched"
            )));
        }
        let staging = Staging::create(&self.layout().staging_dir())?;
        let (fetched, materials) = match &source {
            Source::Https(url) => {
                let downloads = Downloads::new(self)?;
                let fetched = https::fetch(
                    &downloads.client,
                    url,
                    &staging.folder,
                    request.sha256.as_deref(),
                    &downloads.limits,
                    progress,
                )
                .await
                .map_err(DistributionError::from)?;
                let mut materials = Vec::new();
                if let Some(signature) = &request.signature {
                    materials.push(downloads.signature(signature).await?);
                }
                (fetched, materials)
            }
            Source::Oci(_) => {
                let (fetched, mut materials) =
                    oci::fetch(self, request, &staging.folder, progress).await?;
                if let Some(signature) = &request.signature {
                    materials.push(Downloads::new(self)?.signature(signature).await?);
                }
                (fetched, materials)
            }
            Source::Local(_) => unreachable!("refused above"),
        };
        let digest = fetched
            .origin
            .oci_digest
            .clone()
            .unwrap_or_else(|| format!("sha256:{}", fetched.sha256));
        let signature = verify::check(
            &self.config().signatures,
            &digest,
            &materials,
            request.allow_unsigned,
        )?;
        Ok(FetchedSource {
            file: fetched.path,
            provenance: PinProvenance {
                origin: fetched.origin,
                sha256: fetched.sha256,
                signature,
                // Where the signature came from, for `lock` to write back.
                signature_source: request.signature.clone(),
            },
            folder: staging.folder.clone(),
            _live: staging.keep(),
        })
    }
}

/// The largest signature or bundle read (a Sigstore bundle is a few KiB).
const MAX_SIGNATURE_BYTES: u64 = 1024 * 1024;

/// The https client and bounds of one fetch, from `[distribution]`.
struct Downloads {
    client: trust::HttpsClient,
    limits: FetchLimits,
}

impl Downloads {
    fn new(host: &Host) -> Result<Downloads, HostError> {
        let distribution = &host.config().distribution;
        let roots = trust::load_ca_certificates(&distribution.ca_certificates)
            .map_err(DistributionError::from)?;
        let limits = distribution.limits();
        let client = trust::https_client(&roots, limits.stall).map_err(DistributionError::from)?;
        Ok(Downloads { client, limits })
    }

    /// The operator's `--signature`: a local file or an https URL (fetched
    /// with the same client and bounds, at most [`MAX_SIGNATURE_BYTES`]).
    async fn signature(&self, named: &str) -> Result<Material, HostError> {
        let too_large = || {
            HostError::Refused(format!(
                "the signature {named} is larger than {MAX_SIGNATURE_BYTES} bytes: not a signature or Sigstore bundle"
            ))
        };
        let bytes = match Source::parse(named).map_err(DistributionError::from)? {
            Source::Local(path) => {
                let size = std::fs::metadata(&path)
                    .map_err(|e| HostError::io("read the signature", &path, e))?
                    .len();
                if size > MAX_SIGNATURE_BYTES {
                    return Err(too_large());
                }
                std::fs::read(&path).map_err(|e| HostError::io("read the signature", &path, e))?
            }
            Source::Https(url) => {
                let limits = FetchLimits {
                    max_bytes: MAX_SIGNATURE_BYTES.min(self.limits.max_bytes),
                    ..self.limits
                };
                match https::fetch_bytes(&self.client, &url, &limits, &NoProgress).await {
                    Ok(bytes) => bytes,
                    Err(
                        https::HttpsError::TooLarge { .. }
                        | https::HttpsError::TooLargeAnnounced { .. },
                    ) => return Err(too_large()),
                    Err(e) => return Err(DistributionError::from(e).into()),
                }
            }
            Source::Oci(_) => {
                return Err(HostError::Refused(format!(
                    "--signature {named}: a signature is a local file or an https:// URL; an OCI artifact's signatures are found in its registry"
                )));
            }
        };
        Ok(Material::Named {
            bytes,
            from: named.to_owned(),
        })
    }
}

/// One fetch's folder under `staging/`, removed (with `staging/` when it is
/// then empty) unless kept; marked in use while it exists ([`live`]).
struct Staging {
    folder: PathBuf,
    root: PathBuf,
    live: Option<live::LiveMark>,
    keep: bool,
}

impl Staging {
    fn create(root: &Path) -> Result<Staging, HostError> {
        // What killed runs left (a partial download each) goes first.
        live::sweep_abandoned(root);
        let folder = root.join(format!(
            "{}{}",
            live::PREFIX,
            crate::request::new_request_id()
        ));
        // A parallel install removes `staging/` when it is empty, so it can
        // vanish between its creation and this folder's: then try again.
        let mut created = std::fs::create_dir_all(&folder);
        for _ in 0..8 {
            match &created {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    created = std::fs::create_dir_all(&folder);
                }
                _ => break,
            }
        }
        created.map_err(|e| HostError::io("create", &folder, e))?;
        let mut staging = Staging {
            folder,
            root: root.to_path_buf(),
            live: None,
            keep: false,
        };
        staging.live = Some(
            live::LiveMark::take(&staging.folder)
                .map_err(|e| HostError::io("mark in use", &staging.folder, e))?,
        );
        Ok(staging)
    }

    /// Hand the folder over (to a [`FetchedSource`], which removes it),
    /// with the mark that says it is in use.
    fn keep(mut self) -> Option<live::LiveMark> {
        self.keep = true;
        self.live.take()
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.folder);
            let _ = std::fs::remove_dir(&self.root);
        }
    }
}

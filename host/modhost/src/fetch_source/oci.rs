//! The `oci://` branch of [`Host::fetch_source`]: a pull through
//! [`modhost_distribution::oci`] with the home's `[distribution]` settings
//! (the operator's CA files, the fetch limits) into the staging folder.
//!
//! The file it returns is named so install recognises it: `<name>.wasm`
//! for a component, `<name>.tar.gz` for a module archive (`<name>` the
//! repository's last component, which is also the default module id). The
//! resolved manifest digest travels in `Fetched::origin` (pinned) and the
//! registry's signature material goes to the verifier.

use std::path::Path;

use modhost_distribution::oci::{self, OciSettings};
use modhost_distribution::signature::Material;
use modhost_distribution::{DistributionError, Fetched, Progress};

use super::request::FetchRequest;
use crate::host::{Host, HostError};

/// Pull `request.source` into `into`; also the signature material the
/// registry holds for the resolved manifest.
pub(super) async fn fetch(
    host: &Host,
    request: &FetchRequest,
    into: &Path,
    progress: &dyn Progress,
) -> Result<(Fetched, Vec<Material>), HostError> {
    let settings = settings(host)?;
    let pulled = oci::pull(&request.source, &settings, into, progress)
        .await
        .map_err(DistributionError::from)?;
    // The reference's digest is the check for OCI. A `sha256` beside it (a
    // lockfile may carry the fetched file's) must match the layer's bytes.
    if let Some(expected) = &request.sha256
        && !expected.eq_ignore_ascii_case(&pulled.fetched.sha256)
    {
        let _ = std::fs::remove_file(&pulled.fetched.path);
        return Err(HostError::Refused(format!(
            "{}: the fetched layer has sha256 {}, not {expected}; for oci:// the manifest digest in the reference (@sha256:…) is the usual check",
            request.source, pulled.fetched.sha256
        )));
    }
    Ok((pulled.fetched, pulled.materials))
}

/// The pull's settings from `[distribution]`: its limits, and its CA files
/// read with the loader the https client uses (the same trust).
fn settings(host: &Host) -> Result<OciSettings, HostError> {
    let distribution = &host.config().distribution;
    let roots = modhost_distribution::trust::load_ca_certificates(&distribution.ca_certificates)
        .map_err(DistributionError::from)?;
    Ok(OciSettings::new(distribution.limits(), roots))
}

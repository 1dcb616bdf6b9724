//! [`Host::install_with_origin`]: install a folder the caller assembled, the
//! pin naming where its bytes really came from.
//!
//! `modhost install --bundled` puts a bundled module's executable and its
//! knowledge files together in a temporary folder and installs that through
//! the ordinary path (every check, the pin); the pin then records the
//! module's origin (`bundled files: /…/target/debug/files`) rather than a
//! temporary folder that is gone once the install returns.

use crate::host::{Host, HostError};
use crate::manage::{InstallReport, InstallRequest};
use crate::pins::PinProvenance;

impl Host {
    /// [`Host::install`], the pin recording `origin` as where the bytes came
    /// from instead of `request.source`.
    pub async fn install_with_origin(
        &self,
        request: InstallRequest,
        origin: String,
    ) -> Result<InstallReport, HostError> {
        self.install_from(request, Some(origin)).await
    }
}

/// Where a bundle's bytes came from, for the pin.
#[derive(Debug, Clone, Default)]
pub(crate) struct Recorded {
    /// The pin's `source` text, instead of the folder installed.
    pub(crate) origin: Option<String>,
    pub(crate) provenance: Option<PinProvenance>,
}

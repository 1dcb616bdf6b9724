//! A filesystem grant as a transport enforces it. Confinement is built
//! from it, so it sits below both the transports and `confine`.

use std::path::PathBuf;

use modproto::Access;

/// A filesystem grant as the transport must enforce it: the host path, the
/// path the module will see it at, and the access.
///
/// Native modules see host paths (`guest == host`); components see
/// `/roots/<name>`. Confinement (landlock for native, preopens for wasm) is
/// built from this list and nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Grant {
    pub name: String,
    pub host: PathBuf,
    pub guest: String,
    pub access: Access,
}

//! The signature step of [`Host::fetch_source`](crate::host::Host):
//! material found with a module checked against `[signatures]`.
//!
//! - No material: refused when the policy requires a signature, unless the
//!   install says `--allow-unsigned`; otherwise `None` (the pin records an
//!   unsigned module).
//! - Material the operator named (`--signature`): verified, or refused;
//!   with no trusted signer configured it is refused too (the operator asked
//!   for a check that cannot be made).
//! - Material the registry holds (cosign signatures, bundles): one that a
//!   trusted signer accepts suffices, as with `cosign verify`; if none is
//!   accepted the module is refused with each one's reason. With no
//!   trusted signer configured and nothing required, registry signatures
//!   are not checked (most public images are signed, by someone), and the
//!   pin says unsigned.

use modhost_distribution::DistributionError;
use modhost_distribution::signature::{self, Material, SignatureError, Verified};

use crate::host::HostError;
use crate::signature_policy::SignaturePolicyConfig;

/// Check `materials` for the artifact with digest `digest` (`sha256:…`)
/// against the operator's policy. `Ok(None)`: nothing was verified and the
/// policy (or `allow_unsigned`) lets that through.
pub(super) fn check(
    policy: &SignaturePolicyConfig,
    digest: &str,
    materials: &[Material],
    allow_unsigned: bool,
) -> Result<Option<Verified>, HostError> {
    Ok(decide(policy, digest, materials, allow_unsigned)?)
}

fn decide(
    policy: &SignaturePolicyConfig,
    digest: &str,
    materials: &[Material],
    allow_unsigned: bool,
) -> Result<Option<Verified>, DistributionError> {
    let signers = policy.signers()?;
    let named = materials
        .iter()
        .find(|m| matches!(m, Material::Named { .. }));
    if let (true, Some(named)) = (signers.is_empty(), named) {
        return Err(SignatureError::NoTrustedSigner {
            from: named.describe(),
        }
        .into());
    }
    if materials.is_empty() || signers.is_empty() {
        if policy.require && !allow_unsigned {
            return Err(SignatureError::Unsigned {
                digest: digest.to_string(),
            }
            .into());
        }
        if !materials.is_empty() {
            tracing::warn!(
                "the registry holds {} signature(s) for {digest}; none was checked: \
                 config.toml trusts no signer ([[signatures.trusted]])",
                materials.len()
            );
        }
        return Ok(None);
    }
    let mut errors = Vec::new();
    for material in materials {
        match signature::verify(material, digest, &signers) {
            Ok(verified) => return Ok(Some(verified)),
            Err(error) => errors.push(error),
        }
    }
    if errors.len() == 1 {
        return Err(errors.remove(0).into());
    }
    Err(SignatureError::Untrusted {
        from: format!("{} signatures", errors.len()),
        reasons: errors.iter().map(ToString::to_string).collect(),
    }
    .into())
}

//! What the invoke pipeline learns about a call on its way, for the call's
//! audit record and trace span: the contract it ran under, the request id,
//! the grants, and the span its module process (or instance) hangs under.
//!
//! The pipeline (`crate::invoke`) fills it in as it decides each fact; it
//! never reads it back, so a fact left unset (a call refused before it got
//! that far) is only missing from the record.

use modhost_egress::{CallGrant, HostGrant};

use super::record::{CallGrants, GrantedNetwork, GrantedPath};
use crate::grants::GrantPlan;
use crate::telemetry::{CallTrace, ChildSpan};

/// Facts of one call, as far as the pipeline got.
#[derive(Debug, Default)]
pub(crate) struct CallFacts {
    /// Whether the call is recorded (`[audit] enabled`): without, the
    /// grants are not copied.
    pub recording: bool,
    pub contract_version: Option<String>,
    pub request_id: Option<String>,
    pub grants: Option<CallGrants>,
    /// The call's span (a no-op without telemetry).
    pub trace: CallTrace,
}

impl CallFacts {
    /// The call was granted `plan`'s roots and binaries, and `network`.
    pub(crate) fn granted(&mut self, plan: &GrantPlan, network: Option<&CallGrant>) {
        self.granted_parts(&plan.roots, &plan.binaries, network);
    }

    /// The call gets `roots`, `binaries` and `network`: a plan's, or the
    /// union a `session` process it ran on holds (`crate::session_server`).
    pub(crate) fn granted_parts(
        &mut self,
        roots: &[modhost_runner::Grant],
        binaries: &std::collections::BTreeMap<String, std::path::PathBuf>,
        network: Option<&CallGrant>,
    ) {
        if !self.recording {
            return;
        }
        let roots = roots
            .iter()
            .map(|grant| {
                let path = GrantedPath {
                    path: grant.host.display().to_string(),
                    access: grant.access,
                };
                (grant.name.clone(), path)
            })
            .collect();
        let binaries = binaries
            .iter()
            .map(|(name, path)| (name.clone(), path.display().to_string()))
            .collect();
        let network = network.map(|grant| GrantedNetwork {
            any_public: matches!(grant.hosts, HostGrant::AnyPublic),
            hosts: match &grant.hosts {
                HostGrant::AnyPublic => Vec::new(),
                HostGrant::Only(patterns) => patterns.iter().map(ToString::to_string).collect(),
            },
            private: grant.private.iter().map(ToString::to_string).collect(),
        });
        self.grants = Some(CallGrants {
            roots,
            binaries,
            network,
            secrets: Vec::new(),
        });
    }

    /// The call receives secrets named `names` (names only, never values).
    pub(crate) fn received_secrets(&mut self, names: impl Iterator<Item = String>) {
        if let Some(grants) = &mut self.grants {
            grants.secrets = names.collect();
        }
    }

    /// The span of the process or instance about to run the call; it ends
    /// when the returned guard drops.
    pub(crate) fn running(&self, transport: modhost_runner::Transport) -> ChildSpan {
        self.trace.child(transport)
    }
}

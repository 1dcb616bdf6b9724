//! Why a call cannot run confined as asked: shared by the preparation and
//! the landlock ruleset it builds.

/// Why a call cannot run confined as asked.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ConfineError {
    /// `confinement = "required"` and this machine cannot enforce every
    /// part of confinement the call implies.
    #[error("refused to run the module less than fully confined: {reason}")]
    Unconfined { reason: String, remedy: String },
    /// Building the ruleset failed (the kernel refused a rule).
    #[error("could not build the landlock ruleset: {message}")]
    Ruleset { message: String },
}

impl ConfineError {
    /// The machine-readable kind.
    #[cfg(test)]
    pub fn kind(&self) -> modproto::HostErrorKind {
        match self {
            ConfineError::Unconfined { .. } => modproto::HostErrorKind::Unconfined,
            ConfineError::Ruleset { .. } => modproto::HostErrorKind::SpawnFailed,
        }
    }

    /// What the operator can do about it.
    #[cfg(test)]
    pub fn remedy(&self) -> String {
        match self {
            ConfineError::Unconfined { remedy, .. } => remedy.clone(),
            ConfineError::Ruleset { .. } => {
                "check that the granted roots exist and are readable by the host; set confinement = \"off\" in config.toml to debug".into()
            }
        }
    }
}

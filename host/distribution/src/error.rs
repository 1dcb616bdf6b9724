//! Every way getting remote bytes can fail, in one type for callers that
//! do not care which step failed (each step's own error keeps its context).

/// A fetch or verification failed; nothing was kept.
#[derive(Debug, thiserror::Error)]
pub enum DistributionError {
    #[error(transparent)]
    Source(#[from] crate::source::SourceError),
    #[error(transparent)]
    Trust(#[from] crate::trust::TrustError),
    #[error(transparent)]
    Https(#[from] crate::https::HttpsError),
    #[error(transparent)]
    Oci(#[from] crate::oci::OciError),
    #[error(transparent)]
    Signature(#[from] crate::signature::SignatureError),
}

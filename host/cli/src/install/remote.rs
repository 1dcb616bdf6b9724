//! `modhost install https://…|oci://… [--sha256 HEX] [--signature FILE|URL]
//! [--allow-unsigned]`: fetch into the home's staging area
//! (`Host::fetch_source`: bounded, digested, signature policy), then the
//! same install as a local file, the provenance recorded with the pin.
//!
//! What was established is printed before the install's own line: the
//! source and sha256, for OCI the digest a tag resolved to, the signer.
//! Errors end with "nothing was installed": a failed fetch leaves the home
//! as it was (its staging folder is removed).

use std::path::Path;
use std::process::ExitCode;

use anyhow::anyhow;
use modhost::fetch_source::FetchRequest;
use modhost::{Host, InstallRequest};
use modhost_distribution::signature::SignatureKind;

use super::report::print_report;
use crate::download_progress::DownloadProgress;

/// Whether `path` names a remote source (`scheme://…`): every URL goes to
/// the fetch, which refuses plain http and unknown schemes with a reason.
pub fn is_remote(path: &Path) -> bool {
    path.to_str()
        .is_some_and(modhost_distribution::source::looks_like_url)
}

/// What the operator asked of a remote install.
#[derive(Debug)]
pub struct RemoteInstall {
    pub id: Option<String>,
    pub sha256: Option<String>,
    pub signature: Option<String>,
    pub allow_unsigned: bool,
    pub force: bool,
    pub upgrade: bool,
}

pub async fn run(host: &Host, source: &Path, args: &RemoteInstall) -> anyhow::Result<ExitCode> {
    let source = source.to_string_lossy().into_owned();
    let progress = DownloadProgress::for_stderr();
    let fetched = host
        .fetch_source(
            &FetchRequest {
                source: source.clone(),
                sha256: args.sha256.clone(),
                signature: args.signature.clone(),
                allow_unsigned: args.allow_unsigned,
            },
            &progress,
        )
        .await
        .map_err(|e| {
            let text = e.to_string();
            match text.contains("nothing was installed") {
                true => anyhow!(text),
                false => anyhow!("{text}; nothing was installed"),
            }
        })?;
    let provenance = &fetched.provenance;
    match (
        &provenance.origin.oci_digest,
        &provenance.origin.resolved_tag,
    ) {
        (Some(digest), Some(tag)) => outln!("resolved {source} (tag {tag}) to {digest}"),
        (Some(digest), None) => outln!("fetched {source} ({digest})"),
        _ => outln!("fetched {source} (sha256 {})", provenance.sha256),
    }
    match &provenance.signature {
        Some(verified) => outln!(
            "signed by {}{} ({}, covers {})",
            verified.signer,
            verified
                .issuer
                .as_deref()
                .map(|issuer| format!(" via {issuer}"))
                .unwrap_or_default(),
            match verified.kind {
                SignatureKind::Key => "key",
                SignatureKind::Keyless => "keyless",
            },
            verified.digest
        ),
        None if args.allow_unsigned => outln!("no signature verified (--allow-unsigned)"),
        None => {}
    }
    let report = host
        .install(InstallRequest {
            source: fetched.file.clone(),
            id: args.id.clone(),
            sha256: Some(provenance.sha256.clone()),
            force: args.force,
            upgrade: args.upgrade,
            provenance: Some(provenance.clone()),
        })
        .await?;
    print_report(&report);
    Ok(ExitCode::SUCCESS)
}

//! What an install did, printed: shared by local and remote installs.

/// What an install did: its findings on stderr, the module on stdout, a
/// warning when it is unpinned.
pub fn print_report(report: &modhost::InstallReport) {
    for finding in &report.findings {
        eprintln!("{finding}");
    }
    let module = &report.module;
    let version = module.version.as_deref().unwrap_or("-");
    match &report.replaced {
        Some(old) => outln!(
            "upgraded {} {} -> {version} at {}",
            module.id,
            old.version.as_deref().unwrap_or("-"),
            module.path.display()
        ),
        None => outln!(
            "installed {} {version} at {}",
            module.id,
            module.path.display()
        ),
    }
    if !report.pinned {
        eprintln!(
            "warning: {} is installed UNPINNED (--force past the errors above): it is not invocable until you fix it, or review it and run `modhost pin {}`",
            module.id, module.id
        );
    }
}

//! The exit codes every command uses, below every subcommand's file.

/// Exit code: the invoked capability failed.
pub(crate) const EXIT_FAILED: u8 = 1;
/// Exit code: usage or host error.
pub(crate) const EXIT_USAGE: u8 = 2;
/// Exit code: the host refused (the same code as a usage error: in either
/// case nothing ran).
pub(crate) const EXIT_REFUSED: u8 = EXIT_USAGE;
/// The exit codes, as `modhost --help` shows them.
pub(crate) const EXIT_CODES: &str = "Exit codes:
  0  success
  1  the capability ran and failed (invoke), or the module does not conform (conformance)
  2  refused or not done: usage error, host error, or any refusal (approval, a broken,
     disabled, refused, unpinned or changed module, invalid input, an install that
     would not work)";
